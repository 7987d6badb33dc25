/* vrambench — the MLP, its autograd memory behaviour and its optimizers
 * (see mlp.h). */
#include "mlp.h"

#include <stdlib.h>

/* ------------------------------------------------------------------------ */
/* Model                                                                     */
/* ------------------------------------------------------------------------ */

vb_status vb_mlp_create(vb_run *run, const int64_t *widths, int layer_count, vb_stream stream, uint64_t seed,
                        vb_mlp **out)
{
    *out = NULL;
    if (layer_count < 1 || layer_count > VB_MLP_MAX_LAYERS)
        return vb_error(VB_ERR_INVALID, "mlp: %d layers (1 to %d)", layer_count, VB_MLP_MAX_LAYERS);
    vb_mlp *mlp = calloc(1, sizeof *mlp);
    if (!mlp) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    mlp->run = run;
    mlp->stream = stream;
    mlp->layer_count = layer_count;
    mlp->refs = 1;
    for (int i = 0; i <= layer_count; i++) mlp->widths[i] = widths[i];
    vb_status status = VB_OK;
    for (int i = 0; i < layer_count && status == VB_OK; i++) {
        status = vb_tensor_empty(run, widths[i + 1], widths[i], stream, &mlp->weights[i]);
        if (status == VB_OK) status = vb_tensor_fill_random(mlp->weights[i], seed + (uint64_t)i, stream);
    }
    if (status != VB_OK) {
        vb_mlp_drop(&mlp);
        return status;
    }
    *out = mlp;
    return VB_OK;
}

vb_mlp *vb_mlp_retain(vb_mlp *mlp)
{
    mlp->refs++;
    return mlp;
}

vb_status vb_mlp_drop(vb_mlp **mlp_ref)
{
    vb_mlp *mlp = *mlp_ref;
    *mlp_ref = NULL;
    if (!mlp || --mlp->refs > 0) return VB_OK;
    vb_status status = VB_OK;
    for (int i = 0; i < mlp->layer_count; i++) {
        vb_keep_first(&status, vb_tensor_drop(&mlp->weights[i]));
        vb_keep_first(&status, vb_tensor_drop(&mlp->grads[i]));
    }
    free(mlp);
    return status;
}

uint64_t vb_mlp_parameter_bytes(const vb_mlp *mlp)
{
    uint64_t bytes = 0;
    for (int i = 0; i < mlp->layer_count; i++)
        bytes += (uint64_t)mlp->widths[i] * (uint64_t)mlp->widths[i + 1] * vb_dtype_size(VB_DTYPE_F32);
    return bytes;
}

vb_status vb_mlp_zero_grad(vb_mlp *mlp)
{
    vb_status status = VB_OK;
    for (int i = 0; i < mlp->layer_count; i++) vb_keep_first(&status, vb_tensor_drop(&mlp->grads[i]));
    return status;
}

/* ------------------------------------------------------------------------ */
/* Forward and backward                                                      */
/* ------------------------------------------------------------------------ */

/* z = h @ W^T for layer i (nn.Linear without bias), z new. */
static vb_status linear(vb_mlp *mlp, int i, vb_tensor *h, vb_tensor **z)
{
    vb_status status = vb_tensor_empty(mlp->run, vb_tensor_rows(h), mlp->widths[i + 1], mlp->stream, z);
    if (status == VB_OK) status = vb_tensor_matmul(h, 0, mlp->weights[i], 1, *z, mlp->stream);
    if (status != VB_OK) vb_tensor_drop(z);
    return status;
}

/* a = relu(z), a new (nn.ReLU is not in place). */
static vb_status relu(vb_mlp *mlp, vb_tensor *z, vb_tensor **a)
{
    vb_status status = vb_tensor_empty(mlp->run, vb_tensor_rows(z), vb_tensor_cols(z), mlp->stream, a);
    if (status == VB_OK) status = vb_tensor_relu(*a, z, mlp->stream);
    if (status != VB_OK) vb_tensor_drop(a);
    return status;
}

