/* vrambench — PyTorch's allocator settings into our strategies (see
 * pytorch_conf.h). */
#include "pytorch_conf.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* PyTorch's ConfigTokenizer in a few lines: the text without spaces, read
 * left to right. */
typedef struct conf_reader {
    char text[1024];
    size_t at;
} conf_reader;

/* Reads a word (up to one of ",:[]" or the end) into `out`; its length. */
static size_t read_word(conf_reader *r, char *out, size_t capacity)
{
    size_t length = 0;
    while (r->text[r->at] && !strchr(",:[]", r->text[r->at])) {
        if (length + 1 < capacity) out[length++] = r->text[r->at];
        r->at++;
    }
    out[length] = '\0';
    return length;
}

/* A whole decimal number, as PyTorch's toSizeT wants one. */
static int whole_number(const char *text, unsigned long long *out)
{
    if (text[0] < '0' || text[0] > '9') return -1;
    char *end = NULL;
    errno = 0;
    *out = strtoull(text, &end, 10);
    return errno != 0 || *end != '\0' ? -1 : 0;
}

static int real_number(const char *text, double *out)
{
    char *end = NULL;
    errno = 0;
    *out = strtod(text, &end);
    return text[0] == '\0' || errno != 0 || *end != '\0' || !isfinite(*out) ? -1 : 0;
}

static int is_bool(const char *text, int *out)
{
    if (strcmp(text, "True") == 0 || strcmp(text, "true") == 0) *out = 1;
    else if (strcmp(text, "False") == 0 || strcmp(text, "false") == 0) *out = 0;
    else return -1;
    return 0;
}

static int power_of_two(unsigned long long value)
{
    return value && !(value & (value - 1));
}

/* Sets our option `key` to `value` (replacing an earlier setting). */
static vb_status set_entry(vb_pytorch_conf *out, size_t *used, const char *key, const char *value)
{
    size_t index = out->count;
    for (size_t i = 0; i < out->count; i++)
        if (strcmp(out->entries[i].key, key) == 0) index = i;
    size_t length = strlen(value) + 1;
    if (index == VB_PYTORCH_CONF_MAX_ENTRIES || *used + length > sizeof out->storage)
        return vb_error(VB_ERR_INVALID, "PyTorch allocator config is too long");
    memcpy(out->storage + *used, value, length);
    out->entries[index] = (vb_config_entry){key, out->storage + *used};
    *used += length;
    if (index == out->count) out->count++;
    return VB_OK;
}

/* The value after "KEY:", a word or a bracketed list (kept whole), into `value`. */
static vb_status read_value(conf_reader *r, const char *key, char *value, size_t capacity)
{
    if (r->text[r->at] != ':') return vb_error(VB_ERR_INVALID, "PyTorch allocator config: expected ':' after '%s'", key);
    r->at++;
    if (r->text[r->at] != '[') {
        if (read_word(r, value, capacity) == 0)
            return vb_error(VB_ERR_INVALID, "PyTorch allocator config: no value for '%s'", key);
        return VB_OK;
    }
    size_t start = r->at;
    while (r->text[r->at] && r->text[r->at] != ']') r->at++;
    if (r->text[r->at] != ']')
        return vb_error(VB_ERR_INVALID, "PyTorch allocator config: '%s' has no closing ']'", key);
    r->at++;
    snprintf(value, capacity, "%.*s", (int)(r->at - start), r->text + start);
    return VB_OK;
}

