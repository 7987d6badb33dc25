/* vrambench — `empty_cache_loop`: calling torch.cuda.empty_cache() inside a
 * loop, every iteration, every 10 iterations, or never.
 *
 * Document 004 (docs/sources.md), Example 3:
 *
 *     def perform_multiple_ops(iterations):
 *       results = []
 *       for i in range(iterations):
 *         temp_tensor = torch.randn(100, 100, device='cuda')
 *         results.append(torch.sum(temp_tensor).item())
 *         del temp_tensor
 *         torch.cuda.empty_cache()
 *       return results
 *
 * and document 003 (docs/sources.md), Example 3's
 * training loop (data 10000 x 100 in pinned host memory, batch_size=32,
 * `data, target = data.cuda(), target.cuda()`, a training step, `del data`,
 * `del target`, `torch.cuda.empty_cache()`), with document 004 Example 2's
 * training_step on an MLP 100 -> 512 -> 512 -> 10 with SGD.
 *
 * Both documents put empty_cache in every iteration (003: it "can help avoid
 * OOM errors"); 004 also warns that calling it too often costs. Each loop
 * runs 100 iterations per variant. The results-JSON counters every1_iter_ns,
 * every1_driver_calls, every1_peak_reserved_bytes (and every10_*, never_*)
 * describe a variant over both loops: loop time per iteration over all 200
 * iterations, driver calls summed, the higher peak. Each loop also has its
 * own: ops_every1_* (004's loop) and train_every1_* (003's loop), as the two
 * differ: 004's loop holds nothing between iterations, so emptying the cache
 * returns its segment and the next iteration has to ask the driver again;
 * in the training loop the small parameters share a cached segment with the
 * batch's small temporaries, and a segment with a live block cannot be
 * returned, so on a PyTorch-like caching allocator emptying the cache there
 * may cost no driver call at all. iter_ns is the host clock around the loop,
 * taken after synchronizing; driver_calls counts the allocator's driver
 * allocations plus frees during the loop. Each variant starts from an
 * emptied cache with its peaks reset, and its model is made before the clock
 * starts. torch.sum is a gemm of the flattened tensor with itself (one
 * reduction kernel and a 1 x 1 result); .item() copies 4 bytes to the host
 * and waits. */
#include <stdio.h>

#include "mlp.h"

#define ITERATIONS 100
#define SAMPLES 10000
#define FEATURES 100
#define BATCH_SIZE 32

/* The variants, the members of its counter families: empty_cache every
 * `parameter` iterations (0: never), named as in the counters. */
typedef vb_family_member variant;
static const variant variants[] = {{"every1", 1}, {"every10", 10}, {"never", 0}, {NULL, 0}};

/* Its counter families (docs/results-json.md, "names"): each variant's
 * figures over both loops, then each loop's own. */
enum { TOTAL_FIGURES = 0, OPS_FIGURES = 3, TRAIN_FIGURES = 6 };
static const vb_counter_family families[] = {
    {"iter_ns", "%s_iter_ns"},
    {"driver_calls", "%s_driver_calls"},
    {"peak_reserved_bytes", "%s_peak_reserved_bytes"},
    {"ops_iter_ns", "ops_%s_iter_ns"},
    {"ops_driver_calls", "ops_%s_driver_calls"},
    {"ops_peak_reserved_bytes", "ops_%s_peak_reserved_bytes"},
    {"train_iter_ns", "train_%s_iter_ns"},
    {"train_driver_calls", "train_%s_driver_calls"},
    {"train_peak_reserved_bytes", "train_%s_peak_reserved_bytes"},
    {NULL, NULL},
};

/* Its steps. */
enum { OPS_DONE, TRAINING_DONE, EMPTIED };
static const vb_name steps[] = {
    [OPS_DONE] = {"ops_done", "perform_multiple_ops, empty_cache %s"},
    [TRAINING_DONE] = {"training_done", "training loop, empty_cache %s"},
    [EMPTIED] = {"emptied", "empty_cache"},
    {NULL, NULL},
};

