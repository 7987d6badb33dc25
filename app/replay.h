/* vrambench — trace replay as a scenario (app/replay.c). */
#ifndef VB_REPLAY_H
#define VB_REPLAY_H

#include "scenarios/scenario.h"

/* Trace replay (app/replay.c; docs/trace-format.md). Its run's
 * parameter is the trace's path, which every run must give, so it is not in
 * the registry (that every scenario runs without one): `vrambench replay`
 * runs it by this name. */
extern const vb_scenario vb_replay_scenario;

#endif
