/* vrambench — the sim's model of a stream-ordered memory pool
 * (cudaMemPoolCreate / cudaMallocFromPoolAsync / cudaFreeAsync).
 *
 * What CUDA documents, and this model follows:
 *  - A block freed on stream S is reusable at once by allocations on S
 *    (they are ordered after the free), and by other streams once the free
 *    has completed, i.e. once the work queued on S before the free is done
 *    (the pool's opportunistic reuse). A free's logical time is S's tail.
 *  - cudaMemPoolAttrReleaseThreshold: "when more than the release threshold
 *    bytes of memory are held by the memory pool, the allocator will try to
 *    release memory back to the OS on the next call to stream, event or
 *    context synchronize" (CUDA runtime API, cudaMemPoolSetAttribute).
 *  - cudaMemPoolTrimTo releases memory until fewer than minBytesToKeep
 *    bytes stay reserved "or there is no more memory that the allocator can
 *    safely release": memory behind live allocations, or behind frees whose
 *    completion the host has not seen, stays.
 *  - Reserved and used bytes are cudaMemPoolAttrReservedMemCurrent and
 *    cudaMemPoolAttrUsedMemCurrent; their high-water marks ...MemHigh, which
 *    setting to 0 resets to the current values.
 *
 * What CUDA leaves undocumented, and this model chooses:
 *  - Chunks. The pool backs its allocations with physical memory mapped at
 *    the driver's granularity (2 MiB, cuMemGetAllocationGranularity on
 *    current GPUs); how it groups that memory is internal. Here a pool that
 *    has no usable free range grows by one chunk of the request rounded up
 *    to 2 MiB, and gives memory back a whole chunk at a time, when no byte
 *    of the chunk is in use or waiting for a free to complete. A 1-byte
 *    allocation on an empty pool thus reserves 2 MiB, as it does on a GPU.
 *  - Rounding. Requests are rounded up to VB_POOL_ROUNDING (512 B, what was
 *    observed of cudaMallocAsync) and carved from free ranges by best fit
 *    (smallest usable range, then lowest address), the rest of the range
 *    staying free. Free neighbours inside a chunk coalesce when the result
 *    keeps the same reuse rule: both frees completed, or both on one stream.
 *  - Not modelled: reuse after the allocating stream waited on an event that
 *    follows the free (cudaMemPoolReuseFollowEventDependencies) and reuse by
 *    inserting a dependency on the freeing stream (...AllowInternalDependencies).
 *    Both only let CUDA reuse sooner, so the sim's reserved figures are an
 *    upper bound for multi-stream programs.
 *  - Releases at synchronization go newest chunk first; the sim counts every
 *    move of its clock (a test advancing it included) as a synchronization.
 *  - Destroying a pool gives all of its chunks back at once, live blocks
 *    included (CUDA defers that until the blocks are freed).
 */
#include "device_sim_internal.h"

#include <stdlib.h>

#include "ordered_set.h"

/* ------------------------------------------------------------------------ */
/* Data                                                                      */
/* ------------------------------------------------------------------------ */

typedef struct pool_chunk pool_chunk;

/* A range of a chunk: handed out (live) or free. */
typedef struct pool_block {
    vb_oset_node by_size;          /* in the pool's free set while free */
    vb_addr addr;
    uint64_t size;
    pool_chunk *chunk;
    struct pool_block *prev, *next; /* neighbours in the chunk, by address */
    int free;
    /* For a free block: the stream whose free it was (NULL when any stream
     * may take it) and the logical time that free completes. */
    const struct vb_stream_s *freed_on;
    uint64_t ready_ns;
} pool_block;

/* Memory the pool took from the device in one piece. */
struct pool_chunk {
    vb_addr addr;
    uint64_t size;
    uint64_t used_bytes;           /* bytes of live blocks in it */
    uint64_t last_free_ns;         /* when the latest free inside it completes */
    pool_block *first;             /* its blocks, in address order */
    pool_chunk *older, *newer;     /* the pool's chunks, in creation order */
};

struct vb_pool_s {
    uint64_t release_threshold;
    uint64_t reserved_bytes;       /* sum of chunk sizes */
    uint64_t used_bytes;           /* sum of live block sizes */
    uint64_t reserved_high, used_high; /* the maxima since creation or the last reset */
    vb_ordered_set free_blocks;    /* by (size, address) */
    vb_addr_map live;              /* address -> pool_block* of live blocks */
    pool_chunk *oldest, *newest;
    /* The latest completion time of any free, and the clock at the last
     * coalescing pass: a pass finds nothing new unless a free was still
     * pending then (the first exceeds the second). */
    uint64_t latest_ready_ns, coalesced_at_ns;
};

