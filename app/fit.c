/* vrambench — will it fit (see fit.h). */
#include "fit.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A limit's sim device leaves at least this much above the limit: what an
 * expandable segment maps past the check (at most a chunk) always fits. */
#define LIMIT_HEADROOM VB_GiB
_Static_assert(VB_FIT_MAX_CAPACITY == 28 * VB_TiB, "VB_FIT_MAX_CAPACITY_TEXT names it");
_Static_assert(2 * VB_FIT_MAX_CAPACITY <= VB_SIM_MAX_CAPACITY && LIMIT_HEADROOM <= VB_FIT_MAX_CAPACITY,
               "a limit's replay (capacity << 1) fits the simulated device");

/* LATE: the work every stream is kept busy with (about 31 years). */
#define LATE_BUSY_NS ((uint64_t)1000000000 * 1000000000)

int vb_fit_has_limit(const char *name)
{
    return strcmp(name, "caching") == 0 || strcmp(name, "expandable") == 0;
}

vb_status vb_fit_spec(const char *spec_text, uint64_t capacity, vb_fit_kind kind, vb_allocator_spec *spec,
                      uint64_t *sim_capacity, int *limited)
{
    vb_status status = vb_allocator_spec_parse(spec_text, spec);
    if (status != VB_OK) return status;
    *limited = kind == VB_FIT_LIMIT && vb_fit_has_limit(spec->name);
    if (!*limited) {
        *sim_capacity = capacity ? capacity : 1; /* the sim takes 0 for its default */
        return VB_OK;
    }
    if (capacity > VB_FIT_MAX_CAPACITY) {
        vb_allocator_spec_free(spec);
        return vb_error(VB_ERR_INVALID, "capacity %llu bytes is more than " VB_FIT_MAX_CAPACITY_TEXT, (unsigned long long)capacity);
    }
    /* memory_fraction 2^-k of a device of capacity x 2^k: PyTorch's
     * size_t(fraction x total) is the capacity to the byte. */
    int k = 1;
    while (capacity && (capacity << k) - capacity < LIMIT_HEADROOM) k++;
    char fraction[40];
    snprintf(fraction, sizeof fraction, "%.17g", capacity ? ldexp(1.0, -k) : 0.0);
    *sim_capacity = capacity ? capacity << k : LIMIT_HEADROOM;
    status = vb_allocator_spec_set(spec, "memory_fraction", fraction);
    if (status != VB_OK) vb_allocator_spec_free(spec);
    return status;
}

/* ---- GPU progress ---- */

/* FAST: every free completes, and the pool sees it, at once. */
static void synchronize_after_free(void *context, vb_addr addr, uint32_t stream)
{
    (void)addr;
    (void)stream;
    vb_fit_progress *state = context;
    vb_device *dev = state->target->device;
    dev->ops->device_synchronize(dev);
}

/* LATE: a stream's work never ends before the trace does, so no free on
 * it completes; the pool reuses only what is pending. */
static void keep_stream_busy(void *context, uint64_t size, uint32_t stream)
{
    (void)size;
    vb_fit_progress *state = context;
    if (state->busy[stream] || !state->target->streams[stream]) return;
    vb_device *dev = state->target->device;
    dev->ops->enqueue_busy(dev, state->target->streams[stream], LATE_BUSY_NS);
    state->busy[stream] = 1;
}

void vb_fit_progress_hooks(vb_fit_progress *state, vb_drive_hooks *hooks)
{
    memset(hooks, 0, sizeof *hooks);
    hooks->context = state;
    if (state->mode == VB_PROGRESS_FAST) hooks->after_free = synchronize_after_free;
    if (state->mode == VB_PROGRESS_LATE) hooks->before_alloc = keep_stream_busy;
}

/* ---- probes ---- */

/* One drive of `source` with `spec` on a fresh sim of `sim_capacity`
 * placing cudaMalloc's fresh addresses as `placement` says. */
