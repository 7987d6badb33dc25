/* vrambench — `vrambench tune TRACE`: which PYTORCH_CUDA_ALLOC_CONF a
 * workload should use, and the smallest device it fits on (app/tune.h).
 *
 * TRACE is anything `replay` reads, or a PyTorch memory snapshot pickle
 * (torch.cuda.memory._dump_snapshot), which is converted first by running
 * python/vrambench/torch2trace.py into a temporary trace (the one reader of pickles;
 * its errors are passed on, exit 2). The trace is read through once before
 * anything runs, so a malformed one costs one error line and exit 2. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "json_report.h"
#include "output_path.h"
#include "trace.h"
#include "tune.h"

enum { OPT_DEVICE, OPT_CAPACITY, OPT_JOBS, OPT_OUT, OPT_FORCE, OPT_QUIET, OPT_SHARD, OPTION_COUNT };
static const vb_cli_option options[OPTION_COUNT + 1] = {
    [OPT_DEVICE] = {"--device", NULL, "sim|cuda",
                    "where each candidate's main replay runs (default sim: memory exact, its times host-side);\n"
                    "the smallest-capacity search always runs on the simulated device",
                    0},
    [OPT_CAPACITY] = {"--capacity", NULL, "SIZE",
                      "the device memory out-of-memory is counted at (default 80GiB; at least 2MiB), e.g.\n"
                      "--capacity 24GiB. " VB_CLI_SIZE_RULE,
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

/* Where python/vrambench/torch2trace.py is: $VB_TORCH2TRACE, or in the
 * product's Python package (vb_cli_python_dir). 0 when found. */
static int find_torch2trace(char *out, size_t capacity)
{
    const char *env = getenv("VB_TORCH2TRACE");
    if (env && *env) return snprintf(out, capacity, "%s", env) < (int)capacity ? 0 : -1;
    char dir[PATH_MAX];
    if (vb_cli_python_dir(dir, sizeof dir) != 0) return -1;
    return (size_t)snprintf(out, capacity, "%s/vrambench/torch2trace.py", dir) < capacity && access(out, R_OK) == 0 ? 0
                                                                                                                   : -1;
}

/* 1 if `path` starts like a pickle (protocol 2 or later: 0x80, version). */
static int is_pickle(const char *path)
{
    unsigned char head[2] = {0};
    FILE *file = fopen(path, "rb");
    if (!file) return 0;
    size_t got = fread(head, 1, 2, file);
    fclose(file);
    return got == 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5;
}

/* Converts the snapshot `pickle` into `trace` with torch2trace.py; the
 * exit status to give (0 done; torch2trace has said what is wrong). */
static int convert_pickle(const char *pickle, const char *trace)
{
    char tool[PATH_MAX];
    if (find_torch2trace(tool, sizeof tool) != 0)
        return vb_cli_error(VB_EXIT_FAILURE,
                            "tune: %s is a PyTorch snapshot, and python/vrambench/torch2trace.py, which reads it, is not found "
                            "(set VB_TORCH2TRACE)", pickle);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return vb_cli_error(VB_EXIT_FAILURE, "tune: cannot start python3: %s", strerror(errno));
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, STDOUT_FILENO); /* its summary; errors stay on stderr */
        execlp("python3", "python3", tool, pickle, trace, (char *)NULL);
        fprintf(stderr, "vrambench: error: tune: cannot run python3 for %s: %s\n", tool, strerror(errno));
        _exit(VB_EXIT_FAILURE);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status))
        return vb_cli_error(VB_EXIT_FAILURE, "tune: converting %s failed", pickle);
    return WEXITSTATUS(status) == 0 ? 0 : WEXITSTATUS(status) == VB_EXIT_USAGE ? VB_EXIT_USAGE : VB_EXIT_FAILURE;
}

/* Reads the whole trace once: one error line (file:line) and exit 2 when it
 * is malformed or unreadable. */
static int check_trace(const char *path)
{
    vb_trace *trace = NULL;
    vb_status status = vb_trace_open(path, &trace);
    vb_trace_event event = {0};
    while (status == VB_OK) {
        status = vb_trace_next(trace, &event);
        if (event.kind == VB_TRACE_END) break;
    }
    vb_trace_close(trace);
    return status == VB_OK ? VB_EXIT_OK : vb_cli_status_error(VB_ERR_INVALID);
}

int vb_cmd_tune(int argc, char **argv)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    vb_tune_options options = {.device = "sim", .jobs = cpus > 0 ? (unsigned)cpus : 1};
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
        case OPT_DEVICE:
            if (strcmp(value, "sim") != 0 && strcmp(value, "cuda") != 0)
                return vb_cli_error(VB_EXIT_USAGE, "tune: bad --device '%s' (sim or cuda)", value);
            options.device = value;
            break;
        case OPT_CAPACITY:
            if (vb_cli_size_option("tune", "--capacity", value, &options.capacity) != VB_EXIT_OK) return VB_EXIT_USAGE;
            if (options.capacity < VB_TUNE_CAPACITY_STEP)
                return vb_cli_error(VB_EXIT_USAGE, "tune: --capacity '%s' is below 2MiB, the driver's smallest "
                                                   "allocation", value);
            break;
        case OPT_SHARD:
            if (vb_shard_parse(value, &options.shard) != 0)
                return vb_cli_error(VB_EXIT_USAGE, "tune: bad --shard '%s' (I/N with 1 <= I <= N, e.g. 2/8)", value);
            break;
        case OPT_JOBS: {
            char *end = NULL;
            long jobs = strtol(value, &end, 10);
            if (*end || value[0] < '0' || value[0] > '9' || jobs < 1 || jobs > 256)
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

    char out_path[4096] = "", dir[] = "/tmp/vrambench-pickle-XXXXXX", converted[64] = "";
    int exit_status = VB_EXIT_OK;
    if (access(trace_path, R_OK) != 0)
        return vb_cli_error(VB_EXIT_USAGE, "tune: cannot read %s: %s", trace_path, strerror(errno));
    if (is_pickle(trace_path)) {
        if (!mkdtemp(dir)) return vb_cli_error(VB_EXIT_FAILURE, "tune: no temporary directory: %s", strerror(errno));
        snprintf(converted, sizeof converted, "%s/snapshot.trace", dir);
        exit_status = convert_pickle(trace_path, converted);
        options.trace_path = converted;
    }
    if (exit_status == VB_EXIT_OK) exit_status = check_trace(options.trace_path);
    if (exit_status == VB_EXIT_OK && out) {
        vb_device_info info = {.simulated = strcmp(options.device, "sim") == 0};
        snprintf(info.name, sizeof info.name, "%s", info.simulated ? "simulated device" : "cuda");
        if (vb_report_output_path(out, &info, force, out_path, sizeof out_path) != VB_OK)
            exit_status = vb_cli_status_error(VB_ERR_INVALID);
    }
    json_t *document = NULL;
    if (exit_status == VB_EXIT_OK) {
        vb_status status = vb_tune_run(&options, options.quiet ? NULL : stdout, &document);
        fflush(stdout);
        if (status == VB_OK && out_path[0]) status = vb_report_write(document, out_path);
        if (status != VB_OK) exit_status = vb_cli_status_error(status);
        else if (out_path[0] && !options.quiet) fprintf(stderr, "vrambench: wrote %s\n", out_path);
    }
    json_decref(document);
    if (converted[0]) {
        unlink(converted);
        rmdir(dir);
    }
    return exit_status;
}
