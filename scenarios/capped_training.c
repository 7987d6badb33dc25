/* vrambench — capped_training: does calling empty_cache inside the training
 * loop help avoid out-of-memory?
 *
 * Documents 003 ("incorporating it strategically into training loops can help
 * avoid OOM errors") and 004 (Example 2 calls empty_cache after every batch).
 * The device is capped at CAP_BYTES of free memory (a ballast allocation
 * takes the rest), a small MLP's parameters, gradients and Adam moments are
 * allocated, and training steps with batches of varying size run with
 * empty_cache after every step and without. The largest batch that trains
 * without an out-of-memory is searched for each way; peak reserved memory is
 * compared at the largest batch both ways manage. */
#include "scenario.h"

#define CAP_BYTES (1ull << 30)
#define HIDDEN 1024ull
#define LAYERS 4
#define STEPS 5
#define SEARCH_FROM 1024ull

/* Its steps (docs/results-json.md, "names"). */
enum { MODEL, SEARCHED_WITHOUT, SEARCHED_WITH, BALLAST, BALLAST_FREED };
static const vb_name steps[] = {
    [MODEL] = {"model", "model, grads, Adam moments"},
    [SEARCHED_WITHOUT] = {"searched_without", "search without empty_cache"},
    [SEARCHED_WITH] = {"searched_with", "search with empty_cache"},
    [BALLAST] = {"ballast", "ballast: 1 GiB left free"},
    [BALLAST_FREED] = {"ballast_freed", "ballast freed"},
    {NULL, NULL},
};

/* Its counters. */
enum { MAX_BATCH_WITHOUT, MAX_BATCH_WITH, COMMON_BATCH, PEAK_WITHOUT, PEAK_WITH, CAP };
static const char *const counters[] = {
    [MAX_BATCH_WITHOUT] = "max_batch_without_empty_cache",
    [MAX_BATCH_WITH] = "max_batch_with_empty_cache",
    [COMMON_BATCH] = "common_batch",
    [PEAK_WITHOUT] = "peak_reserved_without_empty_cache",
    [PEAK_WITH] = "peak_reserved_with_empty_cache",
    [CAP] = "cap_bytes",
    NULL,
};
#define SEARCH_RESOLUTION 256ull

/* Batch of step s for nominal batch B: B, B/2, B, 3B/4, B (a short last batch
 * and a varying one, as loaders give). */
static uint64_t step_batch(uint64_t batch, int step)
{
    static const uint64_t quarters[STEPS] = {4, 2, 4, 3, 4};
    return batch * quarters[step] / 4;
}

/* One training step's activation memory: forward saves one activation per
 * layer; backward walks back, each layer's input gradient allocated before
 * the saved activation and the previous gradient are freed. Returns VB_OK, or
 * VB_ERR_OOM with everything of the step freed. */
static vb_status training_step(vb_run *run, uint64_t batch)
{
    vb_stream stream = vb_run_stream(run);
    uint64_t bytes = batch * HIDDEN * 4;
    vb_addr saved[LAYERS] = {0}, gradient = 0;
    vb_status status = VB_OK;
    for (int layer = 0; layer < LAYERS && status == VB_OK; layer++)
        status = vb_run_malloc(run, bytes, stream, &saved[layer]);
    for (int layer = LAYERS - 1; layer >= 0 && status == VB_OK; layer--) {
        vb_addr input_gradient;
        status = vb_run_malloc(run, bytes, stream, &input_gradient);
        if (status != VB_OK) break;
        VB_TRY(vb_run_free(run, saved[layer]));
        saved[layer] = 0;
        VB_TRY(vb_run_free(run, gradient));
        gradient = input_gradient;
    }
    for (int layer = 0; layer < LAYERS; layer++) VB_TRY(vb_run_free(run, saved[layer]));
    VB_TRY(vb_run_free(run, gradient));
    return status;
}

/* 1 if STEPS steps of nominal batch B train without out-of-memory. */
static vb_status trains(vb_run *run, uint64_t batch, int empty_cache_every_step, int *ok)
{
    *ok = 1;
    for (int step = 0; step < STEPS && *ok; step++) {
        vb_status status = training_step(run, step_batch(batch, step));
        if (status == VB_ERR_OOM) *ok = 0;
        else VB_TRY(status);
        if (empty_cache_every_step) VB_TRY(vb_run_empty_cache(run));
    }
    /* Each trial starts from an empty cache, so trials do not inherit blocks. */
    return vb_run_empty_cache(run);
}

