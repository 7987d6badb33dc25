/* vrambench — the claims catalogue and the criteria that decide each claim.
 *
 * Every criterion was fixed before any measurement was taken and reads only
 * named steps and counters of one scenario's run. */
#include "claims.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Reading a measurement                                                     */
/* ------------------------------------------------------------------------ */

/* A measurement being read for one decision; the first missing step or
 * counter makes the decision undecidable and says which. */
typedef struct reader {
    const vb_measurement *measurement;
    vb_decision *decision;
    int missing;
} reader;

typedef enum sample_field { REQUESTED, ALLOCATED, RESERVED, DRIVER_USED } sample_field;

/* Records a deciding number. */
static void note(reader *r, const char *name, double value)
{
    vb_decision *d = r->decision;
    if (d->number_count == VB_CLAIM_MAX_NUMBERS) return;
    snprintf(d->numbers[d->number_count].name, sizeof d->numbers[0].name, "%s", name);
    d->numbers[d->number_count++].value = value;
}

/* Marks the decision undecidable for lack of `what` (the first such wins). */
static void lack(reader *r, const char *kind, const char *what)
{
    if (r->missing) return;
    r->missing = 1;
    r->decision->verdict = VB_VERDICT_UNDECIDABLE;
    snprintf(r->decision->reason, sizeof r->decision->reason, "the measurement has no %s '%s'", kind, what);
}

/* A field of the sample taken at `step` (the last one of that name). */
static double step_value(reader *r, const char *step, sample_field field)
{
    const vb_measurement *m = r->measurement;
    for (size_t i = m->timeline_count; i-- > 0;) {
        const vb_timeline_sample *s = &m->timeline[i];
        if (strcmp(s->step, step) != 0) continue;
        switch (field) {
        case REQUESTED: return (double)s->requested;
        case ALLOCATED: return (double)s->allocated;
        case RESERVED: return (double)s->reserved;
        case DRIVER_USED: return (double)s->driver_used;
        }
    }
    lack(r, "step", step);
    return NAN;
}

/* A counter's value. */
static double counter(reader *r, const char *name)
{
    const vb_measurement *m = r->measurement;
    for (size_t i = 0; i < m->counter_count; i++)
        if (strcmp(m->counters[i].name, name) == 0) return m->counters[i].value;
    lack(r, "counter", name);
    return NAN;
}

/* Sets the verdict and its reason unless a lack already decided it. */
static void conclude(reader *r, vb_verdict verdict, const char *format, ...) __attribute__((format(printf, 3, 4)));
static void conclude(reader *r, vb_verdict verdict, const char *format, ...)
{
    if (r->missing) return;
    va_list args;
    va_start(args, format);
    r->decision->verdict = verdict;
    vsnprintf(r->decision->reason, sizeof r->decision->reason, format, args);
    va_end(args);
}

#define MiB(x) ((x) / 1048576.0)

/* ------------------------------------------------------------------------ */
/* Criteria                                                                  */
/* ------------------------------------------------------------------------ */

/* Holds if the driver's used memory falls by at least the tensor's size
 * between the tensor's creation and the empty_cache after its del, for both
 * the large tensor and the small one with a live neighbour; depends if only
 * one of them. */
static void decide_release_specific(reader *r)
{
    double large = counter(r, "large_tensor_bytes"), small = counter(r, "small_tensor_bytes");
    double large_drop = step_value(r, "x=randn(1000,1000)", DRIVER_USED) - step_value(r, "empty_cache", DRIVER_USED);
    double small_drop = step_value(r, "small,neighbour=randn(100,100)", DRIVER_USED) -
                        step_value(r, "empty_cache (neighbour alive)", DRIVER_USED);
    note(r, "large_tensor_bytes", large);
    note(r, "large_driver_drop_bytes", large_drop);
    note(r, "small_tensor_bytes", small);
    note(r, "small_driver_drop_bytes", small_drop);
    int large_released = large_drop >= large, small_released = small_drop >= small;
    if (large_released && small_released)
        conclude(r, VB_VERDICT_HOLDS, "both tensors' memory went back to the driver");
    else if (!large_released && !small_released)
        conclude(r, VB_VERDICT_DOES_NOT_HOLD, "neither tensor's memory went back to the driver");
    else
        conclude(r, VB_VERDICT_DEPENDS, "%s went back; %s stayed%s", large_released ? "the large tensor" : "the small tensor",
                 large_released ? "the small one" : "the large one",
                 large_released ? " in a segment shared with its live neighbour" : "");
}

/* Holds if, after del a and del b, their memory is neither back with the
 * driver (used memory fell by less than their size) nor reused: two new
 * tensors of the same size then need at least their size in new memory. */
