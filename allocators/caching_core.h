/* vrambench — the policy shared by `caching` and `expandable`: PyTorch's
 * CUDACachingAllocator (c10/cuda/CUDACachingAllocator.cpp), in our own C.
 *
 * Both strategies keep the same blocks, pools, best fit, split, coalescing,
 * stream events, out-of-memory retries, statistics and segment maps. They
 * differ only in where segments come from, which this module reaches through
 * a vb_cc_source:
 *   caching     one driver allocation (mem_alloc) per segment; empty_cache
 *               frees every free, unsplit segment.
 *   expandable  one reserved virtual range per (stream, pool), physical chunks
 *               mapped at its end as it grows; empty_cache unmaps whole free
 *               chunks. PyTorch's expandable_segments:True.
 *
 * The facts taken from PyTorch (constants, rounding, pool choice, the rules
 * of get_free_block and should_split, the malloc flow and its retries,
 * process_events / insert_events, release_cached_blocks, the garbage
 * collection by block age) are cited where they are used in caching_core.c.
 *
 * stitch   expandable's ranges growing by one handle sized to the request,
 *          and before a range takes a new handle it moves handles out of
 *          free holes between live blocks; with stitch_max_maps, it first
 *          maps the handles of several holes again into one stitched range
 *          (a segment that borrows their memory; stitch.c).
 * expandable and stitch share their ranges (vm_range.c); each source is
 * static in its strategy's file, reached only through its vb_cc_source.
 *
 * Internal to allocators/: nothing outside caching.c, expandable.c,
 * stitch.c and vm_range.c uses it.
 */
#ifndef VB_CACHING_CORE_H
#define VB_CACHING_CORE_H

#include <stdint.h>

#include "base/addr_map.h"
#include "allocator.h"
#include "base/ordered_set.h"

/* PyTorch's constants (CUDACachingAllocator.cpp). */
#define VB_CC_MIN_BLOCK_SIZE 512                    /* kMinBlockSize: every size rounds to this */
#define VB_CC_SMALL_SIZE (1 * VB_MiB)               /* kSmallSize: largest "small" request */
#define VB_CC_SMALL_BUFFER (2 * VB_MiB)             /* kSmallBuffer: small-pool segment */
#define VB_CC_LARGE_BUFFER (20 * VB_MiB)            /* kLargeBuffer: segment for 1..10 MiB */
#define VB_CC_MIN_LARGE_ALLOC (10 * VB_MiB)         /* kMinLargeAlloc */
#define VB_CC_ROUND_LARGE (2 * VB_MiB)              /* kRoundLarge: larger segments round to this */
#define VB_CC_MAX_REQUEST ((uint64_t)1 << 60)       /* PyTorch refuses 1 EB and more as OOM */

typedef struct vb_cc_pool vb_cc_pool;

/* A range of addresses (stitching source: free addresses of its arena). */
typedef struct vb_cc_extent {
    vb_addr addr;
    uint64_t size;
} vb_cc_extent;

/* A physical handle held but mapped nowhere (stitching source). */
typedef struct vb_cc_spare {
    vb_phys handle;
    uint64_t size;
} vb_cc_spare;
typedef struct vb_cc_segment vb_cc_segment;
typedef struct vb_cc_allocator vb_cc_allocator;

/* `allocated` of a free piece whose memory a stitched range maps again
 * (stitch.c): in no set, never merged, shown by no segment visit
 * (the stitched range shows it), until the stitched range goes. */
#define VB_CC_LENT 2

/* A block: a piece of a segment, handed out or free. Block structs come
 * from slabs of the allocator's, are recycled through its spare list and
 * are freed with it (destroy), never one by one. */
typedef struct vb_cc_size_index vb_cc_size_index;

