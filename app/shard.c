/* vrambench — shards of a run (see shard.h). */
#include "shard.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "input_file.h"
#include "json_report.h"

/* A whole number in [1, VB_SHARD_MAX] from `text` up to `end`; 0 when bad. */
static size_t whole(const char *text, const char *end)
{
    if (text == end || *text < '0' || *text > '9') return 0;
    char *stop = NULL;
    errno = 0;
    unsigned long long value = strtoull(text, &stop, 10);
    if (errno != 0 || stop != end || value < 1 || value > VB_SHARD_MAX) return 0;
    return (size_t)value;
}

int vb_shard_parse(const char *text, vb_shard *out)
{
    const char *slash = text;
    while (*slash && *slash != '/') slash++;
    if (*slash != '/') return -1;
    const char *end = slash + 1;
    while (*end) end++;
    size_t index = whole(text, slash), count = whole(slash + 1, end);
    if (!index || !count || index > count) return -1;
    *out = (vb_shard){index, count};
    return 0;
}

int vb_shard_has(vb_shard shard, size_t k)
{
    return shard.count <= 1 || k % shard.count == shard.index - 1;
}

size_t vb_shard_size(vb_shard shard, size_t total)
{
    if (shard.count <= 1) return total;
    return total / shard.count + (total % shard.count >= shard.index ? 1 : 0);
}

int vb_shard_describe(json_t *context, vb_shard shard, size_t total)
{
    if (shard.count <= 1) return 0;
    json_t *value = json_pack("{s:I,s:I,s:I}", "index", (json_int_t)shard.index, "count", (json_int_t)shard.count,
                              "cases", (json_int_t)total);
    return value && json_object_set_new(context, "shard", value) == 0 ? 0 : -1;
}

vb_status vb_shard_describe_input(json_t *context, vb_shard shard, const char *path)
{
    if (shard.count <= 1) return VB_OK;
    struct stat info;
    int fd = vb_input_open(path, &info);
    if (fd < 0) return vb_error(VB_ERR_IO, "%s: cannot read it again: %s", path, strerror(errno));
    /* FNV-1a, 64 bits: a fingerprint of the bytes, not a guard against
     * someone making two inputs collide on purpose. */
    uint64_t hash = 0xcbf29ce484222325ull, bytes = 0;
    static unsigned char chunk[64 * 1024];
    ssize_t got;
    while ((got = read(fd, chunk, sizeof chunk)) != 0) {
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            int error = errno;
            close(fd);
            return vb_error(VB_ERR_IO, "%s: cannot read it again: %s", path, strerror(error));
        }
        for (ssize_t i = 0; i < got; i++) hash = (hash ^ chunk[i]) * 0x100000001b3ull;
        bytes += (uint64_t)got;
    }
    close(fd);
    char text[17];
    snprintf(text, sizeof text, "%016llx", (unsigned long long)hash);
    json_t *value = json_pack("{s:I,s:s}", "bytes", (json_int_t)bytes, "fnv1a64", text);
    if (!value || json_object_set_new(context, "shard_input", value) != 0)
        return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    return VB_OK;
}

/* 1 if `option` is among `ignored` (ended by -1). */
static int is_ignored(int option, const int *ignored)
{
    for (; *ignored >= 0; ignored++)
        if (*ignored == option) return 1;
    return 0;
}

/* Appends to `words` each occurrence in argv of option `want` (its index in
 * usage->options) as "--name=value" ("--name" for a flag), or with `want`
 * VB_CLI_ARGUMENT each positional argument as given; 0 on success. */
static int append_words(json_t *words, const vb_cli_usage *usage, int argc, char **argv, int want)
{
    vb_cli_parser parser;
    vb_cli_parser_init(&parser, usage, argc, argv);
    const char *value;
    int failed = 0;
    /* VB_CLI_STOP cannot come: the command parsed this argv before. */
    for (int option; !failed && (option = vb_cli_next(&parser, &value)) != VB_CLI_END && option != VB_CLI_STOP;) {
        if (option != want) continue;
        const char *name = want == VB_CLI_ARGUMENT ? "" : usage->options[option].name;
        size_t length = strlen(name) + (value ? strlen(value) + 2 : 1);
        char *word = malloc(length);
        if (word) snprintf(word, length, "%s%s%s", name, value && *name ? "=" : "", value ? value : "");
        failed |= !word || json_array_append_new(words, vb_json_text(word)) != 0;
        free(word);
    }
    return failed;
}

int vb_shard_command(json_t *context, vb_shard shard, const vb_cli_usage *usage, int argc, char **argv,
                     const int *ignored)
{
    if (shard.count <= 1) return 0;
    json_t *words = json_array();
    int failed = !words || json_array_append_new(words, vb_json_text(argv[0])) != 0;
    /* The options in their table's order (repeats in the order given), so
     * that command lines that differ only in their options' order are one. */
    failed |= !failed && append_words(words, usage, argc, argv, VB_CLI_ARGUMENT);
    for (int option = 0; !failed && usage->options[option].name; option++)
        if (!is_ignored(option, ignored)) failed |= append_words(words, usage, argc, argv, option);
    if (!failed) return json_object_set_new(context, "shard_command", words) == 0 ? 0 : -1;
    json_decref(words);
    return -1;
}