#define POOL_CHUNK_GRANULARITY VB_DRIVER_PAGE

/* Orders free blocks by size, then address (addresses are unique). */
static int compare_size_addr(const vb_oset_node *a, const vb_oset_node *b)
{
    const pool_block *x = VB_OSET_ENTRY(a, pool_block, by_size);
    const pool_block *y = VB_OSET_ENTRY(b, pool_block, by_size);
    if (x->size != y->size) return x->size < y->size ? -1 : 1;
    return (x->addr > y->addr) - (x->addr < y->addr);
}

/* Rounds up to a power-of-two multiple; 0 when that overflows. */
static uint64_t round_up(uint64_t size, uint64_t multiple)
{
    if (size > UINT64_MAX - (multiple - 1)) return 0;
    return (size + multiple - 1) & ~(multiple - 1);
}

/* ------------------------------------------------------------------------ */
/* Reuse rule and coalescing                                                 */
/* ------------------------------------------------------------------------ */

/* 1 if a free block may serve an allocation on stream `s` now. */
static int usable_by(const pool_block *block, const struct vb_stream_s *s, uint64_t now_ns)
{
    return block->ready_ns <= now_ns || block->freed_on == s;
}

/* 1 if two adjacent free blocks can become one block with one reuse rule:
 * both frees completed (any stream may take it), or both on one stream. */
static int mergeable(const pool_block *a, const pool_block *b, uint64_t now_ns)
{
    return (a->ready_ns <= now_ns && b->ready_ns <= now_ns) || a->freed_on == b->freed_on;
}

/* Folds free block `right` (the next one after `left`) into `left`. Both
 * are in the free set; `left` stays in it with its new size. */
static void merge_into(vb_pool pool, pool_block *left, pool_block *right, uint64_t now_ns)
{
    vb_oset_remove(&pool->free_blocks, &left->by_size);
    vb_oset_remove(&pool->free_blocks, &right->by_size);
    int both_done = left->ready_ns <= now_ns && right->ready_ns <= now_ns;
    left->size += right->size;
    if (right->ready_ns > left->ready_ns) left->ready_ns = right->ready_ns;
    if (both_done) left->freed_on = NULL;
    left->next = right->next;
    if (right->next) right->next->prev = left;
    free(right);
    vb_oset_insert(&pool->free_blocks, &left->by_size);
}

/* Coalesces a free block with its free neighbours where the rule allows;
 * returns the block that now holds it. */
static pool_block *coalesce(vb_pool pool, pool_block *block, uint64_t now_ns)
{
    if (block->next && block->next->free && mergeable(block, block->next, now_ns))
        merge_into(pool, block, block->next, now_ns);
    if (block->prev && block->prev->free && mergeable(block->prev, block, now_ns)) {
        pool_block *prev = block->prev;
        merge_into(pool, prev, block, now_ns);
        block = prev;
    }
    return block;
}

/* After the clock moved: frees that completed let more neighbours merge. */
static void coalesce_completed(vb_pool pool, uint64_t now_ns)
{
    if (pool->latest_ready_ns <= pool->coalesced_at_ns) return;
    pool->coalesced_at_ns = now_ns;
    for (pool_chunk *chunk = pool->oldest; chunk; chunk = chunk->newer)
        for (pool_block *block = chunk->first; block; block = block->next)
            while (block->free && block->next && block->next->free && mergeable(block, block->next, now_ns))
                merge_into(pool, block, block->next, now_ns);
}

/* ------------------------------------------------------------------------ */
/* Chunks                                                                    */
/* ------------------------------------------------------------------------ */

/* Takes a chunk of `size` bytes (a multiple of 2 MiB) from the device, as
 * one free block any stream may use. */
static vb_status grow(vb_device *dev, vb_pool pool, uint64_t size, pool_block **out)
{
    pool_chunk *chunk = calloc(1, sizeof *chunk);
    pool_block *block = calloc(1, sizeof *block);
    if (!chunk || !block) {
        free(chunk);
        free(block);
        return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    }
    vb_status status = sim_take(dev, size);
    if (status != VB_OK) {
        free(chunk);
        free(block);
        return status;
    }
    chunk->addr = sim_next_address(dev, size);
    chunk->size = size;
    chunk->first = block;
    chunk->older = pool->newest;
    if (pool->newest) pool->newest->newer = chunk;
    else pool->oldest = chunk;
    pool->newest = chunk;
    pool->reserved_bytes += size;
    if (pool->reserved_bytes > pool->reserved_high) pool->reserved_high = pool->reserved_bytes;
    block->addr = chunk->addr;
    block->size = size;
    block->chunk = chunk;
    block->free = 1;
    vb_oset_insert(&pool->free_blocks, &block->by_size);
    *out = block;
    return VB_OK;
}

