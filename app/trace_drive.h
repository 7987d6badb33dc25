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

/* A trace's allocations and frees read once into memory, for drives
 * repeated many times (tune's bisection): no parsing, no id lookups. */
typedef struct vb_drive_event {
    uint64_t size;       /* ALLOC: bytes asked for */
    uint64_t line;       /* the trace line */
    uint32_t slot;       /* the allocation's number, 0, 1, ... (a FREE names its allocation's) */
    uint32_t stream;
    int is_alloc;
} vb_drive_event;

typedef struct vb_drive_events {
    vb_drive_event *items;
    size_t count;
    uint32_t slots;      /* allocations */
} vb_drive_events;

/* Reads the trace at `path` into `out` (markers and recorded failures are
 * left out). The reader's errors as vb_drive_trace's. */
vb_status vb_drive_load(const char *path, vb_drive_events *out);
void vb_drive_events_free(vb_drive_events *events);

/* vb_drive_trace over loaded events (no hooks). */
vb_status vb_drive_events_run(const vb_drive_events *events, vb_allocator *allocator, vb_drive_streams *streams,
                              int stop_at_oom, vb_drive_result *out);

#endif
