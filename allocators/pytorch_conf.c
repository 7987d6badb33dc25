/* vrambench — PyTorch's allocator settings into our strategies (see
 * pytorch_conf.h for the PyTorch source this follows, rule by rule).
 *
 * PyTorch runs two parsers over the same tokens: the device-independent
 * AcceleratorAllocatorConfig::parseArgs, which reads its own keys and skips
 * the rest (ConfigTokenizer::skipKey), then CUDAAllocatorConfig::parseArgs,
 * which reads the CUDA keys, skips the device-independent ones and refuses
 * anything else. Where both accept, each setting spans the same tokens in
 * both (a key, a separator, a value or a bracketed list), so one pass here,
 * each key read by the rules of the parser that owns it, accepts and
 * refuses what the two do. */
#include "pytorch_conf.h"

#include "base/closest.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB_PER_SIZE_MAX (UINT64_MAX / (1024 * 1024)) /* PyTorch caps the _mb sizes here */
#define LARGE_BUFFER_MB 20                             /* kLargeBuffer / 1 MiB */
#define MAX_REGISTER_THREADS 128                       /* pinned_max_register_threads() */

/* ConfigTokenizer's tokens: ',' ':' '[' ']' alone, words between them,
 * whitespace dropped. */
typedef struct tokens {
    char **word;
    size_t count;
    char *text;
} tokens;

static vb_status tokenize(const char *conf, tokens *out)
{
    size_t length = strlen(conf);
    out->count = 0;
    out->text = malloc(2 * length + 1);
    out->word = malloc((length + 1) * sizeof *out->word);
    if (!out->text || !out->word) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    char *at = out->text;
    int in_word = 0;
    for (const char *c = conf; *c; c++) {
        if (strchr(",:[]", *c)) {
            if (in_word) *at++ = '\0';
            in_word = 0;
            out->word[out->count++] = at;
            *at++ = *c;
            *at++ = '\0';
        } else if (!isspace((unsigned char)*c)) {
            if (!in_word) out->word[out->count++] = at;
            in_word = 1;
            *at++ = *c;
        }
    }
    if (in_word) *at = '\0';
    return VB_OK;
}

/* What the settings mean for us, as they are read. */
typedef struct reading {
    const tokens *t;
    vb_pytorch_conf *out;
    size_t used;            /* bytes of out->storage taken */
    int expandable, async;
    uint64_t divisions[VB_DIVISION_INTERVALS];
    int divisions_set;      /* times roundup_power2_divisions was given */
    const char *divisions_text; /* given once, in a form our option reads alike: `joined` */
    char joined[512];
} reading;

static int is_word(const tokens *t, size_t i, const char *word)
{
    return i < t->count && strcmp(t->word[i], word) == 0;
}

static int power_of_two(uint64_t value)
{
    return value && !(value & (value - 1));
}

static int all_digits(const char *text)
{
    if (!*text) return 0;
    for (; *text; text++)
        if (*text < '0' || *text > '9') return 0;
    return 1;
}

/* Token i, which must be there (ConfigTokenizer::checkIndex). */
static vb_status token(const reading *r, size_t i, const char *key, const char **out)
{
    *out = "";
    if (i >= r->t->count)
        return vb_error(VB_ERR_INVALID, "PyTorch allocator config: %s has no value (PyTorch refuses it)", key);
    *out = r->t->word[i];
    return VB_OK;
}

/* Token i as std::stoull reads it (toSizeT): a leading decimal number, the
 * rest ignored, a minus sign wrapping around. */
static vb_status to_size(const reading *r, size_t i, const char *key, uint64_t *out)
{
    const char *word;
    vb_status status = token(r, i, key, &word);
    if (status != VB_OK) return status;
    char *end = NULL;
    errno = 0;
    *out = strtoull(word, &end, 10);
    if (end == word || errno == ERANGE)
        return vb_error(VB_ERR_INVALID, "PyTorch allocator config: %s:%s (%s; PyTorch refuses it)", key, word,
                        end == word ? "not a number" : "out of range");
    return VB_OK;
}

/* Token i as std::stod reads it (toDouble). */
static vb_status to_double(const reading *r, size_t i, const char *key, double *out, const char **text)
{
    vb_status status = token(r, i, key, text);
    if (status != VB_OK) return status;
    char *end = NULL;
    errno = 0;
    *out = strtod(*text, &end);
    if (end == *text || errno == ERANGE)
        return vb_error(VB_ERR_INVALID, "PyTorch allocator config: %s:%s (%s; PyTorch refuses it)", key, *text,
                        end == *text ? "not a number" : "out of range");
    return VB_OK;
}

