/* vrambench — `bfc`: TensorFlow/XLA's best-fit-with-coalescing allocator
 * (xla/tsl/framework/bfc_allocator.cc, formerly tensorflow/core/common_runtime).
 *
 * The policy, as BFC has it:
 *  - every request is rounded up to 256 B (kMinAllocationSize);
 *  - free chunks sit in 21 bins (kNumBins): bin b holds sizes >= 256 << b
 *    (and < 256 << (b+1), except the last, which holds everything from
 *    256 MiB up), each ordered by (size, address);
 *  - a request searches its own bin, then the bins above, for the smallest
 *    chunk that fits (lowest address on ties);
 *  - the chunk is split when it is at least twice the request, or when the
 *    leftover would be >= 128 MiB (max_internal_fragmentation_bytes);
 *    otherwise the whole chunk is handed out, and allocated bytes say so;
 *  - a freed chunk always merges with free neighbours in its region;
 *  - with no fitting chunk the pool grows by a region of
 *    curr_region_allocation_bytes: 2 MiB at first, doubled until it holds
 *    the request, and doubled after each region that did not need that; if
 *    the device refuses, BFC backs off by 0.9x steps down to the request.
 *    After that it frees wholly free regions and tries again (BFC's
 *    garbage_collection, on by default for TF GPUs).
 *
 * Where vrambench differs, and why:
 *  - BFC's allow_growth=false (one region of the whole limit at start) is not
 *    modelled: this is BFC with allow_growth=true, which grows as above.
 *  - Regions are whole driver pages (2 MiB): backing off rounds to pages, so
 *    that reserved bytes are what the driver really holds.
 *  - BFC returns regions only at destruction (or in garbage collection on
 *    OOM); our empty_cache contract asks for every unused byte back, so
 *    empty_cache frees every wholly free region. In BFC, which never frees,
 *    the doubling keeps curr_region_allocation_bytes at about the pool's
 *    total: regions of 2, 4, 8 MiB leave it at 16 MiB = 14 + 2. After an
 *    empty_cache released regions we set it to what BFC would have for the
 *    regions kept: the first power-of-two multiple of 2 MiB above their
 *    total (2 MiB when none is kept). Letting the doubling run on across
 *    empty_caches instead would make every fresh region twice the last
 *    (regions of the whole device for a 4 MB tensor after a few dozen
 *    empty_cache cycles).
 *  - Streams are ignored, as in TF (one compute stream): a freed chunk is
 *    reused by any stream. record_stream holds a chunk back until the work of
 *    the recorded streams has completed (deferred.h); unlike PyTorch, even a
 *    record on the chunk's own stream counts, since reuse can be on another.
 *
 * External fragmentation is BFC's GetFragmentation: (bytes free - largest
 * free chunk) / bytes free, through largest_free_block(). */
#include "allocator.h"

#include <stdlib.h>

#include "base/addr_map.h"
#include "chunks.h"

#define BFC_MIN_ALLOCATION 256          /* kMinAllocationSize */
#define BFC_BIN_COUNT 21                /* kNumBins */
#define BFC_FIRST_REGION (2 * VB_MiB)   /* curr_region_allocation_bytes_ at start */
#define BFC_BACKPEDAL 0.9               /* kBackpedalFactor */

/* ------------------------------------------------------------------------ */
/* Settings                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct bfc_settings {
    uint64_t memory_limit_mb;
    uint64_t max_internal_fragmentation_mb;
    uint64_t garbage_collection;
} bfc_settings;

static const vb_option bfc_options[] = {
    {"memory_limit_mb", VB_OPTION_U64, offsetof(bfc_settings, memory_limit_mb), 0, 1 << 30,
     "MiB the pool may grow to; default 0 = the device's total memory"},
    {"max_internal_fragmentation_mb", VB_OPTION_U64, offsetof(bfc_settings, max_internal_fragmentation_mb), 0,
     1 << 30, "MiB of leftover at which a chunk is split even when under twice the request; default 128"},
    {"garbage_collection", VB_OPTION_U64, offsetof(bfc_settings, garbage_collection), 0, 1,
     "1 = on OOM free wholly free regions and retry (TF's default), 0 = fail; default 1"},
};

/* ------------------------------------------------------------------------ */
/* State                                                                     */
/* ------------------------------------------------------------------------ */

