/* vrambench — the allocator ops table, and the seam around it.
 *
 * One struct of function pointers per strategy (cf. sqlite3_mem_methods),
 * one file per strategy, registered by name in allocators/registry.c. An
 * allocator knows only the device layer (base/device.h), never the
 * application above it.
 *
 * Callers hold a vb_allocator handle and call vb_malloc / vb_free / ...,
 * never the ops directly. The handle is the seam: it gives every strategy
 * the same handling of size 0 and NULL frees, and it keeps the statistics,
 * so that no strategy counts anything by hand (and none can forget to, or
 * count twice). The rules of the seam:
 *
 *  What the seam counts
 *   - requested and allocated bytes, in vb_malloc / vb_free: the size asked
 *     for, and the block size the strategy's malloc reports (vb_grant.size),
 *     kept per live block until its free;
 *   - driver calls and reserved bytes, in the device the strategy is given:
 *     a per-allocator wrapper around the real device whose memory ops count
 *     each call by kind (vb_driver_call; successful or not) and the bytes
 *     held: mem_alloc'd bytes rounded to the driver's 2 MiB pages, and
 *     vm_create'd physical memory. driver_alloc_calls = mem_alloc +
 *     vm_create + pool_malloc calls; driver_free_calls = mem_free +
 *     vm_release + pool_free calls + pool_trim calls that released memory;
 *   - memory of stream-ordered pools made through the wrapper: read from the
 *     pool itself only when the statistics are read (pool_usage, and the
 *     peak from the pool's high-water mark, pool_high), never per call;
 *   - ooms: mallocs that returned VB_ERR_OOM; alloc_retries: mallocs whose
 *     grant says `retried`;
 *   - free_cached_bytes = reserved - allocated; the largest free block is
 *     asked of the strategy (largest_free_block) when the stats are read.
 *
 *  What a strategy must do
 *   - make every device call through the device its create was given (the
 *     seam's wrapper), never through another handle;
 *   - report in its malloc the block it handed out: address, size after
 *     rounding, and whether it gave cached memory back and tried again;
 *   - return VB_ERR_OOM only when the device (or a configured limit) cannot
 *     serve the request, VB_ERR_HOST_OOM when host memory runs out;
 *   - for its own decisions, read the counts with vb_seam_stats (read only).
 *
 * The conformance suite (tests/test_conformance.c) checks these figures
 * against a shadow ledger and a counting device of its own, not against
 * the seam's word.
 *
 * Thread safety: the seam holds the handle's lock around every call into the
 * strategy and around its own counting, so any strategy may be used from
 * several threads at once (PyTorch calls its allocator from the autograd
 * threads too). Strategies themselves are written single-threaded; the device
 * underneath must be safe for calls from several threads (sim and cuda are).
 */
#ifndef VB_ALLOCATOR_H
#define VB_ALLOCATOR_H

#include <stddef.h>
#include <stdint.h>

#include "base/addr_map.h"
#include "base/device.h"
#include "base/driver_pages.h"
#include "base/seam_lock.h"

/* ------------------------------------------------------------------------ */
/* Statistics the seam keeps (docs/design.md, "Statistics")                   */
/* ------------------------------------------------------------------------ */

/* The device calls the seam counts, by kind (named as the device ops are). */
typedef enum vb_driver_call {
    VB_CALL_MEM_ALLOC,
    VB_CALL_MEM_FREE,
    VB_CALL_MEM_INFO,
    VB_CALL_VM_RESERVE,
    VB_CALL_VM_FREE,
    VB_CALL_VM_CREATE,
    VB_CALL_VM_RELEASE,
    VB_CALL_VM_MAP,
    VB_CALL_VM_SET_ACCESS,
    VB_CALL_VM_UNMAP,
    VB_CALL_POOL_CREATE,
    VB_CALL_POOL_DESTROY,
    VB_CALL_POOL_MALLOC,
    VB_CALL_POOL_FREE,
    VB_CALL_POOL_TRIM,
    VB_CALL_POOL_USAGE,
    VB_DRIVER_CALL_KINDS
} vb_driver_call;

/* "mem_alloc", "mem_free", ...: the device op each kind counts. */
extern const char *const vb_driver_call_names[VB_DRIVER_CALL_KINDS];

