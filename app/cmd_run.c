/* vrambench — `vrambench run`: every named scenario x every named allocator
 * spec on one device, results as Google-Benchmark-compatible JSON.
 *
 * Everything that can be wrong with the command line is checked before the
 * first case runs (names, specs, --config keys and values by creating each
 * allocator once, the output's writability), so a bad invocation costs one
 * error line and exit 2, not a long run. A case that fails mid-run fails the
 * command (exit 1) and no result file is written. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/closest.h"
#include "cli.h"
#include "base/measure.h"
#include "console_report.h"
#include "context.h"
#include "json_report.h"
#include "output_file.h"
#include "output_path.h"
#include "runner.h"
#include "replay.h"
#include "shard.h"
#include "snapshot.h"
#include "text.h"
#include "trace.h"

/* The options of `run` and `replay` (one table: RUN and REPLAY say which
 * belong to one of them only). */
enum { RUN = 1, REPLAY = 2 };
enum {
    OPT_SCENARIO, OPT_PARAM, OPT_ALLOCATOR, OPT_PYTORCH_CONF, OPT_CONFIG, OPT_DEVICE, OPT_SIM_CAPACITY,
    OPT_SIM_PLACEMENT, OPT_REPETITIONS, OPT_MIN_TIME, OPT_MAX_ITERATIONS, OPT_OUT, OPT_FORCE, OPT_SNAPSHOT, OPT_FAIL_ON_OOM, OPT_QUIET,
    OPT_SHARD,
    OPTION_COUNT
};
static const vb_cli_option options[OPTION_COUNT + 1] = {
    [OPT_SCENARIO] = {"--scenario", NULL, "NAME[,NAME]|all",
                      "the scenarios (default all; vrambench list scenarios), e.g. --scenario views,random_mix", RUN},
    [OPT_PARAM] = {"--param", NULL, "VALUE",
                   "the scenario's parameter, with exactly one --scenario; random_mix reads it (the others take\n"
                   "none): allocations=N,max_size_mb=M,max_usage_mb=U,seed=S, any of them (defaults 1000, 64,\n"
                   "16000, 1), e.g. --scenario random_mix --param allocations=500,seed=7",
                   RUN},
    [OPT_ALLOCATOR] = {"--allocator", NULL, "SPEC[,SPEC]|all",
                       "the allocators (default all; vrambench list allocators). SPEC: a name, NAME[KEY=VALUE,...]\n"
                       "(caching[max_split_size_mb=256]), pytorch[CONF] in PyTorch's own syntax\n"
                       "(pytorch[expandable_segments:True]) or external:PATH.so, e.g. --allocator caching,bfc",
                       0},
    [OPT_PYTORCH_CONF] = {"--pytorch-alloc-conf", NULL, "CONF",
                          "PYTORCH_ALLOC_CONF's value, run as pytorch[CONF] (alone unless --allocator names\n"
                          "others too), e.g. --pytorch-alloc-conf expandable_segments:True",
                          0},
    [OPT_CONFIG] = {"--config", NULL, "ALLOC.KEY=VALUE",
                    "an option of every spec of allocator ALLOC (repeatable; its keys: vrambench list allocators),\n"
                    "e.g. --config caching.max_split_size_mb=256",
                    VB_CLI_REPEATS},
    [OPT_DEVICE] = {"--device", NULL, "auto|cuda|sim",
                    "where it runs (default auto: the GPU when one is found, else the simulated device, which\n"
                    "says so first: its memory figures are exact, its times are host-side model times)",
                    0},
    [OPT_SIM_CAPACITY] = {"--sim-capacity", NULL, "SIZE",
                          "the simulated device's memory (default 80GiB); on a GPU, a cap: memory past it is out of\n"
                          "memory. At least 2MiB, one driver page; a replay's at least its first allocation needs.\n"
                          VB_CLI_SIZE_RULE,
                          0},
    [OPT_SIM_PLACEMENT] = {"--sim-placement", NULL, "top-down|rising",
                           "where the simulated driver puts cudaMalloc's fresh addresses (default top-down, as the\n"
                           "driver mostly does; rising: the other extreme tune also tries, docs/tune.md). It decides\n"
                           "PyTorch's best-fit ties between equal free blocks, e.g. --sim-placement rising",
                           0},
    [OPT_REPETITIONS] = {"--repetitions", NULL, "N",
                         "timed repetitions of each case, each on a fresh allocator (1 to 1000; default 1),\n"
                         "e.g. --repetitions 3",
                         0},
    [OPT_MIN_TIME] = {"--min-time", NULL, "SECONDS",
                      "real time the first repetition's iterations add up to (0 to 3600 seconds; default 0.1 for\n"
                      "run, 0 for replay: one pass), e.g. --min-time 0.5",
                      0},
    [OPT_MAX_ITERATIONS] = {"--max-iterations", NULL, "N",
                            "at most this many timed iterations per repetition (1 to 1e9; default 1000)", 0},
    [OPT_OUT] = {"--out", NULL, "FILE.json",
                 "the results as Google Benchmark JSON (docs/results-json.md).\n" VB_CLI_OUT_TEMPLATE,
                 0},
    [OPT_FORCE] = VB_CLI_FORCE_OPTION,
    [OPT_SNAPSHOT] = {"--snapshot", NULL, "FILE.pickle",
                      "the replay as a PyTorch memory snapshot too (torch.cuda.memory._dump_snapshot's format;\n"
                      "exactly one allocator), e.g. --snapshot gpt2.pickle",
                      REPLAY},
    [OPT_FAIL_ON_OOM] = {"--fail-on-oom", NULL, NULL,
                         "exit 3 when an allocator ran out of memory (after writing the results); capped_training's\n"
                         "out-of-memory, its search under its own 1 GiB cap, is its measurement and does not count",
                         0},
    [OPT_QUIET] = {"--quiet", NULL, NULL, "errors only: no banner, progress, table, out-of-memory note or 'wrote FILE'",
                   0},
    [OPT_SHARD] = {"--shard", NULL, "I/N",
                   "only the I-th of N shares of the cases (round-robin); `vrambench merge` joins the N files into\n"
                   "one (docs/fleet.md), e.g. --shard 2/8",
                   0},
    [OPTION_COUNT] = {NULL, NULL, NULL, NULL, 0},
};

