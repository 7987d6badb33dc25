/* vrambench — `stitch`: our own virtual-memory stitching allocator, in the
 * manner of GMLake (Guo et al., "GMLake: Efficient and Transparent GPU Memory
 * Defragmentation for Large-scale DNN Training with Virtual Memory
 * Stitching", ASPLOS'24).
 *
 * Physical memory is held as fixed-size chunks (chunk_mb; default the
 * device's mapping granularity, 2 MiB on NVIDIA GPUs) made with vm_create. A
 * large request gets a contiguous virtual range (vm_reserve) onto which free
 * physical chunks from anywhere are mapped (vm_map): free memory is never
 * stranded by where it sits, so peak reserved is about peak requested rounded
 * to chunks. Mapping costs tens of microseconds per chunk on a GPU
 * (cuMemSetAccess 31-41 us per 2 MiB chunk on an H200), so ranges are cached:
 *
 *  - large requests (more than half a chunk, i.e. > 1 MiB with 2 MiB chunks)
 *    round up to whole chunks; a range serves one request at a time and is
 *    handed out whole (allocated = its mapped bytes);
 *  - a freed range stays mapped, idle, indexed by (stream, size, address)
 *    and in a least-recently-freed list. A request first takes the best-fit
 *    idle range of its stream when that is at most reuse_slack_percent
 *    (default 25%) and at most reuse_slack_mb (default 20 MiB) larger: no
 *    driver call at all;
 *  - a best fit larger than that but at most twice the request is shrunk:
 *    its tail chunks are unmapped (no new mapping is needed);
 *  - otherwise the largest smaller idle range of the stream whose address
 *    reservation has room is grown in place, or a new range is built. The
 *    chunks they need come from unmapped free chunks, then from the excess
 *    of used ranges (the chunks a range handed out within its reuse slack
 *    has past its caller's size: unmapped while in use, so slack never costs
 *    device memory), then from the tails of idle ranges of any stream, least
 *    recently freed first (unmapping them), and only then from the device
 *    (vm_create). New reservations are the request rounded up to a power of
 *    two of chunks (capped at the device's size), so a range can grow in
 *    place later; address space costs nothing;
 *  - small requests (up to half a chunk) are not stitched: they are rounded
 *    to 512 B and carved, best fit with splitting and coalescing
 *    (allocators/chunks.h), out of one-chunk "small segments" of their
 *    stream. A wholly free small segment is idle like a range, and its chunk
 *    is stitchable too.
 *
 * Where this differs from GMLake: GMLake keeps a physical block mapped both
 * in its primitive block and in the stitched blocks that use it, so
 * stitching needs no unmapping; here a physical chunk is mapped in exactly
 * one range, and stitching moves it (unmap, map). That keeps one owner per
 * chunk and the bookkeeping small, at the cost of unmap calls.
 *
 * Streams: an idle range or small piece is reused only by the stream it was
 * freed on (as PyTorch's caching allocator does). Moving a chunk to another
 * range is safe for any stream: vm_unmap waits for the device's queued work
 * (cuMemUnmap does not, so the device layer synchronizes first).
 * record_stream holds a freed block until the recorded streams' work has
 * completed (deferred.h); a held block is neither reused nor unmapped.
 *
 * Out of memory: chunks of idle ranges are counted as available before the
 * device is asked, and a request is only sent to the device for the
 * shortfall, so giving idle chunks back to the device and asking again could
 * not help. When the device refuses, the chunks created for the request go
 * back, and if blocks are held for record_stream the malloc waits for them
 * (they become idle, hence usable) and tries again, counting alloc_retries.
 * A request larger than the device is refused without a driver call.
 *
 * Statistics (counted at the seam, allocator.h): reserved = physical chunks
 * held (vm_create'd, not released); driver_alloc_calls = vm_create calls,
 * driver_free_calls = vm_release calls. A used range whose excess chunks are
 * unmapped shrinks, and the seam is told (vb_seam_resize_block).
 * "Largest free block" (largest_free_block()) is the largest request that could be served
 * without new device memory: every unmapped chunk plus every chunk of an idle
 * range or idle small segment, since stitching joins them into one range, or
 * the largest free piece of a small segment if that is larger.
 * empty_cache unmaps and releases every idle chunk, and returns every
 * reservation with nothing mapped.
 */
#include "allocator.h"

#include <stdlib.h>

#include "base/addr_map.h"
#include "chunks.h"

#define STITCH_SMALL_ROUNDING 512      /* small requests round to this (PyTorch's kMinBlockSize) */
#define STITCH_SPARE_RESERVATIONS 32   /* reservations with nothing mapped kept for reuse */

/* Chunk tags (vb_chunk.tag): which kind of segment a block belongs to. */
enum { STITCH_LARGE = 1, STITCH_SMALL = 2 };

