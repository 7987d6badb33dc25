/* vrambench — `stitch`: expandable segments that stitch, our own strategy
 * in the manner of GMLake (Guo et al., "GMLake: Efficient and Transparent
 * GPU Memory Defragmentation for Large-scale DNN Training with Virtual
 * Memory Stitching", ASPLOS'24) built on PyTorch's expandable segments.
 *
 * The policy is caching_core.c's, on expandable's ranges (vm_range.c): per (stream,
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
 * both below:
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
 * Both choose among the holes a handle starts in, which each pool keeps
 * in a holes index (hole_index.h, below) that every change to a block
 * notes: a growth looks at holes only, never at every block, so the time
 * per event stays flat as live blocks pile up (walking every block on each
 * growth took a 400,000-event random trace 69 s, against 1.1 s for
 * `caching`). The choices are the walk's and the sort's, ties and all.
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
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "caching_core.h"
#include "hole_index.h"
#include "stitch.h"
#include "vm_range.h"

/* ------------------------------------------------------------------------ */
/* Stitched ranges: holes' handles mapped again, side by side (GMLake)       */
/* ------------------------------------------------------------------------ */

/* A request no free block serves may still fit in the free memory of
 * several holes. A stitched range maps the handles whose memory those
 * holes hold, whole (cuMemMap maps only whole handles: base/device.h),
 * side by side at addresses of the allocator's arena (below), without
 * unmapping them where they are (a handle may be mapped at several
 * addresses): a segment
 * of the pool that costs no new memory, with one block that is never
 * split. Each piece starts where a handle starts inside a hole and takes
 * the whole handles the hole holds from there; the last piece takes only
 * what the request still needs, so it may end inside a handle whose rest
 * is free or live where it is (the stitched range never touches its
 * mapping of that rest). Only the bytes used are lent: the hole keeps the
 * others.
 *
 * As GMLake keeps its stitched blocks, the mappings stay after the block
 * is freed: the lent bytes go back to their ranges at once (bookkeeping
 * only, so the ranges can use and merge them), and the stitched range
 * waits, dormant, for a request of its size. When one comes and every
 * byte it maps is free again, it is lent them once more with no driver
 * call. Dormant ranges go with empty_cache (and past STITCHED_RANGES_MAX).
 * While a stitched range maps a handle, that handle is not moved or
 * released (vb_vm_handle.borrowers). */

/* Bytes [offset, offset + bytes) of a range that a stitched range maps:
 * offset is where a handle starts; bytes are whole handles but for the
 * last piece. */
typedef struct stitch_piece {
    vb_vm_range *range;
    uint64_t offset, bytes;
    vb_addr anchor;               /* a block handed out next to them when they were given back (0: none) */
} stitch_piece;

/* What a free block offers: from the first handle start inside it to its
 * end (`piece`), of which `whole` bytes are whole handles. */
typedef struct hole_piece {
    vb_cc_block *block;
    stitch_piece piece;
    uint64_t whole;
} hole_piece;

/* A stitched range: a segment of the pool (borrowed: it maps memory the
 * ranges hold) with one block; core segment first. */
typedef struct stitched_range {
    vb_cc_segment segment;
    stitch_piece *pieces;         /* the parts of ranges it maps, in its order */
    vb_cc_block **lent;           /* while it is lent them, the lent blocks holding them */
    size_t piece_count;
    int dormant;                  /* its units are back in their ranges; its mappings stay */
} stitched_range;

/* The stitched range a borrowed segment of this source is. */
static stitched_range *stitched_of(vb_cc_segment *segment)
{
    return (stitched_range *)segment;
}

/* The unit of stitch's ranges, both pools (vm_range.c, VB_VM_HANDLE_PER_GROWTH). */
#define STITCH_UNIT VB_CC_SMALL_BUFFER

/* The first and past-the-last units a piece touches. */
static size_t first_unit(const stitch_piece *piece)
{
    return (size_t)(piece->offset / piece->range->chunk_size);
}

static size_t end_unit(const stitch_piece *piece)
{
    uint64_t unit = piece->range->chunk_size;
    return (size_t)((piece->offset + piece->bytes + unit - 1) / unit);
}

/* The index of the handle holding unit `unit` of `range`. */
static size_t handle_of_unit(const vb_vm_range *range, size_t unit)
{
    return vb_vm_range_handle_lower_bound(range, unit + 1) - 1;
}

/* What free block `block` of a range offers, into *out; 0 when no handle
 * starts inside it. The handles of a mapped block lie side by side, so
 * its whole ones end where the last handle starting before its last whole
 * unit ends (or, when that one reaches past the block, where it starts):
 * two binary searches, whatever the block's size. */
static uint64_t hole_in(vb_cc_block *block, hole_piece *out)
{
    vb_vm_range *range = vb_vm_range_of(block->segment);
    uint64_t unit = range->chunk_size, offset = block->addr - range->segment.base, end = offset + block->size;
    size_t index = vb_vm_range_handle_lower_bound(range, (size_t)((offset + unit - 1) / unit));
    *out = (hole_piece){block, {range, 0, 0, 0}, 0};
    if (index >= range->handle_count || range->handles[index].first * unit >= end) return 0;
    out->piece.offset = range->handles[index].first * unit;
    out->piece.bytes = end - out->piece.offset;
    size_t end_unit = (size_t)(end / unit), past = vb_vm_range_handle_lower_bound(range, end_unit);
    if (past > index) {
        const vb_vm_handle *last = &range->handles[past - 1];
        size_t whole_end = last->first + last->span <= end_unit ? last->first + last->span : last->first;
        out->whole = (whole_end - range->handles[index].first) * unit;
    }
    return out->piece.bytes;
}

/* 1 if `block` is memory a stitched range may be lent: free, mapped, with
 * nothing pending, in one of the pool's own ranges (not a stitched one). */
static int lendable(const vb_cc_block *block, const vb_cc_pool *pool)
{
    return block->mapped && vb_cc_block_available(block) && block->segment->pool == pool &&
           !block->segment->borrowed;
}

/* Applies `step` (+1, -1 or 0) to the borrower counts of the handles a
 * piece maps; returns how many mappings it takes (one per handle) and,
 * when `bytes` is not NULL, their bytes in *bytes. */
