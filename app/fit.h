/* vrambench — will it fit: a trace replayed under a memory capacity as
 * PyTorch meets one (app/fit.c). `tune` finds minimum capacities and the
 * smallest GPU with it; `explain` replays to the first out-of-memory.
 *
 * A capacity means one of two things:
 *   limit   what torch.cuda.set_per_process_memory_fraction(f) allows,
 *           allowed_memory_maximum = size_t(f x total) bytes. PyTorch's
 *           caching allocator checks it before it asks the driver for
 *           memory (DeviceCachingAllocator::alloc_block:
 *           total_allocated_memory + get_allocation_size(size) > allowed),
 *           on its own reserved bytes only. With expandable segments the
 *           check is on that segment size, not on what is mapped.
 *   device  a device with that much memory for the allocator: the driver
 *           refuses cudaMalloc / cuMemCreate past it. A real GPU's is its
 *           total less what else holds memory: the CUDA context, the
 *           libraries' workspaces, other processes.
 * For `caching` (expandable_segments off, no garbage collection) the two
 * are one: segments are whole 2 MiB pages and the limit's check and the
 * driver refuse the same calls. They differ for expandable segments (the
 * check on the segment size), for garbage collection (it acts only under
 * a limit) and for the async backend (PyTorch's limit counts the bytes
 * handed out, pytorch_used_bytes, not what the pool holds).
 *
 * Limit capacities are replayed on a sim device 2^k times as large with
 * memory_fraction 2^-k: allowed_memory_maximum is then the capacity to the
 * byte (a power of two times an integer is exact in a double), and the
 * device never runs out first. Strategies without PyTorch's limit (async,
 * bfc, ...) take a capacity as a device's.
 *
 * How far the GPU got decides where the async backend's pool puts blocks
 * (base/device_sim_pool.c: a free is pending until the pool sees it
 * complete). A replay queues no work: its frees complete as soon as the
 * pool looks (VB_PROGRESS_REPLAY). The two extremes:
 *   VB_PROGRESS_FAST  the GPU is infinitely fast: every free completes and
 *                     the pool sees it at once (the device is synchronized
 *                     after every free);
 *   VB_PROGRESS_LATE  the GPU is as late as the trace allows: no free
 *                     completes before the trace ends (a trace shows no
 *                     synchronization; every stream is kept busy to the
 *                     end), so the pool reuses only pending frees.
 */
#ifndef VB_FIT_H
#define VB_FIT_H

#include <stdint.h>

#include "allocators/spec.h"
#include "trace_drive.h"

typedef enum vb_fit_kind {
    VB_FIT_LIMIT = 0, /* PyTorch's memory fraction (strategies that have it; the others: device) */
    VB_FIT_DEVICE,    /* a device with that much memory */
} vb_fit_kind;

typedef enum vb_progress {
    VB_PROGRESS_REPLAY = 0,
    VB_PROGRESS_FAST,
    VB_PROGRESS_LATE,
} vb_progress;

/* The smallest capacity looked at (the driver's page) and the largest:
 * half the simulated device's most (base/device.h), as a limit's replay
 * needs a device twice its size. */
#define VB_FIT_STEP VB_DRIVER_PAGE
#define VB_FIT_MAX_CAPACITY (VB_SIM_MAX_CAPACITY / 2)
#define VB_FIT_MAX_CAPACITY_TEXT "28TiB"

/* What a replay under a capacity found. */
typedef struct vb_fit_result {
    int fits;                  /* 1: no allocation ran out of memory */
    int limited;               /* 1: the capacity was PyTorch's limit; 0: a device's memory */
    uint64_t ooms, alloc_retries;
    uint64_t first_oom_line, first_oom_bytes; /* line 0: no OOM */
    uint64_t peak_reserved, peak_requested;
    /* Limits only: every capacity in [same_from, same_to) makes the same
     * decisions, so has the same outcome (same_to 0: no bound above). */
    uint64_t same_from, same_to;
} vb_fit_result;

/* 1 if the strategy `name` (caching, expandable) has PyTorch's limit. */
int vb_fit_has_limit(const char *name);

/* The spec and sim capacity that replay `spec_text` under `capacity` of
 * `kind` (a limit: memory_fraction 2^-k on 2^k x capacity). *limited says
 * which it is. VB_ERR_INVALID for a bad spec. Free the spec. */
vb_status vb_fit_spec(const char *spec_text, uint64_t capacity, vb_fit_kind kind, vb_allocator_spec *spec,
                      uint64_t *sim_capacity, int *limited);

/* Replays `events` with `spec` under `capacity` (fresh sim, its fresh
 * cudaMalloc addresses placed as `placement` says); with `stop_at_oom`,
 * stops at the first out-of-memory. */
vb_status vb_fit_probe(const vb_drive_events *events, const char *spec, uint64_t capacity, vb_fit_kind kind,
                       vb_sim_placement placement, int stop_at_oom, vb_fit_result *out);

/* Replays `events` with `spec` on a sim device of `capacity` (0: its
 * default) in a GPU-progress mode. */
vb_status vb_fit_probe_progress(const vb_drive_events *events, const char *spec, uint64_t capacity,
                                vb_progress progress, vb_fit_result *out);

