/* vrambench — the runner (see runner.h for the timing rules). */
#include "runner.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "allocators/pytorch_conf.h"
#include "base/measure.h"

/* ======================================================================== */
/* Statistics                                                               */
/* ======================================================================== */

double vb_stat_median(const double *values, size_t count)
{
    if (count < 3) return vb_mean(values, count);
    double *sorted = malloc(count * sizeof *sorted);
    if (!sorted) return vb_mean(values, count);
    memcpy(sorted, values, count * sizeof *sorted);
    vb_sort_doubles(sorted, count);
    /* Interpolating at 0.5 gives the middle value, or the mean of the two. */
    double median = vb_quantile(sorted, count, 0.5);
    free(sorted);
    return median;
}

double vb_stat_cv(const double *values, size_t count)
{
    if (count < 2) return 0.0;
    double mean = vb_mean(values, count);
    return mean == 0.0 ? 0.0 : vb_stddev(values, count) / mean;
}

double vb_repetition_counter(const vb_repetition_result *rep, const char *name, double fallback)
{
    for (size_t i = 0; i < rep->counter_count; i++)
        if (strcmp(rep->counters[i].name, name) == 0) return rep->counters[i].value;
    return fallback;
}

uint64_t vb_repetition_counter_whole(const vb_repetition_result *rep, const char *name, uint64_t fallback)
{
    for (size_t i = 0; i < rep->counter_count; i++) {
        const vb_run_counter *counter = &rep->counters[i];
        if (strcmp(counter->name, name) != 0) continue;
        if (counter->whole) return counter->whole; /* its value is that, rounded to a double */
        /* 2^64: the first double past every uint64_t */
        return counter->value >= 0 && counter->value < 18446744073709551616.0 ? (uint64_t)counter->value : fallback;
    }
    return fallback;
}

/* ======================================================================== */
/* Running                                                                  */
/* ======================================================================== */

vb_runner_options vb_runner_default_options(void)
{
    return (vb_runner_options){1, 0.1, 1000, 0};
}

/* A growable counter list (name, value), later names replacing earlier. */
typedef struct counter_list {
    vb_run_counter *items;
    size_t count, capacity;
} counter_list;

/* Sets the counter of `counter`'s name to it; -1 when host memory runs out. */
static int counter_put(counter_list *list, const vb_run_counter *counter)
{
    for (size_t i = 0; i < list->count; i++)
        if (strcmp(list->items[i].name, counter->name) == 0) {
            list->items[i] = *counter;
            return 0;
        }
    if (list->count == list->capacity) {
        size_t capacity = list->capacity ? list->capacity * 2 : 32;
        vb_run_counter *items = realloc(list->items, capacity * sizeof *items);
        if (!items) return -1;
        list->items = items;
        list->capacity = capacity;
    }
    list->items[list->count++] = *counter;
    return 0;
}

/* Sets `name` to `value` (not kept whole); -1 when host memory runs out. */
static int counter_set(counter_list *list, const char *name, double value)
{
    vb_run_counter counter = {.value = value};
    snprintf(counter.name, sizeof counter.name, "%s", name);
    return counter_put(list, &counter);
}

/* What one repetition keeps while it runs. */
typedef struct repetition_state {
    vb_device *capped;                 /* the scenario's capped device, or NULL */
    vb_allocator *allocator;
    vb_run *run;
    vb_event start, end;
    counter_list scenario_counters;    /* iteration 1's */
    vb_repetition_result kept;         /* iteration 1's timeline */
    double real_ns, cpu_ns, gpu_ns;    /* sums over iterations */
    uint64_t iterations;
} repetition_state;

/* Times one run of the scenario: real time between two device
 * synchronizations, process CPU time, and GPU time between events on the
 * run's stream. The run's own measuring (step samples, segment snapshots) is
 * left out of the host times: it is the harness's cost, not the allocator's. */
