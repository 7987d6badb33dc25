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
 * Statistics (counted at the seam, allocator.h): reserved = the physical
 * chunks created (each is mapped from the moment map_chunks succeeds until
 * it is unmapped and released); driver_alloc_calls counts vm_create
 * (cuMemCreate) calls and driver_free_calls vm_release (cuMemRelease) calls.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "caching_core.h"

/* One physical handle mapped in a range, over units [first, first + span)
 * (expandable: one unit, a chunk; stitch: a 2 MiB unit, and a handle covers
 * as many as one growth mapped). */
typedef struct expandable_handle {
    size_t first, span;
    vb_phys handle;
    size_t stitched;              /* stitched ranges mapping part of it: it is not moved or released */
} expandable_handle;

/* A reserved range (PyTorch's ExpandableSegment); core segment first. */
typedef struct expandable_segment {
    vb_cc_segment segment;
    uint64_t chunk_size;          /* the unit: 2 MiB small pool, cc->large_chunk (20 MiB) large pool; stitch 2 MiB */
    size_t growth_units;          /* stitch: a new handle covers at least this many units (when it fits) */
    size_t max_units;             /* stitch: and at most this many (cc->handle_max; SIZE_MAX: no limit) */
    int variable;                 /* stitch: one handle per growth, of any whole number of units */
    expandable_handle *handles;   /* the mapped handles, by first unit (a stitched range: none) */
    size_t handle_count, handle_capacity;
    /* A stitched range (segment.borrowed; below): the parts of ranges it maps, in its order, and
     * while it is lent them, the lent blocks holding them. */
    struct stitch_piece *pieces;
    struct vb_cc_block **lent;
    size_t piece_count;
    int dormant;                  /* its units are back in their ranges; its mappings stay */
} expandable_segment;

static expandable_segment *expandable_of(vb_cc_segment *segment)
{
    return (expandable_segment *)segment;
}

/* ------------------------------------------------------------------------ */
/* Physical handles                                                           */
/* ------------------------------------------------------------------------ */

/* Makes room for `more` handles past the mapped ones; 0, or -1 when host
 * memory runs out. */
static int reserve_handles(expandable_segment *es, size_t more)
{
    size_t count = es->handle_count + more;
    if (count <= es->handle_capacity) return 0;
    size_t capacity = es->handle_capacity ? es->handle_capacity : 16;
    while (capacity < count) capacity *= 2;
    expandable_handle *grown = realloc(es->handles, capacity * sizeof *grown);
    if (!grown) return -1;
    es->handles = grown;
    es->handle_capacity = capacity;
    return 0;
}