typedef struct vb_cc_block {
    /* First cache line: all that `caching`'s malloc and free read or
     * write of every block they meet, when no record_stream use and no
     * garbage collection is about: the block freed and its address
     * neighbours (merged, or only looked at), the block an allocation
     * takes from a size class's heap, the one it splits off and the one
     * after it. At 400,000 events of a random trace the structs are most
     * of what a replay reads, and each block met costs one cache miss,
     * not two (docs/bench.md, "Replay speed"). */
    vb_stream stream;             /* the allocation stream: only it reuses the block */
    uint64_t size;
    vb_addr addr;
    struct vb_cc_block *prev;     /* address neighbours in the segment (spare list: next) */
    struct vb_cc_block *next;
    vb_cc_segment *segment;
    uint64_t heap_stamp;          /* the stamp of its entry while in a size class's heap, else 0
                                   * (caching_core.c, "exact classes as heaps") */
    uint16_t size_class;          /* its class, while indexed */
    uint8_t allocated;            /* 1 handed out; VB_CC_LENT: lent to a stitched range (stitch) */
    uint8_t mapped;               /* 0 only for unmapped address space of an expandable segment */
    uint8_t whole_in_pool;        /* counted in its pool's whole_free (unsplit when it went in) */
    uint8_t indexed;              /* in its stream's size index of its pool (free, mapped) */
    uint8_t in_use;               /* event_count or use_count is not 0: vb_cc_block_available reads
                                   * this line only */
    uint8_t in_small_pool;        /* in the allocator's small pool, else its large one (vb_cc_block_pool) */
    /* Second line: the set node (a size class's set, pool->blocks or
     * pool->unmapped: a walk in order reads both lines; the heaps of
     * `caching`'s exact classes need none), an age for garbage collection
     * and record_stream's uses and events (in_use says when there are). */
    vb_oset_node class_node;      /* in the one set that holds it, if any: its size class's (free, mapped,
                                   * indexed, not a heap), pool->blocks (free, mapped, while the pool keeps
                                   * that) or pool->unmapped (expandable) */
    uint64_t gc_count_base;       /* pool->get_free_blocks_call_count when it became free */
    vb_stream *uses;              /* streams record_stream named (never the block's own); NULL while
                                   * use_count is 0, its capacity a function of use_count (uses_capacity) */
    int event_count;              /* outstanding events of other streams' uses */
    uint32_t use_count;           /* streams in `uses` */
} vb_cc_block;

/* One of the two pools: free blocks of <= 1 MiB requests, or larger. Its
 * free mapped blocks are in one of two forms (caching_core.c): size
 * indexes, one per stream, which answer best fit; or `blocks`, all of them
 * in PyTorch's best-fit order, which a walk over them needs. The pool is in
 * the second form whenever the core lets a segment source walk `blocks`
 * (release_pool), and otherwise only at times (see complete_blocks): code
 * outside caching_core.c must not walk it anywhere else;
 * vb_cc_pool_insert / vb_cc_pool_erase put a block where the form says. */
struct vb_cc_pool {
    vb_ordered_set blocks;        /* free mapped blocks by (stream, size, address), while kept */
    int blocks_kept;              /* the second form: `blocks` holds every free mapped block, no index any */
    int blocks_walks;             /* walks over `blocks` going on (they nest) */
    uint64_t updates_since_walk;  /* inserts and erases since the last walk, while kept */
    vb_ordered_set unmapped;      /* unmapped ranges by (stream, address); expandable only */
    uint64_t smallest_releasable; /* the smallest piece its source gives back whole (a driver segment, a
                                   * range's unit), 0 while it has none: a free block below it releases
                                   * nothing (vb_cc_pool_first_at_least) */
    int is_small;
    uint64_t get_free_blocks_call_count; /* block age clock for garbage collection */
    size_t whole_free;            /* free blocks in it that are whole segments (garbage collection's) */
    /* Those blocks, in no order (their segments' whole_at say where), so
     * that garbage collection looks at them only, not at every free block
     * (caching_core.c, whole_list_add); `whole_victims` has as much room,
     * for one round's. Unlisted for good when host memory runs out for
     * them, or one has no segment: garbage collection then walks every
     * free block. */
    vb_cc_block **whole_blocks, **whole_victims;
    size_t whole_capacity;
    int whole_unlisted;
    vb_cc_size_index **indexes;   /* one per stream that has had free blocks here, by stream */
    size_t index_count, index_capacity;
    int unindexed;                /* host memory ran out for an index: `blocks` is kept for good */
    uint64_t *heap_stamps;        /* its allocator's stamp counter when exact classes are heaps, else NULL */
    /* Stitching source only: physical handles unmapped from holes, mapped
     * again where the pool grows next (held, so counted as reserved, until
     * then; empty_cache and destroy release them). */
    vb_cc_spare *spare_chunks;
    size_t spare_count, spare_capacity;
    /* Stitching source only: the pool's stitched ranges (segments that map
     * other segments' memory), in the order they were made. */
    vb_cc_segment **stitched;
    size_t stitched_count, stitched_capacity;
};