static size_t count_piece_maps(const stitch_piece *piece, int step, uint64_t *bytes)
{
    vb_vm_range *range = piece->range;
    size_t maps = 0, end = end_unit(piece);
    for (size_t at = handle_of_unit(range, first_unit(piece));
         at < range->handle_count && range->handles[at].first < end; at++) {
        range->handles[at].borrowers += step;
        if (bytes) *bytes += range->handles[at].span * range->chunk_size;
        maps++;
    }
    return maps;
}

/* ------------------------------------------------------------------------ */
/* The holes index: the free blocks a handle starts in, kept as they change  */
/* ------------------------------------------------------------------------ */

/* Moves (reclaim_holes) and stitched ranges (pick_holes) choose among the
 * free blocks of the pool's ranges that a handle starts in (hole_in).
 * Walking every block for them on each growth made a replay quadratic in
 * its live blocks, so each pool keeps just those blocks in a holes index
 * (hole_index.h), under the address and figures each had when noted. The
 * index does not watch the blocks: every change that makes, moves or ends
 * a hole notes it here,
 *   the core's frees (take_freed: the freed block merged with its free
 *   neighbours) and hand-outs (stitch_malloc: a hole's front handed out,
 *   its rest split off after it);
 *   the source's own: growth (the block vb_vm_range_alloc_block returns,
 *   grow_by's), moves (take_handles) and releases (note_unmapped, for
 *   both), lending to and taking back from stitched ranges;
 *   a growth that failed halfway notes the pool's free blocks afresh.
 * When host memory runs out for an entry the allocator stops indexing for
 * good and walks every block, as before the index (vb_stitch_stop_indexing:
 * tests/test_stitch_holes.c holds the two to the same choices). */

/* The allocator: the core's state first (the core and the shared ops take
 * it as theirs, and vb_cc_destroy frees it whole), then the holes. */
typedef struct stitch_allocator {
    vb_cc_allocator cc;
    vb_hole_index holes[2];       /* the small pool's holes, the large pool's (ranked: pick_holes') */
    int unindexed;                /* host memory ran out for an entry: every block is walked */
} stitch_allocator;

/* The stitch allocator whose core state `cc` is. */
static stitch_allocator *stitch_of(vb_cc_allocator *cc)
{
    return (stitch_allocator *)cc;
}

/* The holes index of `pool`. */
static vb_hole_index *holes_of(vb_cc_allocator *cc, const vb_cc_pool *pool)
{
    return &stitch_of(cc)->holes[pool->is_small ? 0 : 1];
}

/* The index goes for good (host memory ran out for an entry, or a test
 * asks): later choices walk the blocks. */
static void stop_indexing(stitch_allocator *stitch)
{
    stitch->unindexed = 1;
    vb_hole_index_free(&stitch->holes[0]);
    vb_hole_index_free(&stitch->holes[1]);
}

void vb_stitch_stop_indexing(void *state)
{
    stop_indexing(state);
}

/* Notes `block` in its pool's index when it is a hole (free, mapped,
 * nothing pending, in one of the pool's ranges, a handle starting in it),
 * else forgets any hole noted at its address. Recycled structs (no
 * segment) and stitched ranges' blocks are no pool's holes. */
static void note_hole(vb_cc_allocator *cc, vb_cc_block *block)
{
    stitch_allocator *stitch = stitch_of(cc);
    if (stitch->unindexed || !block || !block->segment || block->segment->borrowed) return;
    vb_hole_index *holes = holes_of(cc, vb_cc_block_pool(cc, block));
    hole_piece hole;
    if (!block->mapped || !vb_cc_block_available(block) || hole_in(block, &hole) == 0) {
        vb_hole_index_forget(holes, block->addr, block->addr + 1);
        return;
    }
    vb_hole_figures figures = {block->addr, hole.whole, hole.piece.bytes, block};
    if (vb_hole_index_put(holes, &figures) != VB_OK) stop_indexing(stitch);
}

/* A block that has taken its neighbours' places (merged with them, or
 * grown): the holes noted inside it go, and it is noted. */
static void renote(vb_cc_allocator *cc, vb_cc_block *block)
{
    if (stitch_of(cc)->unindexed || block->segment->borrowed) return;
    vb_hole_index_forget(holes_of(cc, vb_cc_block_pool(cc, block)), block->addr, block->addr + block->size);
    note_hole(cc, block);
}

/* A hole of the pool, over [lo, hi), whose whole handles were unmapped
 * (vb_vm_unmapped_fn): its holes go, and what is left beside the units
 * taken, `block`'s neighbours (the unmapped middle), is noted; nothing is
 * left when its range went back with it (`block` NULL). */
static void note_unmapped(vb_cc_allocator *cc, vb_cc_pool *pool, vb_cc_block *block, vb_addr lo, vb_addr hi)
{
    if (stitch_of(cc)->unindexed) return;
    vb_hole_index_forget(holes_of(cc, pool), lo, hi);
    if (!block) return;
    note_hole(cc, block->prev);
    note_hole(cc, block->next);
}

/* vb_cc_pool_each_free visitor: notes a free block; 0 (stop) once the index is gone. */
static int note_free_block(void *context, vb_cc_block *block)
{
    note_hole(context, block);
    return !stitch_of(context)->unindexed;
}

/* Notes the pool's holes afresh, after a change to ones not followed (a
 * growth that failed halfway). */
static void renote_pool(vb_cc_allocator *cc, vb_cc_pool *pool)
{
    if (stitch_of(cc)->unindexed) return;
    vb_hole_index_clear(holes_of(cc, pool));
    vb_cc_pool_each_free(pool, note_free_block, cc);
}

/* After the core handed out the block at `addr`: when a hole was noted
 * there, the block handed out is its front (or all of it) and its rest,
 * split off right after, is what is left of the hole. */
static void note_handed_out(vb_cc_allocator *cc, vb_addr addr)
{
    for (int small = 0; small < 2 && !stitch_of(cc)->unindexed; small++) {
        vb_hole_index *holes = holes_of(cc, small ? &cc->small_pool : &cc->large_pool);
        if (!vb_hole_index_at(holes, addr)) continue;
        vb_hole_index_forget(holes, addr, addr + 1);
        vb_cc_block *handed = vb_cc_allocated_at(cc, addr);
        if (handed) note_hole(cc, handed->next);
    }
}

/* ------------------------------------------------------------------------ */
/* Picking holes for a stitched range                                         */
/* ------------------------------------------------------------------------ */

