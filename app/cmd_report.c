/* vrambench — `vrambench report FILE... -o report.html`: results files as
 * one self-contained HTML page (summary and overhead tables, claims,
 * replays, tune, environment, plots). The page is made by the product's
 * Python package (python/vrambench/report.py, which reads the files through
 * vrambench.results and draws the plots with vrambench.plots) into a private
 * temporary folder, and written to OUT here, through the safe writer
 * (report.h: whole or not at all). */
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
#include "output_file.h"

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

/* Runs python -m vrambench.report on the files into `html`; the exit status to give. */
static int make_page(const char **files, size_t count, int no_plots, const char *html)
{
    char dir[PATH_MAX];
    const char *given = getenv("VB_PYTHON_DIR");
    if (vb_cli_python_dir(dir, sizeof dir) != 0)
        return given && *given ? vb_cli_error(VB_EXIT_FAILURE, "report: VB_PYTHON_DIR='%s' holds no vrambench/ "
                                                               "(the folder that holds the Python package)", given)
                               : vb_cli_error(VB_EXIT_FAILURE, "report: the Python package python/vrambench is not "
                                                               "found (set VB_PYTHON_DIR to the folder that holds vrambench/)");
    const char *python = vb_cli_python();
    char **child_argv = calloc(count + 8, sizeof *child_argv);
    if (!child_argv) return vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
    size_t n = 0;
    child_argv[n++] = (char *)python;
    child_argv[n++] = "-m";
    child_argv[n++] = "vrambench.report";
    for (size_t i = 0; i < count; i++) child_argv[n++] = (char *)files[i];
    child_argv[n++] = "--out";
    child_argv[n++] = (char *)html;
    if (no_plots) child_argv[n++] = "--no-plots";
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        free(child_argv);
        return vb_cli_error(VB_EXIT_FAILURE, "report: cannot start %s: %s", python, strerror(errno));
    }
    if (pid == 0) {
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
    free(child_argv);
    int status = 0;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status))
        return vb_cli_error(VB_EXIT_FAILURE, "report: %s -m vrambench.report failed", python);
    /* It has said what was wrong (bad input: 2; EXEC_FAILED: the child did);
     * any other failure may have been silent ($VB_PYTHON not a Python). */
    if (WEXITSTATUS(status) == 0) return VB_EXIT_OK;
    if (WEXITSTATUS(status) == VB_EXIT_USAGE) return VB_EXIT_USAGE;
    if (WEXITSTATUS(status) == EXEC_FAILED) return VB_EXIT_FAILURE;
    return vb_cli_error(VB_EXIT_FAILURE, "report: %s -m vrambench.report failed (exit status %d)", python,
                        WEXITSTATUS(status));
}

/* Copies the page at `from` to `to` through a vb_output. */
static vb_status write_page(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb");
    if (!in) return vb_error(VB_ERR_IO, "report: the page was not made: %s", strerror(errno));
    vb_output out;
    vb_status status = vb_output_open(&out, to);
    char buffer[1 << 16];
    size_t got;
    while (status == VB_OK && (got = fread(buffer, 1, sizeof buffer, in)) > 0) status = vb_output_write(&out, buffer, got);
    if (status == VB_OK && ferror(in)) status = vb_error(VB_ERR_IO, "report: reading the page failed");
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
    /* Python reads the files; a malformed VB_SPOOL_LIMIT is refused here, as every command refuses it */
    for (size_t i = 0; i < args.count && exit_status == VB_EXIT_OK; i++)
        if (vb_input_check_spool_limit(args.files[i]) != VB_OK) exit_status = vb_cli_status_error(VB_ERR_INVALID);
    char dir[] = "/tmp/vrambench-report-XXXXXX", page[64] = "";
    if (exit_status == VB_EXIT_OK && !mkdtemp(dir))
        exit_status = vb_cli_error(VB_EXIT_FAILURE, "report: no temporary folder: %s", strerror(errno));
    else if (exit_status == VB_EXIT_OK) {
        snprintf(page, sizeof page, "%s/report.html", dir);
        exit_status = make_page(args.files, args.count, args.flag, page);
        if (exit_status == VB_EXIT_OK) {
            vb_status status = write_page(page, args.out);
            if (status != VB_OK) exit_status = vb_cli_status_error(status);
            else vb_cli_line(stderr, "vrambench: wrote %s", args.out);
        }
        unlink(page);
        rmdir(dir);
    }
    vb_files_out_free(&args);
    return exit_status;
}