/* The largest nominal batch (to SEARCH_RESOLUTION) that trains. */
static vb_status largest_batch(vb_run *run, int empty_cache_every_step, uint64_t *out)
{
    uint64_t good = 0, bad = SEARCH_FROM;
    int ok = 1;
    while (ok) { /* double until a batch fails */
        VB_TRY(trains(run, bad, empty_cache_every_step, &ok));
        if (ok) good = bad, bad *= 2;
    }
    while (bad - good > SEARCH_RESOLUTION) {
        uint64_t middle = good + (bad - good) / 2;
        VB_TRY(trains(run, middle, empty_cache_every_step, &ok));
        if (ok) good = middle;
        else bad = middle;
    }
    *out = good;
    return VB_OK;
}

/* Peak reserved bytes of STEPS steps at batch B. */
static vb_status peak_reserved_at(vb_run *run, uint64_t batch, int empty_cache_every_step, double *out)
{
    int ok;
    vb_alloc_stats stats;
    vb_allocator_reset_peaks(vb_run_allocator(run));
    VB_TRY(trains(run, batch, empty_cache_every_step, &ok));
    vb_allocator_stats(vb_run_allocator(run), &stats);
    *out = ok ? (double)stats.reserved_bytes_peak : 0.0;
    return VB_OK;
}

/* Allocates params, grads and two Adam moments per layer; frees them on failure. */
static vb_status model_state(vb_run *run, vb_addr *state, int count)
{
    for (int i = 0; i < count; i++) {
        vb_status status = vb_run_malloc(run, HIDDEN * HIDDEN * 4, vb_run_stream(run), &state[i]);
        if (status != VB_OK) {
            while (i-- > 0) vb_run_free(run, state[i]);
            return status;
        }
    }
    return VB_OK;
}

/* Both searches and both peaks, under the cap. */
static vb_status measure(vb_run *run)
{
    vb_addr state[LAYERS * 4];
    uint64_t with_empty_cache, without_empty_cache;
    VB_TRY(model_state(run, state, LAYERS * 4));
    vb_status status = vb_run_step(run, steps[MODEL].text);
    if (status == VB_OK) status = largest_batch(run, 0, &without_empty_cache);
    if (status == VB_OK) status = vb_run_step(run, steps[SEARCHED_WITHOUT].text);
    if (status == VB_OK) status = largest_batch(run, 1, &with_empty_cache);
    if (status == VB_OK) status = vb_run_step(run, steps[SEARCHED_WITH].text);
    if (status == VB_OK) {
        uint64_t common = with_empty_cache < without_empty_cache ? with_empty_cache : without_empty_cache;
        double peak_with = 0, peak_without = 0;
        if (common > 0) status = peak_reserved_at(run, common, 0, &peak_without);
        if (status == VB_OK && common > 0) status = peak_reserved_at(run, common, 1, &peak_with);
        if (status == VB_OK) status = vb_run_set_counter(run, counters[MAX_BATCH_WITHOUT], (double)without_empty_cache);
        if (status == VB_OK) status = vb_run_set_counter(run, counters[MAX_BATCH_WITH], (double)with_empty_cache);
        if (status == VB_OK) status = vb_run_set_counter(run, counters[COMMON_BATCH], (double)common);
        if (status == VB_OK) status = vb_run_set_counter(run, counters[PEAK_WITHOUT], peak_without);
        if (status == VB_OK) status = vb_run_set_counter(run, counters[PEAK_WITH], peak_with);
    }
    for (int i = 0; i < LAYERS * 4; i++) {
        vb_status freed = vb_run_free(run, state[i]);
        if (status == VB_OK) status = freed;
    }
    return status;
}

/* Caps the device with a ballast, measures, removes the ballast. */
static vb_status capped_training_run(vb_run *run)
{
    vb_device *dev = vb_run_device(run);
    uint64_t free_bytes, total_bytes;
    vb_addr ballast = 0;
    VB_TRY(vb_run_empty_cache(run));
    VB_TRY(dev->ops->mem_info(dev, &free_bytes, &total_bytes));
    if (free_bytes > CAP_BYTES + VB_DRIVER_PAGE)
        VB_TRY(dev->ops->mem_alloc(dev, (free_bytes - CAP_BYTES) & ~(VB_DRIVER_PAGE - 1), &ballast));
    VB_TRY(vb_run_set_counter(run, counters[CAP], (double)CAP_BYTES));
    vb_status status = vb_run_step(run, steps[BALLAST].text);
    if (status == VB_OK) status = measure(run);
    if (status == VB_OK) status = vb_run_empty_cache(run);
    if (ballast) {
        vb_status freed = dev->ops->mem_free(dev, ballast);
        if (status == VB_OK) status = freed;
    }
    if (status == VB_OK) status = vb_run_step(run, steps[BALLAST_FREED].text);
    return status;
}

const vb_scenario vb_capped_training_scenario = {
    .name = "capped_training",
    .documents = "003, 004",
    .description = "largest batch that trains under a 1 GiB cap, with and without empty_cache every step",
    .run = capped_training_run,
    .steps = steps,
    .counters = counters,
};
