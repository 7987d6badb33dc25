/* vrambench — `cuda`: the baseline. Every malloc is a driver allocation
 * (cudaMalloc) and every free a driver free (cudaFree, which waits for the
 * device), with no cache in between. Allocated is what the driver places
 * for a block (2 MiB pages over 2 MiB; 512 B multiples below, packed into
 * shared 2 MiB pages); reserved, counted at the seam, is what the driver
 * really uses for the live blocks (base/driver_pages.h): a 512-byte tensor
 * alone costs a 2 MiB page, but many share one. */
#include "allocator.h"

#include <stdlib.h>

#include "base/addr_map.h"
#include "base/driver_pages.h"

typedef struct cuda_state {
    vb_device *device;
    vb_addr_map requested;      /* address -> requested size */
} cuda_state;

/* What the driver places for `size` bytes (driver_pages.h). */
static uint64_t driver_size(uint64_t size)
{
    return vb_driver_block_bytes(size);
}

static vb_status cuda_create(vb_device *dev, const vb_config *config, void **state)
{
    vb_status status = vb_config_apply(config, NULL, 0, NULL, "cuda");
    if (status != VB_OK) return status;
    cuda_state *cuda = calloc(1, sizeof *cuda);
    if (!cuda) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    cuda->device = dev;
    *state = cuda;
    return VB_OK;
}

/* Frees one leftover allocation at destroy time. */
static void free_leftover(void *context, uint64_t addr, uint64_t size)
{
    cuda_state *cuda = context;
    (void)size;
    cuda->device->ops->mem_free(cuda->device, addr);
}

static void cuda_destroy(void *state)
{
    cuda_state *cuda = state;
    vb_addr_map_each_sorted(&cuda->requested, free_leftover, cuda); /* the same frees every run */
    vb_addr_map_clear(&cuda->requested);
    free(cuda);
}

static vb_status cuda_malloc(void *state, uint64_t size, vb_stream stream, vb_grant *out)
{
    cuda_state *cuda = state;
    (void)stream;
    uint64_t rounded = driver_size(size);
    if (rounded == 0)
        return vb_error(VB_ERR_OOM, "cuda: %llu bytes cannot be allocated", (unsigned long long)size);
    vb_addr addr = 0;
    vb_status status = cuda->device->ops->mem_alloc(cuda->device, size, &addr);
    if (status != VB_OK) return status;
    if (vb_addr_map_put(&cuda->requested, addr, size) != 0) {
        cuda->device->ops->mem_free(cuda->device, addr);
        return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    }
    *out = (vb_grant){.addr = addr, .size = rounded};
    return VB_OK;
}

static vb_status cuda_free(void *state, vb_addr addr, uint64_t tag)
{
    (void)tag; /* unused: its own bookkeeping knows the block */
    cuda_state *cuda = state;
    if (!vb_addr_map_get(&cuda->requested, addr, NULL))
        return vb_error(VB_ERR_INVALID, "cuda: free of 0x%llx, which is not allocated", (unsigned long long)addr);
    vb_status status = cuda->device->ops->mem_free(cuda->device, addr);
    if (status != VB_OK) return status;
    vb_addr_map_remove(&cuda->requested, addr, NULL);
    return VB_OK;
}

/* Nothing is cached, so there is nothing to return. */
static vb_status cuda_empty_cache(void *state)
{
    (void)state;
    return VB_OK;
}

/* cuda_segments' walk: where each segment goes. */
typedef struct segment_walk {
    vb_block_visitor visit;
    void *context;
} segment_walk;

/* Reports one allocation as its segment. */
static void visit_segment(void *context, uint64_t addr, uint64_t size)
{
    const segment_walk *walk = context;
    /* A packed block's segment is the shared page it lies in. */
    int small = vb_driver_is_small(size);
    vb_addr segment = small ? addr & ~(VB_DRIVER_PAGE - 1) : addr;
    vb_block_info block = {segment, small ? VB_DRIVER_PAGE : driver_size(size), addr, driver_size(size), 1, NULL};
    walk->visit(walk->context, &block);
}

/* Each large allocation is one segment holding one block; packed small
 * blocks share their page's segment. In address order. */
static void cuda_segments(void *state, vb_block_visitor visit, void *context)
{
    cuda_state *cuda = state;
    segment_walk walk = {visit, context};
    vb_addr_map_each_sorted(&cuda->requested, visit_segment, &walk);
}

const vb_allocator_ops vb_cuda_allocator = {
    .name = "cuda",
    .description = "cudaMalloc/cudaFree on every call, no cache (the baseline)",
    .create = cuda_create,
    .destroy = cuda_destroy,
    .malloc = cuda_malloc,
    .free = cuda_free,
    .record_stream = NULL, /* cudaFree waits for the device: nothing to track */
    .empty_cache = cuda_empty_cache,
    .largest_free_block = NULL, /* nothing is cached */
    .segments = cuda_segments,
};
