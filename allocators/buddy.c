/* vrambench — `buddy`: the classic binary buddy system (Knowlton 1965) over
 * large arenas obtained from the device.
 *
 * Every request is rounded up to a power of two of at least 512 B, and that
 * whole block is what the caller holds: allocated bytes count the block, so
 * allocated / requested shows the internal fragmentation the strategy pays
 * (close to 2 for sizes just above a power of two). A block of size 2^k is
 * cut from the smallest free block that fits by halving it; each halving
 * leaves a free "buddy". A freed block merges with its buddy whenever the
 * buddy is wholly free, recursively, so a wholly free arena is one block.
 *
 * Arenas are `arena_mb` (default 1 GiB, a power of two) or, for a larger
 * request, the request's own power of two. When the device cannot give a
 * full arena, smaller powers of two down to the block (and at least one
 * 2 MiB driver page) are tried; then held and wholly free arenas are given
 * back and the request retried once. empty_cache releases every wholly free
 * arena.
 *
 * Free blocks of each order sit in a set ordered by address, so the lowest
 * free block is split first, which keeps allocations packed towards the
 * start of the arenas. A block's buddy is its address neighbour (blocks tile
 * the arena), so a merge is O(1) and the whole of malloc/free O(log n).
 *
 * Streams are ignored: a freed block is reused by any stream; record_stream
 * holds a block back until the recorded streams' work completes (deferred.h). */
#include "allocator.h"

#include <stdlib.h>

#include "base/addr_map.h"
#include "chunks.h"

#define BUDDY_MIN_BLOCK 512
#define BUDDY_MIN_SHIFT 9
#define BUDDY_ORDERS (64 - BUDDY_MIN_SHIFT)   /* orders 0 .. 54: 512 B .. 2^63 B */

/* ------------------------------------------------------------------------ */
/* Settings and state                                                        */
/* ------------------------------------------------------------------------ */

typedef struct buddy_settings {
    uint64_t arena_mb;
} buddy_settings;

static const vb_option buddy_options[] = {
    {"arena_mb", VB_OPTION_U64, offsetof(buddy_settings, arena_mb), 2, 1 << 24,
     "MiB per arena from the device, a power of two; larger requests get their own; default 1024"},
};

typedef struct buddy_state {
    vb_device *device;
    const vb_alloc_stats *stats;              /* the seam's counts (allocator.h) */
    uint64_t arena_size;
    vb_ordered_set free_blocks[BUDDY_ORDERS]; /* per order, by address */
    uint64_t nonempty_orders;                 /* bit k: free_blocks[k] has a block */
    vb_ordered_set arenas;                    /* by base address */
    vb_addr_map used;                         /* address -> block handed out */
    vb_chunk_store store;
    vb_deferred deferred;
} buddy_state;

/* The order of a power-of-two block size >= 512. */
static unsigned order_of(uint64_t block_size)
{
    return vb_log2_floor(block_size) - BUDDY_MIN_SHIFT;
}

static void insert_free(buddy_state *buddy, vb_chunk *block)
{
    unsigned order = order_of(block->size);
    block->state = VB_CHUNK_FREE;
    vb_oset_insert(&buddy->free_blocks[order], &block->node);
    buddy->nonempty_orders |= UINT64_C(1) << order;
}

static void remove_free(buddy_state *buddy, vb_chunk *block)
{
    unsigned order = order_of(block->size);
    vb_oset_remove(&buddy->free_blocks[order], &block->node);
    if (buddy->free_blocks[order].count == 0) buddy->nonempty_orders &= ~(UINT64_C(1) << order);
}

/* ------------------------------------------------------------------------ */
/* Blocks                                                                    */
/* ------------------------------------------------------------------------ */

/* The lowest-addressed free block of the smallest order >= `order`, or NULL. */
static vb_chunk *find_block(buddy_state *buddy, unsigned order)
{
    uint64_t candidates = buddy->nonempty_orders & (~UINT64_C(0) << order);
    if (!candidates) return NULL;
    return VB_CHUNK_OF(vb_oset_first(&buddy->free_blocks[__builtin_ctzll(candidates)]));
}

/* Returns a block that is no longer used, merged with its buddies. */
static void release_block(buddy_state *buddy, vb_chunk *block)
{
    block->region->busy_chunks--;
    block->state = VB_CHUNK_FREE;
    while (block->size < block->region->size) {
        /* The lower buddy of a pair has the size bit of its offset clear. */
        int is_lower = ((block->addr - block->region->base) & block->size) == 0;
        vb_chunk *mate = is_lower ? block->next : block->prev;
        if (!mate || mate->state != VB_CHUNK_FREE || mate->size != block->size) break;
        remove_free(buddy, mate);
        if (is_lower) {
            vb_chunk_absorb_next(&buddy->store, block);
        } else {
            vb_chunk_absorb_next(&buddy->store, mate);
            block = mate;
        }
    }
    insert_free(buddy, block);
}