/* 1 if the chunk holds no live block and every free inside it completed. */
static int releasable(const pool_chunk *chunk, uint64_t now_ns)
{
    return chunk->used_bytes == 0 && chunk->last_free_ns <= now_ns;
}

/* Gives a chunk back to the device with all of its blocks. */
static void release_chunk(vb_device *dev, vb_pool pool, pool_chunk *chunk)
{
    for (pool_block *block = chunk->first, *next; block; block = next) {
        next = block->next;
        if (block->free) vb_oset_remove(&pool->free_blocks, &block->by_size);
        else vb_addr_map_remove(&pool->live, block->addr, NULL);
        free(block);
    }
    if (chunk->older) chunk->older->newer = chunk->newer;
    else pool->oldest = chunk->newer;
    if (chunk->newer) chunk->newer->older = chunk->older;
    else pool->newest = chunk->older;
    pool->reserved_bytes -= chunk->size;
    pool->used_bytes -= chunk->used_bytes;
    sim_give(dev, chunk->size);
    free(chunk);
}

/* Releases releasable chunks, newest first, while more than `keep_bytes`
 * stay reserved. */
static void release_down_to(vb_device *dev, vb_pool pool, uint64_t keep_bytes)
{
    uint64_t now_ns = sim_of(dev)->now_ns;
    for (pool_chunk *chunk = pool->newest, *older; chunk && pool->reserved_bytes > keep_bytes; chunk = older) {
        older = chunk->older;
        if (releasable(chunk, now_ns)) release_chunk(dev, pool, chunk);
    }
}

/* ------------------------------------------------------------------------ */
/* The pool ops                                                              */
/* ------------------------------------------------------------------------ */

/* Creates an empty pool and puts it on the sim's list. */
vb_status sim_pool_create(vb_device *dev, uint64_t release_threshold, vb_pool *out)
{
    sim_state *sim = sim_of(dev);
    if (sim->pool_count == sim->pool_capacity) {
        size_t capacity = sim->pool_capacity ? sim->pool_capacity * 2 : 4;
        vb_pool *pools = realloc(sim->pools, capacity * sizeof *pools);
        if (!pools) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
        sim->pools = pools;
        sim->pool_capacity = capacity;
    }
    vb_pool pool = calloc(1, sizeof *pool);
    if (!pool) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    pool->release_threshold = release_threshold;
    vb_oset_init(&pool->free_blocks, compare_size_addr);
    sim->pools[sim->pool_count++] = pool;
    *out = pool;
    return VB_OK;
}

/* Gives every chunk back (live blocks too) and forgets the pool. */
void sim_pool_destroy(vb_device *dev, vb_pool pool)
{
    sim_state *sim = sim_of(dev);
    if (!pool) return;
    while (pool->newest) release_chunk(dev, pool, pool->newest);
    vb_addr_map_clear(&pool->live);
    for (size_t i = 0; i < sim->pool_count; i++) {
        if (sim->pools[i] != pool) continue;
        sim->pools[i] = sim->pools[--sim->pool_count];
        break;
    }
    free(pool);
}

