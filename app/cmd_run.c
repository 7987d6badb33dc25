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

#include "cli.h"
#include "base/measure.h"
#include "report.h"
#include "runner.h"
#include "replay.h"
#include "snapshot.h"
#include "trace.h"

#define RUN_USAGE                                                                                             \
    "usage: vrambench run [--scenario NAME[,NAME]|all] [--allocator SPEC[,SPEC]|all] [--device auto|cuda|sim]\n" \
    "                     [--repetitions N] [--min-time SECONDS] [--max-iterations N] [--config ALLOC.KEY=VALUE]...\n" \
    "                     [--sim-capacity BYTES] [--param VALUE] [--out FILE.json] [--quiet]\n"                 \
    "                     [--pytorch-alloc-conf CONF] [--fail-on-oom]\n"                                        \
    "  SPEC: an allocator name, or NAME[KEY=VALUE,...] (e.g. caching[max_split_size_mb=256]),\n"            \
    "        or pytorch[CONF] with PyTorch's own syntax (pytorch[expandable_segments:True])\n"                  \
    "  --sim-capacity: the simulated device's memory; on a GPU, a cap (memory beyond it is out of memory)\n"   \
    "  --pytorch-alloc-conf CONF: PYTORCH_ALLOC_CONF's value, run as pytorch[CONF] (alone\n"                   \
    "        unless --allocator names others too)\n"                                                            \
    "  --fail-on-oom: exit 3 when any allocator ran out of memory (after writing the results)\n"               \
    "  --snapshot FILE.pickle (replay, one allocator): the replay as a PyTorch memory snapshot\n"               \
    "  --out may contain {device} and {date}, e.g. results/{device}-{date}.json\n"

#define MAX_CONFIGS 64

typedef struct run_args {
    const char *scenarios, *allocators, *device, *out, *param;
    const char *trace;         /* `vrambench replay`: the trace replayed instead of scenarios */
    char trace_label[256];     /* "replay:<file name>" */
    const char *configs[MAX_CONFIGS];
    size_t config_count;
    vb_runner_options options;
    uint64_t sim_capacity;
    int quiet;
    int fail_on_oom;           /* exit 3 when any case counted an OOM */
    int allocators_given;      /* --allocator was on the command line */
    const char *pytorch_conf;  /* --pytorch-alloc-conf */
    const char *snapshot;      /* --snapshot: the replay as a PyTorch memory snapshot pickle */
    char *allocator_list;      /* --allocator with pytorch[CONF] added (owned) */
} run_args;

/* ======================================================================== */
/* Option values                                                            */
/* ======================================================================== */

/* Parses a whole number in [min, max]; 0 on success. */
static int parse_whole(const char *text, uint64_t min, uint64_t max, uint64_t *out)
{
    if (text[0] < '0' || text[0] > '9') return -1;
    char *end = NULL;
    errno = 0;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0' || value < min || value > max) return -1;
    *out = value;
    return 0;
}

/* Parses the command line into `args`; exit status 2 with one error line on
 * anything unknown or malformed. */
