/* vrambench — `holder_refs`: document 001 (docs/sources.md),
 * the third example:
 *
 *     class TensorHolder:
 *         def __init__(self, size):
 *             self.tensor = torch.randn(size, size, device=device)
 *         def compute(self):
 *             y = self.tensor * 2
 *             return y
 *
 *     def manage_references():
 *       tensor_holder = TensorHolder(10000)
 *       result = tensor_holder.compute()
 *       tensor_holder = None
 *       # Result is still referencing y from compute until now.
 *       # result = None # Uncomment to test full release.
 *
 * The document claims that after `tensor_holder = None` the holder's tensor
 * is still held because `result` (y) "is still referencing the tensor". It
 * is not: `self.tensor * 2` is a new tensor with its own storage and no
 * reference to self.tensor (no autograd graph, randn does not require grad).
 * This scenario follows the code with the line the document invites us to
 * uncomment, and measures what stays: freed_at_holder_none_bytes (the
 * holder's 400 MB when the claim is wrong, 0 if it were right) and
 * held_by_result_bytes (what `result` alone keeps). */
#include "common.h"

#define HOLDER_SIZE 10000

/* Its steps (docs/results-json.md, "names"). */
enum { HOLDER_MADE, COMPUTED, HOLDER_NONE, RESULT_NONE, EMPTIED };
static const vb_name steps[] = {
    [HOLDER_MADE] = {"holder_made", "tensor_holder = TensorHolder(10000)"},
    [COMPUTED] = {"computed", "result = tensor_holder.compute()"},
    [HOLDER_NONE] = {"holder_none", "tensor_holder = None"},
    [RESULT_NONE] = {"result_none", "result = None"},
    [EMPTIED] = {"emptied", "empty_cache"},
    {NULL, NULL},
};

/* Its counters. */
enum { FREED_AT_HOLDER_NONE, HELD_BY_RESULT };
static const char *const counters[] = {
    [FREED_AT_HOLDER_NONE] = "freed_at_holder_none_bytes",
    [HELD_BY_RESULT] = "held_by_result_bytes",
    NULL,
};

/* TensorHolder: an object whose attribute is the only reference to its tensor. */
typedef struct tensor_holder {
    vb_tensor *tensor;
} tensor_holder;

/* TensorHolder(size).__init__ */
static vb_status holder_init(vb_run *run, tensor_holder *holder, int64_t size)
{
    vb_status status = vb_tensor_empty(run, size, size, vb_run_stream(run), &holder->tensor);
    if (status == VB_OK) status = vb_tensor_fill_random(holder->tensor, 1, vb_run_stream(run));
    return status;
}

/* TensorHolder.compute(): y = self.tensor * 2, a new tensor (relu_f32 reads
 * the tensor and writes y: the multiply's memory traffic). */
static vb_status holder_compute(vb_run *run, tensor_holder *holder, vb_tensor **y)
{
    vb_tensor *t = holder->tensor;
    vb_status status = vb_tensor_empty(run, vb_tensor_rows(t), vb_tensor_cols(t), vb_run_stream(run), y);
    if (status == VB_OK) status = vb_tensor_relu(*y, t, vb_run_stream(run));
    return status;
}

/* manage_references(), with `result = None` uncommented, then empty_cache. */
static vb_status run_holder_refs(vb_run *run)
{
    tensor_holder holder = {NULL};
    vb_tensor *result = NULL;
    vb_status status = vb_scenario_begin(run);
    uint64_t requested_at_start = vb_scenario_stats(run).requested_bytes;
    if (status == VB_OK) status = holder_init(run, &holder, HOLDER_SIZE);
    if (status == VB_OK) status = vb_run_step(run, steps[HOLDER_MADE].text);
    if (status == VB_OK) status = holder_compute(run, &holder, &result);
    if (status == VB_OK) status = vb_run_step(run, steps[COMPUTED].text);
    uint64_t requested_before_none = vb_scenario_stats(run).requested_bytes;
    if (status == VB_OK) status = vb_tensor_drop(&holder.tensor); /* the holder object goes, and its attribute */
    if (status == VB_OK) status = vb_run_step(run, steps[HOLDER_NONE].text);
    if (status == VB_OK) {
        uint64_t requested_after_none = vb_scenario_stats(run).requested_bytes;
        status = vb_run_set_counter(run, counters[FREED_AT_HOLDER_NONE],
                                    (double)requested_before_none - (double)requested_after_none);
        vb_keep_first(&status, vb_run_set_counter(run, counters[HELD_BY_RESULT],
                                                  (double)requested_after_none - (double)requested_at_start));
    }
    if (status == VB_OK) status = vb_tensor_drop(&result);
    if (status == VB_OK) status = vb_run_step(run, steps[RESULT_NONE].text);
    if (status == VB_OK) status = vb_run_empty_cache(run);
    if (status == VB_OK) status = vb_run_step(run, steps[EMPTIED].text);
    status = vb_scenario_outcome(run, status);
    vb_keep_first(&status, vb_tensor_drop(&holder.tensor));
    vb_keep_first(&status, vb_tensor_drop(&result));
    return status;
}

const vb_scenario vb_holder_refs_scenario = {
    .name = "holder_refs",
    .documents = "001",
    .description = "TensorHolder(10000); result = holder.compute(); holder = None; result = None",
    .run = run_holder_refs,
    .steps = steps,
    .counters = counters,
};
