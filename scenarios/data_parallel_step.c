/* vrambench — `data_parallel_step`: a data-parallel training step (as
 * DistributedDataParallel runs it) on every device of the machine, on the
 * documents' terms:
 *  - document 003 (docs/sources.md), Example 3's loop, one batch of its
 *    "Training step...", with document 004, Example 2's training_step as
 *    the step, each device training a replica of the model on its own
 *    share of the batch;
 *  - document 001: work is asynchronous, and memory used by work still
 *    queued is not free: the gradients are averaged on a communication
 *    stream of each device while its compute stream goes on, so each
 *    gradient bucket, allocated on the compute stream and used on the
 *    communication stream, is marked with record_stream (as PyTorch's
 *    process groups mark the tensors they communicate) and deleted from the
 *    compute stream before that work is known to be done.
 *
 * Each device: the replica (MLP 1024 -> 4096 -> 4096 -> 1024, 96 MiB of
 * weights, SGD), a batch of 256 rows, forward, loss gradient, backward.
 * Then the gradients go in buckets, one per layer, last layer first (DDP
 * fires a bucket as its gradients are ready): each device copies the
 * layer's gradient into a new bucket on its compute stream; its
 * communication stream waits for that, and the bucket is recorded as used
 * there; the all-reduce (every device receives each other device's bucket
 * into a new buffer, a copy peer to peer, and adds them into its own) runs
 * on the communication streams; the compute stream waits for it, copies the
 * average back into the gradient and deletes the bucket. Then
 * optimizer.step() and zero_grad() on every device, and everything is
 * synchronized. On a machine of one device it cannot run: `vrambench run`
 * skips it with a note.
 *
 * The run's figures are its own device's; the others' are the counters of
 * scenarios across devices (common.h). */
#include "mlp.h"

#define ROWS 256
#define LAYERS 3

/* The replica's widths. */
static const int64_t widths[LAYERS + 1] = {1024, 4096, 4096, 1024};

/* Its steps. */
enum { REPLICAS_MADE, BACKWARD_DONE, ALL_REDUCED, STEPPED, END };
static const vb_name steps[] = {
    [REPLICAS_MADE] = {"replicas_made", "model replicas on every device"},
    [BACKWARD_DONE] = {"backward_done", "loss.backward() on every device"},
    [ALL_REDUCED] = {"all_reduced", "gradient buckets all-reduced"},
    [STEPPED] = {"stepped", "optimizer.step() on every device"},
    [END] = {"end", "del replicas"},
    {NULL, NULL},
};

/* What the step holds, per device. */
typedef struct replicas {
    int count;
    vb_run *runs[VB_SCENARIO_MAX_DEVICES];
    vb_stream comm[VB_SCENARIO_MAX_DEVICES];     /* each device's communication stream */
    vb_mlp *models[VB_SCENARIO_MAX_DEVICES];
    vb_optimizer *optimizers[VB_SCENARIO_MAX_DEVICES];
    vb_tensor *buckets[VB_SCENARIO_MAX_DEVICES];
    vb_tensor *received[VB_SCENARIO_MAX_DEVICES][VB_SCENARIO_MAX_DEVICES]; /* [to][from] */
} replicas;

/* Device k's replica (the same weights on every device: one seed). */
static vb_status make_replica(replicas *r, int k)
{
    vb_run *run = r->runs[k];
    vb_status status = vb_run_extra_stream(run, 1, &r->comm[k]);
    if (status == VB_OK) status = vb_mlp_create(run, widths, LAYERS, vb_run_stream(run), 7, &r->models[k]);
    if (status == VB_OK) status = vb_optimizer_create(VB_OPTIMIZER_SGD, r->models[k], 0.01f, &r->optimizers[k]);
    return status;
}

/* Device k's forward and backward on its share of the batch. */
static vb_status forward_backward(replicas *r, int k)
{
    vb_run *run = r->runs[k];
    vb_stream stream = vb_run_stream(run);
    vb_mlp_saved saved = {{NULL}};
    vb_tensor *x = NULL, *out = NULL, *grad = NULL;
    vb_status status = vb_tensor_empty(run, ROWS, widths[0], stream, &x);
    if (status == VB_OK) status = vb_tensor_fill_random(x, 200 + (uint64_t)k, stream);
    if (status == VB_OK) status = vb_mlp_forward(r->models[k], x, &saved, &out);
    vb_keep_first(&status, vb_tensor_drop(&x));
    /* mse's gradient 2 (output - target) / n: relu_f32 stands in for it. */
    if (status == VB_OK) status = vb_tensor_empty(run, ROWS, widths[LAYERS], stream, &grad);
    if (status == VB_OK) status = vb_tensor_relu(grad, out, stream);
    vb_keep_first(&status, vb_tensor_drop(&out));
    if (status == VB_OK) status = vb_mlp_backward(r->models[k], &saved, grad);
    vb_keep_first(&status, vb_tensor_drop(&grad));
    vb_keep_first(&status, vb_mlp_saved_release(&saved));
    return status;
}

/* Layer i's gradient into a new bucket on each device's compute stream,
 * handed to its communication stream. */