/* Token i as toBool reads it: True or False, exactly. */
static vb_status to_bool(const reading *r, size_t i, const char *key, int *out)
{
    const char *word;
    vb_status status = token(r, i, key, &word);
    if (status != VB_OK) return status;
    if (strcmp(word, "True") != 0 && strcmp(word, "False") != 0)
        return vb_error(VB_ERR_INVALID, "PyTorch allocator config: %s:%s (True or False, as written)", key, word);
    *out = word[0] == 'T';
    return VB_OK;
}

/* Sets our option `key` to `value` (replacing an earlier setting). */
static vb_status set_entry(reading *r, const char *key, const char *value)
{
    vb_pytorch_conf *out = r->out;
    size_t index = out->count;
    for (size_t i = 0; i < out->count; i++)
        if (strcmp(out->entries[i].key, key) == 0) index = i;
    size_t length = strlen(value) + 1;
    if (index == VB_PYTORCH_CONF_MAX_ENTRIES || r->used + length > sizeof out->storage)
        return vb_error(VB_ERR_INVALID, "PyTorch allocator config: %s:%s is too long", key, value);
    memcpy(out->storage + r->used, value, length);
    out->entries[index] = (vb_config_entry){key, out->storage + r->used};
    r->used += length;
    if (index == out->count) out->count++;
    return VB_OK;
}

/* Sets a whole number: the token when our option reads it alike, else the
 * number PyTorch read. */
static vb_status set_number(reading *r, const char *key, const char *word, uint64_t value)
{
    char text[24];
    if (!all_digits(word)) snprintf(text, sizeof text, "%llu", (unsigned long long)value);
    return set_entry(r, key, all_digits(word) ? word : text);
}

/* max_split_size_mb, max_non_split_rounding_mb (`key`: our option's name,
 * a literal, as entries keep it): at least kLargeBuffer's 20 MiB, larger
 * values capped at SIZE_MAX / 1 MiB. */
static vb_status read_mib(reading *r, size_t *i, const char *key)
{
    uint64_t value;
    vb_status status = to_size(r, *i + 2, key, &value);
    if (status != VB_OK) return status;
    if (value < LARGE_BUFFER_MB)
        return vb_error(VB_ERR_INVALID, "PyTorch allocator config: %s:%s (at least %d MiB)", key,
                        r->t->word[*i + 2], LARGE_BUFFER_MB);
    *i += 2;
    int capped = value > MiB_PER_SIZE_MAX;
    return set_number(r, key, capped ? "" : r->t->word[*i], capped ? MiB_PER_SIZE_MAX : value);
}

/* A real number in [0, 1] (`open`: in (0, 1)) for our option `option` (a literal). */
static vb_status read_fraction(reading *r, size_t *i, const char *key, const char *option, int open)
{
    double value;
    const char *word;
    vb_status status = to_double(r, *i + 2, key, &value, &word);
    if (status != VB_OK) return status;
    int inside = open ? value > 0.0 && value < 1.0 : value >= 0.0 && value <= 1.0;
    if (!inside)
        return vb_error(VB_ERR_INVALID, "PyTorch allocator config: %s:%s (in %s0.0, 1.0%s)", key, word,
                        open ? "(" : "[", open ? ")" : "]");
    *i += 2;
    char *end = NULL, text[32];
    strtod(word, &end);
    snprintf(text, sizeof text, "%.17g", value);
    return set_entry(r, option, *end == '\0' ? word : text);
}

/* roundup_power2_divisions (parseRoundUpPower2Divisions): one power of two
 * for every interval, or "[B:D,...,>:D]" setting the interval of boundary B
 * (MiB, a power of two; the first one also every interval below it) and
 * with ">" every interval after the last one set, each D 0 or a power of
 * two. Leaves *i at the value or at the closing ']'. */