static vb_status time_iteration(vb_device *dev, const vb_scenario *scenario, repetition_state *rep)
{
    vb_stream stream = vb_run_stream(rep->run);
    vb_status status = dev->ops->device_synchronize(dev);
    if (status != VB_OK) return status;
    uint64_t overhead_before = vb_run_overhead_ns(rep->run);
    uint64_t cpu_start = vb_cpu_ns(), real_start = vb_now_ns();
    status = dev->ops->event_record(dev, rep->start, stream);
    if (status == VB_OK) status = scenario->run(rep->run);
    vb_status end_status = dev->ops->event_record(dev, rep->end, stream);
    vb_status sync_status = dev->ops->device_synchronize(dev);
    uint64_t real_end = vb_now_ns(), cpu_end = vb_cpu_ns();
    if (status == VB_OK) status = end_status;
    if (status == VB_OK) status = sync_status;
    if (status != VB_OK) return status;
    double overhead_ns = (double)(vb_run_overhead_ns(rep->run) - overhead_before);
    double real_ns = (double)(real_end - real_start) - overhead_ns;
    double cpu_ns = (double)(cpu_end - cpu_start) - overhead_ns;
    double gpu_ms = 0.0;
    status = dev->ops->event_elapsed_ms(dev, rep->start, rep->end, &gpu_ms);
    if (status != VB_OK) return status;
    rep->real_ns += real_ns > 0 ? real_ns : 0;
    rep->cpu_ns += cpu_ns > 0 ? cpu_ns : 0;
    rep->gpu_ns += gpu_ms * 1e6;
    rep->iterations++;
    return VB_OK;
}

/* Creates the repetition's fresh allocator, run and events, on a capped
 * device when the scenario asks for one. */
static vb_status repetition_open(vb_device *dev, const vb_case *c, repetition_state *rep)
{
    memset(rep, 0, sizeof *rep);
    vb_config config = vb_allocator_spec_config(c->allocator);
    vb_status status = VB_OK;
    if (c->scenario->device_cap_bytes) status = vb_device_cap_open(dev, c->scenario->device_cap_bytes, &rep->capped);
    vb_device *run_device = rep->capped ? rep->capped : dev;
    if (status == VB_OK) status = vb_allocator_create(c->allocator->name, run_device, &config, &rep->allocator);
    if (status == VB_OK) status = vb_run_create(run_device, rep->allocator, c->parameter, &rep->run);
    if (status == VB_OK) status = dev->ops->event_create(dev, &rep->start);
    if (status == VB_OK) status = dev->ops->event_create(dev, &rep->end);
    return status;
}

/* Releases what repetition_open made (any part may be missing). */
static void repetition_close(vb_device *dev, repetition_state *rep)
{
    if (rep->start) dev->ops->event_destroy(dev, rep->start);
    if (rep->end) dev->ops->event_destroy(dev, rep->end);
    vb_run_destroy(rep->run);
    vb_allocator_destroy(rep->allocator);
    vb_device_close(rep->capped);
    free(rep->scenario_counters.items);
    free(rep->kept.timeline);
    memset(rep, 0, sizeof *rep);
}

/* Keeps iteration 1's timeline as the repetition's. */
static vb_status keep_timeline(const vb_run *run, vb_repetition_result *out)
{
    size_t count;
    const vb_timeline_sample *timeline = vb_run_timeline(run, &count);
    if (count == 0) return VB_OK;
    out->timeline = malloc(count * sizeof *out->timeline);
    if (!out->timeline) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    memcpy(out->timeline, timeline, count * sizeof *out->timeline);
    out->timeline_count = count;
    return VB_OK;
}