typedef struct vb_alloc_stats {
    uint64_t requested_bytes;      /* sum of sizes asked for and not yet freed */
    uint64_t allocated_bytes;      /* sum of block sizes handed out (after rounding) */
    uint64_t reserved_bytes;       /* bytes held from the device */
    uint64_t requested_bytes_peak; /* maxima since creation or the last peak reset */
    uint64_t allocated_bytes_peak;
    uint64_t reserved_bytes_peak;
    uint64_t driver_alloc_calls;   /* calls into the device layer that obtain memory */
    uint64_t driver_free_calls;    /* calls into the device layer that return memory */
    uint64_t alloc_retries;        /* mallocs that freed cached memory and tried again */
    uint64_t ooms;                 /* mallocs that failed for lack of device memory */
    uint64_t free_cached_bytes;    /* reserved bytes not handed out (filled on reading) */
    uint64_t largest_free_block;   /* the largest of those, contiguous (filled on reading) */
    uint64_t driver_calls[VB_DRIVER_CALL_KINDS]; /* every counted device call, by kind */
    /* A configured memory limit (PyTorch's set_per_process_memory_fraction:
     * allowed_memory_maximum), over every malloc so far: the run would have
     * made the same decisions under any limit in [limit_same_from,
     * limit_same_to), the interval the grants' intervals (vb_grant) have in
     * common. limit_same_to 0: no bound above (both 0: any limit, as when
     * the strategy has none). */
    uint64_t limit_same_from, limit_same_to;
} vb_alloc_stats;

/* ------------------------------------------------------------------------ */
/* Configuration: key=value strings, parsed against a table of options       */
/* ------------------------------------------------------------------------ */

typedef struct vb_config_entry {
    const char *key;
    const char *value;
} vb_config_entry;

typedef struct vb_config {
    const vb_config_entry *entries;
    size_t count;
} vb_config;

typedef enum vb_option_type {
    VB_OPTION_U64,    /* unsigned integer (decimal, or 0x hex); "max" = UINT64_MAX */
    VB_OPTION_DOUBLE, /* finite real number */
    VB_OPTION_STRING, /* any text, stored as a const char * valid during create only */
    VB_OPTION_DIVISIONS, /* PyTorch's roundup_power2_divisions: a uint64_t[VB_DIVISION_INTERVALS],
                          * from one number for all ("4") or per interval ("[256:1,512:2,>:4]") */
} vb_option_type;

/* VB_OPTION_DIVISIONS: one value per power-of-two size interval, [0, 2 MiB),
 * [2, 4 MiB), ... [32 GiB, inf): PyTorch's 16 intervals from 1 MiB to 64 GiB
 * (c10/core/AllocatorConfig.cpp). Each value is 0 or a power of two. */
#define VB_DIVISION_INTERVALS 16

/* The stages of a free's prefetch (vb_prefetch_frees): the seam's record
 * first, then the strategy's own (ops->prefetch_free). */
#define VB_PREFETCH_STAGES 4
#define VB_STRATEGY_PREFETCH_STAGES (VB_PREFETCH_STAGES - 1)

/* One option an allocator understands; `offset` is where it lives in the
 * allocator's settings struct (a uint64_t or a double, by type). */
typedef struct vb_option {
    const char *key;
    vb_option_type type;
    size_t offset;
    double min, max;   /* accepted range, inclusive */
    const char *help;  /* one line, with the unit and the default */
} vb_option;

/* Applies `config` to `settings` (already holding the defaults). An unknown
 * key, a malformed number or one out of range is VB_ERR_INVALID with a
 * message that names the allocator, the key and what is accepted. */
vb_status vb_config_apply(const vb_config *config, const vb_option *options, size_t option_count,
                          void *settings, const char *allocator_name);

/* Parses "KEY=VALUE" into an entry pointing into `text` (which it modifies:
 * the '=' becomes a NUL). VB_ERR_INVALID when there is no '=' or no key. */
vb_status vb_config_entry_parse(char *text, vb_config_entry *out);

/* ------------------------------------------------------------------------ */
/* The ops table                                                             */
/* ------------------------------------------------------------------------ */

