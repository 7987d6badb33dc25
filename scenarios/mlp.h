/* vrambench — a small MLP with autograd's memory behaviour, for the
 * scenarios that train (training_cleanup, no_grad_inference,
 * dataloader_batches, empty_cache_loop).
 *
 * torch.nn.Sequential(Linear, ReLU, Linear, ReLU, ..., Linear), bias-free
 * (biases are a few KiB next to the weights; leaving them out keeps every op
 * a gemm). What matters here is which tensors exist when, as in PyTorch:
 *  - forward under torch.no_grad() frees each activation once the next layer
 *    has read it; with grad, each Linear saves its input and each ReLU its
 *    output (the same tensor), kept until backward has used it;
 *  - backward allocates each weight's grad (param.grad, kept until
 *    zero_grad(), whose default set_to_none=True frees it) and a gradient of
 *    each activation, freed as soon as the next node has consumed it;
 *  - the parameters are shared objects: the optimizer holds them as the
 *    model does (optimizer.param_groups), so `del model` alone frees nothing
 *    while the optimizer lives.
 * Kernels are the device's gemm_f32, relu_f32, axpy_f32 and fill_random_f32;
 * where PyTorch runs another elementwise kernel (threshold_backward, sqrt,
 * mse) one of these with the same memory traffic stands in for it. The
 * values computed do not matter, only the memory and the work. */
#ifndef VB_MLP_H
#define VB_MLP_H

#include "common.h"

#define VB_MLP_MAX_LAYERS 8

typedef struct vb_mlp {
    vb_run *run;
    vb_stream stream;                        /* where its work is queued */
    int layer_count;
    int64_t widths[VB_MLP_MAX_LAYERS + 1];   /* widths[0] inputs ... widths[layer_count] outputs */
    vb_tensor *weights[VB_MLP_MAX_LAYERS];   /* layer i: widths[i+1] x widths[i] (out x in) */
    vb_tensor *grads[VB_MLP_MAX_LAYERS];     /* param.grad: NULL until backward, or after zero_grad */
    unsigned refs;                           /* the model and optimizers holding its parameters */
} vb_mlp;

/* What autograd saved during a forward with grad: the input of each Linear
 * (the ReLU outputs, and a reference to the caller's input for layer 0). */
typedef struct vb_mlp_saved {
    vb_tensor *inputs[VB_MLP_MAX_LAYERS];
} vb_mlp_saved;

/* model = MLP(widths).cuda(): `layer_count` Linear layers with ReLU between,
 * weights allocated on `stream` and filled from `seed`. */
vb_status vb_mlp_create(vb_run *run, const int64_t *widths, int layer_count, vb_stream stream, uint64_t seed,
                        vb_mlp **out);

/* Another holder of the parameters (an optimizer); returns `mlp`. */
vb_mlp *vb_mlp_retain(vb_mlp *mlp);

/* Drops one holder and sets *mlp = NULL; the last frees weights and grads
 * (NULL is a no-op). */
vb_status vb_mlp_drop(vb_mlp **mlp);

/* Bytes of all weights (one copy: grads and each optimizer moment are as many). */
uint64_t vb_mlp_parameter_bytes(const vb_mlp *mlp);

/* output = model(input): input is batch x widths[0], output batch x
 * widths[layer_count], new. `saved` NULL is torch.no_grad(); otherwise it
 * must be zeroed and receives what backward needs (release it with
 * vb_mlp_saved_release if backward does not run). */
vb_status vb_mlp_forward(vb_mlp *mlp, vb_tensor *input, vb_mlp_saved *saved, vb_tensor **output);

/* Backward from grad_output (same shape as the forward's output, kept by the
 * caller): fills or accumulates each param.grad and frees what `saved`
 * holds as each node is done with it. */
vb_status vb_mlp_backward(vb_mlp *mlp, vb_mlp_saved *saved, vb_tensor *grad_output);

/* The same, and the gradient of the model's input into *grad_input (new;
 * grad_x = g @ W of layer 0): what a pipeline stage sends back to the stage
 * before it. */
