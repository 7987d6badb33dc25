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

static const int64_t batch_sizes[] = {32, 256, 2048, 8192};

/* One epoch at `batch_size` (the last batch holds the remainder), then the
 * counters and the step "batch_size=N: epoch done". */
static vb_status epoch(vb_run *run, vb_mlp *model, vb_optimizer *optimizer, const vb_pinned_dataset *dataset,
                       int64_t batch_size)
{
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
    snprintf(name, sizeof name, "batch%lld_peak_reserved_bytes", (long long)batch_size);
    status = vb_run_set_counter(run, name, (double)stats.reserved_bytes_peak);
    snprintf(name, sizeof name, "batch%lld_peak_requested_bytes", (long long)batch_size);
    vb_keep_first(&status, vb_run_set_counter(run, name, (double)stats.requested_bytes_peak));
    snprintf(name, sizeof name, "batch%lld_batch_ns", (long long)batch_size);
    vb_keep_first(&status, vb_run_set_counter(run, name, batch_ns));
    snprintf(name, sizeof name, "batch_size=%lld: epoch done", (long long)batch_size);
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
    if (status == VB_OK) status = vb_run_step(run, "model, optimizer, pinned dataset");
    for (size_t i = 0; i < sizeof batch_sizes / sizeof batch_sizes[0] && status == VB_OK; i++)
        status = epoch(run, model, optimizer, &dataset, batch_sizes[i]);
    if (status == VB_OK) status = vb_optimizer_drop(&optimizer);
    if (status == VB_OK) status = vb_mlp_drop(&model);
    if (status == VB_OK) status = vb_run_step(run, "del model, optimizer");
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
};