static vb_status read_divisions(reading *r, size_t *i, const char *key)
{
    const tokens *t = r->t;
    size_t at = *i + 2;
    const char *word;
    vb_status status = token(r, at, key, &word);
    if (status != VB_OK) return status;
    int plain = 1; /* every number plain digits, every separator the one expected */
    if (strcmp(word, "[") != 0) {
        uint64_t value;
        if ((status = to_size(r, at, key, &value)) != VB_OK) return status;
        if (!power_of_two(value))
            return vb_error(VB_ERR_INVALID, "PyTorch allocator config: %s:%s (a power of two, or per interval as "
                            "[256:1,512:2,>:4])", key, word);
        for (size_t k = 0; k < VB_DIVISION_INTERVALS; k++) r->divisions[k] = value;
        plain = all_digits(word);
    } else {
        size_t last_index = 0;
        int first = 1;
        while (++at < t->count && !is_word(t, at, "]")) {
            size_t boundary_at = at;
            uint64_t value;
            plain &= is_word(t, at + 1, ":");
            if ((status = token(r, ++at, key, &word)) != VB_OK || (status = to_size(r, ++at, key, &value)) != VB_OK)
                return status;
            plain &= all_digits(t->word[at]);
            if (value != 0 && !power_of_two(value))
                return vb_error(VB_ERR_INVALID, "PyTorch allocator config: %s: divisions %s (0 or a power of two)",
                                key, t->word[at]);
            if (is_word(t, boundary_at, ">")) {
                for (size_t k = last_index + 1; k < VB_DIVISION_INTERVALS; k++) r->divisions[k] = value;
            } else {
                uint64_t boundary;
                if ((status = to_size(r, boundary_at, key, &boundary)) != VB_OK) return status;
                plain &= all_digits(t->word[boundary_at]);
                if (!power_of_two(boundary))
                    return vb_error(VB_ERR_INVALID,
                                    "PyTorch allocator config: %s: interval %s (a power of two, in MiB)", key,
                                    t->word[boundary_at]);
                size_t index = (size_t)(63 - __builtin_clzll(boundary));
                if (index >= VB_DIVISION_INTERVALS) index = VB_DIVISION_INTERVALS - 1;
                for (size_t k = 0; first && k < index; k++) r->divisions[k] = value;
                first = 0;
                r->divisions[index] = value;
                last_index = index;
            }
            if (at + 1 >= t->count) break; /* no closing ']' */
            if (!is_word(t, at + 1, "]")) plain &= is_word(t, ++at, ",");
        }
        if (at >= t->count || !is_word(t, at, "]"))
            return vb_error(VB_ERR_INVALID, "PyTorch allocator config: %s has no closing ']'", key);
    }
    /* A plain first setting reads alike in our option: handed on as written
     * (whitespace gone), the tokens joined. */
    size_t start = *i + 2, used = 0;
    *i = at;
    r->divisions_text = NULL;
    if (r->divisions_set++ || !plain) return VB_OK;
    for (size_t k = start; k <= at && used < sizeof r->joined; k++)
        used += (size_t)snprintf(r->joined + used, sizeof r->joined - used, "%s", t->word[k]);
    if (used < sizeof r->joined) r->divisions_text = r->joined;
    return VB_OK;
}

/* The divisions read, for our option: as the user wrote them when that
 * reads alike, else every interval spelled out ("[1:D0,2:D1,...]"). */
static vb_status set_divisions(reading *r)
{
    if (r->divisions_text) return set_entry(r, "roundup_power2_divisions", r->divisions_text);
    char text[VB_DIVISION_INTERVALS * 32];
    size_t used = 0;
    for (size_t k = 0; k < VB_DIVISION_INTERVALS; k++)
        used += (size_t)snprintf(text + used, sizeof text - used, "%s%llu:%llu", k ? "," : "[",
                                 (unsigned long long)1 << k, (unsigned long long)r->divisions[k]);
    snprintf(text + used, sizeof text - used, "]");
    return set_entry(r, "roundup_power2_divisions", text);
}

/* Every key read_setting reads (PyTorch's keys), for the "did you mean" of
 * an unrecognized one; the first SHAPING_KEY_COUNT are those that shape
 * device memory, listed when none is near (all of them would not fit one
 * message). NULL-terminated. */
#define SHAPING_KEY_COUNT 7
static const char *const known_keys[] = {
    "backend", "expandable_segments", "max_split_size_mb", "max_non_split_rounding_mb",
    "garbage_collection_threshold", "roundup_power2_divisions", "per_process_memory_fraction",
    "large_segment_size_mb", "release_lock_on_cudamalloc", "release_lock_on_hipmalloc",
    "pinned_use_cuda_host_register", "pinned_use_hip_host_register", "pinned_num_register_threads",
    "pinned_reserve_segment_size_mb", "pinned_use_background_threads", "graph_capture_record_stream_reuse",
    NULL};

