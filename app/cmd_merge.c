/* vrambench — `vrambench merge FILE... -o OUT.json`: the shards of one run,
 * replay or tune (--shard I/N, app/shard.h), or runs of one device made on
 * several machines, joined into one results file.
 *
 * Shards must all be there, once each, of one command line on one device
 * (the same shard and case counts, shard_command and context but for the
 * per_shard_fields, below); their entries are put back in the order one run
 * writes them (family_index, per_family_instance_index), so sharded then
 * merged equals one run, case for case. Files that are not shards are
 * joined in the order given. Either way a case found in two files is
 * refused, as are files of different kinds, devices or vrambench commits: a
 * results file holds one device (`vrambench compare` sets devices side by
 * side). A merged tune gets its Pareto front and recommendation here. The
 * context is the first file's, without "shard" and "shard_command", with
 * "merged_from" naming each file, its shard, host and date. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/closest.h"
#include "cli.h"
#include "json_report.h"
#include "results_file.h"
#include "shard.h"
#include "tune.h"

#define MERGE_USAGE                                                                                           \
    "usage: vrambench merge FILE... -o OUT.json [--quiet]\n"                                               \
    "  FILE: results of run, replay or tune (.json or .json.gz), e.g. the shards of\n"                      \
    "        vrambench run --shard I/N --out out/shard-I.json\n"                                            \
    "  -o, --out OUT.json: the merged file, e.g. -o out/results/merged.json (written whole or not at all;\n" \
    "        gzip'd when OUT ends in .gz)\n"                                                                \
    "  --quiet: no closing line on stderr\n"                                                                \
    "  e.g. vrambench merge out/shard-*.json -o out/results/bench.json\n"

typedef struct sortable {
    json_t *entry;
    json_int_t family, instance;
    size_t order;
} sortable;

static int by_position(const void *left, const void *right)
{
    const sortable *a = left, *b = right;
    if (a->family != b->family) return a->family < b->family ? -1 : 1;
    if (a->instance != b->instance) return a->instance < b->instance ? -1 : 1;
    return a->order < b->order ? -1 : a->order > b->order;
}

static json_int_t integer_or(const json_t *object, const char *key, json_int_t otherwise)
{
    json_t *value = json_object_get(object, key);
    return json_is_integer(value) ? json_integer_value(value) : otherwise;
}

/* Exit 2 unless the files can be joined: kinds, devices, commits. */
static int check_compatible(const vb_results_file *files, size_t count, vb_results_kind *kind)
{
    *kind = VB_RESULTS_EMPTY;
    const vb_results_file *first = &files[0];
    const char *commit = json_string_value(json_object_get(first->context, "git_commit"));
    for (size_t i = 0; i < count; i++) {
        const vb_results_file *f = &files[i];
        if (f->kind == VB_RESULTS_CLAIMS || f->kind == VB_RESULTS_MICROBENCH)
            return vb_cli_error(VB_EXIT_USAGE, "merge: %s is a %s file; merge joins run, replay and tune files", f->path,
                                vb_results_kind_name(f->kind));
        if (f->kind != VB_RESULTS_EMPTY) {
            if (*kind != VB_RESULTS_EMPTY && *kind != f->kind)
                return vb_cli_error(VB_EXIT_USAGE, "merge: %s is a %s file and %s a %s file: merge files of one kind",
                                    files[0].path, vb_results_kind_name(*kind), f->path, vb_results_kind_name(f->kind));
            *kind = f->kind;
        }
        if (f->simulated != first->simulated || strcmp(f->device_name, first->device_name) != 0)
            return vb_cli_error(VB_EXIT_USAGE, "merge: %s is from '%s'%s and %s from '%s'%s: one results file holds one "
                                               "device (set them side by side with vrambench compare)", first->path,
                                first->device_name, first->simulated ? " (simulated)" : "", f->path, f->device_name,
                                f->simulated ? " (simulated)" : "");
        const char *other = json_string_value(json_object_get(f->context, "git_commit"));
        if (commit && other && strcmp(commit, other) != 0)
            return vb_cli_error(VB_EXIT_USAGE, "merge: %s was made by vrambench %.12s and %s by %.12s: merge results of "
                                               "one version", first->path, commit, f->path, other);
    }
    return VB_EXIT_OK;
}

/* The context fields that differ between the shards of one command line:
 * when and on which host each ran, the binary's path there, the host's CPUs
 * and load, and the shard itself. Every other field says what ran, and on
 * what device, so the shards of one run agree on it. */
static const char *const per_shard_fields[] = {"date", "host_name", "executable", "num_cpus", "mhz_per_cpu",
                                               "cpu_scaling_enabled", "caches", "load_avg", "shard", NULL};

/* `value` as compact JSON in `out`, cut short with "..." when long;
 * "nothing" when NULL (a field, or a word, one file has and the other has not). */
