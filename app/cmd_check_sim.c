/* vrambench — `vrambench check-sim FILE...`: do the simulated device's memory
 * figures agree with a GPU's?
 *
 * For each committed GPU result file (a `run` result, a `replay` result, a
 * `claims` file) it runs the same cases on the simulated device, with the
 * same scenarios, allocator specs, trace and a sim as large as the GPU, and
 * compares the memory figures case by case:
 *   run, replay  peak_requested_bytes, peak_allocated_bytes,
 *                peak_reserved_bytes, driver_alloc_calls, driver_free_calls,
 *                ooms, and the timeline's requested, allocated and reserved
 *                bytes step by step (driver_used is left out: it includes
 *                the CUDA context and whatever else the GPU holds);
 *   claims       each claim's numbers that are memory figures: keys ending in
 *                _bytes (but context_bytes, the CUDA context), _driver_calls,
 *                and max_batch_* (times, _ns, are not compared).
 * Every difference is listed with both numbers. One that matches an entry of
 * `exceptions` below is documented (the README lists them with their
 * reasons) and does not fail the check; any other makes the exit status 1.
 *
 * Files it cannot check are skipped with a note, not failed: sim results,
 * microbench files, PyTorch measurement files, files made before the memory pass (no
 * context.memory_pass: their figures depend on the iteration count), and
 * replays whose trace is not at the recorded path. A file that is not a
 * results file is bad input (exit 2). */
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "allocators/spec.h"

/* A documented difference: cases and figures (fnmatch patterns) that may
 * differ between a GPU and the sim, and why. Keep README.md ("Sim vs GPU")
 * in step. */
typedef struct check_exception {
    const char *name;    /* "SCENARIO/ALLOCATOR", "replay:TRACE/ALLOCATOR" or "claims:ID/ALLOCATOR" */
    const char *figure;  /* a counter, "timeline.*", or a claim number */
    const char *reason;
} check_exception;

/* Why `async` in a scenario (kernels queued, unlike a replay) may differ. */
#define ASYNC_GPU_PROGRESS                                                                                    \
    "which frees the driver's pool has seen complete when a batch allocates depends on how far the GPU got " \
    "(F14 in base/device_sim_pool.c: a synchronize after every free changed the peaks of all four traces "  \
    "tried), so it differs between runs: 128 or 96 MiB on one H100, 96 on an H200 and on the sim"

static const check_exception exceptions[] = {
    /* Measured on an H100 (the results/ files of 2026-11-23, nvidia-h100-80gb-hbm3): 6,368 MiB GPU vs
     * 6,432 sim (+1.0%; 146 timeline samples 32 or 64 MiB apart); gpt2 replay and random_mix equal. */
    {"replay:*/async", "*",
     "the sim's pool follows the driver's placement rule measured by lab/probes/pool_trace.c (F14 in "
     "base/device_sim_pool.c: best fit, frees pending until the pool sees them complete), which places "
     "99.3-100% of the blocks of 15 of 22 logged traces one step ahead but not those of traces with blocks of "
     "48 MiB and more, and its memory-behind-granules bookkeeping (F11) is its own, so reserved bytes "
     "come close but not always equal"},
    /* At batch size 8192 (empty_cache after every batch), on one H100: 128 MiB in three bench runs
     * (2026-11-22 and -23), 96 in a claims run and 128 in the next; 96 MiB on an H200 (2026-11-22) and on
     * sim. */
    {"dataloader_batches/async", "*", ASYNC_GPU_PROGRESS},
    {"claims:smaller_batch_uses_less/async", "batch8192_peak_reserved_bytes", ASYNC_GPU_PROGRESS},
    /* Peak allocated within 0.01% (random_mix +0.005%, gpt2 +0.005%, resnet50 -0.007%); peak reserved equal. */
    {"*/caching*", "peak_allocated_bytes",
     "best fit breaks ties by address; the sim hands out cudaMalloc's addresses in the order the driver did in "
     "recorded PyTorch processes (base/device_sim_memory.c), but the driver's order in vrambench's own process "
     "differs at times, so an equal-size tie can pick another block and split differently"},
    {"*/caching*", "timeline.allocated*", "as peak_allocated_bytes: address tie-breaks of best fit"},
    {"*/bfc", "timeline.allocated*",
     "BFC's best fit is by (size, address) too: regions placed elsewhere by the driver split differently between "
     "samples (peaks equal)"},
    /* One segment more on the sim: random_mix +24 MiB (+0.13%), the random-4m replay +2 MiB (+0.31%), a
     * generated 1 MiB random trace (lab/gpu-session.sh stitch, .traces/own-random-1m) +4 MiB (+0.37%). */
    {"random_mix/caching[[]roundup_power2_divisions=4]", "*",
     "address tie-breaks of best fit, as above; here they cost one more segment"},
    {"replay:random-4m.trace.gz/caching", "*", "address tie-breaks of best fit, as above; one more 2 MiB segment"},
    {"replay:own-random-1m.trace.gz/caching", "*", "address tie-breaks of best fit, as above; two more segments"},
    /* Timeline samples one 2 MiB page apart; peaks equal. */
    {"*/cuda", "timeline.reserved*",
     "small cudaMallocs share 2 MiB pages; which page a block lands in follows the driver's undocumented "
     "placement, so the page count can differ by one between samples"},
    /* 4 MiB on the GPU after everything was freed and the cache emptied. */
    {"claims:cleanup_frees_gpu_completely/cuda", "residual_driver_bytes",
     "driver memory no allocator holds (the CUDA runtime's own, after the backend's kernels ran)"},
    {NULL, NULL, NULL},
};

