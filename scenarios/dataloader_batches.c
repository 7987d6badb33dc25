/* vrambench — `dataloader_batches`: document 003 (docs/sources.md),
 * Example 3, "Optimized Data Loading and Batching":
 *
 *     data = torch.randn(10000, 100)
 *     labels = torch.randint(0, 10, (10000,))
 *     dataset = TensorDataset(data, labels)
 *     dataloader = DataLoader(dataset, batch_size=32, shuffle=True)
 *     for epoch in range(10):
 *         for batch_idx, (data, target) in enumerate(dataloader):
 *             data, target = data.cuda(), target.cuda()
 *             # Training step...
 *             del data
 *             del target
 *             torch.cuda.empty_cache()
 *
 * with document 004 (docs/sources.md) Example 2's
 * training_step as the training step. The document says a smaller batch
 * size consumes less memory; this sweeps batch_size over 32, 256, 2048 and
 * 8192 and reports each one's peaks (batchN_peak_requested_bytes,
 * batchN_peak_reserved_bytes, peaks reset between sizes) and its time per
 * batch (batchN_batch_ns, host clock around the epoch after synchronizing).
 *
 * The host dataset is in pinned memory (DataLoader(pin_memory=True)) and
 * each batch is copied with memcpy_async on the run's stream. One epoch per
 * batch size (not 10: the peak is reached in the first batch, the rest only
 * costs time), in order (shuffling does not change the sizes). The model,
 * created once: MLP 100 -> 512 -> 512 -> 10, ReLU between, no bias
 * (319,488 parameters, 1.3 MB), SGD as in 004's Example 2. */
#include <stdio.h>

#include "mlp.h"

#define SAMPLES 10000
#define FEATURES 100

/* The batch sizes, the members of its counter families. */
static const vb_family_member batch_sizes[] = {{"32", 32}, {"256", 256}, {"2048", 2048}, {"8192", 8192}, {NULL, 0}};

/* Its counter families (docs/results-json.md, "names"), one counter per batch size. */
enum { PEAK_RESERVED, PEAK_REQUESTED, BATCH_NS };
static const vb_counter_family families[] = {
    [PEAK_RESERVED] = {"peak_reserved_bytes", "batch%s_peak_reserved_bytes"},
    [PEAK_REQUESTED] = {"peak_requested_bytes", "batch%s_peak_requested_bytes"},
    [BATCH_NS] = {"batch_ns", "batch%s_batch_ns"},
    {NULL, NULL},
};

/* Its steps. */
enum { MODEL, EPOCH_DONE, END };
static const vb_name steps[] = {
    [MODEL] = {"model", "model, optimizer, pinned dataset"},
    [EPOCH_DONE] = {"epoch_done", "batch_size=%s: epoch done"},
    [END] = {"end", "del model, optimizer"},
    {NULL, NULL},
};

/* One epoch at `batch_size` (the last batch holds the remainder), then the
 * counters and the step "batch_size=N: epoch done". */
static vb_status epoch(vb_run *run, vb_mlp *model, vb_optimizer *optimizer, const vb_pinned_dataset *dataset,
                       const vb_family_member *size)
{
    int64_t batch_size = size->parameter;
    vb_run_reset_peaks(run);
    vb_status status = vb_scenario_synchronize(run);
    uint64_t start = vb_now_ns();
    int64_t batches = 0;
    for (int64_t first = 0; first < SAMPLES && status == VB_OK; first += batch_size, batches++) {
        int64_t count = SAMPLES - first < batch_size ? SAMPLES - first : batch_size;
        status = vb_pinned_dataset_train_batch(model, optimizer, dataset, first, count);
        if (status == VB_OK) status = vb_run_empty_cache(run);
    }
    if (status == VB_OK) status = vb_scenario_synchronize(run);
    if (status != VB_OK) return status;
    double batch_ns = (double)(vb_now_ns() - start) / (double)batches;
    vb_alloc_stats stats = vb_scenario_stats(run);
    char name[64];
    vb_scenario_family_counter(&families[PEAK_RESERVED], size, name, sizeof name);
    status = vb_run_set_counter(run, name, (double)stats.reserved_bytes_peak);
    vb_scenario_family_counter(&families[PEAK_REQUESTED], size, name, sizeof name);
    vb_keep_first(&status, vb_run_set_counter(run, name, (double)stats.requested_bytes_peak));
    vb_scenario_family_counter(&families[BATCH_NS], size, name, sizeof name);
    vb_keep_first(&status, vb_run_set_counter(run, name, batch_ns));
    snprintf(name, sizeof name, steps[EPOCH_DONE].text, size->name);
    vb_keep_first(&status, vb_run_step(run, name));
    return status;
}

/* The sweep over batch sizes with one model. */
static vb_status run_dataloader_batches(vb_run *run)
{
    static const int64_t widths[] = {FEATURES, 512, 512, 10};
    vb_pinned_dataset dataset = {NULL, NULL, NULL, 0, 0};
    vb_mlp *model = NULL;
    vb_optimizer *optimizer = NULL;
    vb_status status = vb_scenario_begin(run);
    if (status == VB_OK) status = vb_pinned_dataset_create(run, SAMPLES, FEATURES, 1, &dataset);
    if (status == VB_OK) status = vb_mlp_create(run, widths, 3, vb_run_stream(run), 2, &model);
    if (status == VB_OK) status = vb_optimizer_create(VB_OPTIMIZER_SGD, model, 0.01f, &optimizer);
    if (status == VB_OK) status = vb_run_step(run, steps[MODEL].text);
    for (const vb_family_member *size = batch_sizes; size->name && status == VB_OK; size++)
        status = epoch(run, model, optimizer, &dataset, size);
    if (status == VB_OK) status = vb_optimizer_drop(&optimizer);
    if (status == VB_OK) status = vb_mlp_drop(&model);
    if (status == VB_OK) status = vb_run_step(run, steps[END].text);
    status = vb_scenario_outcome(run, status);
    vb_keep_first(&status, vb_optimizer_drop(&optimizer));
    vb_keep_first(&status, vb_mlp_drop(&model));
    vb_pinned_dataset_free(&dataset);
    return status;
}

const vb_scenario vb_dataloader_batches_scenario = {
    .name = "dataloader_batches",
    .documents = "003, 004",
    .description = "pinned host batches copied to the device, MLP training step; batch size 32/256/2048/8192",
    .run = run_dataloader_batches,
    .steps = steps,
    .families = families,
    .members = batch_sizes,
    .member_parameter = "batch size",
};