#define TABLE_NOTES                                                                                           \
    "The table: per case, peak requested and reserved MiB, overhead (reserved / requested), driver calls,\n" \
    "OOMs (allocations that found no memory; the first one's size, and trace line, below the table) and\n"  \
    "the time per iteration: on a GPU wall time and GPU time, on the simulated device the host-side time\n"  \
    "of the allocator and the device's model only (no GPU time exists there).\n"

static const vb_cli_usage run_usage = {
    "run", NULL, "Runs every named scenario x every named allocator on one device: a summary table, and the\n"
                 "results as Google Benchmark JSON with --out.",
    options, RUN,
    TABLE_NOTES "\nexamples:\n"
                "  vrambench run --scenario views,random_mix --allocator caching,bfc --device sim\n"
                "  vrambench run --repetitions 3 --out out/results/{device}-{date}.json"};

static const vb_cli_usage replay_usage = {
    "replay", "TRACE", "Replays a recorded allocation trace against each allocator: a summary table, and the\n"
                       "results as Google Benchmark JSON with --out.\n"
                       "TRACE: a vbtrace (docs/trace-format.md) or an RMM log CSV, either gzip'd (.gz) or not;\n"
                       "/dev/stdin reads a pipe.",
    options, REPLAY,
    TABLE_NOTES "\nexamples:\n"
                "  vrambench replay tests/fixtures/traces/gpt2.trace.gz --allocator caching,expandable\n"
                "  vrambench replay gpt2.trace.gz --allocator caching --sim-capacity 10GiB --fail-on-oom"};

#define MAX_CONFIGS 64
#define DRIVER_PAGE (2 * VB_MiB) /* the driver's smallest allocation (base/driver_pages.h) */

typedef struct run_args {
    const vb_cli_usage *usage;
    const char *scenarios, *allocators, *device, *out, *param;
    const char *trace;         /* `vrambench replay`: the trace replayed instead of scenarios */
    char trace_label[256];     /* "replay:<file name>" */
    const char *configs[MAX_CONFIGS];
    size_t config_count;
    vb_runner_options options;
    uint64_t sim_capacity;
    int sim_capacity_given;
    const char *sim_capacity_text; /* as given: a size shown rounded may read as the limit it misses */
    vb_sim_placement sim_placement;
    int sim_placement_given;
    int quiet;
    int force;                 /* --force: a templated --out may replace a file */
    int fail_on_oom;           /* exit 3 when any case counted an OOM */
    int allocators_given;      /* --allocator was on the command line */
    const char *pytorch_conf;  /* --pytorch-alloc-conf */
    const char *snapshot;      /* --snapshot: the replay as a PyTorch memory snapshot pickle */
    char *allocator_list;      /* --allocator with pytorch[CONF] added (owned) */
    vb_shard shard;            /* --shard I/N (app/shard.h) */
} run_args;