#define EXCEPTION_COUNT (sizeof exceptions / sizeof exceptions[0] - 1)

/* How many differences each exception documented in this run. */
static size_t exception_uses[EXCEPTION_COUNT];

/* The exception a difference matches (its use counted), or NULL. */
static const check_exception *documented(const char *name, const char *figure)
{
    for (size_t i = 0; i < EXCEPTION_COUNT; i++)
        if (fnmatch(exceptions[i].name, name, 0) == 0 && fnmatch(exceptions[i].figure, figure, 0) == 0) {
            exception_uses[i]++;
            return &exceptions[i];
        }
    return NULL;
}

/* What a file's check found. */
typedef struct check_tally {
    size_t cases, differing_cases, undocumented, documented;
} check_tally;

/* 1 and the number `key` of a JSON object in *out, or 0 when it has none. */
static int number_of(json_t *object, const char *key, double *out)
{
    json_t *value = json_object_get(object, key);
    if (!json_is_number(value)) return 0;
    *out = json_number_value(value);
    return 1;
}

/* Reports one difference; returns 1 if it is undocumented. */
static int report_difference(const char *name, const char *figure, double gpu, double sim, check_tally *tally)
{
    const check_exception *e = documented(name, figure);
    printf("  %s: %s: gpu %.0f, sim %.0f (%+.0f)%s%s%s\n", name, figure, gpu, sim, sim - gpu,
           e ? " [documented: " : "", e ? e->reason : "", e ? "]" : "");
    if (e) tally->documented++;
    else tally->undocumented++;
    return !e;
}

/* ------------------------------------------------------------------------ */
/* Re-running on sim                                                         */
/* ------------------------------------------------------------------------ */

/* Runs a vrambench command in-process with its stdout (the summary table)
 * silenced; returns its exit status. */
static int run_silenced(vb_command_fn command, int argc, char **argv)
{
    fflush(stdout);
    int saved = dup(STDOUT_FILENO), null = open("/dev/null", O_WRONLY);
    if (saved >= 0 && null >= 0) dup2(null, STDOUT_FILENO);
    int status = command(argc, argv);
    fflush(stdout);
    if (saved >= 0) {
        dup2(saved, STDOUT_FILENO);
        close(saved);
    }
    if (null >= 0) close(null);
    return status;
}