typedef struct bfc_state {
    vb_device *device;
    const vb_alloc_stats *stats;        /* the seam's counts (allocator.h) */
    bfc_settings settings;
    uint64_t memory_limit;              /* bytes */
    uint64_t max_internal_fragmentation;
    uint64_t curr_region_allocation_bytes;
    vb_ordered_set bins[BFC_BIN_COUNT]; /* free chunks by (size, address) */
    vb_ordered_set regions;             /* by base address */
    vb_addr_map used;                   /* address -> chunk handed out */
    vb_chunk_store store;
    vb_deferred deferred;
} bfc_state;

/* The bin of a chunk of `size` (>= 256) bytes: floor(log2(size / 256)), capped. */
static unsigned bin_for(uint64_t size)
{
    unsigned bin = vb_log2_floor(size >> 8);
    return bin < BFC_BIN_COUNT - 1 ? bin : BFC_BIN_COUNT - 1;
}

static void insert_free(bfc_state *bfc, vb_chunk *chunk)
{
    chunk->state = VB_CHUNK_FREE;
    vb_oset_insert(&bfc->bins[bin_for(chunk->size)], &chunk->node);
}

static void remove_free(bfc_state *bfc, vb_chunk *chunk)
{
    vb_oset_remove(&bfc->bins[bin_for(chunk->size)], &chunk->node);
}

/* ------------------------------------------------------------------------ */
/* Finding, splitting and merging chunks                                     */
/* ------------------------------------------------------------------------ */

/* The smallest free chunk of at least `rounded` bytes, lowest address first:
 * the lower bound in the request's bin, else the first of a higher bin. */
static vb_chunk *find_chunk(bfc_state *bfc, uint64_t rounded)
{
    vb_chunk probe = {.size = rounded, .addr = 0};
    for (unsigned bin = bin_for(rounded); bin < BFC_BIN_COUNT; bin++) {
        vb_oset_node *node = vb_oset_lower_bound(&bfc->bins[bin], &probe.node);
        if (node) return VB_CHUNK_OF(node);
    }
    return NULL;
}

/* BFC's ShouldSplitChunk: split when the chunk is at least twice the request
 * or the leftover reaches the internal-fragmentation cap. */
static int should_split(const bfc_state *bfc, uint64_t chunk_size, uint64_t rounded)
{
    uint64_t leftover = chunk_size - rounded;
    return leftover >= rounded || leftover >= bfc->max_internal_fragmentation;
}

/* Returns a chunk that is no longer used to the bins, merged with its free
 * neighbours. */
static void release_chunk(bfc_state *bfc, vb_chunk *chunk)
{
    chunk->region->busy_chunks--;
    chunk->state = VB_CHUNK_FREE;
    if (chunk->next && chunk->next->state == VB_CHUNK_FREE) {
        remove_free(bfc, chunk->next);
        vb_chunk_absorb_next(&bfc->store, chunk);
    }
    if (chunk->prev && chunk->prev->state == VB_CHUNK_FREE) {
        vb_chunk *prev = chunk->prev;
        remove_free(bfc, prev);
        vb_chunk_absorb_next(&bfc->store, prev);
        chunk = prev;
    }
    insert_free(bfc, chunk);
}

/* A held chunk's event completed; the last one frees it. */
static void event_done(void *context, void *item)
{
    vb_chunk *chunk = item;
    if (vb_chunk_event_done(chunk)) release_chunk(context, chunk);
}