/* ------------------------------------------------------------------------ */
/* Settings                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct stitch_settings {
    uint64_t chunk_mb;
    uint64_t reuse_slack_percent;
    uint64_t reuse_slack_mb;
} stitch_settings;

static const vb_option stitch_options[] = {
    {"chunk_mb", VB_OPTION_U64, offsetof(stitch_settings, chunk_mb), 0, 65536,
     "physical chunk size in MiB, a multiple of the device's mapping granularity (2 MiB); default 0 = the "
     "granularity"},
    {"reuse_slack_percent", VB_OPTION_U64, offsetof(stitch_settings, reuse_slack_percent), 0, 1000,
     "a cached range serves a request it exceeds by at most this many percent; default 25"},
    {"reuse_slack_mb", VB_OPTION_U64, offsetof(stitch_settings, reuse_slack_mb), 0, 1 << 30,
     "... and by at most this many MiB (the tighter bound applies); default 20"},
};

#define STITCH_OPTION_COUNT (sizeof stitch_options / sizeof stitch_options[0])

/* ------------------------------------------------------------------------ */
/* State                                                                     */
/* ------------------------------------------------------------------------ */

/* A virtual address reservation and the physical chunks mapped at its start.
 * While something is mapped it is a segment: `region` (from the chunk store)
 * holds its blocks, one for a large range, the carved pieces of a small
 * segment. With nothing mapped it is a spare reservation. */
typedef struct stitch_range {
    vb_addr base;
    uint64_t capacity;                  /* chunks of address space reserved */
    uint64_t mapped;                    /* chunks mapped, from `base` on */
    vb_phys *handles;                   /* [capacity]: the chunk mapped at each slot */
    vb_region *region;                  /* the segment while mapped, else NULL */
    struct stitch_range *older, *newer; /* the idle list, while idle */
    struct stitch_range *trim_prev, *trim_next; /* the trimmable list, while on it */
    uint64_t excess;                    /* while used: chunks mapped beyond the caller's size */
    vb_oset_node spare_node;            /* in the spare set, by (capacity, base) */
} stitch_range;

typedef struct stitch_state {
    vb_device *device;
    const vb_alloc_stats *stats;        /* the seam's counts (allocator.h) */
    uint64_t chunk_size;                /* bytes */
    uint64_t max_chunks;                /* chunks the device has: no request may need more */
    uint64_t small_max;                 /* requests up to this are carved, not stitched */
    uint64_t slack_percent, slack_bytes;
    vb_ordered_set large_free;          /* idle large ranges' blocks by (stream, size, address) */
    vb_ordered_set small_free;          /* free pieces of small segments by (stream, size, address) */
    vb_ordered_set segments;            /* regions of mapped ranges, by base */
    vb_ordered_set spares;              /* reservations with nothing mapped */
    stitch_range *idle_oldest, *idle_newest;
    uint64_t idle_chunks;               /* chunks mapped in idle ranges */
    stitch_range *trimmable;            /* used ranges with excess chunks */
    uint64_t excess_chunks;             /* their excess, together */
    vb_phys *free_chunks;               /* physical chunks mapped nowhere */
    size_t free_count, free_capacity;
    vb_addr_map used;                   /* address -> block handed out */
    vb_chunk_store store;
    vb_deferred deferred;
} stitch_state;

/* The range a block belongs to. */
static stitch_range *range_of(const vb_chunk *block)
{
    return block->region->data;
}

/* ------------------------------------------------------------------------ */
/* Orders                                                                    */
/* ------------------------------------------------------------------------ */

static int compare_u64(uint64_t a, uint64_t b)
{
    return (a > b) - (a < b);
}

/* Free blocks by (stream, size, address): the best fit of a stream is the
 * lower bound of {stream, wanted size, address 0}. */
static int compare_free_block(const vb_oset_node *a, const vb_oset_node *b)
{
    const vb_chunk *x = VB_CHUNK_OF(a), *y = VB_CHUNK_OF(b);
    int by_stream = compare_u64((uint64_t)(uintptr_t)x->stream, (uint64_t)(uintptr_t)y->stream);
    if (by_stream) return by_stream;
    int by_size = compare_u64(x->size, y->size);
    return by_size ? by_size : compare_u64(x->addr, y->addr);
}

#define SPARE_OF(n) VB_OSET_ENTRY((n), stitch_range, spare_node)

/* Spare reservations by (capacity, base). */
static int compare_spare(const vb_oset_node *a, const vb_oset_node *b)
{
    const stitch_range *x = SPARE_OF(a), *y = SPARE_OF(b);
    int by_capacity = compare_u64(x->capacity, y->capacity);
    return by_capacity ? by_capacity : compare_u64(x->base, y->base);
}

/* ------------------------------------------------------------------------ */
/* Physical chunks                                                           */
/* ------------------------------------------------------------------------ */

