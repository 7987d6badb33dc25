/* vrambench — results files read back (see results_file.h). */
#include "results_file.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/closest.h"
#include "json_input.h"
#include "text.h"

/* The most a file may hold once decompressed (docs/results-json.md, "Readers"). */
#define MAX_FILE_BYTES VB_JSON_INPUT_MAX_BYTES

/* 2^64: every figure of a results file is below it (a byte count at most 2^64-1). */
#define TWO_TO_THE_64 18446744073709551616.0

const char *vb_results_kind_name(vb_results_kind kind)
{
    switch (kind) {
    case VB_RESULTS_EMPTY: return "empty";
    case VB_RESULTS_RUN: return "run";
    case VB_RESULTS_REPLAY: return "replay";
    case VB_RESULTS_TUNE: return "tune";
    case VB_RESULTS_MICROBENCH: return "microbench";
    case VB_RESULTS_CLAIMS: return "claims";
    }
    return "?";
}

const char *vb_results_base_name(const vb_results_file *file)
{
    const char *slash = strrchr(file->path, '/');
    return slash ? slash + 1 : file->path;
}

/* 1 if `text` starts with `prefix`. */
static int starts_with(const char *text, const char *prefix)
{
    return strncmp(text, prefix, strlen(prefix)) == 0;
}

static int is_iteration(const json_t *entry)
{
    const char *type = json_string_value(json_object_get(entry, "run_type"));
    return !type || strcmp(type, "iteration") == 0;
}

/* 1 when `text` (NULL: absent) holds a control character: the names a
 * file gives are printed as they are (compare's table), so none may move
 * the terminal's cursor or start an escape sequence. */
static int has_control(const char *text)
{
    return text && !vb_text_valid(text, strlen(text), 0);
}

/* The kind an iteration entry belongs to; -1 for one no vrambench command writes. */
static int entry_kind(const json_t *entry, const char *name)
{
    const char *scenario = json_string_value(json_object_get(entry, "scenario"));
    if (starts_with(name, "microbench/")) return VB_RESULTS_MICROBENCH;
    if (json_object_get(entry, "workload")) return -1; /* lab/harnesses/torch_ab.py */
    if (starts_with(scenario ? scenario : name, "tune:")) return VB_RESULTS_TUNE;
    if (starts_with(scenario ? scenario : name, "replay:")) return VB_RESULTS_REPLAY;
    return VB_RESULTS_RUN;
}

/* A copy of "PREFIX" then "REST" in malloc'd memory (NULL: out of memory). */
static char *joined(const char *prefix, const char *rest)
{
    size_t a = strlen(prefix), b = strlen(rest);
    char *text = malloc(a + b + 1);
    if (!text) return NULL;
    memcpy(text, prefix, a);
    memcpy(text + a, rest, b + 1);
    return text;
}

/* Fills case `c`'s group and allocator for an entry `name`; -1 when host
 * memory runs out. The names are kept whole, however long. */
static int split_case(vb_results_case *c, const json_t *entry, const char *name, vb_results_kind kind)
{
    const char *scenario = json_string_value(json_object_get(entry, "scenario"));
    const char *allocator = json_string_value(json_object_get(entry, "allocator"));
    c->storage = NULL;
    if (kind == VB_RESULTS_MICROBENCH && allocator) {
        /* microbench/ALLOCATOR/BYTES[/threads:N] -> microbench/BYTES[...] */
        size_t prefix = strlen("microbench/"), length = strlen(allocator);
        const char *rest = strncmp(name + prefix, allocator, length) == 0 && name[prefix + length] == '/'
                               ? name + prefix + length : "";
        if (!(c->storage = joined("microbench", rest))) return -1;
        c->group = c->storage;
        c->allocator = allocator;
        return 0;
    }
    if (scenario && allocator) {
        c->group = scenario;
        c->allocator = allocator;
        return 0;
    }
    if (!(c->storage = joined(name, ""))) return -1;
    char *slash = strchr(c->storage, '/');
    if (slash) *slash = '\0';
    c->group = c->storage;
    c->allocator = slash ? slash + 1 : "";
    return 0;
}

