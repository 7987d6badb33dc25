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
 * to chunks. The driver's calls cost microseconds each on a GPU (cuMemCreate
 * tens), so they are few:
 *
 *  - one vm_set_access per range built or grown, over all its new chunks,
 *    and one vm_unmap per range that loses chunks, over all of them (the
 *    device seam takes ranges of several mappings; base/device.h);
 *  - large requests (more than half a chunk, i.e. > 1 MiB with 2 MiB chunks)
 *    round up to whole chunks; a range serves one request at a time and is
 *    handed out whole (allocated = its mapped bytes), unless split_free;
 *  - a freed range stays mapped, idle, indexed by (stream, size, address)
 *    and in a least-recently-freed list. A request first takes the best-fit
 *    idle range of its stream when that is at most reuse_slack_percent
 *    (default 100%) larger (and at most reuse_slack_mb, default no bound): no
 *    driver call at all. The chunks it has past the request are "excess":
 *    trimmable (unmapped) only when another request needs chunks, so the
 *    slack never costs device memory and costs a call only when used;
 *  - otherwise the largest smaller idle range of the stream whose address
 *    reservation has room is grown in place, or a new range is built. The
 *    chunks they need come from unmapped free chunks, then from the excess
 *    of used ranges, then from the tails of idle ranges of any stream, least
 *    recently freed first (unmapping them), and only then from the device
 *    (vm_create). New reservations are the request rounded up to a power of
 *    two of chunks (capped at the device's size), so a range can grow in
 *    place later; address space costs nothing;
 *  - granules (granule_mb, off by default): new device memory for a request
 *    is made as power-of-two multiples of the chunk, up to granule_mb and at
 *    most 1/granule_parts of the request, each one vm_create and one vm_map.
 *    A granule is mapped whole or not at all (cuMemMap maps whole handles),
 *    so stitching gets coarser: fewer driver calls, more memory. The
 *    trade-off is measured by tools/stitch_tradeoff.py and drawn by
 *    plots/stitch_tradeoff.py;
 *  - split_free (off by default): a free large block more than the slack
 *    larger than the request serves it in place, split at a granule
 *    boundary as caching splits (no driver call); the pieces coalesce when
 *    freed, and a free piece at the end of a range in use is stitchable
 *    (unmapped) like an idle range's tail. Free pieces inside a range strand
 *    memory, so this too trades memory for calls;
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
 * Out of memory: every idle chunk that fits is gathered before the device
 * is asked, and the device is only asked for the shortfall, so giving idle
 * chunks back to the device and asking again could not help. When the
 * device refuses, the chunks created for the request go back (those
 * gathered stay, unmapped, for the next request), and if blocks are held for record_stream the malloc waits for them
 * (they become idle, hence usable) and tries again, counting alloc_retries.
 * A request larger than the device is refused without a driver call.
 *
 * Statistics (counted at the seam, allocator.h): reserved = physical memory
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
    uint64_t granule_mb;
    uint64_t granule_parts;
    uint64_t split_free;
} stitch_settings;

static const vb_option stitch_options[] = {
    {"chunk_mb", VB_OPTION_U64, offsetof(stitch_settings, chunk_mb), 0, 65536,
     "physical chunk size in MiB, a multiple of the device's mapping granularity (2 MiB); default 0 = the "
     "granularity"},
    {"reuse_slack_percent", VB_OPTION_U64, offsetof(stitch_settings, reuse_slack_percent), 0, 1000,
     "a cached range serves a request it exceeds by at most this many percent (handed out whole, the "
     "chunks past the request trimmable); default 100"},
    {"reuse_slack_mb", VB_OPTION_U64, offsetof(stitch_settings, reuse_slack_mb), 0, 1 << 30,
     "... and by at most this many MiB (the tighter bound applies); default 0 = no bound in MiB"},
    {"granule_mb", VB_OPTION_U64, offsetof(stitch_settings, granule_mb), 0, 65536,
     "largest physical granule in MiB: new memory for a request is made in power-of-two multiples of the "
     "chunk up to this (fewer driver calls, coarser stitching: more memory); default 0 = the chunk size, "
     "no granules (plots/stitch_tradeoff.py draws the trade-off)"},
    {"granule_parts", VB_OPTION_U64, offsetof(stitch_settings, granule_parts), 1, 1 << 20,
     "a request's new granules are at most 1/this of it (smaller: fewer driver calls; larger: finer "
     "stitching, less memory); default 8"},
    {"split_free", VB_OPTION_U64, offsetof(stitch_settings, split_free), 0, 1,
     "1: a free block larger than the reuse slack serves a request in place, split (no driver call; its "
     "free pieces strand memory as caching's do); default 0"},
};

