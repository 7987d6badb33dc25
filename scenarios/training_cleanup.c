/* vrambench — `training_cleanup`: document 002 (docs/sources.md),
 * "How to completely free GPU memory after PyTorch model training?",
 * Examples 1 and 2 in order after "# ... model training code ...":
 *
 *     del model
 *     del optimizer
 *     if 'some_large_tensor' in locals():
 *         del some_large_tensor
 *     gc.collect()
 *     torch.cuda.empty_cache()
 *     del train_dataset
 *     del test_dataset
 *     del train_loader
 *     del test_loader
 *     gc.collect()
 *     torch.cuda.empty_cache()
 *
 * The training code is ours (the document elides it), sized to matter and
 * to stay fast:
 *   model      MLP 1024 -> 4096 -> 4096 -> 1000, ReLU between, no bias:
 *              24,862,720 parameters, 99.5 MB of fp32
 *   optimizer  Adam (foreach): two moments per parameter, made at the first
 *              step (199 MB), plus one sqrt temporary per parameter in step
 *   datasets   TensorDataset on the device: train 16384 x 1024 fp32 (67 MB)
 *              with int64 labels, test 4096 x 1024 (16.8 MB) with labels
 *   loaders    DataLoader(dataset, batch_size=256): each holds its dataset;
 *              a batch is a row slice of the dataset's tensors
 *   training   train(): 4 steps of document 004's training_step (forward,
 *              mse_loss against randn_like, zero_grad, backward, step)
 *   some_large_tensor = model(test_x) under no_grad: 4096 x 1000 fp32
 * Python's references are kept faithfully: the optimizer holds the same
 * parameters as the model (and their .grad), and a loader holds its dataset,
 * so `del model` and `del train_dataset` alone free nothing.
 *
 * Counters: freed_at_del_model_bytes (0: the optimizer still holds the
 * parameters), and what stays after
 * the last empty_cache: residual_reserved_bytes (the allocator's floor),
 * residual_driver_bytes (driver-used memory now minus before the scenario's
 * first allocation: on a GPU this includes what libraries took meanwhile,
 * e.g. the cuBLAS workspace at the first SGEMM), residual_library_bytes (the
 * part of it the allocator does not hold), driver_used_after_cleanup_bytes
 * (absolute, CUDA context included). The gc.collect() steps sample too:
 * there is nothing for them to do, every reference was counted. */
#include "mlp.h"

#define FEATURES 1024
#define CLASSES 1000
#define HIDDEN 4096
#define TRAIN_SAMPLES 16384
#define TEST_SAMPLES 4096
#define BATCH_SIZE 256
#define TRAIN_STEPS 4

/* Its steps (docs/results-json.md, "names"). */
enum { DATASETS, MODEL, TRAINED, LARGE_TENSOR, DEL_MODEL, DEL_OPTIMIZER, DEL_LARGE_TENSOR, GC, EMPTIED, DEL_TRAIN_DATASET, DEL_TEST_DATASET, DEL_TRAIN_LOADER, DEL_TEST_LOADER, GC_2, EMPTIED_2 };
static const vb_name steps[] = {
    [DATASETS] = {"datasets", "datasets and loaders on device"},
    [MODEL] = {"model", "model, optimizer = MLP().cuda(), Adam(...)"},
    [TRAINED] = {"trained", "training done"},
    [LARGE_TENSOR] = {"large_tensor", "some_large_tensor = model(test_x)"},
    [DEL_MODEL] = {"del_model", "del model"},
    [DEL_OPTIMIZER] = {"del_optimizer", "del optimizer"},
    [DEL_LARGE_TENSOR] = {"del_large_tensor", "del some_large_tensor"},
    [GC] = {"gc", "gc.collect()"},
    [EMPTIED] = {"emptied", "empty_cache"},
    [DEL_TRAIN_DATASET] = {"del_train_dataset", "del train_dataset"},
    [DEL_TEST_DATASET] = {"del_test_dataset", "del test_dataset"},
    [DEL_TRAIN_LOADER] = {"del_train_loader", "del train_loader"},
    [DEL_TEST_LOADER] = {"del_test_loader", "del test_loader"},
    [GC_2] = {"gc_2", "gc.collect() #2"},
    [EMPTIED_2] = {"emptied_2", "empty_cache #2"},
    {NULL, NULL},
};

