/* vrambench — the runner: runs (scenario [+ parameter], allocator spec) cases
 * on one device in Google Benchmark's manner.
 *
 * Per case, first a MEMORY PASS: VB_MEMORY_PASS_ITERATIONS iterations of the
 * scenario (or the scenario's own memory_pass_iterations: a trace replay
 * runs once) on a fresh allocator and run. Iteration 1 records the step
 * timeline; the segment map is taken at the pass's peak reserved (on sim
 * by a forked twin of the pass that walks the blocks once, at the call of
 * the last peak, so the map costs one walk however often the peak rose;
 * runtime/run.h). Every
 * memory figure of the case comes from this pass: peaks over its iterations,
 * driver calls, retries and OOMs summed over them, the scenario's counters of
 * iteration 1. Its iteration count is fixed, so the memory figures do not
 * depend on --min-time, --max-iterations, the clock or the GPU's speed. The
 * pass also serves as Google Benchmark's warm-up.
 *
 * Then `repetitions` timed repetitions, each on a FRESH allocator and run,
 * with no sampling. The first runs iterations until their total real time
 * reaches `min_time_s` (or `max_iterations`); later repetitions run the same
 * count, as Google Benchmark does, so their aggregates compare like with
 * like. Each iteration is timed on the host monotonic clock between two
 * device synchronizations (real time), with the process CPU clock (cpu time)
 * and with device events on the run's stream (GPU time; on sim the logical
 * clock); the run's own measuring is left out of the host times. A timed
 * repetition reports its times and latencies (malloc_ns_*, free_ns_*,
 * gpu_time_ns) with the memory pass's memory counters and timeline.
 */
#ifndef VB_RUNNER_H
#define VB_RUNNER_H

#include <stddef.h>
#include <stdint.h>

#include "allocators/allocator.h"
#include "allocators/spec.h"
#include "scenarios/scenario.h"

/* ------------------------------------------------------------------------ */
/* Running cases                                                             */
/* ------------------------------------------------------------------------ */

/* Iterations of the memory pass: iteration 2 runs on what iteration 1 left
 * cached, which is what a steady state carries over (a third would find the
 * same cache as the second). */
#define VB_MEMORY_PASS_ITERATIONS 2

/* The memory pass's iterations for `scenario`. */
unsigned vb_memory_pass_iterations(const vb_scenario *scenario);

typedef struct vb_runner_options {
    unsigned repetitions;     /* >= 1 */
    double min_time_s;        /* real time the first repetition's iterations reach */
    uint64_t max_iterations;  /* >= 1 */
    int no_segment_map;       /* 1: no segments_at_peak, and none of the work for it (tune) */
} vb_runner_options;

/* Defaults: 1 repetition, 0.1 s, 1000 iterations. */
vb_runner_options vb_runner_default_options(void);

typedef struct vb_case {
    const vb_scenario *scenario;
    const char *parameter;            /* the scenario's argument, or NULL */
    const vb_allocator_spec *allocator;
    const char *label;                /* the scenario's name in results; NULL: NAME or NAME:PARAMETER */
} vb_case;

/* One block of the segment map at peak. `stream` numbers the streams: 0 the
 * default stream, 1 the run's stream, 2... others in order of appearance. */
typedef struct vb_peak_block {
    uint64_t segment, segment_size;
    uint64_t block, block_size;
    int allocated;
    int stream;
} vb_peak_block;

/* What one repetition measured. Times are per iteration, in nanoseconds.
 * `counters` holds the schema's counters in its order (peak_requested_bytes
 * ... free_ns_p99), then gpu_time_ns, then the scenario's own counters. The
 * memory counters, the scenario's counters and the timeline are the memory
 * pass's (the same in every repetition); times and latencies are the
 * repetition's own. */
typedef struct vb_repetition_result {
    uint64_t iterations;
    double real_time_ns, cpu_time_ns, gpu_time_ns;
    vb_run_counter *counters;
    size_t counter_count;
    vb_timeline_sample *timeline;     /* iteration 1's steps */
    size_t timeline_count;
} vb_repetition_result;

typedef struct vb_case_result {
    char scenario[256];               /* "random_mix", or "NAME:PARAMETER" */
    char allocator[512];              /* the spec's label */
    char name[800];                   /* "SCENARIO/ALLOCATOR" */
    vb_repetition_result *repetitions;
    size_t repetition_count;
    int has_segments;                 /* 0 when the allocator cannot list them */
    vb_peak_block *segments_at_peak;  /* the memory pass's map at peak reserved */
    size_t segment_block_count;
} vb_case_result;

/* Why `scenario` cannot run on `dev`'s machine (a scenario across devices
 * on a machine with too few: "it runs across 2 devices and this machine has
 * 1"), written into `why`; NULL when it can. Callers skip such a case with
 * a note, never report it as a zero. */
const char *vb_runner_skip_reason(vb_device *dev, const vb_scenario *scenario, char *why, size_t capacity);

/* Runs one case. On failure returns the status with a message that names the
 * case ("random_mix/cuda: ...") and leaves `out` empty. */
vb_status vb_runner_run_case(vb_device *dev, const vb_case *c, const vb_runner_options *options,
                             vb_case_result *out);

void vb_case_result_free(vb_case_result *result);

/* The counter `name` of a repetition, or `fallback` when it has none. */
double vb_repetition_counter(const vb_repetition_result *rep, const char *name, double fallback);
/* The same for a count or a size, exact where the counter was kept whole
 * (vb_run_counter.whole); `fallback` also when it is no whole number in
 * 0 .. 2^64-1. */
uint64_t vb_repetition_counter_whole(const vb_repetition_result *rep, const char *name, uint64_t fallback);

/* ------------------------------------------------------------------------ */
/* Google Benchmark's statistics over repetitions (src/statistics.cc)        */
/* ------------------------------------------------------------------------ */

/* Mean and standard deviation are measure.h's vb_mean / vb_stddev (the
 * sample deviation, as GB). Median of unsorted values (GB: the mean for fewer
 * than 3, the middle or the mean of the two middles otherwise); cv = stddev /
 * mean, 0 for fewer than 2 values or a zero mean. */
double vb_stat_median(const double *values, size_t count);
double vb_stat_cv(const double *values, size_t count);

#endif
