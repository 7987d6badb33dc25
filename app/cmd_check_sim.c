/* vrambench — `vrambench check-sim FILE...`: do the simulated device's memory
 * figures agree with a GPU's?
 *
 * For each committed GPU result file (a `run` result, a `replay` result, a
 * `claims` file) it runs the same cases on the simulated device, with the
 * same scenarios, allocator specs, trace and a sim as large as the GPU
 * (app/sim_rerun.h: in this process, results in memory), and compares the
 * memory figures case by case:
 *   run, replay  peak_requested_bytes, peak_allocated_bytes,
 *                peak_reserved_bytes, driver_alloc_calls, driver_free_calls,
 *                ooms, and the timeline's requested, allocated and reserved
 *                bytes step by step (driver_used is left out: it includes
 *                the CUDA context and whatever else the GPU holds);
 *   claims       each claim's numbers that are memory figures: keys ending in
 *                _bytes (but context_bytes, the CUDA context), _driver_calls,
 *                and max_batch_* (times, _ns, are not compared).
 * Every difference is listed with both numbers. One that the documented
 * differences (docs/data/sim-differences.json, app/sim_differences.h;
 * rendered as docs/sim-differences.md) name is documented and does not fail
 * the check; any other makes the exit status 1.
 *
 * A results file never runs code of its own: only built-in allocators are
 * re-run; the cases of an external:PATH.so library are skipped with a note,
 * and no library is loaded (an external allocator is loaded only when a user
 * names it on a command line: `run`). An unknown allocator name is bad input.
 *
 * Files it cannot check are skipped with a note, not failed: sim results,
 * microbench files, PyTorch measurement files, files made before the memory
 * pass (no context.memory_pass: their figures depend on the iteration
 * count), and replays whose trace is not a regular file. A replay's
 * context.trace_path is as `replay` was given it: a relative one is looked
 * for from the current directory, then from the results file's directory and
 * each one above it up to the repository root (locate_trace), so check-sim
 * runs from any directory. Each input is read once (a pipe or FIFO cannot be
 * read twice; one without a writer reads as empty) and at most
 * VB_JSON_INPUT_MAX_BYTES.
 *
 * Exit status: 0 every difference documented; 1 an undocumented difference
 * or a failed re-run; 2 bad input (a file that is not a results file or is
 * malformed, a case it names that cannot be run as named, an unknown
 * allocator, a missing or malformed differences file) or nothing checked
 * (every case of the files given was skipped), one line on stderr for each. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "base/closest.h"
#include "cli.h"
#include "json_input.h"
#include "results_file.h"
#include "sim_differences.h"
#include "sim_rerun.h"

#define CHECK_SIM_USAGE "usage: vrambench check-sim [--newest] [--differences FILE] FILE..."

/* What a file's check found. */
typedef struct check_tally {
    size_t cases, differing_cases, undocumented, documented;
} check_tally;

/* One input file. A pipe or FIFO is read once: what that gave is kept. */
typedef struct check_input {
    const char *path;
    int kept;              /* 1: read once already, `document` or `status` is the outcome */
    json_t *document;
    vb_status status;
    char message[1024];
} check_input;

/* 1 and the number `key` of a JSON object in *out, or 0 when it has none. */
static int number_of(json_t *object, const char *key, double *out)
{
    json_t *value = json_object_get(object, key);
    if (!json_is_number(value)) return 0;
    *out = json_number_value(value);
    return 1;
}

/* The document of `input` (a new reference) in *out; on failure the
 * reader's message is the last error. */
static vb_status input_load(check_input *input, json_t **out)
{
    *out = NULL;
    if (input->kept) {
        if (input->status != VB_OK) return vb_error(input->status, "%s", input->message);
        *out = json_incref(input->document);
        return VB_OK;
    }
    int regular = 0;
    vb_status status = vb_json_input_load(input->path, VB_JSON_INPUT_MAX_BYTES, out, &regular);
    if (!regular) { /* never read again: keep what it gave */
        input->kept = 1;
        input->status = status;
        input->document = json_incref(*out);
        snprintf(input->message, sizeof input->message, "%s", status == VB_OK ? "" : vb_last_error());
    }
    return status;
}