/* Its counters. */
enum { FREED_AT_DEL_MODEL, RESIDUAL_RESERVED, RESIDUAL_DRIVER, RESIDUAL_LIBRARY, DRIVER_USED_AFTER, REQUESTED_AFTER };
static const char *const counters[] = {
    [FREED_AT_DEL_MODEL] = "freed_at_del_model_bytes",
    [RESIDUAL_RESERVED] = "residual_reserved_bytes",
    [RESIDUAL_DRIVER] = "residual_driver_bytes",
    [RESIDUAL_LIBRARY] = "residual_library_bytes",
    [DRIVER_USED_AFTER] = "driver_used_after_cleanup_bytes",
    [REQUESTED_AFTER] = "requested_after_cleanup_bytes",
    NULL,
};

/* TensorDataset(data, labels) on the device; a DataLoader is the same pair of
 * references to its dataset's tensors. */
typedef struct tensor_pair {
    vb_tensor *data, *labels;
} tensor_pair;

/* Everything the script's variables hold. */
typedef struct training_state {
    tensor_pair train_dataset, test_dataset, train_loader, test_loader;
    vb_mlp *model;
    vb_optimizer *optimizer;
    vb_tensor *some_large_tensor;
} training_state;

/* `del pair`: drops both references. */
static vb_status drop_pair(tensor_pair *pair)
{
    vb_status status = vb_tensor_drop(&pair->data);
    vb_keep_first(&status, vb_tensor_drop(&pair->labels));
    return status;
}

/* A TensorDataset of `samples` random rows and int64 labels on the device. */
static vb_status make_dataset(vb_run *run, int64_t samples, uint64_t seed, tensor_pair *dataset)
{
    vb_stream stream = vb_run_stream(run);
    vb_status status = vb_tensor_empty(run, samples, FEATURES, stream, &dataset->data);
    if (status == VB_OK) status = vb_tensor_fill_random(dataset->data, seed, stream);
    if (status == VB_OK) status = vb_tensor_empty_typed(run, VB_DTYPE_I64, samples, 1, stream, &dataset->labels);
    return status;
}

/* DataLoader(dataset): a reference to each of the dataset's tensors. */
static vb_status make_loader(tensor_pair *dataset, tensor_pair *loader)
{
    vb_status status = vb_tensor_view(dataset->data, &loader->data);
    if (status == VB_OK) status = vb_tensor_view(dataset->labels, &loader->labels);
    return status;
}

/* train(model, optimizer, train_loader): TRAIN_STEPS batches; each batch is
 * `data, target` sliced from the loader's tensors, dropped when the loop
 * rebinds them and gone when train() returns. */
static vb_status train(training_state *s)
{
    vb_status status = VB_OK;
    for (int step = 0; step < TRAIN_STEPS && status == VB_OK; step++) {
        vb_tensor *data = NULL, *target = NULL;
        int64_t first = (int64_t)step * BATCH_SIZE;
        status = vb_tensor_view_rows(s->train_loader.data, first, BATCH_SIZE, &data);
        if (status == VB_OK) status = vb_tensor_view_rows(s->train_loader.labels, first, BATCH_SIZE, &target);
        if (status == VB_OK) status = vb_mlp_training_step(s->model, s->optimizer, data, 0, NULL);
        vb_keep_first(&status, vb_tensor_drop(&data));
        vb_keep_first(&status, vb_tensor_drop(&target));
    }
    return status;
}

/* Requested bytes now. */
static uint64_t requested_now(vb_run *run)
{
    return vb_scenario_stats(run).requested_bytes;
}

/* The model training code the document elides, up to "training done". */
static vb_status model_training_code(vb_run *run, training_state *s)
{
    static const int64_t widths[] = {FEATURES, HIDDEN, HIDDEN, CLASSES};
    vb_status status = make_dataset(run, TRAIN_SAMPLES, 1, &s->train_dataset);
    if (status == VB_OK) status = make_dataset(run, TEST_SAMPLES, 2, &s->test_dataset);
    if (status == VB_OK) status = make_loader(&s->train_dataset, &s->train_loader);
    if (status == VB_OK) status = make_loader(&s->test_dataset, &s->test_loader);
    if (status == VB_OK) status = vb_run_step(run, steps[DATASETS].text);
    if (status == VB_OK) status = vb_mlp_create(run, widths, 3, vb_run_stream(run), 3, &s->model);
    if (status == VB_OK) status = vb_optimizer_create(VB_OPTIMIZER_ADAM, s->model, 1e-3f, &s->optimizer);
    if (status == VB_OK) status = vb_run_step(run, steps[MODEL].text);
    if (status == VB_OK) status = train(s);
    if (status == VB_OK) status = vb_run_step(run, steps[TRAINED].text);
    if (status == VB_OK) status = vb_mlp_forward(s->model, s->test_loader.data, NULL, &s->some_large_tensor);
    if (status == VB_OK) status = vb_scenario_synchronize(run);
    if (status == VB_OK) status = vb_run_step(run, steps[LARGE_TENSOR].text);
    return status;
}