/* The index key of a case: the group's length, the group and the
 * allocator, so that no two cases share one (malloc'd; NULL: out of memory). */
static char *case_key(const char *group, const char *allocator)
{
    size_t length = strlen(group) + strlen(allocator) + 32;
    char *key = malloc(length);
    if (key) snprintf(key, length, "%zu:%s%s", strlen(group), group, allocator);
    return key;
}

/* The place in file->cases of the case of `group` and `allocator`, or -1. */
static long long case_place(const vb_results_file *file, const char *group, const char *allocator)
{
    char *key = file->index ? case_key(group, allocator) : NULL;
    json_t *place = key ? json_object_get(file->index, key) : NULL;
    free(key);
    return place ? (long long)json_integer_value(place) : -1;
}

/* Records case `place` of `file` in its index; -1 when host memory runs out. */
static int index_case(vb_results_file *file, size_t place)
{
    char *key = case_key(file->cases[place].group, file->cases[place].allocator);
    int failed = !key || json_object_set_new_nocheck(file->index, key, json_integer((json_int_t)place)) != 0;
    free(key);
    return failed ? -1 : 0;
}

const vb_results_case *vb_results_find(const vb_results_file *file, const char *group, const char *allocator)
{
    long long place = case_place(file, group, allocator);
    return place < 0 ? NULL : &file->cases[place];
}

/* ns per unit of a Google Benchmark time_unit; 0 when unknown. */
static double unit_ns(const char *unit)
{
    if (!unit || strcmp(unit, "ns") == 0) return 1.0;
    if (strcmp(unit, "us") == 0) return 1e3;
    if (strcmp(unit, "ms") == 0) return 1e6;
    if (strcmp(unit, "s") == 0) return 1e9;
    return 0;
}

/* What a field of an iteration entry may hold, by its name (docs/results-json.md,
 * "Readers"; python/vrambench/results.py, field_kind, reads the same rule). */
typedef enum field_kind {
    FIELD_TEXT,    /* a name: a string (checked where it is read) */
    FIELD_WHOLE,   /* a byte count or a count: a whole number from 0 to 2^64-1, or null */
    FIELD_NUMBER,  /* a time or a ratio: a number from 0 to 2^64, or null */
    FIELD_OTHER,   /* anything but a string; a number from 0 to 2^64 */
} field_kind;

/* 1 when `word` is one of the '_'-separated words of `key`. */
static int has_word(const char *key, const char *word)
{
    size_t length = strlen(word);
    for (const char *at = key; (at = strstr(at, word)) != NULL; at += length)
        if ((at == key || at[-1] == '_') && (at[length] == '\0' || at[length] == '_')) return 1;
    return 0;
}

/* The kind of field `key` of an iteration entry (see field_kind). */
static field_kind field_kind_of(const char *key)
{
    static const char *const text[] = {"name", "run_name", "run_type", "time_unit", "scenario", "allocator",
                                       "label", "aggregate_name", "aggregate_unit", "error_message",
                                       "pytorch_alloc_conf", "reserved_bytes_source", NULL};
    static const char *const whole_words[] = {"bytes", "ooms", "calls", "retries", "events", NULL};
    static const char *const whole[] = {"iterations", "repetitions", "repetition_index", "threads", "family_index",
                                        "per_family_instance_index", "first_oom_line", "live_at_end",
                                        "recorded_failures", NULL};
    static const char *const number_words[] = {"time", "ns", "ms", "ratio", "frag", "per", "utilization", NULL};
    if (vb_name_known(key, text)) return FIELD_TEXT;
    if (vb_name_known(key, whole)) return FIELD_WHOLE;
    for (size_t i = 0; whole_words[i]; i++)
        if (has_word(key, whole_words[i])) return FIELD_WHOLE;
    for (size_t i = 0; number_words[i]; i++)
        if (has_word(key, number_words[i])) return FIELD_NUMBER;
    return FIELD_OTHER;
}

/* Checks every field of iteration entry `index` (named `name`) against its
 * kind (field_kind_of): one line naming the file, the entry and the field. */