/* ======================================================================== */
/* Option values                                                            */
/* ======================================================================== */

/* Parses the command line into `args`; exit status 2 with one error line on
 * anything unknown or malformed, VB_EXIT_HELP after --help. */
static int parse_args(int argc, char **argv, int trace_command, run_args *args)
{
    memset(args, 0, sizeof *args);
    args->usage = trace_command ? &replay_usage : &run_usage;
    const char *command = args->usage->command;
    args->scenarios = "all";
    args->allocators = "all";
    args->device = "auto";
    args->options = vb_runner_default_options();
    if (trace_command) args->options.min_time_s = 0; /* one pass over the trace */
    args->shard = VB_SHARD_ALL;
    vb_cli_parser parser;
    vb_cli_parser_init(&parser, args->usage, argc, argv);
    const char *value;
    uint64_t number;
    for (int option; (option = vb_cli_next(&parser, &value)) != VB_CLI_END;) {
        switch (option) {
        case VB_CLI_STOP: return vb_cli_stopped(&parser);
        case VB_CLI_ARGUMENT:
            if (args->trace)
                return vb_cli_error(VB_EXIT_USAGE, "replay: one TRACE only ('%s', then '%s')", args->trace, value);
            args->trace = value;
            break;
        case OPT_SCENARIO: args->scenarios = value; break;
        case OPT_PARAM: args->param = value; break;
        case OPT_ALLOCATOR:
            args->allocators = value;
            args->allocators_given = 1;
            break;
        case OPT_PYTORCH_CONF: args->pytorch_conf = value; break;
        case OPT_SHARD:
            if (vb_shard_parse(value, &args->shard) != 0)
                return vb_cli_error(VB_EXIT_USAGE, "%s: bad --shard '%s' (I/N with 1 <= I <= N, e.g. 2/8)",
                                    trace_command ? "replay" : "run", value);
            break;
        case OPT_CONFIG:
            if (args->config_count == MAX_CONFIGS)
                return vb_cli_error(VB_EXIT_USAGE, "%s: more than %d --config options", command, MAX_CONFIGS);
            args->configs[args->config_count++] = value;
            break;
        case OPT_DEVICE: args->device = value; break;
        case OPT_SIM_CAPACITY:
            if (vb_cli_parse_capacity(command, "--sim-capacity", value, 0, &args->sim_capacity) != 0)
                return VB_EXIT_USAGE;
            args->sim_capacity_given = 1;
            args->sim_capacity_text = value;
            break;
        case OPT_SIM_PLACEMENT: {
            static const char *const placements[] = {"top-down", "rising", NULL};
            if (strcmp(value, placements[0]) != 0 && strcmp(value, placements[1]) != 0) {
                char hint[96];
                return vb_cli_error(VB_EXIT_USAGE, "%s: bad --sim-placement '%s' (top-down or rising)%s", command,
                                    value, vb_did_you_mean(value, placements, hint, sizeof hint));
            }
            args->sim_placement = strcmp(value, "rising") == 0 ? VB_SIM_PLACE_RISING : VB_SIM_PLACE_TOP_DOWN;
            args->sim_placement_given = 1;
            break;
        }
        case OPT_REPETITIONS:
            if (vb_cli_parse_whole(value, 1, 1000, &number) != 0)
                return vb_cli_error(VB_EXIT_USAGE, "%s: bad --repetitions '%s' (a whole number from 1 to 1000)",
                                    command, value);
            args->options.repetitions = (unsigned)number;
            break;
        case OPT_MIN_TIME: {
            double seconds = 0;
            if (vb_cli_parse_decimal(value, NULL, 0, 3600, &seconds) != 0)
                return vb_cli_error(VB_EXIT_USAGE, "%s: bad --min-time '%s' (seconds, from 0 to 3600)", command,
                                    value);
            args->options.min_time_s = seconds;
            break;
        }
        case OPT_MAX_ITERATIONS:
            if (vb_cli_parse_whole(value, 1, 1000000000, &args->options.max_iterations) != 0)
                return vb_cli_error(VB_EXIT_USAGE, "%s: bad --max-iterations '%s' (a whole number from 1 to 1e9)",
                                    command, value);
            break;
        case OPT_OUT: args->out = value; break;
        case OPT_FORCE: args->force = 1; break;
        case OPT_SNAPSHOT: args->snapshot = value; break;
        case OPT_FAIL_ON_OOM: args->fail_on_oom = 1; break;
        case OPT_QUIET: args->quiet = 1; break;
        }
    }
    if (trace_command && !args->trace)
        return vb_cli_error(VB_EXIT_USAGE, "replay: which TRACE? (vrambench replay --help)");
    return VB_EXIT_OK;
}