/* One block of one device segment, for segment maps. */
typedef struct vb_block_info {
    vb_addr segment;        /* where the segment starts */
    uint64_t segment_size;
    vb_addr block;          /* where the block starts (inside the segment) */
    uint64_t block_size;
    int allocated;          /* 1 handed out, 0 free (cached) */
    vb_stream stream;       /* the stream the block belongs to */
} vb_block_info;

typedef void (*vb_block_visitor)(void *context, const vb_block_info *block);

/* What a strategy's malloc reports to the seam. */
typedef struct vb_grant {
    vb_addr addr;       /* the block handed out */
    uint64_t size;      /* its size after rounding: the bytes it counts as allocated */
    int retried;        /* 1 when the call gave cached memory back and tried again */
    uint64_t tag;       /* a word the seam keeps with the block and hands back to free and
                         * record_stream (async: the allocating stream), so a strategy needs no
                         * map of its own on the hot path; 0 when unused */
    /* Whatever the status: when the call consulted a memory limit of the
     * strategy's (memory_fraction), the limits under which every decision
     * of the call would have come out the same: [limit_same_from,
     * limit_same_to), limit_same_to 0 for no bound above (both 0: any
     * limit). What `tune` and `explain` search capacities with (app/fit.h). */
    uint64_t limit_same_from, limit_same_to;
} vb_grant;

typedef struct vb_allocator_ops {
    const char *name;
    const char *description;      /* one line for `vrambench list allocators` */
    const vb_option *options;     /* may be NULL when option_count is 0 */
    size_t option_count;

    /* Creates an instance on `dev` (the seam's counting device: see the
     * rules at the top) with `config` applied. */
    vb_status (*create)(vb_device *dev, const vb_config *config, void **state);
    /* Returns everything still held to the device and frees the instance. */
    void (*destroy)(void *state);
    /* Allocates `size` (> 0) bytes for use on `stream` into `out` (which the
     * seam zeroed). VB_ERR_OOM when the memory cannot be had, never a wrong
     * pointer; `out->retried` is read whatever the status. */
    vb_status (*malloc)(void *state, uint64_t size, vb_stream stream, vb_grant *out);
    /* Frees a pointer malloc returned, with the tag its grant carried. An
     * unknown pointer or a second free is VB_ERR_INVALID and changes nothing
     * (the seam catches both first). */
    vb_status (*free)(void *state, vb_addr addr, uint64_t tag);
    /* Notes that the block at `addr` is in use on `stream` too: once freed,
     * it is not handed out again until the work queued on `stream` before the
     * free has completed. May be NULL when the strategy never reuses memory
     * itself (it then relies on the device, as cudaFree does). */
    vb_status (*record_stream)(void *state, vb_addr addr, uint64_t tag, vb_stream stream);
    /* A hint that blocks are to be freed soon: asks for the cache lines
     * their frees will read, in stages, one block each (tags[s], 0 for
     * none): stage 0 the block's own lines, stage 1 what lies past it (a
     * merge's neighbours), stage 2 where the free puts it. A block gets its
     * stages from calls one after another, each once the lines the stage
     * before asked for have arrived. Changes nothing. May be NULL. */
    void (*prefetch_free)(void *state, const uint64_t tags[VB_STRATEGY_PREFETCH_STAGES]);
    /* Returns every cached, unused byte it can to the device. */
    vb_status (*empty_cache)(void *state);
    /* The largest contiguous run of reserved bytes not handed out (a block a
     * request could be served from without new memory). NULL when the
     * strategy cannot see its free ranges (async: the pool hides them) or
     * caches nothing: the seam then takes all cached bytes to be one run. */
    uint64_t (*largest_free_block)(void *state);
    /* Calls `visit` for every block of every segment, in address order. May be
     * NULL when the strategy cannot see its segments (async on a real GPU). */
    void (*segments)(void *state, vb_block_visitor visit, void *context);
    /* Memory the strategy holds from the driver outside the device it was
     * given, current and peak, read with the stats. NULL for every strategy
     * but the external one (allocators/external.c), which calls CUDA itself
     * and measures what the driver reports. */
    void (*outside_reserved)(void *state, uint64_t *current, uint64_t *peak);
} vb_allocator_ops;

