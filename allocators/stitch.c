/* vrambench — `stitch`: expandable segments that stitch, our own strategy
 * in the manner of GMLake (Guo et al., "GMLake: Efficient and Transparent
 * GPU Memory Defragmentation for Large-scale DNN Training with Virtual
 * Memory Stitching", ASPLOS'24) built on PyTorch's expandable segments.
 *
 * The policy is caching_core.c's, on expandable.c's ranges: per (stream,
 * pool) one large reserved virtual range; blocks rounded to 512 B, best fit,
 * split and coalesced inside its mapped memory (no rounding of blocks to
 * chunks); new memory mapped at the range's end in physical chunks (2 MiB
 * for the small pool, chunk_mb for the large one). So the driver's work is
 * expandable's: a create, a map and an access call per new chunk, and none
 * at all while the cache serves.
 *
 * The stitching (vb_cc_stitching_segments, expandable.c) removes what
 * expandable strands: when a request needs new physical memory, the chunks
 * that lie wholly inside free blocks between live blocks ("holes", of any
 * stream's range of the pool) are unmapped there and mapped where the
 * request goes, and chunks are created only when no hole has one. Memory is
 * therefore stranded only in pieces smaller than a chunk (or not aligned to
 * one), not in whole chunks. GMLake instead maps a physical block into
 * several stitched ranges at once; here a chunk has one mapping at a time
 * and is moved (unmap, map, set access), which keeps expandable's
 * bookkeeping as it is.
 *
 * chunk_mb is the trade-off: larger chunks mean fewer creates, maps and
 * access calls (each cuMemSetAccess costs per chunk it covers), smaller ones
 * more reclaimable holes and less rounding at the range's end, i.e. less
 * memory. tools/stitch_tradeoff.py measures the curve on sim and
 * plots/stitch_tradeoff.py draws it; README "stitch" gives the default's
 * reasons.
 *
 * Statistics as expandable's (counted at the seam, allocator.h): reserved =
 * the physical chunks held (a chunk moved from a hole stays counted).
 */
#include <stddef.h>

#include "caching_core.h"

/* Default large-pool chunk in MiB (see README "stitch: memory against driver calls"). */
#define STITCH_DEFAULT_CHUNK_MB 20

/* The options of `caching`/`expandable` that apply (PyTorch's, read the
 * same way) and the chunk size. */
static const vb_option stitch_options[] = {
    VB_CC_SHARED_OPTIONS,
    {"memory_fraction", VB_OPTION_DOUBLE, offsetof(vb_cc_settings, memory_fraction), 0, 1,
     "fraction of the device's memory this allocator may map; default unset (all)"},
    {"chunk_mb", VB_OPTION_U64, offsetof(vb_cc_settings, chunk_mb), 2, 1024,
     "large-pool physical chunk in MiB, a multiple of the device's mapping granularity (2 MiB): larger = "
     "fewer driver calls, smaller = more holes reclaimable (less memory); default 20"},
};

#define STITCH_OPTION_COUNT (sizeof stitch_options / sizeof stitch_options[0])

/* create: the shared caching core on the stitching source, chunk_mb
 * defaulting to STITCH_DEFAULT_CHUNK_MB. */
static vb_status stitch_create(vb_device *dev, const vb_config *config, void **state)
{
    vb_cc_settings settings;
    vb_cc_default_settings(&settings);
    settings.chunk_mb = STITCH_DEFAULT_CHUNK_MB;
    return vb_cc_create_with(dev, config, stitch_options, STITCH_OPTION_COUNT, &vb_cc_stitching_segments,
                             "stitch", &settings, state);
}

const vb_allocator_ops vb_stitch_allocator = {
    .name = "stitch",
    .description = "expandable segments that stitch: one growing range per stream, and before new chunks are "
                   "made, whole chunks in free holes between live blocks are moved to where they are needed",
    .options = stitch_options,
    .option_count = STITCH_OPTION_COUNT,
    .create = stitch_create,
    VB_CC_SHARED_OPS,
};
