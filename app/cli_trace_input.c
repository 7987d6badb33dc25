/* vrambench — the trace a command reads (cli.h, vb_cli_trace_input): a
 * trace as every input is read (app/input_file.h), or a PyTorch memory
 * snapshot pickle (torch.cuda.memory._dump_snapshot; gzip-compressed or
 * not) converted first by
 * python/vrambench/torch2trace.py, the one reader of pickles (its errors are
 * passed on, exit 2), its trace coming back through a pipe into a scratch
 * copy. `tune` and `explain` read their TRACE this way. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "cli.h"
#include "input_file.h"
#include "replay.h"
#include "scratch.h"
#include "trace.h"

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

/* The first two bytes a gzip stream of `size` bytes at `packed` inflates
 * to, into head; the count (fewer when it is damaged or shorter). */
static size_t gunzipped_head(unsigned char *packed, size_t size, unsigned char head[2])
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return 0;
    z.next_in = packed;
    z.avail_in = (uInt)size;
    z.next_out = head;
    z.avail_out = 2;
    while (z.avail_out && inflate(&z, Z_NO_FLUSH) == Z_OK) {
    }
    size_t got = 2 - z.avail_out;
    inflateEnd(&z);
    return got;
}

/* 1 if `path` (its spooled copy when it has one) starts like a pickle
 * (vb_trace_looks_like_pickle), compressed with gzip or not. */
static int is_pickle(const char *path)
{
    unsigned char start[4096], head[2] = {0};
    int fd = vb_input_open(path, NULL);
    if (fd < 0) return 0;
    ssize_t got = pread(fd, start, sizeof start, 0);
    close(fd);
    if (got < 2) return 0;
    if (start[0] == 0x1f && start[1] == 0x8b) {
        if (gunzipped_head(start, (size_t)got, head) != 2) return 0;
    } else {
        memcpy(head, start, 2);
    }
    return vb_trace_looks_like_pickle(head, 2);
}

/* Converts the snapshot `pickle` with torch2trace.py, which reads it on its
 * stdin (the file, or its spooled copy) and writes the trace to a pipe; the
 * trace is spooled (app/input_file.h: an unlinked scratch file) under the
 * name `converted`, which the rest of the command reads. The exit status to
 * give (0 done; torch2trace has said what is wrong). */
static int convert_pickle(const char *command, const char *pickle, int quiet, const char *converted)
{
    char tool[PATH_MAX];
    if (find_torch2trace(tool, sizeof tool) != 0)
        return vb_cli_error(VB_EXIT_FAILURE,
                            "%s: %s is a PyTorch snapshot, and python/vrambench/torch2trace.py, which reads it, is not "
                            "found (set VB_TORCH2TRACE)",
                            command, pickle);
    int input = vb_input_open(pickle, NULL), trace_pipe[2] = {-1, -1};
    if (input < 0) return vb_cli_error(VB_EXIT_USAGE, "%s: cannot read %s: %s", command, pickle, strerror(errno));
    /* its stderr, read when it has ended: a traceback becomes one line (vb_cli_child_ended) */
    int errors = vb_scratch_file();
    if (errors < 0) {
        close(input);
        return vb_cli_error(VB_EXIT_FAILURE, "%s: cannot make a temporary file in %s: %s", command,
                            vb_scratch_directory(), strerror(errno));
    }
    if (pipe2(trace_pipe, O_CLOEXEC) != 0) {
        close(input);
        close(errors);
        return vb_cli_error(VB_EXIT_FAILURE, "%s: cannot make a pipe: %s", command, strerror(errno));
    }
    char name_option[PATH_MAX + 16]; /* the snapshot's name for torch2trace's messages */
    snprintf(name_option, sizeof name_option, "--name=%s", pickle);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        /* dup2 leaves the copies open across exec. */
        if (dup2(input, STDIN_FILENO) < 0 || dup2(trace_pipe[1], STDOUT_FILENO) < 0 || dup2(errors, STDERR_FILENO) < 0)
            _exit(VB_EXIT_FAILURE);
        execlp("python3", "python3", tool, "-", "-", name_option, quiet ? "--quiet" : (char *)NULL, (char *)NULL);
        fprintf(stderr, "vrambench: error: %s: cannot run python3 for %s: %s\n", command, tool, strerror(errno));
        _exit(VB_EXIT_FAILURE);
    }
    int start_error = pid < 0 ? errno : 0;
    close(input);
    close(trace_pipe[1]);
    vb_status spooled = pid < 0 ? VB_OK : vb_input_spool_fd(converted, trace_pipe[0]);
    close(trace_pipe[0]); /* a child still writing (the copy hit its limit) gets EPIPE */
    if (pid < 0) {
        close(errors);
        return vb_cli_error(VB_EXIT_FAILURE, "%s: cannot start python3: %s", command, strerror(start_error));
    }
    char what[2 * PATH_MAX + 64];
    snprintf(what, sizeof what, "%s: converting %s with python3 %s", command, pickle, tool);
    int exit_status = vb_cli_child_ended(what, pid, errors, "torch2trace:", command);
    close(errors);
    if (exit_status != VB_EXIT_OK) return exit_status;
    return spooled == VB_OK ? VB_EXIT_OK : vb_cli_status_error(spooled);
}

int vb_cli_trace_input(const char *command, const char *input, int quiet, char *converted, const char **path)
{
    *path = input;
    if (vb_input_spool(input) != VB_OK) return vb_cli_error(VB_EXIT_USAGE, "%s: %s", command, vb_last_error());
    if (is_pickle(input)) {
        snprintf(converted, 4200, "%s (converted by torch2trace)", input);
        int status = convert_pickle(command, input, quiet, converted);
        if (status != VB_EXIT_OK) return status;
        *path = converted;
    }
    vb_trace_first_alloc first;
    if (vb_replay_check_trace(*path, &first) != VB_OK) return vb_cli_status_error(VB_ERR_INVALID);
    return vb_cli_refuse_empty_trace(command, input, &first);
}

int vb_cli_refuse_empty_trace(const char *command, const char *path, const vb_trace_first_alloc *first)
{
    if (first->line || first->recorded_failures) return VB_EXIT_OK;
    return vb_cli_error(VB_EXIT_USAGE,
                        "%s: %s holds no allocation of a byte or more: nothing to replay, every figure would be 0 "
                        "(a vbtrace's 'a ID SIZE' lines, an RMM log's allocate rows: docs/trace-format.md)",
                        command, path);
}
