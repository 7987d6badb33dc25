/* vrambench — reuse_after_del: is a deleted tensor's memory usable again
 * before empty_cache?
 *
 * Document 004, Example 1: process_data() makes a and b (1000 x 1000),
 * c = a + b, del a, del b, returns c; the document says their device memory
 * "is not immediately freed. Only after the execution of
 * torch.cuda.empty_cache() can the GPU memory ... be effectively reclaimed".
 * Measured: after the dels, two new tensors of the same size are made
 * without empty_cache; whether they needed new device memory says whether
 * the old memory was reclaimed (returned to the driver, or reusable). */
#include "scenario.h"

#define TENSOR_BYTES (1000ull * 1000 * 4) /* randn(1000, 1000), fp32 */

/* Its steps (docs/results-json.md, "names"). */
enum { MADE, DELETED, NEW_TENSORS, END };
static const vb_name steps[] = {
    [MADE] = {"made", "a,b=randn; c=a+b"},
    [DELETED] = {"deleted", "del a; del b"},
    [NEW_TENSORS] = {"new_tensors", "d,e=randn (no empty_cache)"},
    [END] = {"end", "end; empty_cache"},
    {NULL, NULL},
};

/* Its counters. */
enum { TENSOR };
static const char *const counters[] = {
    [TENSOR] = "tensor_bytes",
    NULL,
};

/* Runs the steps; stops at the first failure. */
static vb_status reuse_after_del_run(vb_run *run)
{
    vb_stream stream = vb_run_stream(run);
    vb_addr a, b, c, d, e;
    VB_TRY(vb_run_set_counter(run, counters[TENSOR], (double)TENSOR_BYTES));
    VB_TRY(vb_run_step(run, vb_scenario_common_steps[VB_STEP_START].text));
    VB_TRY(vb_run_malloc(run, TENSOR_BYTES, stream, &a));
    VB_TRY(vb_run_malloc(run, TENSOR_BYTES, stream, &b));
    VB_TRY(vb_run_malloc(run, TENSOR_BYTES, stream, &c));
    VB_TRY(vb_run_step(run, steps[MADE].text));
    VB_TRY(vb_run_free(run, a));
    VB_TRY(vb_run_free(run, b));
    VB_TRY(vb_run_step(run, steps[DELETED].text));
    VB_TRY(vb_run_malloc(run, TENSOR_BYTES, stream, &d));
    VB_TRY(vb_run_malloc(run, TENSOR_BYTES, stream, &e));
    VB_TRY(vb_run_step(run, steps[NEW_TENSORS].text));
    VB_TRY(vb_run_free(run, c));
    VB_TRY(vb_run_free(run, d));
    VB_TRY(vb_run_free(run, e));
    VB_TRY(vb_run_empty_cache(run));
    return vb_run_step(run, steps[END].text);
}

const vb_scenario vb_reuse_after_del_scenario = {
    .name = "reuse_after_del",
    .documents = "004",
    .description = "after del a, del b: do new tensors of the same size need new device memory?",
    .run = reuse_after_del_run,
    .steps = steps,
    .counters = counters,
};