static void input_release(check_input *input)
{
    json_decref(input->document);
    input->document = NULL;
}

/* Reports one difference; returns 1 if it is undocumented. */
static int report_difference(vb_sim_differences *differences, const char *name, const char *figure, double gpu,
                             double sim, check_tally *tally)
{
    const vb_sim_match *match = vb_sim_differences_find(differences, name, figure);
    printf("  %s: %s: gpu %.0f, sim %.0f (%+.0f)%s%s%s\n", name, figure, gpu, sim, sim - gpu,
           match ? " [documented: " : "", match ? match->reason : "", match ? "]" : "");
    if (match) tally->documented++;
    else tally->undocumented++;
    return !match;
}

/* ------------------------------------------------------------------------ */
/* What of a file is re-run                                                  */
/* ------------------------------------------------------------------------ */

/* The allocators and scenarios of a file that are re-run, and those that
 * are skipped (as the keys of JSON objects). */
typedef struct rerun_set {
    vb_allocator_spec *specs;
    size_t spec_count;
    json_t *skipped_allocators, *scenarios, *skipped_scenarios;
} rerun_set;

static void rerun_set_free(rerun_set *set)
{
    vb_allocator_spec_list_free(set->specs, set->spec_count);
    json_decref(set->skipped_allocators);
    json_decref(set->scenarios);
    json_decref(set->skipped_scenarios);
    memset(set, 0, sizeof *set);
}

/* 1 if a results file's allocator is an external:PATH library, which a
 * results file never makes check-sim load. */
static int external(const char *allocator)
{
    return strncmp(allocator, VB_EXTERNAL_PREFIX, strlen(VB_EXTERNAL_PREFIX)) == 0;
}

/* Adds a results file's allocator to `set`: its spec once, or, for an
 * external library, a note that its cases are skipped. VB_ERR_INVALID when
 * it is neither (an unknown name: "did you mean") or its spec is malformed. */
static vb_status add_allocator(rerun_set *set, const char *allocator)
{
    if (json_object_get(set->skipped_allocators, allocator)) return VB_OK;
    for (size_t i = 0; i < set->spec_count; i++)
        if (strcmp(set->specs[i].label, allocator) == 0) return VB_OK;
    if (external(allocator)) {
        printf("  skipped: the cases of '%s', not a built-in allocator (a results file never loads one)\n",
               allocator);
        return json_object_set_new(set->skipped_allocators, allocator, json_true()) == 0
                   ? VB_OK
                   : vb_error(VB_ERR_HOST_OOM, "out of host memory");
    }
    vb_allocator_spec spec;
    vb_status status = vb_allocator_spec_parse(allocator, &spec);
    if (status != VB_OK) return status;
    for (size_t i = 0; i < set->spec_count; i++)
        if (strcmp(set->specs[i].label, spec.label) == 0) { /* another spelling of one seen */
            vb_allocator_spec_free(&spec);
            return VB_OK;
        }
    vb_allocator_spec *grown = realloc(set->specs, (set->spec_count + 1) * sizeof *grown);
    if (!grown) {
        vb_allocator_spec_free(&spec);
        return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    }
    set->specs = grown;
    set->specs[set->spec_count++] = spec;
    return VB_OK;
}

/* Fills `set` from the allocators of the entries of `array` (benchmarks, or
 * claims, whose "pytorch" ones are PyTorch's own measurements) and, with
 * `scenarios`, their scenarios. VB_ERR_INVALID for an unknown allocator or a
 * malformed spec. */
