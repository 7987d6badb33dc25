/* vrambench — the allocator ops table.
 *
 * One struct of function pointers per strategy (cf. sqlite3_mem_methods),
 * one file per strategy, registered by name in allocators/registry.c. An
 * allocator knows only the device layer (base/device.h), never the
 * harness: it gets memory from the device and keeps the shared statistics.
 *
 * Callers use the vb_allocator_* / vb_malloc / vb_free wrappers below, which
 * give every strategy the same handling of size 0 and NULL frees and track the
 * external fragmentation at the moment of peak reserved memory.
 */
#ifndef VB_ALLOCATOR_H
#define VB_ALLOCATOR_H

#include <stddef.h>
#include <stdint.h>

#include "base/device.h"

/* ------------------------------------------------------------------------ */
/* Statistics every allocator keeps (docs/design.md, "Statistics")  */
/* ------------------------------------------------------------------------ */

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
    uint64_t ooms;                 /* mallocs that failed for lack of memory */
    uint64_t free_cached_bytes;    /* reserved bytes not handed out (filled on reading) */
    uint64_t largest_free_block;   /* the largest of those, contiguous (filled on reading) */
} vb_alloc_stats;

/* Bookkeeping helpers for implementations: they keep the peaks right. */
static inline void vb_stats_add_use(vb_alloc_stats *s, uint64_t requested, uint64_t allocated)
{
    s->requested_bytes += requested;
    s->allocated_bytes += allocated;
    if (s->requested_bytes > s->requested_bytes_peak) s->requested_bytes_peak = s->requested_bytes;
    if (s->allocated_bytes > s->allocated_bytes_peak) s->allocated_bytes_peak = s->allocated_bytes;
}

static inline void vb_stats_remove_use(vb_alloc_stats *s, uint64_t requested, uint64_t allocated)
{
    s->requested_bytes -= requested;
    s->allocated_bytes -= allocated;
}

static inline void vb_stats_add_reserved(vb_alloc_stats *s, uint64_t bytes)
{
    s->reserved_bytes += bytes;
    if (s->reserved_bytes > s->reserved_bytes_peak) s->reserved_bytes_peak = s->reserved_bytes;
}

static inline void vb_stats_remove_reserved(vb_alloc_stats *s, uint64_t bytes)
{
    s->reserved_bytes -= bytes;
}

/* Peaks start again from the current values. */
static inline void vb_stats_reset_peaks(vb_alloc_stats *s)
{
    s->requested_bytes_peak = s->requested_bytes;
    s->allocated_bytes_peak = s->allocated_bytes;
    s->reserved_bytes_peak = s->reserved_bytes;
}

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
    VB_OPTION_DIVISIONS, /* PyTorch's roundup_power2_divisions: a uint64_t[VB_DIVISION_INTERVALS],
                          * from one number for all ("4") or per interval ("[256:1,512:2,>:4]") */
} vb_option_type;

/* VB_OPTION_DIVISIONS: one value per power-of-two size interval, [0, 2 MiB),
 * [2, 4 MiB), ... [32 GiB, inf): PyTorch's 16 intervals from 1 MiB to 64 GiB
 * (c10/core/AllocatorConfig.cpp). Each value is 0 or a power of two. */
#define VB_DIVISION_INTERVALS 16

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

typedef struct vb_allocator_ops {
    const char *name;
    const char *description;      /* one line for `vrambench list allocators` */
    const vb_option *options;     /* may be NULL when option_count is 0 */
    size_t option_count;

    /* Creates an instance on `dev` with `config` applied. */
    vb_status (*create)(vb_device *dev, const vb_config *config, void **state);
    /* Returns everything still held to the device and frees the instance. */
    void (*destroy)(void *state);
    /* Allocates `size` (> 0) bytes for use on `stream`. VB_ERR_OOM (and
     * stats.ooms + 1) when the memory cannot be had; never a wrong pointer. */
    vb_status (*malloc)(void *state, uint64_t size, vb_stream stream, vb_addr *out);
    /* Frees a pointer malloc returned. An unknown pointer or a second free is
     * VB_ERR_INVALID and changes nothing. */
    vb_status (*free)(void *state, vb_addr addr);
    /* Notes that the block at `addr` is in use on `stream` too: once freed,
     * it is not handed out again until the work queued on `stream` before the
     * free has completed. May be NULL when the strategy never reuses memory
     * itself (it then relies on the device, as cudaFree does). */
    vb_status (*record_stream)(void *state, vb_addr addr, vb_stream stream);
    /* Returns every cached, unused byte it can to the device. */
    vb_status (*empty_cache)(void *state);
    /* Bytes reserved but not handed out, and the largest contiguous run of
     * them (a block a request could be served from without new memory). */
    void (*cached)(void *state, uint64_t *free_cached_bytes, uint64_t *largest_free_block);
    /* Calls `visit` for every block of every segment, in address order. May be
     * NULL when the strategy cannot see its segments (async on a real GPU). */
    void (*segments)(void *state, vb_block_visitor visit, void *context);
} vb_allocator_ops;

/* ------------------------------------------------------------------------ */
/* Registry                                                                  */
/* ------------------------------------------------------------------------ */

/* The registered strategies, NULL-terminated, in the order users see them. */
extern const vb_allocator_ops *const vb_allocator_registry[];

/* The strategy named `name`, or NULL. */
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
    vb_device *device;
    uint64_t seen_reserved_peak;   /* the reserved peak the fragmentation below belongs to */
    double external_frag_at_peak;  /* (free_cached - largest_free) / free_cached then */
} vb_allocator;

/* Creates an allocator by registered name. An unknown name is VB_ERR_INVALID
 * with a message listing the known ones. `config` may be NULL. */
vb_status vb_allocator_create(const char *name, vb_device *dev, const vb_config *config,
                              vb_allocator **out);

/* Destroys it (NULL is fine). */
void vb_allocator_destroy(vb_allocator *allocator);

/* malloc through the ops table. Size 0 succeeds with address 0 and counts
 * nothing (cudaMalloc and PyTorch do the same). */
vb_status vb_malloc(vb_allocator *allocator, uint64_t size, vb_stream stream, vb_addr *out);

/* free through the ops table. Address 0 is a no-op. */
vb_status vb_free(vb_allocator *allocator, vb_addr addr);

/* record_stream through the ops table (a no-op where the strategy has none). */
vb_status vb_record_stream(vb_allocator *allocator, vb_addr addr, vb_stream stream);

vb_status vb_empty_cache(vb_allocator *allocator);

/* The statistics now, free_cached_bytes and largest_free_block included. */
void vb_allocator_stats(vb_allocator *allocator, vb_alloc_stats *out);

/* Restarts the peaks (and the fragmentation at peak) from the current values. */
void vb_allocator_reset_peaks(vb_allocator *allocator);

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
