/* vrambench — `vrambench report FILE... -o report.html`: results files as
 * one self-contained HTML page (summary and overhead tables, claims,
 * replays, tune, environment, plots). The page is made by the product's
 * Python package (python/vrambench/report.py, which reads the files through
 * vrambench.results and draws the plots with vrambench.plots) into a scratch
 * file (app/scratch.h: in $TMPDIR and unlinked, so no name is left behind
 * whatever ends the command), and written to OUT here, through the safe
 * writer (output_file.h: whole or not at all). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "input_file.h"
#include "json_input.h"
#include "output_file.h"
#include "scratch.h"

#define REPORT_USAGE                                                                                       \
    "usage: vrambench report FILE... -o report.html [--no-plots]\n"                                      \
    "  FILE: results of run, replay, tune, claims or microbench (.json or .json.gz),\n"                 \
    "        e.g. vrambench report results/*.json -o out/report.html\n"                                  \
    "  -o, --out report.html: the page (self-contained: nothing is loaded from the network),\n"         \
    "        e.g. -o out/report.html\n"                                                                  \
    "  --no-plots: leave the plots out (faster), e.g. vrambench report a.json -o r.html --no-plots;\n"  \
    "        plots need matplotlib for $VB_PYTHON (default /usr/bin/python3, else python3)\n"

/* The child's exit status when it could not run Python (it says so itself). */
#define EXEC_FAILED 127

/* The descriptor the child writes the page to, and its name for it (--out). */
#define PAGE_FD 3
#define PAGE_PATH "/dev/fd/3"

/* Reads every FILE that is a pipe, FIFO or device once, as every command
 * reads one (app/input_file.h: a FIFO waited on with the note, bounded by
 * $VB_SPOOL_LIMIT): the page's maker reads that copy, as often as it needs
 * (a FIFO gives its bytes once, and the maker's notes would come only when
 * it has ended). The exit status to give. */
static int spool_inputs(const char **files, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        struct stat info;
        /* a regular file is read where it is; the maker names a missing file or a directory */
        if (stat(files[i], &info) != 0 || S_ISREG(info.st_mode) || S_ISDIR(info.st_mode)) continue;
        vb_status status = vb_input_spool_capped(files[i], VB_JSON_INPUT_MAX_BYTES); /* what the maker takes */
        if (status == VB_ERR_HOST_OOM) return vb_cli_status_error(status);
        if (status != VB_OK) return vb_cli_error(VB_EXIT_USAGE, "report: %s", vb_last_error());
    }
    return VB_EXIT_OK;
}

/* A descriptor of `file`'s spooled copy for the page's maker, above
 * PAGE_FD (so that no dup2 of the child's lands on it), and its name for
 * it in `name`; -1 when `file` has no copy or it cannot be opened. */
static int open_copy(const char *file, char *name, size_t capacity)
{
    if (!vb_input_is_spooled(file)) return -1;
    int fd = vb_input_open(file, NULL);
    int copy = fd < 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, PAGE_FD + 1);
    if (fd >= 0) close(fd);
    if (copy >= 0) snprintf(name, capacity, "/dev/fd/%d", copy);
    return copy;
}

/* Runs the page's maker, `child_argv` (its first `n` words), with
 * `copies[0..count)` (descriptors, -1 for none) open in it; the exit
 * status to give. */
static int run_maker(const char *python, char **child_argv, size_t n, int no_plots, int page, const char *dir,
                     const int *copies, size_t count)
{
    child_argv[n++] = "--out";
    child_argv[n++] = PAGE_PATH;
    if (no_plots) child_argv[n++] = "--no-plots";
    /* its stderr, read when it has ended: a traceback becomes one line (vb_cli_child_ended) */
    int errors = vb_scratch_file();
    if (errors < 0)
        return vb_cli_error(VB_EXIT_FAILURE, "report: cannot make a temporary file in %s: %s",
                            vb_scratch_directory(), strerror(errno));
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        close(errors);
        return vb_cli_error(VB_EXIT_FAILURE, "report: cannot start %s: %s", python, strerror(errno));
    }
    if (pid == 0) {
        /* A report ended by a signal takes the page's maker with it (it removes its own temporaries). */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) _exit(VB_EXIT_FAILURE);
        /* dup2 leaves the copies open across exec (and a page already at PAGE_FD is opened up for it) */
        if (dup2(errors, STDERR_FILENO) < 0) _exit(VB_EXIT_FAILURE);
        if (page == PAGE_FD ? fcntl(page, F_SETFD, 0) < 0 : dup2(page, PAGE_FD) < 0) _exit(VB_EXIT_FAILURE);
        for (size_t i = 0; i < count; i++) /* the copies of pipes and FIFOs it reads (above PAGE_FD) */
            if (copies[i] >= 0 && fcntl(copies[i], F_SETFD, 0) < 0) _exit(VB_EXIT_FAILURE);
        const char *old = getenv("PYTHONPATH");
        char path[2 * PATH_MAX];
        snprintf(path, sizeof path, "%s%s%s", dir, old && *old ? ":" : "", old && *old ? old : "");
        setenv("PYTHONPATH", path, 1);
        setenv("MPLBACKEND", "Agg", 1);
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, STDOUT_FILENO); /* notes; errors stay on stderr */
        execvp(python, child_argv);
        fprintf(stderr, "vrambench: error: report: cannot run %s: %s\n", python, strerror(errno));
        _exit(EXEC_FAILED);
    }
    /* Its own error lines say what was wrong (bad input: 2; EXEC_FAILED: the
     * child's line); any other failure may have been silent ($VB_PYTHON not
     * a Python) or a traceback: one line of ours then. */
    char what[PATH_MAX + 64];
    snprintf(what, sizeof what, "report: %s -m vrambench.report", python);
    int exit_status = vb_cli_child_ended(what, pid, errors, "vrambench", NULL);
    close(errors);
    return exit_status;
}