static vb_status collect(json_t *array, int claims, int scenarios, rerun_set *set)
{
    set->skipped_allocators = json_object();
    set->scenarios = json_object();
    set->skipped_scenarios = json_object();
    if (!set->skipped_allocators || !set->scenarios || !set->skipped_scenarios)
        return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    size_t i;
    json_t *entry;
    json_array_foreach(array, i, entry) {
        const char *allocator = json_string_value(json_object_get(entry, "allocator"));
        const char *scenario = json_string_value(json_object_get(entry, "scenario"));
        if (allocator && !(claims && strcmp(allocator, "pytorch") == 0)) VB_TRY(add_allocator(set, allocator));
        if (scenarios && scenario && json_object_set_new(set->scenarios, scenario, json_true()) != 0)
            return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    }
    return VB_OK;
}

/* Prints the note of an input error and returns its exit status: 2 for bad
 * input, else 1. */
static int file_error(const char *path, vb_status status)
{
    if (status == VB_ERR_INVALID) return vb_cli_error(VB_EXIT_USAGE, "check-sim: %s: %s", path, vb_last_error());
    return vb_cli_error(VB_EXIT_FAILURE, "check-sim: %s: the sim re-run failed: %s", path, vb_last_error());
}

/* ------------------------------------------------------------------------ */
/* run and replay results                                                    */
/* ------------------------------------------------------------------------ */

static const char *const compared_counters[] = {"peak_requested_bytes", "peak_allocated_bytes",
                                                "peak_reserved_bytes",  "driver_alloc_calls",
                                                "driver_free_calls",    "ooms"};

/* The sim's result named `name`, or NULL. */
static const vb_case_result *result_named(const vb_case_result *results, size_t count, const char *name)
{
    for (size_t i = 0; i < count; i++)
        if (strcmp(results[i].name, name) == 0) return &results[i];
    return NULL;
}

/* Compares the timelines of one case. */
static void compare_timelines(vb_sim_differences *differences, const char *name, json_t *gpu,
                              const vb_repetition_result *sim, check_tally *tally)
{
    json_t *gpu_line = json_object_get(gpu, "timeline");
    if (json_array_size(gpu_line) != sim->timeline_count) {
        report_difference(differences, name, "timeline.steps", (double)json_array_size(gpu_line),
                          (double)sim->timeline_count, tally);
        return;
    }
    static const char *const fields[] = {"requested", "allocated", "reserved"};
    for (size_t i = 0; i < sim->timeline_count; i++) {
        json_t *a = json_array_get(gpu_line, i);
        const vb_timeline_sample *b = &sim->timeline[i];
        const double sim_values[] = {(double)b->requested, (double)b->allocated, (double)b->reserved};
        for (size_t f = 0; f < sizeof fields / sizeof *fields; f++) {
            double x = 0;
            if (!number_of(a, fields[f], &x) || x == sim_values[f]) continue;
            char figure[320];
            snprintf(figure, sizeof figure, "timeline.%s[%zu '%s']", fields[f], i,
                     json_string_value(json_object_get(a, "step")) ?: "?");
            report_difference(differences, name, figure, x, sim_values[f], tally);
        }
    }
}

/* Compares every iteration entry of the GPU file (but those of skipped
 * allocators and scenarios) with the sim's results. */