/* A segment: one driver allocation (caching) or one reserved range
 * (expandable, which embeds this struct first in its own). */
struct vb_cc_segment {
    vb_oset_node node;            /* in the allocator's segment set, by base */
    vb_addr base;
    uint64_t size;
    vb_cc_block *head;            /* the block at `base` */
    vb_cc_pool *pool;
    vb_stream stream;
    int borrowed;                 /* maps memory other segments hold (stitch): destroyed before them */
    size_t whole_at;              /* where its block is in its pool's whole_blocks, while listed there */
};

/* Where segments come from: the one difference between the strategies. */
typedef struct vb_cc_source {
    /* 1: PyTorch's expandable-segments rules (a large block splits whenever
     * the remainder is >= 512 B; best fit prefers blocks that cannot grow). */
    int expandable;
    /* alloc_block without the memory_fraction check: memory for a request
     * of `size` (rounded) bytes whose plain segment would be `alloc_size`.
     * On VB_OK *out is a free, mapped block of at least `size` bytes that is
     * in no set. VB_ERR_OOM when the device has no memory for it. */
    vb_status (*alloc_block)(vb_cc_allocator *cc, vb_cc_pool *pool, vb_stream stream, uint64_t size,
                             uint64_t alloc_size, vb_cc_block **out);
    /* release_blocks: returns the pool's free memory that can go back
     * (stitch: its spare handles and dormant stitched ranges first). */
    void (*release_pool)(vb_cc_allocator *cc, vb_cc_pool *pool);
    /* Releases a free block that is a whole segment (caching's release_block),
     * for garbage collection and release_available_cached_blocks. NULL when
     * the source has no such segments. */
    void (*release_block)(vb_cc_allocator *cc, vb_cc_block *block);
    /* Returns a segment and everything in it to the device (destroy);
     * borrowed segments come first, while what they map is still there. */
    void (*destroy_segment)(vb_cc_allocator *cc, vb_cc_segment *segment);
    /* Called for a block that became free (merged with its free
     * neighbours, in no set): 1 if the source keeps it out of the pool's
     * best fit (stitch: a stitched range waits for a request of its own
     * size), 0 to let it join the pool. NULL: every block joins. */
    int (*take_freed)(vb_cc_allocator *cc, vb_cc_block *block);
} vb_cc_source;

/* roundup_power2_divisions: one value per size interval (allocator.h). */
#define VB_CC_ROUNDUP_INTERVALS VB_DIVISION_INTERVALS

/* The options both strategies parse (each offers the ones that apply). */
typedef struct vb_cc_settings {
    uint64_t max_split_size_mb;          /* "max" (default): no limit */
    uint64_t max_non_split_rounding_mb;  /* default 20 */
    uint64_t roundup_power2_divisions[VB_CC_ROUNDUP_INTERVALS]; /* each 0 (default) or a power of two */
    double garbage_collection_threshold; /* 0 (default, off) or in (0, 1) */
    double memory_fraction;              /* < 0 (default): not set; else [0, 1] */
    uint64_t chunk_mb;                   /* VM sources: large-pool chunk size (stitch: smallest growth); 0: 20 MiB */
    uint64_t handle_max_mb;              /* stitch: largest physical handle; 0: no limit (stitch sets 64) */
    uint64_t stitch_max_maps;            /* stitch: most mappings one stitched range takes; 0: never stitch */
} vb_cc_settings;