static void event_done(void *context, void *item)
{
    vb_chunk *block = item;
    if (vb_chunk_event_done(block)) release_block(context, block);
}

/* Halves free `block` down to `block_size` and hands it out. */
static vb_status take_block(buddy_state *buddy, vb_chunk *block, uint64_t block_size, uint64_t size,
                            vb_stream stream, vb_grant *out)
{
    remove_free(buddy, block);
    while (block->size > block_size) {
        vb_chunk *upper = vb_chunk_split(&buddy->store, block, block->size / 2);
        if (!upper) break; /* without host memory, the larger block serves */
        insert_free(buddy, upper);
    }
    block->state = VB_CHUNK_USED;
    block->requested = size;
    block->stream = stream;
    block->region->busy_chunks++;
    if (vb_addr_map_put(&buddy->used, block->addr, vb_chunk_key(block)) != 0) {
        release_block(buddy, block);
        return vb_error(VB_ERR_HOST_OOM, "buddy: out of host memory");
    }
    out->addr = block->addr;
    out->size = block->size;
    return VB_OK;
}

/* ------------------------------------------------------------------------ */
/* Arenas                                                                    */
/* ------------------------------------------------------------------------ */

/* Adds an arena that holds a block of `block_size`: the configured arena
 * size (or the block's own size if larger), halving on device OOM down to
 * the block or one driver page. */
static vb_status grow(buddy_state *buddy, uint64_t block_size)
{
    uint64_t smallest = block_size > VB_DRIVER_PAGE ? block_size : VB_DRIVER_PAGE;
    uint64_t arena_size = block_size > buddy->arena_size ? block_size : buddy->arena_size;
    vb_region *arena = NULL;
    vb_status status = vb_region_acquire(&buddy->store, buddy->device, arena_size, &arena);
    while (status == VB_ERR_OOM && arena_size / 2 >= smallest) {
        arena_size /= 2;
        status = vb_region_acquire(&buddy->store, buddy->device, arena_size, &arena);
    }
    if (status != VB_OK) return status;
    vb_oset_insert(&buddy->arenas, &arena->node);
    insert_free(buddy, arena->first);
    return VB_OK;
}

/* Frees every arena with no block used or held; VB_OK or the device's status. */
static vb_status release_free_arenas(buddy_state *buddy)
{
    vb_oset_node *node = vb_oset_first(&buddy->arenas);
    while (node) {
        vb_oset_node *next = vb_oset_next(&buddy->arenas, node);
        vb_region *arena = VB_REGION_OF(node);
        if (arena->busy_chunks == 0) {
            for (vb_chunk *block = arena->first; block; block = block->next) remove_free(buddy, block);
            vb_oset_remove(&buddy->arenas, node);
            vb_status status = vb_region_release(&buddy->store, buddy->device, arena);
            if (status != VB_OK) return status;
        }
        node = next;
    }
    return VB_OK;
}

/* A free block of `block_size` or larger, growing if needed; NULL with the status. */
static vb_chunk *find_or_grow(buddy_state *buddy, uint64_t block_size, vb_status *status)
{
    vb_chunk *block = find_block(buddy, order_of(block_size));
    *status = VB_OK;
    if (!block) {
        *status = grow(buddy, block_size);
        if (*status == VB_OK) block = find_block(buddy, order_of(block_size));
    }
    return block;
}

/* ------------------------------------------------------------------------ */
/* Ops                                                                       */
/* ------------------------------------------------------------------------ */

static vb_status buddy_create(vb_device *dev, const vb_config *config, void **state)
{
    buddy_settings settings = {.arena_mb = 1024};
    vb_status status = vb_config_apply(config, buddy_options, sizeof buddy_options / sizeof *buddy_options,
                                       &settings, "buddy");
    if (status != VB_OK) return status;
    if (settings.arena_mb & (settings.arena_mb - 1))
        return vb_error(VB_ERR_INVALID, "buddy: bad value '%llu' for arena_mb (a power of two)",
                        (unsigned long long)settings.arena_mb);
    buddy_state *buddy = calloc(1, sizeof *buddy);
    if (!buddy) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    buddy->device = dev;
    buddy->stats = vb_seam_stats(dev);
    buddy->arena_size = settings.arena_mb * VB_MiB;
    for (unsigned order = 0; order < BUDDY_ORDERS; order++) vb_oset_init(&buddy->free_blocks[order], vb_chunk_compare_addr);
    vb_oset_init(&buddy->arenas, vb_region_compare_base);
    vb_chunk_store_init(&buddy->store);
    vb_deferred_init(&buddy->deferred, dev);
    *state = buddy;
    return VB_OK;
}

