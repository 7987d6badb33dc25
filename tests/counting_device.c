/* vrambench tests — the counting proxy device: forwards every op, counts
 * the calls that obtain and return memory, and reads held bytes from the
 * underlying device's mem_info. */
#include "counting_device.h"

/* The proxy behind a device handle the allocator passes back. */
static vb_counting_device *proxy_of(vb_device *dev)
{
    return (vb_counting_device *)dev->state;
}

/* The device every op is forwarded to. */
static vb_device *inner_of(vb_device *dev)
{
    return proxy_of(dev)->inner;
}

/* Bytes held beyond the baseline, by the device's own mem_info. */
uint64_t vb_counting_held(const vb_counting_device *proxy)
{
    uint64_t used = vb_device_used_bytes(proxy->inner);
    return used > proxy->baseline_used ? used - proxy->baseline_used : 0;
}

/* Counts one obtain call and samples the held peak after it. */
static vb_status note_obtain(vb_device *dev, vb_status status)
{
    vb_counting_device *proxy = proxy_of(dev);
    proxy->obtain_calls++;
    if (status != VB_OK) proxy->failed_obtain_calls++;
    uint64_t held = vb_counting_held(proxy);
    if (held > proxy->held_peak) proxy->held_peak = held;
    return status;
}

/* ------------------------------------------------------------------------ */
/* Counted ops: forwarded, with the call counted (and the peak sampled)      */
/* ------------------------------------------------------------------------ */

static vb_status proxy_mem_alloc(vb_device *dev, uint64_t size, vb_addr *out)
{
    return note_obtain(dev, inner_of(dev)->ops->mem_alloc(inner_of(dev), size, out));
}

static vb_status proxy_mem_free(vb_device *dev, vb_addr addr)
{
    proxy_of(dev)->return_calls++;
    return inner_of(dev)->ops->mem_free(inner_of(dev), addr);
}

static vb_status proxy_vm_create(vb_device *dev, uint64_t size, vb_phys *out)
{
    return note_obtain(dev, inner_of(dev)->ops->vm_create(inner_of(dev), size, out));
}

static vb_status proxy_vm_release(vb_device *dev, vb_phys handle)
{
    proxy_of(dev)->return_calls++;
    return inner_of(dev)->ops->vm_release(inner_of(dev), handle);
}

static vb_status proxy_pool_malloc(vb_device *dev, vb_pool pool, uint64_t size, vb_stream stream, vb_addr *out)
{
    return note_obtain(dev, inner_of(dev)->ops->pool_malloc(inner_of(dev), pool, size, stream, out));
}

static vb_status proxy_pool_free(vb_device *dev, vb_pool pool, vb_addr addr, vb_stream stream)
{
    proxy_of(dev)->return_calls++;
    return inner_of(dev)->ops->pool_free(inner_of(dev), pool, addr, stream);
}

/* A trim returns memory to the device when the pool's own reserved figure
 * drops across it; only then is it a call that returned memory. */
static vb_status proxy_pool_trim(vb_device *dev, vb_pool pool, uint64_t keep_bytes)
{
    vb_device *inner = inner_of(dev);
    uint64_t reserved_before = 0, reserved_after = 0, used = 0;
    int known = inner->ops->pool_usage(inner, pool, &reserved_before, &used) == VB_OK;
    vb_status status = inner->ops->pool_trim(inner, pool, keep_bytes);
    if (known && inner->ops->pool_usage(inner, pool, &reserved_after, &used) == VB_OK &&
        reserved_after < reserved_before)
        proxy_of(dev)->return_calls++;
    return status;
}

/* ------------------------------------------------------------------------ */
/* Plain forwarding: each op below calls the same op of the inner device     */
/* with the same arguments and returns what it returns.                      */
/* ------------------------------------------------------------------------ */

/* The test closes the underlying device itself. */
static void proxy_close(vb_device *dev)
{
    (void)dev;
}

static void proxy_info(vb_device *dev, vb_device_info *out)
{
    inner_of(dev)->ops->info(inner_of(dev), out);
}

static vb_status proxy_mem_info(vb_device *dev, uint64_t *free_bytes, uint64_t *total_bytes)
{
    return inner_of(dev)->ops->mem_info(inner_of(dev), free_bytes, total_bytes);
}

static vb_status proxy_stream_create(vb_device *dev, vb_stream *out)
{
    return inner_of(dev)->ops->stream_create(inner_of(dev), out);
}

static void proxy_stream_destroy(vb_device *dev, vb_stream stream)
{
    inner_of(dev)->ops->stream_destroy(inner_of(dev), stream);
}

