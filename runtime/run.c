/* vrambench — a run: the context one scenario executes in, on one device
 * with one allocator. It records each malloc/free latency and a memory
 * sample at every named step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"

struct vb_run {
    vb_device *device;
    vb_allocator *allocator;
    vb_stream stream;
    const char *parameter;
    int sampling;
    vb_timeline_sample *timeline;
    size_t timeline_count, timeline_capacity;
    vb_run_counter *counters;
    size_t counter_count, counter_capacity;
    vb_samples malloc_ns, free_ns;
    vb_run_capture capture;            /* segment capture: off, every peak, counting, at one call */
    uint64_t malloc_calls;             /* vb_run_malloc calls so far */
    uint64_t fingerprint;              /* a hash of those calls and what they returned */
    uint64_t peak_call;                /* VB_CAPTURE_COUNT: the call of the last snapshot due (0: none) ... */
    uint64_t peak_fingerprint;         /* ... and the fingerprint then; VB_CAPTURE_AT: the call and the
                                        * fingerprint expected there */
    int captured_at;                   /* VB_CAPTURE_AT: the snapshot was taken there and matched */
    void (*captured)(void *context, vb_run *run); /* called after it (vb_run_on_capture) */
    void *captured_context;
    vb_block_info *peak_blocks;        /* the last segment snapshot */
    size_t peak_block_count, peak_block_capacity;
    vb_block_info *scratch_blocks;     /* the snapshot being taken */
    size_t scratch_count, scratch_capacity;
    int scratch_failed;
    uint64_t overhead_ns;             /* step samples and snapshots */
    vb_run_peaks held_peaks;   /* the highest peaks of windows closed by vb_run_reset_peaks */
    uint32_t latency_every;            /* record one call in this many; 0 = none */
    uint32_t malloc_countdown, free_countdown; /* calls left until the next recorded one */
    uint32_t jitter;                   /* LCG state for the sampling stride */
    vb_stream *extra_streams;          /* vb_run_extra_stream's, by index - 1; NULL until made */
    size_t extra_stream_count;
    uint64_t first_oom_bytes;          /* the size of the first vb_run_malloc that found no memory; 0: none */
    vb_run **peers;                    /* vb_run_peer's, by ordinal; NULL until made */
    int peer_capacity;
    int owns_device;                   /* a peer run: destroying it destroys its allocator and device */
};

vb_status vb_run_create(vb_device *dev, vb_allocator *allocator, const char *parameter, vb_run **out)
{
    vb_run *run = calloc(1, sizeof *run);
    if (!run) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    vb_status status = dev->ops->stream_create(dev, &run->stream);
    if (status != VB_OK) {
        free(run);
        return status;
    }
    run->device = dev;
    run->allocator = allocator;
    run->parameter = parameter;
    run->sampling = 1;
    run->latency_every = 1;
    run->jitter = 1;
    *out = run;
    return VB_OK;
}

void vb_run_destroy(vb_run *run)
{
    if (!run) return;
    for (int i = 0; i < run->peer_capacity; i++) vb_run_destroy(run->peers[i]);
    free(run->peers);
    run->device->ops->stream_synchronize(run->device, run->stream);
    run->device->ops->stream_destroy(run->device, run->stream);
    for (size_t i = 0; i < run->extra_stream_count; i++)
        if (run->extra_streams[i]) {
            run->device->ops->stream_synchronize(run->device, run->extra_streams[i]);
            run->device->ops->stream_destroy(run->device, run->extra_streams[i]);
        }
    free(run->extra_streams);
    free(run->timeline);
    free(run->counters);
    free(run->peak_blocks);
    free(run->scratch_blocks);
    vb_samples_free(&run->malloc_ns);
    vb_samples_free(&run->free_ns);
    if (run->owns_device) {
        vb_allocator_destroy(run->allocator);
        vb_device_close(run->device);
    }
    free(run);
}

void vb_run_reset(vb_run *run)
{
    run->timeline_count = 0;
    run->counter_count = 0;
    vb_samples_reset(&run->malloc_ns);
    vb_samples_reset(&run->free_ns);
    run->peak_block_count = 0;
    if (run->capture == VB_CAPTURE_COUNT) run->peak_call = 0;
    memset(&run->held_peaks, 0, sizeof run->held_peaks);
    run->first_oom_bytes = 0;
}

void vb_run_set_sampling(vb_run *run, int enabled)
{
    run->sampling = enabled;
}

