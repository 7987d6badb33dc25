/* vrambench — the documents' claims, each decided from a measurement.
 *
 * A claim names the scenario that measures it and a criterion fixed in
 * advance. The criterion reads only the measurement (a scenario's timeline
 * and counters), so the same code decides for our allocators and for
 * PyTorch's own allocator, whose measurements lab/harnesses/pytorch_claims.py records
 * on a GPU with the documents' code. */
#ifndef VB_CLAIMS_H
#define VB_CLAIMS_H

#include "allocators/spec.h"
#include "base/device.h"
#include "scenarios/scenario.h"

typedef enum vb_verdict {
    VB_VERDICT_HOLDS,
    VB_VERDICT_DOES_NOT_HOLD,
    VB_VERDICT_DEPENDS,
    VB_VERDICT_UNDECIDABLE, /* the measurement cannot decide it (e.g. timing on sim) */
} vb_verdict;

/* What one scenario run measured. */
typedef struct vb_measurement {
    const vb_timeline_sample *timeline;
    size_t timeline_count;
    const vb_run_counter *counters;
    size_t counter_count;
    int simulated;
} vb_measurement;

#define VB_CLAIM_MAX_NUMBERS 8

/* A verdict with the numbers that decided it and a one-line reason. */
typedef struct vb_decision {
    vb_verdict verdict;
    char reason[256];
    size_t number_count;
    vb_run_counter numbers[VB_CLAIM_MAX_NUMBERS];
} vb_decision;

typedef struct vb_claim {
    const char *id;
    const char *documents;
    const char *claim;       /* the documents' statement, in one sentence of ours */
    const char *scenario;    /* the scenario whose run measures it */
    const char *measurement; /* what is read from that run */
    const char *criterion;   /* fixed in advance */
    void (*decide)(const vb_scenario *scenario, const vb_measurement *measurement, vb_decision *out);
} vb_claim;

/* The catalogue, NULL-terminated. */
extern const vb_claim *const vb_claim_catalogue[];

/* The claim with this id, or NULL. */
const vb_claim *vb_claim_find(const char *id);

/* Decides `claim` on `measurement`. A measurement that lacks a step or
 * counter the criterion needs gives VB_VERDICT_UNDECIDABLE naming it. */
void vb_claim_decide(const vb_claim *claim, const vb_measurement *measurement, vb_decision *out);

/* Runs `scenario` once on `spec` (one iteration on a fresh allocator,
 * through the runner: app/runner.h) and decides, into decisions[i], each of
 * the `count` claims[i] it measures; the others are left as they are. The
 * device's CUDA context size is among the counters as context_bytes. A
 * failed run is its status, with the runner's message (naming the case). */
vb_status vb_claims_measure(vb_device *dev, const vb_scenario *scenario, const vb_allocator_spec *spec,
                            const vb_claim *const *claims, size_t count, vb_decision *decisions);

/* "holds", "does not hold", "depends", "undecidable". */
const char *vb_verdict_name(vb_verdict verdict);

#endif