static void compare_benchmarks(vb_sim_differences *differences, json_t *gpu_document, const rerun_set *set,
                               const vb_case_result *results, size_t count, check_tally *tally)
{
    size_t i;
    json_t *entry;
    json_array_foreach(json_object_get(gpu_document, "benchmarks"), i, entry) {
        const char *name = json_string_value(json_object_get(entry, "name"));
        const char *allocator = json_string_value(json_object_get(entry, "allocator"));
        const char *scenario = json_string_value(json_object_get(entry, "scenario"));
        json_t *index = json_object_get(entry, "repetition_index");
        if (!name || (index && json_integer_value(index) != 0)) continue;
        if (strcmp(json_string_value(json_object_get(entry, "run_type")) ?: "", "iteration") != 0) continue;
        if ((allocator && json_object_get(set->skipped_allocators, allocator)) ||
            (scenario && json_object_get(set->skipped_scenarios, scenario)))
            continue;
        tally->cases++;
        const vb_case_result *sim = result_named(results, count, name);
        if (!sim || sim->repetition_count == 0) {
            printf("  %s: not run on sim\n", name);
            tally->differing_cases++;
            tally->undocumented++;
            continue;
        }
        const vb_repetition_result *rep = &sim->repetitions[0];
        size_t before = tally->documented + tally->undocumented;
        for (size_t c = 0; c < sizeof compared_counters / sizeof *compared_counters; c++) {
            double x = 0, y = vb_repetition_counter(rep, compared_counters[c], NAN);
            if (number_of(entry, compared_counters[c], &x) && !isnan(y) && x != y)
                report_difference(differences, name, compared_counters[c], x, y, tally);
        }
        compare_timelines(differences, name, entry, rep, tally);
        if (tally->documented + tally->undocumented > before) tally->differing_cases++;
    }
}

/* The sim's capacity for a file: its GPU's memory, context.device_total_bytes
 * (a whole number of bytes, rounded as printf rounds); 0 when malformed. */
static uint64_t capacity_of(json_t *context)
{
    double bytes = 0;
    if (!number_of(context, "device_total_bytes", &bytes) || !isfinite(bytes)) return 0;
    bytes = nearbyint(bytes);
    return bytes >= 1 && bytes < 18446744073709551616.0 ? (uint64_t)bytes : 0;
}

/* Re-runs a run or replay result's cases on sim and compares them; the
 * exit status, or -1: skipped with a note. */
static int check_benchmarks(vb_sim_differences *differences, const char *path, json_t *document, const char *trace,
                            check_tally *tally)
{
    uint64_t capacity = capacity_of(json_object_get(document, "context"));
    if (!capacity)
        return vb_cli_error(VB_EXIT_USAGE, "check-sim: %s: context.device_total_bytes is not a byte count (a whole "
                            "number from 1 to 2^64-1)", path);
    rerun_set set = {0};
    vb_status status = collect(json_object_get(document, "benchmarks"), 0, !trace, &set);
    if (status != VB_OK) {
        rerun_set_free(&set);
        return file_error(path, status);
    }
    const char **scenarios = calloc(json_object_size(set.scenarios) + 1, sizeof *scenarios);
    size_t scenario_count = 0;
    const char *scenario, *with_parameter = NULL;
    json_t *unused;
    json_object_foreach(set.scenarios, scenario, unused) if (strchr(scenario, ':')) with_parameter = scenario;
    int exit_status = -1;
    if (!scenarios) {
        exit_status = vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
    } else if (set.spec_count == 0) {
        printf("  skipped: no %scases in the file\n", json_object_size(set.skipped_allocators) ? "other " : "");
    } else if (with_parameter) {
        printf("  skipped: scenarios with a parameter (%s) are not re-run\n", with_parameter);
    } else {
        json_object_foreach(set.scenarios, scenario, unused) {
            if (vb_scenario_find(scenario)) scenarios[scenario_count++] = scenario;
            else if (json_object_set_new(set.skipped_scenarios, scenario, json_true()) == 0)
                printf("  skipped: the cases of '%s', not a built-in scenario\n", scenario);
        }
        vb_sim_rerun request = {capacity, trace, scenarios, scenario_count, set.specs, set.spec_count};
        vb_case_result *results = NULL;
        size_t count = 0;
        status = trace || scenario_count ? vb_sim_rerun_cases(&request, &results, &count) : VB_OK;
        if (status != VB_OK) {
            exit_status = file_error(path, status);
        } else if (!trace && !scenario_count) {
            printf("  skipped: no case of a built-in scenario in the file\n");
        } else {
            compare_benchmarks(differences, document, &set, results, count, tally);
            exit_status = VB_EXIT_OK;
        }
        vb_sim_rerun_cases_free(results, count);
    }
    free(scenarios);
    rerun_set_free(&set);
    return exit_status;
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

/* The sim's decision of claim `id` for the spec labelled `allocator`, or NULL. */
static const vb_decision *decision_of(const rerun_set *set, const vb_decision *decisions, size_t claim_count,
                                      const char *id, const char *allocator)
{
    for (size_t a = 0; a < set->spec_count; a++) {
        if (strcmp(set->specs[a].label, allocator) != 0) continue;
        for (size_t i = 0; i < claim_count; i++)
            if (strcmp(vb_claim_catalogue[i]->id, id) == 0) return &decisions[a * claim_count + i];
    }
    return NULL;
}

/* 1 and the number `key` of a decision (its last of that name) in *out, or
 * 0 when it has none (or not a finite one). */
static int decision_number(const vb_decision *decision, const char *key, double *out)
{
    int found = 0;
    for (size_t n = 0; n < decision->number_count; n++)
        if (strcmp(decision->numbers[n].name, key) == 0) {
            *out = decision->numbers[n].value;
            found = isfinite(*out);
        }
    return found;
}

/* Compares every claim's memory numbers with the sim's decisions. */
static void compare_claims(vb_sim_differences *differences, json_t *gpu_document, const rerun_set *set,
                           const vb_decision *decisions, size_t claim_count, check_tally *tally)
{
    size_t i;
    json_t *claim;
    json_array_foreach(json_object_get(gpu_document, "claims"), i, claim) {
        const char *id = json_string_value(json_object_get(claim, "id"));
        const char *allocator = json_string_value(json_object_get(claim, "allocator"));
        if (!id || !allocator || strcmp(allocator, "pytorch") == 0) continue;
        if (json_object_get(set->skipped_allocators, allocator)) continue;
        char name[512];
        snprintf(name, sizeof name, "claims:%s/%s", id, allocator);
        tally->cases++;
        const vb_decision *sim = decision_of(set, decisions, claim_count, id, allocator);
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
            int found = decision_number(sim, key, &y);
            if (!found) y = 0;
            if (!found || x != y) report_difference(differences, name, key, x, y, tally);
        }
        if (tally->documented + tally->undocumented > before) tally->differing_cases++;
    }
}