static vb_status check_fields(const char *path, size_t index, const char *name, json_t *entry)
{
    const char *key;
    json_t *value;
    json_object_foreach(entry, key, value) {
        field_kind kind = field_kind_of(key);
        if (kind == FIELD_TEXT || json_is_null(value) || strcmp(key, "timeline") == 0) continue; /* check_timeline */
        const char *what = kind != FIELD_WHOLE ? "" : has_word(key, "bytes") ? " (a byte count)" : " (a count)";
        if (json_is_string(value) || (kind != FIELD_OTHER && !json_is_number(value)))
            return vb_error(VB_ERR_INVALID, "%s: benchmarks[%zu] (%s): '%.60s' is %s, not a number%s", path, index,
                            name, key, json_is_string(value) ? "a string" : json_is_boolean(value) ? "true or false"
                            : json_is_array(value) ? "a list" : "an object", what);
        if (!json_is_number(value)) continue;
        double number = json_number_value(value);
        if (number < 0 || number > TWO_TO_THE_64)
            return vb_error(VB_ERR_INVALID, "%s: benchmarks[%zu] (%s): '%.60s' is not a number from 0 to below 2^64%s",
                            path, index, name, key, number < 0 ? " (it is negative)" : "");
        if (kind == FIELD_WHOLE && (number != floor(number) || number == TWO_TO_THE_64))
            return vb_error(VB_ERR_INVALID, "%s: benchmarks[%zu] (%s): '%.60s' is %g, not a whole number%s", path,
                            index, name, key, number, what);
    }
    return VB_OK;
}

/* 1 when `value` is a number from 0 to below 2^64, as results.py's
 * in_range takes a timeline's byte counts (a fraction passes both). */
static int is_byte_count(const json_t *value)
{
    if (!json_is_number(value)) return 0;
    double number = json_number_value(value);
    return number >= 0 && number < TWO_TO_THE_64;
}

/* An entry's timeline as python/vrambench/results.py's check_timeline
 * takes it (one rule for every reader, docs/results-json.md "Readers"): a
 * list of objects, each a 'step' string, 'requested' and 'reserved' byte
 * counts, 'allocated' and 'driver_used' byte counts or null. */
static vb_status check_timeline(const char *path, size_t index, const char *name, const json_t *timeline)
{
    if (!json_is_array(timeline))
        return vb_error(VB_ERR_INVALID, "%s: benchmarks[%zu] (%s): 'timeline' is not a list", path, index, name);
    size_t i;
    const json_t *point;
    json_array_foreach(timeline, i, point) {
        const json_t *step = json_object_get(point, "step");
        if (!json_is_object(point) || !step)
            return vb_error(VB_ERR_INVALID, "%s: benchmarks[%zu] (%s): timeline[%zu] is not an object with a 'step'",
                            path, index, name, i);
        if (!json_is_string(step) || has_control(json_string_value(step)))
            return vb_error(VB_ERR_INVALID, "%s: benchmarks[%zu] (%s): timeline[%zu]: 'step' is not a string%s", path,
                            index, name, i, json_is_string(step) ? " without control characters" : "");
        static const char *const needed[] = {"requested", "reserved"}, *const optional[] = {"allocated", "driver_used"};
        for (size_t k = 0; k < 2; k++) {
            if (!is_byte_count(json_object_get(point, needed[k])))
                return vb_error(VB_ERR_INVALID, "%s: benchmarks[%zu] (%s): timeline[%zu] has no '%s' byte count (a "
                                                "number from 0 to 2^64-1)", path, index, name, i, needed[k]);
            const json_t *value = json_object_get(point, optional[k]);
            if (value && !json_is_null(value) && !is_byte_count(value))
                return vb_error(VB_ERR_INVALID, "%s: benchmarks[%zu] (%s): timeline[%zu] '%s' is not a byte count", path,
                                index, name, i, optional[k]);
        }
    }
    return VB_OK;
}

/* The top-level "names" as results.py's check_names takes it: an object
 * of scenario tables, each with 'steps' an object of strings and
 * 'counters' a list of strings where given. */
