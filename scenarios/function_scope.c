/* vrambench — `function_scope`: tensors that live in a function's scope.
 *
 * Document 000 (docs/sources.md), Example 3:
 *
 *     def process_data(data):
 *         tensor = torch.tensor(data, device=device)
 *         # ... perform computations with tensor ...
 *         del tensor
 *         torch.cuda.empty_cache()
 *         return result  # result would be calculated from 'tensor' before deletion
 *     data = [1,2,3,4,5]
 *     result = process_data(data)
 *
 * then document 004 (docs/sources.md), Example 1:
 *
 *     def process_data():
 *         a = torch.randn(1000, 1000, device='cuda')
 *         b = torch.randn(1000, 1000, device='cuda')
 *         c = a + b
 *         del a
 *         del b
 *         return c
 *     result = process_data()
 *     torch.cuda.empty_cache()
 *
 * run as one script, so the second `result = ...` rebinds the first (whose
 * tensor goes then), and closed with `del result`: requested bytes end where
 * they started. 004 says a and b are "not immediately freed" at `del` and
 * only reclaimed by empty_cache; the timeline shows requested bytes drop at
 * each `del`, and what empty_cache changes is only what the cache holds.
 *
 * Example 3's `result` is tensor.sum(): a one-element int64 tensor (its
 * five-element reduction launches no kernel here: only memory matters). */
#include "common.h"

/* Its steps (docs/results-json.md, "names"). */
enum { TENSOR_MADE, SUMMED, DEL_TENSOR, EMPTIED_INSIDE, A_MADE, B_MADE, C_MADE, DEL_A, DEL_B, RETURNED_000, RETURNED_004, EMPTIED, DEL_RESULT };
static const vb_name steps[] = {
    [TENSOR_MADE] = {"tensor_made", "tensor = torch.tensor(data)"},
    [SUMMED] = {"summed", "result = tensor.sum()"},
    [DEL_TENSOR] = {"del_tensor", "del tensor"},
    [EMPTIED_INSIDE] = {"emptied_inside", "empty_cache (in process_data)"},
    [A_MADE] = {"a_made", "a = randn(1000, 1000)"},
    [B_MADE] = {"b_made", "b = randn(1000, 1000)"},
    [C_MADE] = {"c_made", "c = a + b"},
    [DEL_A] = {"del_a", "del a"},
    [DEL_B] = {"del_b", "del b"},
    [RETURNED_000] = {"returned_000", "result = process_data(data)"},
    [RETURNED_004] = {"returned_004", "result = process_data()"},
    [EMPTIED] = {"emptied", "empty_cache"},
    [DEL_RESULT] = {"del_result", "del result"},
    {NULL, NULL},
};

/* Its counters. */
enum { REQUESTED_CHANGE };
static const char *const counters[] = {
    [REQUESTED_CHANGE] = "requested_change_bytes",
    NULL,
};

/* torch.tensor([1, 2, 3, 4, 5]) as int64, copied from the host. */
static const int64_t example_data[5] = {1, 2, 3, 4, 5};

/* Document 000's process_data(data): returns `result`. */
static vb_status process_data_000(vb_run *run, vb_tensor **result)
{
    vb_stream stream = vb_run_stream(run);
    vb_tensor *tensor = NULL;
    vb_status status = vb_tensor_empty_typed(run, VB_DTYPE_I64, 1, 5, stream, &tensor);
    if (status == VB_OK) status = vb_tensor_copy_from_host(tensor, example_data, stream);
    if (status == VB_OK) status = vb_run_step(run, steps[TENSOR_MADE].text);
    if (status == VB_OK) status = vb_tensor_empty_typed(run, VB_DTYPE_I64, 1, 1, stream, result);
    if (status == VB_OK) status = vb_run_step(run, steps[SUMMED].text);
    if (status == VB_OK) status = vb_tensor_drop(&tensor);
    if (status == VB_OK) status = vb_run_step(run, steps[DEL_TENSOR].text);
    if (status == VB_OK) status = vb_run_empty_cache(run);
    if (status == VB_OK) status = vb_run_step(run, steps[EMPTIED_INSIDE].text);
    /* The copy reads example_data, which is static: no wait needed. */
    vb_keep_first(&status, vb_tensor_drop(&tensor));
    return status;
}

/* Document 004's process_data(): returns c. */
static vb_status process_data_004(vb_run *run, vb_tensor **c)
{
    vb_stream stream = vb_run_stream(run);
    vb_tensor *a = NULL, *b = NULL;
    vb_status status = vb_tensor_empty(run, 1000, 1000, stream, &a);
    if (status == VB_OK) status = vb_tensor_fill_random(a, 1, stream);
    if (status == VB_OK) status = vb_run_step(run, steps[A_MADE].text);
    if (status == VB_OK) status = vb_tensor_empty(run, 1000, 1000, stream, &b);
    if (status == VB_OK) status = vb_tensor_fill_random(b, 2, stream);
    if (status == VB_OK) status = vb_run_step(run, steps[B_MADE].text);
    /* c = a + b: relu_f32 reads a and writes c, axpy adds b. */
    if (status == VB_OK) status = vb_tensor_empty(run, 1000, 1000, stream, c);
    if (status == VB_OK) status = vb_tensor_relu(*c, a, stream);
    if (status == VB_OK) status = vb_tensor_axpy(1.0f, b, *c, stream);
    if (status == VB_OK) status = vb_run_step(run, steps[C_MADE].text);
    if (status == VB_OK) status = vb_tensor_drop(&a);
    if (status == VB_OK) status = vb_run_step(run, steps[DEL_A].text);
    if (status == VB_OK) status = vb_tensor_drop(&b);
    if (status == VB_OK) status = vb_run_step(run, steps[DEL_B].text);
    vb_keep_first(&status, vb_tensor_drop(&a));
    vb_keep_first(&status, vb_tensor_drop(&b));
    return status;
}

/* Both examples as one script, then `del result`. */
static vb_status run_function_scope(vb_run *run)
{
    vb_tensor *result = NULL, *returned = NULL;
    vb_status status = vb_scenario_begin(run);
    uint64_t requested_at_start = vb_scenario_stats(run).requested_bytes;
    if (status == VB_OK) status = process_data_000(run, &result);
    if (status == VB_OK) status = vb_run_step(run, steps[RETURNED_000].text);
    if (status == VB_OK) status = process_data_004(run, &returned);
    /* `result = process_data()` rebinds result: the old tensor goes. */
    if (status == VB_OK) {
        status = vb_tensor_drop(&result);
        result = returned;
        returned = NULL;
    }
    if (status == VB_OK) status = vb_run_step(run, steps[RETURNED_004].text);
    if (status == VB_OK) status = vb_run_empty_cache(run);
    if (status == VB_OK) status = vb_run_step(run, steps[EMPTIED].text);
    if (status == VB_OK) status = vb_tensor_drop(&result);
    if (status == VB_OK) status = vb_run_step(run, steps[DEL_RESULT].text);
    if (status == VB_OK)
        status = vb_run_set_counter(run, counters[REQUESTED_CHANGE],
                                    (double)vb_scenario_stats(run).requested_bytes - (double)requested_at_start);
    status = vb_scenario_outcome(run, status);
    vb_keep_first(&status, vb_tensor_drop(&result));
    vb_keep_first(&status, vb_tensor_drop(&returned));
    return status;
}

const vb_scenario vb_function_scope_scenario = {
    .name = "function_scope",
    .documents = "000, 004",
    .description = "process_data(): tensors created, del'd and returned in a function; ends at its start",
    .run = run_function_scope,
    .steps = steps,
    .counters = counters,
};
