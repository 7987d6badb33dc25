/* vrambench — virtual-memory ranges (vm_range.h): reserving a range per
 * (stream, pool), creating and mapping physical handles at its units as
 * the pool grows, unmapping and releasing them as it shrinks. PyTorch's
 * ExpandableSegment and the functions around it; where stitch's growth
 * (VB_VM_HANDLE_PER_GROWTH) differs, the comments say so.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vm_range.h"

/* ------------------------------------------------------------------------ */
/* Physical handles                                                           */
/* ------------------------------------------------------------------------ */

/* Makes room for `more` handles past the mapped ones; 0, or -1 when host
 * memory runs out. */
static int reserve_handles(vb_vm_range *range, size_t more)
{
    size_t count = range->handle_count + more;
    if (count <= range->handle_capacity) return 0;
    size_t capacity = range->handle_capacity ? range->handle_capacity : 16;
    while (capacity < count) capacity *= 2;
    vb_vm_handle *grown = realloc(range->handles, capacity * sizeof *grown);
    if (!grown) return -1;
    range->handles = grown;
    range->handle_capacity = capacity;
    return 0;
}

size_t vb_vm_range_handle_lower_bound(const vb_vm_range *range, size_t unit)
{
    size_t lo = 0, hi = range->handle_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (range->handles[mid].first < unit) lo = mid + 1;
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

void vb_vm_range_release_spares(vb_cc_allocator *cc, vb_cc_pool *pool)
{
    while (pool->spare_count) cc->device->ops->vm_release(cc->device, pool->spare_chunks[--pool->spare_count].handle);
}

/* Unmaps mapped handles [from, to) (by index), one call per handle, and
 * drops them from the range: released, or, with `keep` (room reserved by
 * reserve_spares), kept as keep's spares. */
static void unmap_chunks(vb_cc_allocator *cc, vb_vm_range *range, size_t from, size_t to, vb_cc_pool *keep)
{
    vb_device *dev = cc->device;
    for (size_t i = from; i < to; i++) {
        const vb_vm_handle *h = &range->handles[i];
        uint64_t bytes = h->span * range->chunk_size;
        dev->ops->vm_unmap(dev, range->segment.base + h->first * range->chunk_size, bytes);
        if (keep)
            keep->spare_chunks[keep->spare_count++] = (vb_cc_spare){h->handle, bytes};
        else
            dev->ops->vm_release(dev, h->handle);
    }
    if (to == from) return;
    memmove(range->handles + from, range->handles + to, (range->handle_count - to) * sizeof *range->handles);
    range->handle_count -= to - from;
}

/* Picks the handles that will back units [begin, ...), at least up to
 * `end` and never past `limit`, into added[] (in unit order; room for
 * them reserved): the pool's spares that fit first (stitch), then new ones
 * (expandable: one per unit; stitch: one covering the rest, at least
 * growth_units and at most max_units where they fit). Returns the count in
 * *count; on failure releases every handle it picked (the spares among
 * them) and returns the status. */
static vb_status back_units(vb_cc_allocator *cc, vb_vm_range *range, size_t begin, size_t end, size_t limit,
                            vb_vm_handle *added, size_t *count)
{
    vb_device *dev = cc->device;
    vb_cc_pool *pool = range->segment.pool;
    size_t at = begin, n = 0;
    for (size_t i = pool->spare_count; range->variable && at < end && i-- > 0;) {
        size_t span = (size_t)(pool->spare_chunks[i].size / range->chunk_size);
        if (at + span > limit) continue;
        added[n++] = (vb_vm_handle){at, span, pool->spare_chunks[i].handle, 0};
        pool->spare_chunks[i] = pool->spare_chunks[--pool->spare_count];
        at += span;
    }
    vb_status status = VB_OK;
    while (at < end && status == VB_OK) {
        size_t span = 1;
        if (range->variable) {
            span = end - at > range->growth_units ? end - at : range->growth_units;
            if (span > range->max_units) span = range->max_units;
            if (at + span > limit) span = limit - at;
        }
        vb_phys handle;
        status = dev->ops->vm_create(dev, span * range->chunk_size, &handle);
        if (status == VB_OK) {
            added[n++] = (vb_vm_handle){at, span, handle, 0};
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
static vb_status map_chunks(vb_cc_allocator *cc, vb_vm_range *range, size_t begin, size_t end, size_t limit,
                            size_t *mapped_end)
{
    vb_device *dev = cc->device;
    vb_cc_pool *pool = range->segment.pool;
    size_t bound = range->variable ? pool->spare_count + (end - begin) / range->max_units + 1 : end - begin;
    /* The new handles are gathered at the end of the room, clear of the
     * mapped ones moving up to make their place. */
    if (reserve_handles(range, 2 * bound) != 0) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    vb_vm_handle *added = range->handles + range->handle_capacity - bound;
    size_t count = 0;
    vb_status status = back_units(cc, range, begin, end, limit, added, &count);
    if (status != VB_OK) return status;
    *mapped_end = begin;
    if (count == 0) return VB_OK;
    size_t mapped = 0;
    for (; status == VB_OK && mapped < count; mapped++)
        status = dev->ops->vm_map(dev, range->segment.base + added[mapped].first * range->chunk_size,
                                  added[mapped].span * range->chunk_size, added[mapped].handle);
    if (status != VB_OK) mapped--;
    size_t backed = added[count - 1].first + added[count - 1].span;
    /* One access call over the new handles together, as PyTorch's ExpandableSegment::map does. */
    if (status == VB_OK)
        status = dev->ops->vm_set_access(dev, range->segment.base + begin * range->chunk_size,
                                         (backed - begin) * range->chunk_size);
    if (status != VB_OK) {
        for (size_t i = 0; i < count; i++) {
            if (i < mapped)
                dev->ops->vm_unmap(dev, range->segment.base + added[i].first * range->chunk_size,
                                   added[i].span * range->chunk_size);
            dev->ops->vm_release(dev, added[i].handle);
        }
        return status;
    }
    size_t at = vb_vm_range_handle_lower_bound(range, begin);
    memmove(range->handles + at + count, range->handles + at, (range->handle_count - at) * sizeof *range->handles);
    memmove(range->handles + at, added, count * sizeof *added);
    range->handle_count += count;
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
static vb_status new_range(vb_cc_allocator *cc, vb_cc_pool *pool, vb_stream stream, vb_vm_growth growth,
                           vb_cc_block **out)
{
    vb_device *dev = cc->device;
    uint64_t free_bytes = 0, total_bytes = 0;
    vb_status status = dev->ops->mem_info(dev, &free_bytes, &total_bytes);
    if (status != VB_OK) return status;
    uint64_t granularity = dev->ops->vm_granularity(dev);
    int variable = growth == VB_VM_HANDLE_PER_GROWTH;
    uint64_t chunk = pool->is_small || variable ? VB_CC_SMALL_BUFFER : cc->large_chunk;
    chunk = (chunk + granularity - 1) / granularity * granularity;
    uint64_t wanted = total_bytes + total_bytes / 8;
    uint64_t size = (wanted + chunk - 1) / chunk * chunk;
    vb_addr base = 0;
    status = dev->ops->vm_reserve(dev, size, &base);
    if (status != VB_OK) return status;
    vb_vm_range *range = calloc(1, sizeof *range);
    vb_cc_block *block = range ? vb_cc_block_new(cc, base, size, stream, pool, &range->segment) : NULL;
    if (!block) {
        free(range);
        dev->ops->vm_free(dev, base, size);
        return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    }
    range->chunk_size = chunk;
    vb_cc_pool_note_releasable(pool, chunk);
    range->variable = variable;
    range->growth_units = 1;
    range->max_units = SIZE_MAX;
    if (variable && !pool->is_small) range->growth_units = (size_t)((cc->large_chunk + chunk - 1) / chunk);
    if (variable && cc->handle_max) {
        range->max_units = (size_t)(cc->handle_max / chunk);
        if (range->max_units < range->growth_units) range->max_units = range->growth_units;
    }
    range->segment.base = base;
    range->segment.size = size;
    range->segment.head = block;
    range->segment.pool = pool;
    range->segment.stream = stream;
    block->mapped = 0;
    vb_oset_insert(&pool->unmapped, &block->class_node);
    vb_cc_segment_add(cc, &range->segment);
    *out = block;
    return VB_OK;
}

vb_status vb_vm_range_find_block(vb_cc_allocator *cc, vb_cc_pool *pool, vb_stream stream, uint64_t size,
                                 vb_vm_growth growth, vb_cc_block **out)
{
    vb_cc_block probe = {.stream = stream, .addr = 0};
    for (vb_oset_node *node = vb_oset_lower_bound(&pool->unmapped, &probe.class_node); node;
         node = vb_oset_next(&pool->unmapped, node)) {
        vb_cc_block *candidate = VB_OSET_ENTRY(node, vb_cc_block, class_node);
        if (candidate->stream != stream) break;
        if (vb_cc_block_available(candidate->prev)) candidate = candidate->prev;
        if (has_room(candidate, size)) {
            *out = candidate;
            return VB_OK;
        }
    }
    return new_range(cc, pool, stream, growth, out);
}

vb_status vb_vm_range_map_block(vb_cc_allocator *cc, vb_cc_block *to_map, uint64_t size)
{
    vb_vm_range *range = vb_vm_range_of(to_map->segment);
    vb_cc_pool *pool = vb_cc_block_pool(cc, to_map);
    uint64_t offset = to_map->addr - range->segment.base;
    size_t begin = offset / range->chunk_size;
    size_t end = (offset + size + range->chunk_size - 1) / range->chunk_size;
    size_t limit = (offset + to_map->size) / range->chunk_size;
    /* The unmapped rest's struct first: nothing is left to undo when host memory runs out. */
    vb_cc_block *rest = vb_cc_block_new(cc, to_map->addr, to_map->size, to_map->stream, pool, to_map->segment);
    if (!rest) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    size_t mapped_end = end;
    vb_status status = map_chunks(cc, range, begin, end, limit, &mapped_end);
    if (status != VB_OK) {
        vb_cc_block_recycle(cc, rest);
        return status;
    }
    uint64_t mapped_size = (mapped_end - begin) * range->chunk_size;
    if (mapped_size < to_map->size) {
        rest->addr = to_map->addr + mapped_size;
        rest->size = to_map->size - mapped_size;
    } else {
        vb_cc_block_recycle(cc, rest);
        rest = NULL;
    }
    vb_oset_remove(&pool->unmapped, &to_map->class_node);
    to_map->mapped = 1;
    if (rest) {
        rest->mapped = 0;
        vb_cc_splice(rest, to_map, to_map->next);
        vb_oset_insert(&pool->unmapped, &rest->class_node);
        to_map->size = mapped_size;
    }
    vb_cc_try_merge(cc, to_map, to_map->prev);
    vb_cc_try_merge(cc, to_map, to_map->next);
    vb_cc_pool_insert(pool, to_map);
    return VB_OK;
}

vb_status vb_vm_range_alloc_block(vb_cc_allocator *cc, vb_cc_pool *pool, vb_stream stream, uint64_t size,
                                  vb_vm_growth growth, vb_cc_block **out, int *partly)
{
    /* A map_block that fails undoes only its own work: those before it stay. */
    int mapped = 0;
    if (partly) *partly = 0;
    vb_cc_block *candidate = NULL;
    vb_status status = vb_vm_range_find_block(cc, pool, stream, size, growth, &candidate);
    if (status != VB_OK) return status;
    if (!candidate->mapped) {
        status = vb_vm_range_map_block(cc, candidate, candidate->size < size ? candidate->size : size);
        if (status != VB_OK) return status;
        mapped = 1;
    }
    while (candidate->size < size) {
        /* candidate is free and mapped; the unmapped space after it grows it. */
        vb_cc_block *next = candidate->next;
        uint64_t missing = size - candidate->size;
        status = vb_vm_range_map_block(cc, next, missing < next->size ? missing : next->size);
        if (status != VB_OK) {
            if (partly) *partly = mapped;
            return status;
        }
        mapped = 1;
        candidate = next;
    }
    vb_cc_pool_erase(pool, candidate);
    *out = candidate;
    return VB_OK;
}

/* ------------------------------------------------------------------------ */
/* Shrinking: unmap_block, release_blocks                                     */
/* ------------------------------------------------------------------------ */

size_t vb_vm_range_unmap_block(vb_cc_allocator *cc, vb_cc_block *block, size_t max_units, vb_cc_pool *keep)
{
    vb_vm_range *range = vb_vm_range_of(block->segment);
    uint64_t offset = block->addr - range->segment.base;
    size_t begin = (offset + range->chunk_size - 1) / range->chunk_size;
    size_t last = (offset + block->size) / range->chunk_size;
    /* Whole handles only: skip the rest of one that starts before the block,
     * stop before one that ends after it, one a stitched range maps, or
     * once max_units units are taken. */
    size_t from = vb_vm_range_handle_lower_bound(range, begin), to = from, units = 0;
    while (to < range->handle_count && range->handles[to].first + range->handles[to].span <= last &&
           units < max_units && !range->handles[to].borrowers)
        units += range->handles[to++].span;
    if (to == from) return 0;
    begin = range->handles[from].first;
    size_t end = begin + units;
    if (keep && reserve_spares(keep, to - from) != 0) return 0;
    vb_addr start = range->segment.base + begin * range->chunk_size;
    uint64_t unmapped_size = (end - begin) * range->chunk_size;
    uint64_t before_size = start - block->addr, after_size = block->size - before_size - unmapped_size;
    vb_cc_pool *pool = vb_cc_block_pool(cc, block);
    vb_cc_block *before =
        before_size ? vb_cc_block_new(cc, block->addr, before_size, block->stream, pool, block->segment) : NULL;
    vb_cc_block *after =
        after_size ? vb_cc_block_new(cc, start + unmapped_size, after_size, block->stream, pool, block->segment)
                   : NULL;
    if ((before_size && !before) || (after_size && !after)) {
        if (before) vb_cc_block_recycle(cc, before);
        if (after) vb_cc_block_recycle(cc, after);
        return 0;
    }
    /* cuMemUnmap does not wait for the work using the memory; PyTorch waits
     * for the range's stream first. */
    cc->device->ops->stream_synchronize(cc->device, range->segment.stream);
    unmap_chunks(cc, range, from, to, keep);
    vb_cc_pool_erase(pool, block);
    if (before) {
        vb_cc_splice(before, block->prev, block);
        vb_cc_pool_insert(pool, before);
    }
    if (after) {
        vb_cc_splice(after, block, block->next);
        vb_cc_pool_insert(pool, after);
    }
    block->addr = start;
    block->size = unmapped_size;
    block->mapped = 0;
    vb_cc_try_merge(cc, block, block->prev);
    vb_cc_try_merge(cc, block, block->next);
    vb_oset_insert(&pool->unmapped, &block->class_node);
    return end - begin;
}

/* release_expandable_segment: a range with nothing mapped goes back. */
static void release_range(vb_cc_allocator *cc, vb_cc_block *block)
{
    vb_vm_range *range = vb_vm_range_of(block->segment);
    vb_oset_remove(&vb_cc_block_pool(cc, block)->unmapped, &block->class_node);
    vb_cc_segment_remove(cc, &range->segment);
    cc->device->ops->vm_free(cc->device, range->segment.base, range->segment.size);
    vb_cc_block_recycle(cc, block);
    free(range->handles);
    free(range);
}

/* One free block of release_pool's walk (vm_range.h). */
void vb_vm_range_release_block(vb_cc_allocator *cc, vb_cc_pool *pool, vb_cc_block *block, vb_vm_unmapped_fn unmapped)
{
    vb_addr lo = block->addr, hi = block->addr + block->size;
    if (!vb_vm_range_unmap_block(cc, block, SIZE_MAX, NULL)) return;
    int range_unmapped = !vb_cc_block_is_split(block);
    if (unmapped) unmapped(cc, pool, range_unmapped ? NULL : block, lo, hi);
    if (range_unmapped) release_range(cc, block);
}

/* As PyTorch's release_blocks, but only the free blocks of at least the
 * pool's smallest unit are visited (vb_cc_pool_first_at_least): a smaller
 * one holds no whole handle, and unmap_block leaves it as it is.
 * Unmapping removes only the block itself from the free set, and the
 * blocks it leaves around the unmapped units are smaller than it, so sort
 * before it: the successor taken first stays valid. A borrowed segment's
 * block is no range's: its source releases it. */
void vb_vm_range_release_pool_noting(vb_cc_allocator *cc, vb_cc_pool *pool, vb_vm_unmapped_fn unmapped)
{
    vb_oset_node *node = vb_cc_pool_first_at_least(pool, vb_oset_first(&pool->blocks));
    while (node) {
        vb_oset_node *next = vb_cc_pool_first_at_least(pool, vb_oset_next(&pool->blocks, node));
        vb_cc_block *block = VB_OSET_ENTRY(node, vb_cc_block, class_node);
        node = next;
        if (!block->segment->borrowed) vb_vm_range_release_block(cc, pool, block, unmapped);
    }
}

void vb_vm_range_release_pool(vb_cc_allocator *cc, vb_cc_pool *pool)
{
    vb_vm_range_release_pool_noting(cc, pool, NULL);
}

void vb_vm_range_destroy(vb_cc_allocator *cc, vb_cc_segment *segment)
{
    vb_vm_range *range = vb_vm_range_of(segment);
    unmap_chunks(cc, range, 0, range->handle_count, NULL);
    cc->device->ops->vm_free(cc->device, segment->base, segment->size);
    free(range->handles);
    free(range);
}