/* The defaults above. */
void vb_cc_default_settings(vb_cc_settings *settings);

/* The vb_option entries both strategies offer alike (PyTorch accepts them
 * with expandable segments on or off). */
#define VB_CC_SHARED_OPTIONS                                                                                      \
    {"max_split_size_mb", VB_OPTION_U64, offsetof(vb_cc_settings, max_split_size_mb), 20, 18446744073709551615.0, \
     "MiB; blocks this large are never split and serve only requests within max_non_split_rounding_mb; "        \
     "default max (no limit)"},                                                                                   \
    {"max_non_split_rounding_mb", VB_OPTION_U64, offsetof(vb_cc_settings, max_non_split_rounding_mb), 20,         \
     18446744073709551615.0, "MiB; how much larger an oversize block may be than the request; default 20"},      \
    {"roundup_power2_divisions", VB_OPTION_DIVISIONS, offsetof(vb_cc_settings, roundup_power2_divisions), 0, 0,   \
     "0 or a power of two: round sizes up to that many steps per power of two, or per size interval as "         \
     "[256:1,512:2,>:4] (MiB:divisions); default 0 (off)"}

/* The roundup_power2_divisions that applies to a request of `size` bytes. */
uint64_t vb_cc_roundup_divisions(const vb_cc_allocator *cc, uint64_t size);

/* One outstanding event of a freed block used on another stream. */
typedef struct vb_cc_event_entry {
    vb_event event;
    vb_cc_block *block;
} vb_cc_event_entry;

/* The events recorded on one stream, oldest first (a ring). */
typedef struct vb_cc_stream_events {
    vb_stream stream;
    vb_cc_event_entry *ring;
    size_t head, count, capacity;
} vb_cc_stream_events;

struct vb_cc_allocator {
    vb_device *device;
    const vb_alloc_stats *stats;  /* the seam's counts (allocator.h) */
    const vb_cc_source *source;
    const char *name;             /* for messages */

    uint64_t max_split_size;      /* bytes; UINT64_MAX = unlimited */
    uint64_t max_non_split_rounding;
    uint64_t roundup_power2_divisions[VB_CC_ROUNDUP_INTERVALS];
    double gc_threshold;
    int set_fraction;             /* memory_fraction was given */
    uint64_t allowed_memory_maximum;
    uint64_t large_chunk;         /* bytes; VM sources' large-pool chunk (settings' chunk_mb) */
    uint64_t handle_max;          /* bytes; stitch's largest handle (settings' handle_max_mb); 0: no limit */
    uint64_t stitch_max_maps;     /* stitch: most mappings one stitched range takes; 0: never stitch */
    /* stitch: one reservation its stitched ranges take their addresses from
     * (stitch.c), while any lives: where it starts (0: none), its
     * size, its free extents by address, and the ranges in it. */
    vb_addr stitch_arena;
    uint64_t stitch_arena_size;
    vb_cc_extent *stitch_free;
    size_t stitch_free_count, stitch_free_capacity;
    size_t stitch_arena_ranges;

    vb_cc_pool small_pool, large_pool;
    /* Address -> block handed out, for vb_cc_allocated_at only (free and
     * record_stream get the block as the seam's tag): made by its first
     * call, kept from then on. */
    vb_addr_map allocated_blocks;
    int allocated_indexed;        /* allocated_blocks holds every block handed out */
    vb_ordered_set segments;      /* by base address */
    vb_cc_block *spare_blocks;    /* recycled structs, linked by next */
    uint64_t heap_stamps;         /* the last stamp of a heap class's entry (caching_core.c), both pools' */
    struct vb_cc_slab *slabs;     /* where every block struct lives: the newest slab first */

    vb_cc_stream_events *event_streams;
    size_t event_stream_count, event_stream_capacity;
    size_t outstanding_events;
    vb_event *spare_events;
    size_t spare_event_count, spare_event_capacity;
};

