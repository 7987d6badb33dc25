/* vrambench — `vrambench tune TRACE`: which PYTORCH_ALLOC_CONF a
 * workload should use, and the smallest device it fits on (app/tune.h).
 *
 * TRACE is anything `replay` reads, or a PyTorch memory snapshot pickle
 * (torch.cuda.memory._dump_snapshot), which is converted first by running
 * python/vrambench/torch2trace.py (app/cli_trace_input.c). TRACE is read as every input is (app/input_file.h): a pipe or FIFO
 * once, spooled. The trace is read through once before anything runs, so a
 * malformed one costs one error line and exit 2; --out may not be TRACE. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/closest.h"
#include "cli.h"
#include "input_file.h"
#include "json_report.h"
#include "output_file.h"
#include "output_path.h"
#include "replay.h"
#include "tune.h"
#include "fit.h"

enum { OPT_DEVICE, OPT_CAPACITY, OPT_OVERHEAD, OPT_SEARCH_EVENTS, OPT_JOBS, OPT_OUT, OPT_FORCE, OPT_QUIET, OPT_SHARD, OPTION_COUNT };
static const vb_cli_option options[OPTION_COUNT + 1] = {
    [OPT_DEVICE] = {"--device", NULL, "sim|cuda",
                    "where each candidate's main replay runs (default sim: memory exact, its times host-side);\n"
                    "the smallest-capacity search always runs on the simulated device",
                    0},
    [OPT_CAPACITY] = {"--capacity", NULL, "SIZE",
                      "the memory out-of-memory is counted at (default 80GiB; 2MiB to " VB_FIT_MAX_CAPACITY_TEXT "), e.g. --capacity 24GiB:\n"
                      "PyTorch's limit (set_per_process_memory_fraction) for its caching allocator, a device's memory\n"
                      "for the others (docs/tune.md, Will it fit). " VB_CLI_SIZE_RULE,
                      0},
    [OPT_OVERHEAD] = {"--overhead", NULL, "SIZE",
                      "what a GPU holds besides PyTorch's memory (the CUDA context, the libraries), for the smallest\n"
                      "GPU (default 1GiB; lab/harnesses/fit_check.py measures it), e.g. --overhead 600MiB",
                      0},
    [OPT_SEARCH_EVENTS] = {"--search-events", NULL, "N",
                           "events one minimum-capacity search may replay (default 100000000; 1 to 1e12): past it the\n"
                           "answer stays safe but may be above the real minimum (min_capacity_exact false, shown ~a/b;\n"
                           "docs/tune.md). More makes more answers exact and a long trace's tune slower, e.g.\n"
                           "--search-events 1000000000",
                           0},
    [OPT_JOBS] = {"--jobs", NULL, "N", "candidates replayed at once, one process each (1 to 256; default: the online CPUs)",
                  0},
    [OPT_OUT] = {"--out", NULL, "FILE.json",
                 "every candidate and the recommendation as JSON (python3 -m vrambench.plots.tune draws it).\n"
                 VB_CLI_OUT_TEMPLATE,
                 0},
    [OPT_FORCE] = VB_CLI_FORCE_OPTION,
    [OPT_QUIET] = {"--quiet", NULL, NULL, "errors only: no progress, table or 'wrote FILE'", 0},
    [OPT_SHARD] = {"--shard", NULL, "I/N",
                   "only the I-th of N shares of the candidates; `vrambench merge` joins the N files and makes the\n"
                   "recommendation (docs/fleet.md), e.g. --shard 2/8",
                   0},
    [OPTION_COUNT] = {NULL, NULL, NULL, NULL, 0},
};

static const vb_cli_usage usage = {
    "tune", "TRACE",
    "Replays a trace under every PyTorch allocator setting worth trying (PYTORCH_CUDA_ALLOC_CONF) and the\n"
    "other strategies: peak reserved, driver calls, OOMs, replay time and the smallest capacity each fits;\n"
    "the Pareto front, and the setting to use.\n"
    "TRACE: a vbtrace, an RMM log (.gz too) or a PyTorch memory snapshot pickle\n"
    "(torch.cuda.memory._dump_snapshot; converted by python/vrambench/torch2trace.py).",
    options, 0,
    "example:\n  vrambench tune tests/fixtures/traces/gpt2.trace.gz --capacity 24GiB --out out/tune-gpt2.json"};

int vb_cmd_tune(int argc, char **argv)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    vb_tune_options options = {.device = "sim", .jobs = cpus > 0 ? (unsigned)cpus : 1,
                               .overhead = VB_GPU_OVERHEAD_DEFAULT};
    const char *out = NULL, *trace_path = NULL;
    int force = 0;
    vb_cli_parser parser;
    vb_cli_parser_init(&parser, &usage, argc, argv);
    const char *value;
    for (int option; (option = vb_cli_next(&parser, &value)) != VB_CLI_END;) {
        switch (option) {
        case VB_CLI_STOP: return parser.exit_status;
        case VB_CLI_ARGUMENT:
            if (trace_path)
                return vb_cli_error(VB_EXIT_USAGE, "tune: one TRACE only ('%s', then '%s')", trace_path, value);
            trace_path = value;
            break;
        case OPT_DEVICE: {
            static const char *const devices[] = {"sim", "cuda", NULL};
            if (!vb_name_known(value, devices)) {
                char hint[64];
                return vb_cli_error(VB_EXIT_USAGE, "tune: bad --device '%s' (sim or cuda)%s", value,
                                    vb_did_you_mean(value, devices, hint, sizeof hint));
            }
            options.device = value;
            break;
        }
        case OPT_CAPACITY:
            if (vb_cli_size_option("tune", "--capacity", value, &options.capacity) != VB_EXIT_OK) return VB_EXIT_USAGE;
            if (options.capacity < VB_FIT_STEP)
                return vb_cli_error(VB_EXIT_USAGE, "tune: --capacity %s is below 2 MiB, the driver's smallest allocation",
                                    value);
            if (options.capacity > VB_FIT_MAX_CAPACITY)
                return vb_cli_error(VB_EXIT_USAGE,
                                    "tune: --capacity %s is more than " VB_FIT_MAX_CAPACITY_TEXT
                                    ", the largest capacity a limit is replayed under (on a simulated device twice "
                                    "its size)",
                                    value);
            break;
        case OPT_OVERHEAD:
            if (vb_cli_size_option("tune", "--overhead", value, &options.overhead) != VB_EXIT_OK) return VB_EXIT_USAGE;
            if (options.overhead >= 64 * VB_GiB)
                return vb_cli_error(VB_EXIT_USAGE, "tune: --overhead '%s' is 64GiB or more", value);
            break;
        case OPT_SEARCH_EVENTS:
            if (vb_cli_parse_whole(value, 1, VB_FIT_MAX_SEARCH_EVENTS, &options.search_events) != 0)
                return vb_cli_error(VB_EXIT_USAGE, "tune: bad --search-events '%s' (a whole number, 1 to 1e12)", value);
            break;
        case OPT_SHARD:
            if (vb_shard_parse(value, &options.shard) != 0)
                return vb_cli_error(VB_EXIT_USAGE, "tune: bad --shard '%s' (I/N with 1 <= I <= N, e.g. 2/8)", value);
            break;
        case OPT_JOBS: {
            uint64_t jobs;
            if (vb_cli_parse_whole(value, 1, 256, &jobs) != 0)
                return vb_cli_error(VB_EXIT_USAGE, "tune: bad --jobs '%s' (1 to 256)", value);
            options.jobs = (unsigned)jobs;
            break;
        }
        case OPT_OUT: out = value; break;
        case OPT_FORCE: force = 1; break;
        case OPT_QUIET: options.quiet = 1; break;
        }
    }
    if (!trace_path) return vb_cli_error(VB_EXIT_USAGE, "tune: which TRACE? (vrambench tune --help)");
    options.trace_path = trace_path;
    const char *slash = strrchr(trace_path, '/');
    char label[300];
    snprintf(label, sizeof label, "tune:%s", slash ? slash + 1 : trace_path);
    options.label = label;

    /* The input is read the one way every command reads (app/input_file.h):
     * a pipe or FIFO once, into a scratch copy, which every later pass reads. */
    char out_path[4096] = "", converted[4200] = "";
    int exit_status = vb_cli_trace_input("tune", trace_path, options.quiet, converted, &options.trace_path);
    if (exit_status == VB_EXIT_OK && out) {
        vb_device_info info = {.simulated = strcmp(options.device, "sim") == 0};
        snprintf(info.name, sizeof info.name, "%s", info.simulated ? "simulated device" : "cuda");
        vb_named_file files[] = {{"the trace", trace_path, 0}, {"--out", out_path, 1}};
        if (vb_report_output_path(out, &info, force, out_path, sizeof out_path) != VB_OK ||
            vb_output_check_distinct(files, sizeof files / sizeof files[0]) != VB_OK)
            exit_status = vb_cli_status_error(VB_ERR_INVALID);
    }
    json_t *document = NULL;
    if (exit_status == VB_EXIT_OK) {
        vb_status status = vb_tune_run(&options, options.quiet ? NULL : stdout, &document);
        vb_cli_flush_stdout();
        /* What changes no result: where it goes, what it prints, how many processes. */
        static const int not_results[] = {OPT_JOBS, OPT_OUT, OPT_FORCE, OPT_QUIET, OPT_SHARD, -1};
        if (status == VB_OK &&
            vb_shard_command(json_object_get(document, "context"), options.shard, &usage, argc, argv, not_results) != 0)
            status = vb_error(VB_ERR_HOST_OOM, "out of host memory");
        if (status == VB_OK) status = vb_shard_describe_input(json_object_get(document, "context"), options.shard, trace_path);
        if (status == VB_OK && out_path[0]) status = vb_report_write(document, out_path);
        if (status != VB_OK) exit_status = vb_cli_status_error(status);
        else if (out_path[0] && !options.quiet) vb_cli_line(stderr, "vrambench: wrote %s", out_path);
    }
    json_decref(document);
    vb_input_release();
    return exit_status;
}
