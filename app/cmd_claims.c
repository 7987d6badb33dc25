/* vrambench — `vrambench claims`: every claim of the catalogue
 * (app/claims.c) decided for every allocator, and for PyTorch's own
 * allocator from measurements lab/harnesses/pytorch_claims.py recorded on a GPU.
 *
 * Each claim's scenario runs once per allocator (one iteration on a fresh
 * allocator, through the runner), and the claim's criterion reads that run's
 * timeline and counters. Output: a table (claims as rows, allocators as
 * columns) and, with --out, a JSON file:
 *   {"context": {...}, "catalogue": [{id, documents, claim, scenario,
 *    measurement, criterion}], "claims": [{id, documents, claim, allocator,
 *    verdict, reason, numbers: {...}, device_name, simulated}]}
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "claims.h"
#include "cli.h"
#include "base/measure.h"
#include "context.h"
#include "input_file.h"
#include "json_report.h"
#include "output_file.h"
#include "output_path.h"
#include "pytorch_measurements.h"
#include "runner.h"

enum { OPT_ALLOCATOR, OPT_DEVICE, OPT_CLAIM, OPT_PYTORCH, OPT_OUT, OPT_FORCE, OPT_QUIET, OPTION_COUNT };
static const vb_cli_option options[OPTION_COUNT + 1] = {
    [OPT_ALLOCATOR] = {"--allocator", NULL, "SPEC[,SPEC]|all",
                       "the allocators, one column each (default all; vrambench list allocators); SPEC as in\n"
                       "vrambench run --help, e.g. --allocator caching,expandable",
                       0},
    [OPT_DEVICE] = {"--device", NULL, "auto|cuda|sim",
                    "where the scenarios run (default auto: the GPU when one is found, else the simulated\n"
                    "device, where claims about time or the CUDA context cannot be decided)",
                    0},
    [OPT_CLAIM] = {"--claim", NULL, "ID[,ID]|all",
                   "the claims, one row each (default all; their ids: vrambench list names), e.g.\n"
                   "--claim view_keeps_storage,synchronize_releases_memory",
                   0},
    [OPT_PYTORCH] = {"--pytorch", NULL, "MEASUREMENTS.json",
                     "PyTorch's own allocator as one more column, from lab/harnesses/pytorch_claims.py's\n"
                     "measurements on a GPU, e.g. --pytorch results/pytorch-claims-nvidia-h200-20261121.json",
                     0},
    [OPT_OUT] = {"--out", NULL, "FILE.json",
                 "every decision with its reason and numbers as JSON.\n" VB_CLI_OUT_TEMPLATE,
                 0},
    [OPT_FORCE] = VB_CLI_FORCE_OPTION,
    [OPT_QUIET] = {"--quiet", NULL, NULL, "errors only: no note, progress, table or 'wrote FILE'", 0},
    [OPTION_COUNT] = {NULL, NULL, NULL, NULL, 0},
};

static const vb_cli_usage usage = {
    "claims", NULL,
    "Decides every claim of the source documents for every allocator: each claim's scenario runs once per\n"
    "allocator and the claim's criterion reads its timeline and counters. A table (claims x allocators:\n"
    "holds, NO, depends, n/a) and, with --out, the JSON.",
    options, 0,
    "example:\n  vrambench claims --allocator caching,expandable --device sim --out out/claims-{device}.json"};

typedef struct claims_args {
    const char *allocators, *device, *claims, *pytorch, *out;
    int quiet, force;
} claims_args;

/* One column of the table: an allocator (or "pytorch") and its decisions,
 * indexed like the selected claims. */
typedef struct column {
    char label[512];
    char device_name[128];
    int simulated;
    vb_decision *decisions;
} column;

typedef struct claims_state {
    vb_name_list claim_names;
    const vb_claim **claims;
    size_t claim_count;
    vb_allocator_spec *specs;
    size_t spec_count;
    column *columns;
    size_t column_count;
    vb_device *device;
    json_t *document;
} claims_state;

/* ======================================================================== */
/* Arguments                                                                */
/* ======================================================================== */

static int parse_args(int argc, char **argv, claims_args *args)
{
    *args = (claims_args){"all", "auto", "all", NULL, NULL, 0, 0};
    vb_cli_parser parser;
    vb_cli_parser_init(&parser, &usage, argc, argv);
    const char *value;
    for (int option; (option = vb_cli_next(&parser, &value)) != VB_CLI_END;) {
        switch (option) {
        case VB_CLI_STOP: return vb_cli_stopped(&parser);
        case OPT_ALLOCATOR: args->allocators = value; break;
        case OPT_DEVICE: args->device = value; break;
        case OPT_CLAIM: args->claims = value; break;
        case OPT_PYTORCH: args->pytorch = value; break;
        case OPT_OUT: args->out = value; break;
        case OPT_FORCE: args->force = 1; break;
        case OPT_QUIET: args->quiet = 1; break;
        }
    }
    return VB_EXIT_OK;
}

