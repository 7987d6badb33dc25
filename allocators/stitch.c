/* vrambench — `stitch`: expandable segments that stitch, our own strategy
 * in the manner of GMLake (Guo et al., "GMLake: Efficient and Transparent
 * GPU Memory Defragmentation for Large-scale DNN Training with Virtual
 * Memory Stitching", ASPLOS'24) built on PyTorch's expandable segments.
 *
 * The policy is caching_core.c's, on expandable.c's ranges: per (stream,
 * pool) one large reserved virtual range; blocks rounded to 512 B, best fit,
 * split and coalesced inside its mapped memory; new memory mapped at the
 * range's end. Unlike expandable, whose physical chunks all have one size
 * (2 MiB small pool, 20 MiB large), a growth maps ONE physical handle sized
 * to what the request lacks (rounded to the 2 MiB granularity), at least
 * chunk_mb (large pool) and at most handle_max_mb (several handles past
 * that). The driver's cost is per handle (cuMemCreate ~16 us,
 * cuMemSetAccess ~37 us and cuMemUnmap ~23 us per mapping whatever its
 * size; results/probe-driver-nvidia-h100-20261122.txt, and from 2 MiB to
 * 1 GiB results/stitch-nvidia-h100-80gb-hbm3-20261123/probe-driver-20261123.txt),
 * so a 70 MiB activation costs one create, map and access instead of four
 * chunks' worth.
 *
 * Two ways to use the free memory stranded between live blocks ("holes"),
 * both in expandable.c:
 *   moves (always): when a request needs new physical memory, the handles
 *     lying wholly inside holes of any stream's range of the same pool are
 *     unmapped there and mapped where the request goes; a handle is
 *     created only for the rest. A handle taken that does not fit stays
 *     held as a spare (counted as reserved) for the next growth.
 *   stitched ranges (stitch_max_maps > 0; off by default): before that, a
 *     request no free block serves is served, when the holes together hold
 *     it, by mapping the handles they hold again, whole, side by side into
 *     addresses of the allocator's own arena, without unmapping them where
 *     they are: GMLake's stitched blocks. Only the bytes used are lent; a
 *     freed stitched block gives them back at once and stays mapped, and a
 *     later request of its size takes it again with no driver call while
 *     its bytes are free. A small-pool growth takes 2 MiB of a large-pool
 *     hole so. cuMemMap maps only whole handles (an offset or a smaller
 *     size fails with CUDA_ERROR_NOT_SUPPORTED on the H100:
 *     results/stitch-ranges-nvidia-h100-80gb-hbm3-20261123/probe-driver.txt),
 *     so a stitched range can use a hole only from where a handle starts:
 *     with 8-64 MiB handles few holes qualify, with 2-4 MiB ones most do,
 *     at a create, map and access call per 2-4 MiB on the first pass.
 *
 * chunk_mb, handle_max_mb and stitch_max_maps are the trade-off: larger
 * handles mean fewer creates, maps and access calls, smaller ones more
 * holes that moves and stitched ranges can use (a handle with one live
 * byte cannot move, and a stitched range maps a handle only from its
 * start). lab/probes/stitch_tradeoff.py measures the curve on sim and
 * lab/probes/stitch_tradeoff_plot.py draws it; README "stitch" gives the default's
 * reasons and the H100's figures.
 *
 * Statistics as expandable's (counted at the seam, allocator.h): reserved =
 * the physical handles held, mapped or spare (a handle mapped twice is
 * counted once).
 */
#include <stddef.h>

#include "caching_core.h"

/* Default large-pool growth step and largest handle in MiB (see README
 * "stitch: memory against driver calls"). */
#define STITCH_DEFAULT_CHUNK_MB 8
#define STITCH_DEFAULT_HANDLE_MAX_MB 64
#define STITCH_DEFAULT_MAX_MAPS 0

/* The options of `caching`/`expandable` that apply (PyTorch's, read the
 * same way) and the chunk size. */
static const vb_option stitch_options[] = {
    VB_CC_SHARED_OPTIONS,
    {"memory_fraction", VB_OPTION_DOUBLE, offsetof(vb_cc_settings, memory_fraction), 0, 1,
     "fraction of the device's memory this allocator may map; default unset (all)"},
    {"chunk_mb", VB_OPTION_U64, offsetof(vb_cc_settings, chunk_mb), 2, 1024,
     "large-pool growth step in MiB, a multiple of the device's mapping granularity (2 MiB): the smallest "
     "physical handle a large request's growth creates; larger = fewer driver calls, smaller = less memory "
     "at the range's end and in holes; default 8"},
    {"handle_max_mb", VB_OPTION_U64, offsetof(vb_cc_settings, handle_max_mb), 0, 1048576,
     "largest physical handle in MiB (a growth past it creates several); smaller = more holes hold a whole "
     "handle (less memory), more driver calls; 0: no limit; default 64"},
    {"stitch_max_maps", VB_OPTION_U64, offsetof(vb_cc_settings, stitch_max_maps), 0, 4096,
     "most handles a stitched range (the handles free holes hold, mapped again side by side) may map, "
     "each a map and its share of one access call; 0: no stitched ranges (whole handles in holes are "
     "still moved); default 0"},
};

#define STITCH_OPTION_COUNT (sizeof stitch_options / sizeof stitch_options[0])

/* create: the shared caching core on the stitching source, chunk_mb and
 * handle_max_mb defaulting to STITCH_DEFAULT_CHUNK_MB and
 * STITCH_DEFAULT_HANDLE_MAX_MB. */
static vb_status stitch_create(vb_device *dev, const vb_config *config, void **state)
{
    vb_cc_settings settings;
    vb_cc_default_settings(&settings);
    settings.chunk_mb = STITCH_DEFAULT_CHUNK_MB;
    settings.handle_max_mb = STITCH_DEFAULT_HANDLE_MAX_MB;
    settings.stitch_max_maps = STITCH_DEFAULT_MAX_MAPS;
    return vb_cc_create_with(dev, config, stitch_options, STITCH_OPTION_COUNT, &vb_cc_stitching_segments,
                             "stitch", &settings, state);
}

const vb_allocator_ops vb_stitch_allocator = {
    .name = "stitch",
    .description = "expandable segments that stitch: one growing range per stream, one physical handle per "
                   "growth, and before a handle is made, whole handles in free holes between live blocks are "
                   "moved to where they are needed (with stitch_max_maps, first mapped again side by side "
                   "into stitched ranges)",
    .options = stitch_options,
    .option_count = STITCH_OPTION_COUNT,
    .create = stitch_create,
    VB_CC_SHARED_OPS,
};