vb_status vb_mlp_forward(vb_mlp *mlp, vb_tensor *input, vb_mlp_saved *saved, vb_tensor **output)
{
    *output = NULL;
    if (vb_tensor_cols(input) != mlp->widths[0])
        return vb_error(VB_ERR_INVALID, "mlp: input of %lld features for a model of %lld",
                        (long long)vb_tensor_cols(input), (long long)mlp->widths[0]);
    vb_status status = VB_OK;
    if (saved) status = vb_tensor_view(input, &saved->inputs[0]); /* Linear 0 saves its input */
    vb_tensor *h = input;      /* this layer's input */
    vb_tensor *owned_h = NULL; /* h when it is ours to free (no_grad intermediates) */
    for (int i = 0; i < mlp->layer_count && status == VB_OK; i++) {
        vb_tensor *z = NULL, *a = NULL;
        status = linear(mlp, i, h, &z);
        /* Sequential's forward rebinds `input = module(input)`: under
         * no_grad nothing else holds the previous activation, so it goes
         * before the next module allocates. */
        vb_keep_first(&status, vb_tensor_drop(&owned_h));
        if (status != VB_OK) {
            vb_tensor_drop(&z);
            break;
        }
        if (i == mlp->layer_count - 1) {
            *output = z;
            break;
        }
        status = relu(mlp, z, &a);
        vb_keep_first(&status, vb_tensor_drop(&z)); /* ReLU saves its output, not its input */
        if (status != VB_OK) {
            vb_tensor_drop(&a);
            break;
        }
        if (saved)
            saved->inputs[i + 1] = a; /* the ReLU's output, also the next Linear's saved input */
        else
            owned_h = a;
        h = a;
    }
    vb_keep_first(&status, vb_tensor_drop(&owned_h));
    if (status != VB_OK) vb_tensor_drop(output);
    return status;
}

/* param.grad of layer i from the gradient g of its output and its input x:
 * grad_W = g^T @ x. The first backward's result becomes param.grad; later
 * ones are computed apart and added, as autograd accumulates. */
static vb_status weight_grad(vb_mlp *mlp, int i, vb_tensor *g, vb_tensor *x)
{
    vb_tensor *fresh = NULL;
    vb_status status = vb_tensor_empty(mlp->run, mlp->widths[i + 1], mlp->widths[i], mlp->stream, &fresh);
    if (status == VB_OK) status = vb_tensor_matmul(g, 1, x, 0, fresh, mlp->stream);
    if (status == VB_OK && !mlp->grads[i]) {
        mlp->grads[i] = fresh;
        return VB_OK;
    }
    if (status == VB_OK) status = vb_tensor_axpy(1.0f, fresh, mlp->grads[i], mlp->stream);
    vb_keep_first(&status, vb_tensor_drop(&fresh));
    return status;
}

/* Backward; with `grad_input`, layer 0's input gradient too. */
static vb_status backward(vb_mlp *mlp, vb_mlp_saved *saved, vb_tensor *grad_output, vb_tensor **grad_input)
{
    vb_status status = VB_OK;
    vb_tensor *g = grad_output; /* gradient of layer i's output */
    vb_tensor *owned_g = NULL;  /* g when it is ours to free */
    for (int i = mlp->layer_count - 1; i >= 0 && status == VB_OK; i--) {
        vb_tensor *x = saved->inputs[i];
        vb_tensor *grad_x = NULL, *grad_z = NULL;
        status = weight_grad(mlp, i, g, x);
        /* Linear's input gradient grad_x = g @ W, for layer 0 only when asked. */
        if (status == VB_OK && (i > 0 || grad_input)) {
            status = vb_tensor_empty(mlp->run, vb_tensor_rows(g), mlp->widths[i], mlp->stream, &grad_x);
            if (status == VB_OK) status = vb_tensor_matmul(g, 0, mlp->weights[i], 0, grad_x, mlp->stream);
        }
        vb_keep_first(&status, vb_tensor_drop(&owned_g)); /* consumed by the Linear node */
        if (i == 0 && grad_input) {
            *grad_input = grad_x; /* the model's input had no ReLU: the caller's */
            grad_x = NULL;
        }
        /* ReLU backward (threshold_backward(grad_x, x)) into a new gradient;
         * relu_f32 stands in for it with the same reads and writes. */
        if (status == VB_OK && i > 0) {
            status = vb_tensor_empty(mlp->run, vb_tensor_rows(grad_x), vb_tensor_cols(grad_x), mlp->stream, &grad_z);
            if (status == VB_OK) status = vb_tensor_relu(grad_z, grad_x, mlp->stream);
        }
        vb_keep_first(&status, vb_tensor_drop(&grad_x));
        /* Both nodes that saved x have run: autograd frees it now. */
        vb_keep_first(&status, vb_tensor_drop(&saved->inputs[i]));
        if (status != VB_OK) {
            vb_tensor_drop(&grad_z);
            break;
        }
        owned_g = grad_z;
        g = grad_z;
    }
    vb_keep_first(&status, vb_tensor_drop(&owned_g));
    if (status != VB_OK && grad_input) vb_tensor_drop(grad_input);
    return status;
}