/* The catalogue's ids, NULL-terminated (static storage). */
static const char *const *claim_ids(void)
{
    static const char *ids[64];
    for (size_t i = 0; vb_claim_catalogue[i] && i + 1 < sizeof ids / sizeof ids[0]; i++)
        ids[i] = vb_claim_catalogue[i]->id;
    return ids;
}

/* Adds an empty column; NULL on host OOM. */
static column *add_column(claims_state *state, const char *label, const char *device_name, int simulated)
{
    column *columns = realloc(state->columns, (state->column_count + 1) * sizeof *columns);
    if (!columns) return NULL;
    state->columns = columns;
    column *c = &columns[state->column_count];
    memset(c, 0, sizeof *c);
    c->decisions = calloc(state->claim_count, sizeof *c->decisions);
    if (!c->decisions) return NULL;
    snprintf(c->label, sizeof c->label, "%s", label);
    snprintf(c->device_name, sizeof c->device_name, "%s", device_name);
    c->simulated = simulated;
    state->column_count++;
    return c;
}

/* Decides every selected claim measured by `scenario` into `c`. */
static void decide_for_scenario(claims_state *state, column *c, const char *scenario, const vb_measurement *m)
{
    for (size_t i = 0; i < state->claim_count; i++)
        if (strcmp(state->claims[i]->scenario, scenario) == 0) vb_claim_decide(state->claims[i], m, &c->decisions[i]);
}

/* 1 if a claim before index `i` has the same scenario (it already ran). */
static int scenario_seen(const claims_state *state, size_t i)
{
    for (size_t j = 0; j < i; j++)
        if (strcmp(state->claims[j]->scenario, state->claims[i]->scenario) == 0) return 1;
    return 0;
}

/* ======================================================================== */
/* Our allocators                                                           */
/* ======================================================================== */

/* Runs each needed scenario once on `spec` and decides its claims. */
static int measure_allocator(claims_state *state, const claims_args *args, const vb_allocator_spec *spec,
                             size_t *done, size_t total, uint64_t started)
{
    vb_device_info info;
    state->device->ops->info(state->device, &info);
    column *c = add_column(state, spec->label, info.name, info.simulated);
    if (!c) return vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
    for (size_t i = 0; i < state->claim_count; i++) {
        if (scenario_seen(state, i)) continue;
        const vb_scenario *scenario = vb_scenario_find(state->claims[i]->scenario);
        if (!scenario)
            return vb_cli_error(VB_EXIT_FAILURE, "claims: claim %s names scenario '%s', which is not built in",
                                state->claims[i]->id, state->claims[i]->scenario);
        vb_status status = vb_claims_measure(state->device, scenario, spec, state->claims, state->claim_count,
                                             c->decisions);
        if (status != VB_OK) return vb_cli_error(VB_EXIT_FAILURE, "claims: %s", vb_last_error());
        ++*done;
        if (!args->quiet)
            fprintf(stderr, "[%zu/%zu] %s/%s (elapsed %.1f s)\n", *done, total, scenario->name, spec->label,
                    (double)(vb_now_ns() - started) / 1e9);
    }
    return VB_EXIT_OK;
}

/* ======================================================================== */
/* PyTorch's measurements                                                   */
/* ======================================================================== */

/* The most a measurements file may hold (a recorded one is a few hundred KiB). */
#define MAX_MEASUREMENTS_BYTES ((size_t)256 << 20)

/* Loads lab/harnesses/pytorch_claims.py's file (read once, app/input_file.h;
 * parsed by app/pytorch_measurements.h) and decides every selected claim for
 * the "pytorch" column. Bad input: one error line, exit 2. */