static vb_status proxy_stream_synchronize(vb_device *dev, vb_stream stream)
{
    return inner_of(dev)->ops->stream_synchronize(inner_of(dev), stream);
}

static vb_status proxy_device_synchronize(vb_device *dev)
{
    return inner_of(dev)->ops->device_synchronize(inner_of(dev));
}

static vb_status proxy_event_create(vb_device *dev, vb_event *out)
{
    return inner_of(dev)->ops->event_create(inner_of(dev), out);
}

static void proxy_event_destroy(vb_device *dev, vb_event event)
{
    inner_of(dev)->ops->event_destroy(inner_of(dev), event);
}

static vb_status proxy_event_record(vb_device *dev, vb_event event, vb_stream stream)
{
    return inner_of(dev)->ops->event_record(inner_of(dev), event, stream);
}

static int proxy_event_query(vb_device *dev, vb_event event)
{
    return inner_of(dev)->ops->event_query(inner_of(dev), event);
}

static vb_status proxy_event_synchronize(vb_device *dev, vb_event event)
{
    return inner_of(dev)->ops->event_synchronize(inner_of(dev), event);
}

static vb_status proxy_event_elapsed_ms(vb_device *dev, vb_event start, vb_event end, double *out)
{
    return inner_of(dev)->ops->event_elapsed_ms(inner_of(dev), start, end, out);
}

static vb_status proxy_stream_wait_event(vb_device *dev, vb_stream stream, vb_event event)
{
    return inner_of(dev)->ops->stream_wait_event(inner_of(dev), stream, event);
}

static uint64_t proxy_vm_granularity(vb_device *dev)
{
    return inner_of(dev)->ops->vm_granularity(inner_of(dev));
}

static vb_status proxy_vm_reserve(vb_device *dev, uint64_t size, vb_addr *out)
{
    return inner_of(dev)->ops->vm_reserve(inner_of(dev), size, out);
}

static vb_status proxy_vm_free(vb_device *dev, vb_addr addr, uint64_t size)
{
    return inner_of(dev)->ops->vm_free(inner_of(dev), addr, size);
}

static vb_status proxy_vm_map(vb_device *dev, vb_addr addr, uint64_t size, vb_phys handle)
{
    return inner_of(dev)->ops->vm_map(inner_of(dev), addr, size, handle);
}

static vb_status proxy_vm_set_access(vb_device *dev, vb_addr addr, uint64_t size)
{
    return inner_of(dev)->ops->vm_set_access(inner_of(dev), addr, size);
}

static vb_status proxy_vm_unmap(vb_device *dev, vb_addr addr, uint64_t size)
{
    return inner_of(dev)->ops->vm_unmap(inner_of(dev), addr, size);
}

static vb_status proxy_pool_create(vb_device *dev, uint64_t release_threshold, vb_pool *out)
{
    return inner_of(dev)->ops->pool_create(inner_of(dev), release_threshold, out);
}

static void proxy_pool_destroy(vb_device *dev, vb_pool pool)
{
    inner_of(dev)->ops->pool_destroy(inner_of(dev), pool);
}


static vb_status proxy_pool_usage(vb_device *dev, vb_pool pool, uint64_t *reserved_bytes, uint64_t *used_bytes)
{
    return inner_of(dev)->ops->pool_usage(inner_of(dev), pool, reserved_bytes, used_bytes);
}

static vb_status proxy_pool_high(vb_device *dev, vb_pool pool, uint64_t *reserved_high, uint64_t *used_high)
{
    return inner_of(dev)->ops->pool_high(inner_of(dev), pool, reserved_high, used_high);
}

static vb_status proxy_pool_reset_high(vb_device *dev, vb_pool pool)
{
    return inner_of(dev)->ops->pool_reset_high(inner_of(dev), pool);
}

static vb_status proxy_host_alloc_pinned(vb_device *dev, uint64_t size, void **out)
{
    return inner_of(dev)->ops->host_alloc_pinned(inner_of(dev), size, out);
}

static void proxy_host_free_pinned(vb_device *dev, void *ptr)
{
    inner_of(dev)->ops->host_free_pinned(inner_of(dev), ptr);
}

static vb_status proxy_memcpy_async(vb_device *dev, void *host, vb_addr device_addr, uint64_t size,
                                    vb_copy_kind kind, vb_stream stream)
{
    return inner_of(dev)->ops->memcpy_async(inner_of(dev), host, device_addr, size, kind, stream);
}

static vb_status proxy_enqueue_busy(vb_device *dev, vb_stream stream, uint64_t nanoseconds)
{
    return inner_of(dev)->ops->enqueue_busy(inner_of(dev), stream, nanoseconds);
}