/* Re-decides a claims file's allocators' claims on sim and compares them;
 * the exit status, or -1: skipped with a note. */
static int check_claims(vb_sim_differences *differences, const char *path, json_t *document, check_tally *tally)
{
    rerun_set set = {0};
    vb_status status = collect(json_object_get(document, "claims"), 1, 0, &set);
    int exit_status = -1;
    if (status != VB_OK) {
        exit_status = file_error(path, status);
    } else if (set.spec_count == 0) {
        printf("  skipped: no %sallocator's claims in the file\n",
               json_object_size(set.skipped_allocators) ? "other " : "");
    } else {
        vb_decision *decisions = NULL;
        size_t claim_count = 0;
        status = vb_sim_rerun_claims(set.specs, set.spec_count, &decisions, &claim_count);
        if (status != VB_OK) {
            exit_status = file_error(path, status);
        } else {
            compare_claims(differences, document, &set, decisions, claim_count, tally);
            exit_status = VB_EXIT_OK;
        }
        free(decisions);
    }
    rerun_set_free(&set);
    return exit_status;
}

/* ------------------------------------------------------------------------ */
/* The command                                                               */
/* ------------------------------------------------------------------------ */

/* 1 if `path` is a regular file this process may read. A FIFO or device is
 * never opened: opening a FIFO waits for a writer. */
static int regular_file(const char *path)
{
    struct stat info;
    return stat(path, &info) == 0 && S_ISREG(info.st_mode) && access(path, R_OK) == 0;
}

/* 1 and, in `found`, where the trace a replay result recorded (`trace`) is
 * readable, or 0. `replay` records the path as it was given, relative to the
 * directory it ran in (the committed results/ name the repository's own
 * traces from its root), so a relative one is looked for as given (from the
 * current directory), then in the results file's directory and each one
 * above it, up to the repository root (the first that holds .git) or /:
 * check-sim works from any directory. */
