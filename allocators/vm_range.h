/* vrambench — virtual-memory ranges: the segments of `expandable` and
 * `stitch`, as PyTorch's ExpandableSegment has them
 * (c10/cuda/CUDACachingAllocator.cpp: struct ExpandableSegment and
 * find_expandable_block, map_block, unmap_block,
 * try_allocate_expandable_block, release_expandable_segment).
 *
 * Each (stream, pool) gets one reserved virtual range of about 1.125 x the
 * device's memory; physical handles are created and mapped into it at
 * whole units as the pool grows, at the lowest address where the request
 * fits (normally right after the mapped part), and unmapped again when
 * empty_cache finds them wholly free. A range is a caching-core segment
 * (caching_core.h): its blocks split, coalesce and are found by the core's
 * policy; this layer only maps and unmaps what lies under them.
 *
 * The two strategies differ in how a range takes memory (vb_vm_growth):
 * expandable maps one chunk per unit, PyTorch's way; stitch maps one
 * handle per growth sized to the request, takes the pool's spare handles
 * (unmapped from holes: vb_vm_range_unmap_block with `keep`) before
 * creating any, and leaves alone the handles its stitched ranges also map
 * (vb_vm_handle.borrowers).
 *
 * Internal to allocators/: expandable.c and stitch.c use it.
 */
#ifndef VB_VM_RANGE_H
#define VB_VM_RANGE_H

#include <stddef.h>
#include <stdint.h>

#include "caching_core.h"

/* How a range takes physical memory; chosen by the segment source. */
typedef enum vb_vm_growth {
    /* expandable: units of 2 MiB (small pool) or cc->large_chunk (large
     * pool, 20 MiB by default), one handle per unit. */
    VB_VM_CHUNKS,
    /* stitch: units of 2 MiB in both pools, one handle per growth covering
     * what the request lacks, at least cc->large_chunk (large pool) and at
     * most cc->handle_max (several past it); the pool's spares first. */
    VB_VM_HANDLE_PER_GROWTH,
} vb_vm_growth;

/* One physical handle mapped in a range, over units [first, first + span)
 * (expandable: one unit, a chunk; stitch: a 2 MiB unit, and a handle covers
 * as many as one growth mapped). */
typedef struct vb_vm_handle {
    size_t first, span;
    vb_phys handle;
    size_t borrowers;             /* stitched ranges mapping part of it (stitch.c): it is not moved or released */
} vb_vm_handle;

/* A reserved range (PyTorch's ExpandableSegment); core segment first. */
typedef struct vb_vm_range {
    vb_cc_segment segment;
    uint64_t chunk_size;          /* the unit: 2 MiB small pool, cc->large_chunk (20 MiB) large pool; stitch 2 MiB */
    size_t growth_units;          /* stitch: a new handle covers at least this many units (when it fits) */
    size_t max_units;             /* stitch: and at most this many (cc->handle_max; SIZE_MAX: no limit) */
    int variable;                 /* stitch: one handle per growth, of any whole number of units */
    vb_vm_handle *handles;        /* the mapped handles, by first unit */
    size_t handle_count, handle_capacity;
} vb_vm_range;

/* The range a segment is. Only for segments this layer made: not for a
 * borrowed one (a stitched range, stitch.c). */
static inline vb_vm_range *vb_vm_range_of(vb_cc_segment *segment)
{
    return (vb_vm_range *)segment;
}

/* The index of the first mapped handle starting at or after `unit`. */
size_t vb_vm_range_handle_lower_bound(const vb_vm_range *range, size_t unit);

/* find_expandable_block: the lowest address of the stream's ranges where
 * free blocks and unmapped space together hold `size`, starting at an
 * unmapped block or the free block just before it; a new range (growing
 * as `growth` says) when none. */
vb_status vb_vm_range_find_block(vb_cc_allocator *cc, vb_cc_pool *pool, vb_stream stream, uint64_t size,
                                 vb_vm_growth growth, vb_cc_block **out);

/* map_block: backs the first `size` bytes of unmapped block `to_map` with
 * whole units; the mapped part joins its free neighbours and the pool, the
 * rest stays unmapped. */
vb_status vb_vm_range_map_block(vb_cc_allocator *cc, vb_cc_block *to_map, uint64_t size);

/* try_allocate_expandable_block (a source's alloc_block): maps just enough
 * units at the place vb_vm_range_find_block finds that one free block
 * holds `size`; *out is that block, in no set. On failure, when `partly`
 * is not NULL, *partly is 1 if blocks were mapped (and joined their free
 * neighbours) before the growth failed, 0 if the free blocks are as they
 * were (a new range, unmapped, may have been made). */
vb_status vb_vm_range_alloc_block(vb_cc_allocator *cc, vb_cc_pool *pool, vb_stream stream, uint64_t size,
                                  vb_vm_growth growth, vb_cc_block **out, int *partly);

/* unmap_block: unmaps the handles wholly inside free block `block` (none a
 * stitched range maps), from the lowest, until at least `max_units` units
 * are unmapped; the parts before and after stay as free mapped blocks, the
 * unmapped middle (`block` itself) joins unmapped neighbours. The handles
 * are released, or kept as the spares of pool `keep` when it is not NULL.
 * Returns the number of units unmapped. */
size_t vb_vm_range_unmap_block(vb_cc_allocator *cc, vb_cc_block *block, size_t max_units, vb_cc_pool *keep);

/* Releases the pool's spare handles. */
void vb_vm_range_release_spares(vb_cc_allocator *cc, vb_cc_pool *pool);

/* release_blocks: unmaps the whole free units of every free block of the
 * pool's ranges (borrowed segments' blocks are skipped); ranges left
 * entirely unmapped are released. */
void vb_vm_range_release_pool(vb_cc_allocator *cc, vb_cc_pool *pool);

/* What release_pool_noting tells of each free block it unmapped units of,
 * which lay over [lo, hi) before: `block` is now the unmapped middle, its
 * neighbours what is left of the rest (unmap_block), or NULL when its
 * range went back with it. */
typedef void (*vb_vm_unmapped_fn)(vb_cc_allocator *cc, vb_cc_pool *pool, vb_cc_block *block, vb_addr lo,
                                  vb_addr hi);

/* vb_vm_range_release_pool, telling `unmapped` (or NULL) of every block
 * it changes (stitch keeps its holes index so, instead of noting every
 * free block afresh after each release). */
void vb_vm_range_release_pool_noting(vb_cc_allocator *cc, vb_cc_pool *pool, vb_vm_unmapped_fn unmapped);

/* release_pool's step for one free mapped block of the pool's ranges (not
 * a borrowed segment's): its whole handles unmapped and released, then
 * `unmapped` (or NULL) told, then its range released when nothing of it
 * is left mapped. A block with no whole handle is left as it is: a
 * caller that knows which blocks hold one (stitch's holes index) may
 * visit only those, in the walk's order. */
void vb_vm_range_release_block(vb_cc_allocator *cc, vb_cc_pool *pool, vb_cc_block *block, vb_vm_unmapped_fn unmapped);

/* At destroy: every mapped handle and the range go back (a source's
 * destroy_segment; the core has dropped the blocks). */
void vb_vm_range_destroy(vb_cc_allocator *cc, vb_cc_segment *segment);

#endif