/* The pool of `block` (a block struct names its pool by a flag in its
 * first cache line, not by a pointer in its second: see vb_cc_block). */
static inline vb_cc_pool *vb_cc_block_pool(vb_cc_allocator *cc, const vb_cc_block *block)
{
    return block->in_small_pool ? &cc->small_pool : &cc->large_pool;
}

/* ---- set-up (called by each strategy's create/destroy) ---- */

/* Initialises `cc` (zeroed by the caller) on `dev` with checked settings;
 * VB_ERR_INVALID for a value PyTorch refuses. */
vb_status vb_cc_init(vb_cc_allocator *cc, vb_device *dev, const vb_cc_source *source,
                     const vb_cc_settings *settings, const char *name);

/* The whole create of a caching-style strategy: parses `config` against
 * `options` (offsets into vb_cc_settings) over the defaults, then allocates
 * and initialises the state on `source`. Errors name `name`. */
vb_status vb_cc_create(vb_device *dev, const vb_config *config, const vb_option *options, size_t option_count,
                       const vb_cc_source *source, const char *name, void **state);

/* vb_cc_create over the strategy's own `defaults` instead of
 * vb_cc_default_settings. */
vb_status vb_cc_create_with(vb_device *dev, const vb_config *config, const vb_option *options, size_t option_count,
                            const vb_cc_source *source, const char *name, const vb_cc_settings *defaults,
                            void **state);

/* ---- the ops every caching-style strategy shares (state = vb_cc_allocator) ---- */
void vb_cc_destroy(void *state);
vb_status vb_cc_malloc(void *state, uint64_t size, vb_stream stream, vb_grant *out);
vb_status vb_cc_free(void *state, vb_addr addr, uint64_t tag);
vb_status vb_cc_record_stream(void *state, vb_addr addr, uint64_t tag, vb_stream stream);
void vb_cc_prefetch_free(void *state, const uint64_t tags[VB_STRATEGY_PREFETCH_STAGES]);
vb_status vb_cc_empty_cache(void *state);
uint64_t vb_cc_largest_free_block(void *state);
void vb_cc_segments(void *state, vb_block_visitor visit, void *context);

/* Designated initialisers of those ops, for a strategy's vb_allocator_ops:
 * the strategies differ only in name, options and create. */
#define VB_CC_SHARED_OPS                                                                                \
    .destroy = vb_cc_destroy, .malloc = vb_cc_malloc, .free = vb_cc_free,                               \
    .record_stream = vb_cc_record_stream, .prefetch_free = vb_cc_prefetch_free,                         \
    .empty_cache = vb_cc_empty_cache, .largest_free_block = vb_cc_largest_free_block,                   \
    .segments = vb_cc_segments

/* ---- the policy's pure functions (exposed for tests) ---- */

/* round_size: 512 B granules, or the next power-of-two division when
 * roundup_power2_divisions applies; 0 for sizes past VB_CC_MAX_REQUEST. */
uint64_t vb_cc_round_size(const vb_cc_allocator *cc, uint64_t size);

/* get_allocation_size: the segment a plain (driver) pool takes for `size`. */
uint64_t vb_cc_allocation_size(uint64_t size);

/* Stops using size indexes in `pool`, as happens when host memory runs
 * out for one: pool->blocks is kept complete from then on and best fit
 * walks it, PyTorch's way. Exposed for tests: both ways must agree. */
void vb_cc_pool_stop_indexing(vb_cc_pool *pool);

/* Sorts blocks into the free set's order, PyTorch's BlockComparatorSize:
 * (stream, size, address), the order a walk over a pool visits them. */
void vb_cc_sort_by_size(vb_cc_block **blocks, size_t count);

/* Stops listing `pool`'s free blocks that are whole segments, as happens
 * when host memory runs out for the list: garbage collection walks every
 * free block from then on, PyTorch's way. Exposed for tests: both ways
 * must agree. */