/* vm_create of one chunk. */
static vb_status create_chunk(stitch_state *st, vb_phys *out)
{
    return st->device->ops->vm_create(st->device, st->chunk_size, out);
}

/* vm_release of an unmapped chunk. */
static void release_chunk(stitch_state *st, vb_phys handle)
{
    st->device->ops->vm_release(st->device, handle);
}

/* Keeps an unmapped chunk for later use; one the list has no room for
 * (host memory ran out) goes back to the device instead of leaking. */
static void keep_free_chunk(stitch_state *st, vb_phys handle)
{
    if (st->free_count == st->free_capacity) {
        size_t capacity = st->free_capacity ? st->free_capacity * 2 : 64;
        vb_phys *grown = realloc(st->free_chunks, capacity * sizeof *grown);
        if (!grown) {
            release_chunk(st, handle);
            return;
        }
        st->free_chunks = grown;
        st->free_capacity = capacity;
    }
    st->free_chunks[st->free_count++] = handle;
}

/* ------------------------------------------------------------------------ */
/* Reservations                                                              */
/* ------------------------------------------------------------------------ */

static void free_reservation(stitch_state *st, stitch_range *range)
{
    st->device->ops->vm_free(st->device, range->base, range->capacity * st->chunk_size);
    free(range->handles);
    free(range);
}

/* A range with nothing mapped: kept as a spare while there are few, else
 * its address space goes back. */
static void retire_reservation(stitch_state *st, stitch_range *range)
{
    if (st->spares.count < STITCH_SPARE_RESERVATIONS) vb_oset_insert(&st->spares, &range->spare_node);
    else free_reservation(st, range);
}

/* An unmapped range of at least `chunks` chunks: a spare of fewer than twice
 * as many (so a small segment does not take a large range's room to grow),
 * else a new reservation of `chunks` rounded up to a power of two, capped at
 * the device's size. */
static vb_status take_reservation(stitch_state *st, uint64_t chunks, stitch_range **out)
{
    stitch_range probe = {.capacity = chunks, .base = 0};
    vb_oset_node *node = vb_oset_lower_bound(&st->spares, &probe.spare_node);
    if (node && SPARE_OF(node)->capacity / 2 < chunks) {
        vb_oset_remove(&st->spares, node);
        *out = SPARE_OF(node);
        return VB_OK;
    }
    uint64_t capacity = vb_next_power_of_two(chunks);
    if (capacity > st->max_chunks) capacity = st->max_chunks > chunks ? st->max_chunks : chunks;
    stitch_range *range = calloc(1, sizeof *range);
    vb_phys *handles = range ? calloc(capacity, sizeof *handles) : NULL;
    if (!handles) {
        free(range);
        return vb_error(VB_ERR_HOST_OOM, "stitch: out of host memory");
    }
    vb_status status = st->device->ops->vm_reserve(st->device, capacity * st->chunk_size, &range->base);
    if (status != VB_OK) {
        free(handles);
        free(range);
        return status;
    }
    range->capacity = capacity;
    range->handles = handles;
    *out = range;
    return VB_OK;
}

/* ------------------------------------------------------------------------ */
/* Mapping                                                                   */
/* ------------------------------------------------------------------------ */

/* Maps the chunks already placed in handles[first, first+count) at their
 * slots. On failure what this call mapped is unmapped again and the status
 * returned; the handles stay where they are, for the caller. */
static vb_status map_slots(stitch_state *st, stitch_range *range, uint64_t first, uint64_t count)
{
    vb_device *dev = st->device;
    for (uint64_t i = first; i < first + count; i++) {
        vb_status status = dev->ops->vm_map(dev, range->base + i * st->chunk_size, st->chunk_size, range->handles[i]);
        if (status != VB_OK) {
            while (i-- > first) dev->ops->vm_unmap(dev, range->base + i * st->chunk_size, st->chunk_size);
            return status;
        }
    }
    return VB_OK;
}

/* Unmaps the last `count` mapped chunks of `range` into `into` (NULL: the
 * free-chunk list). The segment's sizes are the caller's to update. The
 * device layer refuses an unmap only for a range it never mapped, which
 * would be a bug of this file, so its status is not acted on. */
static void unmap_tail(stitch_state *st, stitch_range *range, uint64_t count, vb_phys *into)
{
    vb_device *dev = st->device;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t slot = --range->mapped;
        dev->ops->vm_unmap(dev, range->base + slot * st->chunk_size, st->chunk_size);
        if (into) into[i] = range->handles[slot];
        else keep_free_chunk(st, range->handles[slot]);
    }
}

/* Sets the segment's sizes after `range->mapped` changed (large ranges: one
 * block covering the mapped part, which must be in no size-ordered set). */
static void resize_large(stitch_state *st, stitch_range *range)
{
    range->region->size = range->mapped * st->chunk_size;
    range->region->first->size = range->region->size;
}

