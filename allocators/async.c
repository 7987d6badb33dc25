/* vrambench — `async`: the CUDA stream-ordered allocator, as PyTorch's
 * cudaMallocAsync backend drives it (c10/cuda/CUDAMallocAsyncAllocator.cpp),
 * but on a pool of its own (cudaMemPoolCreate) rather than the device's
 * default pool, so that its figures are its own.
 *
 *  - malloc is pool_malloc (cudaMallocFromPoolAsync) on the caller's stream,
 *    free is pool_free (cudaFreeAsync) on the stream the block was allocated
 *    on: the pool itself makes the memory reusable on that stream at once
 *    and on other streams once the free has completed.
 *  - record_stream: a block used on other streams is freed, as PyTorch does,
 *    on a separate "unifying" stream that first waits (an event recorded on
 *    each stream) for the allocating stream and every recorded one. The
 *    free then waits for all of them without making the allocating stream
 *    wait for the others.
 *  - release_threshold (bytes kept across synchronizations, default
 *    UINT64_MAX as PyTorch sets it) is the pool's cudaMemPoolAttrReleaseThreshold.
 *  - empty_cache synchronizes the device and trims the pool to 0
 *    (cudaMemPoolTrimTo), as torch.cuda.empty_cache() does on this backend.
 *  - Out of memory is returned as is, with no trim and retry, as PyTorch's
 *    backend does.
 *  - memory_fraction (torch.cuda.set_per_process_memory_fraction): as
 *    PyTorch's mallocAsync, a request is refused when the bytes handed out
 *    (as asked, not rounded: pytorch_used_bytes) plus it pass fraction x
 *    the device's total; the seam's requested bytes are those bytes.
 *
 * Stats, all counted at the seam (allocator.h), none here: allocated = each
 * size rounded up to VB_POOL_ROUNDING (512 B, the pool's rounding on the
 * sim; CUDA does not document its own). reserved is the pool's reserved
 * bytes (cudaMemPoolAttrReservedMemCurrent) and its peak the pool's
 * high-water mark (...ReservedMemHigh), both read only when the stats are
 * read: no pool query on the malloc/free path. driver_alloc_calls counts
 * pool_malloc calls; driver_free_calls counts pool_free calls plus the trims
 * that released memory; releases the pool makes by itself at
 * synchronizations are not calls of ours and not counted. The pool does not
 * show its free ranges, so the largest free block is taken to be all of the
 * cached bytes and segments() is not provided.
 */
#include "allocator.h"

#include <stddef.h>
#include <stdlib.h>

#include "base/addr_map.h"
#include "stream_list.h"

typedef struct async_settings {
    uint64_t release_threshold;
    double memory_fraction; /* < 0: no limit */
} async_settings;

static const vb_option async_options[] = {
    {"release_threshold", VB_OPTION_U64, offsetof(async_settings, release_threshold), 0, 18446744073709551615.0,
     "bytes the pool keeps across synchronizations; default max (never release)"},
    {"memory_fraction", VB_OPTION_DOUBLE, offsetof(async_settings, memory_fraction), 0, 1,
     "PyTorch's set_per_process_memory_fraction: a request past fraction x the device's total of bytes handed "
     "out fails; default off"},
};

/* The other streams a live block was used on (record_stream). */
typedef struct async_recorded {
    vb_stream *streams;
    uint32_t count, capacity;
} async_recorded;

typedef struct async_state {
    vb_device *device;
    vb_pool pool;
    vb_addr_map recorded;     /* address -> async_recorded*, for blocks record_stream was called on */
    vb_stream unifying_stream; /* created on the first free of a block with recorded streams */
    vb_event unifying_event;
    int have_unifier;
    uint64_t limit; /* memory_fraction x the device's total; UINT64_MAX: none */
} async_state;

/* What the pool takes for `size` bytes. */
static uint64_t pool_size(uint64_t size)
{
    return vb_round_up(size, VB_POOL_ROUNDING);
}

/* The pool's reserved bytes now (UINT64_MAX when the pool cannot say). */
static uint64_t pool_reserved(async_state *async)
{
    uint64_t reserved = 0, used = 0;
    if (async->device->ops->pool_usage(async->device, async->pool, &reserved, &used) != VB_OK) return UINT64_MAX;
    return reserved;
}

