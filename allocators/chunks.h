/* vrambench — regions of device memory cut into address-ordered chunks.
 *
 * The shared bookkeeping of the strategies that carve driver allocations
 * themselves (bfc, buddy, binning): a region is one piece of memory (a driver
 * allocation, or a bin's chunk inside a pool block) and its chunks tile it in
 * address order, linked to their neighbours, so that splitting and merging
 * are O(1). Each strategy keeps its own free index (bins, buddy orders, a
 * best-fit set) through the ordered-set node every chunk carries.
 *
 * Chunk and region structs come from a store that recycles them, so a steady
 * state of malloc/free allocates no host memory. A chunk also remembers the
 * streams it was recorded on (record_stream) until it is freed; see
 * deferred.h for how such a chunk is held back. */
#ifndef VB_CHUNKS_H
#define VB_CHUNKS_H

#include <stddef.h>
#include <stdint.h>

#include "base/addr_map.h"
#include "allocator.h"
#include "deferred.h"
#include "base/ordered_set.h"

typedef enum vb_chunk_state {
    VB_CHUNK_FREE = 0,  /* in its owner's free index */
    VB_CHUNK_USED,      /* handed out (or, in a pool, holding a bin's chunk) */
    VB_CHUNK_PENDING,   /* freed, waiting for recorded streams' work */
} vb_chunk_state;

typedef struct vb_region vb_region;

typedef struct vb_chunk {
    vb_addr addr;
    uint64_t size;
    uint64_t requested;              /* the caller's size while used */
    struct vb_chunk *prev, *next;    /* address neighbours inside the region; `next` links spares */
    vb_region *region;
    vb_oset_node node;               /* the owner's free index */
    vb_chunk_state state;
    uint32_t tag;                    /* the owner's (kind of chunk) */
    void *data;                      /* the owner's (binning: the bin chunk a pool chunk holds) */
    vb_stream stream;                /* the stream it was allocated for */
    vb_stream *uses;                 /* streams recorded with record_stream (kept across reuse) */
    uint32_t use_count, use_capacity;
    uint32_t pending_events;         /* while PENDING: events not yet completed */
} vb_chunk;

struct vb_region {
    vb_addr base;
    uint64_t size;
    vb_chunk *first;                 /* the chunk at `base` */
    uint64_t busy_chunks;            /* chunks that are USED or PENDING */
    vb_oset_node node;               /* the owner's set of regions, by base */
    uint32_t tag;                    /* the owner's */
    uint32_t listed;                 /* the owner's (binning: on a list of regions that may be wholly free) */
    void *data;                      /* the owner's */
};

/* A recycling pool of fixed-size items carved from slabs. */
typedef struct vb_slab_pool {
    size_t item_size;
    void *spare;                     /* recycled items, linked through their first pointer */
    void **slabs;
    size_t slab_count, slab_capacity;
} vb_slab_pool;

typedef struct vb_chunk_store {
    vb_slab_pool chunks;
    vb_slab_pool regions;
} vb_chunk_store;

void vb_chunk_store_init(vb_chunk_store *store);

/* Frees every struct the store ever made (and the chunks' stream lists). */
void vb_chunk_store_destroy(vb_chunk_store *store);

/* A zeroed chunk (its stream-list buffer kept), or NULL when host memory runs out. */
vb_chunk *vb_chunk_new(vb_chunk_store *store);
void vb_chunk_recycle(vb_chunk_store *store, vb_chunk *chunk);

/* A zeroed region, or NULL when host memory runs out. */
vb_region *vb_region_new(vb_chunk_store *store);
void vb_region_recycle(vb_chunk_store *store, vb_region *region);

/* Cuts `chunk` after its first `size` bytes (0 < size < chunk->size): the
 * chunk keeps the front, and the returned new FREE chunk of the same region
 * holds the rest and follows it in address order. NULL when host memory
 * runs out (the chunk is then unchanged). */
vb_chunk *vb_chunk_split(vb_chunk_store *store, vb_chunk *chunk, uint64_t size);