/* Hands out free `chunk` for a request of `size` (rounded to `rounded`). */
static vb_status take_chunk(bfc_state *bfc, vb_chunk *chunk, uint64_t rounded, uint64_t size, vb_stream stream,
                            vb_grant *out)
{
    remove_free(bfc, chunk);
    if (should_split(bfc, chunk->size, rounded)) {
        vb_chunk *rest = vb_chunk_split(&bfc->store, chunk, rounded);
        /* Without host memory for the split, the whole chunk serves. */
        if (rest) insert_free(bfc, rest);
    }
    chunk->state = VB_CHUNK_USED;
    chunk->requested = size;
    chunk->stream = stream;
    chunk->region->busy_chunks++;
    if (vb_addr_map_put(&bfc->used, chunk->addr, vb_chunk_key(chunk)) != 0) {
        release_chunk(bfc, chunk);
        return vb_error(VB_ERR_HOST_OOM, "bfc: out of host memory");
    }
    out->addr = chunk->addr;
    out->size = chunk->size;
    return VB_OK;
}

/* ------------------------------------------------------------------------ */
/* Regions                                                                   */
/* ------------------------------------------------------------------------ */

/* BFC's Extend: adds a region that can hold `rounded` bytes. VB_ERR_OOM when
 * the limit or the device does not allow one. */
static vb_status extend(bfc_state *bfc, uint64_t rounded)
{
    uint64_t reserved = bfc->stats->reserved_bytes;
    uint64_t available = bfc->memory_limit > reserved ? bfc->memory_limit - reserved : 0;
    available &= ~(VB_DRIVER_PAGE - 1);
    uint64_t smallest = vb_round_up(rounded, VB_DRIVER_PAGE);
    if (smallest == 0 || smallest > available)
        return vb_error(VB_ERR_OOM, "bfc: %llu bytes do not fit under the memory limit (%llu of %llu reserved)",
                        (unsigned long long)rounded, (unsigned long long)reserved,
                        (unsigned long long)bfc->memory_limit);

    /* rounded <= available <= limit, so the doubling stays below 2 x limit. */
    int increased = 0;
    while (rounded > bfc->curr_region_allocation_bytes) {
        bfc->curr_region_allocation_bytes *= 2;
        increased = 1;
    }
    uint64_t bytes = bfc->curr_region_allocation_bytes < available ? bfc->curr_region_allocation_bytes : available;
    vb_region *region = NULL;
    vb_status status = vb_region_acquire(&bfc->store, bfc->device, bytes, &region);
    while (status == VB_ERR_OOM) {
        uint64_t smaller = vb_round_up((uint64_t)((double)bytes * BFC_BACKPEDAL), VB_DRIVER_PAGE);
        if (smaller >= bytes) smaller = bytes - VB_DRIVER_PAGE; /* strict progress for small regions */
        if (smaller < smallest) return status;
        bytes = smaller;
        status = vb_region_acquire(&bfc->store, bfc->device, bytes, &region);
    }
    if (status != VB_OK) return status;
    if (!increased && bfc->curr_region_allocation_bytes <= UINT64_MAX / 2) bfc->curr_region_allocation_bytes *= 2;
    vb_oset_insert(&bfc->regions, &region->node);
    insert_free(bfc, region->first);
    return VB_OK;
}

/* Frees every region none of whose chunks is used or held; returns how many,
 * or a negative status if the device refused. */
static int release_free_regions(bfc_state *bfc)
{
    int released = 0;
    vb_oset_node *node = vb_oset_first(&bfc->regions);
    while (node) {
        vb_oset_node *next = vb_oset_next(&bfc->regions, node);
        vb_region *region = VB_REGION_OF(node);
        if (region->busy_chunks == 0) {
            for (vb_chunk *chunk = region->first; chunk; chunk = chunk->next) remove_free(bfc, chunk);
            vb_oset_remove(&bfc->regions, node);
            vb_status status = vb_region_release(&bfc->store, bfc->device, region);
            if (status != VB_OK) return status;
            released++;
        }
        node = next;
    }
    return released;
}

/* 1 if some region is wholly free. */
static int any_free_region(const bfc_state *bfc)
{
    for (vb_oset_node *node = vb_oset_first(&bfc->regions); node; node = vb_oset_next(&bfc->regions, node))
        if (VB_REGION_OF(node)->busy_chunks == 0) return 1;
    return 0;
}

