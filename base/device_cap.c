/* vrambench — a capped device: a device of `cap_bytes`, on top of another.
 *
 * A scenario that asks what happens under a memory limit (capped_training)
 * must see the same limit on every GPU and on sim. A ballast allocation sized
 * from the free memory does not give that: the driver's own use and the
 * context differ between GPUs. Like PyTorch's set_per_process_memory_fraction,
 * the cap counts this process's allocations through the capped device, not
 * what the GPU has free:
 *   - mem_alloc counts its size rounded up to the driver page (2 MiB; a
 *     small cudaMalloc is packed with others into a shared page by the
 *     driver, which the cap does not model: the caps it serves allocate
 *     segments of pages);
 *   - vm_create counts its size (granularity multiples);
 *   - a stream-ordered pool counts what it holds from the device (pool_usage
 *     reserved) after each pool_malloc: a malloc that took it past the cap is
 *     freed again, the pool trimmed back to what it held before, and the
 *     malloc is VB_ERR_OOM.
 * mem_info reports the cap as the total and the cap less the counted bytes as
 * free (less when the device under it has less). Everything else is the
 * device under it, unchanged. */
#include "device.h"

#include <stdlib.h>

#include "addr_map.h"

typedef struct cap_state {
    vb_device *inner;
    uint64_t cap;
    uint64_t counted;       /* mem_alloc and vm_create bytes live */
    vb_addr_map sizes;      /* mem_alloc address or vm handle -> counted bytes */
    vb_pool *pools;         /* pools created through this device */
    size_t pool_count, pool_capacity;
    int owns_inner;         /* 1: closing this device closes `inner` (vb_device_open's cap) */
} cap_state;

static const vb_device_ops cap_ops;

/* The capped device's state. */
static cap_state *cap_of(vb_device *dev)
{
    return dev->state;
}

/* The device under the cap. */
static vb_device *inner_of(vb_device *dev)
{
    return cap_of(dev)->inner;
}

/* Bytes the pools created here hold from the device. */
static uint64_t pools_reserved(vb_device *dev)
{
    cap_state *cap = cap_of(dev);
    uint64_t total = 0;
    for (size_t i = 0; i < cap->pool_count; i++) {
        uint64_t reserved = 0, used = 0;
        if (cap->inner->ops->pool_usage(cap->inner, cap->pools[i], &reserved, &used) == VB_OK) total += reserved;
    }
    return total;
}

/* VB_OK when `more` bytes fit under the cap with what is counted now. */
static vb_status fits(vb_device *dev, uint64_t more, const char *what)
{
    cap_state *cap = cap_of(dev);
    uint64_t used = cap->counted + pools_reserved(dev);
    if (used > cap->cap || more > cap->cap - used)
        return vb_error(VB_ERR_OOM, "%s of %llu bytes: over the device cap (%llu of %llu bytes in use)", what,
                        (unsigned long long)more, (unsigned long long)used, (unsigned long long)cap->cap);
    return VB_OK;
}

/* Counts `bytes` for `key` (an address or a handle). */
static vb_status count(vb_device *dev, uint64_t key, uint64_t bytes)
{
    cap_state *cap = cap_of(dev);
    if (vb_addr_map_put(&cap->sizes, key, bytes) != 0) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    cap->counted += bytes;
    return VB_OK;
}

/* Stops counting `key`. */
static void uncount(vb_device *dev, uint64_t key)
{
    cap_state *cap = cap_of(dev);
    uint64_t bytes = 0;
    if (vb_addr_map_remove(&cap->sizes, key, &bytes)) cap->counted -= bytes;
}

/* Closes the capped device; the device under it stays open. */
static void cap_close(vb_device *dev)
{
    cap_state *cap = cap_of(dev);
    if (cap->owns_inner) vb_device_close(cap->inner);
    vb_addr_map_clear(&cap->sizes);
    free(cap->pools);
    free(cap);
    free(dev);
}