vb_status vb_mlp_backward_input(vb_mlp *mlp, vb_mlp_saved *saved, vb_tensor *grad_output, vb_tensor **grad_input);

/* Drops whatever `saved` still holds. */
vb_status vb_mlp_saved_release(vb_mlp_saved *saved);

/* optimizer.zero_grad() with set_to_none=True (PyTorch's default since 2.0). */
vb_status vb_mlp_zero_grad(vb_mlp *mlp);

/* ------------------------------------------------------------------------ */
/* Optimizers                                                                */
/* ------------------------------------------------------------------------ */

typedef enum vb_optimizer_kind {
    VB_OPTIMIZER_SGD,  /* torch.optim.SGD: no state */
    VB_OPTIMIZER_ADAM, /* torch.optim.Adam: two moments per parameter, created at the first step */
} vb_optimizer_kind;

typedef struct vb_optimizer {
    vb_optimizer_kind kind;
    vb_mlp *params;                           /* a holder of the model's parameters */
    float lr;
    vb_tensor *exp_avg[VB_MLP_MAX_LAYERS];    /* Adam's first moment per parameter */
    vb_tensor *exp_avg_sq[VB_MLP_MAX_LAYERS]; /* and second moment */
} vb_optimizer;

/* optimizer = SGD/Adam(model.parameters(), lr). */
vb_status vb_optimizer_create(vb_optimizer_kind kind, vb_mlp *mlp, float lr, vb_optimizer **out);

/* optimizer.step(). */
vb_status vb_optimizer_step(vb_optimizer *optimizer);

/* `del optimizer`: frees its state and drops its hold on the parameters;
 * sets *optimizer = NULL (NULL is a no-op). */
vb_status vb_optimizer_drop(vb_optimizer **optimizer);

/* Document 004, Example 2's training_step(data, model, optimizer):
 *     output = model(data)
 *     loss = mse_loss(output, torch.randn_like(output))
 *     optimizer.zero_grad(); loss.backward(); optimizer.step()
 *     return loss.item()
 * With `mark_steps`, samples "output = model(data)", "loss.backward()" and
 * "optimizer.step()". loss.item() synchronizes the stream, as it does. */
/* The steps vb_mlp_training_step marks (NULL-ended), for the shared_steps
 * of a scenario that passes mark_steps. */
extern const vb_name vb_mlp_training_steps[];

vb_status vb_mlp_training_step(vb_mlp *mlp, vb_optimizer *optimizer, vb_tensor *data, int mark_steps,
                               float *loss_value);

/* ------------------------------------------------------------------------ */
/* Pinned host datasets (document 003, Example 3)                            */
/* ------------------------------------------------------------------------ */

/* TensorDataset(torch.randn(samples, features), torch.randint(0, 10, (samples,)))
 * in page-locked host memory, as DataLoader(pin_memory=True) hands out. */
typedef struct vb_pinned_dataset {
    vb_device *device;
    float *data;      /* samples x features, row-major */
    int64_t *labels;  /* samples */
    int64_t samples, features;
} vb_pinned_dataset;

/* Allocates and fills the dataset (values from `seed`). */
vb_status vb_pinned_dataset_create(vb_run *run, int64_t samples, int64_t features, uint64_t seed,
                                   vb_pinned_dataset *out);

/* Waits for the device's queued copies, then frees the host memory (a
 * zeroed dataset is fine). */
void vb_pinned_dataset_free(vb_pinned_dataset *dataset);

/* One iteration of the document's loop over the batch of `count` samples
 * from `first`:
 *     data, target = data.cuda(), target.cuda()   # copies on the model's stream
 *     # Training step...                           # training_step (004, Example 2)
 *     del data
 *     del target */
vb_status vb_pinned_dataset_train_batch(vb_mlp *mlp, vb_optimizer *optimizer, const vb_pinned_dataset *dataset,
                                        int64_t first, int64_t count);

#endif
