/* vrambench — `binning`: RMM's binning_memory_resource over its
 * pool_memory_resource (rapidsai/rmm, cpp/include/rmm/mr/).
 *
 * The policy, as RMM has it:
 *  - bins of fixed block sizes 2^min_bin_exponent .. 2^max_bin_exponent
 *    (RMM's example and our default: 256 KiB .. 4 MiB); a request goes to the
 *    smallest bin whose blocks hold it (resource_bins_.lower_bound), so a
 *    request below the smallest bin takes a whole smallest-bin block;
 *  - each bin is a fixed_size_memory_resource: it takes chunks of
 *    blocks_per_chunk blocks (RMM's default_blocks_to_preallocate = 128) from
 *    the upstream pool and hands their blocks out one by one;
 *  - a request larger than the largest bin goes to the pool itself: a
 *    coalescing best-fit free list (smallest free block that fits, lowest
 *    address on ties), split exactly at the request rounded to 256 B, with
 *    freed blocks merged with free neighbours of the same upstream block
 *    (RMM never merges across upstream blocks);
 *  - the pool grows from the device by max(request, current pool size)
 *    (size_to_grow without a maximum), halving down to the request when the
 *    device refuses (try_to_expand).
 *
 * Where vrambench differs, and why:
 *  - Pool growth is in whole driver pages (2 MiB), so reserved bytes are what
 *    the driver really holds.
 *  - RMM's bins keep their chunks and its pool its upstream blocks until
 *    destruction; our empty_cache contract asks for every unused byte back,
 *    so empty_cache returns wholly free bin chunks to the pool, then wholly
 *    free upstream blocks to the device. On OOM the same is done and the
 *    request retried once.
 *  - When a bin's chunk of blocks_per_chunk blocks cannot be had, smaller
 *    chunks (halving, down to one block) are tried, so small devices work.
 *  - RMM is stream-ordered (per-stream free lists with events); here streams
 *    are ignored, a freed block is reused by any stream, and record_stream
 *    holds a block back until the recorded streams' work completes
 *    (deferred.h).
 *
 * Bin blocks are taken lowest address first (an ordered set per bin), pool
 * blocks by best fit (an ordered set by size), so malloc and free are
 * O(log n); chunk structs are recycled. empty_cache (every out-of-memory
 * retry) looks only at the regions that became wholly free since the last
 * one, not at every region: walking them all made a replay that keeps
 * running out of memory slower with every region it had made. */
#include "allocator.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/addr_map.h"
#include "binning.h"
#include "chunks.h"

#define BINNING_ALIGNMENT 256              /* rmm::CUDA_ALLOCATION_ALIGNMENT */
#define BINNING_MIN_EXPONENT 8
#define BINNING_MAX_EXPONENT 30
#define BINNING_MAX_BINS (BINNING_MAX_EXPONENT - BINNING_MIN_EXPONENT + 1)

/* What a chunk is: a block of the pool (a caller's, or one holding a bin's
 * chunk when its `data` is set) or one fixed-size block of a bin. */
enum { CHUNK_POOL = 0, CHUNK_BIN_BLOCK = 1 };

/* ------------------------------------------------------------------------ */
/* Settings and state                                                        */
/* ------------------------------------------------------------------------ */

typedef struct binning_settings {
    uint64_t min_bin_exponent;
    uint64_t max_bin_exponent;
    uint64_t blocks_per_chunk;
    uint64_t initial_pool_mb;
} binning_settings;

static const vb_option binning_options[] = {
    {"min_bin_exponent", VB_OPTION_U64, offsetof(binning_settings, min_bin_exponent), BINNING_MIN_EXPONENT,
     BINNING_MAX_EXPONENT, "log2 of the smallest bin's block size; default 18 (256 KiB)"},
    {"max_bin_exponent", VB_OPTION_U64, offsetof(binning_settings, max_bin_exponent), BINNING_MIN_EXPONENT,
     BINNING_MAX_EXPONENT, "log2 of the largest bin's block size; default 22 (4 MiB)"},
    {"blocks_per_chunk", VB_OPTION_U64, offsetof(binning_settings, blocks_per_chunk), 1, 65536,
     "blocks a bin takes from the pool at a time; default 128 (RMM's blocks_to_preallocate)"},
    {"initial_pool_mb", VB_OPTION_U64, offsetof(binning_settings, initial_pool_mb), 0, 1 << 24,
     "MiB the pool takes from the device at creation; default 0 (grow on demand)"},
};

