/* vrambench — `pipeline_step`: a training step of a model split across the
 * devices of the machine (pipeline / model parallelism, GPipe's schedule),
 * on the documents' terms:
 *  - document 003 (docs/sources.md), Example 3's loop, one batch of its
 *    "Training step...", with document 004, Example 2's training_step
 *    (forward, mse loss, backward, optimizer.step) as the step: the model
 *    and its activations no longer fit one device, so each device holds a
 *    stage;
 *  - document 000: a tensor's memory goes back when no reference to it is
 *    left: `h1 = h0.to("cuda:1"); del h0` frees h0 on device 0 while its
 *    data lives on in h1, and device 1 frees h1 once backward is done with
 *    it: activations cross devices and are freed on the other side;
 *  - document 001: work is asynchronous: the copy runs on device 0's stream
 *    after h0 is deleted, and the allocator must not hand h0's block out
 *    again before it has run (stream order, as PyTorch's caching allocator
 *    relies on; the copy is ordered after a barrier with device 1's
 *    stream, as PyTorch's copy between devices does).
 *
 * Stage k (device k) is MLP pieces of two Linear layers (scenarios/mlp.h):
 * 1024 -> 2048 -> 2048 on the first device, 2048 -> 2048 -> 2048 between,
 * 2048 -> 2048 -> 512 on the last. Each step runs 4 microbatches of 512
 * rows: all forwards (every activation kept for backward, each stage's
 * output sent to the next device and deleted), then all backwards in
 * reverse (each stage's input gradient sent back to the device before and
 * deleted), then SGD on every stage and zero_grad. Everything is
 * synchronized at the end, on every device. On a machine of one device it
 * cannot run: `vrambench run` skips it with a note.
 *
 * The run's figures are its own device's (stage 0); the other devices' are
 * the counters of scenarios across devices (common.h): their largest peaks
 * and what they still hold at the end. */
#include "mlp.h"

#define MICROBATCHES 4
#define ROWS 512
#define INPUT_WIDTH 1024
#define HIDDEN_WIDTH 2048
#define OUTPUT_WIDTH 512

/* Its steps. */
enum { STAGES_MADE, FORWARD_DONE, BACKWARD_DONE, STEPPED, END };
static const vb_name steps[] = {
    [STAGES_MADE] = {"stages_made", "model stages on every device"},
    [FORWARD_DONE] = {"forward_done", "forward of every microbatch (activations sent on)"},
    [BACKWARD_DONE] = {"backward_done", "backward of every microbatch (gradients sent back)"},
    [STEPPED] = {"stepped", "optimizer.step() on every stage"},
    [END] = {"end", "del model stages"},
    {NULL, NULL},
};

/* What one step holds: per device its run, stage and optimizer; per stage
 * and microbatch what autograd saved; the last stage's outputs. */
typedef struct pipeline {
    int count;
    vb_run *runs[VB_SCENARIO_MAX_DEVICES];
    vb_mlp *stages[VB_SCENARIO_MAX_DEVICES];
    vb_optimizer *optimizers[VB_SCENARIO_MAX_DEVICES];
    vb_mlp_saved saved[VB_SCENARIO_MAX_DEVICES][MICROBATCHES];
    vb_tensor *outputs[MICROBATCHES];
} pipeline;

/* Device k's stage: its widths depend on where it sits. */
static vb_status make_stage(pipeline *p, int k)
{
    int64_t widths[3] = {k == 0 ? INPUT_WIDTH : HIDDEN_WIDTH, HIDDEN_WIDTH,
                         k == p->count - 1 ? OUTPUT_WIDTH : HIDDEN_WIDTH};
    vb_status status = vb_mlp_create(p->runs[k], widths, 2, vb_run_stream(p->runs[k]), 10 + (uint64_t)k,
                                     &p->stages[k]);
    if (status == VB_OK) status = vb_optimizer_create(VB_OPTIMIZER_SGD, p->stages[k], 0.01f, &p->optimizers[k]);
    return status;
}

/* `t` on device k sent to device `to` (the tensor made there, `*out`), then
 * `del t` on device k. */
static vb_status send(pipeline *p, int k, int to, vb_tensor **t, vb_tensor **out)
{
    vb_run *from_run = p->runs[k], *to_run = p->runs[to];
    vb_status status = vb_tensor_empty(to_run, vb_tensor_rows(*t), vb_tensor_cols(*t), vb_run_stream(to_run), out);
    if (status == VB_OK) status = vb_tensor_copy(*out, vb_run_stream(to_run), *t, vb_run_stream(from_run));
    vb_keep_first(&status, vb_tensor_drop(t));
    return status;
}

/* Microbatch m through every stage: each stage's output goes to the next
 * device and is deleted where it was made; the last stage's is kept. */
