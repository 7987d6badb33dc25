/* vrambench — `explain`: why a trace runs out of memory under a capacity
 * (app/explain.c; the command line is app/cmd_explain.c).
 *
 * The trace is replayed under the capacity (PyTorch's limit for its caching
 * allocator, a device's memory for the others: app/fit.h) to its first
 * out-of-memory. A trace converted from PyTorch's own snapshot of an OOM
 * ends with the request that failed (torch2trace's `o SIZE STREAM`): the
 * replay stops there and asks for it, so the OOM explained is PyTorch's,
 * reproduced or not.
 *
 * At that request it reports the allocator's memory twice: when the
 * request came (before the out-of-memory path) and when the allocator gave
 * up (after it released what it could: what PyTorch's message reports).
 * Reserved minus allocated bytes are split by cause, adding up exactly:
 *   free_in_live_segments  free blocks of segments that hold live blocks
 *                          (PyTorch cannot release them), by pool and stream
 *   kept_whole             free blocks of max_split_size or more: they serve
 *                          only requests within max_non_split_rounding of them
 *   cached_segments        free segments with no live block (empty_cache and
 *                          the out-of-memory path release them)
 *   waiting_on_events      blocks freed but in use on another stream
 *                          (record_stream): 0 in a replay, a trace carries no
 *                          record_stream
 *   rounding               reserved bytes in no block: a driver page's or a
 *                          pool's rounding (all of it for the async backend,
 *                          whose pool hides its free ranges)
 * Then `what_if`: every candidate of `tune` under the same capacity, whether
 * it fits and by how much; and, asked for, a PyTorch memory snapshot of the
 * moment (app/snapshot.h) that PyTorch's viewer opens. */
#ifndef VB_EXPLAIN_H
#define VB_EXPLAIN_H

#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "base/status.h"

typedef struct vb_explain_options {
    const char *trace_path;    /* the trace (a pickle is converted first, cmd_explain.c) */
    const char *input_label;   /* the input as the user named it */
    const char *spec;          /* the allocator: pytorch[CONF] or a strategy */
    uint64_t capacity;
    const char *snapshot_path; /* NULL: none */
    int what_if;               /* 1: every tune candidate under the same capacity */
} vb_explain_options;

/* Replays, explains, writes the table to `table` (NULL: none) and the
 * document to *document (also when the trace fits). VB_ERR_INVALID for bad input. */
vb_status vb_explain_run(const vb_explain_options *options, FILE *table, json_t **document);

#endif
