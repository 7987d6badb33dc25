/* vrambench — `vrambench tune TRACE`: which PYTORCH_ALLOC_CONF a
 * workload should use, and the smallest device it fits on (app/tune.h).
 *
 * TRACE is anything `replay` reads, or a PyTorch memory snapshot pickle
 * (torch.cuda.memory._dump_snapshot), which is converted first by running
 * python/vrambench/torch2trace.py (the one reader of pickles; its errors are
 * passed on, exit 2), its trace coming back through a pipe into a scratch
 * copy. TRACE is read as every input is (app/input_file.h): a pipe or FIFO
 * once, spooled. The trace is read through once before anything runs, so a
 * malformed one costs one error line and exit 2; --out may not be TRACE. */
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
#include "input_file.h"
#include "json_report.h"
#include "output_file.h"
#include "output_path.h"
#include "replay.h"
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

/* 1 if `path` (its spooled copy when it has one) starts like a pickle
 * (protocol 2 or later: 0x80, version). */
static int is_pickle(const char *path)
{
    unsigned char head[2] = {0};
    int fd = vb_input_open(path, NULL);
    if (fd < 0) return 0;
    ssize_t got = pread(fd, head, 2, 0);
    close(fd);
    return got == 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5;
}

/* Converts the snapshot `pickle` with torch2trace.py, which reads it on its
 * stdin (the file, or its spooled copy) and writes the trace to a pipe; the
 * trace is spooled (app/input_file.h: an unlinked scratch file) under the
 * name `converted`, which the rest of the tune reads. The exit status to
 * give (0 done; torch2trace has said what is wrong). */
static int convert_pickle(const char *pickle, const char *converted)
{
    char tool[PATH_MAX];
    if (find_torch2trace(tool, sizeof tool) != 0)
        return vb_cli_error(VB_EXIT_FAILURE,
                            "tune: %s is a PyTorch snapshot, and python/vrambench/torch2trace.py, which reads it, is not found "
                            "(set VB_TORCH2TRACE)", pickle);
    int input = vb_input_open(pickle, NULL), trace_pipe[2] = {-1, -1};
    if (input < 0) return vb_cli_error(VB_EXIT_USAGE, "tune: cannot read %s: %s", pickle, strerror(errno));
    if (pipe2(trace_pipe, O_CLOEXEC) != 0) {
        close(input);
        return vb_cli_error(VB_EXIT_FAILURE, "tune: cannot make a pipe: %s", strerror(errno));
    }
    char name_option[PATH_MAX + 16]; /* the snapshot's name for torch2trace's messages */
    snprintf(name_option, sizeof name_option, "--name=%s", pickle);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        /* dup2 leaves the copies open across exec. */
        if (dup2(input, STDIN_FILENO) < 0 || dup2(trace_pipe[1], STDOUT_FILENO) < 0) _exit(VB_EXIT_FAILURE);
        execlp("python3", "python3", tool, "-", "-", name_option, (char *)NULL);
        fprintf(stderr, "vrambench: error: tune: cannot run python3 for %s: %s\n", tool, strerror(errno));
        _exit(VB_EXIT_FAILURE);
    }
    int start_error = pid < 0 ? errno : 0;
    close(input);
    close(trace_pipe[1]);
    vb_status spooled = pid < 0 ? VB_OK : vb_input_spool_fd(converted, trace_pipe[0]);
    close(trace_pipe[0]); /* a child still writing (the copy hit its limit) gets EPIPE */
    if (pid < 0) return vb_cli_error(VB_EXIT_FAILURE, "tune: cannot start python3: %s", strerror(start_error));
    int status = 0;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status))
        return vb_cli_error(VB_EXIT_FAILURE, "tune: converting %s failed", pickle);
    if (WEXITSTATUS(status) != 0) return WEXITSTATUS(status) == VB_EXIT_USAGE ? VB_EXIT_USAGE : VB_EXIT_FAILURE;
    return spooled == VB_OK ? VB_EXIT_OK : vb_cli_status_error(spooled);
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
            if (vb_cli_parse_capacity("tune", "--capacity", value, VB_TUNE_CAPACITY_STEP, &options.capacity) != 0)
                return VB_EXIT_USAGE;
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

    /* The input is read the one way every command reads (app/input_file.h):
     * a pipe or FIFO once, into a scratch copy, which every later pass reads. */
    char out_path[4096] = "", converted[4200] = "";
    int exit_status = VB_EXIT_OK;
    if (vb_input_spool(trace_path) != VB_OK) return vb_cli_error(VB_EXIT_USAGE, "tune: %s", vb_last_error());
    if (is_pickle(trace_path)) {
        snprintf(converted, sizeof converted, "%s (converted by torch2trace)", trace_path);
        exit_status = convert_pickle(trace_path, converted);
        options.trace_path = converted;
    }
    if (exit_status == VB_EXIT_OK && vb_replay_check_trace(options.trace_path, NULL) != VB_OK)
        exit_status = vb_cli_status_error(VB_ERR_INVALID);
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
        fflush(stdout);
        if (status == VB_OK && out_path[0]) status = vb_report_write(document, out_path);
        if (status != VB_OK) exit_status = vb_cli_status_error(status);
        else if (out_path[0] && !options.quiet) fprintf(stderr, "vrambench: wrote %s\n", out_path);
    }
    json_decref(document);
    vb_input_release();
    return exit_status;
}