static vb_status forward(pipeline *p, int m)
{
    vb_tensor *h = NULL;
    vb_status status = vb_tensor_empty(p->runs[0], ROWS, INPUT_WIDTH, vb_run_stream(p->runs[0]), &h);
    if (status == VB_OK) status = vb_tensor_fill_random(h, 100 + (uint64_t)m, vb_run_stream(p->runs[0]));
    for (int k = 0; k < p->count && status == VB_OK; k++) {
        vb_tensor *out = NULL;
        status = vb_mlp_forward(p->stages[k], h, &p->saved[k][m], &out);
        vb_keep_first(&status, vb_tensor_drop(&h)); /* autograd holds the stage's input */
        if (status != VB_OK) {
            vb_tensor_drop(&out);
            break;
        }
        if (k == p->count - 1) p->outputs[m] = out;
        else status = send(p, k, k + 1, &out, &h);
    }
    vb_keep_first(&status, vb_tensor_drop(&h));
    return status;
}

/* Microbatch m's backward, last stage first: the loss gradient (mse's
 * 2 (output - target) / n; relu_f32 stands in for it), then each stage's
 * input gradient sent back to the device before and deleted. */
static vb_status backward(pipeline *p, int m)
{
    int last = p->count - 1;
    vb_tensor *g = NULL;
    vb_status status = vb_tensor_empty(p->runs[last], ROWS, OUTPUT_WIDTH, vb_run_stream(p->runs[last]), &g);
    if (status == VB_OK) status = vb_tensor_relu(g, p->outputs[m], vb_run_stream(p->runs[last]));
    vb_keep_first(&status, vb_tensor_drop(&p->outputs[m]));
    for (int k = last; k >= 0 && status == VB_OK; k--) {
        vb_tensor *grad_input = NULL;
        status = k > 0 ? vb_mlp_backward_input(p->stages[k], &p->saved[k][m], g, &grad_input)
                       : vb_mlp_backward(p->stages[k], &p->saved[k][m], g);
        vb_keep_first(&status, vb_tensor_drop(&g));
        if (status == VB_OK && k > 0) status = send(p, k, k - 1, &grad_input, &g);
        vb_keep_first(&status, vb_tensor_drop(&grad_input));
    }
    vb_keep_first(&status, vb_tensor_drop(&g));
    return status;
}

/* optimizer.step() and zero_grad() on every stage. */
static vb_status optimizer_steps(pipeline *p)
{
    vb_status status = VB_OK;
    for (int k = 0; k < p->count && status == VB_OK; k++) {
        status = vb_optimizer_step(p->optimizers[k]);
        if (status == VB_OK) status = vb_mlp_zero_grad(p->stages[k]);
    }
    return status;
}

/* Drops everything the step may still hold (a failure half-way included). */
static vb_status release(pipeline *p)
{
    vb_status status = VB_OK;
    for (int m = 0; m < MICROBATCHES; m++) {
        vb_keep_first(&status, vb_tensor_drop(&p->outputs[m]));
        for (int k = 0; k < p->count; k++) vb_keep_first(&status, vb_mlp_saved_release(&p->saved[k][m]));
    }
    for (int k = 0; k < p->count; k++) {
        vb_keep_first(&status, vb_optimizer_drop(&p->optimizers[k]));
        vb_keep_first(&status, vb_mlp_drop(&p->stages[k]));
    }
    return status;
}

static vb_status run_pipeline_step(vb_run *run)
{
    pipeline p = {0};
    vb_status status = vb_scenario_device_runs(run, 2, p.runs, &p.count);
    if (status == VB_OK) status = vb_scenario_begin(run);
    for (int k = 0; k < p.count && status == VB_OK; k++) status = make_stage(&p, k);
    if (status == VB_OK) status = vb_run_step(run, steps[STAGES_MADE].text);
    for (int m = 0; m < MICROBATCHES && status == VB_OK; m++) status = forward(&p, m);
    if (status == VB_OK) status = vb_run_step(run, steps[FORWARD_DONE].text);
    for (int m = MICROBATCHES - 1; m >= 0 && status == VB_OK; m--) status = backward(&p, m);
    if (status == VB_OK) status = vb_run_step(run, steps[BACKWARD_DONE].text);
    if (status == VB_OK) status = optimizer_steps(&p);
    if (status == VB_OK) status = vb_run_step(run, steps[STEPPED].text);
    if (status == VB_OK) status = release(&p);
    if (status == VB_OK) status = vb_scenario_synchronize_devices(p.runs, p.count);
    if (status == VB_OK) status = vb_run_step(run, steps[END].text);
    status = vb_scenario_outcome(run, status);
    vb_keep_first(&status, release(&p));
    if (p.count > 0) vb_keep_first(&status, vb_scenario_report_devices(run, p.runs, p.count));
    return status;
}

const vb_scenario vb_pipeline_step_scenario = {
    .name = "pipeline_step",
    .documents = "000, 001, 003, 004",
    .description = "a training step with the model split across the devices: activations cross devices, "
                   "freed on the other side",
    .run = run_pipeline_step,
    .min_devices = 2,
    .steps = steps,
    .counters = vb_scenario_device_counters,
};