/* The device under it, with the cap as its total. */
static void cap_info(vb_device *dev, vb_device_info *out)
{
    inner_of(dev)->ops->info(inner_of(dev), out);
    out->total_bytes = cap_of(dev)->cap;
}

/* cudaMalloc, refused past the cap. */
static vb_status cap_mem_alloc(vb_device *dev, uint64_t size, vb_addr *out)
{
    uint64_t bytes = (size + VB_DRIVER_PAGE - 1) / VB_DRIVER_PAGE * VB_DRIVER_PAGE;
    VB_TRY(fits(dev, bytes, "cudaMalloc"));
    VB_TRY(inner_of(dev)->ops->mem_alloc(inner_of(dev), size, out));
    vb_status status = count(dev, *out, bytes);
    if (status != VB_OK) inner_of(dev)->ops->mem_free(inner_of(dev), *out);
    return status;
}

/* cudaFree. */
static vb_status cap_mem_free(vb_device *dev, vb_addr addr)
{
    VB_TRY(inner_of(dev)->ops->mem_free(inner_of(dev), addr));
    uncount(dev, addr);
    return VB_OK;
}

/* The cap as total; free is what is left under it (or the device's free, if less). */
static vb_status cap_mem_info(vb_device *dev, uint64_t *free_bytes, uint64_t *total_bytes)
{
    uint64_t inner_free = 0, inner_total = 0;
    VB_TRY(inner_of(dev)->ops->mem_info(inner_of(dev), &inner_free, &inner_total));
    cap_state *cap = cap_of(dev);
    uint64_t used = cap->counted + pools_reserved(dev);
    uint64_t left = used < cap->cap ? cap->cap - used : 0;
    *free_bytes = left < inner_free ? left : inner_free;
    *total_bytes = cap->cap;
    return VB_OK;
}

/* Forwarded. */
static vb_status cap_stream_create(vb_device *dev, vb_stream *out)
{
    return inner_of(dev)->ops->stream_create(inner_of(dev), out);
}

/* Forwarded. */
static void cap_stream_destroy(vb_device *dev, vb_stream stream)
{
    inner_of(dev)->ops->stream_destroy(inner_of(dev), stream);
}

/* Forwarded. */
static vb_status cap_stream_synchronize(vb_device *dev, vb_stream stream)
{
    return inner_of(dev)->ops->stream_synchronize(inner_of(dev), stream);
}

/* Forwarded. */
static vb_status cap_device_synchronize(vb_device *dev)
{
    return inner_of(dev)->ops->device_synchronize(inner_of(dev));
}

/* Forwarded. */
static vb_status cap_event_create(vb_device *dev, vb_event *out)
{
    return inner_of(dev)->ops->event_create(inner_of(dev), out);
}

/* Forwarded. */
static void cap_event_destroy(vb_device *dev, vb_event event)
{
    inner_of(dev)->ops->event_destroy(inner_of(dev), event);
}

/* Forwarded. */
static vb_status cap_event_record(vb_device *dev, vb_event event, vb_stream stream)
{
    return inner_of(dev)->ops->event_record(inner_of(dev), event, stream);
}

/* Forwarded. */
static int cap_event_query(vb_device *dev, vb_event event)
{
    return inner_of(dev)->ops->event_query(inner_of(dev), event);
}

/* Forwarded. */
static vb_status cap_event_synchronize(vb_device *dev, vb_event event)
{
    return inner_of(dev)->ops->event_synchronize(inner_of(dev), event);
}

/* Forwarded. */
static vb_status cap_event_elapsed_ms(vb_device *dev, vb_event start, vb_event end, double *out)
{
    return inner_of(dev)->ops->event_elapsed_ms(inner_of(dev), start, end, out);
}

/* Forwarded. */
static vb_status cap_stream_wait_event(vb_device *dev, vb_stream stream, vb_event event)
{
    return inner_of(dev)->ops->stream_wait_event(inner_of(dev), stream, event);
}

