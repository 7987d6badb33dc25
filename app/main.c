/* vrambench — entry point: dispatches to the subcommands; answers --help,
 * --version and `help COMMAND`. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/closest.h"
#include "base/host_chunks.h"
#include "cli.h"
#include "context.h"

/* The commit this binary was built from (the Makefile passes it). */
#ifndef VB_BUILD_COMMIT
#define VB_BUILD_COMMIT "unknown"
#endif

typedef struct command {
    const char *name;
    vb_command_fn run;
    const char *summary;
} command;

static const command commands[] = {
    {"list", vb_cmd_list, "what can be run (allocators, scenarios) and the names results use"},
    {"run", vb_cmd_run, "scenarios x allocators on one device; a summary table and Google Benchmark JSON"},
    {"replay", vb_cmd_replay, "a recorded trace (vbtrace, RMM CSV, .gz) against allocators"},
    {"tune", vb_cmd_tune, "the PYTORCH_ALLOC_CONF a trace should use, and the smallest GPU it fits"},
    {"explain", vb_cmd_explain, "why a trace runs out of memory under a capacity, and which settings would fit"},
    {"claims", vb_cmd_claims, "the documents' claims, each decided per allocator"},
    {"microbench", vb_cmd_microbench, "malloc+free latency per allocator and size in cache-hit steady state"},
    {"gen-trace", vb_cmd_gen_trace, "write a random allocation trace (RMM random_allocations style)"},
    {"check-sim", vb_cmd_check_sim, "re-run GPU results on the simulated device; list memory figures that differ"},
    {"compare", vb_cmd_compare, "results side by side: peaks, overhead, OOMs, driver calls; --fail-on for CI"},
    {"merge", vb_cmd_merge, "join the shards of a run, replay or tune (--shard I/N) into one file"},
    {"report", vb_cmd_report, "one self-contained HTML page of results files"},
};
#define COMMAND_COUNT (sizeof commands / sizeof commands[0])

static void usage(FILE *out)
{
    fputs("usage: vrambench COMMAND [OPTIONS]\n\ncommands:\n", out);
    for (size_t i = 0; i < COMMAND_COUNT; i++) fprintf(out, "  %-12s %s\n", commands[i].name, commands[i].summary);
    fputs("\n  vrambench COMMAND --help (or vrambench help COMMAND): its options, with units and examples\n"
          "  vrambench --version: the version, the commit it was built from and its device backends\n",
          out);
}

static int version(void)
{
#ifdef VB_HAVE_CUDA
    const char *backends = "cuda + sim (--device auto uses a GPU when one is found, else the simulated device)";
#else
    const char *backends = "sim only (built without CUDA: every run is on the simulated device)";
#endif
    printf("vrambench %s\ncommit: %s\nbackends: %s\n", VB_VERSION, VB_BUILD_COMMIT, backends);
    return VB_EXIT_OK;
}

/* The command named `name`, or NULL after one error line naming the nearest
 * (a misspelled top-level option, "--verison", is offered the nearest one). */
static const command *find_command(const char *name)
{
    if (name[0] == '-') {
        static const char *const options[] = {"--help", "--version", NULL};
        char hint[64];
        vb_cli_error(VB_EXIT_USAGE, "unknown option '%s'%s (vrambench --help lists the commands and options)", name,
                     vb_did_you_mean(name, options, hint, sizeof hint));
        return NULL;
    }
    const char *names[COMMAND_COUNT + 2];
    for (size_t i = 0; i < COMMAND_COUNT; i++) {
        if (strcmp(name, commands[i].name) == 0) return &commands[i];
        names[i] = commands[i].name;
    }
    names[COMMAND_COUNT] = "help"; /* main's own, offered for a misspelling too */
    names[COMMAND_COUNT + 1] = NULL;
    char hint[64];
    vb_cli_error(VB_EXIT_USAGE, "unknown command '%s'%s (vrambench --help lists the commands)", name,
                 vb_did_you_mean(name, names, hint, sizeof hint));
    return NULL;
}

/* Keeps a closed standard stream closed in effect: a file the command opens
 * would otherwise take its descriptor, and the lines meant for the stream
 * would land in that file. A closed stdin reads as empty; a closed stdout is
 * reopened read-only, so writing to it still fails (EBADF) and finish()
 * reports it; a closed stderr takes the messages nowhere. */
static void hold_standard_streams(void)
{
    static const int flags[3] = {O_RDONLY, O_RDONLY, O_WRONLY};
    for (int fd = 0; fd < 3; fd++)
        if (fcntl(fd, F_GETFD) == -1 && errno == EBADF) {
            int opened = open("/dev/null", flags[fd]);
            if (opened != -1 && opened != fd) close(opened); /* the lowest free descriptor: fd itself */
        }
}

/* The exit status of a command that returned `exit_status`: output it left
 * in stdout's buffer is written now, and a write to stdout that failed (a
 * full disk, a closed pipe, stdout closed) makes a command that succeeded
 * fail, with one line. A command that failed has said why already. */
static int finish(int exit_status)
{
    errno = 0;
    int flushed = fflush(stdout) == 0;
    int reason = vb_cli_stdout_failure() ? vb_cli_stdout_failure() : errno;
    if ((flushed && !ferror(stdout)) || exit_status != VB_EXIT_OK) return exit_status;
    /* A write stdio made on its own (a full buffer) failed and left no
     * errno: an empty write asks again, and a device or a closed stdout
     * answers (ENOSPC, EBADF; a full disk's file does not). */
    if (!reason && write(STDOUT_FILENO, "", 0) < 0) reason = errno;
    if (reason) return vb_cli_error(VB_EXIT_FAILURE, "cannot write to standard output: %s", strerror(reason));
    return vb_cli_error(VB_EXIT_FAILURE, "cannot write to standard output");
}

/* 0 when `option` (--help, --version) stands alone, else one error line and 2. */
static int alone(int argc, char **argv)
{
    if (argc == 2) return VB_EXIT_OK;
    return vb_cli_error(VB_EXIT_USAGE, "%s takes no arguments ('%s' follows it; vrambench help COMMAND is a "
                                       "command's help)", argv[1], argv[2]);
}

int main(int argc, char **argv)
{
    hold_standard_streams();
    (void)vb_host_heap_keep(VB_HOST_HEAP_HUGE_BYTES);
    if (argc < 2) /* a command line that is wrong is one line (docs/cli.md); the usage is a --help away */
        return vb_cli_error(VB_EXIT_USAGE, "which command? (vrambench --help lists them; e.g. vrambench replay TRACE)");
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        if (alone(argc, argv) != VB_EXIT_OK) return VB_EXIT_USAGE;
        usage(stdout);
        return finish(VB_EXIT_OK);
    }
    if (strcmp(argv[1], "--version") == 0)
        return alone(argc, argv) == VB_EXIT_OK ? finish(version()) : VB_EXIT_USAGE;
    if (strcmp(argv[1], "help") == 0) { /* help [COMMAND]: the command's own --help */
        if (argc > 3)
            return vb_cli_error(VB_EXIT_USAGE, "help takes one COMMAND ('%s' follows '%s')", argv[3], argv[2]);
        if (argc == 2 || strcmp(argv[2], "help") == 0) {
            usage(stdout);
            return finish(VB_EXIT_OK);
        }
        const command *c = find_command(argv[2]);
        if (!c) return VB_EXIT_USAGE;
        char *help_argv[] = {argv[2], "--help", NULL};
        return finish(c->run(2, help_argv));
    }
    const command *c = find_command(argv[1]);
    return c ? finish(c->run(argc - 1, argv + 1)) : VB_EXIT_USAGE;
}
