/* vrambench — a trace driven straight through an allocator, without the
 * run harness: no samples, no timing, no segment maps. What `tune` needs
 * for its many capacity probes (app/tune.c) and `replay --snapshot` for
 * its recording (app/snapshot.c); `replay` itself runs the trace as a
 * scenario (app/replay.c).
 *
 * Trace stream N is a device stream made on first use (0 included). An
 * allocation that finds no memory is counted and its later free skipped,
 * as replay does. Allocations the trace leaves live stay allocated: the
 * caller sees the end state, and destroying the allocator returns them. */
#ifndef VB_TRACE_DRIVE_H
#define VB_TRACE_DRIVE_H

#include <stdint.h>

#include "allocators/allocator.h"
#include "base/device.h"
#include "trace.h"

/* What a driver sees; any hook may be NULL. `stream` is the trace's id. */
typedef struct vb_drive_hooks {
    void *context;
    /* Before each allocation is asked of the allocator. */
    void (*before_alloc)(void *context, uint64_t size, uint32_t stream);
    /* After an allocation got `addr` (0 and `oom` 1: no memory). */
    void (*after_alloc)(void *context, vb_addr addr, uint64_t size, uint32_t stream, int oom);
    /* Before the block at `addr` is freed. */
    void (*before_free)(void *context, vb_addr addr, uint32_t stream);
    /* At a step marker. */
    void (*mark)(void *context, const char *name);
} vb_drive_hooks;

typedef struct vb_drive_result {
    uint64_t events;                           /* allocations and frees replayed */
    uint64_t ooms;
    uint64_t first_oom_line, first_oom_bytes;  /* line 0: no OOM */
    int stopped;                               /* 1: stopped at the first OOM */
} vb_drive_result;

/* Streams of a drive: the trace id -> device stream, made on first use. */
typedef struct vb_drive_streams {
    vb_device *device;
    vb_stream handles[VB_TRACE_MAX_STREAMS];
} vb_drive_streams;

/* Replays the trace at `path` through `allocator` on `streams->device`;
 * with `stop_at_oom`, stops at the first allocation that finds no memory.
 * A malformed trace is its reader's error (VB_ERR_INVALID, "PATH:LINE"). */
vb_status vb_drive_trace(const char *path, vb_allocator *allocator, vb_drive_streams *streams, int stop_at_oom,
                         const vb_drive_hooks *hooks, vb_drive_result *out);

/* Destroys the streams a drive made (call after the allocator is gone). */
void vb_drive_streams_close(vb_drive_streams *streams);

#endif