static vb_status run_probe(const vb_drive_source *source, const vb_allocator_spec *spec, uint64_t sim_capacity,
                           vb_sim_placement placement, vb_progress progress, int stop_at_oom, vb_fit_result *out)
{
    vb_allocator *allocator = NULL;
    vb_drive_target *target = calloc(1, sizeof *target);
    vb_fit_progress *state = calloc(1, sizeof *state);
    vb_config config = vb_allocator_spec_config(spec);
    vb_status status = target && state ? vb_sim_open(sim_capacity, &target->device)
                                       : vb_error(VB_ERR_HOST_OOM, "out of host memory");
    if (status == VB_OK) status = vb_sim_set_placement(target->device, placement);
    if (status == VB_OK) status = vb_allocator_create(spec->name, target->device, &config, &allocator);
    vb_drive_result drive;
    if (status == VB_OK) {
        target->allocator = allocator;
        *state = (vb_fit_progress){.mode = progress, .target = target};
        vb_drive_hooks hooks;
        vb_fit_progress_hooks(state, &hooks);
        status = vb_drive(source, target, &hooks, stop_at_oom, &drive);
    }
    if (status == VB_OK) {
        vb_alloc_stats stats;
        vb_allocator_stats(allocator, &stats);
        out->fits = drive.ooms == 0;
        out->ooms = drive.ooms;
        out->alloc_retries = stats.alloc_retries;
        out->first_oom_line = drive.first_oom_line;
        out->first_oom_bytes = drive.first_oom_bytes;
        out->peak_reserved = stats.reserved_bytes_peak;
        out->peak_requested = stats.requested_bytes_peak;
        out->same_from = stats.limit_same_from;
        out->same_to = stats.limit_same_to;
    }
    vb_allocator_destroy(allocator); /* returns what the trace left live */
    if (target && target->device) {
        vb_drive_target_close(target);
        vb_device_close(target->device);
    }
    free(target);
    free(state);
    return status;
}

vb_status vb_fit_probe(const vb_drive_events *events, const char *spec_text, uint64_t capacity, vb_fit_kind kind,
                       vb_sim_placement placement, int stop_at_oom, vb_fit_result *out)
{
    memset(out, 0, sizeof *out);
    vb_allocator_spec spec;
    uint64_t sim_capacity = 0;
    vb_status status = vb_fit_spec(spec_text, capacity, kind, &spec, &sim_capacity, &out->limited);
    if (status != VB_OK) return status;
    /* What a probe answers is decided by allocations (whether one runs
     * out, the retries, the peaks, the limits that decide the same): the
     * frees after the last allocation change none of it and are left out. */
    vb_drive_events until_last_alloc = *events;
    until_last_alloc.count = events->through_last_alloc;
    status = run_probe(&(vb_drive_source){.events = &until_last_alloc}, &spec, sim_capacity, placement,
                       VB_PROGRESS_REPLAY, stop_at_oom, out);
    vb_allocator_spec_free(&spec);
    return status;
}

vb_status vb_fit_probe_progress(const vb_drive_events *events, const char *spec_text, uint64_t capacity,
                                vb_progress progress, vb_fit_result *out)
{
    memset(out, 0, sizeof *out);
    vb_allocator_spec spec;
    vb_status status = vb_allocator_spec_parse(spec_text, &spec);
    if (status != VB_OK) return status;
    status = run_probe(&(vb_drive_source){.events = events}, &spec, capacity, VB_SIM_PLACE_TOP_DOWN, progress, 0,
                       out);
    vb_allocator_spec_free(&spec);
    return status;
}

/* ---- minimum capacities ---- */

/* The most VB_FIT_STEPs under which `events` surely runs out: less than
 * its live bytes at their peak, which every allocation holds at least
 * (0 when it allocates nothing). */
static uint64_t steps_too_few(const vb_drive_events *events)
{
    return events->peak_live_bytes ? (events->peak_live_bytes - 1) / VB_FIT_STEP : 0;
}

/* Narrows [*lo, *hi] (in VB_FIT_STEPs; it fits at *hi and not at *lo) to
 * neighbours, taking fitting to be monotone between them, or as far as
 * out->probes reaching `max_probes` lets it. */