static int parse_args(int argc, char **argv, run_args *args)
{
    memset(args, 0, sizeof *args);
    args->scenarios = "all";
    args->allocators = "all";
    args->device = "auto";
    args->options = vb_runner_default_options();
    for (int i = 1; i < argc; i++) {
        const char *option = argv[i];
        if (strcmp(option, "--help") == 0 || strcmp(option, "-h") == 0) {
            fputs(RUN_USAGE, stdout);
            exit(VB_EXIT_OK);
        }
        if (strcmp(option, "--quiet") == 0) {
            args->quiet = 1;
            continue;
        }
        if (strcmp(option, "--fail-on-oom") == 0) {
            args->fail_on_oom = 1;
            continue;
        }
        if (i + 1 >= argc || strncmp(option, "--", 2) != 0)
            return vb_cli_error(VB_EXIT_USAGE, "run: unknown option or missing value: '%s' (see vrambench run --help)",
                                option);
        const char *value = argv[++i];
        uint64_t number;
        if (strcmp(option, "--scenario") == 0) args->scenarios = value;
        else if (strcmp(option, "--allocator") == 0) {
            args->allocators = value;
            args->allocators_given = 1;
        } else if (strcmp(option, "--pytorch-alloc-conf") == 0) args->pytorch_conf = value;
        else if (strcmp(option, "--snapshot") == 0) args->snapshot = value;
        else if (strcmp(option, "--device") == 0) args->device = value;
        else if (strcmp(option, "--out") == 0) args->out = value;
        else if (strcmp(option, "--param") == 0) args->param = value;
        else if (strcmp(option, "--trace") == 0) args->trace = value;
        else if (strcmp(option, "--config") == 0) {
            if (args->config_count == MAX_CONFIGS)
                return vb_cli_error(VB_EXIT_USAGE, "run: more than %d --config options", MAX_CONFIGS);
            args->configs[args->config_count++] = value;
        } else if (strcmp(option, "--repetitions") == 0) {
            if (parse_whole(value, 1, 1000, &number) != 0)
                return vb_cli_error(VB_EXIT_USAGE, "run: bad --repetitions '%s' (a whole number from 1 to 1000)",
                                    value);
            args->options.repetitions = (unsigned)number;
        } else if (strcmp(option, "--max-iterations") == 0) {
            if (parse_whole(value, 1, 1000000000, &args->options.max_iterations) != 0)
                return vb_cli_error(VB_EXIT_USAGE, "run: bad --max-iterations '%s' (a whole number from 1 to 1e9)",
                                    value);
        } else if (strcmp(option, "--min-time") == 0) {
            char *end = NULL;
            errno = 0;
            double seconds = strtod(value, &end);
            if (errno != 0 || end == value || *end != '\0' || !isfinite(seconds) || seconds < 0 || seconds > 3600)
                return vb_cli_error(VB_EXIT_USAGE, "run: bad --min-time '%s' (seconds, from 0 to 3600)", value);
            args->options.min_time_s = seconds;
        } else if (strcmp(option, "--sim-capacity") == 0) {
            int bad = vb_cli_parse_capacity("run", "--sim-capacity", value, 1, &args->sim_capacity);
            if (bad) return bad;
        } else {
            return vb_cli_error(VB_EXIT_USAGE, "run: unknown option '%s' (see vrambench run --help)", option);
        }
    }
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

/* Applies each --config ALLOC.KEY=VALUE to the spec(s) of ALLOC. */
static int apply_configs(const run_args *args, vb_allocator_spec *specs, size_t spec_count)
{
    for (size_t i = 0; i < args->config_count; i++) {
        const char *text = args->configs[i];
        const char *dot = strchr(text, '.'), *equals = strchr(text, '=');
        if (!dot || !equals || dot == text || equals < dot || equals == dot + 1)
            return vb_cli_error(VB_EXIT_USAGE, "run: --config '%s' is not ALLOC.KEY=VALUE", text);
        char name[64], key[128];
        if ((size_t)(dot - text) >= sizeof name || (size_t)(equals - dot - 1) >= sizeof key)
            return vb_cli_error(VB_EXIT_USAGE, "run: --config '%s' is too long", text);
        snprintf(name, sizeof name, "%.*s", (int)(dot - text), text);
        snprintf(key, sizeof key, "%.*s", (int)(equals - dot - 1), dot + 1);
        int applied = 0;
        for (size_t s = 0; s < spec_count; s++) {
            if (strcmp(specs[s].name, name) != 0) continue;
            if (vb_allocator_spec_set(&specs[s], key, equals + 1) != VB_OK) return vb_cli_status_error(VB_ERR_INVALID);
            applied = 1;
        }
        if (!applied) {
            if (!vb_allocator_find(name))
                return vb_cli_error(VB_EXIT_USAGE, "run: --config '%s': unknown allocator '%s'", text, name);
            return vb_cli_error(VB_EXIT_USAGE, "run: --config '%s': allocator '%s' is not among those run", text, name);
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

/* Drops specs whose label repeats an earlier one (--config can make two
 * specs equal) and repeated scenario names, so no name appears twice. */
static void drop_repeats(run_state *state)
{
    size_t kept = 0;
    for (size_t i = 0; i < state->spec_count; i++) {
        int repeat = 0;
        for (size_t j = 0; j < kept && !repeat; j++)
            repeat = strcmp(state->specs[j].label, state->specs[i].label) == 0;
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

/* Creates each spec's allocator once, so unknown keys and bad values are
 * reported before anything runs. */
static int check_specs(vb_device *dev, const vb_allocator_spec *specs, size_t spec_count)
{
    for (size_t i = 0; i < spec_count; i++) {
        vb_config config = vb_allocator_spec_config(&specs[i]);
        vb_allocator *allocator = NULL;
        vb_status status = vb_allocator_create(specs[i].name, dev, &config, &allocator);
        if (status != VB_OK) return vb_cli_status_error(status);
        vb_allocator_destroy(allocator);
    }
    return VB_EXIT_OK;
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

/* Runs every case, printing progress; results go into state->results. */
static int run_cases(const run_args *args, run_state *state)
{
    size_t total = state->scenarios.count * state->spec_count;
    state->results = calloc(total, sizeof *state->results);
    if (!state->results) return vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
    uint64_t started = vb_now_ns();
    for (size_t s = 0; s < state->scenarios.count; s++)
        for (size_t a = 0; a < state->spec_count; a++) {
            vb_case c = {vb_scenario_find(state->scenarios.names[s]), args->param, &state->specs[a], NULL};
            if (args->trace) c = (vb_case){&vb_replay_scenario, args->trace, &state->specs[a], args->trace_label};
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
    vb_trace *trace = NULL;
    vb_status status = vb_trace_spool(args->trace);
    if (status == VB_OK) status = vb_trace_open(args->trace, &trace);
    vb_trace_event event = {0};
    while (status == VB_OK) {
        status = vb_trace_next(trace, &event);
        if (event.kind == VB_TRACE_END) break;
    }
    vb_trace_close(trace);
    if (status != VB_OK) return vb_cli_status_error(VB_ERR_INVALID); /* bad input either way */
    const char *slash = strrchr(args->trace, '/');
    snprintf(args->trace_label, sizeof args->trace_label, "replay:%s", slash ? slash + 1 : args->trace);
    vb_text_sanitize(args->trace_label, 1); /* a file name need not be UTF-8: the label is a JSON key */
    return VB_EXIT_OK;
}

/* --fail-on-oom: 3 when some case's allocator ran out of memory (its
 * first failing allocation is in the results: first_oom_line/_bytes on a
 * replay), naming the first such case on stderr; else 0. */
static int oom_exit_status(const run_state *state)
{
    for (size_t i = 0; i < state->result_count; i++)
        for (size_t r = 0; r < state->results[i].repetition_count; r++) {
            const vb_repetition_result *rep = &state->results[i].repetitions[r];
            double ooms = vb_repetition_counter(rep, "ooms", 0);
            if (ooms <= 0) continue;
            double line = vb_repetition_counter(rep, "first_oom_line", 0);
            fprintf(stderr, "vrambench: %s ran out of memory %.0f time(s)", state->results[i].name, ooms);
            if (line > 0)
                fprintf(stderr, ", first at trace line %.0f (%.0f bytes)", line,
                        vb_repetition_counter(rep, "first_oom_bytes", 0));
            fputc('\n', stderr);
            return VB_EXIT_OOM;
        }
    return VB_EXIT_OK;
}

int vb_cmd_run(int argc, char **argv)
{
    run_args args;
    int exit_status = parse_args(argc, argv, &args);
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
    if (args.snapshot && (!args.trace || state.spec_count != 1)) {
        exit_status = vb_cli_error(VB_EXIT_USAGE, "--snapshot applies to a replay with exactly one allocator");
        goto done;
    }
    if (args.snapshot && vb_report_check_writable(args.snapshot) != VB_OK) {
        exit_status = vb_cli_status_error(VB_ERR_INVALID);
        goto done;
    }
    /* On the GPU the capacity is a cap (base/device.h, cuda_cap_bytes). */
    vb_device_options device_options = {.sim_capacity_bytes = args.sim_capacity, .cuda_cap_bytes = args.sim_capacity};
    status = vb_device_open(args.device, &device_options, &state.device);
    if (status != VB_OK) {
        exit_status = vb_cli_status_error(status);
        goto done;
    }
    vb_device_info info;
    state.device->ops->info(state.device, &info);
    exit_status = check_specs(state.device, state.specs, state.spec_count);
    if (exit_status != VB_EXIT_OK) goto done;
    char out_path[4096] = "";
    if (args.out) {
        status = vb_report_output_path(args.out, &info, out_path, sizeof out_path);
        if (status != VB_OK) {
            exit_status = vb_cli_status_error(VB_ERR_INVALID);
            goto done;
        }
    }
    if (info.simulated && strcmp(args.device, "auto") == 0)
        fputs("==============================================================================\n"
              " vrambench: no GPU found: running on the SIMULATED device. Memory figures are\n"
              " exact for each allocator's policy; times are host-side and simulated, not GPU\n"
              " times (the JSON says \"simulated\": true).\n"
              "==============================================================================\n",
              stderr);
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
    if (!state.document) {
        exit_status = vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
        goto done;
    }
    exit_status = run_cases(&args, &state);
    if (exit_status != VB_EXIT_OK) goto done;
    vb_report_print_summary(stdout, &info, state.results, state.result_count);
    fflush(stdout); /* the table before any later stderr line */
    if (args.out) {
        status = vb_report_write(state.document, out_path);
        if (status != VB_OK) {
            exit_status = vb_cli_status_error(status);
            goto done;
        }
        if (!args.quiet) fprintf(stderr, "vrambench: wrote %s\n", out_path);
    }
    if (args.snapshot) {
        /* The same replay again on a sim device of the run's capacity (the
         * memory a strategy takes is the device's no matter which). */
        status = vb_snapshot_write(args.trace, &state.specs[0], args.sim_capacity, args.snapshot);
        if (status != VB_OK) {
            exit_status = vb_cli_status_error(status);
            goto done;
        }
        if (!args.quiet) fprintf(stderr, "vrambench: wrote %s\n", args.snapshot);
    }
    if (args.fail_on_oom) exit_status = oom_exit_status(&state);
done:
    free(args.allocator_list);
    run_state_free(&state);
    return exit_status;
}

/* `vrambench replay TRACE [options]`: `run` with the trace replayed against
 * each allocator, once (min-time 0) unless the options say otherwise. */
int vb_cmd_replay(int argc, char **argv)
{
    if (argc < 2 || strncmp(argv[1], "--", 2) == 0)
        return vb_cli_error(VB_EXIT_USAGE, "usage: vrambench replay TRACE [--allocator SPEC[,SPEC]|all] "
                                           "[--device auto|cuda|sim] [--out FILE.json] [run's other options]");
    char **run_argv = calloc((size_t)argc + 5, sizeof *run_argv);
    if (!run_argv) return vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
    char *defaults[] = {"run", "--min-time", "0", "--trace", argv[1]};
    memcpy(run_argv, defaults, sizeof defaults);
    memcpy(run_argv + 5, argv + 2, (size_t)(argc - 2) * sizeof *run_argv);
    int exit_status = vb_cmd_run(argc + 3, run_argv);
    vb_trace_spool_release();
    free(run_argv);
    return exit_status;
}