/* Best fit over the free blocks `stream` may use now, else a new chunk. */
vb_status sim_pool_malloc(vb_device *dev, vb_pool pool, uint64_t size, vb_stream stream, vb_addr *out)
{
    uint64_t now_ns = sim_of(dev)->now_ns;
    const struct vb_stream_s *s = sim_stream(dev, stream);
    if (size == 0) return vb_error(VB_ERR_INVALID, "sim: pool_malloc of 0 bytes");
    uint64_t rounded = round_up(size, VB_POOL_ROUNDING);
    uint64_t chunk_size = round_up(rounded, POOL_CHUNK_GRANULARITY);
    if (rounded == 0 || chunk_size == 0)
        return vb_error(VB_ERR_OOM, "sim: out of memory: %llu bytes asked of a pool", (unsigned long long)size);

    pool_block probe = {.size = rounded, .addr = 0};
    vb_oset_node *node = vb_oset_lower_bound(&pool->free_blocks, &probe.by_size);
    while (node && !usable_by(VB_OSET_ENTRY(node, pool_block, by_size), s, now_ns))
        node = vb_oset_next(&pool->free_blocks, node);
    pool_block *block = node ? VB_OSET_ENTRY(node, pool_block, by_size) : NULL;
    if (!block) {
        vb_status status = grow(dev, pool, chunk_size, &block);
        if (status != VB_OK) return status;
    }
    if (vb_addr_map_put(&pool->live, block->addr, (uint64_t)(uintptr_t)block) != 0)
        return vb_error(VB_ERR_HOST_OOM, "out of host memory");

    vb_oset_remove(&pool->free_blocks, &block->by_size);
    if (block->size > rounded) {
        pool_block *rest = calloc(1, sizeof *rest);
        if (!rest) {
            vb_addr_map_remove(&pool->live, block->addr, NULL);
            vb_oset_insert(&pool->free_blocks, &block->by_size);
            return vb_error(VB_ERR_HOST_OOM, "out of host memory");
        }
        *rest = *block; /* same chunk, same reuse rule */
        rest->addr = block->addr + rounded;
        rest->size = block->size - rounded;
        rest->prev = block;
        if (block->next) block->next->prev = rest;
        block->next = rest;
        block->size = rounded;
        vb_oset_insert(&pool->free_blocks, &rest->by_size);
    }
    block->free = 0;
    block->freed_on = NULL;
    block->ready_ns = 0;
    block->chunk->used_bytes += rounded;
    pool->used_bytes += rounded;
    if (pool->used_bytes > pool->used_high) pool->used_high = pool->used_bytes;
    *out = block->addr;
    return VB_OK;
}

/* Frees in stream order: reusable on `stream` at once, elsewhere once the
 * work queued on `stream` so far has completed. */
vb_status sim_pool_free(vb_device *dev, vb_pool pool, vb_addr addr, vb_stream stream)
{
    uint64_t now_ns = sim_of(dev)->now_ns;
    const struct vb_stream_s *s = sim_stream(dev, stream);
    uint64_t value;
    if (!vb_addr_map_remove(&pool->live, addr, &value))
        return vb_error(VB_ERR_INVALID, "sim: pool_free of 0x%llx, which the pool has not handed out",
                        (unsigned long long)addr);
    pool_block *block = (pool_block *)(uintptr_t)value;
    block->free = 1;
    block->freed_on = s;
    block->ready_ns = s->tail_ns;
    block->chunk->used_bytes -= block->size;
    if (block->ready_ns > block->chunk->last_free_ns) block->chunk->last_free_ns = block->ready_ns;
    if (block->ready_ns > pool->latest_ready_ns) pool->latest_ready_ns = block->ready_ns;
    pool->used_bytes -= block->size;
    vb_oset_insert(&pool->free_blocks, &block->by_size);
    coalesce(pool, block, now_ns);
    return VB_OK;
}

/* Releases unused chunks until at most `keep_bytes` stay reserved. */
vb_status sim_pool_trim(vb_device *dev, vb_pool pool, uint64_t keep_bytes)
{
    release_down_to(dev, pool, keep_bytes);
    return VB_OK;
}

/* Reserved = the chunks' bytes, used = the live blocks' rounded bytes. */
vb_status sim_pool_usage(vb_device *dev, vb_pool pool, uint64_t *reserved_bytes, uint64_t *used_bytes)
{
    (void)dev;
    *reserved_bytes = pool->reserved_bytes;
    *used_bytes = pool->used_bytes;
    return VB_OK;
}

/* The high-water marks of reserved and used bytes. */
vb_status sim_pool_high(vb_device *dev, vb_pool pool, uint64_t *reserved_high, uint64_t *used_high)
{
    (void)dev;
    *reserved_high = pool->reserved_high;
    *used_high = pool->used_high;
    return VB_OK;
}

/* The marks start again from the current values. */
vb_status sim_pool_reset_high(vb_device *dev, vb_pool pool)
{
    (void)dev;
    pool->reserved_high = pool->reserved_bytes;
    pool->used_high = pool->used_bytes;
    return VB_OK;
}

/* Every synchronization: completed frees coalesce, then each pool gives back
 * unused chunks while it holds more than its release threshold. */
void sim_pools_on_synchronize(vb_device *dev)
{
    sim_state *sim = sim_of(dev);
    for (size_t i = 0; i < sim->pool_count; i++) {
        coalesce_completed(sim->pools[i], sim->now_ns);
        release_down_to(dev, sim->pools[i], sim->pools[i]->release_threshold);
    }
}
