/* vrambench — `vrambench tune TRACE`: which PYTORCH_CUDA_ALLOC_CONF a
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

#define TUNE_USAGE                                                                                                 \
    "usage: vrambench tune TRACE [--device sim|cuda] [--capacity SIZE] [--out FILE.json] [--jobs N] [--quiet]\n" \
    "  TRACE: a vbtrace, RMM log (.gz too) or a PyTorch memory snapshot pickle\n"                                 \
    "  --capacity: device memory OOMs are counted at (simulated; default 80GiB), e.g. 24GiB\n"                    \
    "  --jobs: processes at once (default: the online CPUs)\n"

/* Where python/vrambench/torch2trace.py is: $VB_TORCH2TRACE, python/ next to the
 * build directory this executable is in (build/ or build/SANITIZER/), the
 * share/vrambench/python of an installed PREFIX/bin, or under the current
 * directory. 0 when found. */
static int find_torch2trace(char *out, size_t capacity)
{
    const char *env = getenv("VB_TORCH2TRACE");
    if (env && *env) return snprintf(out, capacity, "%s", env) < (int)capacity ? 0 : -1;
    char exe[PATH_MAX];
    ssize_t length = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (length > 0) {
        exe[length] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) *slash = '\0';
        /* build/, build/SANITIZER/, or an installed PREFIX/bin (make install). */
        static const char *const relative[] = {"/../python/vrambench/torch2trace.py",
                                               "/../../python/vrambench/torch2trace.py",
                                               "/../share/vrambench/python/vrambench/torch2trace.py"};
        for (size_t i = 0; i < sizeof relative / sizeof relative[0]; i++)
            if ((size_t)snprintf(out, capacity, "%s%s", exe, relative[i]) < capacity && access(out, R_OK) == 0)
                return 0;
    }
    snprintf(out, capacity, "python/vrambench/torch2trace.py");
    return access(out, R_OK) == 0 ? 0 : -1;
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
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        /* dup2 leaves the copies open across exec. */
        if (dup2(input, STDIN_FILENO) < 0 || dup2(trace_pipe[1], STDOUT_FILENO) < 0) _exit(VB_EXIT_FAILURE);
        execlp("python3", "python3", tool, "-", "-", "--name", pickle, (char *)NULL);
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
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        fputs(TUNE_USAGE, stdout);
        return VB_EXIT_OK;
    }
    if (argc < 2 || strncmp(argv[1], "--", 2) == 0) {
        vb_cli_error(VB_EXIT_USAGE, "tune: a TRACE is needed first");
        fputs(TUNE_USAGE, stderr);
        return VB_EXIT_USAGE;
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    vb_tune_options options = {.trace_path = argv[1], .device = "sim", .jobs = cpus > 0 ? (unsigned)cpus : 1};
    const char *out = NULL;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--quiet") == 0) {
            options.quiet = 1;
            continue;
        }
        if (i + 1 >= argc) return vb_cli_error(VB_EXIT_USAGE, "tune: unknown option or missing value: '%s'", argv[i]);
        const char *value = argv[++i];
        if (strcmp(argv[i - 1], "--device") == 0) {
            if (strcmp(value, "sim") != 0 && strcmp(value, "cuda") != 0)
                return vb_cli_error(VB_EXIT_USAGE, "tune: bad --device '%s' (sim or cuda)", value);
            options.device = value;
        } else if (strcmp(argv[i - 1], "--capacity") == 0) {
            if (vb_cli_parse_bytes(value, &options.capacity) != 0 || options.capacity < VB_TUNE_CAPACITY_STEP)
                return vb_cli_error(VB_EXIT_USAGE, "tune: bad --capacity '%s' (bytes, at least 2MiB, e.g. 24GiB)",
                                    value);
        } else if (strcmp(argv[i - 1], "--out") == 0) {
            out = value;
        } else if (strcmp(argv[i - 1], "--jobs") == 0) {
            char *end = NULL;
            long jobs = strtol(value, &end, 10);
            if (*end || jobs < 1 || jobs > 256)
                return vb_cli_error(VB_EXIT_USAGE, "tune: bad --jobs '%s' (1 to 256)", value);
            options.jobs = (unsigned)jobs;
        } else {
            return vb_cli_error(VB_EXIT_USAGE, "tune: unknown option '%s' (see vrambench tune --help)", argv[i - 1]);
        }
    }
    const char *slash = strrchr(argv[1], '/');
    char label[300];
    snprintf(label, sizeof label, "tune:%s", slash ? slash + 1 : argv[1]);
    options.label = label;

    /* The input is read the one way every command reads (app/input_file.h):
     * a pipe or FIFO once, into a scratch copy, which every later pass reads. */
    char out_path[4096] = "", converted[4200] = "";
    int exit_status = VB_EXIT_OK;
    if (vb_input_spool(argv[1]) != VB_OK) return vb_cli_error(VB_EXIT_USAGE, "tune: %s", vb_last_error());
    if (is_pickle(argv[1])) {
        snprintf(converted, sizeof converted, "%s (converted by torch2trace)", argv[1]);
        exit_status = convert_pickle(argv[1], converted);
        options.trace_path = converted;
    }
    if (exit_status == VB_EXIT_OK && vb_replay_check_trace(options.trace_path) != VB_OK)
        exit_status = vb_cli_status_error(VB_ERR_INVALID);
    if (exit_status == VB_EXIT_OK && out) {
        vb_device_info info = {.simulated = strcmp(options.device, "sim") == 0};
        snprintf(info.name, sizeof info.name, "%s", info.simulated ? "simulated device" : "cuda");
        vb_named_file files[] = {{"the trace", argv[1], 0}, {"--out", out_path, 1}};
        if (vb_report_output_path(out, &info, out_path, sizeof out_path) != VB_OK ||
            vb_output_check_distinct(files, sizeof files / sizeof files[0]) != VB_OK)
            exit_status = vb_cli_status_error(VB_ERR_INVALID);
    }
    json_t *document = NULL;
    if (exit_status == VB_EXIT_OK) {
        vb_status status = vb_tune_run(&options, stdout, &document);
        fflush(stdout);
        if (status == VB_OK && out_path[0]) status = vb_report_write(document, out_path);
        if (status != VB_OK) exit_status = vb_cli_status_error(status);
        else if (out_path[0] && !options.quiet) fprintf(stderr, "vrambench: wrote %s\n", out_path);
    }
    json_decref(document);
    vb_input_release();
    return exit_status;
}