/* Makes `range` (with its chunks mapped) a segment of one free block of
 * `kind` for `stream`, listed by address. VB_ERR_HOST_OOM when host memory runs out. */
static vb_status attach_segment(stitch_state *st, stitch_range *range, uint32_t kind, vb_stream stream)
{
    vb_region *region = vb_region_new(&st->store);
    vb_chunk *block = region ? vb_chunk_new(&st->store) : NULL;
    if (!block) {
        if (region) vb_region_recycle(&st->store, region);
        return vb_error(VB_ERR_HOST_OOM, "stitch: out of host memory");
    }
    region->base = range->base;
    region->size = range->mapped * st->chunk_size;
    region->first = block;
    region->tag = kind;
    region->data = range;
    block->addr = range->base;
    block->size = region->size;
    block->region = region;
    block->state = VB_CHUNK_FREE;
    block->tag = kind;
    block->stream = stream;
    range->region = region;
    vb_oset_insert(&st->segments, &region->node);
    return VB_OK;
}

/* Undoes attach_segment for a range whose one block is free and in no set. */
static void detach_segment(stitch_state *st, stitch_range *range)
{
    vb_region *region = range->region;
    vb_oset_remove(&st->segments, &region->node);
    vb_chunk_recycle(&st->store, region->first);
    vb_region_recycle(&st->store, region);
    range->region = NULL;
}

/* ------------------------------------------------------------------------ */
/* Idle ranges                                                               */
/* ------------------------------------------------------------------------ */

/* Appends a range none of whose memory is used or held to the idle list. */
static void idle_push(stitch_state *st, stitch_range *range)
{
    range->newer = NULL;
    range->older = st->idle_newest;
    if (st->idle_newest) st->idle_newest->newer = range;
    else st->idle_oldest = range;
    st->idle_newest = range;
    st->idle_chunks += range->mapped;
}

static void idle_remove(stitch_state *st, stitch_range *range)
{
    if (range->older) range->older->newer = range->newer;
    else st->idle_oldest = range->newer;
    if (range->newer) range->newer->older = range->older;
    else st->idle_newest = range->older;
    range->older = range->newer = NULL;
    st->idle_chunks -= range->mapped;
}

/* Takes the last `count` chunks of idle range `range` into `into` (NULL: the
 * free-chunk list), unmapping them. A range left with nothing mapped stops
 * being a segment and becomes a spare reservation. */
static void cut_idle_range(stitch_state *st, stitch_range *range, uint64_t count, vb_phys *into)
{
    vb_chunk *block = range->region->first;
    if (block->tag == STITCH_SMALL) vb_oset_remove(&st->small_free, &block->node);
    else vb_oset_remove(&st->large_free, &block->node);
    if (count == range->mapped) {
        idle_remove(st, range);
        detach_segment(st, range);
        unmap_tail(st, range, count, into);
        retire_reservation(st, range);
        return;
    }
    /* Only large ranges have more than one chunk. */
    st->idle_chunks -= count;
    unmap_tail(st, range, count, into);
    resize_large(st, range);
    vb_oset_insert(&st->large_free, &block->node);
}

/* ------------------------------------------------------------------------ */
/* Excess chunks of used ranges                                              */
/* ------------------------------------------------------------------------ */

/* Notes that used range `range` has `excess` chunks past its caller's size. */
static void trim_push(stitch_state *st, stitch_range *range, uint64_t excess)
{
    range->excess = excess;
    range->trim_prev = NULL;
    range->trim_next = st->trimmable;
    if (st->trimmable) st->trimmable->trim_prev = range;
    st->trimmable = range;
    st->excess_chunks += excess;
}

/* Takes a range off the trimmable list (it is freed, or has no excess left). */
static void trim_remove(stitch_state *st, stitch_range *range)
{
    if (range->trim_prev) range->trim_prev->trim_next = range->trim_next;
    else st->trimmable = range->trim_next;
    if (range->trim_next) range->trim_next->trim_prev = range->trim_prev;
    range->trim_prev = range->trim_next = NULL;
    st->excess_chunks -= range->excess;
    range->excess = 0;
}

/* Unmaps `count` excess chunks of used range `range` into `into`. The caller
 * never touches them (they lie past its size) and vm_unmap waits for queued
 * work, so this is safe while the block is in use; the block's allocated
 * bytes shrink with it. */
static void trim_range(stitch_state *st, stitch_range *range, uint64_t count, vb_phys *into)
{
    unmap_tail(st, range, count, into);
    resize_large(st, range);
    vb_seam_resize_block(st->device, range->region->first->addr, range->region->first->size);
    range->excess -= count;
    st->excess_chunks -= count;
    if (range->excess == 0) trim_remove(st, range);
}

/* Moves `count` physical chunks into `into`: unmapped ones first, then the
 * excess of used ranges, then the tails of idle ranges, least recently
 * freed first. The caller checked that enough are there (chunks_spare). */
