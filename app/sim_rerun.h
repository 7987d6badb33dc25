/* vrambench — cases re-run on the simulated device as a library: what
 * check-sim compares a GPU's figures with (app/cmd_check_sim.c). No command
 * line, no output, no file: the results come back in memory.
 *
 * Cases run as `run --min-time 0 --max-iterations 1` runs them: the memory
 * pass (every memory figure, app/runner.h) and one timed iteration. Claims
 * are decided as `claims --device sim` decides them. An external:PATH spec
 * is refused without loading its library (it could not run on the sim). */
#ifndef VB_SIM_RERUN_H
#define VB_SIM_RERUN_H

#include <stddef.h>
#include <stdint.h>

#include "allocators/spec.h"
#include "claims.h"
#include "runner.h"

typedef struct vb_sim_rerun {
    uint64_t capacity_bytes;          /* the sim's memory (0: its default) */
    const char *trace;                /* a replay: the trace's path; NULL: scenarios */
    const char *const *scenarios;     /* registered scenario names (without a parameter) */
    size_t scenario_count;
    const vb_allocator_spec *specs;
    size_t spec_count;
} vb_sim_rerun;

/* Runs every scenario (or the trace, named "replay:FILE NAME" as `replay`
 * names it) against every spec on a fresh sim device; *results holds
 * *count results, scenario by scenario. Each spec's allocator is created
 * once before anything runs. VB_ERR_INVALID is bad input (an unknown
 * scenario, a spec its allocator refuses, an external one, a malformed
 * trace, a capacity the sim refuses), with the message of the first. */
vb_status vb_sim_rerun_cases(const vb_sim_rerun *request, vb_case_result **results, size_t *count);
void vb_sim_rerun_cases_free(vb_case_result *results, size_t count);

/* Decides every claim of the catalogue for every spec on a fresh sim device
 * of the default capacity: (*decisions)[spec * *claim_count + claim], the
 * claims in vb_claim_catalogue's order. Failures as vb_sim_rerun_cases'. */
vb_status vb_sim_rerun_claims(const vb_allocator_spec *specs, size_t spec_count, vb_decision **decisions,
                              size_t *claim_count);

#endif
