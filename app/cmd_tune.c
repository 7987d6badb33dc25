/* vrambench — `vrambench tune TRACE`: which PYTORCH_ALLOC_CONF a
 * workload should use, and the smallest device it fits on (app/tune.h).
 *
 * TRACE is anything `replay` reads, or a PyTorch memory snapshot pickle
 * (torch.cuda.memory._dump_snapshot), which is converted first by running
 * tools/torch2trace.py into a temporary trace (the one reader of pickles;
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
#include "report.h"
#include "trace.h"
#include "tune.h"

#define TUNE_USAGE                                                                                                 \
    "usage: vrambench tune TRACE [--device sim|cuda] [--capacity SIZE] [--out FILE.json] [--jobs N] [--quiet]\n" \
    "  TRACE: a vbtrace, RMM log (.gz too) or a PyTorch memory snapshot pickle\n"                                 \
    "  --capacity: device memory OOMs are counted at (simulated; default 80GiB), e.g. 24GiB\n"                    \
    "  --jobs: processes at once (default: the online CPUs)\n"

/* Where tools/torch2trace.py is: $VB_TORCH2TRACE, or tools/ next to the
 * build directory this executable is in (build/ or build/SANITIZER/), or
 * under the current directory. 0 when found. */
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
        static const char *const relative[] = {"/../tools/torch2trace.py", "/../../tools/torch2trace.py"};
        for (size_t i = 0; i < 2; i++)
            if ((size_t)snprintf(out, capacity, "%s%s", exe, relative[i]) < capacity && access(out, R_OK) == 0)
                return 0;
    }
    snprintf(out, capacity, "tools/torch2trace.py");
    return access(out, R_OK) == 0 ? 0 : -1;
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
                            "tune: %s is a PyTorch snapshot, and tools/torch2trace.py, which reads it, is not found "
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
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        fputs(TUNE_USAGE, stdout);
        return VB_EXIT_OK;
    }
    if (argc < 2 || strncmp(argv[1], "--", 2) == 0) return vb_cli_error(VB_EXIT_USAGE, "%s", TUNE_USAGE);
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
            int bad = vb_cli_parse_capacity("tune", "--capacity", value, VB_TUNE_CAPACITY_STEP, &options.capacity);
            if (bad) return bad;
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

    char out_path[4096] = "", dir[] = "/tmp/vrambench-pickle-XXXXXX", converted[64] = "";
    int exit_status = VB_EXIT_OK;
    if (access(argv[1], R_OK) != 0)
        return vb_cli_error(VB_EXIT_USAGE, "tune: cannot read %s: %s", argv[1], strerror(errno));
    if (is_pickle(argv[1])) {
        if (!mkdtemp(dir)) return vb_cli_error(VB_EXIT_FAILURE, "tune: no temporary directory: %s", strerror(errno));
        snprintf(converted, sizeof converted, "%s/snapshot.trace", dir);
        exit_status = convert_pickle(argv[1], converted);
        options.trace_path = converted;
    }
    if (exit_status == VB_EXIT_OK) exit_status = check_trace(options.trace_path);
    if (exit_status == VB_EXIT_OK && out) {
        vb_device_info info = {.simulated = strcmp(options.device, "sim") == 0};
        snprintf(info.name, sizeof info.name, "%s", info.simulated ? "simulated device" : "cuda");
        if (vb_report_output_path(out, &info, out_path, sizeof out_path) != VB_OK)
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
    if (converted[0]) {
        unlink(converted);
        rmdir(dir);
    }
    return exit_status;
}
