/* vrambench — `vrambench replay TRACE [options]`: `run` (app/cmd_run.c)
 * with the trace replayed against each allocator (app/replay.c), once
 * (min-time 0) unless the options say otherwise. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "trace.h"

/* Hands the trace to `run` as --trace, after its defaults and before the
 * caller's options (so those override them); then closes the copy a pipe
 * was spooled to (vb_trace_spool). */
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
