/* vrambench — `views`: document 000 (docs/sources.md),
 * Example 2, "Dealing with Views":
 *
 *     x = torch.randn(1000, 1000, device=device)
 *     y = x[:]  # y is a view of x
 *     del x     # Deleting x doesn't release memory because y still holds a reference
 *     del y     # Deleting y releases the memory
 *     torch.cuda.empty_cache()
 *
 * What the allocator sees: one 4,000,000-byte block, freed at `del y` and not
 * at `del x`. Whether the device gets it back at `del y` or only at
 * empty_cache depends on the strategy; the timeline shows which. */
#include "common.h"

/* Its steps (docs/results-json.md, "names"). */
enum { MADE, DEL_X, DEL_Y, EMPTIED };
static const vb_name steps[] = {
    [MADE] = {"made", "x,y=x[:]"},
    [DEL_X] = {"del_x", "del x"},
    [DEL_Y] = {"del_y", "del y"},
    [EMPTIED] = {"emptied", "empty_cache"},
    {NULL, NULL},
};

/* Runs Example 2 once, sampling after each line. */
static vb_status run_views(vb_run *run)
{
    vb_stream stream = vb_run_stream(run);
    vb_tensor *x = NULL, *y = NULL;
    vb_status status = vb_scenario_begin(run);
    if (status == VB_OK) status = vb_tensor_empty(run, 1000, 1000, stream, &x);
    if (status == VB_OK) status = vb_tensor_fill_random(x, 0, stream);
    if (status == VB_OK) status = vb_tensor_view(x, &y);
    if (status == VB_OK) status = vb_run_step(run, steps[MADE].text);
    if (status == VB_OK) status = vb_tensor_drop(&x);
    if (status == VB_OK) status = vb_run_step(run, steps[DEL_X].text);
    if (status == VB_OK) status = vb_tensor_drop(&y);
    if (status == VB_OK) status = vb_run_step(run, steps[DEL_Y].text);
    if (status == VB_OK) status = vb_run_empty_cache(run);
    if (status == VB_OK) status = vb_run_step(run, steps[EMPTIED].text);
    status = vb_scenario_outcome(run, status);
    vb_keep_first(&status, vb_tensor_drop(&x));
    vb_keep_first(&status, vb_tensor_drop(&y));
    return status;
}

const vb_scenario vb_views_scenario = {
    .name = "views",
    .documents = "000",
    .description = "x = randn(1000,1000); y = x[:]; del x (frees nothing); del y; empty_cache",
    .run = run_views,
    .steps = steps,
};