/* Forwarded. */
static uint64_t cap_vm_granularity(vb_device *dev)
{
    return inner_of(dev)->ops->vm_granularity(inner_of(dev));
}

/* Forwarded: address space is not memory. */
static vb_status cap_vm_reserve(vb_device *dev, uint64_t size, vb_addr *out)
{
    return inner_of(dev)->ops->vm_reserve(inner_of(dev), size, out);
}

/* Forwarded. */
static vb_status cap_vm_free(vb_device *dev, vb_addr addr, uint64_t size)
{
    return inner_of(dev)->ops->vm_free(inner_of(dev), addr, size);
}

/* cuMemCreate, refused past the cap. */
static vb_status cap_vm_create(vb_device *dev, uint64_t size, vb_phys *out)
{
    VB_TRY(fits(dev, size, "cuMemCreate"));
    VB_TRY(inner_of(dev)->ops->vm_create(inner_of(dev), size, out));
    vb_status status = count(dev, *out, size);
    if (status != VB_OK) inner_of(dev)->ops->vm_release(inner_of(dev), *out);
    return status;
}

/* cuMemRelease. */
static vb_status cap_vm_release(vb_device *dev, vb_phys handle)
{
    VB_TRY(inner_of(dev)->ops->vm_release(inner_of(dev), handle));
    uncount(dev, handle);
    return VB_OK;
}

/* Forwarded. */
static vb_status cap_vm_map(vb_device *dev, vb_addr addr, uint64_t size, vb_phys handle)
{
    return inner_of(dev)->ops->vm_map(inner_of(dev), addr, size, handle);
}

/* Forwarded. */
static vb_status cap_vm_set_access(vb_device *dev, vb_addr addr, uint64_t size)
{
    return inner_of(dev)->ops->vm_set_access(inner_of(dev), addr, size);
}

/* Forwarded. */
static vb_status cap_vm_unmap(vb_device *dev, vb_addr addr, uint64_t size)
{
    return inner_of(dev)->ops->vm_unmap(inner_of(dev), addr, size);
}

/* A pool of the device under it, remembered so its reservation counts. */
static vb_status cap_pool_create(vb_device *dev, uint64_t release_threshold, vb_pool *out)
{
    cap_state *cap = cap_of(dev);
    if (cap->pool_count == cap->pool_capacity) {
        size_t capacity = cap->pool_capacity ? 2 * cap->pool_capacity : 4;
        vb_pool *pools = realloc(cap->pools, capacity * sizeof *pools);
        if (!pools) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
        cap->pools = pools;
        cap->pool_capacity = capacity;
    }
    VB_TRY(cap->inner->ops->pool_create(cap->inner, release_threshold, out));
    cap->pools[cap->pool_count++] = *out;
    return VB_OK;
}

/* Forgets the pool and destroys it. */
static void cap_pool_destroy(vb_device *dev, vb_pool pool)
{
    cap_state *cap = cap_of(dev);
    for (size_t i = 0; i < cap->pool_count; i++)
        if (cap->pools[i] == pool) cap->pools[i] = cap->pools[--cap->pool_count];
    cap->inner->ops->pool_destroy(cap->inner, pool);
}

/* cudaMallocFromPoolAsync, undone (free, trim back) when the pool's growth
 * took the process past the cap. */
static vb_status cap_pool_malloc(vb_device *dev, vb_pool pool, uint64_t size, vb_stream stream, vb_addr *out)
{
    vb_device *inner = inner_of(dev);
    uint64_t reserved_before = 0, used = 0;
    VB_TRY(inner->ops->pool_usage(inner, pool, &reserved_before, &used));
    VB_TRY(inner->ops->pool_malloc(inner, pool, size, stream, out));
    cap_state *cap = cap_of(dev);
    uint64_t in_use = cap->counted + pools_reserved(dev);
    if (in_use <= cap->cap) return VB_OK;
    vb_status status = inner->ops->pool_free(inner, pool, *out, stream);
    if (status == VB_OK) status = inner->ops->stream_synchronize(inner, stream);
    if (status == VB_OK) status = inner->ops->pool_trim(inner, pool, reserved_before);
    *out = 0;
    if (status != VB_OK) return status;
    return vb_error(VB_ERR_OOM, "cudaMallocAsync of %llu bytes: over the device cap (%llu of %llu bytes)",
                    (unsigned long long)size, (unsigned long long)in_use, (unsigned long long)cap->cap);
}