typedef struct binning_bin {
    uint64_t block_size;
    vb_ordered_set free_blocks;   /* by address */
    vb_ordered_set chunks;        /* the bin's chunks (regions inside pool blocks), by base */
} binning_bin;

/* Regions that may be wholly free: each one whose busy_chunks fell to 0
 * (or an upstream block made with none) since empty_cache last looked,
 * once (vb_region.listed). Room for every region of its kind is reserved
 * before one is made, so listing one never fails. */
typedef struct idle_regions {
    vb_region **items;
    size_t count, capacity;
} idle_regions;

typedef struct binning_state {
    vb_device *device;
    const vb_alloc_stats *stats;  /* the seam's counts (allocator.h) */
    binning_settings settings;
    binning_bin bins[BINNING_MAX_BINS];
    unsigned bin_count;
    vb_ordered_set pool_free;     /* free pool blocks by (size, address) */
    vb_ordered_set pool_regions;  /* upstream blocks by base */
    vb_addr_map used;             /* address -> block handed out (bin block or pool block) */
    vb_chunk_store store;
    vb_deferred deferred;
    idle_regions idle_bin_chunks; /* bins' chunks */
    idle_regions idle_upstream;   /* the pool's upstream blocks */
} binning_state;

/* Room for `regions` regions on the list; -1 when host memory runs out. */
static int idle_reserve(idle_regions *idle, size_t regions)
{
    if (regions <= idle->capacity) return 0;
    size_t capacity = idle->capacity ? 2 * idle->capacity : 16;
    if (capacity < regions) capacity = regions;
    vb_region **grown = realloc(idle->items, capacity * sizeof *grown);
    if (!grown) return -1;
    idle->items = grown;
    idle->capacity = capacity;
    return 0;
}

/* Lists a region that has no busy chunk (room reserved: idle_reserve). */
static void idle_note(idle_regions *idle, vb_region *region)
{
    if (region->listed) return;
    region->listed = 1;
    idle->items[idle->count++] = region;
}

/* Upstream blocks in the order empty_cache walked them before the lists:
 * by base. */
static int compare_base(const void *a, const void *b)
{
    const vb_region *x = *(vb_region *const *)a, *y = *(vb_region *const *)b;
    return (x->base > y->base) - (x->base < y->base);
}

/* Bin chunks likewise: by bin, then base. */
static int compare_bin_then_base(const void *a, const void *b)
{
    const vb_region *x = *(vb_region *const *)a, *y = *(vb_region *const *)b;
    if (x->tag != y->tag) return x->tag < y->tag ? -1 : 1;
    return compare_base(a, b);
}

/* Bin chunks made and not given back (room for all of them on the list). */
static size_t bin_chunk_count(const binning_state *binning)
{
    size_t chunks = 0;
    for (unsigned b = 0; b < binning->bin_count; b++) chunks += binning->bins[b].chunks.count;
    return chunks;
}

/* ------------------------------------------------------------------------ */
/* The pool: coalescing best fit over upstream blocks                        */
/* ------------------------------------------------------------------------ */

static void pool_insert_free(binning_state *binning, vb_chunk *chunk)
{
    chunk->state = VB_CHUNK_FREE;
    vb_oset_insert(&binning->pool_free, &chunk->node);
}

/* Returns a pool block that is no longer used, merged with free neighbours
 * of its upstream block. */
static void pool_release(binning_state *binning, vb_chunk *chunk)
{
    if (--chunk->region->busy_chunks == 0) idle_note(&binning->idle_upstream, chunk->region);
    chunk->state = VB_CHUNK_FREE;
    chunk->data = NULL;
    if (chunk->next && chunk->next->state == VB_CHUNK_FREE) {
        vb_oset_remove(&binning->pool_free, &chunk->next->node);
        vb_chunk_absorb_next(&binning->store, chunk);
    }
    if (chunk->prev && chunk->prev->state == VB_CHUNK_FREE) {
        vb_chunk *prev = chunk->prev;
        vb_oset_remove(&binning->pool_free, &prev->node);
        vb_chunk_absorb_next(&binning->store, prev);
        chunk = prev;
    }
    pool_insert_free(binning, chunk);
}

/* The smallest free pool block of at least `rounded` bytes, or NULL. */
static vb_chunk *pool_find(binning_state *binning, uint64_t rounded)
{
    vb_chunk probe = {.size = rounded, .addr = 0};
    vb_oset_node *node = vb_oset_lower_bound(&binning->pool_free, &probe.node);
    return node ? VB_CHUNK_OF(node) : NULL;
}