/* One setting, by the rules of the parser that owns its key. */
static vb_status read_setting(reading *r, size_t *i)
{
    const char *key = r->t->word[*i];
    const char *word;
    int flag = 0; /* set by to_bool before use; gcc -O3 cannot tell (maybe-uninitialized) */
    uint64_t number;
    vb_status status;
    /* AcceleratorAllocatorConfig's keys (c10/core/AllocatorConfig.cpp). */
    if (!strcmp(key, "max_split_size_mb")) return read_mib(r, i, "max_split_size_mb");
    if (!strcmp(key, "max_non_split_rounding_mb")) return read_mib(r, i, "max_non_split_rounding_mb");
    if (!strcmp(key, "garbage_collection_threshold"))
        return read_fraction(r, i, key, "garbage_collection_threshold", 1);
    if (!strcmp(key, "roundup_power2_divisions")) return read_divisions(r, i, key);
    if (!strcmp(key, "expandable_segments") || !strcmp(key, "pinned_use_background_threads")) {
        if ((status = to_bool(r, *i + 2, key, &flag)) != VB_OK) return status;
        if (!strcmp(key, "expandable_segments")) r->expandable = flag;
        *i += 2;
        return VB_OK;
    }
    if (!strcmp(key, "large_segment_size_mb"))
        return vb_error(VB_ERR_INVALID, "PyTorch allocator config: known to PyTorch, not modelled here: %s", key);
    /* CUDAAllocatorConfig's keys (c10/cuda/CUDAAllocatorConfig.cpp); the
     * hip spellings are accepted by every build ("for ease of use"). */
    if (!strcmp(key, "backend")) {
        if ((status = token(r, *i + 2, key, &word)) != VB_OK) return status;
        if (strcmp(word, "native") != 0 && strcmp(word, "cudaMallocAsync") != 0)
            return vb_error(VB_ERR_INVALID, "PyTorch allocator config: backend:%s (native or cudaMallocAsync%s)", word,
                            strcmp(word, "hipMallocAsync") ? "" : "; hipMallocAsync is for ROCm builds");
        r->async = strcmp(word, "cudaMallocAsync") == 0;
        *i += 2;
        return VB_OK;
    }
    if (!strcmp(key, "release_lock_on_cudamalloc") || !strcmp(key, "release_lock_on_hipmalloc") ||
        !strcmp(key, "pinned_use_cuda_host_register") || !strcmp(key, "pinned_use_hip_host_register") ||
        !strcmp(key, "graph_capture_record_stream_reuse")) {
        if ((status = to_bool(r, *i + 2, key, &flag)) != VB_OK) return status;
        *i += 2;
        return VB_OK;
    }
    if (!strcmp(key, "pinned_num_register_threads") || !strcmp(key, "pinned_reserve_segment_size_mb")) {
        if ((status = to_size(r, *i + 2, key, &number)) != VB_OK) return status;
        int threads = key[7] == 'n';
        if (threads ? !power_of_two(number) || number > MAX_REGISTER_THREADS : number == 0)
            return vb_error(VB_ERR_INVALID, "PyTorch allocator config: %s:%s (%s)", key, r->t->word[*i + 2],
                            threads ? "a power of two up to 128" : "more than 0");
        *i += 2;
        return VB_OK;
    }
    if (!strcmp(key, "per_process_memory_fraction")) return read_fraction(r, i, key, "memory_fraction", 0);
    const char *nearest = vb_closest_name(key, known_keys);
    if (nearest)
        return vb_error(VB_ERR_INVALID, "PyTorch allocator config: unrecognized key '%s'; did you mean %s? (PyTorch "
                        "refuses it)", key, nearest);
    char keys[256];
    size_t used = 0;
    for (size_t k = 0; k < SHAPING_KEY_COUNT && used < sizeof keys; k++)
        used += (size_t)snprintf(keys + used, sizeof keys - used, "%s%s", k ? ", " : "", known_keys[k]);
    return vb_error(VB_ERR_INVALID, "PyTorch allocator config: unrecognized key '%s' (PyTorch refuses it; the keys "
                    "that shape device memory: %s)", key, keys);
}

vb_status vb_pytorch_conf_parse(const char *conf, vb_pytorch_conf *out)
{
    memset(out, 0, sizeof *out);
    tokens t = {NULL, 0, NULL};
    reading r = {.t = &t, .out = out};
    vb_status status = tokenize(conf, &t);
    for (size_t i = 0; status == VB_OK && i < t.count; i++) {
        status = read_setting(&r, &i);
        if (i + 1 < t.count) i++; /* the token after a setting: its ',' (not checked) */
    }
    if (status == VB_OK && r.divisions_set) status = set_divisions(&r);
    free(t.word);
    free(t.text);
    if (status != VB_OK) return status;
    /* backend:cudaMallocAsync ignores the native options (PyTorch warns),
     * but not set_per_process_memory_fraction, which its mallocAsync checks
     * (CUDAMallocAsyncAllocator.cpp): that one entry stays. */
    snprintf(out->allocator, sizeof out->allocator, "%s", r.async ? "async" : r.expandable ? "expandable" : "caching");
    if (r.async) {
        size_t kept = 0;
        for (size_t k = 0; k < out->count; k++)
            if (!strcmp(out->entries[k].key, "memory_fraction")) out->entries[kept++] = out->entries[k];
        out->count = kept;
    }
    return VB_OK;
}