/* Applies the config and creates the instance's own pool. */
static vb_status async_create(vb_device *dev, const vb_config *config, void **state)
{
    async_settings settings = {.release_threshold = UINT64_MAX, .memory_fraction = -1.0};
    vb_status status = vb_config_apply(config, async_options, sizeof async_options / sizeof async_options[0],
                                       &settings, "async");
    if (status != VB_OK) return status;
    uint64_t limit = UINT64_MAX;
    if (settings.memory_fraction >= 0) {
        uint64_t free_bytes = 0, total = 0;
        status = dev->ops->mem_info(dev, &free_bytes, &total);
        if (status != VB_OK) return status;
        limit = (uint64_t)(settings.memory_fraction * (double)total); /* as PyTorch: static_cast<uint64_t> */
    }
    async_state *async = calloc(1, sizeof *async);
    if (!async) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    async->device = dev;
    async->limit = limit;
    status = dev->ops->pool_create(dev, settings.release_threshold, &async->pool);
    if (status != VB_OK) {
        free(async);
        return status;
    }
    *state = async;
    return VB_OK;
}

/* The stream an address-map value holds. */
static vb_stream stream_of(uint64_t value)
{
    return (vb_stream)(uintptr_t)value;
}

/* Frees one leftover block on its stream (its tag) at destroy time. */
static void free_leftover(void *context, vb_addr addr, uint64_t tag)
{
    async_state *async = context;
    async->device->ops->pool_free(async->device, async->pool, addr, stream_of(tag));
}

/* Frees one record_stream list. */
static void free_recorded(void *context, uint64_t addr, uint64_t value)
{
    (void)context;
    (void)addr;
    async_recorded *recorded = (async_recorded *)(uintptr_t)value;
    free(recorded->streams);
    free(recorded);
}

/* Frees what is still live, waits for those frees, and gives the pool back. */
static void async_destroy(void *state)
{
    async_state *async = state;
    vb_device *dev = async->device;
    vb_seam_each_live(dev, free_leftover, async);
    vb_addr_map_each(&async->recorded, free_recorded, NULL);
    vb_addr_map_clear(&async->recorded);
    dev->ops->device_synchronize(dev);
    dev->ops->pool_destroy(dev, async->pool);
    if (async->have_unifier) {
        dev->ops->event_destroy(dev, async->unifying_event);
        dev->ops->stream_destroy(dev, async->unifying_stream);
    }
    free(async);
}

static vb_status async_empty_cache(void *state);

/* pool_malloc on `stream`; nothing else on the way unless it fails. */
static vb_status async_malloc(void *state, uint64_t size, vb_stream stream, vb_grant *out)
{
    async_state *async = state;
    vb_device *dev = async->device;
    if (async->limit != UINT64_MAX) {
        const vb_alloc_stats *counted = vb_seam_stats(dev); /* requested: the bytes handed out, as asked */
        uint64_t used = counted ? counted->requested_bytes : 0;
        if (size > async->limit || used > async->limit - size)
            return vb_error(VB_ERR_OOM, "async: memory_fraction allows %llu bytes, %llu are handed out",
                            (unsigned long long)async->limit, (unsigned long long)used);
    }
    vb_addr addr = 0;
    vb_status status = dev->ops->pool_malloc(dev, async->pool, size, stream, &addr);
    if (status == VB_ERR_OOM) {
        /* The contract's rule for a strategy with a cache: give the cache
         * back and try once more. PyTorch's async backend does not (it
         * reports the OOM at once); CUDA's pool only trims at a
         * synchronize, so without this the pool's free memory would strand. */
        uint64_t reserved_before = pool_reserved(async);
        vb_status trimmed = async_empty_cache(async);
        if (trimmed == VB_OK && pool_reserved(async) < reserved_before) {
            out->retried = 1;
            status = dev->ops->pool_malloc(dev, async->pool, size, stream, &addr);
        }
    }
    if (status != VB_OK) return status;
    /* The seam keeps the allocating stream with the block: no map here. */
    *out = (vb_grant){.addr = addr, .size = pool_size(size), .retried = out->retried, .tag = (uint64_t)(uintptr_t)stream};
    return VB_OK;
}