/* Grows the pool by an upstream block that holds `rounded` bytes (RMM's
 * expand_pool / try_to_expand, in driver pages). */
static vb_status pool_grow(binning_state *binning, uint64_t rounded)
{
    uint64_t smallest = vb_round_up(rounded, VB_DRIVER_PAGE);
    if (smallest == 0) return vb_error(VB_ERR_OOM, "binning: %llu bytes cannot be allocated", (unsigned long long)rounded);
    if (idle_reserve(&binning->idle_upstream, binning->pool_regions.count + 1) != 0)
        return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    uint64_t pool_size = binning->stats->reserved_bytes;
    uint64_t try_size = pool_size > smallest ? pool_size : smallest;
    vb_region *region = NULL;
    vb_status status;
    for (;;) {
        status = vb_region_acquire(&binning->store, binning->device, try_size, &region);
        if (status != VB_ERR_OOM || try_size == smallest) break;
        try_size = vb_round_up(try_size / 2, VB_DRIVER_PAGE);
        if (try_size < smallest) try_size = smallest;
    }
    if (status != VB_OK) return status;
    vb_oset_insert(&binning->pool_regions, &region->node);
    pool_insert_free(binning, region->first);
    idle_note(&binning->idle_upstream, region);
    return VB_OK;
}

/* Takes `rounded` bytes from the pool, growing it if needed: a USED pool
 * block, or NULL with the status in *status. */
static vb_chunk *pool_take(binning_state *binning, uint64_t rounded, vb_status *status)
{
    *status = VB_OK;
    vb_chunk *chunk = pool_find(binning, rounded);
    if (!chunk) {
        *status = pool_grow(binning, rounded);
        if (*status != VB_OK) return NULL;
        chunk = pool_find(binning, rounded);
    }
    vb_oset_remove(&binning->pool_free, &chunk->node);
    if (chunk->size > rounded) {
        vb_chunk *rest = vb_chunk_split(&binning->store, chunk, rounded);
        if (rest) pool_insert_free(binning, rest); /* without host memory, the whole block serves */
    }
    chunk->state = VB_CHUNK_USED;
    chunk->tag = CHUNK_POOL;
    chunk->data = NULL;
    chunk->region->busy_chunks++;
    return chunk;
}

/* ------------------------------------------------------------------------ */
/* Bins: fixed-size blocks in chunks taken from the pool                     */
/* ------------------------------------------------------------------------ */

/* The bin for `size`, or -1 when it is larger than the largest bin. */
static int bin_for(const binning_state *binning, uint64_t size)
{
    if (size > binning->bins[binning->bin_count - 1].block_size) return -1;
    if (size <= binning->bins[0].block_size) return 0;
    /* ceil(log2(size)) - min exponent */
    return (int)(vb_log2_floor(size - 1) + 1 - binning->settings.min_bin_exponent);
}

static void bin_insert_free(binning_bin *bin, vb_chunk *block)
{
    block->state = VB_CHUNK_FREE;
    vb_oset_insert(&bin->free_blocks, &block->node);
}

/* Returns a bin block that is no longer used to its bin. */
static void bin_release(binning_state *binning, vb_chunk *block)
{
    if (--block->region->busy_chunks == 0) idle_note(&binning->idle_bin_chunks, block->region);
    bin_insert_free(&binning->bins[block->region->tag], block);
}

/* Cuts pool block `holder` into a new chunk of `bin`'s blocks, all free.
 * VB_ERR_HOST_OOM leaves the holder for the caller to give back. */
static vb_status bin_carve(binning_state *binning, unsigned bin_index, vb_chunk *holder)
{
    binning_bin *bin = &binning->bins[bin_index];
    vb_region *region = idle_reserve(&binning->idle_bin_chunks, bin_chunk_count(binning) + 1) == 0
                            ? vb_region_new(&binning->store)
                            : NULL;
    if (!region) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    region->base = holder->addr;
    region->size = holder->size;
    region->tag = bin_index;
    region->data = holder;
    vb_chunk *prev = NULL;
    for (uint64_t offset = 0; offset + bin->block_size <= holder->size; offset += bin->block_size) {
        vb_chunk *block = vb_chunk_new(&binning->store);
        if (!block) {
            for (vb_chunk *made = region->first; made;) {
                vb_chunk *next = made->next;
                vb_oset_remove(&bin->free_blocks, &made->node);
                vb_chunk_recycle(&binning->store, made);
                made = next;
            }
            vb_region_recycle(&binning->store, region);
            return vb_error(VB_ERR_HOST_OOM, "out of host memory");
        }
        block->addr = holder->addr + offset;
        block->size = bin->block_size;
        block->region = region;
        block->tag = CHUNK_BIN_BLOCK;
        block->prev = prev;
        if (prev) prev->next = block;
        else region->first = block;
        prev = block;
        bin_insert_free(bin, block);
    }
    holder->data = region;
    vb_oset_insert(&bin->chunks, &region->node); /* not listed: bin_grow's caller takes a block of it at once */
    return VB_OK;
}

