/* vrambench — release_specific: does deleting a tensor's last reference and
 * calling empty_cache give that tensor's memory back to the driver?
 *
 * Document 000, Example 1 (x = torch.randn(1000, 1000); del x;
 * torch.cuda.empty_cache()) and document 004 ("del tensor_name ... followed
 * by empty_cache can then trigger the release of that particular tensor's
 * device memory"). The caveat the documents leave out is measured too: a
 * small tensor shares its segment with live neighbours under a caching
 * strategy, so empty_cache cannot return its segment while they live. */
#include "scenario.h"

#define LARGE_BYTES (1000ull * 1000 * 4) /* randn(1000, 1000), fp32 */
#define SMALL_BYTES (100ull * 100 * 4)   /* randn(100, 100), fp32 */

/* Its steps (docs/results-json.md, "names"). */
enum { LARGE_MADE, DEL_LARGE, EMPTIED, SMALL_MADE, DEL_SMALL, EMPTIED_NEIGHBOUR_ALIVE, END };
static const vb_name steps[] = {
    [LARGE_MADE] = {"large_made", "x=randn(1000,1000)"},
    [DEL_LARGE] = {"del_large", "del x"},
    [EMPTIED] = {"emptied", "empty_cache"},
    [SMALL_MADE] = {"small_made", "small,neighbour=randn(100,100)"},
    [DEL_SMALL] = {"del_small", "del small"},
    [EMPTIED_NEIGHBOUR_ALIVE] = {"emptied_neighbour_alive", "empty_cache (neighbour alive)"},
    [END] = {"end", "del neighbour; empty_cache"},
    {NULL, NULL},
};

/* Its counters. */
enum { LARGE_TENSOR, SMALL_TENSOR };
static const char *const counters[] = {
    [LARGE_TENSOR] = "large_tensor_bytes",
    [SMALL_TENSOR] = "small_tensor_bytes",
    NULL,
};

/* Runs the steps; stops at the first failure. */
static vb_status release_specific_run(vb_run *run)
{
    vb_stream stream = vb_run_stream(run);
    vb_addr x, small, neighbour;
    VB_TRY(vb_run_set_counter(run, counters[LARGE_TENSOR], (double)LARGE_BYTES));
    VB_TRY(vb_run_set_counter(run, counters[SMALL_TENSOR], (double)SMALL_BYTES));
    VB_TRY(vb_run_step(run, vb_scenario_common_steps[VB_STEP_START].text));
    VB_TRY(vb_run_malloc(run, LARGE_BYTES, stream, &x));
    VB_TRY(vb_run_step(run, steps[LARGE_MADE].text));
    VB_TRY(vb_run_free(run, x));
    VB_TRY(vb_run_step(run, steps[DEL_LARGE].text));
    VB_TRY(vb_run_empty_cache(run));
    VB_TRY(vb_run_step(run, steps[EMPTIED].text));
    VB_TRY(vb_run_malloc(run, SMALL_BYTES, stream, &small));
    VB_TRY(vb_run_malloc(run, SMALL_BYTES, stream, &neighbour));
    VB_TRY(vb_run_step(run, steps[SMALL_MADE].text));
    VB_TRY(vb_run_free(run, small));
    VB_TRY(vb_run_step(run, steps[DEL_SMALL].text));
    VB_TRY(vb_run_empty_cache(run));
    VB_TRY(vb_run_step(run, steps[EMPTIED_NEIGHBOUR_ALIVE].text));
    VB_TRY(vb_run_free(run, neighbour));
    VB_TRY(vb_run_empty_cache(run));
    return vb_run_step(run, steps[END].text);
}

const vb_scenario vb_release_specific_scenario = {
    .name = "release_specific",
    .documents = "000, 004",
    .description = "del x + empty_cache: is that tensor's memory back with the driver? (large; small with a live neighbour)",
    .run = release_specific_run,
    .steps = steps,
    .counters = counters,
};