/* Calls empty_cache after iteration i (0-based) when the variant says so. */
static vb_status maybe_empty_cache(vb_run *run, const variant *v, int i)
{
    if (v->parameter == 0 || (i + 1) % v->parameter != 0) return VB_OK;
    return vb_run_empty_cache(run);
}

/* What a timed loop measured, before it becomes counters. */
typedef struct loop_figures {
    uint64_t start_ns, driver_calls_before;
} loop_figures;

/* A variant's figures over both loops. */
typedef struct variant_totals {
    double loop_ns;
    uint64_t iterations, driver_calls, peak_reserved;
} variant_totals;

/* Starts a timed loop: peaks reset, stream idle, clock and driver calls noted. */
static vb_status start_loop(vb_run *run, loop_figures *figures)
{
    vb_run_reset_peaks(run);
    vb_status status = vb_scenario_synchronize(run);
    figures->driver_calls_before = vb_scenario_driver_calls(run);
    figures->start_ns = vb_now_ns();
    return status;
}

/* Sets variant v's counters of the three families from `first` on
 * (TOTAL_FIGURES, OPS_FIGURES or TRAIN_FIGURES: iter_ns, driver_calls,
 * peak_reserved_bytes). */
static vb_status set_variant_counters(vb_run *run, int first, const variant *v, double iter_ns,
                                      uint64_t driver_calls, uint64_t peak_reserved)
{
    char name[64];
    vb_scenario_family_counter(&families[first], v, name, sizeof name);
    vb_status status = vb_run_set_counter(run, name, iter_ns);
    vb_scenario_family_counter(&families[first + 1], v, name, sizeof name);
    vb_keep_first(&status, vb_run_set_counter(run, name, (double)driver_calls));
    vb_scenario_family_counter(&families[first + 2], v, name, sizeof name);
    vb_keep_first(&status, vb_run_set_counter(run, name, (double)peak_reserved));
    return status;
}

/* Ends a timed loop: sets its counters (the families from `first` on), adds its figures to
 * the variant's totals and samples the step `step`. */
static vb_status finish_loop(vb_run *run, const loop_figures *figures, int first, const variant *v,
                             variant_totals *totals, const char *step)
{
    vb_status status = vb_scenario_synchronize(run);
    double loop_ns = (double)(vb_now_ns() - figures->start_ns);
    if (status != VB_OK) return status;
    uint64_t driver_calls = vb_scenario_driver_calls(run) - figures->driver_calls_before;
    uint64_t peak_reserved = vb_scenario_stats(run).reserved_bytes_peak;
    totals->loop_ns += loop_ns;
    totals->iterations += ITERATIONS;
    totals->driver_calls += driver_calls;
    if (peak_reserved > totals->peak_reserved) totals->peak_reserved = peak_reserved;
    status = set_variant_counters(run, first, v, loop_ns / ITERATIONS, driver_calls, peak_reserved);
    vb_keep_first(&status, vb_run_step(run, step));
    return status;
}

/* results.append(torch.sum(temp_tensor).item()) */
static vb_status sum_item(vb_run *run, vb_tensor *temp_tensor, float *value)
{
    vb_stream stream = vb_run_stream(run);
    vb_tensor *flat = NULL, *sum = NULL;
    vb_status status = vb_tensor_view_as(temp_tensor, 1, (int64_t)vb_tensor_numel(temp_tensor), &flat);
    if (status == VB_OK) status = vb_tensor_empty(run, 1, 1, stream, &sum);
    if (status == VB_OK) status = vb_tensor_matmul(flat, 0, flat, 1, sum, stream);
    if (status == VB_OK) status = vb_tensor_copy_to_host(sum, value, stream);
    if (status == VB_OK) status = vb_scenario_synchronize(run);
    vb_keep_first(&status, vb_tensor_drop(&flat));
    vb_keep_first(&status, vb_tensor_drop(&sum));
    return status;
}