/* What a GPU-progress mode keeps during one drive. */
typedef struct vb_fit_progress {
    vb_progress mode;
    vb_drive_target *target;                  /* the drive's (its device a sim) */
    unsigned char busy[VB_TRACE_MAX_STREAMS]; /* LATE: trace streams kept busy already */
} vb_fit_progress;

/* The hooks of `state`'s mode for a drive (VB_PROGRESS_REPLAY: none);
 * `hooks` is zeroed first. */
void vb_fit_progress_hooks(vb_fit_progress *state, vb_drive_hooks *hooks);

/* The minimum capacity of a replay. */
typedef struct vb_fit_min {
    int found;            /* 0: it fits under no capacity up to VB_FIT_MAX_CAPACITY */
    uint64_t capacity;    /* under a limit: it fits under this capacity and every larger one */
    uint64_t fails_at;    /* a capacity just below it under which it runs out of memory (0: none found) */
    int exact;            /* 1: `capacity` is where fitting from there up starts (fails_at below it) */
    uint64_t lowest_fit;  /* the smallest capacity it was seen to fit under (<= capacity; below it only
                           * when the budget ran out: found by bisection under the range checked) */
    unsigned probes;      /* replays it took */
} vb_fit_min;

/* What one search under a limit may replay before it settles for what it
 * has shown, in events (tune --search-events): the default is the budget
 * the recorded training loops (2,000 to 30,000 events) are exact under
 * with every setting but one; however long the trace, at least
 * VB_FIT_MIN_WALK_PROBES replays down from the top. Past it, the
 * bisection below the range checked gets a quarter of it more (at least
 * VB_FIT_MIN_BISECT_PROBES replays). */
#define VB_FIT_DEFAULT_SEARCH_EVENTS 100000000ull
#define VB_FIT_MAX_SEARCH_EVENTS 1000000000000ull
#define VB_FIT_MIN_WALK_PROBES 4
#define VB_FIT_MIN_BISECT_PROBES 2

/* The smallest capacity from which up the replay fits. Under a limit the
 * search is safe, fitting being not monotone in the capacity (what the
 * out-of-memory path frees changes what follows): from a capacity where
 * the limit refuses nothing, down, each probe covers the capacities that
 * make its decisions (same_from), until one runs out of memory: `capacity`
 * is then the lowest from which all fit, `fails_at` one just below (exact
 * 1). With max_split_size_mb or garbage collection almost every 2 MiB
 * behaves apart: if `search_events` (above; 0: the default) runs out
 * first, `capacity` is where the range checked ends (still safe, exact 0)
 * and `lowest_fit` a bisection's answer below it, as far as its share of
 * the budget went. Under a device (strategies without the limit) it is a
 * bisection, which takes fitting to be monotone (exact 0): from `start`
 * (or a capacity above it found in steps that double), a few steps down,
 * then halving down to the trace's live peak (below it nothing fits); a
 * `start` near the answer (the main replay's peak, the limit's minimum)
 * takes few replays. `known`, when not NULL, is vb_fit_probe's result
 * under `start` of `kind` and `placement` with stop_at_oom 0: when it
 * fits, it is the search's first replay (which stopping at an OOM would
 * not change), counted but not made again. */
vb_status vb_fit_min_capacity(const vb_drive_events *events, const char *spec, vb_fit_kind kind,
                              vb_sim_placement placement, uint64_t start, uint64_t search_events,
                              const vb_fit_result *known, vb_fit_min *out);

/* 1 when where the driver places cudaMalloc's segments can change whether
 * `spec_text` fits: PyTorch's caching allocator without expandable
 * segments (best fit breaks ties between equal free blocks by address).
 * Expandable segments take their addresses from one reservation, and the
 * other strategies are not PyTorch's (their answers are the sim's
 * top-down placement's). */
int vb_fit_placement_matters(const char *spec_text);

/* The minimum capacity under both placements the sim models
 * (VB_SIM_PLACE_TOP_DOWN and VB_SIM_PLACE_RISING; one search where
 * placement does not matter): `safe` fits from there up under either
 * (the larger of the two; exact when both are), `*low` is the smaller
 * (the interval PyTorch's real minimum was found in: docs/tune.md).
 * `known[p]` (or NULL): vb_fit_min_capacity's `known` for placement p. */
vb_status vb_fit_min_capacity_placed(const vb_drive_events *events, const char *spec, vb_fit_kind kind,
                                     uint64_t start, uint64_t search_events, const vb_fit_result *const known[2],
                                     vb_fit_min *safe, uint64_t *low);

/* ---- GPUs ---- */

/* A class of GPU by memory, and the memory CUDA reports on its smallest
 * model (cudaMemGetInfo's total). */
typedef struct vb_gpu_class {
    const char *name;     /* "24 GiB" */
    const char *models;
    uint64_t total_bytes;
    const char *source;   /* where total_bytes comes from */
} vb_gpu_class;

/* Common GPU sizes, smallest first; *count entries. */
const vb_gpu_class *vb_gpu_classes(size_t *count);

/* What a job needs on a GPU besides PyTorch's reserved memory, by
 * default: the CUDA context, the libraries' own memory (cuBLAS, cuDNN
 * handles and modules). lab/harnesses/fit_check.py measures it. */
#define VB_GPU_OVERHEAD_DEFAULT (1024 * VB_MiB)

#endif