static vb_status bisect(const vb_drive_events *events, const char *spec, vb_fit_kind kind,
                        vb_sim_placement placement, unsigned max_probes, uint64_t *lo, uint64_t *hi, vb_fit_min *out)
{
    while (*hi - *lo > 1 && out->probes < max_probes) {
        uint64_t mid = *lo + (*hi - *lo) / 2;
        vb_fit_result r;
        vb_status status = vb_fit_probe(events, spec, mid * VB_FIT_STEP, kind, placement, 1, &r);
        if (status != VB_OK) return status;
        out->probes++;
        *(r.fits ? hi : lo) = mid;
    }
    return VB_OK;
}

/* The probe under `capacity` of `kind` that stops at the first OOM, into
 * *out: `known` (vb_fit_min_capacity's) when that is the same replay
 * (made under `start`, and it fits: a replay that runs out nowhere stops
 * nowhere), else made now. */
static vb_status first_probe(const vb_drive_events *events, const char *spec, uint64_t capacity, vb_fit_kind kind,
                             vb_sim_placement placement, uint64_t start, const vb_fit_result *known,
                             vb_fit_result *out)
{
    if (known && known->fits && capacity == start) {
        *out = *known;
        return VB_OK;
    }
    return vb_fit_probe(events, spec, capacity, kind, placement, 1, out);
}

/* The replays a search of `events` may make down from its top under
 * `search_events` (0: the default). */
static unsigned walk_budget(const vb_drive_events *events, uint64_t search_events)
{
    uint64_t budget = (search_events ? search_events : VB_FIT_DEFAULT_SEARCH_EVENTS) / (events->count ? events->count : 1);
    if (budget < VB_FIT_MIN_WALK_PROBES) budget = VB_FIT_MIN_WALK_PROBES;
    return budget > UINT_MAX / 2 ? UINT_MAX / 2 : (unsigned)budget;
}

/* Under a limit: from a capacity under which the limit refuses nothing
 * (the replay is then the same under every larger one), down, one probe
 * per run of capacities that make the same decisions. */
static vb_status limit_search(const vb_drive_events *events, const char *spec, vb_sim_placement placement,
                              uint64_t start, uint64_t search_events, const vb_fit_result *known, vb_fit_min *out)
{
    vb_fit_result r;
    uint64_t top = start >= VB_FIT_STEP ? start : VB_FIT_STEP;
    for (;;) {
        vb_status status = out->probes == 0
                               ? first_probe(events, spec, top, VB_FIT_LIMIT, placement, start, known, &r)
                               : vb_fit_probe(events, spec, top, VB_FIT_LIMIT, placement, 1, &r);
        if (status != VB_OK) return status;
        out->probes++;
        if (r.fits && r.same_to == 0) break;
        if (top >= VB_FIT_MAX_CAPACITY) return VB_OK; /* fits nowhere: found 0 */
        top = top > VB_FIT_MAX_CAPACITY / 2 ? VB_FIT_MAX_CAPACITY : top * 2;
    }
    out->found = 1;
    uint64_t lowest = r.same_from; /* every capacity from here up fits */
    unsigned budget = walk_budget(events, search_events);
    while (lowest > 0 && out->probes < budget) {
        uint64_t capacity = lowest - 1;
        vb_status status = vb_fit_probe(events, spec, capacity, VB_FIT_LIMIT, placement, 1, &r);
        if (status != VB_OK) return status;
        out->probes++;
        if (!r.fits) {
            out->fails_at = capacity;
            break;
        }
        lowest = r.same_from <= capacity ? r.same_from : capacity; /* its decisions hold down to same_from */
    }
    out->capacity = out->lowest_fit = lowest;
    out->exact = out->fails_at != 0 || lowest == 0;
    if (out->exact) return VB_OK;
    /* The budget ran out: below the range checked, a bisection (which
     * takes fitting to be monotone) finds where it fits at least, down to
     * the trace's live peak, with a quarter of the budget more. */
    unsigned more = budget / 4 > VB_FIT_MIN_BISECT_PROBES ? budget / 4 : VB_FIT_MIN_BISECT_PROBES;
    uint64_t hi = lowest / VB_FIT_STEP, lo = steps_too_few(events); /* in steps */
    if (hi <= lo) return VB_OK;
    vb_fit_result r_hi;
    vb_status status = vb_fit_probe(events, spec, hi * VB_FIT_STEP, VB_FIT_LIMIT, placement, 1, &r_hi);
    if (status != VB_OK) return status;
    out->probes++;
    if (!r_hi.fits) return VB_OK;
    status = bisect(events, spec, VB_FIT_LIMIT, placement, out->probes + more, &lo, &hi, out);
    if (status == VB_OK) out->lowest_fit = hi * VB_FIT_STEP;
    return status;
}