/* Gives `bin` a new chunk from the pool: blocks_per_chunk blocks, or fewer
 * (halving, down to one) when the pool cannot grow that much. */
static vb_status bin_grow(binning_state *binning, unsigned bin_index)
{
    uint64_t block_size = binning->bins[bin_index].block_size;
    uint64_t blocks = binning->settings.blocks_per_chunk;
    vb_status status;
    vb_chunk *holder;
    while (!(holder = pool_take(binning, block_size * blocks, &status)) && status == VB_ERR_OOM && blocks > 1)
        blocks /= 2;
    if (!holder) return status;
    status = bin_carve(binning, bin_index, holder);
    if (status != VB_OK) pool_release(binning, holder);
    return status;
}

/* Gives every wholly free bin chunk back to the pool: the listed ones,
 * in the order of a walk over every bin's chunks. */
static void release_free_bin_chunks(binning_state *binning)
{
    idle_regions *idle = &binning->idle_bin_chunks;
    if (idle->count > 1) qsort(idle->items, idle->count, sizeof *idle->items, compare_bin_then_base);
    for (size_t i = 0; i < idle->count; i++) {
        vb_region *region = idle->items[i];
        region->listed = 0;
        if (region->busy_chunks) continue;
        binning_bin *bin = &binning->bins[region->tag];
        for (vb_chunk *block = region->first; block;) {
            vb_chunk *after = block->next;
            vb_oset_remove(&bin->free_blocks, &block->node);
            vb_chunk_recycle(&binning->store, block);
            block = after;
        }
        vb_oset_remove(&bin->chunks, &region->node);
        vb_chunk *holder = region->data;
        vb_region_recycle(&binning->store, region);
        pool_release(binning, holder);
    }
    idle->count = 0;
}

/* Gives every wholly free upstream block back to the device: the listed
 * ones, by base. On a driver failure the ones not reached stay listed. */
static vb_status release_free_pool_regions(binning_state *binning)
{
    idle_regions *idle = &binning->idle_upstream;
    if (idle->count > 1) qsort(idle->items, idle->count, sizeof *idle->items, compare_base);
    for (size_t i = 0; i < idle->count; i++) {
        vb_region *region = idle->items[i];
        region->listed = 0;
        if (region->busy_chunks) continue;
        for (vb_chunk *chunk = region->first; chunk; chunk = chunk->next)
            vb_oset_remove(&binning->pool_free, &chunk->node);
        vb_oset_remove(&binning->pool_regions, &region->node);
        vb_status status = vb_region_release(&binning->store, binning->device, region);
        if (status != VB_OK) {
            idle->count -= i + 1;
            memmove(idle->items, idle->items + i + 1, idle->count * sizeof *idle->items);
            return status;
        }
    }
    idle->count = 0;
    return VB_OK;
}

size_t vb_binning_wholly_free_regions(void *state)
{
    const binning_state *binning = state;
    size_t found = 0;
    for (unsigned b = 0; b < binning->bin_count; b++)
        for (vb_oset_node *node = vb_oset_first(&binning->bins[b].chunks); node;
             node = vb_oset_next(&binning->bins[b].chunks, node))
            found += VB_REGION_OF(node)->busy_chunks == 0;
    for (vb_oset_node *node = vb_oset_first(&binning->pool_regions); node;
         node = vb_oset_next(&binning->pool_regions, node))
        found += VB_REGION_OF(node)->busy_chunks == 0;
    return found;
}

/* A held block's event completed; the last one frees it where it belongs. */
static void event_done(void *context, void *item)
{
    binning_state *binning = context;
    vb_chunk *chunk = item;
    if (!vb_chunk_event_done(chunk)) return;
    if (chunk->tag == CHUNK_BIN_BLOCK) bin_release(binning, chunk);
    else pool_release(binning, chunk);
}

/* ------------------------------------------------------------------------ */
/* Ops                                                                       */
/* ------------------------------------------------------------------------ */

