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

#include "caching_core.h"

/* One physical chunk slot of a range. */
typedef struct expandable_chunk {
    vb_phys handle;
    int present;
} expandable_chunk;

/* A reserved range (PyTorch's ExpandableSegment); core segment first. */
typedef struct expandable_segment {
    vb_cc_segment segment;
    uint64_t chunk_size;          /* 2 MiB small pool, cc->large_chunk (20 MiB) large pool */
    expandable_chunk *chunks;     /* slots in use so far, by index from base */
    size_t chunk_capacity;
} expandable_segment;

static expandable_segment *expandable_of(vb_cc_segment *segment)
{
    return (expandable_segment *)segment;
}

/* ------------------------------------------------------------------------ */
/* Physical chunks                                                            */
/* ------------------------------------------------------------------------ */

/* Makes room for chunk slots [0, count); 0, or -1 when host memory runs out. */
static int reserve_slots(expandable_segment *es, size_t count)
{
    if (count <= es->chunk_capacity) return 0;
    size_t capacity = es->chunk_capacity ? es->chunk_capacity : 16;
    while (capacity < count) capacity *= 2;
    expandable_chunk *grown = realloc(es->chunks, capacity * sizeof *grown);
    if (!grown) return -1;
    for (size_t i = es->chunk_capacity; i < capacity; i++) grown[i] = (expandable_chunk){0, 0};
    es->chunks = grown;
    es->chunk_capacity = capacity;
    return 0;
}

/* Makes room for `more` spare chunks in the pool; 0, or -1 when host
 * memory runs out. */
static int reserve_spares(vb_cc_pool *pool, size_t more)
{
    size_t count = pool->spare_count + more;
    if (count <= pool->spare_capacity) return 0;
    size_t capacity = pool->spare_capacity ? pool->spare_capacity : 16;
    while (capacity < count) capacity *= 2;
    vb_phys *grown = realloc(pool->spare_chunks, capacity * sizeof *grown);
    if (!grown) return -1;
    pool->spare_chunks = grown;
    pool->spare_capacity = capacity;
    return 0;
}

/* Unmaps chunks [begin, end), which are all present: released, or, with
 * `keep` (room reserved by reserve_spares), kept as keep's spares. */
static void unmap_chunks(vb_cc_allocator *cc, expandable_segment *es, size_t begin, size_t end, vb_cc_pool *keep)
{
    vb_device *dev = cc->device;
    for (size_t i = begin; i < end; i++) {
        dev->ops->vm_unmap(dev, es->segment.base + i * es->chunk_size, es->chunk_size);
        if (keep)
            keep->spare_chunks[keep->spare_count++] = es->chunks[i].handle;
        else
            dev->ops->vm_release(dev, es->chunks[i].handle);
        es->chunks[i].present = 0;
    }
}

/* ExpandableSegment::map: maps chunks [begin, end), taking the pool's
 * spare chunks first and creating the rest. On failure everything this call
 * took or created is released and the status returned (VB_ERR_OOM when the
 * device ran out). */