const vb_timeline_sample *vb_run_timeline(const vb_run *run, size_t *count)
{
    *count = run->timeline_count;
    return run->timeline;
}

const vb_run_counter *vb_run_counters(const vb_run *run, size_t *count)
{
    *count = run->counter_count;
    return run->counters;
}

vb_samples *vb_run_malloc_ns(vb_run *run) { return &run->malloc_ns; }
vb_samples *vb_run_free_ns(vb_run *run) { return &run->free_ns; }
vb_device *vb_run_device(vb_run *run) { return run->device; }

vb_status vb_run_extra_stream(vb_run *run, size_t index, vb_stream *out)
{
    if (index == 0) {
        *out = run->stream;
        return VB_OK;
    }
    if (index > run->extra_stream_count) {
        vb_stream *streams = realloc(run->extra_streams, index * sizeof *streams);
        if (!streams) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
        for (size_t i = run->extra_stream_count; i < index; i++) streams[i] = NULL;
        run->extra_streams = streams;
        run->extra_stream_count = index;
    }
    if (!run->extra_streams[index - 1]) {
        vb_status status = run->device->ops->stream_create(run->device, &run->extra_streams[index - 1]);
        if (status != VB_OK) return status;
    }
    *out = run->extra_streams[index - 1];
    return VB_OK;
}
/* The run's device's view of its machine. */
static vb_device_info device_info(vb_run *run)
{
    vb_device_info info;
    run->device->ops->info(run->device, &info);
    return info;
}

int vb_run_device_count(vb_run *run)
{
    return device_info(run).device_count;
}

int vb_run_ordinal(vb_run *run)
{
    return device_info(run).ordinal;
}

vb_status vb_run_peer(vb_run *run, int ordinal, vb_run **out)
{
    vb_device_info info = device_info(run);
    if (ordinal < 0 || ordinal >= info.device_count || ordinal == info.ordinal)
        return vb_error(VB_ERR_INVALID, "run: device %d is no other device of a machine of %d (the run's is %d)",
                        ordinal, info.device_count, info.ordinal);
    if (ordinal >= run->peer_capacity) {
        vb_run **peers = realloc(run->peers, (size_t)info.device_count * sizeof *peers);
        if (!peers) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
        for (int i = run->peer_capacity; i < info.device_count; i++) peers[i] = NULL;
        run->peers = peers;
        run->peer_capacity = info.device_count;
    }
    if (run->peers[ordinal]) {
        *out = run->peers[ordinal];
        return VB_OK;
    }
    vb_device *dev = NULL;
    vb_allocator *allocator = NULL;
    vb_run *peer = NULL;
    vb_status status = vb_device_open_peer(run->device, ordinal, &dev);
    if (status == VB_OK) status = vb_allocator_create_like(run->allocator, dev, &allocator);
    if (status == VB_OK) status = vb_run_create(dev, allocator, run->parameter, &peer);
    if (status != VB_OK) {
        vb_allocator_destroy(allocator);
        vb_device_close(dev);
        return status;
    }
    peer->owns_device = 1;
    peer->sampling = 0;
    peer->latency_every = 0;
    run->peers[ordinal] = peer;
    *out = peer;
    return VB_OK;
}

vb_status vb_run_stream_wait(vb_run *waiter_run, vb_stream waiter, vb_run *run, vb_stream stream)
{
    vb_device *dev = run->device, *waiter_dev = waiter_run->device;
    vb_event event = NULL;
    vb_status status = dev->ops->event_create(dev, &event);
    if (status != VB_OK) return status;
    status = dev->ops->event_record(dev, event, stream);
    if (status == VB_OK) status = waiter_dev->ops->stream_wait_event(waiter_dev, waiter, event);
    dev->ops->event_destroy(dev, event); /* CUDA keeps it until the wait is done */
    return status;
}

vb_allocator *vb_run_allocator(vb_run *run) { return run->allocator; }
vb_stream vb_run_stream(vb_run *run) { return run->stream; }
int vb_run_is_sim(vb_run *run) { return vb_device_is_sim(run->device); }
const char *vb_run_parameter(vb_run *run) { return run->parameter; }

void vb_run_set_segment_capture(vb_run *run, int enabled)
{
    run->capture = enabled ? VB_CAPTURE_EVERY_PEAK : VB_CAPTURE_OFF;
}

void vb_run_count_peak_calls(vb_run *run)
{
    run->capture = VB_CAPTURE_COUNT;
    run->peak_call = 0;
}

