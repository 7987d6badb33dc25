/* vrambench — the scenarios.
 *
 * A scenario is one file in scenarios/, following one code example of the
 * source documents (docs/sources.md; it cites which by number). It runs in a
 * vb_run (runtime/run.h): it allocates through the run, marks named steps,
 * and knows nothing of which allocator or device it runs on beyond what the
 * run tells it.
 */
#ifndef VB_SCENARIO_H
#define VB_SCENARIO_H

#include "runtime/run.h"

typedef struct vb_scenario {
    const char *name;
    const char *documents;   /* which source documents it follows (docs/sources.md), e.g. "000, 004" */
    const char *description; /* one line for `vrambench list scenarios` */
    /* Runs the scenario once. Returns VB_OK, or the first error (with a
     * message); an out-of-memory the scenario expects is not an error. */
    vb_status (*run)(vb_run *run);
    /* 0, or the capacity the scenario runs under: the runner gives it a
     * device capped at this many bytes (vb_device_cap_open), the same on
     * every GPU and on sim. */
    uint64_t device_cap_bytes;
    /* 0, or the iterations of its memory pass when not the runner's
     * VB_MEMORY_PASS_ITERATIONS (a trace replay is one recorded run: 1). */
    unsigned memory_pass_iterations;
} vb_scenario;

/* The registered scenarios (scenarios/registry.c), NULL-terminated. */
extern const vb_scenario *const vb_scenario_registry[];

/* The scenario named `name`, or NULL. */
const vb_scenario *vb_scenario_find(const char *name);

#endif