void vb_cc_pool_stop_listing_whole(vb_cc_pool *pool);

/* ---- helpers for segment sources ---- */

/* A block struct from the spare list (or a slab) for a free block of
 * `pool`; NULL when host memory runs out. No links, no class, no uses or
 * events, `mapped` 1; its set node is unset (a set's insert sets it). */
vb_cc_block *vb_cc_block_new(vb_cc_allocator *cc, vb_addr addr, uint64_t size, vb_stream stream,
                             vb_cc_pool *pool, vb_cc_segment *segment);

/* Puts a block struct (in no set, unlinked, with no record_stream uses
 * and no events pending, as a free block in a pool has none) on the spare
 * list; its segment becomes NULL. vb_cc_block_new keeps what it has of
 * those in its second cache line. */
void vb_cc_block_recycle(vb_cc_allocator *cc, vb_cc_block *block);

/* insert_into_blocks: into the pool's free set, stamping its age base. */
void vb_cc_pool_insert(vb_cc_pool *pool, vb_cc_block *block);

/* Removes a block from the pool's free set. */
void vb_cc_pool_erase(vb_cc_pool *pool, vb_cc_block *block);

/* For release_pool's walk over pool->blocks: notes that the source gives
 * back pieces of `bytes` (a segment made, a range's unit), so that the
 * walk can skip the free blocks smaller than the smallest such piece. */
void vb_cc_pool_note_releasable(vb_cc_pool *pool, uint64_t bytes);

/* From `node` on in pool->blocks (NULL: none), the first free block of at
 * least pool->smallest_releasable bytes, or NULL. Within a stream the set
 * goes by size, so a stream's smaller blocks are passed over by one lower
 * bound. A release walk visits only these: PyTorch's release_blocks
 * visits every free block, and a replay that runs out of memory thousands
 * of times (each retry releases the cache) was quadratic for it. */
vb_oset_node *vb_cc_pool_first_at_least(vb_cc_pool *pool, vb_oset_node *node);

/* The free blocks the pool's size indexes hold, the entries they keep
 * for them (a heap class keeps stale entries too: caching_core.c) and the
 * classes in use (for tests). */
void vb_cc_pool_index_size(const vb_cc_pool *pool, size_t *blocks, size_t *entries, size_t *classes);

/* Visits every free block of the pool (all streams, in no order a caller
 * may rely on) until `visit` returns 0. */
void vb_cc_pool_each_free(vb_cc_pool *pool, int (*visit)(void *context, vb_cc_block *block), void *context);

/* Links `block` between `before` and `after` (either may be NULL), keeping
 * the segment's head right. */
void vb_cc_splice(vb_cc_block *block, vb_cc_block *before, vb_cc_block *after);

/* try_merge_blocks: absorbs `src` into `dst` when src is free, has no
 * pending events or uses, and is mapped alike; src leaves its set and is
 * recycled. Returns the bytes absorbed (0 when it did not merge). */
uint64_t vb_cc_try_merge(vb_cc_allocator *cc, vb_cc_block *dst, vb_cc_block *src);

/* 1 if the block is free and reusable now (PyTorch's `allocatable`). */
static inline int vb_cc_block_available(const vb_cc_block *block)
{
    return block && !block->allocated && !block->in_use;
}

/* 1 if the block is part of a larger segment (has a neighbour). */
static inline int vb_cc_block_is_split(const vb_cc_block *block)
{
    return block->prev != NULL || block->next != NULL;
}

/* The block handed out at `addr`, or NULL. The first call indexes the
 * blocks handed out by address (a walk over the segments), and every
 * malloc and free keeps that index from then on. */
vb_cc_block *vb_cc_allocated_at(vb_cc_allocator *cc, vb_addr addr);

/* Adds / removes a segment in the allocator's address-ordered set. */
void vb_cc_segment_add(vb_cc_allocator *cc, vb_cc_segment *segment);
void vb_cc_segment_remove(vb_cc_allocator *cc, vb_cc_segment *segment);

#endif
