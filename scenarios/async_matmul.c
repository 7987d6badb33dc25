/* vrambench — `async_matmul`: document 001 (docs/sources.md),
 * the second example, async_gpu_example():
 *
 *     x = torch.randn(10000, 10000, device=device)
 *     y = torch.randn(10000, 10000, device=device)
 *     z = torch.matmul(x, y)
 *     print("Matrix multiplication dispatched (async)")
 *     time.sleep(1) # ... the kernel on the GPU may still be running.
 *     torch.cuda.synchronize()
 *     print("Synchronized, now memory will be free (at some point)")
 *
 * (its first example, simple_gpu_operation, is the same allocations without
 * the synchronize). Two 10000 x 10000 fp32 matrices (400 MB each) and their
 * product, an SGEMM queued on the run's stream; on `sim` the kernel is the
 * sim's modelled duration. Samples are taken right after the dispatch, while
 * the kernel is still in flight (the counter kernel_in_flight_at_dispatch
 * says whether it really was), after synchronize, after the function
 * returns (x, y and z released), and after empty_cache. The document says
 * the memory "is only released ... after the call to synchronize()"; the
 * counters *_change_at_synchronize_bytes measure what synchronize changed.
 * The sleep is left out: it only lets the kernel run further. */
#include "common.h"

#define MATRIX_SIZE 10000

/* Its steps, in the order it marks them. */
enum { X_MADE, Y_MADE, DISPATCHED, SYNCHRONIZED, RETURNED, EMPTIED };
static const vb_name steps[] = {
    [X_MADE] = {"x_made", "x = randn(10000, 10000)"},
    [Y_MADE] = {"y_made", "y = randn(10000, 10000)"},
    [DISPATCHED] = {"dispatched", "z = matmul(x, y) (dispatched)"},
    [SYNCHRONIZED] = {"synchronized", "synchronize()"},
    [RETURNED] = {"returned", "async_gpu_example() returned"},
    [EMPTIED] = {"emptied", "empty_cache"},
    {NULL, NULL},
};

enum { REQUESTED_CHANGE, RESERVED_CHANGE, DRIVER_USED_CHANGE, KERNEL_IN_FLIGHT, MATMUL_MS };
static const char *const counters[] = {
    [REQUESTED_CHANGE] = "requested_change_at_synchronize_bytes",
    [RESERVED_CHANGE] = "reserved_change_at_synchronize_bytes",
    [DRIVER_USED_CHANGE] = "driver_used_change_at_synchronize_bytes",
    [KERNEL_IN_FLIGHT] = "kernel_in_flight_at_dispatch",
    [MATMUL_MS] = "matmul_ms",
    NULL,
};

/* The events around the product and the three matrices. */
typedef struct matmul_state {
    vb_event before, after;
    vb_tensor *x, *y, *z;
} matmul_state;

/* Sets the counters of what synchronize() changed, from the samples before
 * and after it. */
static vb_status count_synchronize_change(vb_run *run, const vb_alloc_stats *before, uint64_t driver_before)
{
    vb_alloc_stats after = vb_scenario_stats(run);
    uint64_t driver_after = vb_device_used_bytes(vb_run_device(run));
    vb_status status = vb_run_set_counter(run, counters[REQUESTED_CHANGE],
                                          (double)after.requested_bytes - (double)before->requested_bytes);
    vb_keep_first(&status, vb_run_set_counter(run, counters[RESERVED_CHANGE],
                                              (double)after.reserved_bytes - (double)before->reserved_bytes));
    vb_keep_first(&status, vb_run_set_counter(run, counters[DRIVER_USED_CHANGE],
                                              (double)driver_after - (double)driver_before));
    return status;
}

