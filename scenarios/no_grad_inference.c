/* vrambench — `no_grad_inference`: document 003 (docs/sources.md),
 * Example 2, "Utilizing torch.no_grad()":
 *
 *     model = torch.nn.Linear(1000, 10).cuda()
 *     input_tensor = torch.randn(1, 1000).cuda()
 *     with torch.no_grad():
 *         output = model(input_tensor)
 *
 * scaled up to a size where the difference shows: the same 1000 inputs and
 * 10 outputs with three hidden layers of 4096 (MLP 1000 -> 4096 -> 4096 ->
 * 4096 -> 10, ReLU between, no bias: 37,789,696 parameters, 151 MB) and a
 * batch of 4096 rows (16.4 MB of input, 67 MB per hidden activation).
 * Against it, one training step (document 004's training_step with SGD):
 * forward saving each activation for backward, then gradients of every
 * parameter and activation. The document says no_grad "substantially"
 * reduces memory; the counters give each phase's peak (absolute:
 * no_grad_peak_* / train_peak_*) and its peak above what was live before it
 * (no_grad_extra_peak_bytes / train_extra_peak_bytes: activations, grads and
 * temporaries). Each phase starts from an emptied cache so that neither
 * inherits the other's cached blocks. */

#include "mlp.h"

#define INPUTS 1000
#define OUTPUTS 10
#define HIDDEN 4096
#define BATCH 4096

/* Its steps (docs/results-json.md, "names"). */
enum { MODEL, INPUT, NO_GRAD_FORWARD, DEL_OUTPUT, TRAINED, END };
static const vb_name steps[] = {
    [MODEL] = {"model", "model = MLP(1000, 4096 x 3, 10).cuda()"},
    [INPUT] = {"input", "input_tensor = randn(4096, 1000)"},
    [NO_GRAD_FORWARD] = {"no_grad_forward", "with no_grad(): output = model(input)"},
    [DEL_OUTPUT] = {"del_output", "del output"},
    [TRAINED] = {"trained", "training_step returned"},
    [END] = {"end", "del model, optimizer, input_tensor"},
    {NULL, NULL},
};

/* Its counters. */
enum { NO_GRAD_PEAK_REQUESTED, NO_GRAD_PEAK_RESERVED, NO_GRAD_EXTRA_PEAK, TRAIN_PEAK_REQUESTED, TRAIN_PEAK_RESERVED, TRAIN_EXTRA_PEAK };
static const char *const counters[] = {
    [NO_GRAD_PEAK_REQUESTED] = "no_grad_peak_requested_bytes",
    [NO_GRAD_PEAK_RESERVED] = "no_grad_peak_reserved_bytes",
    [NO_GRAD_EXTRA_PEAK] = "no_grad_extra_peak_bytes",
    [TRAIN_PEAK_REQUESTED] = "train_peak_requested_bytes",
    [TRAIN_PEAK_RESERVED] = "train_peak_reserved_bytes",
    [TRAIN_EXTRA_PEAK] = "train_extra_peak_bytes",
    NULL,
};

/* Starts a phase: empty cache, fresh peaks; returns the requested bytes now. */
static vb_status begin_phase(vb_run *run, uint64_t *requested_before)
{
    vb_status status = vb_run_empty_cache(run);
    vb_run_reset_peaks(run);
    *requested_before = vb_scenario_stats(run).requested_bytes;
    return status;
}

/* Reports a phase's peaks as its three counters from `first` on (peak
 * requested, peak reserved, extra peak: NO_GRAD_* or TRAIN_*). */
static vb_status count_phase(vb_run *run, int first, uint64_t requested_before)
{
    vb_alloc_stats stats = vb_scenario_stats(run);
    vb_status status = vb_run_set_counter(run, counters[first], (double)stats.requested_bytes_peak);
    vb_keep_first(&status, vb_run_set_counter(run, counters[first + 1], (double)stats.reserved_bytes_peak));
    vb_keep_first(&status, vb_run_set_counter(run, counters[first + 2],
                                              (double)(stats.requested_bytes_peak - requested_before)));
    return status;
}

/* The inference of Example 2, then a training step, each measured. */
static vb_status run_no_grad_inference(vb_run *run)
{
    static const int64_t widths[] = {INPUTS, HIDDEN, HIDDEN, HIDDEN, OUTPUTS};
    vb_stream stream = vb_run_stream(run);
    vb_mlp *model = NULL;
    vb_optimizer *optimizer = NULL;
    vb_tensor *input = NULL, *output = NULL;
    uint64_t requested_before = 0;
    vb_status status = vb_scenario_begin(run);
    if (status == VB_OK) status = vb_mlp_create(run, widths, 4, stream, 1, &model);
    if (status == VB_OK) status = vb_run_step(run, steps[MODEL].text);
    if (status == VB_OK) status = vb_tensor_empty(run, BATCH, INPUTS, stream, &input);
    if (status == VB_OK) status = vb_tensor_fill_random(input, 2, stream);
    if (status == VB_OK) status = vb_run_step(run, steps[INPUT].text);
    /* with torch.no_grad(): output = model(input_tensor) */
    if (status == VB_OK) status = begin_phase(run, &requested_before);
    if (status == VB_OK) status = vb_mlp_forward(model, input, NULL, &output);
    if (status == VB_OK) status = vb_scenario_synchronize(run);
    if (status == VB_OK) status = vb_run_step(run, steps[NO_GRAD_FORWARD].text);
    if (status == VB_OK) status = count_phase(run, NO_GRAD_PEAK_REQUESTED, requested_before);
    if (status == VB_OK) status = vb_tensor_drop(&output);
    if (status == VB_OK) status = vb_run_step(run, steps[DEL_OUTPUT].text);
    /* The same forward with grad, as part of a training step. */
    if (status == VB_OK) status = vb_optimizer_create(VB_OPTIMIZER_SGD, model, 0.01f, &optimizer);
    if (status == VB_OK) status = begin_phase(run, &requested_before);
    if (status == VB_OK) status = vb_mlp_training_step(model, optimizer, input, 1, NULL);
    if (status == VB_OK) status = count_phase(run, TRAIN_PEAK_REQUESTED, requested_before);
    if (status == VB_OK) status = vb_run_step(run, steps[TRAINED].text);
    if (status == VB_OK) status = vb_optimizer_drop(&optimizer);
    if (status == VB_OK) status = vb_mlp_drop(&model);
    if (status == VB_OK) status = vb_tensor_drop(&input);
    if (status == VB_OK) status = vb_run_step(run, steps[END].text);
    status = vb_scenario_outcome(run, status);
    vb_keep_first(&status, vb_tensor_drop(&output));
    vb_keep_first(&status, vb_optimizer_drop(&optimizer));
    vb_keep_first(&status, vb_mlp_drop(&model));
    vb_keep_first(&status, vb_tensor_drop(&input));
    return status;
}

const vb_scenario vb_no_grad_inference_scenario = {
    .name = "no_grad_inference",
    .documents = "003",
    .description = "MLP forward under no_grad vs a training step with saved activations and grads (peaks)",
    .run = run_no_grad_inference,
    .steps = steps,
    .shared_steps = vb_mlp_training_steps,
    .counters = counters,
};
