/* vrambench — `tune`: a trace replayed under a grid of PyTorch allocator
 * settings and every other strategy, to pick the PYTORCH_ALLOC_CONF a
 * workload should use and the smallest device it fits on (app/tune.c; the
 * command line is app/cmd_tune.c).
 *
 * Each candidate is one allocator spec (app/runner.h): PyTorch's settings as
 * pytorch[CONF] (allocators/pytorch_conf.h), the other strategies by name.
 * Its figures come from one replay through the runner (app/replay.c) on the
 * chosen device; its capacities from replays on simulated devices
 * (app/fit.h): min_capacity_bytes, the smallest limit
 * (set_per_process_memory_fraction) from which up the replay has no OOM,
 * searched exactly; the device memory it needs, for the async backend
 * from two extremes of GPU progress (peak_reserved_bytes_min/_max,
 * min_device_bytes_min/_max); and the smallest common GPU that holds it
 * with the overhead. Candidates are evaluated in parallel, one process each.
 */
#ifndef VB_TUNE_H
#define VB_TUNE_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/device.h"
#include "base/status.h"
#include "shard.h"
#include "trace_drive.h"

typedef struct vb_tune_candidate {
    char spec[320];          /* the allocator spec run: pytorch[CONF] or a strategy's name */
    char conf[256];          /* PYTORCH_ALLOC_CONF for it ("" the defaults) */
    int is_pytorch;          /* 1: a PyTorch setting (conf applies) */
    double memory_fraction;  /* >= 0: also torch.cuda.set_per_process_memory_fraction(this) */
    int setting_count;       /* settings in conf (simpler first on ties) */
} vb_tune_candidate;

/* The grid: PyTorch's settings (defaults, expandable segments,
 * max_split_size_mb, roundup_power2_divisions in both forms, garbage
 * collection with a memory fraction, combinations), cudaMallocAsync, then
 * every other registered strategy. Static storage; `*count` entries. */
const vb_tune_candidate *vb_tune_grid(size_t *count);

typedef struct vb_tune_options {
    const char *trace_path;  /* a trace replay reads (a pickle is converted first, cmd_tune.c) */
    const vb_drive_events *events; /* set by vb_tune_run: the trace read once, for the probes */
    const char *label;       /* the results' scenario name: "tune:<file name>" */
    const char *device;      /* "sim" or "cuda" (main replays); bisection is always on sim */
    uint64_t capacity;       /* the device capacity OOMs are counted at (sim; 0: the sim default) */
    uint64_t overhead;       /* what a GPU holds besides PyTorch's memory (the smallest GPU) */
    uint64_t search_events;  /* what one minimum-capacity search may replay (app/fit.h; 0: the default) */
    unsigned jobs;           /* processes at once (>= 1) */
    int quiet;               /* no progress lines */
    vb_shard shard;          /* --shard I/N: only these candidates ({0, 0} or 1/1: all) */
} vb_tune_options;

/* Runs the whole grid and builds the results document: Google Benchmark
 * entries (one per candidate, with pytorch_alloc_conf, utilization,
 * min_capacity_bytes, ooms_at_capacity, on_pareto_front) and a top-level
 * "recommendation". Prints the table (Pareto front, recommendation) to
 * `table` (NULL: none). VB_ERR_INVALID for bad input, another status for a failure. */
vb_status vb_tune_run(const vb_tune_options *options, FILE *table, json_t **document);

/* A shard's document (--shard I/N, N > 1) holds only its candidates and has
 * no Pareto front or recommendation, which need them all. Once `vrambench
 * merge` has joined every shard's entries into `document`, this marks
 * on_pareto_front in each and sets "recommendation" as a whole tune does.
 * VB_ERR_INVALID with a message when the entries are not the grid's, one
 * each (a shard missing, or a tune of another vrambench). */
vb_status vb_tune_conclude(json_t *document);

#endif