/* A fresh temporary file name for a sim result. */
static int temporary_path(char *path, size_t capacity)
{
    const char *directory = getenv("TMPDIR");
    snprintf(path, capacity, "%s/vrambench-check-sim-XXXXXX", directory && directory[0] ? directory : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0) return -1;
    close(fd);
    return 0;
}

/* Adds `text` to a comma-separated list unless it is there already. */
static int list_add(char **list, const char *text)
{
    size_t length = *list ? strlen(*list) : 0;
    if (*list) {
        /* Items may hold commas inside brackets: compare whole items. */
        for (const char *item = *list; item;) {
            size_t item_length = vb_spec_list_item_length(item);
            if (item_length == strlen(text) && strncmp(item, text, item_length) == 0) return 0;
            item = item[item_length] ? item + item_length + 1 : NULL;
        }
    }
    char *grown = realloc(*list, length + strlen(text) + 2);
    if (!grown) return -1;
    snprintf(grown + length, strlen(text) + 2, "%s%s", length ? "," : "", text);
    *list = grown;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* run and replay results                                                    */
/* ------------------------------------------------------------------------ */

static const char *const compared_counters[] = {"peak_requested_bytes", "peak_allocated_bytes",
                                                "peak_reserved_bytes",  "driver_alloc_calls",
                                                "driver_free_calls",    "ooms"};

/* The iteration entry of repetition 0 named `name` in a document, or NULL. */
static json_t *entry_named(json_t *document, const char *name)
{
    size_t i;
    json_t *entry;
    json_array_foreach(json_object_get(document, "benchmarks"), i, entry) {
        json_t *index = json_object_get(entry, "repetition_index");
        if (strcmp(json_string_value(json_object_get(entry, "run_type")) ?: "", "iteration") != 0) continue;
        if (index && json_integer_value(index) != 0) continue;
        if (strcmp(json_string_value(json_object_get(entry, "name")) ?: "", name) == 0) return entry;
    }
    return NULL;
}

/* Compares the timelines of one case; returns how many values differ. */
static size_t compare_timelines(const char *name, json_t *gpu, json_t *sim, check_tally *tally)
{
    json_t *gpu_line = json_object_get(gpu, "timeline"), *sim_line = json_object_get(sim, "timeline");
    size_t differing = 0;
    if (json_array_size(gpu_line) != json_array_size(sim_line)) {
        report_difference(name, "timeline.steps", (double)json_array_size(gpu_line), (double)json_array_size(sim_line),
                          tally);
        return 1;
    }
    static const char *const fields[] = {"requested", "allocated", "reserved"};
    for (size_t i = 0; i < json_array_size(gpu_line); i++) {
        json_t *a = json_array_get(gpu_line, i), *b = json_array_get(sim_line, i);
        for (size_t f = 0; f < sizeof fields / sizeof *fields; f++) {
            double x = 0, y = 0;
            if (!number_of(a, fields[f], &x) || !number_of(b, fields[f], &y) || x == y) continue;
            char figure[320];
            snprintf(figure, sizeof figure, "timeline.%s[%zu '%s']", fields[f], i,
                     json_string_value(json_object_get(a, "step")) ?: "?");
            report_difference(name, figure, x, y, tally);
            differing++;
        }
    }
    return differing;
}

/* Compares every iteration entry of the GPU file with the sim's. */
static int compare_benchmarks(json_t *gpu_document, json_t *sim_document, check_tally *tally)
{
    size_t i;
    json_t *entry;
    json_array_foreach(json_object_get(gpu_document, "benchmarks"), i, entry) {
        const char *name = json_string_value(json_object_get(entry, "name"));
        json_t *index = json_object_get(entry, "repetition_index");
        if (!name || (index && json_integer_value(index) != 0)) continue;
        if (strcmp(json_string_value(json_object_get(entry, "run_type")) ?: "", "iteration") != 0) continue;
        tally->cases++;
        json_t *sim = entry_named(sim_document, name);
        if (!sim) {
            printf("  %s: not run on sim\n", name);
            tally->differing_cases++;
            tally->undocumented++;
            continue;
        }
        size_t before = tally->documented + tally->undocumented;
        for (size_t c = 0; c < sizeof compared_counters / sizeof *compared_counters; c++) {
            double x = 0, y = 0;
            if (number_of(entry, compared_counters[c], &x) && number_of(sim, compared_counters[c], &y) && x != y)
                report_difference(name, compared_counters[c], x, y, tally);
        }
        compare_timelines(name, entry, sim, tally);
        if (tally->documented + tally->undocumented > before) tally->differing_cases++;
    }
    return 0;
}

/* Re-runs a run or replay result's cases on sim into `sim_path`; 0 on
 * success, else an exit status (1, or -1: skipped with a note). */
static int rerun_benchmarks(json_t *document, const char *sim_path, const char *trace)
{
    json_t *context = json_object_get(document, "context");
    char capacity[32];
    snprintf(capacity, sizeof capacity, "%.0f", json_number_value(json_object_get(context, "device_total_bytes")));
    char *allocators = NULL, *scenarios = NULL;
    int failed = 0;
    size_t i;
    json_t *entry;
    json_array_foreach(json_object_get(document, "benchmarks"), i, entry) {
        const char *allocator = json_string_value(json_object_get(entry, "allocator"));
        const char *scenario = json_string_value(json_object_get(entry, "scenario"));
        if (allocator) failed |= list_add(&allocators, allocator);
        if (scenario && !trace) failed |= list_add(&scenarios, scenario);
    }
    int status = VB_EXIT_FAILURE;
    if (failed || !allocators) {
        status = failed ? vb_cli_error(VB_EXIT_FAILURE, "out of host memory") : -1;
        if (!failed) printf("  skipped: no cases in the file\n");
    } else if (trace) {
        char *argv[] = {"replay", (char *)trace, "--allocator", allocators, "--device", "sim", "--sim-capacity",
                        capacity, "--quiet", "--out", (char *)sim_path};
        status = run_silenced(vb_cmd_replay, (int)(sizeof argv / sizeof *argv), argv);
    } else if (strchr(scenarios, ':')) {
        printf("  skipped: scenarios with a parameter (%s) are not re-run\n", scenarios);
        status = -1;
    } else {
        char *argv[] = {"run", "--scenario", scenarios, "--allocator", allocators, "--device", "sim",
                        "--sim-capacity", capacity, "--min-time", "0", "--max-iterations", "1", "--quiet", "--out",
                        (char *)sim_path};
        status = run_silenced(vb_cmd_run, (int)(sizeof argv / sizeof *argv), argv);
    }
    free(allocators);
    free(scenarios);
    return status;
}

/* ------------------------------------------------------------------------ */
/* claims files                                                              */
/* ------------------------------------------------------------------------ */

/* 1 if a claim's number is a memory figure check-sim compares. */
static int compared_number(const char *key)
{
    size_t length = strlen(key);
    int ends_bytes = length > 6 && strcmp(key + length - 6, "_bytes") == 0;
    int ends_calls = length > 13 && strcmp(key + length - 13, "_driver_calls") == 0;
    return (ends_bytes && strcmp(key, "context_bytes") != 0) || ends_calls || strncmp(key, "max_batch_", 10) == 0;
}

/* The claim (id, allocator) of a claims document, or NULL. */
static json_t *claim_of(json_t *document, const char *id, const char *allocator)
{
    size_t i;
    json_t *claim;
    json_array_foreach(json_object_get(document, "claims"), i, claim) {
        if (strcmp(json_string_value(json_object_get(claim, "id")) ?: "", id) == 0 &&
            strcmp(json_string_value(json_object_get(claim, "allocator")) ?: "", allocator) == 0)
            return claim;
    }
    return NULL;
}

/* Compares every claim's memory numbers with the sim's. */
static void compare_claims(json_t *gpu_document, json_t *sim_document, check_tally *tally)
{
    size_t i;
    json_t *claim;
    json_array_foreach(json_object_get(gpu_document, "claims"), i, claim) {
        const char *id = json_string_value(json_object_get(claim, "id"));
        const char *allocator = json_string_value(json_object_get(claim, "allocator"));
        if (!id || !allocator || strcmp(allocator, "pytorch") == 0) continue;
        char name[512];
        snprintf(name, sizeof name, "claims:%s/%s", id, allocator);
        tally->cases++;
        json_t *sim = claim_of(sim_document, id, allocator);
        if (!sim) {
            printf("  %s: not decided on sim\n", name);
            tally->differing_cases++;
            tally->undocumented++;
            continue;
        }
        size_t before = tally->documented + tally->undocumented;
        const char *key;
        json_t *value;
        json_object_foreach(json_object_get(claim, "numbers"), key, value) {
            double x = json_number_value(value), y = 0;
            if (!json_is_number(value) || !compared_number(key)) continue;
            if (!number_of(json_object_get(sim, "numbers"), key, &y) || x != y)
                report_difference(name, key, x, y, tally);
        }
        if (tally->documented + tally->undocumented > before) tally->differing_cases++;
    }
}

/* Re-runs a claims file's allocators' claims on sim into `sim_path`. */
static int rerun_claims(json_t *document, const char *sim_path)
{
    char *allocators = NULL;
    int failed = 0;
    size_t i;
    json_t *claim;
    json_array_foreach(json_object_get(document, "claims"), i, claim) {
        const char *allocator = json_string_value(json_object_get(claim, "allocator"));
        if (allocator && strcmp(allocator, "pytorch") != 0) failed |= list_add(&allocators, allocator);
    }
    int status = -1;
    if (failed) status = vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
    else if (!allocators) printf("  skipped: no allocator's claims in the file\n");
    else {
        char *argv[] = {"claims", "--allocator", allocators, "--device", "sim", "--quiet", "--out", (char *)sim_path};
        status = run_silenced(vb_cmd_claims, (int)(sizeof argv / sizeof *argv), argv);
    }
    free(allocators);
    return status;
}

/* ------------------------------------------------------------------------ */
/* The command                                                               */
/* ------------------------------------------------------------------------ */

/* Checks one file; returns VB_EXIT_OK (checked or skipped), 1 when a
 * difference is undocumented or the re-run failed, 2 for bad input. */
static int check_file(const char *path, int sweep, check_tally *total)
{
    json_error_t error;
    json_t *document = json_load_file(path, 0, &error);
    if (!document) return vb_cli_error(VB_EXIT_USAGE, "check-sim: %s:%d: %s", path, error.line, error.text);
    json_t *context = json_object_get(document, "context");
    json_t *claims = json_object_get(document, "claims"), *benchmarks = json_object_get(document, "benchmarks");
    if (json_is_object(context) && json_is_array(json_object_get(document, "measurements"))) {
        printf("check-sim: %s\n  skipped: PyTorch's own measurements (lab/harnesses/pytorch_claims.py), no vrambench cases\n",
               path);
        json_decref(document);
        return VB_EXIT_OK;
    }
    if (!json_is_object(context) || (!json_is_array(claims) && !json_is_array(benchmarks))) {
        json_decref(document);
        if (sweep) { /* --newest sweeps a folder, which may hold other JSON */
            printf("check-sim: %s\n  skipped: not a vrambench results file\n", path);
            return VB_EXIT_OK;
        }
        return vb_cli_error(VB_EXIT_USAGE, "check-sim: %s: not a vrambench results file (no context, benchmarks "
                                           "or claims)", path);
    }
    const char *device = json_string_value(json_object_get(context, "device_name")) ?: "?";
    const char *trace = json_string_value(json_object_get(context, "trace_path"));
    json_t *first = json_array_get(benchmarks, 0);
    const char *first_name = first ? json_string_value(json_object_get(first, "name")) : NULL;
    printf("check-sim: %s (%s)\n", path, device);
    int status = VB_EXIT_OK;
    char sim_path[4096] = "";
    if (json_is_true(json_object_get(context, "simulated"))) {
        printf("  skipped: a sim result; check-sim compares GPU results with the sim\n");
    } else if (!json_is_array(claims) && first_name && strncmp(first_name, "microbench/", 11) == 0) {
        printf("  skipped: microbench results hold no memory figures\n");
    } else if (!json_object_get(context, "memory_pass")) {
        printf("  skipped: made before the memory pass (no context.memory_pass), so its memory figures depend on "
               "the iteration count; re-record it with this vrambench\n");
    } else if (first_name && strncmp(first_name, "replay:", 7) == 0 && (!trace || access(trace, R_OK) != 0)) {
        printf("  skipped: the replayed trace %s%s%s is not here\n", trace ? "'" : "(not recorded: no context.trace_path)",
               trace ? trace : "", trace ? "'" : "");
    } else if (temporary_path(sim_path, sizeof sim_path) != 0) {
        status = vb_cli_error(VB_EXIT_FAILURE, "check-sim: cannot make a temporary file");
    } else {
        int rerun = json_is_array(claims) ? rerun_claims(document, sim_path)
                                          : rerun_benchmarks(document, sim_path,
                                                             first_name && strncmp(first_name, "replay:", 7) == 0
                                                                 ? trace
                                                                 : NULL);
        json_t *sim = rerun == VB_EXIT_OK ? json_load_file(sim_path, 0, &error) : NULL;
        if (rerun > 0 || (rerun == VB_EXIT_OK && !sim)) {
            status = vb_cli_error(VB_EXIT_FAILURE, "check-sim: %s: the sim re-run failed", path);
        } else if (sim) {
            check_tally tally = {0};
            if (json_is_array(claims)) compare_claims(document, sim, &tally);
            else compare_benchmarks(document, sim, &tally);
            printf("  %zu cases, %zu differ (%zu differences documented, %zu not)\n", tally.cases,
                   tally.differing_cases, tally.documented, tally.undocumented);
            total->cases += tally.cases;
            total->differing_cases += tally.differing_cases;
            total->documented += tally.documented;
            total->undocumented += tally.undocumented;
            if (tally.undocumented) status = VB_EXIT_FAILURE;
        }
        json_decref(sim);
    }
    if (sim_path[0]) remove(sim_path);
    json_decref(document);
    return status;
}

/* What --newest compares of a file, read once. */
typedef struct newest_info {
    int compared;      /* a results file with a memory pass: it takes part */
    char group[1024];  /* "KIND DEVICE [TRACE]" */
    char date[64];
    json_t *names;     /* its entries' names, as the keys of an object */
} newest_info;

/* Reads `path`'s group, date and entry names. Only files this check
 * compares take part: a file without a memory pass (torch_ab.py's, older
 * results) must not hide a newer bench file; it is then checked, and
 * reported. */
static void read_newest_info(const char *path, newest_info *info)
{
    memset(info, 0, sizeof *info);
    json_t *document = json_load_file(path, 0, NULL);
    json_t *context = json_object_get(document, "context");
    if (!json_is_object(context) || !json_object_get(context, "memory_pass")) {
        json_decref(document);
        return;
    }
    json_t *benchmarks = json_object_get(document, "benchmarks");
    json_t *first = json_array_get(benchmarks, 0);
    const char *name = first ? json_string_value(json_object_get(first, "name")) : NULL;
    const char *kind = json_object_get(document, "claims")         ? "claims"
                       : json_object_get(document, "measurements") ? "measurements"
                       : !name                                     ? "empty"
                       : strncmp(name, "microbench/", 11) == 0     ? "microbench"
                       : strncmp(name, "replay:", 7) == 0          ? "replay"
                                                                   : "run";
    const char *trace = strcmp(kind, "replay") == 0 ? json_string_value(json_object_get(context, "trace_path")) : "";
    snprintf(info->group, sizeof info->group, "%s %s %s %s", kind,
             json_is_true(json_object_get(context, "simulated")) ? "sim" : "gpu",
             json_string_value(json_object_get(context, "device_name")) ?: "?", trace ? trace : name);
    snprintf(info->date, sizeof info->date, "%s", json_string_value(json_object_get(context, "date")) ?: "");
    info->names = json_object();
    size_t index;
    json_t *entry;
    json_array_foreach(benchmarks, index, entry) {
        const char *entry_name = json_string_value(json_object_get(entry, "name"));
        if (entry_name && info->names) json_object_set_new(info->names, entry_name, json_true());
    }
    info->compared = info->names != NULL;
    json_decref(document);
}

/* 1 if every entry name of `ours` is an entry name of `theirs`. */
static int covers(const newest_info *theirs, const newest_info *ours)
{
    const char *name;
    json_t *unused;
    json_object_foreach(ours->names, name, unused)
        if (!json_object_get(theirs->names, name)) return 0;
    return 1;
}

/* --newest: 1 if another of the files is of file `index`'s group, newer, and
 * holds every case it holds (a newer replay of the same trace with other
 * allocators, or a run of other scenarios, supersedes nothing). */
static int superseded(const newest_info *infos, int count, int index)
{
    const newest_info *ours = &infos[index];
    if (!ours->compared) return 0;
    for (int i = 0; i < count; i++) {
        if (i == index || !infos[i].compared || strcmp(ours->group, infos[i].group) != 0) continue;
        /* ISO-8601 dates compare as strings; on a tie the later file wins. */
        int cmp = strcmp(infos[i].date, ours->date);
        if ((cmp > 0 || (cmp == 0 && i > index)) && covers(&infos[i], ours)) return 1;
    }
    return 0;
}

int vb_cmd_check_sim(int argc, char **argv)
{
    int newest = argc >= 2 && strcmp(argv[1], "--newest") == 0;
    char **paths = argv + 1 + newest;
    int count = argc - 1 - newest;
    if (count < 1 || strcmp(paths[0], "--help") == 0 || strcmp(paths[0], "-h") == 0) {
        if (count >= 1) {
            puts("usage: vrambench check-sim [--newest] FILE...\n"
                 "  re-runs every case of GPU result files (run, replay, claims) on the simulated device and\n"
                 "  lists each case whose memory figures differ; exit 1 if a difference is not documented.\n"
                 "  --newest: a file is skipped when a newer one of its kind and device (and trace) holds\n"
                 "            all of its cases;\n"
                 "  JSON files that are not results are skipped (a folder's files may be given)\n"
                 "  -h, --help: this help\n\n"
                 "examples:\n"
                 "  vrambench check-sim results/nvidia-h100-80gb-hbm3-20261123.json\n"
                 "  vrambench check-sim --newest results/*.json");
            return VB_EXIT_OK;
        }
        return vb_cli_error(VB_EXIT_USAGE, "usage: vrambench check-sim [--newest] FILE...");
    }
    newest_info *infos = NULL;
    if (newest) {
        infos = calloc((size_t)count, sizeof *infos);
        if (!infos) return vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
        for (int i = 0; i < count; i++) read_newest_info(paths[i], &infos[i]);
    }
    check_tally total = {0};
    int exit_status = VB_EXIT_OK;
    for (int i = 0; i < count; i++) {
        if (newest && superseded(infos, count, i)) {
            printf("check-sim: %s\n  skipped: a newer file of its kind and device is checked (--newest)\n", paths[i]);
            continue;
        }
        int status = check_file(paths[i], newest, &total);
        if (status > exit_status) exit_status = status;
    }
    for (int i = 0; newest && i < count; i++) json_decref(infos[i].names);
    free(infos);
    printf("check-sim: %zu cases checked, %zu differ; %zu differences undocumented\n", total.cases,
           total.differing_cases, total.undocumented);
    /* A documented difference that no longer occurs should leave the table
     * (or occurs only in files not given here): say which. */
    for (size_t i = 0; i < EXCEPTION_COUNT; i++)
        if (!exception_uses[i])
            printf("check-sim: documented difference not seen in these files: %s %s\n", exceptions[i].name,
                   exceptions[i].figure);
    return exit_status;
}