/* ======================================================================== */
/* Names                                                                    */
/* ======================================================================== */

/* The registered scenario names, NULL-terminated (static storage). */
static const char *const *scenario_names(void)
{
    static const char *names[128];
    if (!names[0])
        for (size_t i = 0; vb_scenario_registry[i] && i + 1 < sizeof names / sizeof names[0]; i++)
            names[i] = vb_scenario_registry[i]->name;
    return names;
}

/* Where ALLOC ends in --config ALLOC.KEY=VALUE: at the '.' after the
 * longest allocator run whose name the text starts with and that leaves a
 * KEY without a '.' before the first '=' (so "external:/opt/lib.v2/x.so"
 * is addressed whole, dots and all); else at the last '.' before the first
 * '=' (keys never hold a dot). NULL when there is no such '.'. */
static const char *config_dot(const char *text, const vb_allocator_spec *specs, size_t spec_count)
{
    const char *best = NULL;
    for (size_t s = 0; s < spec_count; s++) {
        size_t length = strlen(specs[s].name);
        if (strncmp(text, specs[s].name, length) != 0 || text[length] != '.') continue;
        const char *key = text + length + 1, *equals = strchr(key, '=');
        if (!equals || equals == key || memchr(key, '.', (size_t)(equals - key))) continue;
        if (!best || text + length > best) best = text + length;
    }
    if (best) return best;
    const char *equals = strchr(text, '=');
    const char *dot = NULL;
    for (const char *c = text; *c && (!equals || c < equals); c++)
        if (*c == '.') dot = c;
    return dot;
}

/* Applies each --config ALLOC.KEY=VALUE to the spec(s) of ALLOC. */
static int apply_configs(const run_args *args, vb_allocator_spec *specs, size_t spec_count)
{
    const char *command = args->trace ? "replay" : "run";
    for (size_t i = 0; i < args->config_count; i++) {
        const char *text = args->configs[i];
        const char *dot = config_dot(text, specs, spec_count), *equals = dot ? strchr(dot, '=') : NULL;
        if (!dot || !equals || dot == text || equals == dot + 1)
            return vb_cli_error(VB_EXIT_USAGE, "%s: --config '%s' is not ALLOC.KEY=VALUE", command, text);
        char name[sizeof specs[0].name], key[128];
        if ((size_t)(dot - text) >= sizeof name || (size_t)(equals - dot - 1) >= sizeof key)
            return vb_cli_error(VB_EXIT_USAGE, "%s: --config '%s' is too long", command, text);
        snprintf(name, sizeof name, "%.*s", (int)(dot - text), text);
        snprintf(key, sizeof key, "%.*s", (int)(equals - dot - 1), dot + 1);
        /* One value each: an earlier --config with the same "ALLOC.KEY=" (its
         * split depends on the text before '=' alone) is the same key. */
        for (size_t j = 0; j < i; j++)
            if (strncmp(args->configs[j], text, (size_t)(equals - text) + 1) == 0)
                return vb_cli_error(VB_EXIT_USAGE, "%s: --config %s.%s given twice ('%s', then '%s')", command, name,
                                    key, args->configs[j], text);
        int applied = 0;
        for (size_t s = 0; s < spec_count; s++) {
            if (strcmp(specs[s].name, name) != 0) continue;
            /* A value the spec's brackets give already: two values of one
             * key, and one of them would be dropped without a word. */
            for (size_t e = 0; e < specs[s].entry_count; e++)
                if (strcmp(specs[s].entries[e].key, key) == 0 && strcmp(specs[s].entries[e].value, equals + 1) != 0)
                    return vb_cli_error(VB_EXIT_USAGE, "%s: --config '%s' contradicts --allocator %s, which sets %s=%s: "
                                                       "give the value once", command, text, specs[s].label, key,
                                        specs[s].entries[e].value);
            if (vb_allocator_spec_set(&specs[s], key, equals + 1) != VB_OK) return vb_cli_status_error(VB_ERR_INVALID);
            applied = 1;
        }
        if (!applied) {
            if (!vb_allocator_find(name)) {
                char hint[160];
                return vb_cli_error(VB_EXIT_USAGE, "%s: --config '%s': unknown allocator '%s'%s", command, text, name,
                                    vb_did_you_mean(name, vb_cli_allocator_names(), hint, sizeof hint));
            }
            return vb_cli_error(VB_EXIT_USAGE, "%s: --config '%s': allocator '%s' is not among those run", command,
                                text, name);
        }
    }
    return VB_EXIT_OK;
}

