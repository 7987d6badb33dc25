/* vrambench — what the subcommands share: error lines and name lists. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocators/allocator.h"
#include "scenarios/scenario.h"
#include "cli.h"

int vb_cli_error(int exit_status, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    fputs("vrambench: error: ", stderr);
    vfprintf(stderr, format, args);
    fputc('\n', stderr);
    va_end(args);
    return exit_status;
}

int vb_cli_status_error(vb_status status)
{
    const char *message = vb_last_error();
    return vb_cli_error(status == VB_ERR_INVALID ? VB_EXIT_USAGE : VB_EXIT_FAILURE, "%s",
                        message[0] ? message : vb_status_name(status));
}

const char *const *vb_cli_allocator_names(void)
{
    static const char *names[64];
    if (!names[0])
        for (size_t i = 0; vb_allocator_registry[i] && i + 1 < sizeof names / sizeof names[0]; i++)
            names[i] = vb_allocator_registry[i]->name;
    return names;
}

/* 1 if `name` is among `known`. */
static int is_known(const char *name, const char *const *known)
{
    for (size_t i = 0; known[i]; i++)
        if (strcmp(known[i], name) == 0) return 1;
    return 0;
}

/* Joins `known` into one comma-separated line. */
static void join(const char *const *known, char *out, size_t capacity)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; known[i] && used < capacity; i++)
        used += (size_t)snprintf(out + used, capacity - used, "%s%s", i ? ", " : "", known[i]);
}

int vb_cli_names(const char *spec, const char *what, const char *const *known, vb_name_list *out)
{
    size_t known_count = 0;
    while (known[known_count]) known_count++;
    memset(out, 0, sizeof *out);
    out->storage = strdup(spec);
    out->names = calloc(known_count + strlen(spec) + 1, sizeof *out->names);
    if (!out->storage || !out->names) {
        vb_name_list_free(out);
        return vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
    }
    if (strcmp(spec, "all") == 0) {
        for (size_t i = 0; i < known_count; i++) out->names[out->count++] = known[i];
        return VB_EXIT_OK;
    }
    for (char *save = NULL, *name = strtok_r(out->storage, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        if (!is_known(name, known)) {
            char names[1024];
            join(known, names, sizeof names);
            int status = vb_cli_error(VB_EXIT_USAGE, "unknown %s '%s' (known: %s, or all)", what, name, names);
            vb_name_list_free(out);
            return status;
        }
        out->names[out->count++] = name;
    }
    if (out->count == 0) {
        vb_name_list_free(out);
        return vb_cli_error(VB_EXIT_USAGE, "no %s named in '%s'", what, spec);
    }
    return VB_EXIT_OK;
}

void vb_name_list_free(vb_name_list *list)
{
    free(list->storage);
    free(list->names);
    memset(list, 0, sizeof *list);
}

/* Parses bytes: a whole number with an optional K/M/G/T suffix (powers of
 * 1024, "KiB"/"KB"/"K" alike); 0 on success. */
int vb_cli_parse_bytes(const char *text, uint64_t *out)
{
    if (text[0] < '0' || text[0] > '9') return -1;
    char *end = NULL;
    errno = 0;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno != 0) return -1;
    static const char units[] = "KMGT";
    unsigned shift = 0;
    if (*end) {
        const char *unit = strchr(units, *end);
        if (!unit || *unit == '\0') return -1;
        shift = 10 * (unsigned)(unit - units + 1);
        end++;
        if (strcmp(end, "iB") != 0 && strcmp(end, "B") != 0 && *end != '\0') return -1;
    }
    if (value == 0 || value > (UINT64_MAX >> shift)) return -1;
    *out = (uint64_t)value << shift;
    return 0;
}

int vb_cli_parse_capacity(const char *command, const char *option, const char *text, uint64_t minimum,
                          uint64_t *out)
{
    uint64_t bytes = 0;
    if (vb_cli_parse_bytes(text, &bytes) != 0 || bytes < minimum) {
        char least[48] = "";
        if (minimum > 1) snprintf(least, sizeof least, ", at least %llu MiB", (unsigned long long)(minimum / VB_MiB));
        return vb_cli_error(VB_EXIT_USAGE, "%s: bad %s '%s' (bytes%s, e.g. 85899345920 or 80GiB)", command, option,
                            text, least);
    }
    if (bytes > VB_SIM_MAX_CAPACITY)
        return vb_cli_error(VB_EXIT_USAGE,
                            "%s: %s %s is more than the simulated device can have (at most " VB_SIM_MAX_CAPACITY_TEXT
                            " = %llu bytes)",
                            command, option, text, (unsigned long long)VB_SIM_MAX_CAPACITY);
    *out = bytes;
    return 0;
}

int vb_cli_param_refused(const char *command, const char *name)
{
    char takers[512] = "";
    size_t used = 0;
    for (size_t i = 0; vb_scenario_registry[i] && used < sizeof takers; i++)
        if (vb_scenario_registry[i]->parameter)
            used += (size_t)snprintf(takers + used, sizeof takers - used, "%s%s: %s", used ? "; " : "",
                                     vb_scenario_registry[i]->name, vb_scenario_registry[i]->parameter);
    return vb_cli_error(VB_EXIT_USAGE, "%s: scenario %s takes no --param (%s)", command, name,
                        used ? takers : "no scenario takes one");
}