/* Forwarded. */
static vb_status cap_pool_free(vb_device *dev, vb_pool pool, vb_addr addr, vb_stream stream)
{
    return inner_of(dev)->ops->pool_free(inner_of(dev), pool, addr, stream);
}

/* Forwarded. */
static vb_status cap_pool_trim(vb_device *dev, vb_pool pool, uint64_t keep_bytes)
{
    return inner_of(dev)->ops->pool_trim(inner_of(dev), pool, keep_bytes);
}

/* Forwarded. */
static vb_status cap_pool_usage(vb_device *dev, vb_pool pool, uint64_t *reserved_bytes, uint64_t *used_bytes)
{
    return inner_of(dev)->ops->pool_usage(inner_of(dev), pool, reserved_bytes, used_bytes);
}

/* Forwarded. */
static vb_status cap_pool_high(vb_device *dev, vb_pool pool, uint64_t *reserved_high, uint64_t *used_high)
{
    return inner_of(dev)->ops->pool_high(inner_of(dev), pool, reserved_high, used_high);
}

/* Forwarded. */
static vb_status cap_pool_reset_high(vb_device *dev, vb_pool pool)
{
    return inner_of(dev)->ops->pool_reset_high(inner_of(dev), pool);
}

/* Forwarded: host memory is not capped. */
static vb_status cap_host_alloc_pinned(vb_device *dev, uint64_t size, void **out)
{
    return inner_of(dev)->ops->host_alloc_pinned(inner_of(dev), size, out);
}

/* Forwarded. */
static void cap_host_free_pinned(vb_device *dev, void *ptr)
{
    inner_of(dev)->ops->host_free_pinned(inner_of(dev), ptr);
}

/* Forwarded. */
static vb_status cap_memcpy_async(vb_device *dev, void *host, vb_addr device_addr, uint64_t size, vb_copy_kind kind,
                                  vb_stream stream)
{
    return inner_of(dev)->ops->memcpy_async(inner_of(dev), host, device_addr, size, kind, stream);
}

/* Forwarded. */
static vb_status cap_enqueue_busy(vb_device *dev, vb_stream stream, uint64_t nanoseconds)
{
    return inner_of(dev)->ops->enqueue_busy(inner_of(dev), stream, nanoseconds);
}

/* Forwarded. */
static vb_status cap_gemm_f32(vb_device *dev, vb_stream stream, int transpose_a, int transpose_b, int m, int n, int k,
                              float alpha, vb_addr a, int lda, vb_addr b, int ldb, float beta, vb_addr c, int ldc)
{
    return inner_of(dev)->ops->gemm_f32(inner_of(dev), stream, transpose_a, transpose_b, m, n, k, alpha, a, lda, b,
                                        ldb, beta, c, ldc);
}

/* Forwarded. */
static vb_status cap_fill_random_f32(vb_device *dev, vb_stream stream, vb_addr addr, uint64_t count, uint64_t seed)
{
    return inner_of(dev)->ops->fill_random_f32(inner_of(dev), stream, addr, count, seed);
}

/* Forwarded. */
static vb_status cap_relu_f32(vb_device *dev, vb_stream stream, vb_addr out, vb_addr in, uint64_t count)
{
    return inner_of(dev)->ops->relu_f32(inner_of(dev), stream, out, in, count);
}

/* Forwarded. */
static vb_status cap_axpy_f32(vb_device *dev, vb_stream stream, float alpha, vb_addr x, vb_addr y, uint64_t count)
{
    return inner_of(dev)->ops->axpy_f32(inner_of(dev), stream, alpha, x, y, count);
}

