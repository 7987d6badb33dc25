/* vrambench — the one loop that drives a trace through an allocator. Every
 * replay of a trace runs it: `replay` through its run (timed calls,
 * samples, counters; app/replay.c), and straight through the allocator,
 * with no samples, timing or segment maps, `replay --snapshot`'s recording
 * (app/snapshot.c) and `tune`'s many capacity probes (app/tune.c). What a
 * caller adds, it adds through hooks.
 *
 * The events come from a trace being read (streamed, any length, in
 * batches of a few thousand events read ahead of the calls; through a run,
 * the reading is counted as the run's overhead, not timed) or from one
 * read once into memory (vb_drive_load). Trace stream N is a device
 * stream made on first use (0 included; through a run, the run's stream N).
 * An allocation that finds no memory is counted and its later free
 * skipped. Allocations the trace leaves live stay allocated: the caller
 * sees the end state (destroying the allocator returns them; a replay
 * frees them itself). */
#ifndef VB_TRACE_DRIVE_H
#define VB_TRACE_DRIVE_H

#include <stdint.h>

#include "allocators/allocator.h"
#include "base/device.h"
#include "runtime/run.h"
#include "trace.h"

/* A trace's allocations and frees read once into memory, for drives
 * repeated many times (tune's bisection): no parsing, no id lookups. */
typedef struct vb_drive_event {
    uint64_t size;       /* ALLOC: bytes asked for */
    uint64_t line;       /* the trace line */
    uint32_t slot;       /* the allocation's number, 0, 1, ... (a FREE names its allocation's) */
    uint32_t stream;
    uint32_t kind;       /* a vb_trace_kind: ALLOC or FREE (a batch the drive reads holds MARK and FAILED_ALLOC too) */
} vb_drive_event;

typedef struct vb_drive_events {
    vb_drive_event *items;
    size_t count;
    uint32_t slots;      /* allocations */
    /* What the trace asks of any allocator: the most bytes it holds live
     * at once (no capacity below it fits) and its largest allocation. */
    uint64_t peak_live_bytes, largest_bytes;
    size_t through_last_alloc; /* the events up to and with the last allocation */
} vb_drive_events;

/* Reads the trace at `path` into `out` (markers and recorded failures are
 * left out), its demand counted. A malformed trace is its reader's error
 * (VB_ERR_INVALID, "PATH:LINE"). */
vb_status vb_drive_load(const char *path, vb_drive_events *out);
void vb_drive_events_free(vb_drive_events *events);

/* Where a drive's events come from: one of the two. */
typedef struct vb_drive_source {
    vb_trace *trace;               /* a trace being read (the caller opens and closes it) */
    const vb_drive_events *events; /* or one read into memory */
} vb_drive_source;

/* Where a drive's allocations go. */
typedef struct vb_drive_target {
    vb_run *run;                 /* through the run (vb_run_malloc, vb_run_free: latencies, peaks), or */
    vb_allocator *allocator;     /* with no run, straight (vb_malloc, vb_free) */
    vb_device *device;           /* with no run, the device its streams are made on */
    vb_stream streams[VB_TRACE_MAX_STREAMS]; /* trace stream id -> device stream, fetched on first use */
} vb_drive_target;

/* Destroys the streams a drive made on target->device (a run keeps its
 * own); call after the allocator is gone. */
void vb_drive_target_close(vb_drive_target *target);

typedef struct vb_drive_result {
    uint64_t events;             /* allocations, frees and recorded failures read */
    uint64_t recorded_failures;  /* allocations that failed in the recorded program: not replayed */
    uint64_t ooms;
    uint64_t first_oom_line, first_oom_bytes;  /* line 0: no OOM */
    uint64_t consumed_bytes;     /* a trace being read: its uncompressed bytes through the last event driven */
    int stopped;                 /* 1: stopped at the first OOM */
} vb_drive_result;

/* What a drive's caller sees and adds; any hook may be NULL. `stream` is
 * the trace's id. A hook that returns an error ends the drive with it. */
typedef struct vb_drive_hooks {
    void *context;
    /* Before each allocation is asked of the allocator. */
    void (*before_alloc)(void *context, uint64_t size, uint32_t stream);
    /* After an allocation got `addr` (0 and `oom` 1: no memory). */
    void (*after_alloc)(void *context, vb_addr addr, uint64_t size, uint32_t stream, int oom);
    /* Before the block at `addr` is freed. */
    void (*before_free)(void *context, vb_addr addr, uint32_t stream);
    /* At a step marker. */
    vb_status (*mark)(void *context, const char *name);
    /* After every event, a marker included, with the result so far; with
     * after_event_from, only after the events read up to or past the
     * bytes it points to (the hook moves it on): a call per event costs a
     * long replay a few percent of its time. */
    vb_status (*after_event)(void *context, const vb_drive_result *so_far);
    const uint64_t *after_event_from;
    /* After the block at `addr` was freed (GPU-progress modes, app/fit.c). */
    void (*after_free)(void *context, vb_addr addr, uint32_t stream);
} vb_drive_hooks;

/* Drives the events of `source` through `target` to their end; with
 * `stop_at_oom`, stops at the first allocation that finds no memory.
 * Errors of a trace being read name its file and the event's line
 * ("PATH:LINE: ..."); a malformed trace is its reader's error
 * (VB_ERR_INVALID), after the events before the bad line are driven. At
 * the end a trace's live allocations are tagged with their block keys
 * (vb_trace_each_live: a replay frees them by these). A drive that stops
 * early has read its trace up to a batch past the last event it drove:
 * the reader's live allocations are then not the allocator's (those read
 * but not driven are tagged 0). */
vb_status vb_drive(const vb_drive_source *source, vb_drive_target *target, const vb_drive_hooks *hooks,
                   int stop_at_oom, vb_drive_result *out);

#endif