/* ------------------------------------------------------------------------ */
/* Registry                                                                  */
/* ------------------------------------------------------------------------ */

/* The registered strategies, NULL-terminated, in the order users see them. */
extern const vb_allocator_ops *const vb_allocator_registry[];

/* External allocators (allocators/external.c): "external:PATH.so" names a
 * shared library with PyTorch's pluggable-allocator ABI. It is not in the
 * registry ("all" cannot name a path); vb_allocator_find knows the prefix,
 * and vb_allocator_create hands PATH.so to it as the config entry "path". */
#define VB_EXTERNAL_PREFIX "external:"
/* What results say of an external allocator's reserved bytes. */
#define VB_EXTERNAL_RESERVED_SOURCE \
    "cudaMemGetInfo: driver-used bytes gained since the allocator was created (at least allocated)"
extern const vb_allocator_ops vb_external_allocator;

/* The strategy named `name` (a registered one, or external:PATH), or NULL. */
const vb_allocator_ops *vb_allocator_find(const char *name);

/* The registered names, comma-separated, into `out` (cut to `capacity`),
 * for "unknown allocator" messages. */
void vb_allocator_names(char *out, size_t capacity);

/* ------------------------------------------------------------------------ */
/* Handles: what the harness, scenarios and tests hold                       */
/* ------------------------------------------------------------------------ */

typedef struct vb_allocator {
    const vb_allocator_ops *ops;
    void *state;
    vb_device *device;             /* the real device */
    uint64_t seen_reserved_peak;   /* the reserved peak the fragmentation below belongs to */
    double external_frag_at_peak;  /* (free_cached - largest_free) / free_cached then */
    /* The seam's own (allocator.c); read them through vb_allocator_stats. */
    vb_alloc_stats counted;        /* everything but pool memory and the cached figures */
    struct vb_live_block *blocks;  /* the live blocks, by slot (a block's key names its slot) */
    size_t block_count, block_capacity;
    uint64_t free_slots;           /* a list through freed slots: index + 1, 0 = empty */
    /* Address of a live block -> its slot, kept only from the first call
     * that names a block by its address (vb_free, vb_record_stream): a
     * caller that frees by key (vb_free_keyed: a trace's replay) never
     * pays for it, and the hash lookup per malloc and free it would cost. */
    vb_addr_map live;
    int live_indexed;              /* `live` holds every live block */
    vb_device counting_device;     /* what the strategy is given */
    vb_device_ops counting_ops;
    vb_addr_map driver_blocks;     /* mem_alloc address -> its requested size */
    vb_driver_pages driver_pages;  /* what the driver uses for them (reserved) */
    vb_addr_map phys_chunks;       /* vm_create handle -> bytes held */
    vb_pool *pools;                /* pools made through counting_device */
    size_t pool_count, pool_capacity;
    vb_seam_lock lock;             /* held around every call into the strategy */
    char *recipe_name;             /* the name and configuration it was created with, */
    vb_config recipe;              /* copied (vb_allocator_create_like) */
} vb_allocator;

/* Creates an allocator by registered name. An unknown name is VB_ERR_INVALID
 * with a message listing the known ones. `config` may be NULL. */
vb_status vb_allocator_create(const char *name, vb_device *dev, const vb_config *config,
                              vb_allocator **out);

/* Destroys it (NULL is fine). */
void vb_allocator_destroy(vb_allocator *allocator);

/* An allocator of `model`'s strategy and configuration on `dev` (another
 * device of the machine: the PyTorch plug-in's one allocator per device). */
vb_status vb_allocator_create_like(const vb_allocator *model, vb_device *dev, vb_allocator **out);

/* malloc through the ops table. Size 0 succeeds with address 0 and counts
 * nothing (cudaMalloc and PyTorch do the same). */
vb_status vb_malloc(vb_allocator *allocator, uint64_t size, vb_stream stream, vb_addr *out);

/* free through the ops table. Address 0 is a no-op; an address that is not
 * live (unknown, or freed already) is VB_ERR_INVALID and never reaches the
 * strategy. */
vb_status vb_free(vb_allocator *allocator, vb_addr addr);

