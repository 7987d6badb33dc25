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

/* Runs the steps; stops at the first failure. */
static vb_status reuse_after_del_run(vb_run *run)
{
    vb_stream stream = vb_run_stream(run);
    vb_addr a, b, c, d, e;
    VB_TRY(vb_run_set_counter(run, "tensor_bytes", (double)TENSOR_BYTES));
    VB_TRY(vb_run_step(run, "start"));
    VB_TRY(vb_run_malloc(run, TENSOR_BYTES, stream, &a));
    VB_TRY(vb_run_malloc(run, TENSOR_BYTES, stream, &b));
    VB_TRY(vb_run_malloc(run, TENSOR_BYTES, stream, &c));
    VB_TRY(vb_run_step(run, "a,b=randn; c=a+b"));
    VB_TRY(vb_run_free(run, a));
    VB_TRY(vb_run_free(run, b));
    VB_TRY(vb_run_step(run, "del a; del b"));
    VB_TRY(vb_run_malloc(run, TENSOR_BYTES, stream, &d));
    VB_TRY(vb_run_malloc(run, TENSOR_BYTES, stream, &e));
    VB_TRY(vb_run_step(run, "d,e=randn (no empty_cache)"));
    VB_TRY(vb_run_free(run, c));
    VB_TRY(vb_run_free(run, d));
    VB_TRY(vb_run_free(run, e));
    VB_TRY(vb_run_empty_cache(run));
    return vb_run_step(run, "end; empty_cache");
}

const vb_scenario vb_reuse_after_del_scenario = {
    .name = "reuse_after_del",
    .documents = "004",
    .description = "after del a, del b: do new tensors of the same size need new device memory?",
    .run = reuse_after_del_run,
};