static void gather_idle(stitch_state *st, uint64_t count, vb_phys *into)
{
    uint64_t taken = 0;
    while (taken < count && st->free_count) into[taken++] = st->free_chunks[--st->free_count];
    while (taken < count && st->trimmable) {
        stitch_range *range = st->trimmable;
        uint64_t cut = range->excess < count - taken ? range->excess : count - taken;
        trim_range(st, range, cut, into + taken);
        taken += cut;
    }
    while (taken < count) {
        stitch_range *oldest = st->idle_oldest;
        uint64_t cut = oldest->mapped < count - taken ? oldest->mapped : count - taken;
        cut_idle_range(st, oldest, cut, into + taken);
        taken += cut;
    }
}

/* Puts `count` physical chunks into `into`: created for the shortfall first,
 * so that when the device refuses, the chunks this call created go back and
 * every idle range is left as it was; then taken from the idle ones. */
static vb_status obtain_chunks(stitch_state *st, uint64_t count, vb_phys *into)
{
    uint64_t available = st->free_count + st->excess_chunks + st->idle_chunks;
    uint64_t fresh = count > available ? count - available : 0;
    vb_phys *created = into + (count - fresh);
    for (uint64_t i = 0; i < fresh; i++) {
        vb_status status = create_chunk(st, &created[i]);
        if (status != VB_OK) {
            while (i-- > 0) release_chunk(st, created[i]);
            return status;
        }
    }
    gather_idle(st, count - fresh, into);
    return VB_OK;
}

/* ------------------------------------------------------------------------ */
/* Handing out and taking back                                               */
/* ------------------------------------------------------------------------ */

static void release_block(stitch_state *st, vb_chunk *block);

/* Whole chunks a large request of `size` bytes takes (no overflow near 2^64). */
static uint64_t chunks_for(const stitch_state *st, uint64_t size)
{
    return size / st->chunk_size + (size % st->chunk_size != 0);
}

/* Hands out free `block` (in no set, its range not idle) for `size` bytes
 * on `stream`; a range handed out with chunks to spare goes on the
 * trimmable list. */
static vb_status hand_out(stitch_state *st, vb_chunk *block, uint64_t size, vb_stream stream, vb_grant *out)
{
    block->state = VB_CHUNK_USED;
    block->requested = size;
    block->stream = stream;
    block->region->busy_chunks++;
    if (vb_addr_map_put(&st->used, block->addr, vb_chunk_key(block)) != 0) {
        release_block(st, block);
        return vb_error(VB_ERR_HOST_OOM, "stitch: out of host memory");
    }
    out->addr = block->addr;
    out->size = block->size;
    if (block->tag == STITCH_LARGE) {
        stitch_range *range = range_of(block);
        uint64_t needed = chunks_for(st, size);
        if (range->mapped > needed) trim_push(st, range, range->mapped - needed);
    }
    return VB_OK;
}

/* A block no longer used or held goes back to its free index; a small
 * piece merges with free neighbours; a range with nothing in use is idle. */
static void release_block(stitch_state *st, vb_chunk *block)
{
    stitch_range *range = range_of(block);
    block->state = VB_CHUNK_FREE;
    block->region->busy_chunks--;
    if (block->tag == STITCH_LARGE) {
        vb_oset_insert(&st->large_free, &block->node);
    } else {
        if (block->next && block->next->state == VB_CHUNK_FREE) {
            vb_oset_remove(&st->small_free, &block->next->node);
            vb_chunk_absorb_next(&st->store, block);
        }
        if (block->prev && block->prev->state == VB_CHUNK_FREE) {
            vb_chunk *prev = block->prev;
            vb_oset_remove(&st->small_free, &prev->node);
            vb_chunk_absorb_next(&st->store, prev);
            block = prev;
        }
        vb_oset_insert(&st->small_free, &block->node);
    }
    if (block->region->busy_chunks == 0) idle_push(st, range);
}

/* A held block's event completed; the last one frees it. */
static void event_done(void *context, void *item)
{
    vb_chunk *block = item;
    if (vb_chunk_event_done(block)) release_block(context, block);
}

/* ------------------------------------------------------------------------ */
/* Large requests: ranges                                                    */
/* ------------------------------------------------------------------------ */

/* How much larger than `rounded` a cached range may be and still serve it. */
static uint64_t reuse_slack(const stitch_state *st, uint64_t rounded)
{
    uint64_t by_percent = rounded / 100 * st->slack_percent + rounded % 100 * st->slack_percent / 100;
    return by_percent < st->slack_bytes ? by_percent : st->slack_bytes;
}

/* Takes idle range `range`'s block out of the free index and the idle list. */
static vb_chunk *claim_idle_large(stitch_state *st, stitch_range *range)
{
    vb_chunk *block = range->region->first;
    vb_oset_remove(&st->large_free, &block->node);
    idle_remove(st, range);
    return block;
}

