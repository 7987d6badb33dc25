/* vrambench — a run: the context one scenario executes in, on one device
 * with one allocator (runtime/run.c). A scenario allocates through its run
 * (so latencies are recorded) and marks named steps (so memory is sampled);
 * the application's runner makes runs and reads them.
 */
#ifndef VB_RUN_H
#define VB_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "allocators/allocator.h"
#include "base/measure.h"

typedef struct vb_run vb_run;

/* One point of a run's memory timeline, taken at a named step. */
typedef struct vb_timeline_sample {
    char step[64];
    uint64_t requested;
    uint64_t allocated;
    uint64_t reserved;
    uint64_t driver_used;    /* device memory in use as the driver reports it */
} vb_timeline_sample;

/* A named extra figure a scenario reports (it lands among the counters). */
typedef struct vb_run_counter {
    char name[64];
    double value;
    uint64_t whole; /* a count or size set whole (vb_run_set_counter_whole): exact where `value`, a double,
                     * rounds it (past 2^53); else 0 */
} vb_run_counter;

/* ---- for the runner and tests: making and reading runs ---- */

/* A run on `dev` with `allocator`; it creates its own compute stream.
 * `parameter` is the scenario's optional argument (a trace path, ...) or NULL. */
vb_status vb_run_create(vb_device *dev, vb_allocator *allocator, const char *parameter, vb_run **out);
void vb_run_destroy(vb_run *run);

/* Forgets the timeline, counters, latencies and segment snapshot. */
void vb_run_reset(vb_run *run);

/* Turns timeline sampling on or off (on by default). */
void vb_run_set_sampling(vb_run *run, int enabled);

const vb_timeline_sample *vb_run_timeline(const vb_run *run, size_t *count);
const vb_run_counter *vb_run_counters(const vb_run *run, size_t *count);
/* Per-call latencies in ns of the vb_run_malloc / vb_run_free calls so far
 * (all of them, or the sampled ones). */
vb_samples *vb_run_malloc_ns(vb_run *run);
vb_samples *vb_run_free_ns(vb_run *run);

/* Segment capture (off by default): while on, each vb_run_malloc that raises
 * the allocator's reserved peak snapshots the allocator's segments(), so the
 * last snapshot is the segment map at the moment reserved memory peaked.
 * Each snapshot walks every block, so a run whose peak rises often pays
 * blocks x peaks: the runner uses the two calls below instead where the
 * device is deterministic (sim). */
void vb_run_set_segment_capture(vb_run *run, int enabled);

/* The lazy way to the same map, in two runs that make the same calls on the
 * same state: the first counts (no snapshot) and vb_run_last_peak_call
 * gives the vb_run_malloc call (1-based; 0: none) whose snapshot would have
 * been the last, with a fingerprint of every call up to it (sizes, the
 * addresses and statuses returned, the reserved peak). The second, told
 * that call and fingerprint by vb_run_capture_at_call, takes the one
 * snapshot there when its own calls so far have the same fingerprint;
 * vb_run_captured_at_call says whether it did. (app/runner.c runs the
 * second in a forked twin of the first, which leaves both on one state.) */
typedef enum vb_run_capture {
    VB_CAPTURE_OFF,
    VB_CAPTURE_EVERY_PEAK,
    VB_CAPTURE_COUNT,
    VB_CAPTURE_AT,
} vb_run_capture;
void vb_run_count_peak_calls(vb_run *run);
uint64_t vb_run_last_peak_call(const vb_run *run, uint64_t *fingerprint);
void vb_run_capture_at_call(vb_run *run, uint64_t call, uint64_t fingerprint);
/* Calls `taken(context, run)` right after that snapshot (NULL: nothing), so
 * a run made only for it can hand it on and stop there. */
void vb_run_on_capture(vb_run *run, void (*taken)(void *context, vb_run *run), void *context);
int vb_run_captured_at_call(const vb_run *run);
/* The blocks of the last snapshot in address order (NULL and 0 when none was
 * taken or the allocator cannot list its segments). */
const vb_block_info *vb_run_segments_at_peak(const vb_run *run, size_t *count);
/* 1 when the allocator can list its segments (ops->segments is set). */
int vb_run_segments_supported(const vb_run *run);
/* Host nanoseconds the run spent measuring (step samples and segment
 * snapshots) since it was created, so timings can leave them out. */
uint64_t vb_run_overhead_ns(const vb_run *run);
/* Adds `ns` of the scenario's own work to the run's overhead, to be left
 * out of its timed figures as the run's samples are (a replay's reading
 * of its trace: app/trace_drive.c). */
void vb_run_add_overhead_ns(vb_run *run, uint64_t ns);
/* The peaks of a whole run: the maxima of the allocator's peaks across every
 * vb_run_reset_peaks a scenario made (the runner reports these, not the
 * allocator's, whose peaks only cover the window since the last reset). */