vb_status vb_mlp_backward(vb_mlp *mlp, vb_mlp_saved *saved, vb_tensor *grad_output)
{
    return backward(mlp, saved, grad_output, NULL);
}

vb_status vb_mlp_backward_input(vb_mlp *mlp, vb_mlp_saved *saved, vb_tensor *grad_output, vb_tensor **grad_input)
{
    *grad_input = NULL;
    return backward(mlp, saved, grad_output, grad_input);
}

vb_status vb_mlp_saved_release(vb_mlp_saved *saved)
{
    vb_status status = VB_OK;
    for (int i = 0; i < VB_MLP_MAX_LAYERS; i++) vb_keep_first(&status, vb_tensor_drop(&saved->inputs[i]));
    return status;
}

/* ------------------------------------------------------------------------ */
/* Optimizers                                                                */
/* ------------------------------------------------------------------------ */

vb_status vb_optimizer_create(vb_optimizer_kind kind, vb_mlp *mlp, float lr, vb_optimizer **out)
{
    vb_optimizer *optimizer = calloc(1, sizeof *optimizer);
    if (!optimizer) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    optimizer->kind = kind;
    optimizer->params = vb_mlp_retain(mlp);
    optimizer->lr = lr;
    *out = optimizer;
    return VB_OK;
}

vb_status vb_optimizer_drop(vb_optimizer **optimizer_ref)
{
    vb_optimizer *optimizer = *optimizer_ref;
    *optimizer_ref = NULL;
    if (!optimizer) return VB_OK;
    vb_status status = VB_OK;
    for (int i = 0; i < VB_MLP_MAX_LAYERS; i++) {
        vb_keep_first(&status, vb_tensor_drop(&optimizer->exp_avg[i]));
        vb_keep_first(&status, vb_tensor_drop(&optimizer->exp_avg_sq[i]));
    }
    vb_keep_first(&status, vb_mlp_drop(&optimizer->params));
    free(optimizer);
    return status;
}

/* A tensor shaped like `like` on the model's stream, written once (zeros_like
 * in PyTorch; fill_random stands in for its memset). */
static vb_status state_like(vb_mlp *mlp, vb_tensor *like, vb_tensor **out)
{
    vb_status status = vb_tensor_empty(mlp->run, vb_tensor_rows(like), vb_tensor_cols(like), mlp->stream, out);
    if (status == VB_OK) status = vb_tensor_fill_random(*out, 0, mlp->stream);
    if (status != VB_OK) vb_tensor_drop(out);
    return status;
}

/* Adam's step as torch/optim/adam.py's _multi_tensor_adam (foreach, the
 * default on CUDA): lerp_ the first moments, mul_/addcmul_ the second,
 * then exp_avg_sq_sqrt = _foreach_sqrt(exp_avg_sqs) makes one temporary per
 * parameter, all alive together, before addcdiv_ updates the parameters. */
static vb_status adam_step(vb_optimizer *optimizer)
{
    vb_mlp *mlp = optimizer->params;
    vb_status status = VB_OK;
    vb_tensor *denominators[VB_MLP_MAX_LAYERS] = {NULL};
    for (int i = 0; i < mlp->layer_count && status == VB_OK; i++) {
        if (!mlp->grads[i]) continue;
        if (!optimizer->exp_avg[i]) status = state_like(mlp, mlp->weights[i], &optimizer->exp_avg[i]);
        if (status == VB_OK && !optimizer->exp_avg_sq[i])
            status = state_like(mlp, mlp->weights[i], &optimizer->exp_avg_sq[i]);
    }
    for (int i = 0; i < mlp->layer_count && status == VB_OK; i++) {
        if (!mlp->grads[i]) continue;
        status = vb_tensor_axpy(0.1f, mlp->grads[i], optimizer->exp_avg[i], mlp->stream);
        if (status == VB_OK) status = vb_tensor_axpy(0.001f, mlp->grads[i], optimizer->exp_avg_sq[i], mlp->stream);
    }
    for (int i = 0; i < mlp->layer_count && status == VB_OK; i++) {
        if (!mlp->grads[i]) continue;
        status = vb_tensor_empty(mlp->run, mlp->widths[i + 1], mlp->widths[i], mlp->stream, &denominators[i]);
        if (status == VB_OK) status = vb_tensor_relu(denominators[i], optimizer->exp_avg_sq[i], mlp->stream);
    }
    for (int i = 0; i < mlp->layer_count && status == VB_OK; i++) {
        if (!mlp->grads[i]) continue;
        status = vb_tensor_axpy(-optimizer->lr, optimizer->exp_avg[i], mlp->weights[i], mlp->stream);
    }
    for (int i = 0; i < mlp->layer_count; i++) vb_keep_first(&status, vb_tensor_drop(&denominators[i]));
    return status;
}