/* The stream a block allocated on `stream` and used on `recorded` is freed
 * on, made to wait for the allocating stream and each recorded one. */
static vb_status unify_streams(async_state *async, vb_stream stream, const async_recorded *recorded, vb_stream *out)
{
    vb_device *dev = async->device;
    vb_status status;
    if (!async->have_unifier) {
        status = dev->ops->stream_create(dev, &async->unifying_stream);
        if (status != VB_OK) return status;
        status = dev->ops->event_create(dev, &async->unifying_event);
        if (status != VB_OK) {
            dev->ops->stream_destroy(dev, async->unifying_stream);
            return status;
        }
        async->have_unifier = 1;
    }
    /* One event serves every wait: a wait takes the event's state at the time
     * it is queued, so recording it again afterwards does not change it. */
    for (size_t i = 0; i <= recorded->count; i++) {
        vb_stream user = i == 0 ? stream : recorded->streams[i - 1];
        status = dev->ops->event_record(dev, async->unifying_event, user);
        if (status == VB_OK)
            status = dev->ops->stream_wait_event(dev, async->unifying_stream, async->unifying_event);
        if (status != VB_OK) return status;
    }
    *out = async->unifying_stream;
    return VB_OK;
}

/* pool_free on the allocating stream (the block's tag), or on the unifying
 * stream when the block was recorded on others. The seam has refused an
 * unknown pointer already. */
static vb_status async_free(void *state, vb_addr addr, uint64_t tag)
{
    async_state *async = state;
    vb_stream free_stream = stream_of(tag);
    uint64_t recorded_value = 0;
    async_recorded *recorded = async->recorded.count && vb_addr_map_get(&async->recorded, addr, &recorded_value)
                                   ? (async_recorded *)(uintptr_t)recorded_value
                                   : NULL;
    vb_status status = recorded ? unify_streams(async, free_stream, recorded, &free_stream) : VB_OK;
    if (status != VB_OK) return status;
    status = async->device->ops->pool_free(async->device, async->pool, addr, free_stream);
    if (status != VB_OK) return status;
    if (recorded) {
        vb_addr_map_remove(&async->recorded, addr, NULL);
        free_recorded(NULL, addr, recorded_value);
    }
    return VB_OK;
}

/* Remembers that the block is used on `stream` too (once per stream). */
static vb_status async_record_stream(void *state, vb_addr addr, uint64_t tag, vb_stream stream)
{
    async_state *async = state;
    if (stream == stream_of(tag)) return VB_OK;
    int added = 0;
    uint64_t *slot = vb_addr_map_slot(&async->recorded, addr, &added);
    if (!slot) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    if (added) {
        async_recorded *recorded = calloc(1, sizeof *recorded);
        if (!recorded) {
            vb_addr_map_remove(&async->recorded, addr, NULL);
            return vb_error(VB_ERR_HOST_OOM, "out of host memory");
        }
        *slot = (uint64_t)(uintptr_t)recorded;
    }
    async_recorded *recorded = (async_recorded *)(uintptr_t)*slot;
    return vb_stream_list_add(&recorded->streams, &recorded->count, &recorded->capacity, stream);
}

/* Waits for every queued free, then releases every unused byte of the pool. */
static vb_status async_empty_cache(void *state)
{
    async_state *async = state;
    vb_device *dev = async->device;
    vb_status status = dev->ops->device_synchronize(dev);
    if (status != VB_OK) return status;
    return dev->ops->pool_trim(dev, async->pool, 0);
}

const vb_allocator_ops vb_async_allocator = {
    .name = "async",
    .description = "CUDA stream-ordered pool (cudaMallocFromPoolAsync/cudaFreeAsync), empty_cache = trim",
    .options = async_options,
    .option_count = sizeof async_options / sizeof async_options[0],
    .create = async_create,
    .destroy = async_destroy,
    .malloc = async_malloc,
    .free = async_free,
    .record_stream = async_record_stream,
    .empty_cache = async_empty_cache,
    .largest_free_block = NULL, /* the pool does not show its free ranges; cached bytes are
                                 * reserved - allocated: the pool's own "used" counts requested
                                 * bytes on a real GPU, not the 512-byte granules (seen on an H200) */
    .segments = NULL, /* the pool does not show its blocks */
};