/* The index of the first mapped handle starting at or after `unit`. */
static size_t handle_lower_bound(const expandable_segment *es, size_t unit)
{
    size_t lo = 0, hi = es->handle_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (es->handles[mid].first < unit) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Makes room for `more` spare handles in the pool; 0, or -1 when host
 * memory runs out. */
static int reserve_spares(vb_cc_pool *pool, size_t more)
{
    size_t count = pool->spare_count + more;
    if (count <= pool->spare_capacity) return 0;
    size_t capacity = pool->spare_capacity ? pool->spare_capacity : 16;
    while (capacity < count) capacity *= 2;
    vb_cc_spare *grown = realloc(pool->spare_chunks, capacity * sizeof *grown);
    if (!grown) return -1;
    pool->spare_chunks = grown;
    pool->spare_capacity = capacity;
    return 0;
}

/* Releases the pool's spare handles. */
static void release_spares(vb_cc_allocator *cc, vb_cc_pool *pool)
{
    while (pool->spare_count) cc->device->ops->vm_release(cc->device, pool->spare_chunks[--pool->spare_count].handle);
}

/* Unmaps mapped handles [from, to) (by index), one call per handle, and
 * drops them from the range: released, or, with `keep` (room reserved by
 * reserve_spares), kept as keep's spares. */
static void unmap_chunks(vb_cc_allocator *cc, expandable_segment *es, size_t from, size_t to, vb_cc_pool *keep)
{
    vb_device *dev = cc->device;
    for (size_t i = from; i < to; i++) {
        const expandable_handle *h = &es->handles[i];
        uint64_t bytes = h->span * es->chunk_size;
        dev->ops->vm_unmap(dev, es->segment.base + h->first * es->chunk_size, bytes);
        if (keep)
            keep->spare_chunks[keep->spare_count++] = (vb_cc_spare){h->handle, bytes};
        else
            dev->ops->vm_release(dev, h->handle);
    }
    if (to == from) return;
    memmove(es->handles + from, es->handles + to, (es->handle_count - to) * sizeof *es->handles);
    es->handle_count -= to - from;
}

/* Picks the handles that will back units [begin, ...), at least up to
 * `end` and never past `limit`, into added[] (in unit order; room for
 * them reserved): the pool's spares that fit first (stitch), then new ones
 * (expandable: one per unit; stitch: one covering the rest, at least
 * growth_units and at most max_units where they fit). Returns the count in
 * *count; on failure releases every handle it picked (the spares among
 * them) and returns the status. */
static vb_status back_units(vb_cc_allocator *cc, expandable_segment *es, size_t begin, size_t end, size_t limit,
                            expandable_handle *added, size_t *count)
{
    vb_device *dev = cc->device;
    vb_cc_pool *pool = es->segment.pool;
    size_t at = begin, n = 0;
    for (size_t i = pool->spare_count; es->variable && at < end && i-- > 0;) {
        size_t span = (size_t)(pool->spare_chunks[i].size / es->chunk_size);
        if (at + span > limit) continue;
        added[n++] = (expandable_handle){at, span, pool->spare_chunks[i].handle, 0};
        pool->spare_chunks[i] = pool->spare_chunks[--pool->spare_count];
        at += span;
    }
    vb_status status = VB_OK;
    while (at < end && status == VB_OK) {
        size_t span = 1;
        if (es->variable) {
            span = end - at > es->growth_units ? end - at : es->growth_units;
            if (span > es->max_units) span = es->max_units;
            if (at + span > limit) span = limit - at;
        }
        vb_phys handle;
        status = dev->ops->vm_create(dev, span * es->chunk_size, &handle);
        if (status == VB_OK) {
            added[n++] = (expandable_handle){at, span, handle, 0};
            at += span;
        }
    }
    if (status != VB_OK) {
        while (n) dev->ops->vm_release(dev, added[--n].handle);
        return status;
    }
    *count = n;
    return VB_OK;
}

/* ExpandableSegment::map: maps units [begin, end) (and, stitch, up to
 * `limit` where a handle reaches past end), taking the pool's spare
 * handles first and creating the rest; *mapped_end is where the mapped
 * units end. On failure everything this call took or created is released
 * and the status returned (VB_ERR_OOM when the device ran out). */
static vb_status map_chunks(vb_cc_allocator *cc, expandable_segment *es, size_t begin, size_t end, size_t limit,
                            size_t *mapped_end)
{
    vb_device *dev = cc->device;
    vb_cc_pool *pool = es->segment.pool;
    size_t bound = es->variable ? pool->spare_count + (end - begin) / es->max_units + 1 : end - begin;
    /* The new handles are gathered at the end of the room, clear of the
     * mapped ones moving up to make their place. */
    if (reserve_handles(es, 2 * bound) != 0) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    expandable_handle *added = es->handles + es->handle_capacity - bound;
    size_t count = 0;
    vb_status status = back_units(cc, es, begin, end, limit, added, &count);
    if (status != VB_OK) return status;
    *mapped_end = begin;
    if (count == 0) return VB_OK;
    size_t mapped = 0;
    for (; status == VB_OK && mapped < count; mapped++)
        status = dev->ops->vm_map(dev, es->segment.base + added[mapped].first * es->chunk_size,
                                  added[mapped].span * es->chunk_size, added[mapped].handle);
    if (status != VB_OK) mapped--;
    size_t backed = added[count - 1].first + added[count - 1].span;
    /* One access call over the new handles together, as PyTorch's ExpandableSegment::map does. */
    if (status == VB_OK)
        status = dev->ops->vm_set_access(dev, es->segment.base + begin * es->chunk_size,
                                         (backed - begin) * es->chunk_size);
    if (status != VB_OK) {
        for (size_t i = 0; i < count; i++) {
            if (i < mapped)
                dev->ops->vm_unmap(dev, es->segment.base + added[i].first * es->chunk_size,
                                   added[i].span * es->chunk_size);
            dev->ops->vm_release(dev, added[i].handle);
        }
        return status;
    }
    size_t at = handle_lower_bound(es, begin);
    memmove(es->handles + at + count, es->handles + at, (es->handle_count - at) * sizeof *es->handles);
    memmove(es->handles + at, added, count * sizeof *added);
    es->handle_count += count;
    *mapped_end = backed;
    return VB_OK;
}

/* ------------------------------------------------------------------------ */
/* Growing: find_expandable_block, map_block, try_allocate_expandable_block   */
/* ------------------------------------------------------------------------ */

/* 1 if the free blocks and unmapped space from `block` on add up to `size`. */
static int has_room(const vb_cc_block *block, uint64_t size)
{
    uint64_t bytes = 0;
    for (; bytes < size && vb_cc_block_available(block); block = block->next) bytes += block->size;
    return bytes >= size;
}

/* A new range for (stream, pool): 1.125 x the device's memory of address
 * space, rounded to whole units (2 MiB small pool, cc->large_chunk large
 * pool, rounded up to the device's granularity; stitch: 2 MiB for both,
 * its large pool growing by at least cc->large_chunk), one unmapped block
 * covering it. */
static vb_status new_range(vb_cc_allocator *cc, vb_cc_pool *pool, vb_stream stream, vb_cc_block **out)
{
    vb_device *dev = cc->device;
    uint64_t free_bytes = 0, total_bytes = 0;
    vb_status status = dev->ops->mem_info(dev, &free_bytes, &total_bytes);
    if (status != VB_OK) return status;
    uint64_t granularity = dev->ops->vm_granularity(dev);
    int variable = cc->source == &vb_cc_stitching_segments;
    uint64_t chunk = pool->is_small || variable ? VB_CC_SMALL_BUFFER : cc->large_chunk;
    chunk = (chunk + granularity - 1) / granularity * granularity;
    uint64_t wanted = total_bytes + total_bytes / 8;
    uint64_t size = (wanted + chunk - 1) / chunk * chunk;
    vb_addr base = 0;
    status = dev->ops->vm_reserve(dev, size, &base);
    if (status != VB_OK) return status;
    expandable_segment *es = calloc(1, sizeof *es);
    vb_cc_block *block = es ? vb_cc_block_new(cc, base, size, stream, pool, &es->segment) : NULL;
    if (!block) {
        free(es);
        dev->ops->vm_free(dev, base, size);
        return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    }
    es->chunk_size = chunk;
    es->variable = variable;
    es->growth_units = 1;
    es->max_units = SIZE_MAX;
    if (variable && !pool->is_small) es->growth_units = (size_t)((cc->large_chunk + chunk - 1) / chunk);
    if (variable && cc->handle_max) {
        es->max_units = (size_t)(cc->handle_max / chunk);
        if (es->max_units < es->growth_units) es->max_units = es->growth_units;
    }
    es->segment.base = base;
    es->segment.size = size;
    es->segment.head = block;
    es->segment.pool = pool;
    es->segment.stream = stream;
    block->mapped = 0;
    vb_oset_insert(&pool->unmapped, &block->node);
    vb_cc_segment_add(cc, &es->segment);
    *out = block;
    return VB_OK;
}

/* find_expandable_block: the lowest address of the stream's ranges where
 * free blocks and unmapped space together hold `size`, starting at an
 * unmapped block or the free block just before it; a new range when none. */
static vb_status find_expandable_block(vb_cc_allocator *cc, vb_cc_pool *pool, vb_stream stream, uint64_t size,
                                       vb_cc_block **out)
{
    vb_cc_block probe = {.stream = stream, .addr = 0};
    for (vb_oset_node *node = vb_oset_lower_bound(&pool->unmapped, &probe.node); node;
         node = vb_oset_next(&pool->unmapped, node)) {
        vb_cc_block *candidate = VB_OSET_ENTRY(node, vb_cc_block, node);
        if (candidate->stream != stream) break;
        if (vb_cc_block_available(candidate->prev)) candidate = candidate->prev;
        if (has_room(candidate, size)) {
            *out = candidate;
            return VB_OK;
        }
    }
    return new_range(cc, pool, stream, out);
}

/* map_block: backs the first `size` bytes of unmapped block `to_map` with
 * whole chunks; the mapped part joins its free neighbours and the pool, the
 * rest stays unmapped. */
static vb_status map_block(vb_cc_allocator *cc, vb_cc_block *to_map, uint64_t size)
{
    expandable_segment *es = expandable_of(to_map->segment);
    uint64_t offset = to_map->addr - es->segment.base;
    size_t begin = offset / es->chunk_size;
    size_t end = (offset + size + es->chunk_size - 1) / es->chunk_size;
    size_t limit = (offset + to_map->size) / es->chunk_size;
    /* The unmapped rest's struct first: nothing is left to undo when host memory runs out. */
    vb_cc_block *rest = vb_cc_block_new(cc, to_map->addr, to_map->size, to_map->stream, to_map->pool,
                                        to_map->segment);
    if (!rest) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    size_t mapped_end = end;
    vb_status status = map_chunks(cc, es, begin, end, limit, &mapped_end);
    if (status != VB_OK) {
        vb_cc_block_recycle(cc, rest);
        return status;
    }
    uint64_t mapped_size = (mapped_end - begin) * es->chunk_size;
    if (mapped_size < to_map->size) {
        rest->addr = to_map->addr + mapped_size;
        rest->size = to_map->size - mapped_size;
    } else {
        vb_cc_block_recycle(cc, rest);
        rest = NULL;
    }
    vb_oset_remove(&to_map->pool->unmapped, &to_map->node);
    to_map->mapped = 1;
    if (rest) {
        rest->mapped = 0;
        vb_cc_splice(rest, to_map, to_map->next);
        vb_oset_insert(&to_map->pool->unmapped, &rest->node);
        to_map->size = mapped_size;
    }
    vb_cc_try_merge(cc, to_map, to_map->prev);
    vb_cc_try_merge(cc, to_map, to_map->next);
    vb_cc_pool_insert(to_map->pool, to_map);
    return VB_OK;
}

/* try_allocate_expandable_block (alloc_block of this source): maps just
 * enough chunks at the found place that one free block holds `size`. */
static vb_status expandable_alloc_block(vb_cc_allocator *cc, vb_cc_pool *pool, vb_stream stream, uint64_t size,
                                        uint64_t alloc_size, vb_cc_block **out)
{
    (void)alloc_size;
    vb_cc_block *candidate = NULL;
    vb_status status = find_expandable_block(cc, pool, stream, size, &candidate);
    if (status != VB_OK) return status;
    if (!candidate->mapped) {
        status = map_block(cc, candidate, candidate->size < size ? candidate->size : size);
        if (status != VB_OK) return status;
    }
    while (candidate->size < size) {
        /* candidate is free and mapped; the unmapped space after it grows it. */
        vb_cc_block *next = candidate->next;
        uint64_t missing = size - candidate->size;
        status = map_block(cc, next, missing < next->size ? missing : next->size);
        if (status != VB_OK) return status;
        candidate = next;
    }
    vb_cc_pool_erase(pool, candidate);
    *out = candidate;
    return VB_OK;
}

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
 * released (expandable_handle.stitched). */

/* Bytes [offset, offset + bytes) of a range that a stitched range maps:
 * offset is where a handle starts; bytes are whole handles but for the
 * last piece. */
typedef struct stitch_piece {
    expandable_segment *range;
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

/* The index of the handle holding unit `unit` of range `es`. */
static size_t handle_of_unit(const expandable_segment *es, size_t unit)
{
    return handle_lower_bound(es, unit + 1) - 1;
}

/* What free block `block` of a range offers, into *out; 0 when no handle
 * starts inside it. */
static uint64_t hole_in(vb_cc_block *block, hole_piece *out)
{
    expandable_segment *es = expandable_of(block->segment);
    uint64_t unit = es->chunk_size, offset = block->addr - es->segment.base, end = offset + block->size;
    size_t index = handle_lower_bound(es, (size_t)((offset + unit - 1) / unit));
    *out = (hole_piece){block, {es, 0, 0, 0}, 0};
    if (index >= es->handle_count || es->handles[index].first * unit >= end) return 0;
    out->piece.offset = es->handles[index].first * unit;
    out->piece.bytes = end - out->piece.offset;
    for (; index < es->handle_count && (es->handles[index].first + es->handles[index].span) * unit <= end; index++)
        out->whole += es->handles[index].span * unit;
    return out->piece.bytes;
}

/* 1 if `block` is memory a stitched range may be lent: free, mapped, with
 * nothing pending, in one of the pool's own ranges (not a stitched one). */
static int lendable(const vb_cc_block *block, const vb_cc_pool *pool)
{
    return block->mapped && vb_cc_block_available(block) && block->segment->pool == pool &&
           !block->segment->borrowed;
}

/* Applies `step` (+1, -1 or 0) to the stitched counts of the handles a
 * piece maps; returns how many mappings it takes (one per handle) and,
 * when `bytes` is not NULL, their bytes in *bytes. */
static size_t count_piece_maps(const stitch_piece *piece, int step, uint64_t *bytes)
{
    expandable_segment *es = piece->range;
    size_t maps = 0, end = end_unit(piece);
    for (size_t at = handle_of_unit(es, first_unit(piece)); at < es->handle_count && es->handles[at].first < end;
         at++) {
        es->handles[at].stitched += step;
        if (bytes) *bytes += es->handles[at].span * es->chunk_size;
        maps++;
    }
    return maps;
}

/* The free blocks pick_holes chooses from. */
typedef struct hole_search {
    hole_piece *holes;
    size_t count, capacity;
    uint64_t whole;               /* whole handles' bytes, all holes */
    int failed;                   /* host memory ran out */
} hole_search;

/* vb_cc_pool_each_free visitor: notes what a free block offers; 0 (stop) when host memory runs out. */
static int gather_hole(void *context, vb_cc_block *block)
{
    hole_search *search = context;
    hole_piece hole;
    if (!vb_cc_block_available(block) || hole_in(block, &hole) == 0) return 1;
    if (search->count == search->capacity) {
        size_t capacity = search->capacity ? 2 * search->capacity : 64;
        hole_piece *grown = realloc(search->holes, capacity * sizeof *grown);
        if (!grown) {
            search->failed = 1;
            return 0;
        }
        search->holes = grown;
        search->capacity = capacity;
    }
    search->holes[search->count++] = hole;
    search->whole += hole.whole;
    return 1;
}

/* Most whole bytes first (the fewest pieces, so the fewest mappings), the
 * lowest address first among equals. */
static int by_more_whole(const void *a, const void *b)
{
    const hole_piece *ha = a, *hb = b;
    if (ha->whole != hb->whole) return ha->whole < hb->whole ? 1 : -1;
    return ha->block->addr < hb->block->addr ? -1 : ha->block->addr > hb->block->addr;
}

/* Picks the pieces for `size` bytes out of the free blocks of the pool's
 * own ranges (any stream), into *picked (malloc'd, *count of them, in the
 * order they are mapped): while no hole offers all that is still needed,
 * the whole handles of the hole with the most; then the hole that offers
 * it with the least to spare. 0 when that takes at most
 * cc->stitch_max_maps mappings; -1 when not (nothing picked). *available
 * gets the whole handles' bytes the holes hold. */
static int pick_holes(vb_cc_allocator *cc, vb_cc_pool *pool, uint64_t size, hole_piece **picked, size_t *count,
                      uint64_t *available)
{
    hole_search search = {0};
    vb_cc_pool_each_free(pool, gather_hole, &search);
    *available = search.whole;
    if (search.failed || search.count == 0) {
        free(search.holes);
        return -1;
    }
    qsort(search.holes, search.count, sizeof *search.holes, by_more_whole);
    uint64_t needed = size;
    size_t maps = 0, n = 0; /* holes [0, n) are taken, in order */
    while (needed > 0 && maps <= cc->stitch_max_maps) {
        size_t last = SIZE_MAX;
        for (size_t i = n; i < search.count; i++)
            if (search.holes[i].piece.bytes >= needed &&
                (last == SIZE_MAX || search.holes[i].piece.bytes < search.holes[last].piece.bytes))
                last = i;
        size_t take = last != SIZE_MAX ? last : n;
        if (take >= search.count || (last == SIZE_MAX && search.holes[take].whole == 0)) break;
        hole_piece chosen = search.holes[take];
        search.holes[take] = search.holes[n];
        chosen.piece.bytes = last != SIZE_MAX ? needed : chosen.whole;
        search.holes[n++] = chosen;
        maps += count_piece_maps(&chosen.piece, 0, NULL);
        needed -= chosen.piece.bytes;
    }
    if (needed > 0 || maps > cc->stitch_max_maps) {
        free(search.holes);
        return -1;
    }
    *picked = search.holes;
    *count = n;
    return 0;
}

/* Maps the handles a piece touches, whole, at `at` + *mapped, one vm_map
 * each; the bytes mapped are added to *mapped (on failure too). */
static vb_status map_piece(vb_device *dev, const stitch_piece *piece, vb_addr at, uint64_t *mapped)
{
    const expandable_segment *es = piece->range;
    size_t end = end_unit(piece);
    for (size_t index = handle_of_unit(es, first_unit(piece)); index < es->handle_count && es->handles[index].first < end;
         index++) {
        uint64_t bytes = es->handles[index].span * es->chunk_size;
        vb_status status = dev->ops->vm_map(dev, at + *mapped, bytes, es->handles[index].handle);
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
 * recycled), `block` itself becomes the lent middle. */
static void lend_piece(vb_cc_allocator *cc, vb_cc_block *block, const stitch_piece *piece, vb_cc_block *before,
                       vb_cc_block *after)
{
    vb_addr start = piece->range->segment.base + piece->offset;
    uint64_t before_size = start - block->addr, after_size = block->size - before_size - piece->bytes;
    vb_cc_pool_erase(block->pool, block);
    if (before_size) {
        before->addr = block->addr;
        before->size = before_size;
        before->stream = block->stream;
        before->segment = block->segment;
        vb_cc_splice(before, block->prev, block);
        vb_cc_pool_insert(block->pool, before);
    } else {
        vb_cc_block_recycle(cc, before);
    }
    if (after_size) {
        after->addr = start + piece->bytes;
        after->size = after_size;
        after->stream = block->stream;
        after->segment = block->segment;
        vb_cc_splice(after, block, block->next);
        vb_cc_pool_insert(block->pool, after);
    } else {
        vb_cc_block_recycle(cc, after);
    }
    block->addr = start;
    block->size = piece->bytes;
    block->allocated = VB_CC_LENT;
}

/* Lends stitched range `es` its pieces again, when each lies in a free
 * hole: 1 (its block is free again, in no set), else 0 and nothing
 * changed. No driver call but stream waits: work queued on a hole's own
 * stream may still use it, so another stream's range waits for it first
 * (as unmap_block does). */
static int lend_stitched(vb_cc_allocator *cc, expandable_segment *es)
{
    vb_cc_pool *pool = &cc->large_pool; /* where its holes are */
    for (size_t i = 0; i < es->piece_count; i++)
        if (!hole_holding(cc, &es->pieces[i], pool, &es->lent[i])) return 0;
    vb_cc_block **structs = malloc(2 * es->piece_count * sizeof *structs);
    size_t made = 0;
    while (structs && made < 2 * es->piece_count && (structs[made] = vb_cc_block_new(cc, 0, 0, 0, pool, NULL)))
        made++;
    if (made < 2 * es->piece_count) {
        while (made) vb_cc_block_recycle(cc, structs[--made]);
        free(structs);
        return 0;
    }
    /* Found again one by one: pieces of one hole lie in what the last left of it. */
    for (size_t i = 0; i < es->piece_count; i++) {
        hole_holding(cc, &es->pieces[i], pool, &es->lent[i]);
        if (es->lent[i]->stream != es->segment.stream)
            cc->device->ops->stream_synchronize(cc->device, es->lent[i]->stream);
        lend_piece(cc, es->lent[i], &es->pieces[i], structs[2 * i], structs[2 * i + 1]);
    }
    free(structs);
    es->segment.head->allocated = 0;
    es->dormant = 0;
    return 1;
}

/* Gives the bytes a stitched range was lent back to their ranges (free
 * blocks of the pool, merged with their neighbours); the range stays
 * mapped, dormant (its block marked VB_CC_LENT: shown by no segment
 * visit). Work queued on the range's stream may still use the memory:
 * another stream's range waits for it first. */
static void return_stitched(vb_cc_allocator *cc, expandable_segment *es)
{
    int other_stream = 0;
    for (size_t i = 0; i < es->piece_count; i++) other_stream |= es->lent[i]->stream != es->segment.stream;
    if (other_stream) cc->device->ops->stream_synchronize(cc->device, es->segment.stream);
    for (size_t i = 0; i < es->piece_count; i++) {
        vb_cc_block *hole = es->lent[i];
        hole->allocated = 0;
        vb_cc_try_merge(cc, hole, hole->prev);
        vb_cc_try_merge(cc, hole, hole->next);
        vb_cc_pool_insert(hole->pool, hole);
        vb_cc_block *near = hole->next && hole->next->allocated == 1 ? hole->next : hole->prev;
        es->pieces[i].anchor = near && near->allocated == 1 ? near->addr : 0;
    }
    es->segment.head->allocated = VB_CC_LENT;
    es->dormant = 1;
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
static void unmap_stitched(vb_cc_allocator *cc, expandable_segment *es)
{
    cc->device->ops->vm_unmap(cc->device, es->segment.base, es->segment.size);
    arena_give(cc, es->segment.base, es->segment.size);
    for (size_t i = 0; i < es->piece_count; i++) count_piece_maps(&es->pieces[i], -1, NULL);
    free(es->pieces);
    free(es->lent);
}

/* Dormant stitched ranges a pool keeps at most: past it the oldest goes
 * (its mappings cost nothing while kept, but each pins its handles, and
 * reuse_stitched looks through them all). */
#define STITCHED_RANGES_MAX 4096

/* Removes dormant stitched range `es` from the pool's list (at `index`),
 * unmaps it and frees it. */
static void drop_stitched(vb_cc_allocator *cc, vb_cc_pool *pool, size_t index)
{
    expandable_segment *es = expandable_of(pool->stitched[index]);
    memmove(pool->stitched + index, pool->stitched + index + 1,
            (pool->stitched_count - index - 1) * sizeof *pool->stitched);
    pool->stitched_count--;
    vb_cc_segment_remove(cc, &es->segment);
    cc->device->ops->stream_synchronize(cc->device, es->segment.stream);
    unmap_stitched(cc, es);
    vb_cc_block_recycle(cc, es->segment.head);
    free(es);
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
    const uint64_t unit = VB_CC_SMALL_BUFFER; /* stitch's ranges all have 2 MiB units (new_range) */
    hole_piece *holes = NULL;
    size_t count = 0;
    *out = NULL;
    *available = 0;
    if (pick_holes(cc, from, size, &holes, &count, available) != 0) return VB_OK;
    expandable_segment *es = calloc(1, sizeof *es);
    stitch_piece *pieces = calloc(count, sizeof *pieces);
    vb_cc_block **lent = calloc(count, sizeof *lent);
    if (pool->stitched_count == pool->stitched_capacity) {
        size_t capacity = pool->stitched_capacity ? 2 * pool->stitched_capacity : 16;
        vb_cc_segment **grown = realloc(pool->stitched, capacity * sizeof *grown);
        if (grown) {
            pool->stitched = grown;
            pool->stitched_capacity = capacity;
        } else {
            free(es);
            es = NULL; /* reported below as out of host memory */
        }
    }
    uint64_t range_size = 0, block_size = 0, mapped = 0;
    for (size_t i = 0; i < count; i++) {
        count_piece_maps(&holes[i].piece, 0, &range_size);
        block_size += holes[i].piece.bytes;
    }
    vb_addr base = 0;
    vb_cc_block *block = NULL;
    vb_status status = es && pieces && lent ? arena_take(cc, range_size, &base)
                                           : vb_error(VB_ERR_HOST_OOM, "out of host memory");
    int taken = status == VB_OK;
    if (status == VB_OK && !(block = vb_cc_block_new(cc, base, block_size, stream, pool, &es->segment)))
        status = vb_error(VB_ERR_HOST_OOM, "out of host memory");
    for (size_t i = 0; status == VB_OK && i < count; i++) {
        pieces[i] = holes[i].piece;
        lent[i] = holes[i].block; /* where lend_stitched looks first */
        status = map_piece(dev, &pieces[i], base, &mapped);
    }
    if (status == VB_OK) status = dev->ops->vm_set_access(dev, base, range_size);
    free(holes);
    if (status == VB_OK) {
        es->chunk_size = unit;
        es->pieces = pieces;
        es->piece_count = count;
        es->lent = lent;
        es->segment = (vb_cc_segment){.base = base, .size = range_size, .head = block, .pool = pool,
                                      .stream = stream, .borrowed = 1};
        block->allocated = VB_CC_LENT;
        es->dormant = 1;
        if (lend_stitched(cc, es)) {
            for (size_t i = 0; i < count; i++) count_piece_maps(&pieces[i], +1, NULL);
            vb_cc_segment_add(cc, &es->segment);
            pool->stitched[pool->stitched_count++] = &es->segment;
            /* Past the limit the oldest dormant ones go (dropping shifts the rest down). */
            for (size_t i = 0; pool->stitched_count > STITCHED_RANGES_MAX && i < pool->stitched_count;)
                if (expandable_of(pool->stitched[i])->dormant) drop_stitched(cc, pool, i);
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
    free(es);
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
        expandable_segment *es = expandable_of(segment);
        if (es->dormant && segment->stream == stream && segment->head->size >= size &&
            segment->head->size - size < es->chunk_size && lend_stitched(cc, es))
            return segment->head;
    }
    return NULL;
}

/* empty_cache's first step: every dormant stitched range of the pool goes. */
static void release_stitched(vb_cc_allocator *cc, vb_cc_pool *pool)
{
    for (size_t i = pool->stitched_count; i-- > 0;)
        if (expandable_of(pool->stitched[i])->dormant) drop_stitched(cc, pool, i);
}

/* take_freed of the stitching source: a stitched range's block (its
 * whole, never split) gives its bytes back and waits, dormant. */
static int stitching_take_freed(vb_cc_allocator *cc, vb_cc_block *block)
{
    if (!block->segment->borrowed || vb_cc_block_is_split(block)) return 0;
    return_stitched(cc, expandable_of(block->segment));
    return 1;
}

/* ------------------------------------------------------------------------ */
/* Shrinking: unmap_block, release_blocks                                     */
/* ------------------------------------------------------------------------ */

/* unmap_block: unmaps the handles wholly inside free block `block`, from
 * the lowest, until at least `max_chunks` units are unmapped; the parts
 * before and after stay as free mapped blocks, the unmapped middle (`block`
 * itself) joins unmapped neighbours. The handles are released, or kept as
 * the spares of pool `keep` when it is not NULL. Returns the number of
 * units unmapped. */
static size_t unmap_block(vb_cc_allocator *cc, vb_cc_block *block, size_t max_chunks, vb_cc_pool *keep)
{
    expandable_segment *es = expandable_of(block->segment);
    uint64_t offset = block->addr - es->segment.base;
    size_t begin = (offset + es->chunk_size - 1) / es->chunk_size;
    size_t last = (offset + block->size) / es->chunk_size;
    /* Whole handles only: skip the rest of one that starts before the block,
     * stop before one that ends after it, one a stitched range maps, or
     * once max_chunks units are taken. */
    size_t from = handle_lower_bound(es, begin), to = from, units = 0;
    while (to < es->handle_count && es->handles[to].first + es->handles[to].span <= last && units < max_chunks &&
           !es->handles[to].stitched)
        units += es->handles[to++].span;
    if (to == from) return 0;
    begin = es->handles[from].first;
    size_t end = begin + units;
    if (keep && reserve_spares(keep, to - from) != 0) return 0;
    vb_addr start = es->segment.base + begin * es->chunk_size;
    uint64_t unmapped_size = (end - begin) * es->chunk_size;
    uint64_t before_size = start - block->addr, after_size = block->size - before_size - unmapped_size;
    vb_cc_block *before = before_size ? vb_cc_block_new(cc, block->addr, before_size, block->stream, block->pool,
                                                        block->segment)
                                      : NULL;
    vb_cc_block *after = after_size ? vb_cc_block_new(cc, start + unmapped_size, after_size, block->stream,
                                                      block->pool, block->segment)
                                    : NULL;
    if ((before_size && !before) || (after_size && !after)) {
        if (before) vb_cc_block_recycle(cc, before);
        if (after) vb_cc_block_recycle(cc, after);
        return 0;
    }
    /* cuMemUnmap does not wait for the work using the memory; PyTorch waits
     * for the range's stream first. */
    cc->device->ops->stream_synchronize(cc->device, es->segment.stream);
    unmap_chunks(cc, es, from, to, keep);
    vb_cc_pool_erase(block->pool, block);
    if (before) {
        vb_cc_splice(before, block->prev, block);
        vb_cc_pool_insert(block->pool, before);
    }
    if (after) {
        vb_cc_splice(after, block, block->next);
        vb_cc_pool_insert(block->pool, after);
    }
    block->addr = start;
    block->size = unmapped_size;
    block->mapped = 0;
    vb_cc_try_merge(cc, block, block->prev);
    vb_cc_try_merge(cc, block, block->next);
    vb_oset_insert(&block->pool->unmapped, &block->node);
    return end - begin;
}

/* release_expandable_segment: a range with nothing mapped goes back. */
static void release_range(vb_cc_allocator *cc, vb_cc_block *block)
{
    expandable_segment *es = expandable_of(block->segment);
    vb_oset_remove(&block->pool->unmapped, &block->node);
    vb_cc_segment_remove(cc, &es->segment);
    cc->device->ops->vm_free(cc->device, es->segment.base, es->segment.size);
    vb_cc_block_recycle(cc, block);
    free(es->handles);
    free(es);
}

/* release_blocks: unmaps the whole free chunks of every free block of the
 * pool; ranges left entirely unmapped are released. Unmapping removes only
 * the block itself from the free set, so the successor taken first stays valid. */
static void expandable_release_pool(vb_cc_allocator *cc, vb_cc_pool *pool)
{
    release_spares(cc, pool);
    /* Both pools' stitched ranges may map this pool's handles: all dormant ones go first. */
    release_stitched(cc, &cc->small_pool);
    release_stitched(cc, &cc->large_pool);
    vb_oset_node *node = vb_oset_first(&pool->blocks);
    while (node) {
        vb_oset_node *next = vb_oset_next(&pool->blocks, node);
        vb_cc_block *block = VB_OSET_ENTRY(node, vb_cc_block, node);
        if (block->segment->borrowed) {
            node = next;
            continue;
        }
        unmap_block(cc, block, SIZE_MAX, NULL);
        if (!block->mapped && !vb_cc_block_is_split(block)) release_range(cc, block);
        node = next;
    }
}

/* At destroy: every mapped handle and the range go back (a stitched
 * range's mappings first: the core destroys borrowed segments first). */
static void expandable_destroy_segment(vb_cc_allocator *cc, vb_cc_segment *segment)
{
    expandable_segment *es = expandable_of(segment);
    if (segment->borrowed) {
        unmap_stitched(cc, es);
    } else {
        unmap_chunks(cc, es, 0, es->handle_count, NULL);
        cc->device->ops->vm_free(cc->device, segment->base, segment->size);
        free(es->handles);
    }
    free(es);
}

static const vb_cc_source expandable_segments = {
    .expandable = 1,
    .alloc_block = expandable_alloc_block,
    .release_pool = expandable_release_pool,
    .release_block = NULL, /* no block is ever a whole range: nothing to free one by one */
    .destroy_segment = expandable_destroy_segment,
};

/* ------------------------------------------------------------------------ */
/* Stitching: handles from holes before new ones (the `stitch` strategy)     */
/* ------------------------------------------------------------------------ */


/* The units expandable_alloc_block needs mapped to serve `size` bytes from
 * `candidate` (what find_expandable_block chose); *last is set to the last
 * block it would touch. */
static size_t chunks_to_map(vb_cc_block *candidate, uint64_t size, vb_cc_block **last)
{
    uint64_t chunk = expandable_of(candidate->segment)->chunk_size, bytes = 0;
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

/* 1 if `block` is a hole the stitching may take handles from: free, mapped,
 * with no pending use, and outside [lo, hi) of the range `keep`, the blocks
 * the request is about to use and their neighbours (taking from those,
 * the growing end among them, would only map the same handle back). */
static int is_hole(const vb_cc_block *block, const vb_cc_segment *keep, vb_addr lo, vb_addr hi)
{
    if (!block->mapped || !vb_cc_block_available(block)) return 0;
    if (block->segment == keep && block->addr < hi && block->addr + block->size > lo) return 0;
    return 1;
}

/* Takes whole handles out of holes of the pool's ranges (any stream),
 * lowest address first, into the pool's spares until at least `wanted`
 * units are taken; returns how many units. The pool's own only: a handle
 * moved into the other pool would serve only that pool's sizes (and moves
 * back and forth between them cost a call each way). */
static size_t reclaim_holes(vb_cc_allocator *cc, vb_cc_pool *pool, vb_cc_block *candidate, vb_cc_block *last,
                            size_t wanted)
{
    vb_cc_block *first = candidate->prev ? candidate->prev : candidate;
    if (last->next) last = last->next;
    vb_addr lo = first->addr, hi = last->addr + last->size;
    vb_cc_segment *keep = candidate->segment;
    size_t taken = 0;
    for (vb_oset_node *node = vb_oset_first(&cc->segments); node && taken < wanted;
         node = vb_oset_next(&cc->segments, node)) {
        vb_cc_segment *segment = VB_OSET_ENTRY(node, vb_cc_segment, node);
        if (segment->pool != pool || segment->borrowed) continue;
        for (vb_cc_block *block = segment->head; block && taken < wanted; block = block->next)
            if (is_hole(block, keep, lo, hi))
                taken += unmap_block(cc, block, wanted - taken, pool);
    }
    return taken;
}

/* The units of the pool's spare handles. */
static size_t spare_units(const vb_cc_pool *pool, uint64_t unit)
{
    size_t units = 0;
    for (size_t i = 0; i < pool->spare_count; i++) units += (size_t)(pool->spare_chunks[i].size / unit);
    return units;
}

/* Maps `lack` bytes (whole units, one handle of just that size) where the
 * range grows at `candidate` (find_expandable_block's choice): the new
 * memory joins the free blocks there, a hole like the others. */
static vb_status grow_by(vb_cc_allocator *cc, vb_cc_block *candidate, uint64_t lack)
{
    vb_cc_block *unmapped = candidate->mapped ? candidate->next : candidate;
    expandable_segment *es = expandable_of(unmapped->segment);
    size_t growth_units = es->growth_units;
    es->growth_units = 1; /* no chunk_mb round-up: the holes hold the rest */
    vb_status status = map_block(cc, unmapped, lack < unmapped->size ? lack : unmapped->size);
    es->growth_units = growth_units;
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
    uint64_t stitched_size = pool->is_small ? VB_CC_SMALL_BUFFER : size; /* a small range: one unit, split */
    if ((*out = reuse_stitched(cc, pool, stream, stitched_size)) != NULL) return VB_OK;
    vb_cc_block *candidate = NULL, *last = NULL;
    vb_status status = find_expandable_block(cc, pool, stream, size, &candidate);
    if (status != VB_OK) return status;
    size_t wanted = chunks_to_map(candidate, size, &last);
    size_t spare = spare_units(pool, expandable_of(candidate->segment)->chunk_size);
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
            status = find_expandable_block(cc, pool, stream, size, &candidate);
            if (status != VB_OK) return status;
            wanted = chunks_to_map(candidate, size, &last);
        }
    }
    if (wanted > spare) reclaim_holes(cc, pool, candidate, last, wanted - spare);
    return expandable_alloc_block(cc, pool, stream, size, alloc_size, out);
}

const vb_cc_source vb_cc_stitching_segments = {
    .expandable = 1,
    .alloc_block = stitching_alloc_block,
    .release_pool = expandable_release_pool,
    .release_block = NULL,
    .destroy_segment = expandable_destroy_segment,
    .take_freed = stitching_take_freed,
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
