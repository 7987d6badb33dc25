/* vrambench — `replay`: a recorded allocation trace, replayed with real calls
 * into the allocator.
 *
 * The run's parameter is the trace's path (vrambench's own format or an RMM
 * log, plain or gzip; app/trace.h, docs/trace-format.md). The trace is
 * streamed, never loaded whole, so traces of any length replay in constant
 * memory beyond the live allocations.
 *
 * The trace is driven through the run by app/trace_drive.h's driver,
 * which reads it in batches and counts the reading as the run's overhead:
 * the timed figures are the allocator's calls and the drive, not the
 * parsing of the text, which costs every allocator the same. Trace
 * stream N is the run's stream N (vb_run_extra_stream: 0 is the run's own
 * stream, the others are created when first used and kept with the run, so
 * they stay the same streams from one iteration to the next). An
 * allocation the allocator cannot serve (out of memory) is counted by the
 * allocator (its `ooms`) and the trace goes on; that id's later free is
 * skipped. Memory is sampled at the
 * start, at the trace's step markers, at every 1/200 of the file (so a
 * timeline has at most a couple of hundred points besides the markers), at
 * the moment reserved memory peaked ("peak reserved") and at the end.
 *
 * Counters: events (allocations, frees and recorded failed allocations),
 * first_oom_line and first_oom_bytes (only when an allocation ran out of
 * memory: the trace line of the first that did, and its size),
 * live_at_end (allocations the trace never frees; the replay frees them
 * after the last sample), recorded_failures (allocations that failed in the
 * recorded program, RMM "allocate failure": not replayed).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "replay.h"
#include "text.h"
#include "trace.h"
#include "trace_drive.h"

/* Regular samples per trace (besides markers and the final one). */
#define INTERVAL_SAMPLES 200
/* Latency of about one malloc/free in this many is recorded (at least); a
 * replay is mostly allocator calls, and two clock reads cost about as much
 * as a whole cached malloc (tens of ns each under a hypervisor), so one in
 * 16 keeps them to a few percent of the replay. Long traces sample more
 * sparsely, about 64 K latencies per list, plenty for a p99. */
#define LATENCY_SAMPLE_EVERY 16
#define LATENCY_SAMPLES_WANTED (64u << 10)
/* Bytes per event of a compact trace line ("a 123456 4096\n"), to guess the
 * number of events from the file's size. */
#define BYTES_PER_EVENT_GUESS 16
/* A progress line goes to a terminal once a replay has run this long. */
#define PROGRESS_AFTER_NS 2000000000ull

/* Its steps (docs/results-json.md, "names"). */
enum { START, EVENT, PEAK, END };
static const vb_name steps[] = {
    [START] = {"start", "start of trace"},
    [EVENT] = {"event", "event %s"},
    [PEAK] = {"peak", "peak reserved"},
    [END] = {"end", "end of trace"},
    {NULL, NULL},
};

/* Its counters. */
enum { EVENTS, LIVE_AT_END, RECORDED_FAILURES, FIRST_OOM_LINE, FIRST_OOM_BYTES };
static const char *const counters[] = {
    [EVENTS] = "events",
    [LIVE_AT_END] = "live_at_end",
    [RECORDED_FAILURES] = "recorded_failures",
    [FIRST_OOM_LINE] = "first_oom_line",   /* where it first ran out: trace line ... */
    [FIRST_OOM_BYTES] = "first_oom_bytes", /* ... and bytes asked (only when it ran out) */
    NULL,
};

typedef struct replay {
    vb_run *run;
    vb_allocator *allocator;    /* the run's (one for the whole run), read after every allocation */
    vb_trace *trace;
    vb_drive_target target;     /* the run, its streams fetched on first use */
    vb_drive_result drive;      /* events, recorded failures, the first OOM */
    uint64_t next_sample_bytes; /* consumed bytes at which the next regular sample is due */
    unsigned samples_taken;
    uint64_t started_ns;
    int progress_shown;
    /* The moment reserved memory peaked, put into the timeline at the end
     * (only then is it known to be the peak). */
    uint64_t peak_reserved;
    vb_timeline_sample peak_sample;
    size_t peak_position;
} replay;

/* Notes the allocator's state now, when its reserved peak has just risen,
 * and where in the timeline that falls. */