/* The piece of `bytes` from the first handle start of a noted hole. */
static stitch_piece piece_from(const vb_hole_figures *hole, uint64_t bytes)
{
    vb_vm_range *range = vb_vm_range_of(hole->block->segment);
    uint64_t end = hole->block->addr + hole->block->size - range->segment.base;
    return (stitch_piece){range, end - hole->piece, bytes, 0};
}

/* vb_hole_maps of stitch: one mapping per handle the piece touches. */
static size_t piece_maps(void *context, const vb_hole_figures *hole, uint64_t bytes)
{
    (void)context;
    stitch_piece piece = piece_from(hole, bytes);
    return count_piece_maps(&piece, 0, NULL);
}

/* Every hole of a pool, walked for an allocator that stopped indexing. */
typedef struct hole_search {
    vb_hole_figures *holes;
    size_t count, capacity;
    uint64_t whole;               /* whole handles' bytes, all holes */
    int failed;                   /* host memory ran out */
} hole_search;

/* vb_cc_pool_each_free visitor: notes what a free block offers; 0 (stop) when host memory runs out. */
static int gather_hole(void *context, vb_cc_block *block)
{
    hole_search *search = context;
    hole_piece hole;
    if (!vb_cc_block_available(block) || block->segment->borrowed || hole_in(block, &hole) == 0) return 1;
    if (search->count == search->capacity) {
        size_t capacity = search->capacity ? 2 * search->capacity : 64;
        vb_hole_figures *grown = realloc(search->holes, capacity * sizeof *grown);
        if (!grown) {
            search->failed = 1;
            return 0;
        }
        search->holes = grown;
        search->capacity = capacity;
    }
    search->holes[search->count++] = (vb_hole_figures){block->addr, hole.whole, hole.piece.bytes, block};
    search->whole += hole.whole;
    return 1;
}

/* Picks the pieces for `size` bytes out of the free blocks of the pool's
 * own ranges (any stream; the large pool: its index is the ranked one),
 * into *picked (malloc'd, *count of them, in the order they are mapped):
 * while no hole offers all that is still needed, the whole handles of the
 * hole with the most (the fewest pieces, so the fewest mappings; the
 * lowest address first among equals); then the hole that offers it with
 * the least to spare (vb_hole_pick_sorted says how ties go). 0 when that
 * takes at most cc->stitch_max_maps mappings; -1 when not (nothing
 * picked). *available gets the whole handles' bytes the holes hold. */