/* Examples 1 and 2, sampling after each line. */
static vb_status cleanup(vb_run *run, training_state *s, uint64_t driver_used_before)
{
    uint64_t before_del_model = requested_now(run);
    vb_status status = vb_mlp_drop(&s->model);
    if (status == VB_OK) status = vb_run_step(run, steps[DEL_MODEL].text);
    if (status == VB_OK)
        status = vb_run_set_counter(run, counters[FREED_AT_DEL_MODEL],
                                    (double)before_del_model - (double)requested_now(run));
    if (status == VB_OK) status = vb_optimizer_drop(&s->optimizer);
    if (status == VB_OK) status = vb_run_step(run, steps[DEL_OPTIMIZER].text);
    if (status == VB_OK) status = vb_tensor_drop(&s->some_large_tensor);
    if (status == VB_OK) status = vb_run_step(run, steps[DEL_LARGE_TENSOR].text);
    /* gc.collect() finds nothing: every reference above was counted. */
    if (status == VB_OK) status = vb_run_step(run, steps[GC].text);
    if (status == VB_OK) status = vb_run_empty_cache(run);
    if (status == VB_OK) status = vb_run_step(run, steps[EMPTIED].text);
    if (status == VB_OK) status = drop_pair(&s->train_dataset);
    if (status == VB_OK) status = vb_run_step(run, steps[DEL_TRAIN_DATASET].text);
    if (status == VB_OK) status = drop_pair(&s->test_dataset);
    if (status == VB_OK) status = vb_run_step(run, steps[DEL_TEST_DATASET].text);
    if (status == VB_OK) status = drop_pair(&s->train_loader);
    if (status == VB_OK) status = vb_run_step(run, steps[DEL_TRAIN_LOADER].text);
    if (status == VB_OK) status = drop_pair(&s->test_loader);
    if (status == VB_OK) status = vb_run_step(run, steps[DEL_TEST_LOADER].text);
    if (status == VB_OK) status = vb_run_step(run, steps[GC_2].text);
    if (status == VB_OK) status = vb_run_empty_cache(run);
    if (status == VB_OK) status = vb_run_step(run, steps[EMPTIED_2].text);
    if (status != VB_OK) return status;
    vb_alloc_stats after = vb_scenario_stats(run);
    uint64_t driver_used_after = vb_device_used_bytes(vb_run_device(run));
    double residual_driver = (double)driver_used_after - (double)driver_used_before;
    status = vb_run_set_counter(run, counters[RESIDUAL_RESERVED], (double)after.reserved_bytes);
    vb_keep_first(&status, vb_run_set_counter(run, counters[RESIDUAL_DRIVER], residual_driver));
    vb_keep_first(&status, vb_run_set_counter(run, counters[RESIDUAL_LIBRARY],
                                              residual_driver - (double)after.reserved_bytes));
    vb_keep_first(&status, vb_run_set_counter(run, counters[DRIVER_USED_AFTER], (double)driver_used_after));
    vb_keep_first(&status, vb_run_set_counter(run, counters[REQUESTED_AFTER], (double)after.requested_bytes));
    return status;
}

/* Trains, then cleans up as the document does; releases all on any path. */
static vb_status run_training_cleanup(vb_run *run)
{
    training_state s = {{NULL, NULL}, {NULL, NULL}, {NULL, NULL}, {NULL, NULL}, NULL, NULL, NULL};
    uint64_t driver_used_before = vb_device_used_bytes(vb_run_device(run));
    vb_status status = vb_scenario_begin(run);
    if (status == VB_OK) status = model_training_code(run, &s);
    if (status == VB_OK) status = cleanup(run, &s, driver_used_before);
    status = vb_scenario_outcome(run, status);
    vb_keep_first(&status, vb_tensor_drop(&s.some_large_tensor));
    vb_keep_first(&status, vb_optimizer_drop(&s.optimizer));
    vb_keep_first(&status, vb_mlp_drop(&s.model));
    vb_keep_first(&status, drop_pair(&s.train_loader));
    vb_keep_first(&status, drop_pair(&s.test_loader));
    vb_keep_first(&status, drop_pair(&s.train_dataset));
    vb_keep_first(&status, drop_pair(&s.test_dataset));
    return status;
}

const vb_scenario vb_training_cleanup_scenario = {
    .name = "training_cleanup",
    .documents = "002",
    .description = "MLP + Adam + datasets trained, then del model/optimizer/datasets/loaders, gc, empty_cache",
    .run = run_training_cleanup,
    .steps = steps,
    .counters = counters,
};