static vb_status check_names(const char *path, const json_t *names)
{
    if (!names) return VB_OK;
    if (!json_is_object(names)) return vb_error(VB_ERR_INVALID, "%s: 'names' is not an object", path);
    const char *scenario;
    const json_t *table;
    json_object_foreach((json_t *)names, scenario, table) {
        const json_t *steps = json_object_get(table, "steps"), *counters = json_object_get(table, "counters");
        if (!json_is_object(table))
            return vb_error(VB_ERR_INVALID, "%s: names['%.60s'] is not an object", path, scenario);
        if ((steps && !json_is_object(steps)) || (counters && !json_is_array(counters)))
            return vb_error(VB_ERR_INVALID, "%s: names['%.60s'] needs 'steps' as an object and 'counters' as a list",
                            path, scenario);
        const char *key;
        const json_t *text;
        json_object_foreach((json_t *)steps, key, text) {
            if (!json_is_string(text))
                return vb_error(VB_ERR_INVALID, "%s: names['%.60s']: step '%.60s' is not a string", path, scenario, key);
        }
        size_t i;
        json_array_foreach(counters, i, text) {
            if (!json_is_string(text))
                return vb_error(VB_ERR_INVALID, "%s: names['%.60s']: counters[%zu] is not a string", path, scenario, i);
        }
    }
    return VB_OK;
}

/* The cases of a "benchmarks" file. */
static vb_status read_benchmarks(vb_results_file *file, json_t *benchmarks)
{
    const char *path = file->path;
    vb_status named = check_names(path, json_object_get(file->root, "names"));
    if (named != VB_OK) return named;
    file->kind = json_object_get(file->root, "recommendation") ? VB_RESULTS_TUNE : VB_RESULTS_EMPTY;
    file->cases = calloc(json_array_size(benchmarks) + 1, sizeof *file->cases);
    if (!file->cases) return vb_error(VB_ERR_HOST_OOM, "out of host memory reading %s", path);
    size_t i;
    json_t *entry;
    json_array_foreach(benchmarks, i, entry) {
        const char *name = json_string_value(json_object_get(entry, "name"));
        if (!json_is_object(entry) || !name)
            return vb_error(VB_ERR_INVALID, "%s: benchmarks[%zu] is not an entry with a name", path, i);
        if (!is_iteration(entry)) continue;
        if (has_control(name) || has_control(json_string_value(json_object_get(entry, "scenario"))) ||
            has_control(json_string_value(json_object_get(entry, "allocator"))))
            return vb_error(VB_ERR_INVALID, "%s: entry '%s': its name, scenario or allocator holds a control character",
                            path, name);
        int kind = entry_kind(entry, name);
        if (kind < 0)
            return vb_error(VB_ERR_INVALID, "%s: entry '%s' is not one vrambench writes (run, replay, tune, "
                                            "microbench, claims)", path, name);
        if (file->kind == VB_RESULTS_EMPTY || (file->kind == VB_RESULTS_TUNE && i == 0)) file->kind = kind;
        else if ((int)file->kind != kind)
            return vb_error(VB_ERR_INVALID, "%s: entry '%s' is a %s entry in a %s file", path, name,
                            vb_results_kind_name(kind), vb_results_kind_name(file->kind));
        vb_status checked = check_fields(path, i, name, entry);
        if (checked == VB_OK && json_object_get(entry, "timeline"))
            checked = check_timeline(path, i, name, json_object_get(entry, "timeline"));
        if (checked != VB_OK) return checked;
        /* A scenario and allocator, where either is given, are both text
         * (results.py names the case by them, not by its name). */
        json_t *scenario = json_object_get(entry, "scenario"), *allocator = json_object_get(entry, "allocator");
        if (kind != VB_RESULTS_MICROBENCH && (scenario || allocator) && (!json_is_string(scenario) || !json_is_string(allocator)))
            return vb_error(VB_ERR_INVALID, "%s: benchmarks[%zu] (%s): '%s' is not a string", path, i, name,
                            json_is_string(scenario) ? "allocator" : "scenario");
        json_t *real_time = json_object_get(entry, "real_time");
        double scale = unit_ns(json_string_value(json_object_get(entry, "time_unit")));
        if (scale == 0) return vb_error(VB_ERR_INVALID, "%s: entry '%s': unknown time_unit", path, name);
        /* A new case in the next slot, unless one of its group and allocator is there (repetitions). */
        vb_results_case *c = &file->cases[file->case_count];
        memset(c, 0, sizeof *c);
        if (split_case(c, entry, name, file->kind) != 0)
            return vb_error(VB_ERR_HOST_OOM, "out of host memory reading %s", path);
        long long seen = case_place(file, c->group, c->allocator);
        if (seen >= 0) {
            free(c->storage);
            c->storage = NULL;
            c = &file->cases[seen];
        } else {
            c->name = name;
            c->entry = entry;
            if (index_case(file, file->case_count++) != 0)
                return vb_error(VB_ERR_HOST_OOM, "out of host memory reading %s", path);
        }
        if (json_is_number(real_time)) {
            c->time_sum_ns += json_number_value(real_time) * scale;
            c->time_count++;
        }
    }
    return VB_OK;
}