static vb_status binning_create(vb_device *dev, const vb_config *config, void **state)
{
    binning_settings settings = {.min_bin_exponent = 18, .max_bin_exponent = 22, .blocks_per_chunk = 128,
                                 .initial_pool_mb = 0};
    vb_status status = vb_config_apply(config, binning_options, sizeof binning_options / sizeof *binning_options,
                                       &settings, "binning");
    if (status != VB_OK) return status;
    if (settings.min_bin_exponent > settings.max_bin_exponent)
        return vb_error(VB_ERR_INVALID, "binning: min_bin_exponent (%llu) is above max_bin_exponent (%llu)",
                        (unsigned long long)settings.min_bin_exponent, (unsigned long long)settings.max_bin_exponent);
    binning_state *binning = calloc(1, sizeof *binning);
    if (!binning) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    binning->device = dev;
    binning->stats = vb_seam_stats(dev);
    binning->settings = settings;
    binning->bin_count = (unsigned)(settings.max_bin_exponent - settings.min_bin_exponent + 1);
    for (unsigned b = 0; b < binning->bin_count; b++) {
        binning->bins[b].block_size = UINT64_C(1) << (settings.min_bin_exponent + b);
        vb_oset_init(&binning->bins[b].free_blocks, vb_chunk_compare_addr);
        vb_oset_init(&binning->bins[b].chunks, vb_region_compare_base);
    }
    vb_oset_init(&binning->pool_free, vb_chunk_compare_size);
    vb_oset_init(&binning->pool_regions, vb_region_compare_base);
    vb_chunk_store_init(&binning->store);
    vb_deferred_init(&binning->deferred, dev);
    if (settings.initial_pool_mb) {
        status = pool_grow(binning, settings.initial_pool_mb * VB_MiB);
        if (status == VB_ERR_OOM) { /* named as the setting it is: the device's own line names neither */
            char reason[256];
            snprintf(reason, sizeof reason, "%s", vb_last_error());
            status = vb_error(VB_ERR_INVALID, "binning: initial_pool_mb=%llu does not fit the device (%s)",
                              (unsigned long long)settings.initial_pool_mb, reason);
        }
        if (status != VB_OK) {
            vb_chunk_store_destroy(&binning->store);
            free(binning->idle_upstream.items);
            free(binning);
            return status;
        }
    }
    *state = binning;
    return VB_OK;
}

static void binning_destroy(void *state)
{
    binning_state *binning = state;
    vb_deferred_destroy(&binning->deferred);
    for (vb_oset_node *node; (node = vb_oset_first(&binning->pool_regions));) {
        vb_oset_remove(&binning->pool_regions, node);
        vb_region_release(&binning->store, binning->device, VB_REGION_OF(node));
    }
    vb_addr_map_clear(&binning->used);
    /* Bin chunk regions and blocks live in the store's slabs and go with it. */
    vb_chunk_store_destroy(&binning->store);
    free(binning->idle_bin_chunks.items);
    free(binning->idle_upstream.items);
    free(binning);
}

/* One attempt at a block for `size`: a bin block or a pool block. */
static vb_chunk *take_block(binning_state *binning, uint64_t size, vb_status *status)
{
    int bin_index = bin_for(binning, size);
    if (bin_index < 0) {
        uint64_t rounded = vb_round_up(size, BINNING_ALIGNMENT);
        if (rounded == 0) {
            *status = vb_error(VB_ERR_OOM, "binning: %llu bytes cannot be allocated", (unsigned long long)size);
            return NULL;
        }
        return pool_take(binning, rounded, status);
    }
    binning_bin *bin = &binning->bins[bin_index];
    *status = VB_OK;
    if (bin->free_blocks.count == 0) {
        *status = bin_grow(binning, (unsigned)bin_index);
        if (*status != VB_OK) return NULL;
    }
    vb_chunk *block = VB_CHUNK_OF(vb_oset_first(&bin->free_blocks));
    vb_oset_remove(&bin->free_blocks, &block->node);
    block->state = VB_CHUNK_USED;
    block->region->busy_chunks++;
    return block;
}

/* Returns a block just taken, when it cannot be handed out after all. */
static void untake_block(binning_state *binning, vb_chunk *block)
{
    if (block->tag == CHUNK_BIN_BLOCK) bin_release(binning, block);
    else pool_release(binning, block);
}

static vb_status binning_empty_cache(void *state);

