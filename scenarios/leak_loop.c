/* vrambench — leak_loop: do unreferenced tensors leak, and does a gap
 * between reserved and allocated memory mean a leak?
 *
 * Document 004 says "PyTorch, by default, does not automatically garbage
 * collect CUDA memory associated with tensors that are no longer referenced
 * ... the memory will remain allocated, ultimately leading to a memory leak",
 * and that "a consistently large difference" between memory_reserved() and
 * memory_allocated() indicates a leak. Two loops of 004 Example 1's
 * process_data() (a, b = randn; c = a + b; del a; del b; return c) measure
 * both: in the first the returned c is dropped at once (nothing referenced:
 * a leak would show as growing allocated memory); in the second every c is
 * kept in a list (a real leak). The row count cycles through four values, as
 * batches of varying length do, so a caching strategy keeps blocks of
 * several sizes. */
#include <stdio.h>
#include <stdlib.h>

#include "scenario.h"

#define ITERATIONS 100
#define SAMPLE_EVERY 10
#define COLUMNS 1000ull

/* Its steps (docs/results-json.md, "names"). */
enum { UNREFERENCED, KEPT, END };
static const vb_name steps[] = {
    [UNREFERENCED] = {"unreferenced", "unreferenced %d"},
    [KEPT] = {"kept", "kept %d"},
    [END] = {"end", "del results; empty_cache"},
    {NULL, NULL},
};

/* Its counters. */
enum { ITERATIONS_COUNTER, LARGEST_TENSOR };
static const char *const counters[] = {
    [ITERATIONS_COUNTER] = "iterations",
    [LARGEST_TENSOR] = "largest_tensor_bytes",
    NULL,
};

/* The fp32 bytes of iteration i's tensors: rows 1000, 1250, 1500, 1750, ... */
static uint64_t tensor_bytes(int iteration)
{
    return (1000ull + 250ull * (uint64_t)(iteration % 4)) * COLUMNS * 4;
}

/* process_data(): allocates a, b and c, frees a and b, returns c. */
static vb_status process_data(vb_run *run, int iteration, vb_addr *c)
{
    vb_stream stream = vb_run_stream(run);
    uint64_t bytes = tensor_bytes(iteration);
    vb_addr a, b;
    VB_TRY(vb_run_malloc(run, bytes, stream, &a));
    VB_TRY(vb_run_malloc(run, bytes, stream, &b));
    VB_TRY(vb_run_malloc(run, bytes, stream, c));
    VB_TRY(vb_run_free(run, a));
    return vb_run_free(run, b);
}

/* Samples every SAMPLE_EVERY iterations as the step `phase` (a pattern of
 * the steps table) numbered with the iterations done. */
static vb_status sample(vb_run *run, int phase, int done)
{
    if (done % SAMPLE_EVERY != 0) return VB_OK;
    char step[64];
    snprintf(step, sizeof step, steps[phase].text, done);
    return vb_run_step(run, step);
}

/* Runs both loops; frees what the second kept. */
static vb_status leak_loop_run(vb_run *run)
{
    vb_addr kept[ITERATIONS];
    int kept_count = 0;
    vb_status status = VB_OK;
    VB_TRY(vb_run_set_counter(run, counters[ITERATIONS_COUNTER], ITERATIONS));
    VB_TRY(vb_run_set_counter(run, counters[LARGEST_TENSOR], (double)tensor_bytes(3)));
    VB_TRY(vb_run_step(run, vb_scenario_common_steps[VB_STEP_START].text));
    for (int i = 0; i < ITERATIONS; i++) {
        vb_addr c;
        VB_TRY(process_data(run, i, &c));
        VB_TRY(vb_run_free(run, c)); /* result = process_data(); dropped at once */
        VB_TRY(sample(run, UNREFERENCED, i + 1));
    }
    for (int i = 0; i < ITERATIONS && status == VB_OK; i++) {
        status = process_data(run, i, &kept[kept_count]);
        if (status == VB_OK) kept_count++;
        if (status == VB_OK) status = sample(run, KEPT, i + 1); /* results.append(c) */
    }
    for (int i = 0; i < kept_count; i++) {
        vb_status freed = vb_run_free(run, kept[i]);
        if (status == VB_OK) status = freed;
    }
    VB_TRY(status);
    VB_TRY(vb_run_empty_cache(run));
    return vb_run_step(run, steps[END].text);
}

const vb_scenario vb_leak_loop_scenario = {
    .name = "leak_loop",
    .documents = "004",
    .description = "100 x process_data() with results dropped, then kept: leak or cache? reserved-allocated gap",
    .run = leak_loop_run,
    .steps = steps,
    .counters = counters,
};
