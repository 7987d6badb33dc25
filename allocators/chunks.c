/* vrambench — regions of device memory cut into address-ordered chunks (see chunks.h). */
#include "chunks.h"

#include <stdlib.h>
#include <string.h>

#include "stream_list.h"

#define SLAB_ITEMS 64

/* ------------------------------------------------------------------------ */
/* Slab pools                                                                */
/* ------------------------------------------------------------------------ */

static void slab_pool_init(vb_slab_pool *pool, size_t item_size)
{
    memset(pool, 0, sizeof *pool);
    pool->item_size = item_size;
}

/* Pushes `item` on the spare list; the link lives in its first pointer's bytes. */
static void slab_pool_put(vb_slab_pool *pool, void *item)
{
    memcpy(item, &pool->spare, sizeof pool->spare);
    pool->spare = item;
}

/* A recycled item, or one from a new slab; NULL when host memory runs out.
 * Its contents are whatever they were: callers reset what they need. */
static void *slab_pool_get(vb_slab_pool *pool)
{
    if (!pool->spare) {
        if (pool->slab_count == pool->slab_capacity) {
            size_t capacity = pool->slab_capacity ? pool->slab_capacity * 2 : 8;
            void **slabs = realloc(pool->slabs, capacity * sizeof *slabs);
            if (!slabs) return NULL;
            pool->slabs = slabs;
            pool->slab_capacity = capacity;
        }
        char *slab = calloc(SLAB_ITEMS, pool->item_size);
        if (!slab) return NULL;
        pool->slabs[pool->slab_count++] = slab;
        for (size_t i = SLAB_ITEMS; i-- > 0;) slab_pool_put(pool, slab + i * pool->item_size);
    }
    void *item = pool->spare;
    memcpy(&pool->spare, item, sizeof pool->spare);
    return item;
}

static void slab_pool_destroy(vb_slab_pool *pool)
{
    for (size_t i = 0; i < pool->slab_count; i++) free(pool->slabs[i]);
    free(pool->slabs);
    slab_pool_init(pool, pool->item_size);
}

/* ------------------------------------------------------------------------ */
/* Chunks and regions                                                        */
/* ------------------------------------------------------------------------ */

void vb_chunk_store_init(vb_chunk_store *store)
{
    slab_pool_init(&store->chunks, sizeof(vb_chunk));
    slab_pool_init(&store->regions, sizeof(vb_region));
}

void vb_chunk_store_destroy(vb_chunk_store *store)
{
    /* Slabs start zeroed and a chunk's stream list survives recycling, so
     * every non-NULL `uses` of every slot is a live buffer. */
    for (size_t s = 0; s < store->chunks.slab_count; s++) {
        vb_chunk *slab = store->chunks.slabs[s];
        for (size_t i = 0; i < SLAB_ITEMS; i++) free(slab[i].uses);
    }
    slab_pool_destroy(&store->chunks);
    slab_pool_destroy(&store->regions);
}

vb_chunk *vb_chunk_new(vb_chunk_store *store)
{
    vb_chunk *chunk = slab_pool_get(&store->chunks);
    if (!chunk) return NULL;
    vb_stream *uses = chunk->uses;
    uint32_t use_capacity = chunk->use_capacity;
    memset(chunk, 0, sizeof *chunk);
    chunk->uses = uses;
    chunk->use_capacity = use_capacity;
    return chunk;
}

void vb_chunk_recycle(vb_chunk_store *store, vb_chunk *chunk)
{
    slab_pool_put(&store->chunks, chunk);
}

vb_region *vb_region_new(vb_chunk_store *store)
{
    vb_region *region = slab_pool_get(&store->regions);
    if (region) memset(region, 0, sizeof *region);
    return region;
}

void vb_region_recycle(vb_chunk_store *store, vb_region *region)
{
    slab_pool_put(&store->regions, region);
}

vb_chunk *vb_chunk_split(vb_chunk_store *store, vb_chunk *chunk, uint64_t size)
{
    vb_chunk *rest = vb_chunk_new(store);
    if (!rest) return NULL;
    rest->addr = chunk->addr + size;
    rest->size = chunk->size - size;
    rest->region = chunk->region;
    rest->state = VB_CHUNK_FREE;
    rest->prev = chunk;
    rest->next = chunk->next;
    if (chunk->next) chunk->next->prev = rest;
    chunk->next = rest;
    chunk->size = size;
    return rest;
}

void vb_chunk_absorb_next(vb_chunk_store *store, vb_chunk *chunk)
{
    vb_chunk *next = chunk->next;
    chunk->size += next->size;
    chunk->next = next->next;
    if (next->next) next->next->prev = chunk;
    vb_chunk_recycle(store, next);
}

