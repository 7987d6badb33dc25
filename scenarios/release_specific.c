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

/* Runs the steps; stops at the first failure. */
static vb_status release_specific_run(vb_run *run)
{
    vb_stream stream = vb_run_stream(run);
    vb_addr x, small, neighbour;
    VB_TRY(vb_run_set_counter(run, "large_tensor_bytes", (double)LARGE_BYTES));
    VB_TRY(vb_run_set_counter(run, "small_tensor_bytes", (double)SMALL_BYTES));
    VB_TRY(vb_run_step(run, "start"));
    VB_TRY(vb_run_malloc(run, LARGE_BYTES, stream, &x));
    VB_TRY(vb_run_step(run, "x=randn(1000,1000)"));
    VB_TRY(vb_run_free(run, x));
    VB_TRY(vb_run_step(run, "del x"));
    VB_TRY(vb_run_empty_cache(run));
    VB_TRY(vb_run_step(run, "empty_cache"));
    VB_TRY(vb_run_malloc(run, SMALL_BYTES, stream, &small));
    VB_TRY(vb_run_malloc(run, SMALL_BYTES, stream, &neighbour));
    VB_TRY(vb_run_step(run, "small,neighbour=randn(100,100)"));
    VB_TRY(vb_run_free(run, small));
    VB_TRY(vb_run_step(run, "del small"));
    VB_TRY(vb_run_empty_cache(run));
    VB_TRY(vb_run_step(run, "empty_cache (neighbour alive)"));
    VB_TRY(vb_run_free(run, neighbour));
    VB_TRY(vb_run_empty_cache(run));
    return vb_run_step(run, "del neighbour; empty_cache");
}

const vb_scenario vb_release_specific_scenario = {
    .name = "release_specific",
    .documents = "000, 004",
    .description = "del x + empty_cache: is that tensor's memory back with the driver? (large; small with a live neighbour)",
    .run = release_specific_run,
};
