/* vrambench — `expandable`: PyTorch's caching allocator with
 * expandable_segments:True (c10/cuda/CUDACachingAllocator.cpp, struct
 * ExpandableSegment and the *_expandable_* / map_block / unmap_block
 * functions).
 *
 * Instead of one driver allocation per segment, each (stream, pool) gets one
 * reserved virtual range of about 1.125 x the device's memory, and physical
 * chunks (2 MiB for the small pool, 20 MiB for the large) are created and
 * mapped into it as the pool grows, at the lowest address where the request
 * fits, normally right after the mapped part. The segment grows instead of
 * new segments piling up, so free space at the end of one allocation's
 * segment is reused by the next. Free blocks split and coalesce inside the
 * range with the shared policy (caching_core.c); empty_cache unmaps and
 * releases the chunks that are wholly free, and gives a range back when
 * nothing of it is mapped any more.
 *
 * The ranges, their handles and the growing and shrinking above are
 * vm_range.c's, which `stitch` shares; this file is the segment source
 * that uses them PyTorch's way (VB_VM_CHUNKS) and the strategy's options.
 *
 * Statistics (counted at the seam, allocator.h): reserved = the physical
 * chunks created (each is mapped from the moment vm_range.c's map_chunks
 * succeeds until
 * it is unmapped and released); driver_alloc_calls counts vm_create
 * (cuMemCreate) calls and driver_free_calls vm_release (cuMemRelease) calls.
 */
#include <stddef.h>

#include "caching_core.h"
#include "vm_range.h"

/* try_allocate_expandable_block: alloc_block of this source. */
static vb_status expandable_alloc_block(vb_cc_allocator *cc, vb_cc_pool *pool, vb_stream stream, uint64_t size,
                                        uint64_t alloc_size, vb_cc_block **out)
{
    (void)alloc_size;
    return vb_vm_range_alloc_block(cc, pool, stream, size, VB_VM_CHUNKS, out, NULL);
}

static const vb_cc_source expandable_segments = {
    .expandable = 1,
    .alloc_block = expandable_alloc_block,
    .release_pool = vb_vm_range_release_pool,
    .release_block = NULL, /* no block is ever a whole range: nothing to free one by one */
    .destroy_segment = vb_vm_range_destroy,
};

/* ------------------------------------------------------------------------ */
/* Options and the ops table                                                  */
/* ------------------------------------------------------------------------ */

/* The same options as `caching` (PyTorch accepts them all together with
 * expandable_segments:True): max_split_size_mb still keeps oversize blocks
 * for oversize requests; garbage collection and the oversize-block release
 * find no whole segment to free in a range, as in PyTorch. */
static const vb_option expandable_options[] = {
    VB_CC_SHARED_OPTIONS,
    {"garbage_collection_threshold", VB_OPTION_DOUBLE, offsetof(vb_cc_settings, garbage_collection_threshold), 0,
     1, "fraction below 1 of the allowed memory (needs memory_fraction); accepted, frees nothing in a range; "
        "default 0 (off)"},
    {"memory_fraction", VB_OPTION_DOUBLE, offsetof(vb_cc_settings, memory_fraction), 0, 1,
     "fraction of the device's memory this allocator may map; default unset (all)"},
};

#define EXPANDABLE_OPTION_COUNT (sizeof expandable_options / sizeof expandable_options[0])

/* create: the shared caching core on expandable_segments. */
static vb_status expandable_create(vb_device *dev, const vb_config *config, void **state)
{
    return vb_cc_create(dev, config, expandable_options, EXPANDABLE_OPTION_COUNT, &expandable_segments, "expandable",
                        state);
}

const vb_allocator_ops vb_expandable_allocator = {
    .name = "expandable",
    .description = "PyTorch expandable segments: one growing virtual range per stream, 2/20 MiB chunks mapped",
    .options = expandable_options,
    .option_count = EXPANDABLE_OPTION_COUNT,
    .create = expandable_create,
    VB_CC_SHARED_OPS,
};