static vb_status map_chunks(vb_cc_allocator *cc, expandable_segment *es, size_t begin, size_t end)
{
    vb_device *dev = cc->device;
    vb_cc_pool *pool = es->segment.pool;
    if (reserve_slots(es, end) != 0) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    vb_status status = VB_OK;
    size_t created = begin, mapped = begin;
    for (; created < end && status == VB_OK; created++) {
        if (pool->spare_count) {
            es->chunks[created].handle = pool->spare_chunks[--pool->spare_count];
            continue;
        }
        status = dev->ops->vm_create(dev, es->chunk_size, &es->chunks[created].handle);
        if (status != VB_OK) break;
    }
    for (; status == VB_OK && mapped < end; mapped++)
        status = dev->ops->vm_map(dev, es->segment.base + mapped * es->chunk_size, es->chunk_size,
                                  es->chunks[mapped].handle);
    /* One access call over the new chunks together, as PyTorch's ExpandableSegment::map does. */
    if (status == VB_OK)
        status = dev->ops->vm_set_access(dev, es->segment.base + begin * es->chunk_size,
                                         (end - begin) * es->chunk_size);
    if (status == VB_OK) {
        for (size_t i = begin; i < end; i++) es->chunks[i].present = 1;
        return VB_OK;
    }
    for (size_t i = begin; i < created; i++) {
        if (i < mapped) dev->ops->vm_unmap(dev, es->segment.base + i * es->chunk_size, es->chunk_size);
        dev->ops->vm_release(dev, es->chunks[i].handle);
    }
    return status;
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
 * space, rounded to whole chunks (2 MiB small pool, cc->large_chunk large
 * pool, rounded up to the device's granularity), one unmapped block
 * covering it. */
static vb_status new_range(vb_cc_allocator *cc, vb_cc_pool *pool, vb_stream stream, vb_cc_block **out)
{
    vb_device *dev = cc->device;
    uint64_t free_bytes = 0, total_bytes = 0;
    vb_status status = dev->ops->mem_info(dev, &free_bytes, &total_bytes);
    if (status != VB_OK) return status;
    uint64_t granularity = dev->ops->vm_granularity(dev);
    uint64_t chunk = pool->is_small ? VB_CC_SMALL_BUFFER : cc->large_chunk;
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
    uint64_t mapped_size = (end - begin) * es->chunk_size;
    vb_cc_block *rest = NULL;
    if (mapped_size < to_map->size) {
        rest = vb_cc_block_new(cc, to_map->addr + mapped_size, to_map->size - mapped_size, to_map->stream,
                               to_map->pool, to_map->segment);
        if (!rest) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    }
    vb_status status = map_chunks(cc, es, begin, end);
    if (status != VB_OK) {
        if (rest) vb_cc_block_recycle(cc, rest);
        return status;
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
/* Shrinking: unmap_block, release_blocks                                     */
/* ------------------------------------------------------------------------ */

/* unmap_block: unmaps the chunks wholly inside free block `block`, at most
 * `max_chunks` of them from the lowest; the parts before and after stay as
 * free mapped blocks, the unmapped middle (`block` itself) joins unmapped
 * neighbours. The chunks are released, or kept as the spares of pool
 * `keep` when it is not NULL. Returns the number of chunks unmapped. */
static size_t unmap_block(vb_cc_allocator *cc, vb_cc_block *block, size_t max_chunks, vb_cc_pool *keep)
{
    expandable_segment *es = expandable_of(block->segment);
    uint64_t offset = block->addr - es->segment.base;
    size_t begin = (offset + es->chunk_size - 1) / es->chunk_size;
    size_t end = (offset + block->size) / es->chunk_size;
    if (begin >= end) return 0;
    if (end - begin > max_chunks) end = begin + max_chunks;
    if (keep && reserve_spares(keep, end - begin) != 0) return 0;
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
    unmap_chunks(cc, es, begin, end, keep);
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
    free(es->chunks);
    free(es);
}

/* release_blocks: unmaps the whole free chunks of every free block of the
 * pool; ranges left entirely unmapped are released. Unmapping removes only
 * the block itself from the free set, so the successor taken first stays valid. */
static void expandable_release_pool(vb_cc_allocator *cc, vb_cc_pool *pool)
{
    vb_oset_node *node = vb_oset_first(&pool->blocks);
    while (node) {
        vb_oset_node *next = vb_oset_next(&pool->blocks, node);
        vb_cc_block *block = VB_OSET_ENTRY(node, vb_cc_block, node);
        unmap_block(cc, block, SIZE_MAX, NULL);
        if (!block->mapped && !vb_cc_block_is_split(block)) release_range(cc, block);
        node = next;
    }
}

/* At destroy: every mapped chunk and the range go back. */
static void expandable_destroy_segment(vb_cc_allocator *cc, vb_cc_segment *segment)
{
    expandable_segment *es = expandable_of(segment);
    for (size_t i = 0; i < es->chunk_capacity; i++)
        if (es->chunks[i].present) unmap_chunks(cc, es, i, i + 1, NULL);
    cc->device->ops->vm_free(cc->device, segment->base, segment->size);
    free(es->chunks);
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
/* Stitching: chunks from holes before new ones (the `stitch` strategy)       */
/* ------------------------------------------------------------------------ */

/* The chunks expandable_alloc_block would map to serve `size` bytes from
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

/* 1 if `block` is a hole the stitching may take chunks from: free, mapped,
 * with no pending use, not at the growing end of its range (a mapped block
 * followed by unmapped space is where the range grows: taking from it would
 * only map the same chunk back), and outside [lo, hi) of the range `keep`,
 * the blocks the request is about to use and their neighbours. */
static int is_hole(const vb_cc_block *block, const vb_cc_segment *keep, vb_addr lo, vb_addr hi)
{
    if (!block->mapped || !vb_cc_block_available(block)) return 0;
    if (block->segment == keep && block->addr < hi && block->addr + block->size > lo) return 0;
    return 1;
}

/* Takes up to `wanted` chunks out of holes of the ranges (any stream, any
 * pool) whose chunks are candidate's size, lowest address first, into the
 * pool's spares; returns how many. */
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
        if (expandable_of(segment)->chunk_size != expandable_of(keep)->chunk_size) continue;
        for (vb_cc_block *block = segment->head; block && taken < wanted; block = block->next)
            if (is_hole(block, keep, lo, hi)) taken += unmap_block(cc, block, wanted - taken, pool);
    }
    return taken;
}

/* Releases the spares an alloc_block did not map (none when chunks_to_map
 * foresaw it right). */
static void release_spares(vb_cc_allocator *cc, vb_cc_pool *pool)
{
    while (pool->spare_count) cc->device->ops->vm_release(cc->device, pool->spare_chunks[--pool->spare_count]);
}

/* alloc_block of the stitching source: where expandable would map new
 * chunks, it first unmaps as many chunks from holes (free memory stranded
 * between live blocks) and maps those instead, creating chunks only for
 * the rest. Holes therefore never outlast a request for new memory. */
static vb_status stitching_alloc_block(vb_cc_allocator *cc, vb_cc_pool *pool, vb_stream stream, uint64_t size,
                                       uint64_t alloc_size, vb_cc_block **out)
{
    vb_cc_block *candidate = NULL, *last = NULL;
    vb_status status = find_expandable_block(cc, pool, stream, size, &candidate);
    if (status != VB_OK) return status;
    size_t wanted = chunks_to_map(candidate, size, &last);
    if (wanted) reclaim_holes(cc, pool, candidate, last, wanted);
    status = expandable_alloc_block(cc, pool, stream, size, alloc_size, out);
    release_spares(cc, pool);
    return status;
}

const vb_cc_source vb_cc_stitching_segments = {
    .expandable = 1,
    .alloc_block = stitching_alloc_block,
    .release_pool = expandable_release_pool,
    .release_block = NULL,
    .destroy_segment = expandable_destroy_segment,
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