static int locate_trace(const char *results_path, const char *trace, char *found, size_t capacity)
{
    snprintf(found, capacity, "%s", trace);
    if (access(trace, R_OK) == 0) return 1;
    if (trace[0] == '/') return 0;
    char directory[PATH_MAX], real[PATH_MAX];
    const char *slash = strrchr(results_path, '/');
    if (!slash) snprintf(directory, sizeof directory, ".");
    else snprintf(directory, sizeof directory, "%.*s", slash == results_path ? 1 : (int)(slash - results_path),
                  results_path);
    if (!realpath(directory, real)) return 0; /* e.g. /dev/stdin's pipe: no directory to look in */
    for (;;) {
        int root = strcmp(real, "/") == 0;
        char marker[PATH_MAX + 8];
        if ((size_t)snprintf(found, capacity, "%s/%s", root ? "" : real, trace) < capacity && access(found, R_OK) == 0)
            return 1;
        snprintf(marker, sizeof marker, "%s/.git", real);
        if (root || access(marker, F_OK) == 0) break;
        char *last = strrchr(real, '/');
        *(last == real ? last + 1 : last) = '\0'; /* its parent */
    }
    snprintf(found, capacity, "%s", trace);
    return 0;
}

/* Checks one file; returns VB_EXIT_OK (checked or skipped), 1 when a
 * difference is undocumented or the re-run failed, 2 for bad input. */