static void decide_reuse_after_del(reader *r)
{
    double tensor = counter(r, "tensor_bytes");
    double returned = step_value(r, "a,b=randn; c=a+b", DRIVER_USED) - step_value(r, "del a; del b", DRIVER_USED);
    double growth = step_value(r, "d,e=randn (no empty_cache)", DRIVER_USED) - step_value(r, "del a; del b", DRIVER_USED);
    note(r, "tensor_bytes", tensor);
    note(r, "driver_drop_at_del_bytes", returned);
    note(r, "driver_growth_for_new_tensors_bytes", growth);
    if (returned >= 2 * tensor)
        conclude(r, VB_VERDICT_DOES_NOT_HOLD, "the memory went back to the driver at del, before any empty_cache");
    else if (growth < 2 * tensor)
        conclude(r, VB_VERDICT_DOES_NOT_HOLD, "the new tensors reused the deleted ones' memory (%.1f MiB new)", MiB(growth));
    else
        conclude(r, VB_VERDICT_HOLDS, "the deleted memory was neither returned nor reused");
}

/* The leak threshold: half of what 90 kept results of the smallest size
 * (1000 x 1000 fp32) would hold. */
#define LEAK_THRESHOLD_BYTES (45.0 * 4000000.0)

/* Holds if allocated memory grows by more than LEAK_THRESHOLD_BYTES from
 * iteration 10 to 100 of the loop whose results nothing references. */
static void decide_unreferenced_leak(reader *r)
{
    double growth = step_value(r, "unreferenced 100", ALLOCATED) - step_value(r, "unreferenced 10", ALLOCATED);
    double reserved = step_value(r, "unreferenced 100", RESERVED);
    note(r, "allocated_growth_bytes", growth);
    note(r, "reserved_at_100_bytes", reserved);
    note(r, "leak_threshold_bytes", LEAK_THRESHOLD_BYTES);
    if (growth > LEAK_THRESHOLD_BYTES)
        conclude(r, VB_VERDICT_HOLDS, "allocated memory grew by %.1f MiB over 90 iterations", MiB(growth));
    else
        conclude(r, VB_VERDICT_DOES_NOT_HOLD, "allocated memory did not grow (%+.1f MiB); unreferenced tensors were freed",
                 MiB(growth));
}

/* A gap is large when reserved - allocated is at least a quarter of reserved
 * and at least one of the loop's tensors (4 MB). */
static int large_gap(double reserved, double allocated)
{
    double gap = reserved - allocated;
    return gap >= 0.25 * reserved && gap >= 4000000.0;
}

/* Holds if the gap is large and persistent only with the real leak: no large
 * gap at iterations 50..100 of the leak-free loop, and a large gap at the end
 * of the loop that keeps its results. */
static void decide_gap_means_leak(reader *r)
{
    static const char *const leak_free_steps[] = {"unreferenced 50", "unreferenced 60", "unreferenced 70",
                                                  "unreferenced 80", "unreferenced 90", "unreferenced 100"};
    int false_alarm = 1;
    double smallest_gap = INFINITY;
    for (size_t i = 0; i < sizeof leak_free_steps / sizeof leak_free_steps[0]; i++) {
        double reserved = step_value(r, leak_free_steps[i], RESERVED), allocated = step_value(r, leak_free_steps[i], ALLOCATED);
        if (!large_gap(reserved, allocated)) false_alarm = 0;
        if (reserved - allocated < smallest_gap) smallest_gap = reserved - allocated;
    }
    double kept_reserved = step_value(r, "kept 100", RESERVED), kept_allocated = step_value(r, "kept 100", ALLOCATED);
    double leak_growth = kept_allocated - step_value(r, "kept 10", ALLOCATED);
    int leak_in_gap = large_gap(kept_reserved, kept_allocated);
    note(r, "leak_free_smallest_gap_bytes", smallest_gap);
    note(r, "leaking_gap_bytes", kept_reserved - kept_allocated);
    note(r, "leaking_allocated_growth_bytes", leak_growth);
    if (false_alarm)
        conclude(r, VB_VERDICT_DOES_NOT_HOLD, "a large gap persisted (>= %.1f MiB) with no leak: it is cached memory",
                 MiB(smallest_gap));
    else if (!leak_in_gap)
        conclude(r, VB_VERDICT_DOES_NOT_HOLD, "the real leak showed as allocated growth (%.1f MiB), not as a gap",
                 MiB(leak_growth));
    else
        conclude(r, VB_VERDICT_HOLDS, "the gap was large only while memory leaked");
}

/* The search's resolution in batch rows (scenarios/capped_training.c). */
#define BATCH_RESOLUTION 256.0

/* Holds if the largest batch that trains under the cap with empty_cache after
 * every step exceeds the one without by more than the search's resolution. */