/* async_gpu_example() up to its return, then empty_cache. */
static vb_status async_gpu_example(vb_run *run, matmul_state *s)
{
    vb_device *dev = vb_run_device(run);
    vb_stream stream = vb_run_stream(run);
    vb_status status = vb_tensor_empty(run, MATRIX_SIZE, MATRIX_SIZE, stream, &s->x);
    if (status == VB_OK) status = vb_tensor_fill_random(s->x, 1, stream);
    if (status == VB_OK) status = vb_run_step(run, steps[X_MADE].text);
    if (status == VB_OK) status = vb_tensor_empty(run, MATRIX_SIZE, MATRIX_SIZE, stream, &s->y);
    if (status == VB_OK) status = vb_tensor_fill_random(s->y, 2, stream);
    if (status == VB_OK) status = vb_run_step(run, steps[Y_MADE].text);
    if (status == VB_OK) status = vb_tensor_empty(run, MATRIX_SIZE, MATRIX_SIZE, stream, &s->z);
    if (status == VB_OK) status = dev->ops->event_record(dev, s->before, stream);
    if (status == VB_OK) status = vb_tensor_matmul(s->x, 0, s->y, 0, s->z, stream);
    if (status == VB_OK) status = dev->ops->event_record(dev, s->after, stream);
    if (status == VB_OK) status = vb_run_step(run, steps[DISPATCHED].text);
    if (status != VB_OK) return status;
    /* Asked right after the sample: was the product still running then? */
    status = vb_run_set_counter(run, counters[KERNEL_IN_FLIGHT], dev->ops->event_query(dev, s->after) ? 0 : 1);
    vb_alloc_stats before_sync = vb_scenario_stats(run);
    uint64_t driver_before_sync = vb_device_used_bytes(dev);
    if (status == VB_OK) status = vb_scenario_synchronize(run);
    if (status == VB_OK) status = vb_run_step(run, steps[SYNCHRONIZED].text);
    if (status == VB_OK) status = count_synchronize_change(run, &before_sync, driver_before_sync);
    double matmul_ms = 0.0;
    if (status == VB_OK) status = dev->ops->event_elapsed_ms(dev, s->before, s->after, &matmul_ms);
    if (status == VB_OK) status = vb_run_set_counter(run, counters[MATMUL_MS], matmul_ms);
    /* The function returns: its locals x, y and z go. */
    if (status == VB_OK) status = vb_tensor_drop(&s->x);
    if (status == VB_OK) status = vb_tensor_drop(&s->y);
    if (status == VB_OK) status = vb_tensor_drop(&s->z);
    if (status == VB_OK) status = vb_run_step(run, steps[RETURNED].text);
    if (status == VB_OK) status = vb_run_empty_cache(run);
    if (status == VB_OK) status = vb_run_step(run, steps[EMPTIED].text);
    return status;
}

/* Runs the example with its events, releasing everything on every path. */
static vb_status run_async_matmul(vb_run *run)
{
    vb_device *dev = vb_run_device(run);
    matmul_state s = {NULL, NULL, NULL, NULL, NULL};
    vb_status status = vb_scenario_begin(run);
    if (status == VB_OK) status = dev->ops->event_create(dev, &s.before);
    if (status == VB_OK) status = dev->ops->event_create(dev, &s.after);
    if (status == VB_OK) status = async_gpu_example(run, &s);
    status = vb_scenario_outcome(run, status);
    vb_keep_first(&status, vb_tensor_drop(&s.x));
    vb_keep_first(&status, vb_tensor_drop(&s.y));
    vb_keep_first(&status, vb_tensor_drop(&s.z));
    /* An event must not be destroyed while its work may be queued. */
    vb_keep_first(&status, vb_scenario_synchronize(run));
    if (s.before) dev->ops->event_destroy(dev, s.before);
    if (s.after) dev->ops->event_destroy(dev, s.after);
    return status;
}

const vb_scenario vb_async_matmul_scenario = {
    .name = "async_matmul",
    .documents = "001",
    .description = "two 10000x10000 fp32 matrices, z = x @ y in flight, synchronize, return, empty_cache",
    .run = run_async_matmul,
    .steps = steps,
    .counters = counters,
};