static int decide_pytorch(claims_state *state, const char *path)
{
    char *bytes = NULL;
    size_t length = 0;
    vb_pytorch_measurements measurements = {0};
    vb_status status = vb_input_read_all(path, MAX_MEASUREMENTS_BYTES, &bytes, &length);
    if (status == VB_OK) status = vb_pytorch_measurements_parse(path, bytes, length, &measurements);
    free(bytes);
    if (status != VB_OK) {
        vb_pytorch_measurements_free(&measurements);
        return vb_cli_error(status == VB_ERR_HOST_OOM ? VB_EXIT_FAILURE : VB_EXIT_USAGE, "claims: %s", vb_last_error());
    }
    column *c = add_column(state, "pytorch", measurements.device_name, 0);
    for (size_t i = 0; i < state->claim_count && c; i++)
        c->decisions[i] = (vb_decision){.verdict = VB_VERDICT_UNDECIDABLE, .reason = "not measured in PyTorch"};
    for (size_t i = 0; i < measurements.count && c; i++) {
        vb_measurement m = vb_pytorch_measurement_view(&measurements.items[i]);
        decide_for_scenario(state, c, measurements.items[i].scenario, &m);
    }
    vb_pytorch_measurements_free(&measurements);
    return c ? VB_EXIT_OK : vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
}

/* ======================================================================== */
/* Output                                                                   */
/* ======================================================================== */

/* A verdict in a table cell. */
static const char *cell(vb_verdict verdict)
{
    switch (verdict) {
    case VB_VERDICT_HOLDS: return "holds";
    case VB_VERDICT_DOES_NOT_HOLD: return "NO";
    case VB_VERDICT_DEPENDS: return "depends";
    case VB_VERDICT_UNDECIDABLE: return "n/a";
    }
    return "?";
}

/* Claims as rows, allocators as columns. */
static void print_table(const claims_state *state)
{
    printf("%-52s", "claim (documents)");
    for (size_t c = 0; c < state->column_count; c++) printf(" %-10.10s", state->columns[c].label);
    printf("\n");
    for (size_t i = 0; i < state->claim_count; i++) {
        char title[128];
        snprintf(title, sizeof title, "%s (%s)", state->claims[i]->id, state->claims[i]->documents);
        printf("%-52.52s", title);
        for (size_t c = 0; c < state->column_count; c++) printf(" %-10s", cell(state->columns[c].decisions[i].verdict));
        printf("\n");
    }
    printf("holds = the claim holds; NO = it does not; depends = it does for some cases of the scenario; "
           "n/a = the measurement cannot decide it (see the reason in the JSON)\n");
    /* Each column's device, runs of one device together ("cuda..stitch: the
     * simulated device; pytorch: NVIDIA H200"): PyTorch's column was measured
     * on its own machine (--pytorch), which nothing else here names. */
    char devices[1024] = "devices:";
    size_t used = strlen(devices);
    for (size_t first = 0, c = 0; c < state->column_count && used < sizeof devices; c++) {
        const column *one = &state->columns[c], *next = c + 1 < state->column_count ? &state->columns[c + 1] : NULL;
        if (next && strcmp(next->device_name, one->device_name) == 0 && next->simulated == one->simulated) continue;
        used += (size_t)snprintf(devices + used, sizeof devices - used, "%s %s%s%s: %s", first ? ";" : "",
                                 state->columns[first].label, c > first ? ".." : "", c > first ? one->label : "",
                                 one->simulated ? "the simulated device" : one->device_name);
        first = c + 1;
    }
    vb_cli_line(stdout, "%s", devices); /* a device name as the file gave it: control characters shown as '?' */
}

/* Adds the catalogue and every decision to the document; 0 on success. */
static int fill_document(claims_state *state)
{
    json_t *catalogue = json_array(), *claims = json_array();
    int failed = !catalogue || !claims;
    for (size_t i = 0; i < state->claim_count && !failed; i++) {
        const vb_claim *claim = state->claims[i];
        failed |= json_array_append_new(catalogue, json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "id", claim->id,
                                                              "documents", claim->documents, "claim", claim->claim,
                                                              "scenario", claim->scenario, "measurement",
                                                              claim->measurement, "criterion", claim->criterion));
    }
    for (size_t c = 0; c < state->column_count && !failed; c++)
        for (size_t i = 0; i < state->claim_count && !failed; i++) {
            const vb_decision *d = &state->columns[c].decisions[i];
            json_t *numbers = json_object();
            for (size_t n = 0; numbers && n < d->number_count; n++) {
                json_t *number = vb_json_number(d->numbers[n].value);
                failed |= json_object_set_new(numbers, d->numbers[n].name, number ? number : json_null());
            }
            json_t *row = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:s, s:b}", "id", state->claims[i]->id,
                                    "documents", state->claims[i]->documents, "claim", state->claims[i]->claim,
                                    "allocator", state->columns[c].label, "verdict", vb_verdict_name(d->verdict),
                                    "reason", d->reason, "numbers", numbers ? numbers : json_object(),
                                    "device_name", state->columns[c].device_name, "simulated",
                                    state->columns[c].simulated);
            failed |= !row || json_array_append_new(claims, row);
        }
    for (size_t i = 0; i < state->claim_count && !failed; i++) {
        const vb_scenario *scenario = vb_scenario_find(state->claims[i]->scenario);
        if (scenario) failed |= vb_report_add_names(state->document, scenario->name, scenario) != 0;
    }
    failed |= json_object_set_new(state->document, "catalogue", catalogue);
    failed |= json_object_set_new(state->document, "claims", claims);
    json_object_del(state->document, "benchmarks");
    return failed;
}