static void decide_empty_cache_avoids_oom(reader *r)
{
    double with = counter(r, "max_batch_with_empty_cache"), without = counter(r, "max_batch_without_empty_cache");
    note(r, "cap_bytes", counter(r, "cap_bytes"));
    note(r, "max_batch_with_empty_cache", with);
    note(r, "max_batch_without_empty_cache", without);
    note(r, "peak_reserved_with_empty_cache", counter(r, "peak_reserved_with_empty_cache"));
    note(r, "peak_reserved_without_empty_cache", counter(r, "peak_reserved_without_empty_cache"));
    if (with > without + BATCH_RESOLUTION)
        conclude(r, VB_VERDICT_HOLDS, "empty_cache let a larger batch fit (%.0f vs %.0f rows)", with, without);
    else
        conclude(r, VB_VERDICT_DOES_NOT_HOLD, "the same batch fits either way (%.0f vs %.0f rows)", with, without);
}

/* ------------------------------------------------------------------------ */
/* The catalogue                                                             */
/* ------------------------------------------------------------------------ */

/* Adapts a reader-based criterion to the catalogue's signature. */
#define CRITERION(name)                                                   \
    static void name##_entry(const vb_measurement *m, vb_decision *d)     \
    {                                                                     \
        reader r = {m, d, 0};                                             \
        name(&r);                                                         \
    }
CRITERION(decide_release_specific)
CRITERION(decide_reuse_after_del)
CRITERION(decide_unreferenced_leak)
CRITERION(decide_gap_means_leak)
CRITERION(decide_empty_cache_avoids_oom)

static const vb_claim release_specific = {
    "release_specific", "000, 004",
    "Deleting a tensor's last reference and calling empty_cache releases that tensor's memory to the driver.",
    "release_specific", "driver-used memory at creation vs after del + empty_cache, for a 1000x1000 fp32 tensor and "
                        "for a 100x100 one whose neighbour stays alive",
    "holds if the driver's used memory falls by at least the tensor's size, for both tensors; depends if for one",
    decide_release_specific_entry};

static const vb_claim reuse_after_del = {
    "deleted_memory_waits_for_empty_cache", "004",
    "A deleted tensor's device memory is not reclaimed until empty_cache is called.",
    "reuse_after_del", "driver-used memory at del a, del b, and after two new tensors of the same size",
    "holds if the memory neither went back to the driver at del nor served the new tensors (they needed >= their "
    "size in new memory)",
    decide_reuse_after_del_entry};

static const vb_claim unreferenced_leak = {
    "unreferenced_tensors_leak", "004",
    "Memory of tensors no longer referenced is not freed, so it leaks until empty_cache.",
    "leak_loop", "allocated bytes after 10 and 100 iterations of process_data() whose result is dropped",
    "holds if allocated memory grows by more than 180 MB (half of 90 leaked 1000x1000 fp32 results)",
    decide_unreferenced_leak_entry};

static const vb_claim gap_means_leak = {
    "reserved_allocated_gap_means_leak", "004",
    "A large, persistent gap between reserved and allocated memory indicates a leak.",
    "leak_loop", "reserved - allocated over the last 60 iterations of a leak-free loop, and at the end of a loop "
                 "that keeps every result",
    "holds if the gap (>= 25% of reserved and >= 4 MB) persists only in the leaking loop",
    decide_gap_means_leak_entry};

static const vb_claim empty_cache_avoids_oom = {
    "empty_cache_in_loop_avoids_oom", "003, 004",
    "Calling empty_cache inside the training loop helps avoid out-of-memory errors.",
    "capped_training", "largest batch that trains under a 1 GiB cap with empty_cache after every step and without",
    "holds if the largest batch with empty_cache exceeds the one without by more than 256 rows",
    decide_empty_cache_avoids_oom_entry};

const vb_claim *const vb_claim_catalogue[] = {
    &release_specific, &reuse_after_del, &unreferenced_leak, &gap_means_leak, &empty_cache_avoids_oom, NULL,
};

/* ------------------------------------------------------------------------ */
/* Lookup and names                                                          */
/* ------------------------------------------------------------------------ */

const vb_claim *vb_claim_find(const char *id)
{
    for (size_t i = 0; vb_claim_catalogue[i]; i++)
        if (strcmp(vb_claim_catalogue[i]->id, id) == 0) return vb_claim_catalogue[i];
    return NULL;
}

void vb_claim_decide(const vb_claim *claim, const vb_measurement *measurement, vb_decision *out)
{
    memset(out, 0, sizeof *out);
    claim->decide(measurement, out);
}

const char *vb_verdict_name(vb_verdict verdict)
{
    switch (verdict) {
    case VB_VERDICT_HOLDS: return "holds";
    case VB_VERDICT_DOES_NOT_HOLD: return "does not hold";
    case VB_VERDICT_DEPENDS: return "depends";
    case VB_VERDICT_UNDECIDABLE: return "undecidable";
    }
    return "undecidable";
}