static const char *shown(const json_t *value, char *out, size_t capacity)
{
    char *text = value ? json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    snprintf(out, capacity, "%s", value ? (text ? text : "?") : "nothing");
    if (text && strlen(text) >= capacity && capacity > 4) snprintf(out + capacity - 4, 4, "...");
    free(text);
    return out;
}

/* Exit 2 unless shards `a` and `b` are of one command line on one device:
 * their shard_command (vb_shard_command) and every context field but the
 * per_shard_fields equal. The line names the first difference: the first
 * word of the command lines that differs, else the context field. */
static int check_same_command(const vb_results_file *a, const vb_results_file *b)
{
    json_t *first = json_object_get(a->context, "shard_command");
    json_t *second = json_object_get(b->context, "shard_command");
    char left[160], right[160];
    if (!json_equal(first, second)) {
        size_t k = 0;
        while (k < json_array_size(first) && k < json_array_size(second) &&
               json_equal(json_array_get(first, k), json_array_get(second, k)))
            k++;
        return vb_cli_error(VB_EXIT_USAGE, "merge: %s and %s are shards of different command lines: %s's has %s "
                                           "where %s's has %s", a->path, b->path, a->path,
                            shown(json_array_get(first, k), left, sizeof left), b->path,
                            shown(json_array_get(second, k), right, sizeof right));
    }
    const vb_results_file *sides[2] = {a, b};
    for (size_t side = 0; side < 2; side++) {
        const char *field;
        json_t *value;
        json_object_foreach(sides[side]->context, field, value) {
            if (vb_name_known(field, per_shard_fields)) continue;
            json_t *mine = json_object_get(a->context, field), *theirs = json_object_get(b->context, field);
            if (!json_equal(mine, theirs))
                return vb_cli_error(VB_EXIT_USAGE, "merge: %s and %s are shards of different command lines or "
                                                   "devices: their context's %s is %s and %s", a->path, b->path, field,
                                    shown(mine, left, sizeof left), shown(theirs, right, sizeof right));
        }
    }
    return VB_EXIT_OK;
}

/* Exit 2 unless a file's shard fields are as --shard writes them: "shard"
 * {index, count, cases}, whole numbers with 1 <= index <= count, 2 <= count
 * <= VB_SHARD_MAX and cases >= 0, and "shard_command" a list of strings
 * (absent both: no shard). */
static int check_shard_fields(const vb_results_file *file)
{
    json_t *shard = json_object_get(file->context, "shard"), *command = json_object_get(file->context, "shard_command");
    if (!shard && !command) return VB_EXIT_OK;
    json_int_t index = integer_or(shard, "index", 0), count = integer_or(shard, "count", 0);
    if (!json_is_object(shard) || count < 2 || count > VB_SHARD_MAX || index < 1 || index > count ||
        integer_or(shard, "cases", -1) < 0)
        return vb_cli_error(VB_EXIT_USAGE, "merge: %s: its context's shard is not {index, count, cases} as --shard "
                                           "writes it (whole numbers, 1 <= index <= count, count from 2)", file->path);
    int strings = json_is_array(command);
    for (size_t k = 0; strings && k < json_array_size(command); k++) strings = json_is_string(json_array_get(command, k));
    if (!strings)
        return vb_cli_error(VB_EXIT_USAGE, "merge: %s: its context's shard_command is not the list of words --shard "
                                           "writes", file->path);
    return VB_EXIT_OK;
}

/* Exit 2 unless the files are all shards of one command line, once each
 * and every one, or none is a shard. *sharded says which. */