vb_status vb_chunk_record_use(vb_chunk *chunk, vb_stream stream)
{
    return vb_stream_list_add(&chunk->uses, &chunk->use_count, &chunk->use_capacity, stream);
}

int vb_chunk_hold(vb_deferred *deferred, vb_chunk *chunk)
{
    if (chunk->use_count == 0) return 0;
    size_t events = vb_deferred_hold(deferred, chunk, chunk->uses, chunk->use_count);
    chunk->use_count = 0;
    if (events == 0) return 0;
    chunk->pending_events = (uint32_t)events;
    chunk->state = VB_CHUNK_PENDING;
    return 1;
}

vb_status vb_chunk_record_stream(vb_addr_map *used, vb_addr addr, vb_stream stream, const char *owner)
{
    uint64_t key;
    if (!vb_addr_map_get(used, addr, &key))
        return vb_error(VB_ERR_INVALID, "%s: record_stream of 0x%llx, which is not allocated", owner,
                        (unsigned long long)addr);
    return vb_chunk_record_use(vb_chunk_from_key(key), stream);
}

vb_status vb_chunk_free_used(vb_addr_map *used, vb_deferred *deferred, vb_addr addr, const char *owner,
                             vb_chunk **release_now)
{
    uint64_t key;
    *release_now = NULL;
    if (!vb_addr_map_remove(used, addr, &key))
        return vb_error(VB_ERR_INVALID, "%s: free of 0x%llx, which is not allocated", owner, (unsigned long long)addr);
    vb_chunk *chunk = vb_chunk_from_key(key);
    if (!vb_chunk_hold(deferred, chunk)) *release_now = chunk;
    return VB_OK;
}

/* Three-way comparison of two integers. */
static int compare_u64(uint64_t a, uint64_t b)
{
    return (a > b) - (a < b);
}

int vb_chunk_compare_size(const vb_oset_node *a, const vb_oset_node *b)
{
    const vb_chunk *x = VB_CHUNK_OF(a), *y = VB_CHUNK_OF(b);
    int by_size = compare_u64(x->size, y->size);
    return by_size ? by_size : compare_u64(x->addr, y->addr);
}

int vb_chunk_compare_addr(const vb_oset_node *a, const vb_oset_node *b)
{
    return compare_u64(VB_CHUNK_OF(a)->addr, VB_CHUNK_OF(b)->addr);
}

int vb_region_compare_base(const vb_oset_node *a, const vb_oset_node *b)
{
    return compare_u64(VB_REGION_OF(a)->base, VB_REGION_OF(b)->base);
}

/* ------------------------------------------------------------------------ */
/* Regions that are driver allocations                                       */
/* ------------------------------------------------------------------------ */

vb_status vb_region_acquire(vb_chunk_store *store, vb_device *dev, uint64_t size, vb_region **out)
{
    vb_region *region = vb_region_new(store);
    vb_chunk *chunk = region ? vb_chunk_new(store) : NULL;
    if (!chunk) {
        if (region) vb_region_recycle(store, region);
        return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    }
    vb_addr base = 0;
    vb_status status = dev->ops->mem_alloc(dev, size, &base);
    if (status != VB_OK) {
        vb_chunk_recycle(store, chunk);
        vb_region_recycle(store, region);
        return status;
    }
    region->base = base;
    region->size = size;
    region->first = chunk;
    chunk->addr = base;
    chunk->size = size;
    chunk->region = region;
    chunk->state = VB_CHUNK_FREE;
    *out = region;
    return VB_OK;
}

vb_status vb_region_release(vb_chunk_store *store, vb_device *dev, vb_region *region)
{
    vb_status status = dev->ops->mem_free(dev, region->base);
    if (status != VB_OK) return status;
    for (vb_chunk *chunk = region->first; chunk;) {
        vb_chunk *next = chunk->next;
        vb_chunk_recycle(store, chunk);
        chunk = next;
    }
    vb_region_recycle(store, region);
    return VB_OK;
}

void vb_region_visit(const vb_region *segment, const vb_region *region, vb_block_visitor visit, void *context)
{
    for (const vb_chunk *chunk = region->first; chunk; chunk = chunk->next) {
        vb_block_info block = {segment->base, segment->size, chunk->addr, chunk->size,
                               chunk->state == VB_CHUNK_USED, chunk->state == VB_CHUNK_USED ? chunk->stream : NULL};
        visit(context, &block);
    }
}