/* Keeps the segment map at peak, numbering streams as runner.h says. */
static vb_status keep_segments(vb_run *run, vb_case_result *out)
{
    out->has_segments = vb_run_segments_supported(run);
    size_t count;
    const vb_block_info *blocks = vb_run_segments_at_peak(run, &count);
    if (count == 0) return VB_OK;
    out->segments_at_peak = malloc(count * sizeof *out->segments_at_peak);
    vb_stream *seen = malloc(count * sizeof *seen);
    if (!out->segments_at_peak || !seen) {
        free(seen);
        return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    }
    size_t seen_count = 0;
    vb_stream run_stream = vb_run_stream(run);
    for (size_t i = 0; i < count; i++) {
        int stream = 0;
        if (blocks[i].stream == run_stream) stream = 1;
        else if (blocks[i].stream) {
            size_t j = 0;
            while (j < seen_count && seen[j] != blocks[i].stream) j++;
            if (j == seen_count) seen[seen_count++] = blocks[i].stream;
            stream = (int)j + 2;
        }
        out->segments_at_peak[i] = (vb_peak_block){blocks[i].segment, blocks[i].segment_size, blocks[i].block,
                                                   blocks[i].block_size, blocks[i].allocated, stream};
    }
    free(seen);
    out->segment_block_count = count;
    return VB_OK;
}

/* Quantile p of a latency list (sorted in place), 0 when empty. */
static double latency_quantile(vb_samples *samples, double p)
{
    return vb_quantile(samples->values, samples->count, p);
}

/* The memory figures of a case, from its memory pass: the schema's memory
 * counters (peak_requested_bytes ... ooms), then the scenario's counters of
 * iteration 1, and iteration 1's timeline. */
typedef struct memory_pass_result {
    counter_list counters;          /* peak_requested_bytes ... ooms */
    counter_list scenario_counters; /* the scenario's, of iteration 1 */
    vb_timeline_sample *timeline;
    size_t timeline_count;
} memory_pass_result;

static void memory_pass_free(memory_pass_result *memory)
{
    free(memory->counters.items);
    free(memory->scenario_counters.items);
    free(memory->timeline);
    memset(memory, 0, sizeof *memory);
}

/* Copies a counter list (the memory pass's into a repetition's). */
static int counters_append(counter_list *to, const counter_list *from)
{
    int failed = 0;
    for (size_t i = 0; i < from->count; i++) failed |= counter_put(to, &from->items[i]);
    return failed;
}

/* Collects the memory counters of a finished memory pass. */
static vb_status memory_pass_finish(repetition_state *rep, memory_pass_result *memory)
{
    vb_alloc_stats stats;
    vb_run_peaks peaks; /* the run's, across any peak resets the scenario made */
    vb_allocator_stats(rep->allocator, &stats);
    vb_run_get_peaks(rep->run, &peaks);
    counter_list *counters = &memory->counters;
    int failed = 0;
    failed |= counter_set(counters, "peak_requested_bytes", (double)peaks.requested);
    failed |= counter_set(counters, "peak_allocated_bytes", (double)peaks.allocated);
    failed |= counter_set(counters, "peak_reserved_bytes", (double)peaks.reserved);
    failed |= counter_set(counters, "overhead_ratio",
                          peaks.requested ? (double)peaks.reserved / (double)peaks.requested : 0.0);
    failed |= counter_set(counters, "external_frag_at_peak", peaks.external_frag_at_peak);
    failed |= counter_set(counters, "driver_alloc_calls", (double)stats.driver_alloc_calls);
    failed |= counter_set(counters, "driver_free_calls", (double)stats.driver_free_calls);
    failed |= counter_set(counters, "alloc_retries", (double)stats.alloc_retries);
    failed |= counter_set(counters, "ooms", (double)stats.ooms);
    for (int kind = 0; kind < VB_DRIVER_CALL_KINDS; kind++) {
        char name[64];
        snprintf(name, sizeof name, "driver_calls_%s", vb_driver_call_names[kind]);
        failed |= counter_set(counters, name, (double)stats.driver_calls[kind]);
    }
    failed |= counters_append(&memory->scenario_counters, &rep->scenario_counters);
    /* The first failing request, unless the scenario names it itself (a
     * replay: with its trace line). */
    int named = 0;
    for (size_t i = 0; i < memory->scenario_counters.count; i++)
        named |= strcmp(memory->scenario_counters.items[i].name, "first_oom_bytes") == 0;
    if (stats.ooms && !named && vb_run_first_oom_bytes(rep->run)) {
        vb_run_counter first = {"first_oom_bytes", (double)vb_run_first_oom_bytes(rep->run),
                                vb_run_first_oom_bytes(rep->run)};
        failed |= counter_put(&memory->scenario_counters, &first);
    }
    if (failed) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    memory->timeline = rep->kept.timeline;
    memory->timeline_count = rep->kept.timeline_count;
    rep->kept.timeline = NULL;
    return VB_OK;
}