/* SGD without momentum: p -= lr * p.grad, in place. */
static vb_status sgd_step(vb_optimizer *optimizer)
{
    vb_mlp *mlp = optimizer->params;
    vb_status status = VB_OK;
    for (int i = 0; i < mlp->layer_count && status == VB_OK; i++)
        if (mlp->grads[i]) status = vb_tensor_axpy(-optimizer->lr, mlp->grads[i], mlp->weights[i], mlp->stream);
    return status;
}

vb_status vb_optimizer_step(vb_optimizer *optimizer)
{
    return optimizer->kind == VB_OPTIMIZER_ADAM ? adam_step(optimizer) : sgd_step(optimizer);
}

/* ------------------------------------------------------------------------ */
/* Document 004, Example 2's training_step                                   */
/* ------------------------------------------------------------------------ */

/* The steps vb_mlp_training_step marks (when asked to), for the tables of
 * the scenarios that ask (scenarios/scenario.h, shared_steps). */
enum { OUTPUT, BACKWARD, OPTIMIZER_STEP };
const vb_name vb_mlp_training_steps[] = {
    [OUTPUT] = {"output", "output = model(data)"},
    [BACKWARD] = {"backward", "loss.backward()"},
    [OPTIMIZER_STEP] = {"optimizer_step", "optimizer.step()"},
    {NULL, NULL},
};

/* Samples `name` when the caller asked for steps. */
static vb_status mark(vb_mlp *mlp, int mark_steps, const char *name)
{
    return mark_steps ? vb_run_step(mlp->run, name) : VB_OK;
}

/* Waits for the work queued on the model's stream. */
static vb_status synchronize(vb_mlp *mlp)
{
    vb_device *dev = vb_run_device(mlp->run);
    return dev->ops->stream_synchronize(dev, mlp->stream);
}

/* loss = mse_loss(output, target): a 1 x 1 tensor. The dot product of the
 * flattened operands (one gemm) stands in for the fused reduction. */
static vb_status mse_loss(vb_mlp *mlp, vb_tensor *output, vb_tensor *target, vb_tensor **loss)
{
    vb_tensor *flat_output = NULL, *flat_target = NULL;
    int64_t count = (int64_t)vb_tensor_numel(output);
    vb_status status = vb_tensor_empty(mlp->run, 1, 1, mlp->stream, loss);
    if (status == VB_OK) status = vb_tensor_view_as(output, 1, count, &flat_output);
    if (status == VB_OK) status = vb_tensor_view_as(target, 1, count, &flat_target);
    if (status == VB_OK) status = vb_tensor_matmul(flat_output, 0, flat_target, 1, *loss, mlp->stream);
    vb_keep_first(&status, vb_tensor_drop(&flat_output));
    vb_keep_first(&status, vb_tensor_drop(&flat_target));
    if (status != VB_OK) vb_tensor_drop(loss);
    return status;
}

/* loss.backward(): MseLossBackward makes grad_output = 2 (output - target) / n
 * (relu_f32 copies output, axpy subtracts target), then the model's backward
 * runs; the graph's references to output and target go with it. */
static vb_status loss_backward(vb_mlp *mlp, vb_mlp_saved *saved, vb_tensor *output, vb_tensor *target)
{
    vb_tensor *grad_output = NULL;
    vb_status status = vb_tensor_empty(mlp->run, vb_tensor_rows(output), vb_tensor_cols(output), mlp->stream,
                                       &grad_output);
    if (status == VB_OK) status = vb_tensor_relu(grad_output, output, mlp->stream);
    if (status == VB_OK) status = vb_tensor_axpy(-1.0f, target, grad_output, mlp->stream);
    if (status == VB_OK) status = vb_mlp_backward(mlp, saved, grad_output);
    vb_keep_first(&status, vb_tensor_drop(&grad_output));
    return status;
}