static void capture_peak(replay *state, vb_allocator *allocator)
{
    vb_alloc_stats stats;
    vb_allocator_counts(allocator, &stats);
    size_t count;
    vb_run_timeline(state->run, &count);
    state->peak_reserved = allocator->seen_reserved_peak;
    state->peak_position = count;
    state->peak_sample = (vb_timeline_sample){
        .requested = stats.requested_bytes,
        .allocated = stats.allocated_bytes,
        .reserved = stats.reserved_bytes,
        .driver_used = vb_device_used_bytes(vb_run_device(state->run)),
    };
}

/* After each allocation: has the reserved peak just risen? (vb_run_malloc
 * keeps seen_reserved_peak: one comparison per allocation.) */
static void on_after_alloc(void *context, vb_addr addr, uint64_t size, uint32_t stream, int oom)
{
    (void)addr, (void)size, (void)stream, (void)oom;
    replay *state = context;
    if (state->allocator->seen_reserved_peak > state->peak_reserved) capture_peak(state, state->allocator);
}

/* A step marker of the trace is a step of the run. */
static vb_status on_mark(void *context, const char *name)
{
    replay *state = context;
    return vb_run_step(state->run, name);
}

/* Shows how far the replay is on a terminal, for long traces only. */
static void show_progress(replay *state, uint64_t events)
{
    if (!isatty(STDERR_FILENO) || vb_now_ns() - state->started_ns < PROGRESS_AFTER_NS) return;
    char path[256]; /* the file's name on one line, as vb_cli_error shows it */
    snprintf(path, sizeof path, "%s", vb_trace_path(state->trace));
    vb_text_sanitize(path, 1);
    fprintf(stderr, "\rreplay: %s: %u%% (%llu events)\033[K", path,
            state->samples_taken * 100 / INTERVAL_SAMPLES, (unsigned long long)events);
    state->progress_shown = 1;
}

/* Where regular sample `index` (1-based) falls in the file's uncompressed
 * bytes, or UINT64_MAX past the last one or when the size is unknown. */
static uint64_t sample_mark(const replay *state, unsigned index)
{
    uint64_t total = vb_trace_total_bytes(state->trace);
    if (total == 0 || index >= INTERVAL_SAMPLES) return UINT64_MAX;
    return total / INTERVAL_SAMPLES * index + total % INTERVAL_SAMPLES * index / INTERVAL_SAMPLES;
}

/* Takes the regular sample that is due, `consumed` bytes into the file; a
 * long line that jumped over several marks gives one sample, not several
 * at the same point. */
static vb_status take_regular_sample(replay *state, uint64_t consumed, uint64_t events_so_far)
{
    while (consumed >= sample_mark(state, state->samples_taken + 1)) state->samples_taken++;
    state->next_sample_bytes = sample_mark(state, state->samples_taken + 1);
    char name[64];
    char events[24];
    snprintf(events, sizeof events, "%llu", (unsigned long long)events_so_far);
    snprintf(name, sizeof name, steps[EVENT].text, events);
    show_progress(state, events_so_far);
    return vb_run_step(state->run, name);
}

/* After each event: the regular sample, when one is due (the drive reads
 * ahead of the events it drives: where in the file an event is, it says). */
static vb_status on_after_event(void *context, const vb_drive_result *so_far)
{
    replay *state = context;
    if (so_far->consumed_bytes < state->next_sample_bytes) return VB_OK;
    return take_regular_sample(state, so_far->consumed_bytes, so_far->events);
}

/* Frees one allocation the trace left live (its tag is its block's key,
 * 0 for one that found no memory). */
static void free_leftover(void *context, uint64_t id, uint64_t key)
{
    (void)id;
    vb_free_keyed(vb_run_allocator(context), key);
}