/* Everything the command holds, released in one place. */
typedef struct run_state {
    vb_name_list scenarios;
    vb_allocator_spec *specs;
    size_t spec_count;
    vb_device *device;
    vb_case_result *results;
    size_t result_count;
    json_t *document;
} run_state;

/* Drops specs that repeat an earlier one (--config can make two specs
 * equal) and repeated scenario names, so no name appears twice. */
static void drop_repeats(run_state *state)
{
    size_t kept = 0;
    for (size_t i = 0; i < state->spec_count; i++) {
        int repeat = 0;
        for (size_t j = 0; j < kept && !repeat; j++)
            repeat = vb_allocator_spec_same(&state->specs[j], &state->specs[i]);
        if (repeat) vb_allocator_spec_free(&state->specs[i]);
        else state->specs[kept++] = state->specs[i];
    }
    state->spec_count = kept;
    kept = 0;
    for (size_t i = 0; i < state->scenarios.count; i++) {
        int repeat = 0;
        for (size_t j = 0; j < kept && !repeat; j++)
            repeat = strcmp(state->scenarios.names[j], state->scenarios.names[i]) == 0;
        if (!repeat) state->scenarios.names[kept++] = state->scenarios.names[i];
    }
    state->scenarios.count = kept;
}

/* Every spec's allocator made once (vb_allocator_spec_list_check), so
 * unknown keys and bad values are reported before anything runs. */
static int check_specs(vb_device *dev, const vb_allocator_spec *specs, size_t spec_count)
{
    vb_status status = vb_allocator_spec_list_check(dev, specs, spec_count);
    return status == VB_OK ? VB_EXIT_OK : vb_cli_status_error(status);
}

/* ======================================================================== */
/* The command                                                              */
/* ======================================================================== */

static void run_state_free(run_state *state)
{
    for (size_t i = 0; i < state->result_count; i++) vb_case_result_free(&state->results[i]);
    free(state->results);
    json_decref(state->document);
    vb_device_close(state->device);
    vb_allocator_spec_list_free(state->specs, state->spec_count);
    vb_name_list_free(&state->scenarios);
}

/* A case of another shard (--shard), before the shard's last: on the sim,
 * run once cheaply (its memory pass and one timed iteration) for its
 * effect on the simulated driver, whose address space carries over from
 * case to case as a GPU's does (freed ranges, where fresh addresses start:
 * best fit's tie-breaks read them). So each case of a shard starts on the
 * device one run would give it, and its memory figures are one run's. A
 * GPU's history cannot be replayed; there it is skipped. */
static vb_status warm_up(run_state *state, const vb_case *c, size_t k, vb_shard shard, size_t all)
{
    size_t last = all;
    while (last > 0 && !vb_shard_has(shard, last - 1)) last--;
    vb_device_info info;
    state->device->ops->info(state->device, &info);
    if (info.kind != VB_DEVICE_SIM || k + 1 > last) return VB_OK;
    vb_runner_options once = {.repetitions = 1, .min_time_s = 0.0, .max_iterations = 1};
    vb_case_result result;
    vb_status status = vb_runner_run_case(state->device, c, &once, &result);
    if (status == VB_OK) vb_case_result_free(&result);
    return status;
}