static int check_file(vb_sim_differences *differences, check_input *input, check_tally *total)
{
    const char *path = input->path;
    json_t *document;
    vb_status loaded = input_load(input, &document);
    if (loaded != VB_OK)
        return vb_cli_error(loaded == VB_ERR_INVALID ? VB_EXIT_USAGE : VB_EXIT_FAILURE, "check-sim: %s",
                            vb_last_error());
    json_t *context = json_object_get(document, "context");
    json_t *claims = json_object_get(document, "claims"), *benchmarks = json_object_get(document, "benchmarks");
    if (json_is_object(context) && json_is_array(json_object_get(document, "measurements"))) {
        vb_cli_line(stdout, "check-sim: %s", path);
        printf("  skipped: PyTorch's own measurements (lab/harnesses/pytorch_claims.py), no vrambench cases\n");
        json_decref(document);
        return VB_EXIT_OK;
    }
    /* JSON that is no results file is skipped, as --help says: the files of a
     * folder given by a glob may hold other JSON; named alone, nothing is
     * checked, which is exit 2 with its line. */
    if (!json_is_object(context) || (!json_is_array(claims) && !json_is_array(benchmarks))) {
        json_decref(document);
        vb_cli_line(stdout, "check-sim: %s", path);
        printf("  skipped: not a vrambench results file (no context, benchmarks or claims)\n");
        return VB_EXIT_OK;
    }
    vb_status typed = vb_results_check_context(path, context);
    if (typed == VB_OK && json_is_array(benchmarks)) typed = vb_results_check_unique(path, benchmarks);
    if (typed != VB_OK) {
        json_decref(document);
        return vb_cli_error(VB_EXIT_USAGE, "check-sim: %s", vb_last_error());
    }
    const char *device = json_string_value(json_object_get(context, "device_name")) ?: "?";
    json_t *trace_value = json_object_get(context, "trace_path");
    const char *trace = json_string_value(trace_value);
    if (trace_value && (!trace || !trace[0])) {
        json_decref(document);
        return vb_cli_error(VB_EXIT_USAGE, "check-sim: %s: context.trace_path is not a path (a non-empty string)",
                            path);
    }
    char trace_found[PATH_MAX + NAME_MAX + 2] = "";
    json_t *first = json_array_get(benchmarks, 0);
    const char *first_name = first ? json_string_value(json_object_get(first, "name")) : NULL;
    int replay = first_name && strncmp(first_name, "replay:", 7) == 0;
    vb_cli_line(stdout, "check-sim: %s (%s)", path, device);
    int status = VB_EXIT_OK;
    if (json_is_true(json_object_get(context, "simulated"))) {
        printf("  skipped: a sim result; check-sim compares GPU results with the sim\n");
    } else if (!json_is_array(claims) && first_name && strncmp(first_name, "microbench/", 11) == 0) {
        printf("  skipped: microbench results hold no memory figures\n");
    } else if (!json_object_get(context, "memory_pass")) {
        printf("  skipped: made before the memory pass (no context.memory_pass), so its memory figures depend on "
               "the iteration count; re-record it with this vrambench\n");
    } else if (replay && (!trace || !locate_trace(path, trace, trace_found, sizeof trace_found))) {
        vb_cli_line(stdout, "  skipped: the replayed trace %s%s%s is not here%s",
                    trace ? "'" : "(not recorded: no context.trace_path)", trace ? trace : "", trace ? "'" : "",
                    trace && trace[0] != '/' ? " (nor in the results file's folder or one above it)" : "");
    } else if (replay && !regular_file(trace_found)) {
        vb_cli_line(stdout, "  skipped: the replayed trace '%s' is not a regular file (check-sim replays only those)",
                    trace_found);
    } else {
        if (replay && strcmp(trace_found, trace) != 0) vb_cli_line(stdout, "  the replayed trace: %s", trace_found);
        check_tally tally = {0};
        int checked = json_is_array(claims) ? check_claims(differences, path, document, &tally)
                                            : check_benchmarks(differences, path, document, replay ? trace_found : NULL,
                                                               &tally);
        if (checked == VB_EXIT_OK) {
            printf("  %zu cases, %zu differ (%zu differences documented, %zu not)\n", tally.cases,
                   tally.differing_cases, tally.documented, tally.undocumented);
            total->cases += tally.cases;
            total->differing_cases += tally.differing_cases;
            total->documented += tally.documented;
            total->undocumented += tally.undocumented;
            if (tally.undocumented) status = VB_EXIT_FAILURE;
        } else if (checked > 0) {
            status = checked;
        }
    }
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

/* Reads `input`'s group, date and entry names. Only files this check
 * compares take part: a file without a memory pass (torch_ab.py's, older
 * results) must not hide a newer bench file; it is then checked, and
 * reported. A file that cannot be read takes no part (its check says why). */
static void read_newest_info(check_input *input, newest_info *info)
{
    memset(info, 0, sizeof *info);
    json_t *document = NULL;
    input_load(input, &document);
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
    int newest = 0, first = 1, count = 0;
    const char *differences_path = NULL;
    /* Options may come after the files too (`check-sim FILE --newest`); after
     * `--` every word is a file. */
    const char **files = calloc((size_t)argc, sizeof *files);
    if (!files) return vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
    for (int only_files = 0; first < argc; first++) {
        if (only_files || argv[first][0] != '-' || !argv[first][1]) {
            files[count++] = argv[first];
            continue;
        }
        if (strcmp(argv[first], "--help") == 0 || strcmp(argv[first], "-h") == 0) {
            puts(CHECK_SIM_USAGE "\n"
                 "  re-runs every case of GPU result files (run, replay, claims) on the simulated device and\n"
                 "  lists each case whose memory figures differ; exit 1 if a difference is not documented.\n"
                 "  --newest: a file is skipped when a newer one of its kind and device (and trace) holds\n"
                 "            all of its cases;\n"
                 "  --differences FILE: the documented differences (default: " VB_SIM_DIFFERENCES_ENV ", else\n"
                 "            " VB_SIM_DIFFERENCES_PATH " found from the binary's folder: the repository's, or\n"
                 "            PREFIX/share/vrambench after make install);\n"
                 "  JSON files (.json.gz too) that are not results are skipped (a folder's files may be given); a\n"
                 "  case whose allocator is not built in (external:PATH.so) is skipped: a results file never loads\n"
                 "  one; a replay's relative trace path is looked for from the results file's folder up too; exit 2\n"
                 "  if nothing could be checked\n"
                 "  -h, --help: this help\n\n"
                 "examples:\n"
                 "  vrambench check-sim results/nvidia-h100-80gb-hbm3-20261123.json\n"
                 "  vrambench check-sim --newest results/*.json results/*/*.json.gz");
            free(files);
            return VB_EXIT_OK;
        }
        if (strcmp(argv[first], "--newest") == 0) {
            newest = 1;
        } else if (strcmp(argv[first], "--differences") == 0 && first + 1 < argc) {
            if (differences_path) { /* a second would silently replace the first */
                free(files);
                return vb_cli_error(VB_EXIT_USAGE, "check-sim: --differences given twice ('%s', then '%s')",
                                    differences_path, argv[first + 1]);
            }
            differences_path = argv[++first];
        } else if (strcmp(argv[first], "--") == 0) {
            only_files = 1;
        } else {
            static const char *const known[] = {"--newest", "--differences", "--help", NULL};
            char hint[96];
            free(files);
            return vb_cli_error(VB_EXIT_USAGE, "check-sim: unknown option or missing value: '%s'%s (%s)", argv[first],
                                vb_did_you_mean(argv[first], known, hint, sizeof hint), CHECK_SIM_USAGE);
        }
    }
    if (count < 1) {
        free(files);
        return vb_cli_error(VB_EXIT_USAGE, CHECK_SIM_USAGE);
    }
    char located[4096];
    vb_sim_differences differences;
    vb_status status = vb_sim_differences_locate(differences_path, located, sizeof located);
    if (status == VB_OK) status = vb_sim_differences_load(located, &differences);
    if (status != VB_OK) {
        free(files);
        return vb_cli_status_error(status);
    }
    check_input *inputs = calloc((size_t)count, sizeof *inputs);
    newest_info *infos = newest ? calloc((size_t)count, sizeof *infos) : NULL;
    if (!inputs || (newest && !infos)) {
        free(inputs);
        free(files);
        vb_sim_differences_free(&differences);
        return vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
    }
    for (int i = 0; i < count; i++) inputs[i].path = files[i];
    free(files);
    for (int i = 0; newest && i < count; i++) read_newest_info(&inputs[i], &infos[i]);
    check_tally total = {0};
    int exit_status = VB_EXIT_OK;
    for (int i = 0; i < count; i++) {
        if (newest && superseded(infos, count, i)) {
            vb_cli_line(stdout, "check-sim: %s", inputs[i].path);
            printf("  skipped: a newer file of its kind and device is checked (--newest)\n");
        } else {
            int file_status = check_file(&differences, &inputs[i], &total);
            if (file_status > exit_status) exit_status = file_status;
        }
        input_release(&inputs[i]);
    }
    for (int i = 0; newest && i < count; i++) json_decref(infos[i].names);
    free(infos);
    free(inputs);
    printf("check-sim: %zu cases checked, %zu differ; %zu differences undocumented\n", total.cases,
           total.differing_cases, total.undocumented);
    /* A documented difference that no longer occurs should leave the data
     * file (or occurs only in files not given here): say which, when
     * anything was compared (with nothing, every one would be named). */
    for (size_t i = 0; total.cases && i < differences.match_count; i++)
        if (!differences.matches[i].uses)
            printf("check-sim: documented difference not seen in these files: %s %s\n",
                   differences.matches[i].case_pattern, differences.matches[i].figure_pattern);
    vb_sim_differences_free(&differences);
    /* Files were named to be checked: a pass with nothing compared (each one
     * skipped, its trace not here, ...) would be a silent success. */
    if (exit_status == VB_EXIT_OK && total.cases == 0)
        exit_status = vb_cli_error(VB_EXIT_USAGE, "check-sim: nothing was checked: no case of the files given could "
                                                  "be re-run on sim (each file's note above says why)");
    return exit_status;
}