/* Samples the end, reports the counters and frees what the trace left live. */
static vb_status finish(replay *state, vb_status status)
{
    if (status == VB_OK && state->peak_reserved > 0) {
        /* Named here, once: the peak rises thousands of times on a long trace. */
        snprintf(state->peak_sample.step, sizeof state->peak_sample.step, "%s", steps[PEAK].text);
        status = vb_run_insert_sample(state->run, state->peak_position, &state->peak_sample);
    }
    if (status == VB_OK) status = vb_run_step(state->run, steps[END].text);
    if (status == VB_OK) status = vb_run_set_counter(state->run, counters[EVENTS], (double)state->drive.events);
    if (status == VB_OK)
        status = vb_run_set_counter(state->run, counters[LIVE_AT_END], (double)vb_trace_live_count(state->trace));
    if (status == VB_OK)
        status = vb_run_set_counter(state->run, counters[RECORDED_FAILURES], (double)state->drive.recorded_failures);
    if (status == VB_OK && state->drive.first_oom_line)
        status = vb_run_set_counter_whole(state->run, counters[FIRST_OOM_LINE], state->drive.first_oom_line);
    if (status == VB_OK && state->drive.first_oom_line)
        status = vb_run_set_counter_whole(state->run, counters[FIRST_OOM_BYTES], state->drive.first_oom_bytes);
    vb_trace_each_live(state->trace, free_leftover, state->run);
    if (state->progress_shown) fputs("\r\033[K", stderr);
    return status;
}

/* The scenario: replays the trace named by the run's parameter. */
static vb_status replay_run(vb_run *run)
{
    const char *path = vb_run_parameter(run);
    if (!path || !*path) return vb_error(VB_ERR_INVALID, "replay: no trace given (the run's parameter is its path)");
    replay *state = calloc(1, sizeof *state);
    if (!state) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    state->run = run;
    state->allocator = vb_run_allocator(run);
    state->target.run = run;
    state->started_ns = vb_now_ns();
    vb_status status = vb_trace_open(path, &state->trace);
    if (status == VB_OK) {
        uint64_t events_guess = vb_trace_total_bytes(state->trace) / BYTES_PER_EVENT_GUESS;
        uint64_t every = events_guess / LATENCY_SAMPLES_WANTED;
        vb_run_set_latency_sampling(run, (uint32_t)(every > LATENCY_SAMPLE_EVERY ? every : LATENCY_SAMPLE_EVERY));
        state->next_sample_bytes = sample_mark(state, 1);
        status = vb_run_step(run, steps[START].text);
        vb_drive_source source = {.trace = state->trace};
        vb_drive_hooks hooks = {.context = state, .after_alloc = on_after_alloc, .mark = on_mark,
                                .after_event = on_after_event, .after_event_from = &state->next_sample_bytes};
        if (status == VB_OK) status = vb_drive(&source, &state->target, &hooks, 0, &state->drive);
        status = finish(state, status);
    }
    vb_trace_close(state->trace);
    free(state);
    return status;
}

int vb_replay_step_name_taken(const char *name)
{
    if (strcmp(name, steps[START].text) == 0 || strcmp(name, steps[PEAK].text) == 0 ||
        strcmp(name, steps[END].text) == 0)
        return 1;
    /* "event %s" with the count of events so far */
    const char *event = steps[EVENT].text;
    size_t prefix = strcspn(event, "%");
    if (strncmp(name, event, prefix) != 0 || !name[prefix]) return 0;
    return strspn(name + prefix, "0123456789") == strlen(name + prefix);
}

vb_status vb_replay_check_trace(const char *path, vb_trace_first_alloc *first)
{
    vb_trace *trace = NULL;
    vb_status status = vb_trace_open(path, &trace);
    vb_trace_event event = {0};
    if (first) *first = (vb_trace_first_alloc){0, 0, 0};
    while (status == VB_OK) {
        status = vb_trace_next(trace, &event);
        if (status != VB_OK || event.kind == VB_TRACE_END) break;
        if (first && !first->bytes && event.kind == VB_TRACE_ALLOC && event.size > 0) {
            first->bytes = event.size;
            first->line = vb_trace_line(trace);
        }
        if (first) first->recorded_failures += event.kind == VB_TRACE_FAILED_ALLOC;
        if (event.kind == VB_TRACE_MARK && vb_replay_step_name_taken(event.name))
            status = vb_trace_error(trace, VB_ERR_INVALID,
                                    "marker '%s' has the name of one of the replay's own steps ('%s', '%s', '%s', "
                                    "'event N'): rename it",
                                    event.name, steps[START].text, steps[PEAK].text, steps[END].text);
    }
    vb_trace_close(trace);
    return status;
}

const vb_scenario vb_replay_scenario = {
    .name = "replay",
    .documents = "trace",
    .description = "replays an allocation trace (vbtrace or RMM log, plain or .gz) given as the run's parameter",
    .run = replay_run,
    .steps = steps,
    .counters = counters,
    .memory_pass_iterations = 1, /* a trace is one recorded run of a program, steady state included */
};