/* vb_malloc that also gives the block's key in *key (0 with address 0):
 * what vb_free_keyed takes to free it with no look-up by address, for a
 * caller that keeps a word per allocation anyway (a trace's replay: the
 * reader keeps it with the trace's id). A key names its block until the
 * block is freed, never another block after it. */
vb_status vb_malloc_keyed(vb_allocator *allocator, uint64_t size, vb_stream stream, vb_addr *out, uint64_t *key);

/* vb_free of the block `key` names. Key 0 is a no-op; a key that names no
 * live block (freed already, or never given) is VB_ERR_INVALID and never
 * reaches the strategy. */
vb_status vb_free_keyed(vb_allocator *allocator, uint64_t key);

/* The address of the live block `key` names; 0 when it names none. */
vb_addr vb_keyed_addr(vb_allocator *allocator, uint64_t key);

/* A hint that vb_free_keyed of each of `keys` is to come a few calls from
 * now: asks for the cache lines those frees will read, so that their
 * misses overlap with the calls before them instead of following one
 * another. In stages, one key each (keys[s], 0 for none), a key getting
 * its stages from calls one after another, as each stage reads what the
 * one before asked for: 0 the seam's record of the block, 1 the
 * strategy's block, 2 what the strategy's free reads past it, 3 where the
 * free puts it (ops->prefetch_free's stages 0, 1 and 2). One call for all
 * stages: a call per stage cost a long replay about 8 instructions an
 * event more. Changes nothing; a key that names no live block is ignored.
 * It reads the allocator without its lock: call it only from the thread
 * that mallocs and frees with it (as a trace's replay does). */
void vb_prefetch_frees(const vb_allocator *allocator, const uint64_t keys[VB_PREFETCH_STAGES]);

/* record_stream through the ops table (a no-op where the strategy has none). */
vb_status vb_record_stream(vb_allocator *allocator, vb_addr addr, vb_stream stream);

/* empty_cache through the ops table. */
vb_status vb_empty_cache(vb_allocator *allocator);

/* The statistics now, free_cached_bytes and largest_free_block included
 * (the strategy's largest_free_block may walk its free lists). */
void vb_allocator_stats(vb_allocator *allocator, vb_alloc_stats *out);

/* The statistics without the cached figures (left 0): no walk. */
void vb_allocator_counts(vb_allocator *allocator, vb_alloc_stats *out);

/* Restarts the peaks (and the fragmentation at peak) from the current values. */
void vb_allocator_reset_peaks(vb_allocator *allocator);

/* Brings seen_reserved_peak (and the fragmentation at peak) up to date for
 * memory the seam does not see per call (pools: read now); for
 * the rest vb_malloc keeps it exact. For callers that want the moment of
 * the peak (a run while it samples), between calls, off the timed path. */
void vb_allocator_note_peak(vb_allocator *allocator);

/* For strategies: the seam's counts so far, by the device their create was
 * given (the counting device); NULL for any other device. */
const vb_alloc_stats *vb_seam_stats(vb_device *counting_device);

/* Calls `visit` with the address and tag of every block the allocator a
 * counting device belongs to has handed out and not had back (a strategy
 * that keeps no map of its own frees what is left at destroy so). */
void vb_seam_each_live(vb_device *counting_device, void (*visit)(void *context, vb_addr addr, uint64_t tag),
                       void *context);

/* The blocks of every segment (the strategy's `segments`, in its order) in
 * a new array, *count of them (free it); none for a strategy that cannot
 * list them. VB_ERR_HOST_OOM when host memory runs out. */
vb_status vb_allocator_blocks(vb_allocator *allocator, vb_block_info **out, size_t *count);

/* External fragmentation of a stats snapshot: (free_cached - largest_free) /
 * free_cached, 0 when nothing is cached. */
double vb_external_fragmentation(const vb_alloc_stats *stats);

/* Rounds `size` up to a multiple of `alignment` (a power of two); returns 0
 * when that would overflow, so callers can treat absurd sizes as OOM. */
static inline uint64_t vb_round_up(uint64_t size, uint64_t alignment)
{
    if (size > UINT64_MAX - (alignment - 1)) return 0;
    return (size + alignment - 1) & ~(alignment - 1);
}

#endif