static int check_shards(const vb_results_file *files, size_t count, int *sharded)
{
    for (size_t i = 0; i < count; i++) {
        int status = check_shard_fields(&files[i]);
        if (status != VB_EXIT_OK) return status;
    }
    json_t *first = json_object_get(files[0].context, "shard");
    *sharded = first != NULL;
    json_int_t shard_count = integer_or(first, "count", 0), cases = integer_or(first, "cases", -1);
    const char **holder = *sharded ? calloc((size_t)shard_count + 1, sizeof *holder) : NULL;
    if (*sharded && !holder) return vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
    int status = VB_EXIT_OK;
    for (size_t i = 0; i < count && status == VB_EXIT_OK; i++) {
        json_t *shard = json_object_get(files[i].context, "shard");
        if ((shard != NULL) != *sharded) {
            status = vb_cli_error(VB_EXIT_USAGE, "merge: %s is a shard (--shard) and %s is not: merge the shards of one "
                                                 "run", files[*sharded ? 0 : i].path, files[*sharded ? i : 0].path);
            break;
        }
        if (!shard) continue;
        json_int_t index = integer_or(shard, "index", 0); /* in 1..count: check_shard_fields */
        size_t share = vb_shard_size((vb_shard){(size_t)index, (size_t)shard_count}, (size_t)cases);
        if (integer_or(shard, "count", 0) != shard_count || integer_or(shard, "cases", -1) != cases)
            status = vb_cli_error(VB_EXIT_USAGE, "merge: %s is shard %lld/%lld of %lld cases, %s of %lld/%lld cases: "
                                                 "shards of different command lines", files[i].path, (long long)index,
                                  (long long)integer_or(shard, "count", 0), (long long)integer_or(shard, "cases", -1),
                                  files[0].path, (long long)shard_count, (long long)cases);
        else if (holder[index])
            status = vb_cli_error(VB_EXIT_USAGE, "merge: %s and %s are both shard %lld/%lld", holder[index],
                                  files[i].path, (long long)index, (long long)shard_count);
        /* A shard holds its share of the cases and no other: one edited or
         * cut short would merge into a run missing cases, or holding more. */
        else if (files[i].case_count != share)
            status = vb_cli_error(VB_EXIT_USAGE, "merge: %s holds %zu case%s, where shard %lld/%lld of %lld cases holds "
                                                 "%zu: a shard cut short or edited",
                                  files[i].path, files[i].case_count, files[i].case_count == 1 ? "" : "s",
                                  (long long)index, (long long)shard_count, (long long)cases, share);
        else if ((status = check_same_command(&files[0], &files[i])) == VB_EXIT_OK)
            holder[index] = files[i].path;
    }
    if (status == VB_EXIT_OK && *sharded) {
        char missing[256] = "";
        size_t used = 0, absent = 0;
        for (json_int_t k = 1; k <= shard_count; k++)
            if (!holder[k] && absent++ < 8 && used < sizeof missing)
                used += (size_t)snprintf(missing + used, sizeof missing - used, "%s%lld/%lld", absent > 1 ? ", " : "",
                                         (long long)k, (long long)shard_count);
        if (absent)
            status = vb_cli_error(VB_EXIT_USAGE, "merge: %zu shard%s missing: %s%s (a merged run needs every shard)", absent,
                                  absent == 1 ? "" : "s", missing, absent > 8 ? ", ..." : "");
    }
    free(holder);
    return status;
}

/* The merged context: the first file's, "shard" dropped, allocator configs
 * joined, "merged_from" added. NULL on host OOM. */
static json_t *merged_context(const vb_results_file *files, size_t count)
{
    json_t *context = json_deep_copy(files[0].context), *from = json_array();
    json_t *configs = json_object_get(context, "allocator_configs");
    if (!context || !from) {
        json_decref(context);
        json_decref(from);
        return NULL;
    }
    json_object_del(context, "shard");
    json_object_del(context, "shard_command");
    json_object_del(context, "shard_input"); /* the shards' one input, checked equal: an unsharded run names none */
    int failed = 0;
    for (size_t i = 0; i < count; i++) {
        json_t *shard = json_object_get(files[i].context, "shard"), *one = json_object();
        failed |= !one || json_object_set_new(one, "file", json_string(vb_results_base_name(&files[i]))) != 0;
        if (shard) {
            char text[64];
            snprintf(text, sizeof text, "%lld/%lld", (long long)integer_or(shard, "index", 0),
                     (long long)integer_or(shard, "count", 0));
            failed |= json_object_set_new(one, "shard", json_string(text)) != 0;
        }
        static const char *const copied[] = {"host_name", "date", "device_name", "executable"};
        for (size_t k = 0; k < sizeof copied / sizeof copied[0]; k++) {
            json_t *value = json_object_get(files[i].context, copied[k]);
            if (json_is_string(value)) failed |= json_object_set(one, copied[k], value) != 0;
        }
        failed |= json_array_append_new(from, one) != 0;
        json_t *more = json_object_get(files[i].context, "allocator_configs");
        if (json_is_object(configs) && json_is_object(more)) failed |= json_object_update_missing(configs, more) != 0;
    }
    failed |= json_object_set_new(context, "merged_from", from) != 0;
    if (failed) {
        json_decref(context);
        return NULL;
    }
    return context;
}

/* Every entry of every file, in one run's order when `sharded`; exit 2 on
 * a case found twice (an entry of the same name and repetition in two files). */
