/* vrambench — `vrambench replay TRACE [options]`: `run` (app/cmd_run.c,
 * the same option table and body) with the trace replayed against each
 * allocator (app/replay.c), once (min-time 0) unless the options say
 * otherwise. */
#include "cli.h"
#include "trace.h"

/* Runs the replay; then closes the copy a pipe was spooled to
 * (vb_trace_spool). */
int vb_cmd_replay(int argc, char **argv)
{
    int exit_status = vb_run_command(argc, argv, 1);
    vb_trace_spool_release();
    return exit_status;
}