/* Runs every case, printing progress; results go into state->results. */
static int run_cases(const run_args *args, run_state *state)
{
    size_t all = state->scenarios.count * state->spec_count, total = vb_shard_size(args->shard, all);
    state->results = calloc(total ? total : 1, sizeof *state->results);
    if (!state->results) return vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
    if (!args->quiet && args->shard.count > 1)
        fprintf(stderr, "vrambench: shard %zu/%zu: %zu of the %zu cases\n", args->shard.index, args->shard.count, total,
                all);
    uint64_t started = vb_now_ns();
    for (size_t s = 0; s < state->scenarios.count; s++)
        for (size_t a = 0; a < state->spec_count; a++) {
            vb_case c = {vb_scenario_find(state->scenarios.names[s]), args->param, &state->specs[a], NULL};
            if (args->trace) c = (vb_case){&vb_replay_scenario, args->trace, &state->specs[a], args->trace_label};
            if (!vb_shard_has(args->shard, s * state->spec_count + a)) {
                if (warm_up(state, &c, s * state->spec_count + a, args->shard, all) != VB_OK)
                    return vb_cli_error(VB_EXIT_FAILURE, "%s", vb_last_error());
                continue;
            }
            char why[128];
            if (vb_runner_skip_reason(state->device, c.scenario, why, sizeof why)) {
                if (!args->quiet)
                    fprintf(stderr, "run: skipping %s/%s: %s\n", c.scenario->name, state->specs[a].label, why);
                continue;
            }
            uint64_t case_started = vb_now_ns();
            vb_case_result *result = &state->results[state->result_count];
            vb_status status = vb_runner_run_case(state->device, &c, &args->options, result);
            if (status != VB_OK)
                return vb_cli_error(VB_EXIT_FAILURE, "%s%s", vb_last_error(),
                                    args->out ? " (no result file written)" : "");
            state->result_count++;
            status = vb_report_add_case(json_object_get(state->document, "benchmarks"), result, s, a);
            if (status != VB_OK) return vb_cli_error(VB_EXIT_FAILURE, "%s", vb_last_error());
            if (vb_report_add_names(state->document, result->scenario, c.scenario) != 0)
                return vb_cli_error(VB_EXIT_FAILURE, "%s: could not build its names (host memory)", result->name);
            if (!args->quiet)
                fprintf(stderr, "[%zu/%zu] %s ... %.2f s (elapsed %.1f s)\n", state->result_count, total, result->name,
                        (double)(vb_now_ns() - case_started) / 1e9, (double)(vb_now_ns() - started) / 1e9);
        }
    return VB_EXIT_OK;
}

/* Reads the whole trace once before anything runs, so that a malformed or
 * unreadable one costs one error line (file:line) and exit 2, not a failure
 * halfway through the allocators; names the result "replay:<file name>".
 * A pipe or FIFO is spooled first (vb_trace_spool): this check and every
 * run then read the same copy. */
static int check_trace(run_args *args)
{
    if (strcmp(args->scenarios, "all") != 0 || args->param)
        return vb_cli_error(VB_EXIT_USAGE, "replay: --scenario and --param do not apply to a replay");
    vb_trace_first_alloc first;
    vb_status status = vb_trace_spool(args->trace);
    if (status == VB_OK) status = vb_replay_check_trace(args->trace, &first);
    uint64_t first_size = first.bytes, first_line = first.line;
    if (status != VB_OK) return vb_cli_status_error(VB_ERR_INVALID); /* bad input either way */
    int exit_status = vb_cli_refuse_empty_trace("replay", args->trace, &first);
    if (exit_status != VB_EXIT_OK) return exit_status;
    /* The first allocation takes whole 2 MiB driver pages, wherever it goes
     * (rounded without wrapping: 2^64-1 bytes wrapped to 0 and passed). A
     * capacity too small for it is refused as a mistake in the option, but
     * only where some capacity could hold it: one larger than any device
     * is the trace's, and runs out under every capacity, the default too,
     * which the replay counts (as tune and explain do). */
    uint64_t needed = first_size > UINT64_MAX - (DRIVER_PAGE - 1) ? UINT64_MAX
                                                                  : (first_size + DRIVER_PAGE - 1) / DRIVER_PAGE * DRIVER_PAGE;
    if (args->sim_capacity && first_size && args->sim_capacity < needed && needed <= VB_SIM_MAX_CAPACITY) {
        char size[32];
        vb_cli_format_bytes(first_size, size, sizeof size);
        return vb_cli_error(VB_EXIT_USAGE,
                            "replay: --sim-capacity %s is too small for %s's first allocation (line %llu: %llu "
                            "bytes, %s, in 2 MiB driver pages): nothing could run",
                            args->sim_capacity_text, args->trace, (unsigned long long)first_line,
                            (unsigned long long)first_size, size);
    }
    const char *slash = strrchr(args->trace, '/');
    snprintf(args->trace_label, sizeof args->trace_label, "replay:%s", slash ? slash + 1 : args->trace);
    vb_text_sanitize(args->trace_label, 1); /* a file name need not be UTF-8: the label is a JSON key */
    return VB_EXIT_OK;
}

/* Says, first thing and unless --quiet, that the run is on the simulated
 * device and what that means for its figures. */
static void simulated_banner(const run_args *args, const vb_device_info *info)
{
    if (args->quiet || !info->simulated) return;
    if (strcmp(args->device, "auto") == 0)
        fputs("==============================================================================\n"
              " vrambench: no GPU found: running on the SIMULATED device. Memory figures are\n"
              " exact for each allocator's policy; times are host-side: the allocator's code\n"
              " and the device's model, not GPU times (the JSON says \"simulated\": true).\n"
              "==============================================================================\n",
              stderr);
    else
        fputs("vrambench: on the simulated device: memory figures exact for each policy; times host-side, "
              "not GPU times\n",
              stderr);
}