static int merged_entries(const vb_results_file *files, size_t count, int sharded, json_t *benchmarks)
{
    size_t total = 0;
    for (size_t i = 0; i < count; i++) total += json_array_size(json_object_get(files[i].root, "benchmarks"));
    sortable *all = calloc(total + 1, sizeof *all);
    if (!all) return vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
    size_t n = 0;
    for (size_t i = 0; i < count; i++) {
        size_t k;
        json_t *entry;
        json_array_foreach(json_object_get(files[i].root, "benchmarks"), k, entry) {
            all[n] = (sortable){entry, integer_or(entry, "family_index", 0),
                                integer_or(entry, "per_family_instance_index", 0), n};
            n++;
        }
    }
    /* "REPETITION:NAME" -> the first file that holds it: each entry looked up once. */
    json_t *owners = json_object();
    int status = owners ? VB_EXIT_OK : vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
    for (size_t i = 0, f = 0; status == VB_EXIT_OK && i < count; i++) {
        size_t size = json_array_size(json_object_get(files[i].root, "benchmarks"));
        for (size_t k = 0; k < size && status == VB_EXIT_OK; k++, f++) {
            json_t *entry = all[f].entry;
            const char *name = json_string_value(json_object_get(entry, "name"));
            size_t length = strlen(name) + 32;
            char *key = malloc(length);
            if (!key) {
                status = vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
                break;
            }
            snprintf(key, length, "%lld:%s", (long long)integer_or(entry, "repetition_index", 0), name);
            json_t *owner = json_object_get(owners, key);
            if (!owner) {
                if (json_object_set_new_nocheck(owners, key, json_integer((json_int_t)i)) != 0)
                    status = vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
            } else if ((size_t)json_integer_value(owner) != i) {
                status = vb_cli_error(VB_EXIT_USAGE, "merge: case '%s' is in both %s and %s", name,
                                      files[json_integer_value(owner)].path, files[i].path);
            }
            free(key);
        }
    }
    if (status == VB_EXIT_OK && sharded) qsort(all, n, sizeof *all, by_position);
    for (size_t i = 0; status == VB_EXIT_OK && i < n; i++)
        if (json_array_append(benchmarks, all[i].entry) != 0) status = vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
    json_decref(owners);
    free(all);
    return status;
}

int vb_cmd_merge(int argc, char **argv)
{
    vb_files_out args;
    int exit_status = vb_cli_files_out(argc, argv, MERGE_USAGE, "--quiet", &args);
    if (exit_status != VB_EXIT_OK || args.helped) {
        vb_files_out_free(&args);
        return exit_status;
    }
    const char **paths = args.files, *out = args.out;
    size_t count = args.count;
    int quiet = args.flag;
    vb_results_file *files = calloc(count, sizeof *files);
    size_t loaded = 0;
    json_t *root = NULL;
    if (!files) exit_status = vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
    for (; exit_status == VB_EXIT_OK && loaded < count; loaded++) {
        vb_status status = vb_results_load(paths[loaded], &files[loaded]);
        if (status != VB_OK) exit_status = vb_cli_status_error(status);
    }
    vb_results_kind kind = VB_RESULTS_EMPTY;
    int sharded = 0;
    if (exit_status == VB_EXIT_OK) exit_status = check_compatible(files, count, &kind);
    if (exit_status == VB_EXIT_OK) exit_status = check_shards(files, count, &sharded);
    if (exit_status == VB_EXIT_OK && kind == VB_RESULTS_TUNE && !sharded)
        exit_status = vb_cli_error(VB_EXIT_USAGE, "merge: tune files join only as the shards of one tune (tune --shard "
                                                  "I/N)");
    if (exit_status == VB_EXIT_OK) {
        json_t *context = merged_context(files, count), *benchmarks = json_array(), *names = json_object();
        root = context && benchmarks && names ? json_pack("{s:o,s:o}", "context", context, "benchmarks", benchmarks) : NULL;
        if (!root) {
            json_decref(context);
            json_decref(benchmarks);
            json_decref(names);
            exit_status = vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
        } else {
            exit_status = merged_entries(files, count, sharded, benchmarks);
            for (size_t i = 0; i < count; i++) {
                json_t *more = json_object_get(files[i].root, "names");
                if (json_is_object(more)) json_object_update_missing(names, more);
            }
            if (json_object_size(names)) json_object_set(root, "names", names);
            json_decref(names);
        }
    }
    if (exit_status == VB_EXIT_OK && kind == VB_RESULTS_TUNE) {
        vb_status status = vb_tune_conclude(root);
        if (status != VB_OK) exit_status = vb_cli_status_error(status);
    }
    if (exit_status == VB_EXIT_OK) {
        vb_status status = vb_report_write(root, out);
        if (status != VB_OK) exit_status = vb_cli_status_error(status);
        else if (!quiet)
            vb_cli_line(stderr, "vrambench: merged %zu file%s (%zu entries%s) into %s", count, count == 1 ? "" : "s",
                    json_array_size(json_object_get(root, "benchmarks")), sharded ? ", every shard" : "", out);
    }
    json_decref(root);
    for (size_t i = 0; i < loaded; i++) vb_results_free(&files[i]);
    free(files);
    vb_files_out_free(&args);
    return exit_status;
}