/* Under a device: from `start` (in VB_FIT_STEPs, *hi; it runs out there)
 * up in steps that double until a capacity fits (*hi), *lo following
 * each that runs out, or up to VB_FIT_MAX_CAPACITY (then *hi is 0). */
static vb_status gallop_up(const vb_drive_events *events, const char *spec, vb_sim_placement placement,
                           uint64_t *lo, uint64_t *hi, vb_fit_min *out)
{
    const uint64_t most = VB_FIT_MAX_CAPACITY / VB_FIT_STEP;
    *lo = *hi;
    for (uint64_t up = 1; *lo < most; up *= 2) {
        *hi = *lo + up < most ? *lo + up : most;
        vb_fit_result r;
        vb_status status = vb_fit_probe(events, spec, *hi * VB_FIT_STEP, VB_FIT_DEVICE, placement, 1, &r);
        if (status != VB_OK) return status;
        out->probes++;
        if (r.fits) return VB_OK;
        *lo = *hi;
    }
    *hi = 0;
    return VB_OK;
}

/* Under a device: a capacity that fits (`start`, else up from it in
 * gallop_up), a few steps down from it in steps that double
 * (DEVICE_STEPS_DOWN: the answer is often `start` itself, or just under
 * it), then a bisection down to the most under which the trace surely runs
 * out, to VB_FIT_STEP. */
#define DEVICE_STEPS_DOWN 3
static vb_status device_search(const vb_drive_events *events, const char *spec, vb_sim_placement placement,
                               uint64_t start, const vb_fit_result *known, vb_fit_min *out)
{
    const uint64_t step = VB_FIT_STEP;
    if (events->peak_live_bytes == 0) { /* it allocates nothing: any device fits, none at all too */
        out->found = 1;
        return VB_OK;
    }
    uint64_t lo = steps_too_few(events), hi = (start + step - 1) / step; /* in steps; it surely runs out at lo */
    if (hi <= lo) hi = lo + 1;
    if (hi > VB_FIT_MAX_CAPACITY / step) hi = VB_FIT_MAX_CAPACITY / step;
    if (hi <= lo) return VB_OK; /* fits nowhere */
    vb_fit_result r;
    vb_status status = first_probe(events, spec, hi * step, VB_FIT_DEVICE, placement, start, known, &r);
    if (status != VB_OK) return status;
    out->probes++;
    if (!r.fits) {
        status = gallop_up(events, spec, placement, &lo, &hi, out);
        if (status != VB_OK || hi == 0) return status; /* hi 0: fits nowhere */
    } else {
        for (uint64_t down = 1, tries = 0; tries < DEVICE_STEPS_DOWN && hi - down > lo; down *= 2, tries++) {
            status = vb_fit_probe(events, spec, (hi - down) * step, VB_FIT_DEVICE, placement, 1, &r);
            if (status != VB_OK) return status;
            out->probes++;
            if (!r.fits) {
                lo = hi - down;
                break;
            }
            hi -= down;
        }
    }
    status = bisect(events, spec, VB_FIT_DEVICE, placement, UINT_MAX, &lo, &hi, out);
    if (status != VB_OK) return status;
    out->found = 1;
    out->capacity = out->lowest_fit = hi * step;
    out->fails_at = lo ? lo * step : 0;
    return VB_OK;
}

vb_status vb_fit_min_capacity(const vb_drive_events *events, const char *spec_text, vb_fit_kind kind,
                              vb_sim_placement placement, uint64_t start, uint64_t search_events,
                              const vb_fit_result *known, vb_fit_min *out)
{
    memset(out, 0, sizeof *out);
    vb_allocator_spec spec;
    vb_status status = vb_allocator_spec_parse(spec_text, &spec);
    if (status != VB_OK) return status;
    int limited = kind == VB_FIT_LIMIT && vb_fit_has_limit(spec.name);
    vb_allocator_spec_free(&spec);
    return limited ? limit_search(events, spec_text, placement, start, search_events, known, out)
                   : device_search(events, spec_text, placement, start, known, out);
}