static int pick_holes(vb_cc_allocator *cc, vb_cc_pool *pool, uint64_t size, hole_piece **picked, size_t *count,
                      uint64_t *available)
{
    vb_hole_choice *choices = NULL;
    size_t chosen = 0;
    int result;
    if (!stitch_of(cc)->unindexed) {
        vb_hole_index *holes = holes_of(cc, pool);
        *available = holes->whole;
        result = vb_hole_index_pick(holes, size, cc->stitch_max_maps, piece_maps, NULL, &choices, &chosen);
    } else {
        hole_search search = {0};
        vb_cc_pool_each_free(pool, gather_hole, &search);
        *available = search.whole;
        result = search.failed ? -1
                               : vb_hole_pick_sorted(search.holes, search.count, size, cc->stitch_max_maps,
                                                     piece_maps, NULL, &choices, &chosen);
        free(search.holes);
    }
    if (result != 0) return -1;
    *picked = malloc(chosen * sizeof **picked);
    if (!*picked) {
        free(choices);
        return -1;
    }
    for (size_t i = 0; i < chosen; i++)
        (*picked)[i] = (hole_piece){choices[i].hole.block, piece_from(&choices[i].hole, choices[i].bytes),
                                    choices[i].hole.whole};
    free(choices);
    *count = chosen;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Stitched ranges: mapping, lending, giving back                             */
/* ------------------------------------------------------------------------ */

/* Maps the handles a piece touches, whole, at `at` + *mapped, one vm_map
 * each; the bytes mapped are added to *mapped (on failure too). */
static vb_status map_piece(vb_device *dev, const stitch_piece *piece, vb_addr at, uint64_t *mapped)
{
    const vb_vm_range *range = piece->range;
    size_t end = end_unit(piece);
    for (size_t index = handle_of_unit(range, first_unit(piece));
         index < range->handle_count && range->handles[index].first < end; index++) {
        uint64_t bytes = range->handles[index].span * range->chunk_size;
        vb_status status = dev->ops->vm_map(dev, at + *mapped, bytes, range->handles[index].handle);
        if (status != VB_OK) return status;
        *mapped += bytes;
    }
    return VB_OK;
}

/* The block of the piece's range holding its first byte, found by walking
 * the range's blocks from a block near it: *hint (the block found last
 * time) when it is still a block of that range (recycled structs have no
 * segment), else the piece's anchor while it is handed out, else the
 * range's head. *hint becomes the block found. */
static vb_cc_block *block_at(vb_cc_allocator *cc, const stitch_piece *piece, vb_cc_block **hint)
{
    vb_addr lo = piece->range->segment.base + piece->offset;
    const vb_cc_segment *range = &piece->range->segment;
    vb_cc_block *block = *hint && (*hint)->segment == range ? *hint : NULL;
    if (!block && piece->anchor) block = vb_cc_allocated_at(cc, piece->anchor);
    if (!block || block->segment != range) block = piece->range->segment.head;
    while (block->addr > lo) block = block->prev;
    while (block->addr + block->size <= lo) block = block->next;
    *hint = block;
    return block;
}

/* The free block of the piece's range that holds all its bytes, or NULL;
 * *hint as block_at's. */
static vb_cc_block *hole_holding(vb_cc_allocator *cc, const stitch_piece *piece, vb_cc_pool *pool,
                                 vb_cc_block **hint)
{
    vb_cc_block *block = block_at(cc, piece, hint);
    vb_addr hi = piece->range->segment.base + piece->offset + piece->bytes;
    return block->addr + block->size >= hi && lendable(block, pool) ? block : NULL;
}

/* Lends the piece's bytes out of free hole `block` (which holds them): the
 * parts before and after stay free in the pool (in the structs given, or
 * recycled), `block` itself becomes the lent middle; the holes index
 * notes the parts instead of the hole. */
static void lend_piece(vb_cc_allocator *cc, vb_cc_block *block, const stitch_piece *piece, vb_cc_block *before,
                       vb_cc_block *after)
{
    vb_addr start = piece->range->segment.base + piece->offset;
    uint64_t before_size = start - block->addr, after_size = block->size - before_size - piece->bytes;
    vb_cc_pool *pool = vb_cc_block_pool(cc, block);
    if (!stitch_of(cc)->unindexed) vb_hole_index_forget(holes_of(cc, pool), block->addr, block->addr + block->size);
    vb_cc_pool_erase(pool, block);
    if (before_size) {
        before->addr = block->addr;
        before->size = before_size;
        before->stream = block->stream;
        before->segment = block->segment;
        vb_cc_splice(before, block->prev, block);
        vb_cc_pool_insert(pool, before);
    } else {
        vb_cc_block_recycle(cc, before);
    }
    if (after_size) {
        after->addr = start + piece->bytes;
        after->size = after_size;
        after->stream = block->stream;
        after->segment = block->segment;
        vb_cc_splice(after, block, block->next);
        vb_cc_pool_insert(pool, after);
    } else {
        vb_cc_block_recycle(cc, after);
    }
    block->addr = start;
    block->size = piece->bytes;
    block->allocated = VB_CC_LENT;
    if (before_size) note_hole(cc, before);
    if (after_size) note_hole(cc, after);
}

/* Lends a stitched range its pieces again, when each lies in a free hole:
 * 1 (its block is free again, in no set), else 0 and nothing changed. No
 * driver call but stream waits: work queued on a hole's own stream may
 * still use it, so another stream's range waits for it first (as
 * vb_vm_range_unmap_block does). */
static int lend_stitched(vb_cc_allocator *cc, stitched_range *stitched)
{
    vb_cc_pool *pool = &cc->large_pool; /* where its holes are */
    for (size_t i = 0; i < stitched->piece_count; i++)
        if (!hole_holding(cc, &stitched->pieces[i], pool, &stitched->lent[i])) return 0;
    vb_cc_block **structs = malloc(2 * stitched->piece_count * sizeof *structs);
    size_t made = 0;
    while (structs && made < 2 * stitched->piece_count &&
           (structs[made] = vb_cc_block_new(cc, 0, 0, 0, pool, NULL)))
        made++;
    if (made < 2 * stitched->piece_count) {
        while (made) vb_cc_block_recycle(cc, structs[--made]);
        free(structs);
        return 0;
    }
    /* Found again one by one: pieces of one hole lie in what the last left of it. */
    for (size_t i = 0; i < stitched->piece_count; i++) {
        hole_holding(cc, &stitched->pieces[i], pool, &stitched->lent[i]);
        if (stitched->lent[i]->stream != stitched->segment.stream)
            cc->device->ops->stream_synchronize(cc->device, stitched->lent[i]->stream);
        lend_piece(cc, stitched->lent[i], &stitched->pieces[i], structs[2 * i], structs[2 * i + 1]);
    }
    free(structs);
    stitched->segment.head->allocated = 0;
    stitched->dormant = 0;
    return 1;
}

/* Gives the bytes a stitched range was lent back to their ranges (free
 * blocks of the pool, merged with their neighbours); the range stays
 * mapped, dormant (its block marked VB_CC_LENT: shown by no segment
 * visit). Work queued on the range's stream may still use the memory:
 * another stream's range waits for it first. */
static void return_stitched(vb_cc_allocator *cc, stitched_range *stitched)
{
    int other_stream = 0;
    for (size_t i = 0; i < stitched->piece_count; i++)
        other_stream |= stitched->lent[i]->stream != stitched->segment.stream;
    if (other_stream) cc->device->ops->stream_synchronize(cc->device, stitched->segment.stream);
    for (size_t i = 0; i < stitched->piece_count; i++) {
        vb_cc_block *hole = stitched->lent[i];
        hole->allocated = 0;
        vb_cc_try_merge(cc, hole, hole->prev);
        vb_cc_try_merge(cc, hole, hole->next);
        vb_cc_pool_insert(vb_cc_block_pool(cc, hole), hole);
        renote(cc, hole);
        vb_cc_block *near = hole->next && hole->next->allocated == 1 ? hole->next : hole->prev;
        stitched->pieces[i].anchor = near && near->allocated == 1 ? near->addr : 0;
    }
    stitched->segment.head->allocated = VB_CC_LENT;
    stitched->dormant = 1;
}

/* ---- The arena: addresses for stitched ranges ----
 * Stitched ranges take their addresses from one reservation of the
 * allocator's own, lowest free address first, not one cuMemAddressReserve
 * each: best fit breaks ties between blocks of different stitched ranges
 * by address, and where the driver puts reservations depends on their size
 * (results/stitch-ranges-nvidia-h100-80gb-hbm3-20261123/probe-driver.txt:
 * 2 MiB ones ~127 TiB above two 90 GiB ones, a 4 MiB one right after
 * them), which the sim would have to guess. It also saves a reserve and a
 * free per range. The arena goes back when its last range does. */

/* The arena's size: four times the device's memory (stitched ranges map
 * memory the ranges hold, and dormant ones keep their addresses). */
#define STITCH_ARENA_DEVICES 4

/* Addresses for `size` bytes (a multiple of 2 MiB) from the arena, which
 * is reserved first when there is none; VB_ERR_OOM when it is full. */
static vb_status arena_take(vb_cc_allocator *cc, uint64_t size, vb_addr *out)
{
    vb_device *dev = cc->device;
    if (!cc->stitch_arena) {
        uint64_t free_bytes = 0, total_bytes = 0;
        vb_status status = dev->ops->mem_info(dev, &free_bytes, &total_bytes);
        if (status != VB_OK) return status;
        uint64_t arena = (STITCH_ARENA_DEVICES * total_bytes + VB_CC_SMALL_BUFFER - 1) / VB_CC_SMALL_BUFFER *
                         VB_CC_SMALL_BUFFER;
        if (cc->stitch_free_capacity == 0) {
            cc->stitch_free = malloc(16 * sizeof *cc->stitch_free);
            if (!cc->stitch_free) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
            cc->stitch_free_capacity = 16;
        }
        status = dev->ops->vm_reserve(dev, arena, &cc->stitch_arena);
        if (status != VB_OK) return status;
        cc->stitch_arena_size = arena;
        cc->stitch_free[0] = (vb_cc_extent){cc->stitch_arena, arena};
        cc->stitch_free_count = 1;
    }
    for (size_t i = 0; i < cc->stitch_free_count; i++) {
        vb_cc_extent *extent = &cc->stitch_free[i];
        if (extent->size < size) continue;
        *out = extent->addr;
        extent->addr += size;
        extent->size -= size;
        if (extent->size == 0) {
            memmove(extent, extent + 1, (cc->stitch_free_count - i - 1) * sizeof *extent);
            cc->stitch_free_count--;
        }
        cc->stitch_arena_ranges++;
        return VB_OK;
    }
    return vb_error(VB_ERR_OOM, "%s: the stitched ranges' %llu-byte arena is full", cc->name,
                    (unsigned long long)cc->stitch_arena_size);
}

/* Gives `size` bytes at `addr` back to the arena, merging free neighbours;
 * the arena goes back to the device with its last range. */
static void arena_give(vb_cc_allocator *cc, vb_addr addr, uint64_t size)
{
    if (--cc->stitch_arena_ranges == 0) {
        cc->device->ops->vm_free(cc->device, cc->stitch_arena, cc->stitch_arena_size);
        cc->stitch_arena = 0;
        cc->stitch_free_count = 0;
        return;
    }
    size_t at = 0;
    while (at < cc->stitch_free_count && cc->stitch_free[at].addr < addr) at++;
    int joins_before = at > 0 && cc->stitch_free[at - 1].addr + cc->stitch_free[at - 1].size == addr;
    int joins_after = at < cc->stitch_free_count && addr + size == cc->stitch_free[at].addr;
    if (joins_before && joins_after) {
        cc->stitch_free[at - 1].size += size + cc->stitch_free[at].size;
        memmove(&cc->stitch_free[at], &cc->stitch_free[at + 1], (cc->stitch_free_count - at - 1) * sizeof *cc->stitch_free);
        cc->stitch_free_count--;
    } else if (joins_before) {
        cc->stitch_free[at - 1].size += size;
    } else if (joins_after) {
        cc->stitch_free[at].addr = addr;
        cc->stitch_free[at].size += size;
    } else {
        /* A new extent: when the array cannot grow the addresses are lost
         * to the arena (still reserved), never reused twice. */
        if (cc->stitch_free_count == cc->stitch_free_capacity) {
            vb_cc_extent *grown = realloc(cc->stitch_free, 2 * cc->stitch_free_capacity * sizeof *grown);
            if (!grown) return;
            cc->stitch_free = grown;
            cc->stitch_free_capacity *= 2;
        }
        memmove(&cc->stitch_free[at + 1], &cc->stitch_free[at], (cc->stitch_free_count - at) * sizeof *cc->stitch_free);
        cc->stitch_free[at] = (vb_cc_extent){addr, size};
        cc->stitch_free_count++;
    }
}

/* A stitched range's mappings and addresses go; the stitched counts of
 * the handles it mapped drop. Its bytes must not be lent (dormant, or at
 * destroy). */
static void unmap_stitched(vb_cc_allocator *cc, stitched_range *stitched)
{
    cc->device->ops->vm_unmap(cc->device, stitched->segment.base, stitched->segment.size);
    arena_give(cc, stitched->segment.base, stitched->segment.size);
    for (size_t i = 0; i < stitched->piece_count; i++) count_piece_maps(&stitched->pieces[i], -1, NULL);
    free(stitched->pieces);
    free(stitched->lent);
}

/* Dormant stitched ranges a pool keeps at most: past it the oldest goes
 * (its mappings cost nothing while kept, but each pins its handles, and
 * reuse_stitched looks through them all). */
#define STITCHED_RANGES_MAX 4096

/* Removes the dormant stitched range at `index` of the pool's list,
 * unmaps it and frees it. */
static void drop_stitched(vb_cc_allocator *cc, vb_cc_pool *pool, size_t index)
{
    stitched_range *stitched = stitched_of(pool->stitched[index]);
    memmove(pool->stitched + index, pool->stitched + index + 1,
            (pool->stitched_count - index - 1) * sizeof *pool->stitched);
    pool->stitched_count--;
    vb_cc_segment_remove(cc, &stitched->segment);
    cc->device->ops->stream_synchronize(cc->device, stitched->segment.stream);
    unmap_stitched(cc, stitched);
    vb_cc_block_recycle(cc, stitched->segment.head);
    free(stitched);
}

/* Serves `size` bytes of the pool for `stream` from a new stitched range
 * over holes, when they cover it within cc->stitch_max_maps mappings: *out
 * is its one block (free, mapped, in no set). *out stays NULL (VB_OK) when
 * they do not; *available is then the bytes of whole handles the holes
 * hold. A driver failure is undone and returned. */
static vb_status stitch_holes(vb_cc_allocator *cc, vb_cc_pool *pool, vb_stream stream, uint64_t size,
                              vb_cc_block **out, uint64_t *available)
{
    vb_cc_pool *from = &cc->large_pool; /* holes of the large pool's ranges serve both pools */
    vb_device *dev = cc->device;
    hole_piece *holes = NULL;
    size_t count = 0;
    *out = NULL;
    *available = 0;
    if (pick_holes(cc, from, size, &holes, &count, available) != 0) return VB_OK;
    stitched_range *stitched = calloc(1, sizeof *stitched);
    stitch_piece *pieces = calloc(count, sizeof *pieces);
    vb_cc_block **lent = calloc(count, sizeof *lent);
    if (pool->stitched_count == pool->stitched_capacity) {
        size_t capacity = pool->stitched_capacity ? 2 * pool->stitched_capacity : 16;
        vb_cc_segment **grown = realloc(pool->stitched, capacity * sizeof *grown);
        if (grown) {
            pool->stitched = grown;
            pool->stitched_capacity = capacity;
        } else {
            free(stitched);
            stitched = NULL; /* reported below as out of host memory */
        }
    }
    uint64_t range_size = 0, block_size = 0, mapped = 0;
    for (size_t i = 0; i < count; i++) {
        count_piece_maps(&holes[i].piece, 0, &range_size);
        block_size += holes[i].piece.bytes;
    }
    vb_addr base = 0;
    vb_cc_block *block = NULL;
    vb_status status = stitched && pieces && lent ? arena_take(cc, range_size, &base)
                                                  : vb_error(VB_ERR_HOST_OOM, "out of host memory");
    int taken = status == VB_OK;
    if (status == VB_OK && !(block = vb_cc_block_new(cc, base, block_size, stream, pool, &stitched->segment)))
        status = vb_error(VB_ERR_HOST_OOM, "out of host memory");
    for (size_t i = 0; status == VB_OK && i < count; i++) {
        pieces[i] = holes[i].piece;
        lent[i] = holes[i].block; /* where lend_stitched looks first */
        status = map_piece(dev, &pieces[i], base, &mapped);
    }
    if (status == VB_OK) status = dev->ops->vm_set_access(dev, base, range_size);
    free(holes);
    if (status == VB_OK) {
        stitched->pieces = pieces;
        stitched->piece_count = count;
        stitched->lent = lent;
        stitched->segment = (vb_cc_segment){.base = base, .size = range_size, .head = block, .pool = pool,
                                            .stream = stream, .borrowed = 1};
        block->allocated = VB_CC_LENT;
        stitched->dormant = 1;
        if (lend_stitched(cc, stitched)) {
            for (size_t i = 0; i < count; i++) count_piece_maps(&pieces[i], +1, NULL);
            vb_cc_segment_add(cc, &stitched->segment);
            pool->stitched[pool->stitched_count++] = &stitched->segment;
            /* Past the limit the oldest dormant ones go (dropping shifts the rest down). */
            for (size_t i = 0; pool->stitched_count > STITCHED_RANGES_MAX && i < pool->stitched_count;)
                if (stitched_of(pool->stitched[i])->dormant) drop_stitched(cc, pool, i);
                else i++;
            *out = block;
            return VB_OK;
        }
        status = vb_error(VB_ERR_HOST_OOM, "out of host memory");
    }
    if (mapped) dev->ops->vm_unmap(dev, base, mapped);
    if (taken) arena_give(cc, base, range_size);
    if (block) vb_cc_block_recycle(cc, block);
    free(lent);
    free(pieces);
    free(stitched);
    return status == VB_ERR_OOM && !taken ? VB_OK : status; /* a full arena: no stitched range, not out of memory */
}

/* A dormant stitched range of the stream's pool made for a request of
 * just this size (a loop asks for the same sizes again) whose bytes are
 * all free again, lent them (its one block: free, mapped, in no set), or
 * NULL. */
static vb_cc_block *reuse_stitched(vb_cc_allocator *cc, vb_cc_pool *pool, vb_stream stream, uint64_t size)
{
    for (size_t i = 0; i < pool->stitched_count; i++) {
        vb_cc_segment *segment = pool->stitched[i];
        stitched_range *stitched = stitched_of(segment);
        if (stitched->dormant && segment->stream == stream && segment->head->size >= size &&
            segment->head->size - size < STITCH_UNIT && lend_stitched(cc, stitched))
            return segment->head;
    }
    return NULL;
}

/* empty_cache's first step: every dormant stitched range of the pool goes. */
static void release_stitched(vb_cc_allocator *cc, vb_cc_pool *pool)
{
    for (size_t i = pool->stitched_count; i-- > 0;)
        if (stitched_of(pool->stitched[i])->dormant) drop_stitched(cc, pool, i);
}

/* take_freed of the stitching source: a block of a range joins the pool
 * (noted in the holes index); a stitched range's block (its whole, never
 * split) gives its bytes back and waits, dormant. */
static int stitching_take_freed(vb_cc_allocator *cc, vb_cc_block *block)
{
    if (!block->segment->borrowed) {
        renote(cc, block); /* a hole of the pool now, or a larger one */
        return 0;
    }
    if (vb_cc_block_is_split(block)) return 0;
    return_stitched(cc, stitched_of(block->segment));
    return 1;
}

/* ------------------------------------------------------------------------ */
/* Stitching: handles from holes before new ones (the `stitch` strategy)     */
/* ------------------------------------------------------------------------ */

/* The units vb_vm_range_alloc_block needs mapped to serve `size` bytes from
 * `candidate` (what vb_vm_range_find_block chose); *last is set to the last
 * block it would touch. */
static size_t chunks_to_map(vb_cc_block *candidate, uint64_t size, vb_cc_block **last)
{
    uint64_t chunk = vb_vm_range_of(candidate->segment)->chunk_size, bytes = 0;
    size_t chunks = 0;
    vb_cc_block *block = candidate;
    for (; block; block = block->next) {
        *last = block;
        if (block->mapped) {
            bytes += block->size;
        } else {
            uint64_t want = size - bytes < block->size ? size - bytes : block->size;
            uint64_t n = (want + chunk - 1) / chunk;
            chunks += n;
            bytes += n * chunk < block->size ? n * chunk : block->size;
        }
        if (bytes >= size) break;
    }
    return chunks;
}

/* The blocks a request is about to use and their neighbours: [lo, hi) of
 * range `segment`. */
typedef struct kept_blocks {
    const vb_cc_segment *segment;
    vb_addr lo, hi;
} kept_blocks;

/* 1 if `block` is a hole the stitching may take handles from: free, mapped,
 * with no pending use, and not one of the `kept` blocks (taking from those,
 * the growing end among them, would only map the same handle back). */
static int is_hole(const vb_cc_block *block, const kept_blocks *kept)
{
    if (!block->mapped || !vb_cc_block_available(block)) return 0;
    if (block->segment == kept->segment && block->addr < kept->hi && block->addr + block->size > kept->lo) return 0;
    return 1;
}

/* Unmaps the whole handles of hole `block`, from the lowest, into the
 * pool's spares until `max_units` units are taken
 * (vb_vm_range_unmap_block); the holes index then notes what is left of
 * the hole (the part after the handles taken, and the one before, which
 * holds no whole handle). Returns the units taken. */
static size_t take_handles(vb_cc_allocator *cc, vb_cc_block *block, size_t max_units, vb_cc_pool *pool)
{
    vb_addr lo = block->addr, hi = block->addr + block->size;
    size_t units = vb_vm_range_unmap_block(cc, block, max_units, pool);
    if (units) note_unmapped(cc, pool, block, lo, hi);
    return units;
}

/* reclaim_holes for an allocator that stopped indexing: every block of
 * the pool's ranges at `from` or after, in address order (the ranges'
 * order, then the blocks'), `taken` units taken already. */
static size_t reclaim_by_walking(vb_cc_allocator *cc, vb_cc_pool *pool, const kept_blocks *kept, vb_addr from,
                                 size_t taken, size_t wanted)
{
    for (vb_oset_node *node = vb_oset_first(&cc->segments); node && taken < wanted;
         node = vb_oset_next(&cc->segments, node)) {
        vb_cc_segment *segment = VB_OSET_ENTRY(node, vb_cc_segment, node);
        if (segment->pool != pool || segment->borrowed || segment->base + segment->size <= from) continue;
        for (vb_cc_block *block = segment->head; block && taken < wanted; block = block->next)
            if (block->addr >= from && is_hole(block, kept))
                taken += take_handles(cc, block, wanted - taken, pool);
    }
    return taken;
}

/* Takes whole handles out of holes of the pool's ranges (any stream),
 * lowest address first, into the pool's spares until at least `wanted`
 * units are taken; returns how many units. The pool's own only: a handle
 * moved into the other pool would serve only that pool's sizes (and moves
 * back and forth between them cost a call each way). The holes with whole
 * handles are the index's `movable` ones, in address order: the blocks
 * between them give nothing (unmap_block takes nothing from a block with
 * no whole handle). */
static size_t reclaim_holes(vb_cc_allocator *cc, vb_cc_pool *pool, vb_cc_block *candidate, vb_cc_block *last,
                            size_t wanted)
{
    vb_cc_block *first = candidate->prev ? candidate->prev : candidate;
    if (last->next) last = last->next;
    kept_blocks kept = {candidate->segment, first->addr, last->addr + last->size};
    size_t taken = 0;
    vb_addr from = 0;
    while (!stitch_of(cc)->unindexed && taken < wanted) {
        vb_hole *hole = vb_hole_index_movable_from(holes_of(cc, pool), from);
        if (!hole) return taken;
        vb_cc_block *block = hole->figures.block;
        from = hole->figures.addr + 1;
        if (is_hole(block, &kept)) taken += take_handles(cc, block, wanted - taken, pool);
    }
    /* Indexing stopped (host memory), maybe midway: the walk goes on from there. */
    return reclaim_by_walking(cc, pool, &kept, from, taken, wanted);
}

/* The units of the pool's spare handles. */
static size_t spare_units(const vb_cc_pool *pool, uint64_t unit)
{
    size_t units = 0;
    for (size_t i = 0; i < pool->spare_count; i++) units += (size_t)(pool->spare_chunks[i].size / unit);
    return units;
}

/* Maps `lack` bytes (whole units, one handle of just that size) where the
 * range grows at `candidate` (vb_vm_range_find_block's choice): the new
 * memory joins the free blocks there, a hole like the others. */
static vb_status grow_by(vb_cc_allocator *cc, vb_cc_block *candidate, uint64_t lack)
{
    vb_cc_block *unmapped = candidate->mapped ? candidate->next : candidate;
    vb_vm_range *range = vb_vm_range_of(unmapped->segment);
    size_t growth_units = range->growth_units;
    range->growth_units = 1; /* no chunk_mb round-up: the holes hold the rest */
    vb_status status = vb_vm_range_map_block(cc, unmapped, lack < unmapped->size ? lack : unmapped->size);
    range->growth_units = growth_units;
    if (status == VB_OK) renote(cc, unmapped); /* mapped, merged with the free blocks before and after */
    return status;
}

/* alloc_block of the stitching source: where expandable would map new
 * memory, a request is served, in this order, by
 *   1. a dormant stitched range of its size whose bytes are free again (no
 *      driver call; a small request: one of 2 MiB, then split);
 *   2. with stitch_max_maps, a new stitched range over holes (a map per
 *      handle, one access call; a small request: 2 MiB of a large-pool hole);
 *   3. (large) when the holes lack a few units, just those grown where the
 *      range would grow (one handle of that size), then 2 again;
 *   4. expandable's growth, which first takes the pool's spare handles,
 *      then handles lying wholly in holes (unmapped there and mapped where
 *      the request goes), creating a handle only for the rest.
 * Spares a request could not place stay held for the next one. */
static vb_status stitching_alloc_block(vb_cc_allocator *cc, vb_cc_pool *pool, vb_stream stream, uint64_t size,
                                       uint64_t alloc_size, vb_cc_block **out)
{
    (void)alloc_size;
    uint64_t stitched_size = pool->is_small ? VB_CC_SMALL_BUFFER : size; /* a small range: one unit, split */
    if ((*out = reuse_stitched(cc, pool, stream, stitched_size)) != NULL) return VB_OK;
    vb_cc_block *candidate = NULL, *last = NULL;
    vb_status status = vb_vm_range_find_block(cc, pool, stream, size, VB_VM_HANDLE_PER_GROWTH, &candidate);
    if (status != VB_OK) return status;
    size_t wanted = chunks_to_map(candidate, size, &last);
    size_t spare = spare_units(pool, vb_vm_range_of(candidate->segment)->chunk_size);
    int stitching = wanted > spare && cc->stitch_max_maps != 0;
    if (stitching && pool->is_small) {
        uint64_t available = 0;
        status = stitch_holes(cc, pool, stream, stitched_size, out, &available);
        if (status != VB_OK || *out) return status;
    } else if (stitching) {
        uint64_t available = 0, needed = (size + VB_CC_SMALL_BUFFER - 1) / VB_CC_SMALL_BUFFER * VB_CC_SMALL_BUFFER;
        status = stitch_holes(cc, pool, stream, size, out, &available);
        if (status != VB_OK || *out) return status;
        /* 3: fewer new units than expandable's growth would map. */
        if (available < needed && (needed - available) / VB_CC_SMALL_BUFFER < wanted - spare) {
            status = grow_by(cc, candidate, needed - available);
            if (status != VB_OK) return status;
            status = stitch_holes(cc, pool, stream, size, out, &available);
            if (status != VB_OK || *out) return status;
            status = vb_vm_range_find_block(cc, pool, stream, size, VB_VM_HANDLE_PER_GROWTH, &candidate);
            if (status != VB_OK) return status;
            wanted = chunks_to_map(candidate, size, &last);
        }
    }
    if (wanted > spare) reclaim_holes(cc, pool, candidate, last, wanted - spare);
    int partly = 0;
    status = vb_vm_range_alloc_block(cc, pool, stream, size, VB_VM_HANDLE_PER_GROWTH, out, &partly);
    /* The block served holds what it merged with (a hole until the core
     * hands its front out: stitch_malloc); a growth that failed may have
     * mapped part of it, and then every hole is noted afresh. One that
     * failed before mapping anything (the device out of memory: the common
     * case) changed no free block, and noting them all again on every
     * out-of-memory retry made such replays quadratic. */
    if (status == VB_OK) renote(cc, *out);
    else if (partly) renote_pool(cc, pool);
    return status;
}

/* release_blocks over the pool's holes with whole handles only (the
 * index's movable ones), in the order the walk over every free block
 * visits them: a free block with no whole handle gives nothing back, and
 * unmapping one hole changes no other (vb_vm_range_release_block). Walks
 * every free block when the index is gone, or host memory runs out for
 * the list. */
static void release_holes(vb_cc_allocator *cc, vb_cc_pool *pool)
{
    const vb_hole_index *holes = holes_of(cc, pool);
    vb_cc_block **blocks = stitch_of(cc)->unindexed ? NULL : malloc((holes->movable.count + 1) * sizeof *blocks);
    if (!blocks) {
        vb_vm_range_release_pool_noting(cc, pool, note_unmapped);
        return;
    }
    size_t taken = 0;
    for (vb_hole *hole = vb_hole_index_movable_from(holes, 0); hole;
         hole = vb_hole_index_movable_from(holes, hole->figures.addr + 1))
        if (lendable(hole->figures.block, pool)) blocks[taken++] = hole->figures.block; /* as the walk's: in the free set */
    vb_cc_sort_by_size(blocks, taken);
    for (size_t i = 0; i < taken; i++) vb_vm_range_release_block(cc, pool, blocks[i], note_unmapped);
    free(blocks);
}

/* release_pool of the stitching source: expandable's release_blocks, with
 * the pool's spare handles released first and then every dormant stitched
 * range of both pools (either may map this pool's handles, which stay
 * mapped while one does). Only the holes with whole handles are visited,
 * and the holes index follows each one unmapped (note_unmapped): the
 * others are as they were. (Walking every free block and noting them all
 * afresh after each release made a replay that keeps running out of
 * memory, which releases on every retry, quadratic.) */
static void stitching_release_pool(vb_cc_allocator *cc, vb_cc_pool *pool)
{
    vb_vm_range_release_spares(cc, pool);
    release_stitched(cc, &cc->small_pool);
    release_stitched(cc, &cc->large_pool);
    release_holes(cc, pool);
}

/* destroy_segment of the stitching source: a stitched range's mappings
 * and addresses go (the core destroys borrowed segments before the ranges
 * whose handles they map), a range as expandable's does. */
static void stitching_destroy_segment(vb_cc_allocator *cc, vb_cc_segment *segment)
{
    if (!segment->borrowed) {
        vb_vm_range_destroy(cc, segment);
        return;
    }
    stitched_range *stitched = stitched_of(segment);
    unmap_stitched(cc, stitched);
    free(stitched);
}

static const vb_cc_source stitching_segments = {
    .expandable = 1,
    .alloc_block = stitching_alloc_block,
    .release_pool = stitching_release_pool,
    .release_block = NULL, /* no block is ever a whole range: nothing to free one by one */
    .destroy_segment = stitching_destroy_segment,
    .take_freed = stitching_take_freed,
};

/* ------------------------------------------------------------------------ */
/* Options and the ops table                                                  */
/* ------------------------------------------------------------------------ */


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
     "handle (less memory), more driver calls; 0: no limit, else a multiple of 2 of at least chunk_mb; default 64"},
    {"stitch_max_maps", VB_OPTION_U64, offsetof(vb_cc_settings, stitch_max_maps), 0, 4096,
     "most handles a stitched range (the handles free holes hold, mapped again side by side) may map, "
     "each a map and its share of one access call; 0: no stitched ranges (whole handles in holes are "
     "still moved); default 0"},
};