static vb_status fill_buckets(replicas *r, int i)
{
    vb_status status = VB_OK;
    for (int k = 0; k < r->count && status == VB_OK; k++) {
        vb_run *run = r->runs[k];
        vb_stream stream = vb_run_stream(run);
        vb_tensor *grad = r->models[k]->grads[i];
        status = vb_tensor_empty(run, vb_tensor_rows(grad), vb_tensor_cols(grad), stream, &r->buckets[k]);
        if (status == VB_OK) status = vb_tensor_copy(r->buckets[k], stream, grad, stream);
        if (status == VB_OK) status = vb_run_stream_wait(run, r->comm[k], run, stream);
        if (status == VB_OK) status = vb_tensor_use(r->buckets[k], r->comm[k]); /* record_stream */
    }
    return status;
}

/* The all-reduce on the communication streams: every device receives each
 * other device's bucket (copied peer to peer), then adds them into its own
 * and deletes what it received. */
static vb_status all_reduce(replicas *r)
{
    vb_status status = VB_OK;
    for (int to = 0; to < r->count && status == VB_OK; to++)
        for (int from = 0; from < r->count && status == VB_OK; from++) {
            if (from == to) continue;
            vb_tensor *bucket = r->buckets[from], **received = &r->received[to][from];
            status = vb_tensor_empty(r->runs[to], vb_tensor_rows(bucket), vb_tensor_cols(bucket), r->comm[to],
                                     received);
            if (status == VB_OK) status = vb_tensor_copy(*received, r->comm[to], bucket, r->comm[from]);
        }
    for (int to = 0; to < r->count && status == VB_OK; to++)
        for (int from = 0; from < r->count && status == VB_OK; from++) {
            if (from == to) continue;
            status = vb_tensor_axpy(1.0f, r->received[to][from], r->buckets[to], r->comm[to]);
            vb_keep_first(&status, vb_tensor_drop(&r->received[to][from]));
        }
    return status;
}

/* The compute streams wait for the all-reduce, copy each average back into
 * the gradient and delete the bucket (its block stays the communication
 * stream's until that work is done: record_stream). */
static vb_status unload_buckets(replicas *r, int i)
{
    vb_status status = VB_OK;
    for (int k = 0; k < r->count && status == VB_OK; k++) {
        vb_run *run = r->runs[k];
        vb_stream stream = vb_run_stream(run);
        status = vb_run_stream_wait(run, stream, run, r->comm[k]);
        if (status == VB_OK) status = vb_tensor_copy(r->models[k]->grads[i], stream, r->buckets[k], stream);
        vb_keep_first(&status, vb_tensor_drop(&r->buckets[k]));
    }
    return status;
}

/* Drops everything the step may still hold (a failure half-way included). */
static vb_status release(replicas *r)
{
    vb_status status = VB_OK;
    for (int k = 0; k < r->count; k++) {
        vb_keep_first(&status, vb_tensor_drop(&r->buckets[k]));
        for (int from = 0; from < r->count; from++) vb_keep_first(&status, vb_tensor_drop(&r->received[k][from]));
        vb_keep_first(&status, vb_optimizer_drop(&r->optimizers[k]));
        vb_keep_first(&status, vb_mlp_drop(&r->models[k]));
    }
    return status;
}

static vb_status run_data_parallel_step(vb_run *run)
{
    replicas r = {0};
    vb_status status = vb_scenario_device_runs(run, 2, r.runs, &r.count);
    if (status == VB_OK) status = vb_scenario_begin(run);
    for (int k = 0; k < r.count && status == VB_OK; k++) status = make_replica(&r, k);
    if (status == VB_OK) status = vb_run_step(run, steps[REPLICAS_MADE].text);
    for (int k = 0; k < r.count && status == VB_OK; k++) status = forward_backward(&r, k);
    if (status == VB_OK) status = vb_run_step(run, steps[BACKWARD_DONE].text);
    for (int i = LAYERS - 1; i >= 0 && status == VB_OK; i--) {
        status = fill_buckets(&r, i);
        if (status == VB_OK) status = all_reduce(&r);
        if (status == VB_OK) status = unload_buckets(&r, i);
    }
    if (status == VB_OK) status = vb_run_step(run, steps[ALL_REDUCED].text);
    for (int k = 0; k < r.count && status == VB_OK; k++) {
        status = vb_optimizer_step(r.optimizers[k]);
        if (status == VB_OK) status = vb_mlp_zero_grad(r.models[k]);
    }
    if (status == VB_OK) status = vb_run_step(run, steps[STEPPED].text);
    if (status == VB_OK) status = release(&r);
    if (status == VB_OK) status = vb_scenario_synchronize_devices(r.runs, r.count);
    if (status == VB_OK) status = vb_run_step(run, steps[END].text);
    status = vb_scenario_outcome(run, status);
    vb_keep_first(&status, release(&r));
    if (r.count > 0) vb_keep_first(&status, vb_scenario_report_devices(run, r.runs, r.count));
    return status;
}

const vb_scenario vb_data_parallel_step_scenario = {
    .name = "data_parallel_step",
    .documents = "001, 003, 004",
    .description = "a data-parallel training step on every device: gradient buckets all-reduced on a "
                   "communication stream (record_stream)",
    .run = run_data_parallel_step,
    .min_devices = 2,
    .steps = steps,
    .counters = vb_scenario_device_counters,
};