/* Runs python -m vrambench.report on the files into `page` (a scratch file);
 * the exit status to give. A file spooled by spool_inputs is given as its
 * copy, named as the file (--named COPY=FILE). */
static int make_page(const char **files, size_t count, int no_plots, int page)
{
    char dir[PATH_MAX];
    const char *given = getenv("VB_PYTHON_DIR");
    if (vb_cli_python_dir(dir, sizeof dir) != 0)
        return given && *given ? vb_cli_error(VB_EXIT_FAILURE, "report: VB_PYTHON_DIR='%s' holds no vrambench/ "
                                                               "(the folder that holds the Python package)", given)
                               : vb_cli_error(VB_EXIT_FAILURE, "report: the Python package python/vrambench is not "
                                                               "found (set VB_PYTHON_DIR to the folder that holds vrambench/)");
    const char *python = vb_cli_python();
    char **child_argv = calloc(2 * count + 8, sizeof *child_argv);
    int *copies = calloc(count + 1, sizeof *copies);
    char(*copy_names)[32] = calloc(count + 1, sizeof *copy_names);
    char **named = calloc(count + 1, sizeof *named);
    if (!child_argv || !copies || !copy_names || !named) {
        free(child_argv);
        free(copies);
        free(copy_names);
        free(named);
        return vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
    }
    size_t n = 0;
    child_argv[n++] = (char *)python;
    child_argv[n++] = "-m";
    child_argv[n++] = "vrambench.report";
    int exit_status = VB_EXIT_OK;
    for (size_t i = 0; i < count; i++) copies[i] = -1;
    for (size_t i = 0; i < count && exit_status == VB_EXIT_OK; i++) {
        copies[i] = open_copy(files[i], copy_names[i], sizeof copy_names[i]);
        if (copies[i] < 0 && vb_input_is_spooled(files[i]))
            exit_status =
                vb_cli_error(VB_EXIT_FAILURE, "report: %s: cannot read its copy: %s", files[i], strerror(errno));
        child_argv[n++] = copies[i] >= 0 ? copy_names[i] : (char *)files[i];
    }
    for (size_t i = 0; i < count && exit_status == VB_EXIT_OK; i++) {
        if (copies[i] < 0) continue;
        size_t length = strlen("--named=") + strlen(copy_names[i]) + strlen(files[i]) + 2;
        if (!(named[i] = malloc(length))) {
            exit_status = vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
            break;
        }
        snprintf(named[i], length, "--named=%s=%s", copy_names[i], files[i]);
        child_argv[n++] = named[i];
    }
    if (exit_status == VB_EXIT_OK) exit_status = run_maker(python, child_argv, n, no_plots, page, dir, copies, count);
    for (size_t i = 0; i < count; i++) {
        if (copies[i] >= 0) close(copies[i]);
        free(named[i]);
    }
    free(child_argv);
    free(copies);
    free(copy_names);
    free(named);
    return exit_status;
}

/* Copies the page in `from` (a scratch file) to `to` through a vb_output;
 * an empty page (a $VB_PYTHON that ended with success but never ran
 * vrambench.report) is a failure, never an empty file. */
static vb_status write_page(int from, const char *to)
{
    FILE *in = vb_scratch_stream(from, "rb");
    if (!in) return vb_error(VB_ERR_IO, "report: the page was not made: %s", strerror(errno));
    vb_output out;
    vb_status status = vb_output_open(&out, to);
    char buffer[1 << 16];
    size_t got, total = 0;
    while (status == VB_OK && (got = fread(buffer, 1, sizeof buffer, in)) > 0) {
        status = vb_output_write(&out, buffer, got);
        total += got;
    }
    if (status == VB_OK && ferror(in)) status = vb_error(VB_ERR_IO, "report: reading the page failed");
    if (status == VB_OK && total == 0)
        status = vb_error(VB_ERR_IO, "report: %s -m vrambench.report ended with success but wrote no page",
                          vb_cli_python());
    fclose(in);
    if (status == VB_OK) return vb_output_commit(&out);
    vb_output_abandon(&out);
    return status;
}

int vb_cmd_report(int argc, char **argv)
{
    vb_files_out args;
    int exit_status = vb_cli_files_out(argc, argv, REPORT_USAGE, "--no-plots", &args);
    if (exit_status != VB_EXIT_OK || args.helped) {
        vb_files_out_free(&args);
        return exit_status;
    }
    if (vb_output_check_uncompressed(args.out, "the page") != VB_OK) exit_status = vb_cli_status_error(VB_ERR_INVALID);
    if (exit_status == VB_EXIT_OK) exit_status = spool_inputs(args.files, args.count);
    int page = exit_status == VB_EXIT_OK ? vb_scratch_file() : -1;
    if (exit_status == VB_EXIT_OK && page < 0)
        exit_status = vb_cli_error(VB_EXIT_FAILURE, "report: cannot make a temporary file in %s: %s",
                                   vb_scratch_directory(), strerror(errno));
    else if (exit_status == VB_EXIT_OK) {
        exit_status = make_page(args.files, args.count, args.flag, page);
        vb_status status = exit_status == VB_EXIT_OK ? write_page(page, args.out) : VB_OK;
        close(page); /* before the line below, which a closed pipe may end (SIGPIPE) */
        if (status != VB_OK) exit_status = vb_cli_status_error(status);
        else if (exit_status == VB_EXIT_OK) vb_cli_line(stderr, "vrambench: wrote %s", args.out);
    }
    vb_files_out_free(&args);
    return exit_status;
}