/* A capacity below one driver page holds nothing: refused before anything runs. */
static int check_capacity(const run_args *args)
{
    if (!args->sim_capacity_given || args->sim_capacity >= DRIVER_PAGE) return VB_EXIT_OK;
    return vb_cli_error(VB_EXIT_USAGE,
                        "%s: --sim-capacity %s is below 2 MiB, the driver's smallest allocation: nothing could be "
                        "allocated (give at least 2MiB)",
                        args->usage->command, args->sim_capacity_text);
}

int vb_run_command(int argc, char **argv, int trace_command)
{
    run_args args;
    int exit_status = parse_args(argc, argv, trace_command, &args);
    if (exit_status == VB_EXIT_HELP) return VB_EXIT_OK;
    if (exit_status == VB_EXIT_OK) exit_status = check_capacity(&args);
    if (exit_status != VB_EXIT_OK) return exit_status;
    run_state state = {0};
    if (args.trace) {
        static const char *const replay_only[] = {"replay", NULL};
        exit_status = check_trace(&args);
        if (exit_status == VB_EXIT_OK) exit_status = vb_cli_names("replay", "scenario", replay_only, &state.scenarios);
    } else {
        exit_status = vb_cli_names(args.scenarios, "scenario", scenario_names(), &state.scenarios);
    }
    if (exit_status != VB_EXIT_OK) return exit_status;
    if (args.pytorch_conf) {
        exit_status = vb_cli_check_pytorch_conf(args.trace ? "replay" : "run", args.pytorch_conf);
        if (exit_status != VB_EXIT_OK) goto done;
        /* PYTORCH_ALLOC_CONF's value as the spec pytorch[CONF]. */
        size_t size = strlen(args.allocators) + strlen(args.pytorch_conf) + 16;
        args.allocator_list = malloc(size);
        if (!args.allocator_list) return vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
        if (args.allocators_given) snprintf(args.allocator_list, size, "%s,pytorch[%s]", args.allocators, args.pytorch_conf);
        else snprintf(args.allocator_list, size, "pytorch[%s]", args.pytorch_conf);
        args.allocators = args.allocator_list;
    }
    vb_status status = vb_allocator_spec_list_parse(args.allocators, &state.specs, &state.spec_count);
    if (status != VB_OK) {
        exit_status = vb_cli_status_error(status);
        goto done;
    }
    exit_status = apply_configs(&args, state.specs, state.spec_count);
    if (exit_status != VB_EXIT_OK) goto done;
    drop_repeats(&state);
    if (args.param && state.scenarios.count != 1) {
        exit_status =
            vb_cli_error(VB_EXIT_USAGE, "run: --param applies to one scenario; name exactly one with --scenario");
        goto done;
    }
    if (args.param && !vb_scenario_find(state.scenarios.names[0])->parameter) {
        exit_status = vb_cli_param_refused("run", state.scenarios.names[0]);
        goto done;
    }
    if (args.param && vb_scenario_find(state.scenarios.names[0])->check_parameter &&
        vb_scenario_find(state.scenarios.names[0])->check_parameter(args.param) != VB_OK) {
        exit_status = vb_cli_error(VB_EXIT_USAGE, "run: --param: %s", vb_last_error());
        goto done;
    }
    if (args.snapshot && state.spec_count != 1) {
        exit_status = vb_cli_error(VB_EXIT_USAGE, "replay: --snapshot applies to a replay with exactly one allocator");
        goto done;
    }
    if (args.snapshot && (vb_output_check(args.snapshot) != VB_OK ||
                          vb_output_check_uncompressed(args.snapshot, "a snapshot pickle") != VB_OK)) {
        exit_status = vb_cli_status_error(VB_ERR_INVALID);
        goto done;
    }
    /* On the GPU the capacity is a cap (base/device.h, cuda_cap_bytes). */
    vb_device_options device_options = {.sim_capacity_bytes = args.sim_capacity, .cuda_cap_bytes = args.sim_capacity,
                                        .sim_placement = args.sim_placement};
    status = vb_device_open(args.device, &device_options, &state.device);
    if (status != VB_OK) {
        exit_status = vb_cli_status_error(status);
        goto done;
    }
    if (args.sim_placement_given && !vb_device_is_sim(state.device)) {
        exit_status = vb_cli_error(VB_EXIT_USAGE, "%s: --sim-placement is the simulated device's (a GPU's driver "
                                                  "places its own segments): add --device sim",
                                   args.trace ? "replay" : "run");
        goto done;
    }
    vb_device_info info;
    state.device->ops->info(state.device, &info);
    exit_status = check_specs(state.device, state.specs, state.spec_count);
    if (exit_status != VB_EXIT_OK) goto done;
    char out_path[4096] = "";
    if (args.out) {
        status = vb_report_output_path(args.out, &info, args.force, out_path, sizeof out_path);
        if (status != VB_OK) {
            exit_status = vb_cli_status_error(VB_ERR_INVALID);
            goto done;
        }
    }
    vb_named_file files[] = {{"the trace", args.trace, 0},
                             {"--out", out_path[0] ? out_path : NULL, 1},
                             {"--snapshot", args.snapshot, 1}};
    if (vb_output_check_distinct(files, sizeof files / sizeof files[0]) != VB_OK) {
        exit_status = vb_cli_status_error(VB_ERR_INVALID);
        goto done;
    }
    simulated_banner(&args, &info); /* everything checked: the first line of a run that goes ahead */
    state.document = vb_report_document(vb_report_context(state.device, NULL, state.specs, state.spec_count));
    if (state.document && args.trace) {
        /* The trace replayed, as given (check-sim replays it again); a name
         * that is not UTF-8 is made so, as the replay's label is. */
        char *trace_path = strdup(args.trace);
        if (trace_path) vb_text_sanitize(trace_path, 1);
        if (!trace_path || json_object_set_new(json_object_get(state.document, "context"), "trace_path",
                                               json_string(trace_path)) != 0) {
            json_decref(state.document);
            state.document = NULL;
        }
        free(trace_path);
    }
    /* What changes no result: where it goes, what it prints, the exit status. */
    static const int not_results[] = {OPT_OUT, OPT_FORCE, OPT_SNAPSHOT, OPT_FAIL_ON_OOM, OPT_QUIET, OPT_SHARD, -1};
    if (state.document && (vb_shard_describe(json_object_get(state.document, "context"), args.shard,
                                             state.scenarios.count * state.spec_count) != 0 ||
                           vb_shard_command(json_object_get(state.document, "context"), args.shard, args.usage, argc,
                                            argv, not_results) != 0)) {
        json_decref(state.document);
        state.document = NULL;
    }
    if (state.document && args.trace) {
        status = vb_shard_describe_input(json_object_get(state.document, "context"), args.shard, args.trace);
        if (status != VB_OK) {
            exit_status = vb_cli_status_error(status);
            goto done;
        }
    }
    if (!state.document) {
        exit_status = vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
        goto done;
    }
    exit_status = run_cases(&args, &state);
    if (exit_status != VB_EXIT_OK) goto done;
    if (!args.quiet) {
        vb_report_print_summary(stdout, &info, state.results, state.result_count);
        vb_cli_flush_stdout(); /* the table before any later stderr line */
    }
    /* Both outputs or neither: --out's file waits for the snapshot (app/output_file.h). */
    vb_output_defer();
    status = args.out ? vb_report_write(state.document, out_path) : VB_OK;
    /* The same replay again on a sim device of the run's capacity (the
     * memory a strategy takes is the device's no matter which). */
    if (status == VB_OK && args.snapshot)
        status = vb_snapshot_write(args.trace, &state.specs[0], args.sim_capacity, args.sim_placement, args.snapshot);
    if (status == VB_OK) status = vb_output_release(1);
    if (status != VB_OK) {
        exit_status = vb_cli_status_error(status);
        goto done;
    }
    if (args.out && !args.quiet) vb_cli_line(stderr, "vrambench: wrote %s", out_path);
    if (args.snapshot && !args.quiet) vb_cli_line(stderr, "vrambench: wrote %s", args.snapshot);
    /* Out of memory is never silent: one line (an error with --fail-on-oom,
     * the exit 3's reason, so even under --quiet). */
    if (args.fail_on_oom || !args.quiet) {
        size_t failed = vb_report_oom_note(stderr, state.results, state.result_count, args.fail_on_oom);
        if (failed && args.fail_on_oom) exit_status = VB_EXIT_OOM;
    }
done:
    vb_output_release(0); /* after a failure: no output of this run is left behind */
    free(args.allocator_list);
    run_state_free(&state);
    return exit_status;
}

int vb_cmd_run(int argc, char **argv)
{
    return vb_run_command(argc, argv, 0);
}