uint64_t vb_run_last_peak_call(const vb_run *run, uint64_t *fingerprint)
{
    *fingerprint = run->peak_fingerprint;
    return run->capture == VB_CAPTURE_COUNT ? run->peak_call : 0;
}

void vb_run_capture_at_call(vb_run *run, uint64_t call, uint64_t fingerprint)
{
    run->capture = VB_CAPTURE_AT;
    run->peak_call = call;
    run->peak_fingerprint = fingerprint;
    run->captured_at = 0;
}

void vb_run_on_capture(vb_run *run, void (*taken)(void *context, vb_run *run), void *context)
{
    run->captured = taken;
    run->captured_context = context;
}

int vb_run_captured_at_call(const vb_run *run)
{
    return run->capture == VB_CAPTURE_AT && run->captured_at;
}

const vb_block_info *vb_run_segments_at_peak(const vb_run *run, size_t *count)
{
    *count = run->peak_block_count;
    return run->peak_block_count ? run->peak_blocks : NULL;
}

int vb_run_segments_supported(const vb_run *run)
{
    return run->allocator->ops->segments != NULL;
}

uint64_t vb_run_overhead_ns(const vb_run *run)
{
    return run->overhead_ns;
}

void vb_run_add_overhead_ns(vb_run *run, uint64_t ns)
{
    run->overhead_ns += ns;
}

/* Segment visitor: appends one block to the scratch snapshot. */
static void collect_block(void *context, const vb_block_info *block)
{
    vb_run *run = context;
    if (run->scratch_failed) return;
    if (run->scratch_count == run->scratch_capacity) {
        size_t capacity = run->scratch_capacity ? run->scratch_capacity * 2 : 64;
        vb_block_info *blocks = realloc(run->scratch_blocks, capacity * sizeof *blocks);
        if (!blocks) {
            run->scratch_failed = 1;
            return;
        }
        run->scratch_blocks = blocks;
        run->scratch_capacity = capacity;
    }
    run->scratch_blocks[run->scratch_count++] = *block;
}

/* Snapshots the allocator's segments as the new "at peak" map. The walk goes
 * into scratch first, so a host OOM midway keeps the previous whole map. */
static vb_status capture_segments(vb_run *run)
{
    uint64_t start = vb_now_ns();
    run->scratch_count = 0;
    run->scratch_failed = 0;
    run->allocator->ops->segments(run->allocator->state, collect_block, run);
    vb_status status = VB_OK;
    if (run->scratch_failed) {
        status = vb_error(VB_ERR_HOST_OOM, "out of host memory");
    } else {
        vb_block_info *swap_blocks = run->peak_blocks;
        size_t swap_capacity = run->peak_block_capacity;
        run->peak_blocks = run->scratch_blocks;
        run->peak_block_capacity = run->scratch_capacity;
        run->peak_block_count = run->scratch_count;
        run->scratch_blocks = swap_blocks;
        run->scratch_capacity = swap_capacity;
    }
    run->overhead_ns += vb_now_ns() - start;
    return status;
}

void vb_run_set_latency_sampling(vb_run *run, uint32_t every)
{
    run->latency_every = every;
    run->malloc_countdown = run->free_countdown = 0;
}

/* A countdown that reached 1: 1 if this call's latency is to be recorded,
 * with the countdown drawn again (every call when latency_every is 1, else
 * one call after a stride drawn from [every/2, every*3/2)); 0 when no call
 * is (latency_every 0: the countdown starts over from its largest value).
 * Out of line: the calls in between only count down (take_latency). */
static __attribute__((noinline)) int draw_latency(vb_run *run, uint32_t *countdown)
{
    if (run->latency_every <= 1) {
        *countdown = run->latency_every == 1 ? 0 : UINT32_MAX;
        return run->latency_every == 1;
    }
    run->jitter = run->jitter * 1664525u + 1013904223u;
    *countdown = run->latency_every / 2 + (run->jitter >> 8) % run->latency_every;
    return 1;
}

/* 1 if this call's latency is to be recorded. */
static inline int take_latency(vb_run *run, uint32_t *countdown)
{
    if (*countdown > 1) {
        (*countdown)--;
        return 0;
    }
    return draw_latency(run, countdown);
}

/* After a vb_run_malloc that returned `status` with `addr`: counts the call,
 * folds it into the fingerprint and, when the call raised the reserved peak
 * (`raised`), does what the capture mode says: a snapshot now (every peak),
 * a note of the call (counting), or a snapshot if this is the call named
 * and the calls so far match those of the counting run (at one call). */