/* Puts a range claimed but not handed out back as it was. */
static void unclaim_large(stitch_state *st, stitch_range *range)
{
    vb_oset_insert(&st->large_free, &range->region->first->node);
    idle_push(st, range);
}

/* The idle range of `stream` to grow for `chunks`: the largest one smaller
 * than the request whose reservation has room for it, or NULL. */
static stitch_range *growable_range(stitch_state *st, vb_stream stream, uint64_t chunks)
{
    vb_chunk probe = {.stream = stream, .size = 0, .addr = 0};
    stitch_range *best = NULL;
    uint64_t rounded = chunks * st->chunk_size;
    for (vb_oset_node *node = vb_oset_lower_bound(&st->large_free, &probe.node); node;
         node = vb_oset_next(&st->large_free, node)) {
        vb_chunk *block = VB_CHUNK_OF(node);
        if (block->stream != stream || block->size >= rounded) break;
        if (range_of(block)->capacity >= chunks) best = range_of(block);
    }
    return best;
}

/* Grows idle range `range` in place to `chunks` chunks and hands it out. */
static vb_status grow_range(stitch_state *st, stitch_range *range, uint64_t chunks, uint64_t size, vb_stream stream,
                            vb_grant *out)
{
    vb_chunk *block = claim_idle_large(st, range);
    uint64_t first = range->mapped, count = chunks - range->mapped;
    vb_status status = obtain_chunks(st, count, range->handles + first);
    if (status != VB_OK) {
        unclaim_large(st, range);
        return status;
    }
    status = map_slots(st, range, first, count);
    if (status != VB_OK) {
        for (uint64_t i = first; i < first + count; i++) keep_free_chunk(st, range->handles[i]);
        unclaim_large(st, range);
        return status;
    }
    range->mapped = chunks;
    resize_large(st, range);
    return hand_out(st, block, size, stream, out);
}

/* Builds a new range of `chunks` stitched chunks and hands it out. */
static vb_status build_range(stitch_state *st, uint64_t chunks, uint64_t size, vb_stream stream, vb_grant *out)
{
    stitch_range *range = NULL;
    vb_status status = take_reservation(st, chunks, &range);
    if (status != VB_OK) return status;
    status = obtain_chunks(st, chunks, range->handles);
    if (status != VB_OK) {
        retire_reservation(st, range);
        return status;
    }
    status = map_slots(st, range, 0, chunks);
    if (status == VB_OK) {
        range->mapped = chunks;
        status = attach_segment(st, range, STITCH_LARGE, stream);
        if (status != VB_OK) unmap_tail(st, range, chunks, NULL);
    } else {
        for (uint64_t i = 0; i < chunks; i++) keep_free_chunk(st, range->handles[i]);
    }
    if (status != VB_OK) {
        retire_reservation(st, range);
        return status;
    }
    return hand_out(st, range->region->first, size, stream, out);
}

/* A request of more than half a chunk: `chunks` whole chunks. */
static vb_status large_malloc(stitch_state *st, uint64_t size, uint64_t chunks, vb_stream stream, vb_grant *out)
{
    uint64_t rounded = chunks * st->chunk_size;
    vb_chunk probe = {.stream = stream, .size = rounded, .addr = 0};
    vb_oset_node *node = vb_oset_lower_bound(&st->large_free, &probe.node);
    if (node && VB_CHUNK_OF(node)->stream == stream) {
        vb_chunk *block = VB_CHUNK_OF(node);
        stitch_range *range = range_of(block);
        uint64_t excess = block->size - rounded;
        if (excess <= reuse_slack(st, rounded)) {
            claim_idle_large(st, range);
            return hand_out(st, block, size, stream, out);
        }
        if (excess <= rounded) {
            /* Unmapping the excess is cheaper than mapping a whole new range. */
            claim_idle_large(st, range);
            unmap_tail(st, range, range->mapped - chunks, NULL);
            resize_large(st, range);
            return hand_out(st, block, size, stream, out);
        }
    }
    stitch_range *growable = growable_range(st, stream, chunks);
    if (growable) return grow_range(st, growable, chunks, size, stream, out);
    return build_range(st, chunks, size, stream, out);
}

/* ------------------------------------------------------------------------ */
/* Small requests: pieces of one-chunk segments                              */
/* ------------------------------------------------------------------------ */

/* A new small segment of `stream`: one chunk, mapped, idle, its one free
 * block in the small index. */
static vb_status new_small_segment(stitch_state *st, vb_stream stream)
{
    stitch_range *range = NULL;
    vb_status status = take_reservation(st, 1, &range);
    if (status != VB_OK) return status;
    status = obtain_chunks(st, 1, range->handles);
    if (status != VB_OK) {
        retire_reservation(st, range);
        return status;
    }
    status = map_slots(st, range, 0, 1);
    if (status == VB_OK) {
        range->mapped = 1;
        status = attach_segment(st, range, STITCH_SMALL, stream);
        if (status != VB_OK) unmap_tail(st, range, 1, NULL);
    } else {
        keep_free_chunk(st, range->handles[0]);
    }
    if (status != VB_OK) {
        retire_reservation(st, range);
        return status;
    }
    vb_oset_insert(&st->small_free, &range->region->first->node);
    idle_push(st, range);
    return VB_OK;
}