/* The identity of a benchmarks entry, as a key no other identity shares:
 * its name, its run_type ("iteration" when absent) and aggregate_name, and
 * its repetition_index (0 when absent, as merge reads it). Two entries of
 * one identity are one case measured twice (malloc'd; NULL: out of memory). */
static char *entry_identity(const json_t *entry)
{
    const char *name = json_string_value(json_object_get(entry, "name"));
    const char *type = json_string_value(json_object_get(entry, "run_type"));
    const char *aggregate = json_string_value(json_object_get(entry, "aggregate_name"));
    if (!type) type = "iteration";
    if (!aggregate) aggregate = "";
    long long repetition = (long long)json_integer_value(json_object_get(entry, "repetition_index"));
    size_t length = strlen(name) + strlen(type) + strlen(aggregate) + 96;
    char *key = malloc(length);
    if (key)
        snprintf(key, length, "%zu:%s%zu:%s%zu:%s%lld", strlen(name), name, strlen(type), type, strlen(aggregate),
                 aggregate, repetition);
    return key;
}

vb_status vb_results_check_unique(const char *path, json_t *benchmarks)
{
    json_t *seen = json_object();
    vb_status status = seen ? VB_OK : vb_error(VB_ERR_HOST_OOM, "out of host memory reading %s", path);
    size_t i;
    json_t *entry;
    json_array_foreach(benchmarks, i, entry) {
        if (status != VB_OK) break;
        const char *name = json_string_value(json_object_get(entry, "name"));
        if (!json_is_object(entry) || !name) continue; /* the reader names what is wrong with it */
        char *key = entry_identity(entry);
        json_t *first = key ? json_object_get(seen, key) : NULL;
        if (!key || (!first && json_object_set_new_nocheck(seen, key, json_integer((json_int_t)i)) != 0)) {
            status = vb_error(VB_ERR_HOST_OOM, "out of host memory reading %s", path);
        } else if (first) {
            const char *aggregate = json_string_value(json_object_get(entry, "aggregate_name"));
            char which[160];
            if (aggregate && !has_control(aggregate))
                snprintf(which, sizeof which, "aggregate '%.100s'", aggregate);
            else
                snprintf(which, sizeof which, "repetition %lld",
                         (long long)json_integer_value(json_object_get(entry, "repetition_index")));
            status = vb_error(VB_ERR_INVALID, "%s: benchmarks[%zu] and benchmarks[%lld] are the same case, '%.200s' "
                                              "(%s): a results file holds each case once", path,
                              (size_t)json_integer_value(first), (long long)i, has_control(name) ? "?" : name, which);
        }
        free(key);
    }
    json_decref(seen);
    return status;
}