/* perform_multiple_ops(ITERATIONS) with variant v's empty_cache. */
static vb_status perform_multiple_ops(vb_run *run, const variant *v, variant_totals *totals)
{
    vb_stream stream = vb_run_stream(run);
    loop_figures figures;
    vb_status status = vb_run_empty_cache(run);
    if (status == VB_OK) status = start_loop(run, &figures);
    for (int i = 0; i < ITERATIONS && status == VB_OK; i++) {
        vb_tensor *temp_tensor = NULL;
        float value = 0.0f;
        status = vb_tensor_empty(run, 100, 100, stream, &temp_tensor);
        if (status == VB_OK) status = vb_tensor_fill_random(temp_tensor, (uint64_t)i, stream);
        if (status == VB_OK) status = sum_item(run, temp_tensor, &value);
        vb_keep_first(&status, vb_tensor_drop(&temp_tensor));
        if (status == VB_OK) status = maybe_empty_cache(run, v, i);
    }
    if (status != VB_OK) return status;
    char step[64];
    snprintf(step, sizeof step, steps[OPS_DONE].text, v->name);
    return finish_loop(run, &figures, OPS_FIGURES, v, totals, step);
}

/* 003's training loop, ITERATIONS batches, with variant v's empty_cache. */
static vb_status training_loop(vb_run *run, const vb_pinned_dataset *dataset, const variant *v,
                               variant_totals *totals)
{
    static const int64_t widths[] = {FEATURES, 512, 512, 10};
    vb_mlp *model = NULL;
    vb_optimizer *optimizer = NULL;
    loop_figures figures;
    vb_status status = vb_run_empty_cache(run);
    if (status == VB_OK) status = vb_mlp_create(run, widths, 3, vb_run_stream(run), 3, &model);
    if (status == VB_OK) status = vb_optimizer_create(VB_OPTIMIZER_SGD, model, 0.01f, &optimizer);
    if (status == VB_OK) status = start_loop(run, &figures);
    for (int i = 0; i < ITERATIONS && status == VB_OK; i++) {
        int64_t first = (int64_t)i * BATCH_SIZE % SAMPLES;
        status = vb_pinned_dataset_train_batch(model, optimizer, dataset, first, BATCH_SIZE);
        if (status == VB_OK) status = maybe_empty_cache(run, v, i);
    }
    char step[64];
    snprintf(step, sizeof step, steps[TRAINING_DONE].text, v->name);
    if (status == VB_OK) status = finish_loop(run, &figures, TRAIN_FIGURES, v, totals, step);
    vb_keep_first(&status, vb_optimizer_drop(&optimizer));
    vb_keep_first(&status, vb_mlp_drop(&model));
    return status;
}

/* Both loops in every variant, then each variant's totals. */
static vb_status run_empty_cache_loop(vb_run *run)
{
    enum { VARIANTS = sizeof variants / sizeof variants[0] - 1 };
    vb_pinned_dataset dataset = {NULL, NULL, NULL, 0, 0};
    variant_totals totals[VARIANTS] = {{0.0, 0, 0, 0}};
    vb_status status = vb_scenario_begin(run);
    for (size_t i = 0; i < VARIANTS && status == VB_OK; i++)
        status = perform_multiple_ops(run, &variants[i], &totals[i]);
    if (status == VB_OK) status = vb_pinned_dataset_create(run, SAMPLES, FEATURES, 1, &dataset);
    for (size_t i = 0; i < VARIANTS && status == VB_OK; i++)
        status = training_loop(run, &dataset, &variants[i], &totals[i]);
    for (size_t i = 0; i < VARIANTS && status == VB_OK; i++)
        status = set_variant_counters(run, TOTAL_FIGURES, &variants[i], totals[i].loop_ns / (double)totals[i].iterations,
                                      totals[i].driver_calls, totals[i].peak_reserved);
    if (status == VB_OK) status = vb_run_empty_cache(run);
    if (status == VB_OK) status = vb_run_step(run, steps[EMPTIED].text);
    status = vb_scenario_outcome(run, status);
    vb_pinned_dataset_free(&dataset);
    return status;
}

const vb_scenario vb_empty_cache_loop_scenario = {
    .name = "empty_cache_loop",
    .documents = "003, 004",
    .description = "100x100 ops loop and a training loop with empty_cache every iteration, every 10, never",
    .run = run_empty_cache_loop,
    .steps = steps,
    .families = families,
    .members = variants,
    .member_parameter = "empty_cache every N iterations (0: never)",
};