#define STITCH_OPTION_COUNT (sizeof stitch_options / sizeof stitch_options[0])

/* create: the shared caching core on the stitching source (as
 * vb_cc_create_with, in a stitch_allocator: the core's state and the
 * holes index), chunk_mb and handle_max_mb defaulting to
 * STITCH_DEFAULT_CHUNK_MB and STITCH_DEFAULT_HANDLE_MAX_MB. */
static vb_status stitch_create(vb_device *dev, const vb_config *config, void **state)
{
    vb_cc_settings settings;
    vb_cc_default_settings(&settings);
    settings.chunk_mb = STITCH_DEFAULT_CHUNK_MB;
    settings.handle_max_mb = STITCH_DEFAULT_HANDLE_MAX_MB;
    settings.stitch_max_maps = STITCH_DEFAULT_MAX_MAPS;
    vb_status status = vb_config_apply(config, stitch_options, STITCH_OPTION_COUNT, &settings, "stitch");
    if (status != VB_OK) return status;
    stitch_allocator *stitch = calloc(1, sizeof *stitch);
    if (!stitch) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    status = vb_cc_init(&stitch->cc, dev, &stitching_segments, &settings, "stitch");
    if (status != VB_OK) {
        free(stitch);
        return status;
    }
    vb_hole_index_init(&stitch->holes[0], 0);
    vb_hole_index_init(&stitch->holes[1], 1); /* pick_holes picks from the large pool's */
    *state = &stitch->cc;
    return VB_OK;
}

/* destroy: the holes index, then the core's state (which frees the
 * stitch_allocator it starts). */
static void stitch_destroy(void *state)
{
    stop_indexing(state);
    vb_cc_destroy(state);
}

/* malloc: the core's; a hole it handed out the front of is noted again. */
static vb_status stitch_malloc(void *state, uint64_t size, vb_stream stream, vb_grant *out)
{
    vb_status status = vb_cc_malloc(state, size, stream, out);
    if (status == VB_OK) note_handed_out(state, out->addr);
    return status;
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
    /* The caching core's ops (VB_CC_SHARED_OPS) but for destroy and malloc, which keep the holes index. */
    .destroy = stitch_destroy,
    .malloc = stitch_malloc,
    .free = vb_cc_free,
    .record_stream = vb_cc_record_stream,
    .empty_cache = vb_cc_empty_cache,
    .largest_free_block = vb_cc_largest_free_block,
    .segments = vb_cc_segments,
};