static void buddy_destroy(void *state)
{
    buddy_state *buddy = state;
    vb_deferred_destroy(&buddy->deferred);
    for (vb_oset_node *node; (node = vb_oset_first(&buddy->arenas));) {
        vb_oset_remove(&buddy->arenas, node);
        vb_region_release(&buddy->store, buddy->device, VB_REGION_OF(node));
    }
    vb_addr_map_clear(&buddy->used);
    vb_chunk_store_destroy(&buddy->store);
    free(buddy);
}

static vb_status buddy_malloc(void *state, uint64_t size, vb_stream stream, vb_grant *out)
{
    buddy_state *buddy = state;
    vb_deferred_poll(&buddy->deferred, event_done, buddy);
    uint64_t block_size = vb_next_power_of_two(size > BUDDY_MIN_BLOCK ? size : BUDDY_MIN_BLOCK);
    vb_chunk *block = NULL;
    if (block_size != 0) {
        vb_status status;
        block = find_or_grow(buddy, block_size, &status);
        if (!block && status != VB_ERR_OOM) return status;
        if (!block) {
            /* Free the cache (held blocks, wholly free arenas) and try once more. */
            int had_held = vb_deferred_any(&buddy->deferred);
            uint64_t reserved_before = buddy->stats->reserved_bytes;
            vb_deferred_drain(&buddy->deferred, event_done, buddy);
            status = release_free_arenas(buddy);
            if (status != VB_OK) return status;
            if (had_held || buddy->stats->reserved_bytes < reserved_before) {
                out->retried = 1;
                block = find_or_grow(buddy, block_size, &status);
                if (!block && status != VB_ERR_OOM) return status;
            }
        }
    }
    if (!block)
        return vb_error(VB_ERR_OOM, "buddy: out of memory for %llu bytes (%llu reserved)", (unsigned long long)size,
                        (unsigned long long)buddy->stats->reserved_bytes);
    return take_block(buddy, block, block_size, size, stream, out);
}

static vb_status buddy_free(void *state, vb_addr addr, uint64_t tag)
{
    (void)tag; /* unused: its own bookkeeping knows the block */
    buddy_state *buddy = state;
    vb_chunk *block;
    vb_status status = vb_chunk_free_used(&buddy->used, &buddy->deferred, addr, "buddy", &block);
    if (status == VB_OK && block) release_block(buddy, block);
    return status;
}

static vb_status buddy_record_stream(void *state, vb_addr addr, uint64_t tag, vb_stream stream)
{
    (void)tag; /* unused: its own bookkeeping knows the block */
    buddy_state *buddy = state;
    return vb_chunk_record_stream(&buddy->used, addr, stream, "buddy");
}

/* Waits for held blocks, then frees every wholly free arena. */
static vb_status buddy_empty_cache(void *state)
{
    buddy_state *buddy = state;
    vb_deferred_drain(&buddy->deferred, event_done, buddy);
    return release_free_arenas(buddy);
}

/* A request can only be served from one free block, so the largest free
 * block is the largest of the highest non-empty order. */
static uint64_t buddy_largest_free_block(void *state)
{
    buddy_state *buddy = state;
    return buddy->nonempty_orders ? (uint64_t)BUDDY_MIN_BLOCK << vb_log2_floor(buddy->nonempty_orders) : 0;
}

static void buddy_segments(void *state, vb_block_visitor visit, void *context)
{
    buddy_state *buddy = state;
    for (vb_oset_node *node = vb_oset_first(&buddy->arenas); node; node = vb_oset_next(&buddy->arenas, node))
        vb_region_visit(VB_REGION_OF(node), VB_REGION_OF(node), visit, context);
}

const vb_allocator_ops vb_buddy_allocator = {
    .name = "buddy",
    .description = "binary buddy system: power-of-two blocks (min 512 B) split and merged in 1 GiB arenas; "
                   "shows internal fragmentation",
    .options = buddy_options,
    .option_count = sizeof buddy_options / sizeof *buddy_options,
    .create = buddy_create,
    .destroy = buddy_destroy,
    .malloc = buddy_malloc,
    .free = buddy_free,
    .record_stream = buddy_record_stream,
    .empty_cache = buddy_empty_cache,
    .largest_free_block = buddy_largest_free_block,
    .segments = buddy_segments,
};