/* Merges chunk->next (which must exist) into `chunk` and recycles it. */
void vb_chunk_absorb_next(vb_chunk_store *store, vb_chunk *chunk);

/* Notes that `chunk` is used on `stream` too. VB_ERR_HOST_OOM when host memory runs out. */
vb_status vb_chunk_record_use(vb_chunk *chunk, vb_stream stream);

/* For a chunk being freed: hands its recorded streams to `deferred`. Returns
 * 1 if it is now PENDING (the owner frees it when the last of its events
 * comes back), 0 if it can be freed at once. Clears the stream list. */
int vb_chunk_hold(vb_deferred *deferred, vb_chunk *chunk);

/* For a PENDING chunk whose event came back: 1 if that was its last one. */
static inline int vb_chunk_event_done(vb_chunk *chunk)
{
    return --chunk->pending_events == 0;
}

/* Orders chunks by (size, address): best fit is the lower bound of a probe
 * chunk {size = wanted, addr = 0}. */
int vb_chunk_compare_size(const vb_oset_node *a, const vb_oset_node *b);

/* Orders chunks by address. */
int vb_chunk_compare_addr(const vb_oset_node *a, const vb_oset_node *b);

/* Orders regions by base address. */
int vb_region_compare_base(const vb_oset_node *a, const vb_oset_node *b);

#define VB_CHUNK_OF(n) VB_OSET_ENTRY((n), vb_chunk, node)
#define VB_REGION_OF(n) VB_OSET_ENTRY((n), vb_region, node)

/* ---- regions that are driver allocations ---- */

/* Gets `size` bytes (a multiple of the driver page) from the device as a new
 * region holding one FREE chunk. The device's status on failure (VB_ERR_OOM
 * when it is full). */
vb_status vb_region_acquire(vb_chunk_store *store, vb_device *dev, uint64_t size, vb_region **out);

/* Returns a region to the device and recycles it with all its chunks (which
 * the owner has taken out of its free index). */
vb_status vb_region_release(vb_chunk_store *store, vb_device *dev, vb_region *region);

/* Reports every chunk of `region` as one block of segment `segment`, in
 * address order (a chunk is "allocated" when USED). */
void vb_region_visit(const vb_region *segment, const vb_region *region, vb_block_visitor visit, void *context);

/* The address-map value for a chunk and back. */
static inline uint64_t vb_chunk_key(const vb_chunk *chunk)
{
    return (uint64_t)(uintptr_t)chunk;
}

static inline vb_chunk *vb_chunk_from_key(uint64_t key)
{
    return (vb_chunk *)(uintptr_t)key;
}

/* ---- chunks handed out, in an address map (address -> vb_chunk_key) ---- */

/* record_stream of a strategy that keeps its handed-out chunks in `used`:
 * the chunk at `addr` is used on `stream` too. VB_ERR_INVALID, naming
 * `owner`, for an address not handed out; VB_ERR_HOST_OOM when host memory runs
 * out. */
vb_status vb_chunk_record_stream(vb_addr_map *used, vb_addr addr, vb_stream stream, const char *owner);

/* The bookkeeping half of such a strategy's free: takes the chunk at `addr`
 * out of `used`, and hands it to `deferred` when
 * it was recorded on other streams. *release_now is the chunk the owner
 * frees at once, or NULL when it is held (PENDING) until its events come
 * back. VB_ERR_INVALID, naming `owner`, for an address not handed out. */
vb_status vb_chunk_free_used(vb_addr_map *used, vb_deferred *deferred, vb_addr addr, const char *owner,
                             vb_chunk **release_now);

/* The smallest power of two >= `size` (size >= 1), or 0 if it overflows. */
static inline uint64_t vb_next_power_of_two(uint64_t size)
{
    if (size > (UINT64_C(1) << 63)) return 0;
    if (size <= 1) return 1;
    return UINT64_C(1) << (64 - __builtin_clzll(size - 1));
}

/* floor(log2(value)) for value >= 1. */
static inline unsigned vb_log2_floor(uint64_t value)
{
    return 63u - (unsigned)__builtin_clzll(value);
}

#endif