static vb_status after_malloc(vb_run *run, vb_status status, vb_addr addr, uint64_t size, int raised)
{
    run->malloc_calls++;
    run->fingerprint = (run->fingerprint ^ addr ^ (size << 1) ^ (uint64_t)status ^
                        run->allocator->seen_reserved_peak) * 0x100000001b3ull + run->malloc_calls;
    if (!raised) return status;
    switch (run->capture) {
    case VB_CAPTURE_EVERY_PEAK: return capture_segments(run);
    case VB_CAPTURE_COUNT:
        run->peak_call = run->malloc_calls;
        run->peak_fingerprint = run->fingerprint;
        return status;
    case VB_CAPTURE_AT:
        if (run->malloc_calls != run->peak_call || run->fingerprint != run->peak_fingerprint) return status;
        status = capture_segments(run);
        run->captured_at = status == VB_OK;
        if (run->captured_at && run->captured) run->captured(run->captured_context, run);
        return status;
    case VB_CAPTURE_OFF: break;
    }
    return status;
}

/* A malloc whose latency is recorded; *recorded 0 when host memory ran
 * out for the sample. Out of line, as draw_latency is: kept in
 * vb_run_malloc_keyed, its clock reads and sample made the compiler save
 * and restore more registers on every call (docs/bench.md, "Replay
 * speed"). */
static __attribute__((noinline)) vb_status timed_malloc(vb_run *run, uint64_t size, vb_stream stream, vb_addr *out,
                                                        uint64_t *key, int *recorded)
{
    uint64_t start = vb_now_ns();
    vb_status status = vb_malloc_keyed(run->allocator, size, stream, out, key);
    *recorded = vb_samples_add(&run->malloc_ns, (double)(vb_now_ns() - start)) == 0;
    return status;
}

vb_status vb_run_malloc_keyed(vb_run *run, uint64_t size, vb_stream stream, vb_addr *out, uint64_t *key)
{
    uint64_t seen_peak = run->allocator->seen_reserved_peak;
    vb_status status;
    if (take_latency(run, &run->malloc_countdown)) {
        int recorded = 0;
        status = timed_malloc(run, size, stream, out, key, &recorded);
        if (!recorded) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    } else {
        status = vb_malloc_keyed(run->allocator, size, stream, out, key);
    }
    if (status == VB_ERR_OOM && !run->first_oom_bytes) run->first_oom_bytes = size;
    if (status == VB_OK && run->sampling && run->allocator->pool_count) {
        /* Pool memory is not counted per call: its peak is read here, off
         * the timed path, so that the moment of the peak is known. */
        uint64_t start = vb_now_ns();
        vb_allocator_note_peak(run->allocator);
        run->overhead_ns += vb_now_ns() - start;
    }
    /* vb_malloc raises seen_reserved_peak exactly when this call raised the
     * reserved peak: the cheap test that keeps the walk off the hot path. A
     * peak below one of a window the scenario already closed is no peak of
     * the run. */
    int raised = status == VB_OK && run->allocator->ops->segments &&
                 run->allocator->seen_reserved_peak > seen_peak &&
                 run->allocator->seen_reserved_peak > run->held_peaks.reserved;
    return after_malloc(run, status, status == VB_OK ? *out : 0, size, raised);
}

vb_status vb_run_malloc(vb_run *run, uint64_t size, vb_stream stream, vb_addr *out)
{
    return vb_run_malloc_keyed(run, size, stream, out, NULL);
}

uint64_t vb_run_first_oom_bytes(const vb_run *run)
{
    return run->first_oom_bytes;
}

/* A free by address (key 0) or by key whose latency is recorded. Out of
 * line, as timed_malloc is. */
static __attribute__((noinline)) vb_status timed_free(vb_run *run, vb_addr addr, uint64_t key)
{
    uint64_t start = vb_now_ns();
    vb_status status = key ? vb_free_keyed(run->allocator, key) : vb_free(run->allocator, addr);
    if (vb_samples_add(&run->free_ns, (double)(vb_now_ns() - start)) != 0)
        return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    return status;
}

/* A free by address (key 0) or by key, its latency recorded when picked. */
static vb_status run_free(vb_run *run, vb_addr addr, uint64_t key)
{
    if (take_latency(run, &run->free_countdown)) return timed_free(run, addr, key);
    return key ? vb_free_keyed(run->allocator, key) : vb_free(run->allocator, addr);
}

vb_status vb_run_free(vb_run *run, vb_addr addr)
{
    return run_free(run, addr, 0);
}