static vb_status proxy_gemm_f32(vb_device *dev, vb_stream stream, int transpose_a, int transpose_b, int m,
                                int n, int k, float alpha, vb_addr a, int lda, vb_addr b, int ldb, float beta,
                                vb_addr c, int ldc)
{
    return inner_of(dev)->ops->gemm_f32(inner_of(dev), stream, transpose_a, transpose_b, m, n, k, alpha, a, lda,
                                        b, ldb, beta, c, ldc);
}

static vb_status proxy_fill_random_f32(vb_device *dev, vb_stream stream, vb_addr addr, uint64_t count,
                                       uint64_t seed)
{
    return inner_of(dev)->ops->fill_random_f32(inner_of(dev), stream, addr, count, seed);
}

static vb_status proxy_relu_f32(vb_device *dev, vb_stream stream, vb_addr out, vb_addr in, uint64_t count)
{
    return inner_of(dev)->ops->relu_f32(inner_of(dev), stream, out, in, count);
}

static vb_status proxy_axpy_f32(vb_device *dev, vb_stream stream, float alpha, vb_addr x, vb_addr y,
                                uint64_t count)
{
    return inner_of(dev)->ops->axpy_f32(inner_of(dev), stream, alpha, x, y, count);
}

static vb_status proxy_fill_pattern(vb_device *dev, vb_stream stream, vb_addr addr, uint64_t size, uint64_t seed)
{
    return inner_of(dev)->ops->fill_pattern(inner_of(dev), stream, addr, size, seed);
}

static vb_status proxy_verify_pattern(vb_device *dev, vb_addr addr, uint64_t size, uint64_t seed,
                                      uint64_t *mismatched_bytes)
{
    return inner_of(dev)->ops->verify_pattern(inner_of(dev), addr, size, seed, mismatched_bytes);
}

static int proxy_peer_access(vb_device *dev, int peer)
{
    return inner_of(dev)->ops->peer_access(inner_of(dev), peer);
}

static const vb_device_ops proxy_ops = {
    .name = "counting-proxy",
    .close = proxy_close,
    .info = proxy_info,
    .mem_alloc = proxy_mem_alloc,
    .mem_free = proxy_mem_free,
    .mem_info = proxy_mem_info,
    .stream_create = proxy_stream_create,
    .stream_destroy = proxy_stream_destroy,
    .stream_synchronize = proxy_stream_synchronize,
    .device_synchronize = proxy_device_synchronize,
    .event_create = proxy_event_create,
    .event_destroy = proxy_event_destroy,
    .event_record = proxy_event_record,
    .event_query = proxy_event_query,
    .event_synchronize = proxy_event_synchronize,
    .event_elapsed_ms = proxy_event_elapsed_ms,
    .stream_wait_event = proxy_stream_wait_event,
    .vm_granularity = proxy_vm_granularity,
    .vm_reserve = proxy_vm_reserve,
    .vm_free = proxy_vm_free,
    .vm_create = proxy_vm_create,
    .vm_release = proxy_vm_release,
    .vm_map = proxy_vm_map,
    .vm_set_access = proxy_vm_set_access,
    .vm_unmap = proxy_vm_unmap,
    .pool_create = proxy_pool_create,
    .pool_destroy = proxy_pool_destroy,
    .pool_malloc = proxy_pool_malloc,
    .pool_free = proxy_pool_free,
    .pool_trim = proxy_pool_trim,
    .pool_usage = proxy_pool_usage,
    .pool_high = proxy_pool_high,
    .pool_reset_high = proxy_pool_reset_high,
    .host_alloc_pinned = proxy_host_alloc_pinned,
    .host_free_pinned = proxy_host_free_pinned,
    .memcpy_async = proxy_memcpy_async,
    .enqueue_busy = proxy_enqueue_busy,
    .gemm_f32 = proxy_gemm_f32,
    .fill_random_f32 = proxy_fill_random_f32,
    .relu_f32 = proxy_relu_f32,
    .axpy_f32 = proxy_axpy_f32,
    .fill_pattern = proxy_fill_pattern,
    .verify_pattern = proxy_verify_pattern,
    .peer_access = proxy_peer_access,
};

/* Wraps `inner`; counts start at zero and held bytes from what it holds now. */
void vb_counting_init(vb_counting_device *proxy, vb_device *inner)
{
    *proxy = (vb_counting_device){0};
    proxy->device.ops = &proxy_ops;
    proxy->device.state = proxy;
    proxy->inner = inner;
    proxy->baseline_used = vb_device_used_bytes(inner);
}