/* The cases of a claims file. */
static vb_status read_claims(vb_results_file *file, json_t *claims)
{
    file->kind = VB_RESULTS_CLAIMS;
    file->cases = calloc(json_array_size(claims) + 1, sizeof *file->cases);
    if (!file->cases) return vb_error(VB_ERR_HOST_OOM, "out of host memory reading %s", file->path);
    size_t i;
    json_t *claim;
    json_array_foreach(claims, i, claim) {
        const char *id = json_string_value(json_object_get(claim, "id"));
        const char *allocator = json_string_value(json_object_get(claim, "allocator"));
        if (!id || !allocator || !json_is_string(json_object_get(claim, "verdict")))
            return vb_error(VB_ERR_INVALID, "%s: claims[%zu] has no id, allocator or verdict", file->path, i);
        if (has_control(id) || has_control(allocator) || has_control(json_string_value(json_object_get(claim, "verdict"))))
            return vb_error(VB_ERR_INVALID, "%s: claims[%zu]: its id, allocator or verdict holds a control character",
                            file->path, i);
        if (vb_results_find(file, id, allocator))
            return vb_error(VB_ERR_INVALID, "%s: claim %s/%s comes twice", file->path, id, allocator);
        vb_results_case *c = &file->cases[file->case_count];
        c->group = id;
        c->allocator = allocator;
        c->entry = claim;
        size_t length = strlen(id) + strlen(allocator) + 2;
        if (!(c->storage = malloc(length)) || index_case(file, file->case_count++) != 0)
            return vb_error(VB_ERR_HOST_OOM, "out of host memory reading %s", file->path);
        snprintf(c->storage, length, "%s/%s", id, allocator);
        c->name = c->storage;
    }
    return VB_OK;
}

vb_status vb_results_check_context(const char *path, json_t *context)
{
    json_t *device = json_object_get(context, "device_name");
    json_t *simulated = json_object_get(context, "simulated");
    if ((device && !json_is_string(device)) || (simulated && !json_is_boolean(simulated)))
        return vb_error(VB_ERR_INVALID, "%s: context's device_name or simulated has the wrong type", path);
    if (has_control(json_string_value(device)))
        return vb_error(VB_ERR_INVALID, "%s: context's device_name holds a control character", path);
    return VB_OK;
}

static vb_status load(const char *path, vb_results_file *out)
{
    if (snprintf(out->path, sizeof out->path, "%s", path) >= (int)sizeof out->path)
        return vb_error(VB_ERR_INVALID, "file name too long: %.64s...", path);
    char *bytes = NULL;
    size_t length = 0;
    int regular;
    vb_status status = vb_json_input_read(path, MAX_FILE_BYTES, &bytes, &length, &regular);
    if (status != VB_OK) return status;
    json_error_t error;
    out->root = json_loadb(bytes, length, JSON_REJECT_DUPLICATES, &error);
    free(bytes);
    if (!out->root)
        return vb_error(VB_ERR_INVALID, "%s: not JSON (line %d, column %d: %s)", path, error.line, error.column,
                        error.text);
    out->context = json_object_get(out->root, "context");
    json_t *benchmarks = json_object_get(out->root, "benchmarks"), *claims = json_object_get(out->root, "claims");
    if (!json_is_object(out->root) || !json_is_object(out->context) ||
        (!json_is_array(benchmarks) && !json_is_array(claims)))
        return vb_error(VB_ERR_INVALID, "%s: not a vrambench results file (no context, or neither benchmarks nor "
                                        "claims)", path);
    vb_status checked = vb_results_check_context(path, out->context);
    if (checked != VB_OK) return checked;
    out->device_name = json_string_value(json_object_get(out->context, "device_name")) ?: "?";
    out->simulated = json_is_true(json_object_get(out->context, "simulated"));
    if (!(out->index = json_object()))
        return vb_error(VB_ERR_HOST_OOM, "out of host memory reading %s", path);
    if (json_is_array(claims)) return read_claims(out, claims);
    vb_status read = read_benchmarks(out, benchmarks);
    return read == VB_OK ? vb_results_check_unique(path, benchmarks) : read;
}

vb_status vb_results_load(const char *path, vb_results_file *out)
{
    memset(out, 0, sizeof *out);
    vb_status status = load(path, out);
    if (status != VB_OK) vb_results_free(out); /* what was read before the error (the caller frees only files loaded) */
    return status;
}

void vb_results_free(vb_results_file *file)
{
    json_decref(file->root);
    json_decref(file->index);
    for (size_t i = 0; file->cases && i <= file->case_count; i++) free(file->cases[i].storage);
    free(file->cases);
    memset(file, 0, sizeof *file);
}