vb_status vb_mlp_training_step(vb_mlp *mlp, vb_optimizer *optimizer, vb_tensor *data, int mark_steps,
                               float *loss_value)
{
    vb_mlp_saved saved = {{NULL}};
    vb_tensor *output = NULL, *target = NULL, *loss = NULL;
    vb_status status = vb_mlp_forward(mlp, data, &saved, &output);
    if (status == VB_OK) status = mark(mlp, mark_steps, vb_mlp_training_steps[OUTPUT].text);
    if (status == VB_OK)
        status = vb_tensor_empty(mlp->run, vb_tensor_rows(output), vb_tensor_cols(output), mlp->stream, &target);
    if (status == VB_OK) status = vb_tensor_fill_random(target, 7, mlp->stream);
    if (status == VB_OK) status = mse_loss(mlp, output, target, &loss);
    if (status == VB_OK) status = vb_mlp_zero_grad(optimizer->params);
    if (status == VB_OK) status = loss_backward(mlp, &saved, output, target);
    vb_keep_first(&status, vb_tensor_drop(&target)); /* the graph held it for MseLossBackward */
    if (status == VB_OK) status = mark(mlp, mark_steps, vb_mlp_training_steps[BACKWARD].text);
    if (status == VB_OK) status = vb_optimizer_step(optimizer);
    if (status == VB_OK) status = mark(mlp, mark_steps, vb_mlp_training_steps[OPTIMIZER_STEP].text);
    /* loss.item(): a 4-byte copy to the host, which waits for the stream. */
    float value = 0.0f;
    if (status == VB_OK) status = vb_tensor_copy_to_host(loss, &value, mlp->stream);
    if (status == VB_OK) status = synchronize(mlp);
    if (loss_value) *loss_value = value;
    /* Returning ends the function's scope: output and loss go. */
    vb_keep_first(&status, vb_mlp_saved_release(&saved));
    vb_keep_first(&status, vb_tensor_drop(&output));
    vb_keep_first(&status, vb_tensor_drop(&loss));
    return status;
}

/* ------------------------------------------------------------------------ */
/* Pinned host datasets                                                      */
/* ------------------------------------------------------------------------ */

/* The next value of a 64-bit linear congruential generator (Knuth's MMIX
 * constants): enough to give the host data varied values. */
static uint64_t next_random(uint64_t *state)
{
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    return *state >> 33;
}

vb_status vb_pinned_dataset_create(vb_run *run, int64_t samples, int64_t features, uint64_t seed,
                                   vb_pinned_dataset *out)
{
    vb_device *dev = vb_run_device(run);
    vb_pinned_dataset dataset = {dev, NULL, NULL, samples, features};
    uint64_t values = (uint64_t)samples * (uint64_t)features;
    vb_status status = dev->ops->host_alloc_pinned(dev, values * sizeof(float), (void **)&dataset.data);
    if (status == VB_OK)
        status = dev->ops->host_alloc_pinned(dev, (uint64_t)samples * sizeof(int64_t), (void **)&dataset.labels);
    if (status != VB_OK) {
        vb_pinned_dataset_free(&dataset);
        return status;
    }
    uint64_t state = seed;
    for (uint64_t i = 0; i < values; i++) dataset.data[i] = (float)(next_random(&state) % 2000) / 1000.0f - 1.0f;
    for (int64_t i = 0; i < samples; i++) dataset.labels[i] = (int64_t)(next_random(&state) % 10);
    *out = dataset;
    return VB_OK;
}

void vb_pinned_dataset_free(vb_pinned_dataset *dataset)
{
    vb_device *dev = dataset->device;
    if (!dev) return;
    dev->ops->device_synchronize(dev); /* no copy may still read the memory */
    if (dataset->data) dev->ops->host_free_pinned(dev, dataset->data);
    if (dataset->labels) dev->ops->host_free_pinned(dev, dataset->labels);
    dataset->data = NULL;
    dataset->labels = NULL;
}

vb_status vb_pinned_dataset_train_batch(vb_mlp *mlp, vb_optimizer *optimizer, const vb_pinned_dataset *dataset,
                                        int64_t first, int64_t count)
{
    vb_tensor *data = NULL, *target = NULL;
    vb_status status = vb_tensor_empty(mlp->run, count, dataset->features, mlp->stream, &data);
    if (status == VB_OK)
        status = vb_tensor_copy_from_host(data, dataset->data + first * dataset->features, mlp->stream);
    if (status == VB_OK) status = vb_tensor_empty_typed(mlp->run, VB_DTYPE_I64, count, 1, mlp->stream, &target);
    if (status == VB_OK) status = vb_tensor_copy_from_host(target, dataset->labels + first, mlp->stream);
    if (status == VB_OK) status = vb_mlp_training_step(mlp, optimizer, data, 0, NULL);
    vb_keep_first(&status, vb_tensor_drop(&data));
    vb_keep_first(&status, vb_tensor_drop(&target));
    return status;
}