vb_status vb_run_free_keyed(vb_run *run, uint64_t key)
{
    return key ? run_free(run, 0, key) : VB_OK;
}

vb_status vb_run_empty_cache(vb_run *run)
{
    return vb_empty_cache(run->allocator);
}

/* Makes room for one more timeline sample; 0, or -1 when host memory runs out. */
static int grow_timeline(vb_run *run)
{
    if (run->timeline_count < run->timeline_capacity) return 0;
    size_t capacity = run->timeline_capacity ? run->timeline_capacity * 2 : 32;
    vb_timeline_sample *timeline = realloc(run->timeline, capacity * sizeof *timeline);
    if (!timeline) return -1;
    run->timeline = timeline;
    run->timeline_capacity = capacity;
    return 0;
}

vb_status vb_run_insert_sample(vb_run *run, size_t position, const vb_timeline_sample *sample)
{
    if (!run->sampling) return VB_OK;
    if (position > run->timeline_count) position = run->timeline_count;
    if (grow_timeline(run) != 0) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    memmove(&run->timeline[position + 1], &run->timeline[position],
            (run->timeline_count - position) * sizeof *run->timeline);
    run->timeline[position] = *sample;
    run->timeline_count++;
    return VB_OK;
}

vb_status vb_run_step(vb_run *run, const char *name)
{
    if (!run->sampling) return VB_OK;
    uint64_t start = vb_now_ns();
    if (grow_timeline(run) != 0) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    vb_alloc_stats stats;
    vb_allocator_stats(run->allocator, &stats);
    vb_timeline_sample *sample = &run->timeline[run->timeline_count++];
    snprintf(sample->step, sizeof sample->step, "%s", name);
    sample->requested = stats.requested_bytes;
    sample->allocated = stats.allocated_bytes;
    sample->reserved = stats.reserved_bytes;
    sample->driver_used = vb_device_used_bytes(run->device);
    run->overhead_ns += vb_now_ns() - start;
    return VB_OK;
}

/* Sets counter `name` to `value`, `whole` its exact whole value or 0. */
static vb_status set_counter(vb_run *run, const char *name, double value, uint64_t whole)
{
    for (size_t i = 0; i < run->counter_count; i++)
        if (strcmp(run->counters[i].name, name) == 0) {
            run->counters[i].value = value;
            run->counters[i].whole = whole;
            return VB_OK;
        }
    if (run->counter_count == run->counter_capacity) {
        size_t capacity = run->counter_capacity ? run->counter_capacity * 2 : 8;
        vb_run_counter *counters = realloc(run->counters, capacity * sizeof *counters);
        if (!counters) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
        run->counters = counters;
        run->counter_capacity = capacity;
    }
    vb_run_counter *counter = &run->counters[run->counter_count++];
    snprintf(counter->name, sizeof counter->name, "%s", name);
    counter->value = value;
    counter->whole = whole;
    return VB_OK;
}

vb_status vb_run_set_counter(vb_run *run, const char *name, double value)
{
    return set_counter(run, name, value, 0);
}

vb_status vb_run_set_counter_whole(vb_run *run, const char *name, uint64_t value)
{
    return set_counter(run, name, (double)value, value);
}

/* The allocator's peaks of the current window (since its last peak reset). */
static vb_run_peaks window_peaks(vb_run *run)
{
    vb_alloc_stats stats;
    vb_allocator_stats(run->allocator, &stats);
    vb_run_peaks peaks = {stats.requested_bytes_peak, stats.allocated_bytes_peak, stats.reserved_bytes_peak,
                          run->allocator->external_frag_at_peak};
    return peaks;
}

/* Folds `window` into `held`: each peak is the larger, and the fragmentation
 * goes with whichever window had the higher reserved peak. */
static void fold_peaks(vb_run_peaks *held, const vb_run_peaks *window)
{
    if (window->requested > held->requested) held->requested = window->requested;
    if (window->allocated > held->allocated) held->allocated = window->allocated;
    if (window->reserved > held->reserved) {
        held->reserved = window->reserved;
        held->external_frag_at_peak = window->external_frag_at_peak;
    }
}

void vb_run_reset_peaks(vb_run *run)
{
    vb_run_peaks window = window_peaks(run);
    fold_peaks(&run->held_peaks, &window);
    vb_allocator_reset_peaks(run->allocator);
}

void vb_run_get_peaks(vb_run *run, vb_run_peaks *out)
{
    vb_run_peaks window = window_peaks(run);
    *out = run->held_peaks;
    fold_peaks(out, &window);
}