/* The smallest free piece of `stream` holding `rounded` bytes, or NULL. */
static vb_chunk *find_small(stitch_state *st, uint64_t rounded, vb_stream stream)
{
    vb_chunk probe = {.stream = stream, .size = rounded, .addr = 0};
    vb_oset_node *node = vb_oset_lower_bound(&st->small_free, &probe.node);
    return node && VB_CHUNK_OF(node)->stream == stream ? VB_CHUNK_OF(node) : NULL;
}

/* A request of at most half a chunk, carved out of a small segment. */
static vb_status small_malloc(stitch_state *st, uint64_t size, vb_stream stream, vb_grant *out)
{
    uint64_t rounded = vb_round_up(size, STITCH_SMALL_ROUNDING);
    vb_chunk *block = find_small(st, rounded, stream);
    if (!block) {
        vb_status status = new_small_segment(st, stream);
        if (status != VB_OK) return status;
        block = find_small(st, rounded, stream);
    }
    vb_oset_remove(&st->small_free, &block->node);
    if (block->region->busy_chunks == 0) idle_remove(st, range_of(block));
    if (block->size - rounded >= STITCH_SMALL_ROUNDING) {
        vb_chunk *rest = vb_chunk_split(&st->store, block, rounded);
        /* Without host memory for the split, the whole piece serves. */
        if (rest) {
            rest->tag = STITCH_SMALL;
            rest->stream = stream;
            vb_oset_insert(&st->small_free, &rest->node);
        }
    }
    return hand_out(st, block, size, stream, out);
}

/* ------------------------------------------------------------------------ */
/* Ops                                                                       */
/* ------------------------------------------------------------------------ */

static vb_status stitch_create(vb_device *dev, const vb_config *config, void **state)
{
    stitch_settings settings = {.chunk_mb = 0, .reuse_slack_percent = 25, .reuse_slack_mb = 20};
    vb_status status = vb_config_apply(config, stitch_options, STITCH_OPTION_COUNT, &settings, "stitch");
    if (status != VB_OK) return status;
    uint64_t granularity = dev->ops->vm_granularity(dev);
    uint64_t chunk_size = settings.chunk_mb ? settings.chunk_mb * VB_MiB : granularity;
    if (granularity == 0 || chunk_size % granularity != 0)
        return vb_error(VB_ERR_INVALID, "stitch: chunk_mb=%llu is not a multiple of the device's mapping "
                        "granularity (%llu bytes)",
                        (unsigned long long)settings.chunk_mb, (unsigned long long)granularity);
    uint64_t free_bytes = 0, total_bytes = 0;
    status = dev->ops->mem_info(dev, &free_bytes, &total_bytes);
    if (status != VB_OK) return status;

    stitch_state *st = calloc(1, sizeof *st);
    if (!st) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    st->device = dev;
    st->stats = vb_seam_stats(dev);
    st->chunk_size = chunk_size;
    st->max_chunks = total_bytes / chunk_size;
    st->small_max = chunk_size / 2 / STITCH_SMALL_ROUNDING * STITCH_SMALL_ROUNDING;
    st->slack_percent = settings.reuse_slack_percent;
    st->slack_bytes = settings.reuse_slack_mb * VB_MiB;
    vb_oset_init(&st->large_free, compare_free_block);
    vb_oset_init(&st->small_free, compare_free_block);
    vb_oset_init(&st->segments, vb_region_compare_base);
    vb_oset_init(&st->spares, compare_spare);
    vb_chunk_store_init(&st->store);
    vb_deferred_init(&st->deferred, dev);
    *state = st;
    return VB_OK;
}

/* Everything goes back: held blocks are dropped, every mapped chunk is
 * unmapped and released, every reservation freed. */
static void stitch_destroy(void *state)
{
    stitch_state *st = state;
    vb_deferred_destroy(&st->deferred);
    for (vb_oset_node *node; (node = vb_oset_first(&st->segments));) {
        vb_oset_remove(&st->segments, node);
        stitch_range *range = VB_REGION_OF(node)->data;
        unmap_tail(st, range, range->mapped, NULL);
        free_reservation(st, range);
    }
    for (vb_oset_node *node; (node = vb_oset_first(&st->spares));) {
        vb_oset_remove(&st->spares, node);
        free_reservation(st, SPARE_OF(node));
    }
    while (st->free_count) release_chunk(st, st->free_chunks[--st->free_count]);
    free(st->free_chunks);
    vb_addr_map_clear(&st->used);
    vb_chunk_store_destroy(&st->store);
    free(st);
}