/* ======================================================================== */
/* The command                                                              */
/* ======================================================================== */

/* Resolves the claim names into catalogue entries. */
static int select_claims(claims_state *state, const char *spec)
{
    int exit_status = vb_cli_names(spec, "claim", claim_ids(), &state->claim_names);
    if (exit_status != VB_EXIT_OK) return exit_status;
    state->claims = calloc(state->claim_names.count, sizeof *state->claims);
    if (!state->claims) return vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
    for (size_t i = 0; i < state->claim_names.count; i++) state->claims[i] = vb_claim_find(state->claim_names.names[i]);
    state->claim_count = state->claim_names.count;
    return VB_EXIT_OK;
}

/* Frees everything the state holds. */
static void release_state(claims_state *state)
{
    for (size_t c = 0; c < state->column_count; c++) free(state->columns[c].decisions);
    free(state->columns);
    free(state->claims);
    vb_name_list_free(&state->claim_names);
    vb_allocator_spec_list_free(state->specs, state->spec_count);
    json_decref(state->document);
    vb_device_close(state->device);
}

/* Measures, decides, prints and writes. */
static int run_claims(claims_state *state, const claims_args *args)
{
    char out_path[4096] = "";
    vb_device_info info;
    state->device->ops->info(state->device, &info);
    if (args->out) {
        vb_named_file files[] = {{"--pytorch", args->pytorch, 0}, {"--out", out_path, 1}};
        vb_status status = vb_report_output_path(args->out, &info, args->force, out_path, sizeof out_path);
        if (status == VB_OK) status = vb_output_check_distinct(files, sizeof files / sizeof files[0]);
        if (status != VB_OK) return vb_cli_status_error(status);
    }
    int exit_status = VB_EXIT_OK;
    if (args->pytorch) { /* checked first: a bad file should not cost a run */
        exit_status = decide_pytorch(state, args->pytorch);
        if (exit_status != VB_EXIT_OK) return exit_status;
    }
    if (info.simulated && !args->quiet)
        fputs("vrambench: claims on the SIMULATED device: memory figures are exact for each policy; claims about "
              "time or the CUDA context are undecidable here\n", stderr);
    size_t scenarios = 0, done = 0;
    for (size_t i = 0; i < state->claim_count; i++) scenarios += !scenario_seen(state, i);
    uint64_t started = vb_now_ns();
    for (size_t a = 0; a < state->spec_count && exit_status == VB_EXIT_OK; a++)
        exit_status = measure_allocator(state, args, &state->specs[a], &done, scenarios * state->spec_count, started);
    if (exit_status != VB_EXIT_OK) return exit_status;
    if (args->pytorch && state->column_count > 0) { /* PyTorch's column last, next to ours */
        column pytorch = state->columns[0];
        memmove(state->columns, state->columns + 1, (state->column_count - 1) * sizeof *state->columns);
        state->columns[state->column_count - 1] = pytorch;
    }
    if (!args->quiet) print_table(state);
    vb_cli_flush_stdout();
    if (!args->out) return VB_EXIT_OK;
    state->document = vb_report_document(vb_report_context(state->device, NULL, state->specs, state->spec_count));
    if (!state->document || fill_document(state) != 0) return vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
    vb_status status = vb_report_write(state->document, out_path);
    if (status != VB_OK) return vb_cli_status_error(status);
    if (!args->quiet) vb_cli_line(stderr, "vrambench: wrote %s", out_path);
    return VB_EXIT_OK;
}

int vb_cmd_claims(int argc, char **argv)
{
    claims_args args;
    int exit_status = parse_args(argc, argv, &args);
    if (exit_status != VB_EXIT_OK) return exit_status == VB_EXIT_HELP ? VB_EXIT_OK : exit_status;
    claims_state state = {0};
    exit_status = select_claims(&state, args.claims);
    if (exit_status == VB_EXIT_OK) {
        vb_status status = vb_allocator_spec_list_parse(args.allocators, &state.specs, &state.spec_count);
        if (status == VB_OK) status = vb_device_open(args.device, NULL, &state.device);
        exit_status = status == VB_OK ? run_claims(&state, &args) : vb_cli_status_error(status);
    }
    release_state(&state);
    return exit_status;
}