typedef struct vb_run_peaks {
    uint64_t requested, allocated, reserved;
    double external_frag_at_peak;  /* taken when the highest reserved peak was */
} vb_run_peaks;

/* The run's peaks so far, the current window included. vb_run_reset forgets
 * the windows already closed. */
void vb_run_get_peaks(vb_run *run, vb_run_peaks *out);
/* The size of the run's first vb_run_malloc that found no device memory
 * (VB_ERR_OOM), 0 when none did. */
uint64_t vb_run_first_oom_bytes(const vb_run *run);

/* ---- for scenarios ---- */

vb_device *vb_run_device(vb_run *run);
vb_allocator *vb_run_allocator(vb_run *run);
/* The run's compute stream (not the default stream). */
vb_stream vb_run_stream(vb_run *run);
/* Stream `index` of the run: 0 is vb_run_stream, 1, 2, ... are more streams,
 * each created on first use and kept until the run is destroyed (so a stream
 * stays the same stream across a scenario's iterations, as the blocks an
 * allocator caches per stream expect). */
vb_status vb_run_extra_stream(vb_run *run, size_t index, vb_stream *out);
/* 1 on the simulated device (times are modelled, memory holds no data). */
int vb_run_is_sim(vb_run *run);

/* ---- the other devices of the run's machine (scenarios across devices) ---- */

/* Devices on the run's machine (its device's info.device_count). */
int vb_run_device_count(vb_run *run);

/* A run on device `ordinal` of the run's machine, another than the run's
 * own: that device opened (vb_device_open_peer), an allocator of the run's
 * strategy and configuration on it (vb_allocator_create_like, as the
 * PyTorch plug-in has one per device) and a stream of its own. Made on
 * first use, kept, and destroyed with the run (allocator and device too).
 * It samples no timeline and reports no latencies: the scenario reads its
 * statistics (vb_run_allocator) and reports them as counters. */
vb_status vb_run_peer(vb_run *run, int ordinal, vb_run **out);

/* The ordinal of the run's device on its machine. */
int vb_run_ordinal(vb_run *run);

/* Makes `waiter` (a stream of `waiter_run`'s device) wait, without the host
 * waiting, for the work queued on `stream` (of `run`'s device) so far: an
 * event recorded there and waited for (cudaStreamWaitEvent, across devices
 * too). */
vb_status vb_run_stream_wait(vb_run *waiter_run, vb_stream waiter, vb_run *run, vb_stream stream);
/* The scenario's argument, or NULL. */
const char *vb_run_parameter(vb_run *run);

/* Allocates through the allocator and records the call's latency. */
vb_status vb_run_malloc(vb_run *run, uint64_t size, vb_stream stream, vb_addr *out);
/* Frees through the allocator and records the call's latency. */
vb_status vb_run_free(vb_run *run, vb_addr addr);
/* vb_run_malloc and vb_run_free by the block's key (vb_malloc_keyed,
 * vb_free_keyed): no look-up by address, for a trace's replay. */
vb_status vb_run_malloc_keyed(vb_run *run, uint64_t size, vb_stream stream, vb_addr *out, uint64_t *key);
vb_status vb_run_free_keyed(vb_run *run, uint64_t key);
/* empty_cache through the allocator. */
vb_status vb_run_empty_cache(vb_run *run);

/* Samples the allocator's stats and the driver's used memory under `name`.
 * Free when sampling is off. */
vb_status vb_run_step(vb_run *run, const char *name);

/* Restarts the allocator's peaks (vb_allocator_reset_peaks) so a scenario can
 * measure the peak of one phase, keeping the run's overall peaks. */
void vb_run_reset_peaks(vb_run *run);

/* Puts a sample taken earlier into the timeline at `position` (0 .. the
 * current count; later samples move up one), for a scenario that knows only
 * afterwards which moment mattered (replay: when reserved memory peaked).
 * Free when sampling is off. */
vb_status vb_run_insert_sample(vb_run *run, size_t position, const vb_timeline_sample *sample);

/* Reports a named figure (replaces an earlier one of the same name). */
vb_status vb_run_set_counter(vb_run *run, const char *name, double value);
/* vb_run_set_counter for a count or a size, kept exact (`whole`) where a
 * double would round it. */
vb_status vb_run_set_counter_whole(vb_run *run, const char *name, uint64_t value);

/* Records the latency of about one vb_run_malloc / vb_run_free call in
 * `every` (1 = every call, the default; 0 = none). Calls are picked at a
 * jittered stride so that a periodic workload is not aliased. High-volume
 * scenarios (replay) use it: two clock reads per call would otherwise be a
 * third of a replay's time, and the samples would grow with the trace. */
void vb_run_set_latency_sampling(vb_run *run, uint32_t every);

#endif