/* One attempt at a request. */
static vb_status try_malloc(stitch_state *st, uint64_t size, vb_stream stream, vb_grant *out)
{
    if (size <= st->small_max) return small_malloc(st, size, stream, out);
    return large_malloc(st, size, chunks_for(st, size), stream, out);
}

static vb_status stitch_malloc(void *state, uint64_t size, vb_stream stream, vb_grant *out)
{
    stitch_state *st = state;
    vb_deferred_poll(&st->deferred, event_done, st);
    if (size > st->small_max && chunks_for(st, size) > st->max_chunks)
        return vb_error(VB_ERR_OOM, "stitch: %llu bytes are more than the device's %llu chunks of %llu bytes",
                        (unsigned long long)size, (unsigned long long)st->max_chunks,
                        (unsigned long long)st->chunk_size);
    vb_status status = try_malloc(st, size, stream, out);
    if (status == VB_ERR_OOM && vb_deferred_any(&st->deferred)) {
        /* Held blocks become idle, hence stitchable, once their streams' work completed. */
        out->retried = 1;
        vb_deferred_drain(&st->deferred, event_done, st);
        status = try_malloc(st, size, stream, out);
    }
    if (status == VB_ERR_OOM)
        return vb_error(VB_ERR_OOM, "stitch: out of memory for %llu bytes (%llu reserved, %llu of them free)",
                        (unsigned long long)size, (unsigned long long)st->stats->reserved_bytes,
                        (unsigned long long)(st->stats->reserved_bytes - st->stats->allocated_bytes));
    return status;
}

static vb_status stitch_free(void *state, vb_addr addr)
{
    stitch_state *st = state;
    uint64_t key;
    if (vb_addr_map_get(&st->used, addr, &key)) {
        vb_chunk *used = vb_chunk_from_key(key);
        if (used->tag == STITCH_LARGE && range_of(used)->excess) trim_remove(st, range_of(used));
    }
    vb_chunk *block;
    vb_status status = vb_chunk_free_used(&st->used, &st->deferred, addr, "stitch", &block);
    if (status == VB_OK && block) release_block(st, block);
    return status;
}

static vb_status stitch_record_stream(void *state, vb_addr addr, vb_stream stream)
{
    stitch_state *st = state;
    return vb_chunk_record_stream(&st->used, addr, stream, "stitch");
}

/* Waits for held blocks, then unmaps and releases every idle chunk and
 * frees every reservation with nothing mapped. Small segments with a piece
 * in use stay. */
static vb_status stitch_empty_cache(void *state)
{
    stitch_state *st = state;
    vb_deferred_drain(&st->deferred, event_done, st);
    while (st->idle_oldest) cut_idle_range(st, st->idle_oldest, st->idle_oldest->mapped, NULL);
    while (st->free_count) release_chunk(st, st->free_chunks[--st->free_count]);
    for (vb_oset_node *node; (node = vb_oset_first(&st->spares));) {
        vb_oset_remove(&st->spares, node);
        free_reservation(st, SPARE_OF(node));
    }
    return VB_OK;
}

/* The largest free block is what one request could get without new device
 * memory: all stitchable chunks (unmapped, or in idle ranges and idle small
 * segments of any stream) together, or the largest free piece of a small
 * segment. */
static uint64_t stitch_largest_free_block(void *state)
{
    stitch_state *st = state;
    uint64_t largest = (st->free_count + st->idle_chunks) * st->chunk_size;
    for (vb_oset_node *node = vb_oset_first(&st->small_free); node; node = vb_oset_next(&st->small_free, node))
        if (VB_CHUNK_OF(node)->size > largest) largest = VB_CHUNK_OF(node)->size;
    return largest;
}

/* Every mapped range is a segment (a large one: one block; a small one: its
 * pieces), in address order. */
static void stitch_segments(void *state, vb_block_visitor visit, void *context)
{
    stitch_state *st = state;
    for (vb_oset_node *node = vb_oset_first(&st->segments); node; node = vb_oset_next(&st->segments, node))
        vb_region_visit(VB_REGION_OF(node), VB_REGION_OF(node), visit, context);
}

const vb_allocator_ops vb_stitch_allocator = {
    .name = "stitch",
    .description = "virtual-memory stitching (GMLake-style): free 2 MiB physical chunks from anywhere mapped "
                   "into one range per large request, ranges cached for reuse; small requests carved from chunks",
    .options = stitch_options,
    .option_count = STITCH_OPTION_COUNT,
    .create = stitch_create,
    .destroy = stitch_destroy,
    .malloc = stitch_malloc,
    .free = stitch_free,
    .record_stream = stitch_record_stream,
    .empty_cache = stitch_empty_cache,
    .largest_free_block = stitch_largest_free_block,
    .segments = stitch_segments,
};
