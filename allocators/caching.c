/* vrambench — `caching`: PyTorch's CUDACachingAllocator with plain driver
 * segments (c10/cuda/CUDACachingAllocator.cpp, expandable_segments off).
 *
 * The policy (rounding, pools, best fit, split, coalescing, stream events,
 * retries, statistics) lives in caching_core.c, shared with `expandable`.
 * What is particular here is where segments come from: each is one driver
 * allocation (cudaMalloc) of the pool's segment size, released whole by
 * empty_cache, garbage collection or an out-of-memory retry only when no
 * block of it is in use (it is "unsplit"). */
#include <stddef.h>
#include <stdlib.h>

#include "caching_core.h"

/* ------------------------------------------------------------------------ */
/* Driver segments                                                            */
/* ------------------------------------------------------------------------ */

/* alloc_block's cudaMalloc: one segment of `alloc_size` bytes, one free
 * block covering it. */
static vb_status driver_alloc_block(vb_cc_allocator *cc, vb_cc_pool *pool, vb_stream stream, uint64_t size,
                                    uint64_t alloc_size, vb_cc_block **out)
{
    (void)size;
    vb_device *dev = cc->device;
    vb_addr addr = 0;
    vb_status status = dev->ops->mem_alloc(dev, alloc_size, &addr);
    if (status != VB_OK) return status;
    vb_cc_segment *segment = malloc(sizeof *segment);
    vb_cc_block *block = segment ? vb_cc_block_new(cc, addr, alloc_size, stream, pool, segment) : NULL;
    if (!block) {
        free(segment);
        dev->ops->mem_free(dev, addr);
        return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    }
    *segment = (vb_cc_segment){.base = addr, .size = alloc_size, .head = block, .pool = pool, .stream = stream};
    vb_cc_segment_add(cc, segment);
    vb_cc_pool_note_releasable(pool, alloc_size);
    *out = block;
    return VB_OK;
}

/* release_block: cudaFree of a free block that is a whole segment. A split
 * block is part of a segment still in use and stays. */
static void driver_release_block(vb_cc_allocator *cc, vb_cc_block *block)
{
    if (vb_cc_block_is_split(block)) return;
    vb_device *dev = cc->device;
    if (dev->ops->mem_free(dev, block->addr) != VB_OK) return;
    vb_cc_pool_erase(vb_cc_block_pool(cc, block), block);
    vb_cc_segment_remove(cc, block->segment);
    free(block->segment);
    vb_cc_block_recycle(cc, block);
}

/* release_blocks: every free, unsplit segment of the pool, any stream.
 * A block smaller than the smallest segment the pool made is no whole
 * one: the walk passes those over (vb_cc_pool_first_at_least). */
static void driver_release_pool(vb_cc_allocator *cc, vb_cc_pool *pool)
{
    vb_oset_node *node = vb_cc_pool_first_at_least(pool, vb_oset_first(&pool->blocks));
    while (node) {
        vb_oset_node *next = vb_cc_pool_first_at_least(pool, vb_oset_next(&pool->blocks, node));
        vb_cc_block *block = VB_OSET_ENTRY(node, vb_cc_block, class_node);
        if (!vb_cc_block_is_split(block)) driver_release_block(cc, block);
        node = next;
    }
}

/* At destroy: the segment's memory goes back whatever is in it. */
static void driver_destroy_segment(vb_cc_allocator *cc, vb_cc_segment *segment)
{
    cc->device->ops->mem_free(cc->device, segment->base);
    free(segment);
}

static const vb_cc_source driver_segments = {
    .expandable = 0,
    .alloc_block = driver_alloc_block,
    .release_pool = driver_release_pool,
    .release_block = driver_release_block,
    .destroy_segment = driver_destroy_segment,
};

/* ------------------------------------------------------------------------ */
/* Options and the ops table                                                  */
/* ------------------------------------------------------------------------ */

static const vb_option caching_options[] = {
    VB_CC_SHARED_OPTIONS,
    {"garbage_collection_threshold", VB_OPTION_DOUBLE, offsetof(vb_cc_settings, garbage_collection_threshold), 0,
     1, "fraction below 1 of the allowed memory above which old free segments are freed (needs "
        "memory_fraction); default 0 (off)"},
    {"memory_fraction", VB_OPTION_DOUBLE, offsetof(vb_cc_settings, memory_fraction), 0, 1,
     "fraction of the device's memory this allocator may reserve; default unset (all)"},
};

#define CACHING_OPTION_COUNT (sizeof caching_options / sizeof caching_options[0])

/* create: the shared caching core on driver_segments. */
static vb_status caching_create(vb_device *dev, const vb_config *config, void **state)
{
    return vb_cc_create(dev, config, caching_options, CACHING_OPTION_COUNT, &driver_segments, "caching", state);
}

const vb_allocator_ops vb_caching_allocator = {
    .name = "caching",
    .description = "PyTorch's CUDACachingAllocator: pools, best fit, split/coalesce, stream events",
    .options = caching_options,
    .option_count = CACHING_OPTION_COUNT,
    .create = caching_create,
    VB_CC_SHARED_OPS,
};