static vb_status binning_malloc(void *state, uint64_t size, vb_stream stream, vb_grant *out)
{
    binning_state *binning = state;
    vb_deferred_poll(&binning->deferred, event_done, binning);
    vb_status status;
    vb_chunk *block = take_block(binning, size, &status);
    if (!block && status == VB_ERR_OOM) {
        /* Free the cache (held blocks, wholly free chunks and upstream blocks) and try once more. */
        int had_held = vb_deferred_any(&binning->deferred);
        uint64_t reserved_before = binning->stats->reserved_bytes;
        status = binning_empty_cache(binning);
        if (status != VB_OK) return status;
        if (had_held || binning->stats->reserved_bytes < reserved_before) {
            out->retried = 1;
            block = take_block(binning, size, &status);
        } else {
            status = VB_ERR_OOM;
        }
    }
    if (!block) {
        if (status != VB_ERR_OOM) return status;
        return vb_error(VB_ERR_OOM, "binning: out of memory for %llu bytes (%llu reserved)", (unsigned long long)size,
                        (unsigned long long)binning->stats->reserved_bytes);
    }
    block->requested = size;
    block->stream = stream;
    if (vb_addr_map_put(&binning->used, block->addr, vb_chunk_key(block)) != 0) {
        untake_block(binning, block);
        return vb_error(VB_ERR_HOST_OOM, "binning: out of host memory");
    }
    out->addr = block->addr;
    out->size = block->size;
    return VB_OK;
}

static vb_status binning_free(void *state, vb_addr addr, uint64_t tag)
{
    (void)tag; /* unused: its own bookkeeping knows the block */
    binning_state *binning = state;
    vb_chunk *block;
    vb_status status = vb_chunk_free_used(&binning->used, &binning->deferred, addr, "binning", &block);
    if (status == VB_OK && block) untake_block(binning, block);
    return status;
}

static vb_status binning_record_stream(void *state, vb_addr addr, uint64_t tag, vb_stream stream)
{
    (void)tag; /* unused: its own bookkeeping knows the block */
    binning_state *binning = state;
    return vb_chunk_record_stream(&binning->used, addr, stream, "binning");
}

/* Waits for held blocks, gives wholly free bin chunks back to the pool and
 * wholly free upstream blocks back to the device. */
static vb_status binning_empty_cache(void *state)
{
    binning_state *binning = state;
    vb_deferred_drain(&binning->deferred, event_done, binning);
    release_free_bin_chunks(binning);
    return release_free_pool_regions(binning);
}

/* The largest block a request could get without new memory: the larger of
 * the largest free pool block and the largest bin block size with a free block. */
static uint64_t binning_largest_free_block(void *state)
{
    binning_state *binning = state;
    vb_oset_node *last = vb_oset_last(&binning->pool_free);
    uint64_t largest = last ? VB_CHUNK_OF(last)->size : 0;
    for (unsigned b = binning->bin_count; b-- > 0;) {
        if (binning->bins[b].free_blocks.count == 0) continue;
        if (binning->bins[b].block_size > largest) largest = binning->bins[b].block_size;
        break;
    }
    return largest;
}

/* Each upstream block is a segment; a pool block holding a bin chunk is
 * shown as that chunk's fixed-size blocks. */
static void binning_segments(void *state, vb_block_visitor visit, void *context)
{
    binning_state *binning = state;
    for (vb_oset_node *node = vb_oset_first(&binning->pool_regions); node;
         node = vb_oset_next(&binning->pool_regions, node)) {
        const vb_region *segment = VB_REGION_OF(node);
        for (const vb_chunk *chunk = segment->first; chunk; chunk = chunk->next) {
            if (chunk->state == VB_CHUNK_USED && chunk->data) {
                vb_region_visit(segment, chunk->data, visit, context);
                continue;
            }
            vb_block_info block = {segment->base, segment->size, chunk->addr, chunk->size,
                                   chunk->state == VB_CHUNK_USED, chunk->state == VB_CHUNK_USED ? chunk->stream : NULL};
            visit(context, &block);
        }
    }
}

const vb_allocator_ops vb_binning_allocator = {
    .name = "binning",
    .description = "RMM binning: fixed-size bins 256 KiB .. 4 MiB in chunks from a coalescing best-fit pool, "
                   "which serves larger requests",
    .options = binning_options,
    .option_count = sizeof binning_options / sizeof *binning_options,
    .create = binning_create,
    .destroy = binning_destroy,
    .malloc = binning_malloc,
    .free = binning_free,
    .record_stream = binning_record_stream,
    .empty_cache = binning_empty_cache,
    .largest_free_block = binning_largest_free_block,
    .segments = binning_segments,
};