/* Checks one setting by PyTorch's rules and records what it means for us. */
static vb_status apply_setting(vb_pytorch_conf *out, size_t *used, int *expandable, int *async, const char *key,
                               const char *value)
{
    unsigned long long number;
    double real;
    int flag;
    if (strcmp(key, "max_split_size_mb") == 0 || strcmp(key, "max_non_split_rounding_mb") == 0) {
        if (whole_number(value, &number) != 0 || number < 20)
            return vb_error(VB_ERR_INVALID, "PyTorch allocator config: %s:%s (a whole number of MiB, >= 20)", key,
                            value);
        return set_entry(out, used, strcmp(key, "max_split_size_mb") == 0 ? "max_split_size_mb"
                                                                         : "max_non_split_rounding_mb", value);
    }
    if (strcmp(key, "garbage_collection_threshold") == 0) {
        if (real_number(value, &real) != 0 || !(real > 0.0 && real < 1.0))
            return vb_error(VB_ERR_INVALID, "PyTorch allocator config: garbage_collection_threshold:%s (in (0.0, 1.0))",
                            value);
        return set_entry(out, used, "garbage_collection_threshold", value);
    }
    if (strcmp(key, "roundup_power2_divisions") == 0) {
        /* The one-number form must be a power of two (0 is refused there). */
        if (value[0] != '[' && (whole_number(value, &number) != 0 || !power_of_two(number)))
            return vb_error(VB_ERR_INVALID,
                            "PyTorch allocator config: roundup_power2_divisions:%s (a power of two, or "
                            "[256:1,512:2,>:4])", value);
        return set_entry(out, used, "roundup_power2_divisions", value); /* the list: checked by the option */
    }
    if (strcmp(key, "per_process_memory_fraction") == 0) {
        if (real_number(value, &real) != 0 || real < 0.0 || real > 1.0)
            return vb_error(VB_ERR_INVALID, "PyTorch allocator config: per_process_memory_fraction:%s (in [0.0, 1.0])",
                            value);
        return set_entry(out, used, "memory_fraction", value);
    }
    if (strcmp(key, "expandable_segments") == 0 || strcmp(key, "release_lock_on_cudamalloc") == 0 ||
        strcmp(key, "pinned_use_cuda_host_register") == 0 || strcmp(key, "pinned_use_background_threads") == 0 ||
        strcmp(key, "graph_capture_record_stream_reuse") == 0) {
        if (is_bool(value, &flag) != 0)
            return vb_error(VB_ERR_INVALID, "PyTorch allocator config: %s:%s (True or False)", key, value);
        if (strcmp(key, "expandable_segments") == 0) *expandable = flag;
        return VB_OK;
    }
    if (strcmp(key, "pinned_num_register_threads") == 0 || strcmp(key, "pinned_reserve_segment_size_mb") == 0) {
        if (whole_number(value, &number) != 0 || number == 0 ||
            (strcmp(key, "pinned_num_register_threads") == 0 && (!power_of_two(number) || number > 128)))
            return vb_error(VB_ERR_INVALID, "PyTorch allocator config: %s:%s (a whole number%s)", key, value,
                            key[7] == 'n' ? ", a power of two up to 128" : " > 0");
        return VB_OK;
    }
    if (strcmp(key, "backend") == 0) {
        if (strcmp(value, "native") != 0 && strcmp(value, "cudaMallocAsync") != 0)
            return vb_error(VB_ERR_INVALID,
                            "PyTorch allocator config: backend:%s (options are native and cudaMallocAsync)", value);
        *async = strcmp(value, "cudaMallocAsync") == 0;
        return VB_OK;
    }
    return vb_error(VB_ERR_INVALID, "PyTorch allocator config: unrecognized key '%s' (PyTorch refuses it)", key);
}

vb_status vb_pytorch_conf_parse(const char *conf, vb_pytorch_conf *out)
{
    memset(out, 0, sizeof *out);
    conf_reader r = {.at = 0};
    size_t length = 0;
    for (const char *c = conf; *c; c++) {
        if (*c == ' ') continue;
        if (length + 1 >= sizeof r.text) return vb_error(VB_ERR_INVALID, "PyTorch allocator config is too long");
        r.text[length++] = *c;
    }
    size_t used = 0;
    int expandable = 0, async = 0;
    while (r.text[r.at]) {
        char key[64], value[256];
        if (read_word(&r, key, sizeof key) == 0)
            return vb_error(VB_ERR_INVALID, "PyTorch allocator config '%s': expected a key at '%s'", conf,
                            r.text + r.at);
        vb_status status = read_value(&r, key, value, sizeof value);
        if (status == VB_OK) status = apply_setting(out, &used, &expandable, &async, key, value);
        if (status != VB_OK) return status;
        if (r.text[r.at] == ',') r.at++; /* PyTorch accepts a trailing one */
        else if (r.text[r.at])
            return vb_error(VB_ERR_INVALID, "PyTorch allocator config '%s': expected ',' at '%s'", conf, r.text + r.at);
    }
    /* backend:cudaMallocAsync ignores the native options (PyTorch warns). */
    snprintf(out->allocator, sizeof out->allocator, "%s", async ? "async" : expandable ? "expandable" : "caching");
    if (async) out->count = 0;
    return VB_OK;
}