/* Fills `result` from a finished timed repetition: the memory pass's memory
 * counters, then the repetition's latencies and gpu_time_ns, then the
 * scenario's counters (all in the schema's order), and a copy of the memory
 * pass's timeline. */
static vb_status repetition_finish(repetition_state *rep, const memory_pass_result *memory,
                                   vb_repetition_result *result)
{
    vb_samples *malloc_ns = vb_run_malloc_ns(rep->run), *free_ns = vb_run_free_ns(rep->run);
    vb_sort_doubles(malloc_ns->values, malloc_ns->count);
    vb_sort_doubles(free_ns->values, free_ns->count);
    double iterations = (double)rep->iterations;
    counter_list counters = {0};
    int failed = 0;
    failed |= counters_append(&counters, &memory->counters);
    failed |= counter_set(&counters, "malloc_ns_p50", latency_quantile(malloc_ns, 0.50));
    failed |= counter_set(&counters, "malloc_ns_p99", latency_quantile(malloc_ns, 0.99));
    failed |= counter_set(&counters, "free_ns_p50", latency_quantile(free_ns, 0.50));
    failed |= counter_set(&counters, "free_ns_p99", latency_quantile(free_ns, 0.99));
    failed |= counter_set(&counters, "gpu_time_ns", rep->gpu_ns / iterations);
    failed |= counters_append(&counters, &memory->scenario_counters);
    vb_timeline_sample *timeline = NULL;
    if (!failed && memory->timeline_count) {
        timeline = malloc(memory->timeline_count * sizeof *timeline);
        if (timeline) memcpy(timeline, memory->timeline, memory->timeline_count * sizeof *timeline);
        else failed = 1;
    }
    if (failed) {
        free(counters.items);
        return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    }
    for (size_t i = 0; i < counters.count; i++)
        if (!isfinite(counters.items[i].value)) {
            vb_status status = vb_error(VB_ERR_INVALID, "counter %s is not a finite number", counters.items[i].name);
            free(counters.items);
            free(timeline);
            return status;
        }
    *result = (vb_repetition_result){rep->iterations, rep->real_ns / iterations, rep->cpu_ns / iterations,
                                     rep->gpu_ns / iterations, counters.items, counters.count,
                                     timeline, timeline ? memory->timeline_count : 0};
    return VB_OK;
}

unsigned vb_memory_pass_iterations(const vb_scenario *scenario)
{
    return scenario->memory_pass_iterations ? scenario->memory_pass_iterations : VB_MEMORY_PASS_ITERATIONS;
}

/* How a memory pass takes the segment map (runtime/run.h): at every peak,
 * or counting the calls, or at one call. */
typedef struct capture_plan {
    vb_run_capture mode;
    uint64_t call, fingerprint; /* counting: found; at one call: given */
    int captured;               /* at one call: the map was taken there */
    void (*taken)(void *context, vb_run *run); /* at one call: then called (vb_run_on_capture) */
    void *context;
} capture_plan;

/* One memory pass (runner.h): vb_memory_pass_iterations iterations on a
 * fresh allocator and run, iteration 1 sampling the timeline, the segment
 * map taken as `plan` says; fills `memory` (when not NULL) and the case's
 * segment map. It also warms the code and the device up for the timed
 * repetitions, as Google Benchmark's warm-up would. */