#define STITCH_OPTION_COUNT (sizeof stitch_options / sizeof stitch_options[0])

/* ------------------------------------------------------------------------ */
/* State                                                                     */
/* ------------------------------------------------------------------------ */

/* A physical granule: one vm_create of a power of two of chunks, mapped
 * whole or not at all (cuMemMap maps whole handles). */
typedef struct stitch_granule {
    vb_phys handle;
    uint64_t chunks;
} stitch_granule;

/* Granules of one size mapped nowhere. */
typedef struct stitch_free_list {
    vb_phys *handles;
    size_t count, capacity;
} stitch_free_list;

#define STITCH_CLASSES 32              /* granule classes: 2^0 .. 2^31 chunks */

/* A virtual address reservation and the physical chunks mapped at its start.
 * While something is mapped it is a segment: `region` (from the chunk store)
 * holds its blocks, one for a large range, the carved pieces of a small
 * segment. With nothing mapped it is a spare reservation. */
typedef struct stitch_range {
    vb_addr base;
    uint64_t capacity;                  /* chunks of address space reserved */
    uint64_t mapped;                    /* chunks mapped, from `base` on */
    vb_phys *handles;                   /* [capacity]: the granule starting at each slot (first slots only) */
    uint32_t *span;                     /* [capacity]: chunks of the granule ending at each slot (last slots only) */
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
    uint64_t granule_chunks;            /* the largest granule, in chunks (a power of two) */
    uint64_t granule_parts;             /* a request's new granules are at most 1/this of it */
    int split;                          /* split_free: larger free blocks serve in place, split */
    stitch_free_list free_lists[STITCH_CLASSES]; /* granules mapped nowhere, by log2 of their chunks */
    uint64_t free_count;                /* chunks in them */
    stitch_granule *gathered;           /* scratch: the granules a range is being built from */
    size_t gathered_count, gathered_capacity;
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
/* Physical granules                                                         */
/* ------------------------------------------------------------------------ */

/* log2 of a power of two. */
static unsigned class_of(uint64_t chunks)
{
    unsigned c = 0;
    while (chunks >>= 1) c++;
    return c;
}

/* vm_create of a granule of `chunks` chunks. */
static vb_status create_granule(stitch_state *st, uint64_t chunks, vb_phys *out)
{
    return st->device->ops->vm_create(st->device, chunks * st->chunk_size, out);
}

/* vm_release of an unmapped granule. */
static void release_granule(stitch_state *st, stitch_granule granule)
{
    st->device->ops->vm_release(st->device, granule.handle);
}

/* Keeps an unmapped granule for later use; one the list has no room for
 * (host memory ran out) goes back to the device instead of leaking. */
static void keep_free_granule(stitch_state *st, stitch_granule granule)
{
    stitch_free_list *list = &st->free_lists[class_of(granule.chunks)];
    if (list->count == list->capacity) {
        size_t capacity = list->capacity ? list->capacity * 2 : 16;
        vb_phys *grown = realloc(list->handles, capacity * sizeof *grown);
        if (!grown) {
            release_granule(st, granule);
            return;
        }
        list->handles = grown;
        list->capacity = capacity;
    }
    list->handles[list->count++] = granule.handle;
    st->free_count += granule.chunks;
}

/* Takes the last granule of class `c` (its list is not empty). */
static stitch_granule take_free_granule(stitch_state *st, unsigned c)
{
    stitch_free_list *list = &st->free_lists[c];
    stitch_granule granule = {list->handles[--list->count], (uint64_t)1 << c};
    st->free_count -= granule.chunks;
    return granule;
}

/* Releases every granule mapped nowhere; with `drop`, frees the lists too. */
static void release_free_granules(stitch_state *st, int drop)
{
    for (unsigned c = 0; c < STITCH_CLASSES; c++) {
        while (st->free_lists[c].count) release_granule(st, take_free_granule(st, c));
        if (drop) free(st->free_lists[c].handles);
    }
}

/* Appends `granule` to the scratch list a range is built from; 0, or -1
 * when host memory runs out (the caller keeps the granule elsewhere). */
static int push_gathered(stitch_state *st, stitch_granule granule)
{
    if (st->gathered_count == st->gathered_capacity) {
        size_t capacity = st->gathered_capacity ? st->gathered_capacity * 2 : 64;
        stitch_granule *grown = realloc(st->gathered, capacity * sizeof *grown);
        if (!grown) return -1;
        st->gathered = grown;
        st->gathered_capacity = capacity;
    }
    st->gathered[st->gathered_count++] = granule;
    return 0;
}

/* Gives every gathered granule back to the free lists (a build failed). */
static void drop_gathered(stitch_state *st)
{
    while (st->gathered_count) keep_free_granule(st, st->gathered[--st->gathered_count]);
}

/* Moves `granule` to the gathered list, or to the free lists when host
 * memory ran out; returns the chunks it adds to the gathered list. */
static uint64_t gather_one(stitch_state *st, stitch_granule granule)
{
    if (push_gathered(st, granule) == 0) return granule.chunks;
    keep_free_granule(st, granule);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Reservations                                                              */
/* ------------------------------------------------------------------------ */

static void free_reservation(stitch_state *st, stitch_range *range)
{
    st->device->ops->vm_free(st->device, range->base, range->capacity * st->chunk_size);
    free(range->handles);
    free(range->span);
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
    if (chunks > 1 && chunks < st->granule_chunks) chunks = st->granule_chunks;
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
    uint32_t *span = handles ? calloc(capacity, sizeof *span) : NULL;
    if (!span) {
        free(handles);
        free(range);
        return vb_error(VB_ERR_HOST_OOM, "stitch: out of host memory");
    }
    vb_status status = st->device->ops->vm_reserve(st->device, capacity * st->chunk_size, &range->base);
    if (status != VB_OK) {
        free(span);
        free(handles);
        free(range);
        return status;
    }
    range->capacity = capacity;
    range->handles = handles;
    range->span = span;
    *out = range;
    return VB_OK;
}

/* ------------------------------------------------------------------------ */
/* Mapping                                                                   */
/* ------------------------------------------------------------------------ */

/* Maps the gathered granules after `range`'s mapped chunks (the caller
 * checked they fit), then sets access once over all of them: one vm_map per
 * granule, one vm_set_access per call. On success the gathered list is
 * empty; on failure what this call mapped is unmapped again (one vm_unmap)
 * and the granules stay gathered, for the caller. */
static vb_status map_gathered(stitch_state *st, stitch_range *range)
{
    vb_device *dev = st->device;
    uint64_t first = range->mapped, slot = first;
    vb_status status = VB_OK;
    for (size_t i = 0; i < st->gathered_count && status == VB_OK; i++) {
        stitch_granule granule = st->gathered[i];
        status = dev->ops->vm_map(dev, range->base + slot * st->chunk_size, granule.chunks * st->chunk_size,
                                  granule.handle);
        if (status != VB_OK) break;
        range->handles[slot] = granule.handle;
        slot += granule.chunks;
        range->span[slot - 1] = (uint32_t)granule.chunks;
    }
    if (status == VB_OK && slot > first)
        status = dev->ops->vm_set_access(dev, range->base + first * st->chunk_size, (slot - first) * st->chunk_size);
    if (status != VB_OK) {
        if (slot > first)
            dev->ops->vm_unmap(dev, range->base + first * st->chunk_size, (slot - first) * st->chunk_size);
        return status;
    }
    range->mapped = slot;
    st->gathered_count = 0;
    return VB_OK;
}

/* Where `range` would end if the tail granules wholly past `chunks` went:
 * the granule boundary at or above `chunks` (at most range->mapped). */
static uint64_t boundary_above(const stitch_range *range, uint64_t chunks)
{
    uint64_t end = range->mapped;
    while (end > chunks && end - range->span[end - 1] >= chunks) end -= range->span[end - 1];
    return end;
}

/* Unmaps `range`'s granules past `keep` (a granule boundary) with one
 * vm_unmap, into the gathered list (`gather`) or the free lists; returns the
 * chunks gathered. The segment's sizes are the caller's to update. The
 * device layer refuses an unmap only for a range it never mapped, which
 * would be a bug of this file, so its status is not acted on. */
static uint64_t unmap_to(stitch_state *st, stitch_range *range, uint64_t keep, int gather)
{
    vb_device *dev = st->device;
    uint64_t gathered = 0;
    if (keep == range->mapped) return 0;
    dev->ops->vm_unmap(dev, range->base + keep * st->chunk_size, (range->mapped - keep) * st->chunk_size);
    while (range->mapped > keep) {
        uint64_t chunks = range->span[range->mapped - 1];
        range->mapped -= chunks;
        stitch_granule granule = {range->handles[range->mapped], chunks};
        if (gather) gathered += gather_one(st, granule);
        else keep_free_granule(st, granule);
    }
    return gathered;
}

/* Where a cut of `range`'s tail for `want` chunks, taking no granule larger
 * than `room` chunks in all and going no lower than `floor`, would end. */
static uint64_t cut_point(const stitch_range *range, uint64_t want, uint64_t room, uint64_t floor)
{
    uint64_t end = range->mapped, taken = 0;
    while (end > floor && taken < want) {
        uint64_t chunks = range->span[end - 1];
        if (end - chunks < floor || taken + chunks > room) break;
        end -= chunks;
        taken += chunks;
    }
    return end;
}

/* Sets the segment's sizes after `range->mapped` changed (large ranges: one
 * block covering the mapped part, which must be in no size-ordered set). */
static void resize_large(stitch_state *st, stitch_range *range)
{
    range->region->size = range->mapped * st->chunk_size;
    range->region->first->size = range->region->size;
}

/* Makes `range` (with its chunks mapped) a segment of one free block of
 * `kind` for `stream`, listed by address. VB_ERR_OOM when host memory runs out. */
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

/* Unmaps idle range `range`'s granules past `keep` (a granule boundary)
 * into the gathered list (`gather`) or the free lists; returns the chunks
 * gathered. A range left with nothing mapped stops being a segment and
 * becomes a spare reservation. */
static uint64_t cut_idle_range(stitch_state *st, stitch_range *range, uint64_t keep, int gather)
{
    vb_chunk *block = range->region->first;
    if (block->tag == STITCH_SMALL) vb_oset_remove(&st->small_free, &block->node);
    else vb_oset_remove(&st->large_free, &block->node);
    if (keep == 0) {
        idle_remove(st, range);
        detach_segment(st, range);
        uint64_t gathered = unmap_to(st, range, 0, gather);
        retire_reservation(st, range);
        return gathered;
    }
    /* Only large ranges have more than one chunk. */
    st->idle_chunks -= range->mapped - keep;
    uint64_t gathered = unmap_to(st, range, keep, gather);
    resize_large(st, range);
    vb_oset_insert(&st->large_free, &block->node);
    return gathered;
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

/* Unmaps used range `range`'s excess granules past `keep` into the gathered
 * list. The caller never touches them (they lie past its size) and vm_unmap
 * waits for queued work, so this is safe while the block is in use; the
 * block's allocated bytes shrink with it. Returns the chunks gathered. */
static uint64_t trim_range(stitch_state *st, stitch_range *range, uint64_t keep)
{
    uint64_t count = range->mapped - keep;
    uint64_t gathered = unmap_to(st, range, keep, 1);
    resize_large(st, range);
    vb_seam_resize_block(st->device, range->region->first->addr, range->region->first->size);
    range->excess -= count;
    st->excess_chunks -= count;
    if (range->excess == 0) trim_remove(st, range);
    return gathered;
}

/* Gathers granules mapped nowhere for `want` chunks, taking none that would
 * bring the total past `room`: the largest ones that fit within `want`
 * first, then the smallest one larger than what is missing. Returns the
 * chunks gathered. */
static uint64_t gather_free(stitch_state *st, uint64_t want, uint64_t room)
{
    uint64_t taken = 0;
    for (unsigned c = STITCH_CLASSES; c-- > 0 && taken < want;) {
        uint64_t chunks = (uint64_t)1 << c;
        while (chunks <= want - taken && st->free_lists[c].count) taken += gather_one(st, take_free_granule(st, c));
    }
    for (unsigned c = 0; c < STITCH_CLASSES && taken < want; c++) {
        uint64_t chunks = (uint64_t)1 << c;
        if (chunks > room - taken) break;
        if (chunks > want - taken && st->free_lists[c].count) taken += gather_one(st, take_free_granule(st, c));
    }
    return taken;
}

/* Unmaps the free tail block of used range `range` (split off a larger
 * block), or part of it, into the gathered list, for `want` chunks and no
 * more than `room`. Returns the chunks gathered. */
static uint64_t cut_free_tail(stitch_state *st, stitch_range *range, uint64_t want, uint64_t room)
{
    vb_chunk *last = range->region->first;
    while (last->next) last = last->next;
    if (last->state != VB_CHUNK_FREE || last == range->region->first) return 0;
    uint64_t floor = (last->addr - range->base) / st->chunk_size;
    uint64_t keep = cut_point(range, want, room, floor);
    if (keep == range->mapped) return 0;
    vb_oset_remove(&st->large_free, &last->node);
    uint64_t gathered = unmap_to(st, range, keep, 1);
    range->region->size = range->mapped * st->chunk_size;
    if (keep == floor) {
        last->prev->next = NULL;
        vb_chunk_recycle(&st->store, last);
    } else {
        last->size = (keep - floor) * st->chunk_size;
        vb_oset_insert(&st->large_free, &last->node);
    }
    return gathered;
}

/* Gathers granules for `want` chunks, no more than `room` in all: mapped
 * nowhere first, then the excess of used ranges, then the tails of idle
 * ranges, least recently freed first. Returns the chunks gathered (fewer
 * than `want` when that is all there is). */
static uint64_t gather_idle(stitch_state *st, uint64_t want, uint64_t room)
{
    uint64_t taken = gather_free(st, want, room);
    for (stitch_range *range = st->trimmable, *next; range && taken < want; range = next) {
        next = range->trim_next;
        uint64_t keep = cut_point(range, want - taken, room - taken, range->mapped - range->excess);
        if (keep < range->mapped) taken += trim_range(st, range, keep);
    }
    for (stitch_range *range = st->idle_oldest, *next; range && taken < want; range = next) {
        next = range->newer;
        uint64_t keep = cut_point(range, want - taken, room - taken, 0);
        if (keep < range->mapped) taken += cut_idle_range(st, range, keep, 1);
    }
    if (!st->split) return taken;
    /* Split ranges in use: their free tail pieces (a walk over the segments,
     * made only when idle memory ran short). */
    for (vb_oset_node *node = vb_oset_first(&st->segments); node && taken < want;
         node = vb_oset_next(&st->segments, node)) {
        vb_region *region = VB_REGION_OF(node);
        if (region->tag == STITCH_LARGE && region->busy_chunks)
            taken += cut_free_tail(st, region->data, want - taken, room - taken);
    }
    return taken;
}

/* Gathers granules for at least `count` chunks and at most `room`: what
 * idle memory there is, then new granules from the device for the rest,
 * each the largest power of two of chunks that fits, up to the granule
 * size. When the device refuses, the granules created here go back and the
 * gathered ones stay mapped nowhere, for the next request. */
static vb_status obtain_chunks(stitch_state *st, uint64_t count, uint64_t room)
{
    uint64_t taken = gather_idle(st, count, room);
    size_t first_created = st->gathered_count;
    uint64_t largest = st->granule_chunks;
    while (largest > 1 && largest * st->granule_parts > count) largest >>= 1;
    while (taken < count) {
        uint64_t chunks = largest;
        while (chunks > count - taken) chunks >>= 1;
        stitch_granule granule = {0, chunks};
        vb_status status = create_granule(st, chunks, &granule.handle);
        if (status == VB_OK && push_gathered(st, granule) != 0) {
            release_granule(st, granule);
            status = vb_error(VB_ERR_HOST_OOM, "stitch: out of host memory");
        }
        if (status != VB_OK) {
            while (st->gathered_count > first_created) release_granule(st, st->gathered[--st->gathered_count]);
            drop_gathered(st);
            return status;
        }
        taken += chunks;
    }
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
    if (block->tag == STITCH_LARGE && block == block->region->first && !block->next) {
        stitch_range *range = range_of(block);
        uint64_t keep = boundary_above(range, chunks_for(st, size));
        if (range->mapped > keep) trim_push(st, range, range->mapped - keep);
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
    vb_ordered_set *index = block->tag == STITCH_LARGE ? &st->large_free : &st->small_free;
    if (block->next && block->next->state == VB_CHUNK_FREE) {
        vb_oset_remove(index, &block->next->node);
        vb_chunk_absorb_next(&st->store, block);
    }
    if (block->prev && block->prev->state == VB_CHUNK_FREE) {
        vb_chunk *prev = block->prev;
        vb_oset_remove(index, &prev->node);
        vb_chunk_absorb_next(&st->store, prev);
        block = prev;
    }
    vb_oset_insert(index, &block->node);
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
    return st->slack_bytes && st->slack_bytes < by_percent ? st->slack_bytes : by_percent;
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
        if (block->region->busy_chunks == 0 && range_of(block)->capacity >= chunks) best = range_of(block);
    }
    return best;
}

/* Grows idle range `range` in place to at least `chunks` chunks and hands it out. */
static vb_status grow_range(stitch_state *st, stitch_range *range, uint64_t chunks, uint64_t size, vb_stream stream,
                            vb_grant *out)
{
    vb_chunk *block = claim_idle_large(st, range);
    vb_status status = obtain_chunks(st, chunks - range->mapped, range->capacity - range->mapped);
    if (status == VB_OK) status = map_gathered(st, range);
    if (status != VB_OK) {
        drop_gathered(st);
        unclaim_large(st, range);
        return status;
    }
    resize_large(st, range);
    return hand_out(st, block, size, stream, out);
}

/* Builds a new range of at least `chunks` stitched chunks (in a reservation
 * of `kind`'s size) as a segment of one free block of `stream`. */
static vb_status build_range(stitch_state *st, uint64_t chunks, uint32_t kind, vb_stream stream,
                             stitch_range **out)
{
    stitch_range *range = NULL;
    vb_status status = take_reservation(st, chunks, &range);
    if (status != VB_OK) return status;
    status = obtain_chunks(st, chunks, range->capacity);
    if (status == VB_OK) status = map_gathered(st, range);
    if (status == VB_OK) {
        status = attach_segment(st, range, kind, stream);
        if (status != VB_OK) unmap_to(st, range, 0, 0);
    }
    if (status != VB_OK) {
        drop_gathered(st);
        retire_reservation(st, range);
        return status;
    }
    *out = range;
    return VB_OK;
}

/* A request of more than half a chunk: `chunks` whole chunks. */
static vb_status large_malloc(stitch_state *st, uint64_t size, uint64_t chunks, vb_stream stream, vb_grant *out)
{
    uint64_t rounded = chunks * st->chunk_size;
    vb_chunk probe = {.stream = stream, .size = rounded, .addr = 0};
    stitch_range *built = NULL;
    vb_oset_node *node = vb_oset_lower_bound(&st->large_free, &probe.node);
    if (node && VB_CHUNK_OF(node)->stream == stream) {
        vb_chunk *block = VB_CHUNK_OF(node);
        stitch_range *range = range_of(block);
        uint64_t excess = block->size - rounded;
        if (excess <= reuse_slack(st, rounded)) {
            /* Whole: its chunks past the request are trimmable, unmapped only
             * when another request needs them (shrinking it now would cost an
             * unmap, and a map when it grows back). */
            vb_oset_remove(&st->large_free, &block->node);
            if (block->region->busy_chunks == 0) idle_remove(st, range);
            return hand_out(st, block, size, stream, out);
        }
        uint64_t end_slot = (block->addr - range->base) / st->chunk_size + chunks;
        if (st->split && range->span[end_slot - 1] != 0) {
            /* Larger: its head serves in place, no driver call; the rest stays free. */
            vb_oset_remove(&st->large_free, &block->node);
            if (block->region->busy_chunks == 0) idle_remove(st, range);
            vb_chunk *rest = vb_chunk_split(&st->store, block, rounded);
            if (rest) {
                rest->tag = STITCH_LARGE;
                rest->stream = stream;
                vb_oset_insert(&st->large_free, &rest->node);
            }
            return hand_out(st, block, size, stream, out);
        }
    }
    stitch_range *growable = growable_range(st, stream, chunks);
    if (growable) return grow_range(st, growable, chunks, size, stream, out);
    vb_status status = build_range(st, chunks, STITCH_LARGE, stream, &built);
    return status == VB_OK ? hand_out(st, built->region->first, size, stream, out) : status;
}

/* ------------------------------------------------------------------------ */
/* Small requests: pieces of one-chunk segments                              */
/* ------------------------------------------------------------------------ */

/* A new small segment of `stream`: one chunk, mapped, idle, its one free
 * block in the small index. */
static vb_status new_small_segment(stitch_state *st, vb_stream stream)
{
    stitch_range *range = NULL;
    vb_status status = build_range(st, 1, STITCH_SMALL, stream, &range);
    if (status != VB_OK) return status;
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
    stitch_settings settings = {.chunk_mb = 0, .reuse_slack_percent = 100, .reuse_slack_mb = 0,
                                .granule_mb = 0, .granule_parts = 8, .split_free = 0};
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
    st->granule_parts = settings.granule_parts;
    st->split = settings.split_free != 0;
    st->granule_chunks = 1;
    while (st->granule_chunks * 2 * chunk_size <= settings.granule_mb * VB_MiB &&
           st->granule_chunks < ((uint64_t)1 << 30))
        st->granule_chunks *= 2;
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
        unmap_to(st, range, 0, 0);
        free_reservation(st, range);
    }
    for (vb_oset_node *node; (node = vb_oset_first(&st->spares));) {
        vb_oset_remove(&st->spares, node);
        free_reservation(st, SPARE_OF(node));
    }
    release_free_granules(st, 1);
    free(st->gathered);
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
    while (st->idle_oldest) cut_idle_range(st, st->idle_oldest, 0, 0);
    release_free_granules(st, 0);
    for (vb_oset_node *node; (node = vb_oset_first(&st->spares));) {
        vb_oset_remove(&st->spares, node);
        free_reservation(st, SPARE_OF(node));
    }
    return VB_OK;
}

/* The largest free block is what one request could get without new device
 * memory: all
 * stitchable chunks (unmapped, or in idle ranges and idle small segments of
 * any stream) together, or the largest free piece of a small segment. */
static uint64_t stitch_largest_free_block(void *state)
{
    stitch_state *st = state;
    uint64_t largest = (st->free_count + st->idle_chunks) * st->chunk_size;
    for (vb_oset_node *node = vb_oset_first(&st->small_free); node; node = vb_oset_next(&st->small_free, node))
        if (VB_CHUNK_OF(node)->size > largest) largest = VB_CHUNK_OF(node)->size;
    for (vb_oset_node *node = st->split ? vb_oset_first(&st->large_free) : NULL; node;
         node = vb_oset_next(&st->large_free, node))
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