/* Forwarded. */
static vb_status cap_fill_pattern(vb_device *dev, vb_stream stream, vb_addr addr, uint64_t size, uint64_t seed)
{
    return inner_of(dev)->ops->fill_pattern(inner_of(dev), stream, addr, size, seed);
}

/* Forwarded. */
static vb_status cap_verify_pattern(vb_device *dev, vb_addr addr, uint64_t size, uint64_t seed,
                                    uint64_t *mismatched_bytes)
{
    return inner_of(dev)->ops->verify_pattern(inner_of(dev), addr, size, seed, mismatched_bytes);
}

/* The device under it's peers: a cap limits memory, not who may use it. */
static int cap_peer_access(vb_device *dev, int peer)
{
    return inner_of(dev)->ops->peer_access(inner_of(dev), peer);
}

static const vb_device_ops cap_ops = {
    .name = "capped",
    .close = cap_close,
    .info = cap_info,
    .mem_alloc = cap_mem_alloc,
    .mem_free = cap_mem_free,
    .mem_info = cap_mem_info,
    .stream_create = cap_stream_create,
    .stream_destroy = cap_stream_destroy,
    .stream_synchronize = cap_stream_synchronize,
    .device_synchronize = cap_device_synchronize,
    .event_create = cap_event_create,
    .event_destroy = cap_event_destroy,
    .event_record = cap_event_record,
    .event_query = cap_event_query,
    .event_synchronize = cap_event_synchronize,
    .event_elapsed_ms = cap_event_elapsed_ms,
    .stream_wait_event = cap_stream_wait_event,
    .vm_granularity = cap_vm_granularity,
    .vm_reserve = cap_vm_reserve,
    .vm_free = cap_vm_free,
    .vm_create = cap_vm_create,
    .vm_release = cap_vm_release,
    .vm_map = cap_vm_map,
    .vm_set_access = cap_vm_set_access,
    .vm_unmap = cap_vm_unmap,
    .pool_create = cap_pool_create,
    .pool_destroy = cap_pool_destroy,
    .pool_malloc = cap_pool_malloc,
    .pool_free = cap_pool_free,
    .pool_trim = cap_pool_trim,
    .pool_usage = cap_pool_usage,
    .pool_high = cap_pool_high,
    .pool_reset_high = cap_pool_reset_high,
    .host_alloc_pinned = cap_host_alloc_pinned,
    .host_free_pinned = cap_host_free_pinned,
    .memcpy_async = cap_memcpy_async,
    .enqueue_busy = cap_enqueue_busy,
    .gemm_f32 = cap_gemm_f32,
    .fill_random_f32 = cap_fill_random_f32,
    .relu_f32 = cap_relu_f32,
    .axpy_f32 = cap_axpy_f32,
    .fill_pattern = cap_fill_pattern,
    .verify_pattern = cap_verify_pattern,
    .peer_access = cap_peer_access,
};

vb_status vb_device_cap_open(vb_device *inner, uint64_t cap_bytes, vb_device **out)
{
    vb_device *dev = calloc(1, sizeof *dev);
    cap_state *cap = calloc(1, sizeof *cap);
    if (!dev || !cap) {
        free(dev);
        free(cap);
        return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    }
    cap->inner = inner;
    cap->cap = cap_bytes;
    dev->ops = &cap_ops;
    dev->state = cap;
    *out = dev;
    return VB_OK;
}

vb_status vb_device_cap_wrap(vb_device *inner, uint64_t cap_bytes, vb_device **out)
{
    vb_status status = vb_device_cap_open(inner, cap_bytes, out);
    if (status != VB_OK) return status;
    cap_of(*out)->owns_inner = 1;
    return VB_OK;
}

vb_device *vb_device_uncapped(vb_device *dev)
{
    while (dev && dev->ops == &cap_ops) dev = inner_of(dev);
    return dev;
}