static vb_status memory_pass_run(vb_device *dev, const vb_case *c, capture_plan *plan, vb_case_result *out,
                                 memory_pass_result *memory)
{
    repetition_state rep;
    vb_status status = repetition_open(dev, c, &rep);
    if (status == VB_OK) {
        if (plan->mode == VB_CAPTURE_EVERY_PEAK) vb_run_set_segment_capture(rep.run, 1);
        else if (plan->mode == VB_CAPTURE_COUNT) vb_run_count_peak_calls(rep.run);
        else if (plan->mode == VB_CAPTURE_AT) {
            vb_run_capture_at_call(rep.run, plan->call, plan->fingerprint);
            vb_run_on_capture(rep.run, plan->taken, plan->context);
        }
    }
    uint64_t iterations = vb_memory_pass_iterations(c->scenario);
    while (status == VB_OK && rep.iterations < iterations) {
        vb_run_set_sampling(rep.run, rep.iterations == 0);
        status = time_iteration(dev, c->scenario, &rep);
        if (status != VB_OK) break;
        if (rep.iterations == 1 && memory) {
            size_t count;
            const vb_run_counter *counters = vb_run_counters(rep.run, &count);
            for (size_t i = 0; i < count && status == VB_OK; i++)
                if (counter_put(&rep.scenario_counters, &counters[i]) != 0)
                    status = vb_error(VB_ERR_HOST_OOM, "out of host memory");
            if (status == VB_OK) status = keep_timeline(rep.run, &rep.kept);
        }
    }
    if (status == VB_OK && plan->mode != VB_CAPTURE_OFF) status = keep_segments(rep.run, out);
    if (status == VB_OK && plan->mode == VB_CAPTURE_COUNT)
        plan->call = vb_run_last_peak_call(rep.run, &plan->fingerprint);
    if (status == VB_OK && plan->mode == VB_CAPTURE_AT) plan->captured = vb_run_captured_at_call(rep.run);
    if (status == VB_OK && memory) status = memory_pass_finish(&rep, memory);
    repetition_close(dev, &rep);
    return status;
}

/* Whole buffers through a socket; 0, or -1. Sending never raises SIGPIPE
 * (a twin that died is a failed twin, not the end of the program). */