int vb_fit_placement_matters(const char *spec_text)
{
    vb_allocator_spec spec;
    if (vb_allocator_spec_parse(spec_text, &spec) != VB_OK) return 0;
    int matters = strcmp(spec.name, "caching") == 0;
    vb_allocator_spec_free(&spec);
    return matters;
}

vb_status vb_fit_min_capacity_placed(const vb_drive_events *events, const char *spec, vb_fit_kind kind,
                                     uint64_t start, uint64_t search_events, const vb_fit_result *const known[2],
                                     vb_fit_min *safe, uint64_t *low)
{
    vb_status status = vb_fit_min_capacity(events, spec, kind, VB_SIM_PLACE_TOP_DOWN, start, search_events,
                                           known ? known[VB_SIM_PLACE_TOP_DOWN] : NULL, safe);
    *low = safe->found ? safe->capacity : 0;
    if (status != VB_OK || !safe->found || !vb_fit_placement_matters(spec)) return status;
    vb_fit_min rising;
    status = vb_fit_min_capacity(events, spec, kind, VB_SIM_PLACE_RISING, start, search_events,
                                 known ? known[VB_SIM_PLACE_RISING] : NULL, &rising);
    if (status != VB_OK) return status;
    unsigned probes = safe->probes + rising.probes;
    if (!rising.found) {
        *safe = rising; /* fits under no capacity when placed rising */
        *low = 0;
    } else {
        *low = rising.capacity < safe->capacity ? rising.capacity : safe->capacity;
        int exact = safe->exact && rising.exact;
        uint64_t lowest_fit = safe->lowest_fit > rising.lowest_fit ? safe->lowest_fit : rising.lowest_fit;
        if (rising.capacity > safe->capacity) *safe = rising; /* its fails_at is just below */
        safe->exact = exact;
        safe->lowest_fit = lowest_fit;
    }
    safe->probes = probes;
    return VB_OK;
}

/* ---- GPUs ---- */

#define GiB_TIMES(n, percent) ((uint64_t)(n) * VB_GiB / 100 * (percent))

/* The totals: measured where a GPU of this project reported it, else the
 * nominal size less what such cards keep (ECC on GDDR memory takes 1/16;
 * others report about 1% less than nominal), rounded down: a card reports
 * at least this. */
static const vb_gpu_class gpu_classes[] = {
    {"8 GiB", "GeForce RTX 3070, RTX 4060 Ti 8GB", GiB_TIMES(8, 98), "nominal less 2%"},
    {"12 GiB", "GeForce RTX 3060 12GB, RTX 4070", GiB_TIMES(12, 98), "nominal less 2%"},
    {"16 GiB", "Tesla T4 (ECC on), V100 16GB, RTX 4080", GiB_TIMES(16, 92), "T4 with ECC: nominal less 8%"},
    {"24 GiB", "L4, A10 (ECC on), RTX 3090/4090", GiB_TIMES(24, 93), "L4/A10 with ECC: nominal less 7%"},
    {"32 GiB", "V100 32GB, RTX 5090", GiB_TIMES(32, 98), "nominal less 2%"},
    {"40 GiB", "A100 40GB", GiB_TIMES(40, 98), "nominal less 2%"},
    {"48 GiB", "L40S, A40, RTX 6000 Ada (ECC on)", GiB_TIMES(48, 93), "with ECC: nominal less 7%"},
    {"80 GiB", "A100 80GB, H100 80GB", GiB_TIMES(80, 98),
     "nominal less 2% (the H100 80GB HBM3 of results/ reports 85,017,493,504 B)"},
    {"94 GiB", "H100 NVL", GiB_TIMES(94, 98), "nominal less 2%"},
    {"141 GiB", "H200", 150109880320ull, "measured: cudaMemGetInfo total on the H200 of results/"},
};

const vb_gpu_class *vb_gpu_classes(size_t *count)
{
    *count = sizeof gpu_classes / sizeof gpu_classes[0];
    return gpu_classes;
}
