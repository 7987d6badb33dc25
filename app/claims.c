/* vrambench — the claims catalogue and the criteria that decide each claim.
 *
 * Every criterion was fixed before any measurement was taken and reads only
 * named steps and counters of one scenario's run. */
#include "claims.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner.h"

/* ------------------------------------------------------------------------ */
/* Reading a measurement                                                     */
/* ------------------------------------------------------------------------ */

/* A measurement being read for one decision; the first missing step or
 * counter makes the decision undecidable and says which. */
typedef struct reader {
    const vb_scenario *scenario; /* whose tables name the steps and counters */
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

/* A field of the sample taken at the step named `text` (the last one of
 * that name). */
static double sample_value(reader *r, const char *text, sample_field field)
{
    const vb_measurement *m = r->measurement;
    for (size_t i = m->timeline_count; i-- > 0;) {
        const vb_timeline_sample *s = &m->timeline[i];
        if (strcmp(s->step, text) != 0) continue;
        switch (field) {
        case REQUESTED: return (double)s->requested;
        case ALLOCATED: return (double)s->allocated;
        case RESERVED: return (double)s->reserved;
        case DRIVER_USED: return (double)s->driver_used;
        }
    }
    lack(r, "step", text);
    return NAN;
}

/* A field of the sample at the scenario's step `key` (its steps table,
 * scenarios/scenario.h). */
static double step_value(reader *r, const char *key, sample_field field)
{
    const char *text = vb_scenario_step(r->scenario, key);
    if (!text) {
        lack(r, "step key", key);
        return NAN;
    }
    return sample_value(r, text, field);
}

/* A field of the sample at the scenario's numbered step `key` (a pattern
 * with one %d) for `number`. */
static double numbered_step_value(reader *r, const char *key, int number, sample_field field)
{
    const char *pattern = vb_scenario_step(r->scenario, key);
    if (!pattern) {
        lack(r, "step key", key);
        return NAN;
    }
    char text[64];
    snprintf(text, sizeof text, pattern, number);
    return sample_value(r, text, field);
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

/* The counter of the scenario's family `family` for its member `member`
 * (scenarios/scenario.h), written into name (64 bytes). */
static double family_counter(reader *r, const char *family, const vb_family_member *member, char name[64])
{
    snprintf(name, 64, "%s", family);
    for (const vb_counter_family *f = r->scenario->families; f && f->key; f++) {
        if (strcmp(f->key, family) != 0) continue;
        vb_scenario_family_counter(f, member, name, 64);
        return counter(r, name);
    }
    lack(r, "counter family", family);
    return NAN;
}

/* The scenario's family member named `name`, or NULL (a lack). */
static const vb_family_member *member_named(reader *r, const char *name)
{
    for (const vb_family_member *m = r->scenario->members; m && m->name; m++)
        if (strcmp(m->name, name) == 0) return m;
    lack(r, "family member", name);
    return NULL;
}

/* The counter `name`, noted under its own name (NAN and a lack when the
 * measurement has none). */
static double noted_counter(reader *r, const char *name)
{
    double value = counter(r, name);
    note(r, name, value);
    return value;
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
    double large_drop = step_value(r, "large_made", DRIVER_USED) - step_value(r, "emptied", DRIVER_USED);
    double small_drop = step_value(r, "small_made", DRIVER_USED) -
                        step_value(r, "emptied_neighbour_alive", DRIVER_USED);
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
    double returned = step_value(r, "made", DRIVER_USED) - step_value(r, "deleted", DRIVER_USED);
    double growth = step_value(r, "new_tensors", DRIVER_USED) - step_value(r, "deleted", DRIVER_USED);
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
    double growth = numbered_step_value(r, "unreferenced", 100, ALLOCATED) - numbered_step_value(r, "unreferenced", 10, ALLOCATED);
    double reserved = numbered_step_value(r, "unreferenced", 100, RESERVED);
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
    int false_alarm = 1;
    double smallest_gap = INFINITY;
    for (int done = 50; done <= 100; done += 10) {
        double reserved = numbered_step_value(r, "unreferenced", done, RESERVED);
        double allocated = numbered_step_value(r, "unreferenced", done, ALLOCATED);
        if (!large_gap(reserved, allocated)) false_alarm = 0;
        if (reserved - allocated < smallest_gap) smallest_gap = reserved - allocated;
    }
    double kept_reserved = numbered_step_value(r, "kept", 100, RESERVED);
    double kept_allocated = numbered_step_value(r, "kept", 100, ALLOCATED);
    double leak_growth = kept_allocated - numbered_step_value(r, "kept", 10, ALLOCATED);
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
    noted_counter(r, "cap_bytes");
    note(r, "max_batch_with_empty_cache", with);
    note(r, "max_batch_without_empty_cache", without);
    noted_counter(r, "peak_reserved_with_empty_cache");
    noted_counter(r, "peak_reserved_without_empty_cache");
    if (with > without + BATCH_RESOLUTION)
        conclude(r, VB_VERDICT_HOLDS, "empty_cache let a larger batch fit (%.0f vs %.0f rows)", with, without);
    else
        conclude(r, VB_VERDICT_DOES_NOT_HOLD, "the same batch fits either way (%.0f vs %.0f rows)", with, without);
}

/* Holds if del x leaves requested bytes unchanged while the view y lives, and
 * del y drops them by at least the tensor's size. */
static void decide_views(reader *r)
{
    double made = step_value(r, "made", REQUESTED), start = step_value(r, "start", REQUESTED);
    double at_del_x = step_value(r, "del_x", REQUESTED), at_del_y = step_value(r, "del_y", REQUESTED);
    double size = made - start;
    note(r, "tensor_bytes", size);
    note(r, "freed_at_del_x_bytes", made - at_del_x);
    note(r, "freed_at_del_y_bytes", at_del_x - at_del_y);
    if (at_del_x == made && at_del_x - at_del_y >= size)
        conclude(r, VB_VERDICT_HOLDS, "del x freed nothing while y lived; del y freed the storage");
    else
        conclude(r, VB_VERDICT_DOES_NOT_HOLD, "del x freed %.1f MiB, del y %.1f MiB", MiB(made - at_del_x),
                 MiB(at_del_x - at_del_y));
}

/* The bytes the async_matmul example's tensors take (x, y, z). */
static double matmul_tensor_bytes(reader *r)
{
    return step_value(r, "dispatched", REQUESTED) - step_value(r, "start", REQUESTED);
}

/* Holds if, once the function returned, the driver still shows its tensors'
 * memory (it fell by less than 10% of their size), and empty_cache then gives
 * back at least 90% of it. */
static void decide_scope_stays_reserved(reader *r)
{
    double tensors = matmul_tensor_bytes(r);
    double dispatched = step_value(r, "dispatched", DRIVER_USED);
    double returned = step_value(r, "returned", DRIVER_USED);
    double emptied = step_value(r, "emptied", DRIVER_USED);
    note(r, "tensor_bytes", tensors);
    note(r, "driver_drop_at_return_bytes", dispatched - returned);
    note(r, "driver_drop_at_empty_cache_bytes", returned - emptied);
    int stays = dispatched - returned < 0.1 * tensors, released_later = returned - emptied >= 0.9 * tensors;
    if (stays && released_later)
        conclude(r, VB_VERDICT_HOLDS, "the driver kept showing the memory until empty_cache");
    else if (!stays)
        conclude(r, VB_VERDICT_DOES_NOT_HOLD, "the driver got %.1f MiB back when the function returned",
                 MiB(dispatched - returned));
    else
        conclude(r, VB_VERDICT_DOES_NOT_HOLD, "the memory stayed even after empty_cache");
}

/* Holds if synchronize() makes the driver's used memory fall by at least 90%
 * of the example's tensors (the document: VRAM "is only released ... after
 * the call to torch.cuda.synchronize()"). */
static void decide_synchronize_releases(reader *r)
{
    double tensors = matmul_tensor_bytes(r);
    double drop = step_value(r, "dispatched", DRIVER_USED) - step_value(r, "synchronized", DRIVER_USED);
    note(r, "tensor_bytes", tensors);
    note(r, "driver_drop_at_synchronize_bytes", drop);
    noted_counter(r, "kernel_in_flight_at_dispatch");
    if (drop >= 0.9 * tensors)
        conclude(r, VB_VERDICT_HOLDS, "synchronize() gave the driver %.1f MiB back", MiB(drop));
    else
        conclude(r, VB_VERDICT_DOES_NOT_HOLD, "synchronize() changed the driver's used memory by %.1f MiB: "
                 "x, y and z are still referenced", MiB(-drop) + 0.0);
}

#define HOLDER_TENSOR_BYTES (10000.0 * 10000.0 * 4.0) /* TensorHolder(10000), fp32 */

/* Holds if tensor_holder = None frees less than half of the holder's tensor
 * (the document: result "is still referencing the tensor"). */
static void decide_holder_result_keeps_tensor(reader *r)
{
    double freed = counter(r, "freed_at_holder_none_bytes");
    note(r, "holder_tensor_bytes", HOLDER_TENSOR_BYTES);
    note(r, "freed_at_holder_none_bytes", freed);
    noted_counter(r, "held_by_result_bytes");
    if (freed < 0.5 * HOLDER_TENSOR_BYTES)
        conclude(r, VB_VERDICT_HOLDS, "the holder's tensor stayed allocated while result lived");
    else
        conclude(r, VB_VERDICT_DOES_NOT_HOLD, "tensor_holder = None freed %.1f MiB: result = tensor * 2 is a new "
                 "tensor, not a reference", MiB(freed));
}

/* What may stay for "completely": one driver page. */
#define CLEANUP_SLACK_BYTES (2.0 * 1048576.0)

/* Holds, on a GPU, if driver-used memory after the cleanup exceeds the level
 * before the first CUDA call (context_bytes + the scenario's residual) by at
 * most one 2 MiB page. The sim has no context or libraries: undecidable there. */
static void decide_cleanup_frees_all(reader *r)
{
    double residual = noted_counter(r, "residual_driver_bytes");
    double reserved = noted_counter(r, "residual_reserved_bytes");
    if (r->measurement->simulated) {
        conclude(r, VB_VERDICT_UNDECIDABLE, "the simulated device has no CUDA context or library workspaces");
        return;
    }
    double context = noted_counter(r, "context_bytes");
    if (residual + context <= CLEANUP_SLACK_BYTES)
        conclude(r, VB_VERDICT_HOLDS, "driver-used memory went back to its level before the first CUDA call");
    else
        conclude(r, VB_VERDICT_DOES_NOT_HOLD, "%.1f MiB stay: the CUDA context %.1f MiB, libraries and allocator "
                 "%.1f MiB (of it %.1f MiB reserved by the allocator)", MiB(residual + context), MiB(context),
                 MiB(residual), MiB(reserved));
}

/* Holds if the no_grad forward's peak reserved memory is at most 75% of the
 * training step's. */
static void decide_no_grad_less(reader *r)
{
    double no_grad = noted_counter(r, "no_grad_peak_reserved_bytes");
    double train = noted_counter(r, "train_peak_reserved_bytes");
    noted_counter(r, "no_grad_extra_peak_bytes");
    noted_counter(r, "train_extra_peak_bytes");
    conclude(r, no_grad <= 0.75 * train ? VB_VERDICT_HOLDS : VB_VERDICT_DOES_NOT_HOLD,
             "no_grad peaked at %.0f%% of the training step", 100.0 * no_grad / train);
}

/* Holds if peak reserved memory rises with every step of the batch sweep
 * 32, 256, 2048, 8192; depends if it never falls but some smaller batch
 * needs no less; does not hold if a larger batch needs less. */
static void decide_smaller_batch_less(reader *r)
{
    char name[64];
    double previous = NAN;
    int rising = 1, falling = 0;
    for (const vb_family_member *size = r->scenario->members; size && size->name; size++) {
        double peak = family_counter(r, "peak_reserved_bytes", size, name);
        note(r, name, peak);
        if (size != r->scenario->members && peak <= previous) rising = 0;
        if (size != r->scenario->members && peak < previous) falling = 1;
        previous = peak;
    }
    if (rising)
        conclude(r, VB_VERDICT_HOLDS, "peak reserved memory rose with every batch size");
    else if (!falling)
        conclude(r, VB_VERDICT_DEPENDS, "some smaller batches needed the same memory (the allocator's rounding)");
    else
        conclude(r, VB_VERDICT_DOES_NOT_HOLD, "a larger batch needed less memory than a smaller one");
}

/* Holds, on a GPU, if the loops with empty_cache every iteration take at
 * least 10% longer per iteration than without. Sim times are not GPU times. */
static void decide_empty_cache_costs_time(reader *r)
{
    const vb_family_member *every_iteration = member_named(r, "every1"), *never_emptied = member_named(r, "never");
    if (!every_iteration || !never_emptied) return;
    char name[64];
    double every = family_counter(r, "iter_ns", every_iteration, name);
    note(r, name, every);
    double never = family_counter(r, "iter_ns", never_emptied, name);
    note(r, name, never);
    note(r, name, family_counter(r, "driver_calls", every_iteration, name));
    note(r, name, family_counter(r, "driver_calls", never_emptied, name));
    if (r->measurement->simulated)
        conclude(r, VB_VERDICT_UNDECIDABLE, "times on the simulated device are not GPU times");
    else
        conclude(r, every >= 1.10 * never ? VB_VERDICT_HOLDS : VB_VERDICT_DOES_NOT_HOLD,
                 "an iteration took %.2fx as long with empty_cache every time", every / never);
}

/* ------------------------------------------------------------------------ */
/* The catalogue                                                             */
/* ------------------------------------------------------------------------ */

/* Adapts a reader-based criterion to the catalogue's signature. */
#define CRITERION(name)                                                                     \
    static void name##_entry(const vb_scenario *s, const vb_measurement *m, vb_decision *d) \
    {                                                                                       \
        reader r = {s, m, d, 0};                                                            \
        name(&r);                                                                           \
    }
CRITERION(decide_release_specific)
CRITERION(decide_reuse_after_del)
CRITERION(decide_unreferenced_leak)
CRITERION(decide_gap_means_leak)
CRITERION(decide_empty_cache_avoids_oom)
CRITERION(decide_views)
CRITERION(decide_scope_stays_reserved)
CRITERION(decide_synchronize_releases)
CRITERION(decide_holder_result_keeps_tensor)
CRITERION(decide_cleanup_frees_all)
CRITERION(decide_no_grad_less)
CRITERION(decide_smaller_batch_less)
CRITERION(decide_empty_cache_costs_time)

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

static const vb_claim views = {
    "view_keeps_storage", "000",
    "Deleting a tensor while a view of it is alive releases nothing; deleting the view does.",
    "views", "requested bytes at x,y=x[:], del x and del y (x = randn(1000, 1000))",
    "holds if del x leaves requested bytes unchanged and del y drops them by at least the tensor's size",
    decide_views_entry};

static const vb_claim scope_stays_reserved = {
    "out_of_scope_memory_stays_until_empty_cache", "001",
    "After a function's tensors go out of scope their memory stays reserved, visible to the driver, until empty_cache.",
    "async_matmul", "driver-used memory after dispatch, after the function returned, and after empty_cache "
                    "(two 10000x10000 fp32 matrices and their product)",
    "holds if the driver's used memory falls by < 10% of the tensors at return and by >= 90% at empty_cache",
    decide_scope_stays_reserved_entry};

static const vb_claim synchronize_releases = {
    "synchronize_releases_memory", "001",
    "The memory used by an asynchronous kernel is released only after torch.cuda.synchronize().",
    "async_matmul", "driver-used memory right after the matmul is dispatched (kernel in flight) and after synchronize()",
    "holds if synchronize() makes the driver's used memory fall by >= 90% of the tensors' size",
    decide_synchronize_releases_entry};

static const vb_claim holder_result_keeps_tensor = {
    "result_keeps_holder_tensor", "001",
    "After tensor_holder = None, the holder's tensor stays allocated because result still references it.",
    "holder_refs", "bytes freed at tensor_holder = None (TensorHolder(10000): a 10000x10000 fp32 tensor)",
    "holds if tensor_holder = None frees less than half of the holder's tensor",
    decide_holder_result_keeps_tensor_entry};

static const vb_claim cleanup_frees_all = {
    "cleanup_frees_gpu_completely", "002",
    "del model, optimizer and loaders, gc.collect() and empty_cache() free GPU memory completely.",
    "training_cleanup", "driver-used memory after the cleanup against before the first CUDA call (context_bytes + "
                        "residual_driver_bytes)",
    "holds if at most one 2 MiB page stays; undecidable on the simulated device",
    decide_cleanup_frees_all_entry};

static const vb_claim no_grad_less = {
    "no_grad_uses_substantially_less", "003",
    "Inference under torch.no_grad() uses substantially less memory than a training step.",
    "no_grad_inference", "peak reserved bytes of a no_grad forward and of a training step (MLP 1000-4096x3-10, "
                         "batch 4096)",
    "holds if the no_grad peak is at most 75% of the training step's",
    decide_no_grad_less_entry};

static const vb_claim smaller_batch_less = {
    "smaller_batch_uses_less", "003",
    "A smaller batch size uses less GPU memory.",
    "dataloader_batches", "peak reserved bytes of an epoch at batch sizes 32, 256, 2048, 8192",
    "holds if peak reserved rises with every larger batch; depends if it never falls but ties",
    decide_smaller_batch_less_entry};

static const vb_claim empty_cache_costs_time = {
    "frequent_empty_cache_costs_time", "004",
    "Calling empty_cache often costs time.",
    "empty_cache_loop", "time per iteration and driver calls of the loops with empty_cache every iteration and never",
    "holds if an iteration with empty_cache every time takes >= 1.10x as long; undecidable on the simulated device",
    decide_empty_cache_costs_time_entry};

const vb_claim *const vb_claim_catalogue[] = {
    &release_specific, &views, &scope_stays_reserved, &synchronize_releases, &holder_result_keeps_tensor,
    &cleanup_frees_all, &no_grad_less, &smaller_batch_less, &reuse_after_del, &unreferenced_leak, &gap_means_leak,
    &empty_cache_costs_time, &empty_cache_avoids_oom, NULL,
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
    const vb_scenario *scenario = vb_scenario_find(claim->scenario);
    if (!scenario) {
        out->verdict = VB_VERDICT_UNDECIDABLE;
        snprintf(out->reason, sizeof out->reason, "no scenario '%s'", claim->scenario);
        return;
    }
    claim->decide(scenario, measurement, out);
}

vb_status vb_claims_measure(vb_device *dev, const vb_scenario *scenario, const vb_allocator_spec *spec,
                            const vb_claim *const *claims, size_t count, vb_decision *decisions)
{
    vb_device_info info;
    dev->ops->info(dev, &info);
    vb_runner_options options = {.repetitions = 1, .min_time_s = 0.0, .max_iterations = 1};
    vb_case one = {scenario, NULL, spec, NULL};
    vb_case_result result;
    VB_TRY(vb_runner_run_case(dev, &one, &options, &result));
    const vb_repetition_result *rep = &result.repetitions[0];
    /* The context's share of the driver's memory is no scenario's business;
     * the claims that need it find it among the counters. */
    vb_run_counter *counters = malloc((rep->counter_count + 1) * sizeof *counters);
    if (!counters) {
        vb_case_result_free(&result);
        return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    }
    memcpy(counters, rep->counters, rep->counter_count * sizeof *counters);
    size_t counter_count = rep->counter_count;
    if (info.context_bytes) {
        snprintf(counters[counter_count].name, sizeof counters[0].name, "context_bytes");
        counters[counter_count].whole = info.context_bytes;
        counters[counter_count++].value = (double)info.context_bytes;
    }
    vb_measurement m = {rep->timeline, rep->timeline_count, counters, counter_count, info.simulated};
    for (size_t i = 0; i < count; i++)
        if (strcmp(claims[i]->scenario, scenario->name) == 0) vb_claim_decide(claims[i], &m, &decisions[i]);
    free(counters);
    vb_case_result_free(&result);
    return VB_OK;
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