/* The OOM path: wait for held chunks, then (garbage collection) give wholly
 * free regions back and grow again. NULL when nothing helps. */
static vb_chunk *retry_after_freeing_cache(bfc_state *bfc, uint64_t rounded, vb_grant *grant)
{
    int collect = bfc->settings.garbage_collection && any_free_region(bfc);
    if (!vb_deferred_any(&bfc->deferred) && !collect) return NULL;
    grant->retried = 1;
    vb_deferred_drain(&bfc->deferred, event_done, bfc);
    vb_chunk *chunk = find_chunk(bfc, rounded);
    if (chunk || !bfc->settings.garbage_collection) return chunk;
    if (release_free_regions(bfc) > 0 && extend(bfc, rounded) == VB_OK) chunk = find_chunk(bfc, rounded);
    return chunk;
}

/* ------------------------------------------------------------------------ */
/* Ops                                                                       */
/* The first region's size: 2 MiB unless the limit is smaller; a region is
 * at least a page. */
static uint64_t first_region_bytes(const bfc_state *bfc)
{
    uint64_t limit_pages = bfc->memory_limit & ~(VB_DRIVER_PAGE - 1);
    return limit_pages && limit_pages < BFC_FIRST_REGION ? limit_pages : BFC_FIRST_REGION;
}

/* ------------------------------------------------------------------------ */

static vb_status bfc_create(vb_device *dev, const vb_config *config, void **state)
{
    bfc_settings settings = {.memory_limit_mb = 0, .max_internal_fragmentation_mb = 128, .garbage_collection = 1};
    vb_status status = vb_config_apply(config, bfc_options, sizeof bfc_options / sizeof *bfc_options, &settings, "bfc");
    if (status != VB_OK) return status;
    bfc_state *bfc = calloc(1, sizeof *bfc);
    if (!bfc) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    bfc->device = dev;
    bfc->stats = vb_seam_stats(dev);
    bfc->settings = settings;
    if (settings.memory_limit_mb) {
        bfc->memory_limit = settings.memory_limit_mb * VB_MiB;
    } else {
        uint64_t free_bytes = 0, total_bytes = 0;
        status = dev->ops->mem_info(dev, &free_bytes, &total_bytes);
        if (status != VB_OK) {
            free(bfc);
            return status;
        }
        bfc->memory_limit = total_bytes;
    }
    bfc->max_internal_fragmentation = settings.max_internal_fragmentation_mb * VB_MiB;
    bfc->curr_region_allocation_bytes = first_region_bytes(bfc);
    for (unsigned bin = 0; bin < BFC_BIN_COUNT; bin++) vb_oset_init(&bfc->bins[bin], vb_chunk_compare_size);
    vb_oset_init(&bfc->regions, vb_region_compare_base);
    vb_chunk_store_init(&bfc->store);
    vb_deferred_init(&bfc->deferred, dev);
    *state = bfc;
    return VB_OK;
}

static void bfc_destroy(void *state)
{
    bfc_state *bfc = state;
    vb_deferred_destroy(&bfc->deferred);
    for (vb_oset_node *node; (node = vb_oset_first(&bfc->regions));) {
        vb_oset_remove(&bfc->regions, node);
        vb_region_release(&bfc->store, bfc->device, VB_REGION_OF(node));
    }
    vb_addr_map_clear(&bfc->used);
    vb_chunk_store_destroy(&bfc->store);
    free(bfc);
}

