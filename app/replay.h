/* vrambench — trace replay as a scenario (app/replay.c). */
#ifndef VB_REPLAY_H
#define VB_REPLAY_H

#include <stdint.h>

#include "scenarios/scenario.h"

/* Trace replay (app/replay.c; docs/trace-format.md). Its run's
 * parameter is the trace's path, which every run must give, so it is not in
 * the registry (that every scenario runs without one): `vrambench replay`
 * runs it by this name. */
extern const vb_scenario vb_replay_scenario;

/* 1 if `name` is one of the replay's own step names ("start of trace",
 * "peak reserved", "end of trace", "event N"): a trace's marker may not
 * take it, or its sample would pass for the replay's own. */
int vb_replay_step_name_taken(const char *name);

/* Reads the whole trace at `path` once, as every command that replays it
 * does before anything runs: the error of a malformed one ("PATH:LINE:
 * ..."), or of a marker named like one of the replay's steps. Unless NULL,
 * `first` gets the first allocation of a size > 0 (its bytes and line; 0s
 * when there is none) and the count of recorded failures (`o` lines). */
typedef struct vb_trace_first_alloc {
    uint64_t bytes, line;
    uint64_t recorded_failures;
} vb_trace_first_alloc;
vb_status vb_replay_check_trace(const char *path, vb_trace_first_alloc *first);

#endif