static int send_whole(int fd, const void *data, size_t size)
{
    for (const char *at = data; size > 0;) {
        ssize_t n = send(fd, at, size, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        at += n;
        size -= (size_t)n;
    }
    return 0;
}

static int recv_whole(int fd, void *data, size_t size)
{
    for (char *at = data; size > 0;) {
        ssize_t n = recv(fd, at, size, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        at += n;
        size -= (size_t)n;
    }
    return 0;
}

/* The twin's end: the map taken at the call, to the parent (its block
 * count, then the blocks; 0: none, or the runs differed), and _exit. */
static void twin_send(int parent, vb_run *run)
{
    vb_case_result twin;
    memset(&twin, 0, sizeof twin);
    uint64_t count = run && keep_segments(run, &twin) == VB_OK ? twin.segment_block_count : 0;
    int failed = send_whole(parent, &count, sizeof count) != 0 ||
                 (count && send_whole(parent, twin.segments_at_peak, count * sizeof *twin.segments_at_peak) != 0);
    _exit(failed || !count);
}

/* vb_run_on_capture's hook in the twin: nothing after the call matters. */
static void twin_captured(void *context, vb_run *run)
{
    twin_send(*(int *)context, run);
}

/* The twin of a lazy memory pass, in a child forked before the pass began
 * (so on the same state, the device's included): it waits for the call the
 * parent's counting pass found and runs the pass again up to that call,
 * taking the map there. */
static void capture_twin(vb_device *dev, const vb_case *c, int parent)
{
    /* Silent: what the pass prints (a replay's progress line) is the parent's to print. */
    int quiet = open("/dev/null", O_WRONLY);
    if (quiet >= 0) {
        dup2(quiet, STDOUT_FILENO);
        dup2(quiet, STDERR_FILENO);
        close(quiet);
    }
    capture_plan plan = {VB_CAPTURE_AT, 0, 0, 0, NULL, NULL};
    if (recv_whole(parent, &plan.call, sizeof plan.call) != 0 ||
        recv_whole(parent, &plan.fingerprint, sizeof plan.fingerprint) != 0 || plan.call == 0)
        _exit(0);
    plan.taken = twin_captured;
    plan.context = &parent;
    vb_case_result twin;
    memset(&twin, 0, sizeof twin);
    memory_pass_run(dev, c, &plan, &twin, NULL);
    twin_send(parent, NULL); /* the pass ended without the call's snapshot */
}

/* The memory pass. Where it can, lazily (runtime/run.h): walking every
 * block at every new peak costs blocks x peaks, quadratic in a trace whose
 * peak keeps rising, so the pass only counts, and a twin forked before it,
 * on the same state, repeats it up to the last peak's call and walks once
 * there. That needs a device whose answers repeat: sim (a GPU's addresses
 * and timings do not; there the pass walks at every peak). When the twin
 * gives no map (no fork, host memory, a run that differed), the pass is
 * done again the old way. */
static vb_status memory_pass(vb_device *dev, const vb_case *c, int no_segment_map, vb_case_result *out,
                             memory_pass_result *memory)
{
    const vb_allocator_ops *ops = vb_allocator_find(c->allocator->name);
    capture_plan plan = {no_segment_map ? VB_CAPTURE_OFF : VB_CAPTURE_EVERY_PEAK, 0, 0, 0, NULL, NULL};
    int sockets[2] = {-1, -1};
    pid_t twin = -1;
    if (!no_segment_map && vb_device_is_sim(dev) && ops && ops->segments &&
        socketpair(AF_UNIX, SOCK_STREAM, 0, sockets) == 0) {
        fflush(NULL); /* the twin leaves with _exit: nothing buffered is written twice */
        twin = fork();
        if (twin == 0) {
            close(sockets[0]);
            capture_twin(dev, c, sockets[1]);
        }
        close(sockets[1]);
        if (twin < 0) close(sockets[0]);
        else plan.mode = VB_CAPTURE_COUNT;
    }
    vb_status status = memory_pass_run(dev, c, &plan, out, memory);
    if (twin < 0) return status;
    uint64_t call = status == VB_OK ? plan.call : 0, count = 0;
    int taken = send_whole(sockets[0], &call, sizeof call) == 0 &&
                send_whole(sockets[0], &plan.fingerprint, sizeof plan.fingerprint) == 0 && call &&
                recv_whole(sockets[0], &count, sizeof count) == 0 && count > 0;
    if (taken) {
        out->segments_at_peak = malloc(count * sizeof *out->segments_at_peak);
        taken = out->segments_at_peak &&
                recv_whole(sockets[0], out->segments_at_peak, count * sizeof *out->segments_at_peak) == 0;
        out->segment_block_count = taken ? count : 0;
    }
    close(sockets[0]);
    while (waitpid(twin, NULL, 0) < 0 && errno == EINTR) {
    }
    if (status != VB_OK || !call || taken) return status;
    /* No map from the twin: the whole pass again, walking at every peak. */
    free(out->segments_at_peak);
    out->segments_at_peak = NULL;
    out->segment_block_count = 0;
    memory_pass_free(memory);
    plan = (capture_plan){VB_CAPTURE_EVERY_PEAK, 0, 0, 0, NULL, NULL};
    return memory_pass_run(dev, c, &plan, out, memory);
}

/* Runs one timed repetition on a fresh allocator: `fixed_iterations` of
 * them, or (when 0) as many as reach the minimum time. No timeline, no
 * segment capture: its memory figures are the memory pass's. */
static vb_status run_repetition(vb_device *dev, const vb_case *c, const vb_runner_options *options,
                                uint64_t fixed_iterations, const memory_pass_result *memory,
                                vb_repetition_result *result)
{
    repetition_state rep;
    vb_status status = repetition_open(dev, c, &rep);
    if (status == VB_OK) vb_run_set_sampling(rep.run, 0);
    double min_time_ns = options->min_time_s * 1e9;
    while (status == VB_OK) {
        status = time_iteration(dev, c->scenario, &rep);
        if (status != VB_OK) break;
        if (fixed_iterations ? rep.iterations >= fixed_iterations
                             : rep.real_ns >= min_time_ns || rep.iterations >= options->max_iterations)
            break;
    }
    if (status == VB_OK) status = repetition_finish(&rep, memory, result);
    repetition_close(dev, &rep);
    return status;
}

/* Copies `text` into a fixed field; VB_ERR_INVALID when it does not fit. */
static vb_status copy_label(char *field, size_t capacity, const char *what, const char *a, const char *sep,
                            const char *b)
{
    if ((size_t)snprintf(field, capacity, "%s%s%s", a, sep, b) >= capacity)
        return vb_error(VB_ERR_INVALID, "%s '%s%s%s' is too long", what, a, sep, b);
    return VB_OK;
}

const char *vb_runner_skip_reason(vb_device *dev, const vb_scenario *scenario, char *why, size_t capacity)
{
    vb_device_info info;
    dev->ops->info(dev, &info);
    if (scenario->min_devices <= info.device_count) return NULL;
    snprintf(why, capacity, "it runs across %d devices and this machine has %d", scenario->min_devices,
             info.device_count);
    return why;
}

vb_status vb_runner_run_case(vb_device *dev, const vb_case *c, const vb_runner_options *options,
                             vb_case_result *out)
{
    memset(out, 0, sizeof *out);
    vb_status status = c->label       ? copy_label(out->scenario, sizeof out->scenario, "scenario", c->label, "", "")
                       : c->parameter ? copy_label(out->scenario, sizeof out->scenario, "scenario", c->scenario->name,
                                                   ":", c->parameter)
                                      : copy_label(out->scenario, sizeof out->scenario, "scenario", c->scenario->name,
                                                   "", "");
    if (status == VB_OK)
        status = copy_label(out->allocator, sizeof out->allocator, "allocator", c->allocator->label, "", "");
    if (status == VB_OK) status = copy_label(out->name, sizeof out->name, "name", out->scenario, "/", out->allocator);
    if (status != VB_OK) return status;
    if (options->repetitions < 1 || options->max_iterations < 1 || !(options->min_time_s >= 0))
        return vb_error(VB_ERR_INVALID, "%s: repetitions and iterations must be >= 1, min time >= 0", out->name);

    out->repetitions = calloc(options->repetitions, sizeof *out->repetitions);
    if (!out->repetitions) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    memory_pass_result memory = {0};
    status = memory_pass(dev, c, options->no_segment_map, out, &memory);
    for (size_t i = 0; i < options->repetitions && status == VB_OK; i++) {
        uint64_t fixed = i == 0 ? 0 : out->repetitions[0].iterations;
        status = run_repetition(dev, c, options, fixed, &memory, &out->repetitions[i]);
        if (status == VB_OK) out->repetition_count++;
    }
    memory_pass_free(&memory);
    if (status != VB_OK) {
        char message[512];
        snprintf(message, sizeof message, "%s", vb_last_error()[0] ? vb_last_error() : vb_status_name(status));
        char name[sizeof out->name];
        memcpy(name, out->name, sizeof name);
        vb_case_result_free(out);
        return vb_error(status, "%s: %s", name, message);
    }
    return VB_OK;
}

void vb_case_result_free(vb_case_result *result)
{
    for (size_t i = 0; result->repetitions && i < result->repetition_count; i++) {
        free(result->repetitions[i].counters);
        free(result->repetitions[i].timeline);
    }
    free(result->repetitions);
    free(result->segments_at_peak);
    memset(result, 0, sizeof *result);
}