static vb_status bfc_malloc(void *state, uint64_t size, vb_stream stream, vb_grant *out)
{
    bfc_state *bfc = state;
    vb_deferred_poll(&bfc->deferred, event_done, bfc);
    uint64_t rounded = vb_round_up(size ? size : 1, BFC_MIN_ALLOCATION);
    vb_chunk *chunk = NULL;
    if (rounded != 0 && rounded <= bfc->memory_limit) {
        chunk = find_chunk(bfc, rounded);
        if (!chunk) {
            vb_status status = extend(bfc, rounded);
            if (status == VB_OK) chunk = find_chunk(bfc, rounded);
            else if (status != VB_ERR_OOM) return status;
        }
        if (!chunk) chunk = retry_after_freeing_cache(bfc, rounded, out);
    }
    if (!chunk)
        return vb_error(VB_ERR_OOM, "bfc: out of memory for %llu bytes (%llu reserved, limit %llu)",
                        (unsigned long long)size, (unsigned long long)bfc->stats->reserved_bytes,
                        (unsigned long long)bfc->memory_limit);
    return take_chunk(bfc, chunk, rounded, size, stream, out);
}

static vb_status bfc_free(void *state, vb_addr addr, uint64_t tag)
{
    (void)tag; /* unused: its own bookkeeping knows the block */
    bfc_state *bfc = state;
    vb_chunk *chunk;
    vb_status status = vb_chunk_free_used(&bfc->used, &bfc->deferred, addr, "bfc", &chunk);
    if (status == VB_OK && chunk) release_chunk(bfc, chunk);
    return status;
}

static vb_status bfc_record_stream(void *state, vb_addr addr, uint64_t tag, vb_stream stream)
{
    (void)tag; /* unused: its own bookkeeping knows the block */
    bfc_state *bfc = state;
    return vb_chunk_record_stream(&bfc->used, addr, stream, "bfc");
}

/* curr_region_allocation_bytes for the regions still held, as BFC's
 * doubling would have left it had the pool only ever grown to them (the
 * header says why): the first region size doubled until it exceeds their
 * total. */
static uint64_t region_bytes_after_release(const bfc_state *bfc)
{
    uint64_t kept = 0;
    for (vb_oset_node *node = vb_oset_first(&bfc->regions); node; node = vb_oset_next(&bfc->regions, node))
        kept += VB_REGION_OF(node)->size;
    uint64_t bytes = first_region_bytes(bfc);
    while (bytes <= kept && bytes <= UINT64_MAX / 2) bytes *= 2;
    return bytes;
}

/* Waits for held chunks, then frees every wholly free region (which real BFC
 * keeps until it is destroyed). */
static vb_status bfc_empty_cache(void *state)
{
    bfc_state *bfc = state;
    vb_deferred_drain(&bfc->deferred, event_done, bfc);
    int released = release_free_regions(bfc);
    if (released < 0) return (vb_status)released;
    if (released > 0) bfc->curr_region_allocation_bytes = region_bytes_after_release(bfc);
    return VB_OK;
}

/* The largest free chunk is the last of the highest non-empty bin. */
static uint64_t bfc_largest_free_block(void *state)
{
    bfc_state *bfc = state;
    for (unsigned bin = BFC_BIN_COUNT; bin-- > 0;) {
        vb_oset_node *last = vb_oset_last(&bfc->bins[bin]);
        if (last) return VB_CHUNK_OF(last)->size;
    }
    return 0;
}

static void bfc_segments(void *state, vb_block_visitor visit, void *context)
{
    bfc_state *bfc = state;
    for (vb_oset_node *node = vb_oset_first(&bfc->regions); node; node = vb_oset_next(&bfc->regions, node))
        vb_region_visit(VB_REGION_OF(node), VB_REGION_OF(node), visit, context);
}

const vb_allocator_ops vb_bfc_allocator = {
    .name = "bfc",
    .description = "TensorFlow/XLA best-fit with coalescing: 256 B rounding, 21 bins, regions doubling from "
                   "2 MiB; empty_cache frees wholly free regions (real BFC keeps them)",
    .options = bfc_options,
    .option_count = sizeof bfc_options / sizeof *bfc_options,
    .create = bfc_create,
    .destroy = bfc_destroy,
    .malloc = bfc_malloc,
    .free = bfc_free,
    .record_stream = bfc_record_stream,
    .empty_cache = bfc_empty_cache,
    .largest_free_block = bfc_largest_free_block,
    .segments = bfc_segments,
};
