/* vrambench tests — will it fit (app/fit.h): crafted traces where the
 * order of PyTorch's out-of-memory path decides the outcome, replayed
 * under PyTorch's memory limit (set_per_process_memory_fraction) and
 * under a device's memory; the interval of limits a replay's decisions
 * hold over; the minimum-capacity search; the GPU-progress extremes.
 *
 * PyTorch's path (c10/cuda/CUDACachingAllocator.cpp, DeviceCachingAllocator::
 * malloc): best fit; garbage collection (with a limit and a threshold);
 * alloc_block, whose limit check is total_allocated_memory +
 * get_allocation_size(size) > allowed_memory_maximum; with
 * max_split_size, release_available_cached_blocks and alloc_block again
 * (not counted as a retry); release_cached_blocks (events synchronized,
 * unsplit segments freed, free chunks of expandable segments unmapped)
 * and alloc_block, counted in num_alloc_retries whether it succeeds or
 * not; then num_ooms. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "alloc_fixture.h"
#include "app/fit.h"
#include "temp_dir.h"

#define MiB VB_MiB

static vb_temp_dir dir;
static int trace_count;

static int setup(void **state)
{
    (void)state;
    return vb_temp_dir_make(&dir, "fit");
}

static int teardown(void **state)
{
    (void)state;
    return vb_temp_dir_remove(&dir);
}

/* A trace file of `text` (a vbtrace body), loaded. */
static vb_drive_events load(const char *text)
{
    char name[32];
    snprintf(name, sizeof name, "t%d.trace", trace_count++);
    const char *path = vb_temp_dir_file(&dir, name);
    FILE *file = fopen(path, "w");
    assert_non_null(file);
    fputs("vbtrace 1\n", file);
    fputs(text, file);
    fclose(file);
    vb_drive_events events;
    assert_int_equal(vb_drive_load(path, &events), VB_OK);
    return events;
}

static vb_fit_result probe(const vb_drive_events *events, const char *spec, uint64_t capacity, vb_fit_kind kind)
{
    vb_fit_result r;
    assert_int_equal(vb_fit_probe(events, spec, capacity, kind, VB_SIM_PLACE_TOP_DOWN, 0, &r), VB_OK);
    return r;
}

static vb_fit_result probe_placed(const vb_drive_events *events, const char *spec, uint64_t capacity,
                                  vb_sim_placement placement)
{
    vb_fit_result r;
    assert_int_equal(vb_fit_probe(events, spec, capacity, VB_FIT_LIMIT, placement, 0, &r), VB_OK);
    return r;
}

/* ------------------------------------------------------------------------ */
/* The limit's check, step by step                                           */
/* ------------------------------------------------------------------------ */

/* A 12 MiB segment, then a 2 MiB request: a large-pool request under 10
 * MiB takes a 20 MiB segment, so the check is 12 + 20 = 32 MiB, not
 * 12 + 2. Under a 30 MiB limit nothing cached can go (the 12 MiB block is
 * live): the last retry is counted and fails. At 32 MiB it fits. */
static void test_limit_checks_the_segment_size_not_the_request(void **state)
{
    (void)state;
    vb_drive_events e = load("a 1 12582912\na 2 2097152\nf 2\nf 1\n");
    vb_fit_result r = probe(&e, "pytorch[]", 30 * MiB, VB_FIT_LIMIT);
    assert_true(r.limited);
    assert_false(r.fits);
    assert_int_equal(r.first_oom_line, 3);
    assert_int_equal(r.ooms, 1);
    assert_int_equal(r.alloc_retries, 1); /* num_alloc_retries counts the failed last attempt */
    r = probe(&e, "pytorch[]", 32 * MiB, VB_FIT_LIMIT);
    assert_true(r.fits);
    assert_int_equal(r.peak_reserved, 32 * MiB);
    vb_drive_events_free(&e);
}

/* Expandable segments: a 40 MiB block freed at the start of the range,
 * then 50 MiB. A device of 70 MiB grows the free 40 MiB by one 20 MiB
 * chunk (60 MiB, no retry). Under a 70 MiB limit PyTorch checks 40 + 50
 * (the segment size, not the 20 MiB it would map) = 90 > 70: it releases
 * the cache (the two free chunks are unmapped), retries (counted) and maps
 * 60 MiB afresh. */
static void test_expandable_limit_checks_the_segment_size_not_the_mapping(void **state)
{
    (void)state;
    vb_drive_events e = load("a 1 41943040\nf 1\na 2 52428800\nf 2\n");
    const char *spec = "pytorch[expandable_segments:True]";
    vb_fit_result device = probe(&e, spec, 70 * MiB, VB_FIT_DEVICE);
    assert_true(device.fits);
    assert_int_equal(device.alloc_retries, 0);
    assert_int_equal(device.peak_reserved, 60 * MiB);
    vb_fit_result limit = probe(&e, spec, 70 * MiB, VB_FIT_LIMIT);
    assert_true(limit.limited);
    assert_true(limit.fits);
    assert_int_equal(limit.alloc_retries, 1);
    assert_int_equal(limit.peak_reserved, 60 * MiB);
    /* Under 89 MiB the check still refuses (90 > 89); under 90 it passes. */
    assert_int_equal(probe(&e, spec, 89 * MiB, VB_FIT_LIMIT).alloc_retries, 1);
    assert_int_equal(probe(&e, spec, 90 * MiB, VB_FIT_LIMIT).alloc_retries, 0);
    vb_drive_events_free(&e);
}

/* Expandable segments: 12 MiB maps a 20 MiB chunk; a second 12 MiB is
 * checked as 20 + 12 = 32 MiB, passes a 36 MiB limit and maps another 20
 * MiB chunk: reserved ends at 40 MiB, above the limit, as in PyTorch. */
static void test_expandable_maps_past_the_limit(void **state)
{
    (void)state;
    vb_drive_events e = load("a 1 12582912\na 2 12582912\nf 2\nf 1\n");
    vb_fit_result r = probe(&e, "pytorch[expandable_segments:True]", 36 * MiB, VB_FIT_LIMIT);
    assert_true(r.fits);
    assert_int_equal(r.peak_reserved, 40 * MiB);
    assert_true(r.peak_reserved > 36 * MiB);
    /* A device of 36 MiB cannot map the second chunk: it runs out. */
    assert_false(probe(&e, "pytorch[expandable_segments:True]", 36 * MiB, VB_FIT_DEVICE).fits);
    vb_drive_events_free(&e);
}

/* max_split_size_mb:20. Cached: a 50 MiB oversize segment and a 12 MiB
 * one. 25 MiB (a 26 MiB segment) does not take the 50 MiB block (more than
 * max_non_split_rounding larger): the check is 62 + 26 = 88 > 70 MiB.
 * release_available_cached_blocks frees the 50 MiB block alone, the next
 * attempt passes (12 + 26 = 38) and is not a retry; the 12 MiB segment
 * stays cached. */
static void test_oversize_release_comes_first_and_is_not_a_retry(void **state)
{
    (void)state;
    vb_drive_events e = load("a 1 52428800\na 2 12582912\nf 1\nf 2\na 3 26214400\nf 3\n");
    vb_fit_result r = probe(&e, "pytorch[max_split_size_mb:20]", 70 * MiB, VB_FIT_LIMIT);
    assert_true(r.fits);
    assert_int_equal(r.alloc_retries, 0);
    assert_int_equal(r.peak_reserved, 62 * MiB);
    /* The limit is what sent it there: under 88 MiB the check passes and nothing goes. */
    assert_int_equal(probe(&e, "pytorch[max_split_size_mb:20]", 88 * MiB, VB_FIT_LIMIT).peak_reserved, 88 * MiB);
    vb_drive_events_free(&e);
}

/* The state after that attempt: the 12 MiB segment is still reserved
 * (38 MiB). The defaults split the cached 50 MiB block instead (an
 * oversize block serves smaller requests only with max_split_size unset):
 * nothing released, 62 MiB. */
static void test_oversize_release_leaves_the_rest_of_the_cache(void **state)
{
    (void)state;
    vb_drive_events e = load("a 1 52428800\na 2 12582912\nf 1\nf 2\na 3 26214400\n");
    for (int i = 0; i < 2; i++) {
        const char *spec = i ? "pytorch[]" : "pytorch[max_split_size_mb:20]";
        vb_allocator_spec s;
        uint64_t sim_capacity = 0;
        int limited = 0;
        assert_int_equal(vb_fit_spec(spec, 70 * MiB, VB_FIT_LIMIT, &s, &sim_capacity, &limited), VB_OK);
        assert_true(limited);
        vb_config config = vb_allocator_spec_config(&s);
        vb_drive_target target = {0};
        vb_allocator *a = NULL;
        assert_int_equal(vb_sim_open(sim_capacity, &target.device), VB_OK);
        assert_int_equal(vb_allocator_create(s.name, target.device, &config, &a), VB_OK);
        target.allocator = a;
        vb_drive_result result;
        assert_int_equal(vb_drive(&(vb_drive_source){.events = &e}, &target, NULL, 0, &result), VB_OK);
        vb_alloc_stats stats;
        vb_allocator_stats(a, &stats);
        assert_int_equal(stats.reserved_bytes, i ? 62 * MiB : 38 * MiB);
        vb_allocator_destroy(a);
        vb_drive_target_close(&target);
        vb_device_close(target.device);
        vb_allocator_spec_free(&s);
    }
    vb_drive_events_free(&e);
}

/* garbage_collection_threshold 0.5 under a 100 MiB limit: with a cached
 * 60 MiB segment (60 > 50), a request on another stream first collects it
 * (before the limit's check): 30 MiB reserved after, one driver free, no
 * retry. Without collection the check passes (60 + 30 <= 100) and both
 * stay. */
static void test_garbage_collection_comes_before_the_check(void **state)
{
    (void)state;
    vb_drive_events e = load("a 1 62914560\nf 1\na 2 31457280 1\n");
    vb_fit_result gc = probe(&e, "pytorch[garbage_collection_threshold:0.5]", 100 * MiB, VB_FIT_LIMIT);
    assert_true(gc.fits);
    assert_int_equal(gc.alloc_retries, 0);
    assert_int_equal(gc.peak_reserved, 60 * MiB);
    vb_fit_result plain = probe(&e, "pytorch[]", 100 * MiB, VB_FIT_LIMIT);
    assert_int_equal(plain.peak_reserved, 90 * MiB);
    /* Collection depends on the limit: under 120 MiB (threshold 60) it does not act. */
    assert_int_equal(probe(&e, "pytorch[garbage_collection_threshold:0.5]", 120 * MiB, VB_FIT_LIMIT).peak_reserved,
                     90 * MiB);
    vb_drive_events_free(&e);
}

/* release_cached_blocks waits for record_stream's events first: a 40 MiB
 * block freed while another stream's work is queued is freed by that wait
 * and released, and the retry succeeds (under a limit of 64 MiB, a 50 MiB
 * request). */
static void test_events_are_waited_for_before_the_cache_is_released(void **state)
{
    (void)state;
    const char *const settings[] = {"memory_fraction=0.5", NULL};
    vb_alloc_fixture *f = vb_fixture_open("caching", 128 * MiB, settings);
    vb_addr a = vb_must_malloc(f, 40 * MiB);
    vb_free_while_used_on_busy_stream(f, a, 1000000);
    uint64_t before = vb_sim_now(f->dev);
    vb_must_malloc(f, 50 * MiB);
    vb_alloc_stats s = vb_fixture_stats(f);
    assert_int_equal(s.alloc_retries, 1);
    assert_int_equal(s.ooms, 0);
    assert_int_equal(s.reserved_bytes, 50 * MiB);
    assert_true(vb_sim_now(f->dev) >= before + 1000000); /* the other stream's work had to finish */
    vb_fixture_close(f);
}

/* ------------------------------------------------------------------------ */
/* Limits and devices; the interval of equal decisions; the search           */
/* ------------------------------------------------------------------------ */

/* A trace with a churn of sizes (the default stream and stream 1). */
static const char *churn_trace(void)
{
    static char text[1 << 16];
    if (text[0]) return text;
    size_t used = 0;
    uint64_t seed = 7;
    int live[64] = {0};
    for (int i = 0; i < 600; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        int slot = (int)((seed >> 33) % 64);
        if (live[slot]) {
            used += (size_t)snprintf(text + used, sizeof text - used, "f %d\n", slot);
            live[slot] = 0;
        } else {
            uint64_t size = ((seed >> 17) % (48 * MiB)) + 1;
            used += (size_t)snprintf(text + used, sizeof text - used, "a %d %llu %d\n", slot, (unsigned long long)size,
                                     (int)((seed >> 7) & 1));
            live[slot] = 1;
        }
    }
    return text;
}

/* For caching (no garbage collection) a limit and a device are one: the
 * same outcome, retries and peak at every capacity tried. */
static void test_caching_limit_and_device_agree(void **state)
{
    (void)state;
    vb_drive_events e = load(churn_trace());
    for (uint64_t capacity = 200 * MiB; capacity <= 900 * MiB; capacity += 50 * MiB) {
        vb_fit_result limit = probe(&e, "pytorch[]", capacity, VB_FIT_LIMIT);
        vb_fit_result device = probe(&e, "pytorch[]", capacity, VB_FIT_DEVICE);
        assert_true(limit.limited);
        assert_false(device.limited);
        assert_int_equal(limit.fits, device.fits);
        assert_int_equal(limit.ooms, device.ooms);
        assert_int_equal(limit.alloc_retries, device.alloc_retries);
        assert_int_equal(limit.peak_reserved, device.peak_reserved);
    }
    vb_drive_events_free(&e);
}

/* Every limit in a probe's [same_from, same_to) gives the same replay. */
static void test_same_limit_interval_gives_the_same_replay(void **state)
{
    (void)state;
    vb_drive_events e = load(churn_trace());
    const char *const specs[] = {"pytorch[]", "pytorch[max_split_size_mb:20]", "pytorch[expandable_segments:True]",
                                 "pytorch[garbage_collection_threshold:0.6]"};
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++)
        for (uint64_t capacity = 300 * MiB; capacity <= 700 * MiB; capacity += 100 * MiB) {
            vb_fit_result r = probe(&e, specs[s], capacity, VB_FIT_LIMIT);
            assert_true(r.same_from <= capacity);
            assert_true(r.same_to == 0 || r.same_to > capacity);
            uint64_t ends[2] = {r.same_from, r.same_to ? r.same_to - 1 : capacity + VB_GiB};
            for (int i = 0; i < 2; i++) {
                vb_fit_result other = probe(&e, specs[s], ends[i], VB_FIT_LIMIT);
                assert_int_equal(other.fits, r.fits);
                assert_int_equal(other.ooms, r.ooms);
                assert_int_equal(other.alloc_retries, r.alloc_retries);
                assert_int_equal(other.peak_reserved, r.peak_reserved);
                assert_int_equal(other.first_oom_line, r.first_oom_line);
            }
        }
    vb_drive_events_free(&e);
}

/* `spec` fits under the limit `capacity` and every 2 MiB step above it,
 * to 40 MiB past its peak under a limit that refuses nothing. */
static void assert_fits_from_up(const vb_drive_events *e, const char *spec, uint64_t capacity)
{
    uint64_t peak = probe(e, spec, 4 * VB_GiB, VB_FIT_LIMIT).peak_reserved;
    for (uint64_t c = capacity; c <= peak + 40 * MiB; c += 2 * MiB)
        assert_true(probe(e, spec, c, VB_FIT_LIMIT).fits);
}

/* The minimum capacity is safe and tight: the replay fits under it and
 * under every 2 MiB step up to the peak, and not 1 byte below it. */
static void test_min_capacity_fits_from_there_up(void **state)
{
    (void)state;
    vb_drive_events e = load(churn_trace());
    const char *const specs[] = {"pytorch[]", "pytorch[max_split_size_mb:20]", "pytorch[expandable_segments:True]",
                                 "pytorch[garbage_collection_threshold:0.6]"};
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
        vb_fit_min m;
        assert_int_equal(vb_fit_min_capacity(&e, specs[s], VB_FIT_LIMIT, VB_SIM_PLACE_TOP_DOWN, 4 * VB_GiB, 0, NULL, &m), VB_OK);
        assert_true(m.found);
        assert_true(m.exact);
        assert_int_equal(m.fails_at, m.capacity - 1);
        assert_false(probe(&e, specs[s], m.capacity - 1, VB_FIT_LIMIT).fits);
        assert_fits_from_up(&e, specs[s], m.capacity);
    }
    vb_drive_events_free(&e);
}

/* Allocations of at most 1 MiB live in the small pool, and garbage
 * collection frees whole large-pool segments only: with none to free, it
 * decides nothing, so under every limit the replay is PyTorch's defaults',
 * the same runs of limits (not one per threshold crossed) and the same
 * minimum, in as many replays. */
static void garbage_collection_with_nothing_to_collect_decides_as_without_it(void **state)
{
    (void)state;
    static char text[1 << 16];
    size_t used = 0;
    uint64_t seed = 11;
    int live[128] = {0};
    for (int i = 0; i < 1500; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        int slot = (int)((seed >> 33) % 128);
        if (live[slot]) used += (size_t)snprintf(text + used, sizeof text - used, "f %d\n", slot);
        else used += (size_t)snprintf(text + used, sizeof text - used, "a %d %llu\n", slot,
                                      (unsigned long long)((seed >> 17) % MiB + 1));
        live[slot] = !live[slot];
    }
    vb_drive_events e = load(text);
    const char *plain = "pytorch[]", *collects = "pytorch[garbage_collection_threshold:0.6]";
    for (uint64_t capacity = 40 * MiB; capacity <= 400 * MiB; capacity += 60 * MiB) {
        vb_fit_result a = probe(&e, plain, capacity, VB_FIT_LIMIT), b = probe(&e, collects, capacity, VB_FIT_LIMIT);
        assert_int_equal(b.fits, a.fits);
        assert_int_equal(b.peak_reserved, a.peak_reserved);
        assert_int_equal(b.same_from, a.same_from);
        assert_int_equal(b.same_to, a.same_to);
    }
    vb_fit_min a, b;
    assert_int_equal(vb_fit_min_capacity(&e, plain, VB_FIT_LIMIT, VB_SIM_PLACE_TOP_DOWN, VB_GiB, 0, NULL, &a), VB_OK);
    assert_int_equal(vb_fit_min_capacity(&e, collects, VB_FIT_LIMIT, VB_SIM_PLACE_TOP_DOWN, VB_GiB, 0, NULL, &b), VB_OK);
    assert_true(a.exact && b.exact);
    assert_int_equal(b.capacity, a.capacity);
    assert_int_equal(b.probes, a.probes);
    vb_drive_events_free(&e);
}

/* A search whose budget runs out stays safe: it fits under its answer and
 * every 2 MiB step above it (exact or not), the fit it saw lowest is no
 * higher, and it made no more replays than the budget's least share and
 * the bisection's. */
static void a_search_past_its_budget_stays_safe(void **state)
{
    (void)state;
    vb_drive_events e = load(churn_trace());
    const char *const specs[] = {"pytorch[max_split_size_mb:20]", "pytorch[garbage_collection_threshold:0.6]"};
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++) {
        vb_fit_min m, full;
        assert_int_equal(vb_fit_min_capacity(&e, specs[s], VB_FIT_LIMIT, VB_SIM_PLACE_TOP_DOWN, 4 * VB_GiB, 1, NULL, &m),
                         VB_OK);
        assert_int_equal(vb_fit_min_capacity(&e, specs[s], VB_FIT_LIMIT, VB_SIM_PLACE_TOP_DOWN, 4 * VB_GiB, 0, NULL, &full),
                         VB_OK);
        assert_true(m.found && full.exact);
        assert_true(m.probes <= VB_FIT_MIN_WALK_PROBES + 1 + VB_FIT_MIN_BISECT_PROBES);
        assert_true(m.capacity >= full.capacity);
        assert_true(m.lowest_fit <= m.capacity);
        assert_true(probe(&e, specs[s], m.lowest_fit, VB_FIT_LIMIT).fits);
        assert_fits_from_up(&e, specs[s], m.capacity);
    }
    vb_drive_events_free(&e);
}

/* Under a device, where fitting is monotone (cuda: the same driver calls
 * under any device until one is refused), the search answers the same
 * minimum from any start, above or below it: it fits there and not one
 * step below. */
static void a_device_search_answers_the_same_from_any_start(void **state)
{
    (void)state;
    vb_drive_events e = load(churn_trace());
    const uint64_t starts[] = {4 * VB_GiB, 64 * MiB, 1, 300 * MiB, 28 * VB_TiB};
    vb_fit_min first;
    for (size_t i = 0; i < sizeof starts / sizeof starts[0]; i++) {
        vb_fit_min m;
        assert_int_equal(vb_fit_min_capacity(&e, "cuda", VB_FIT_DEVICE, VB_SIM_PLACE_TOP_DOWN, starts[i], 0, NULL, &m),
                         VB_OK);
        assert_true(m.found);
        if (i == 0) first = m;
        assert_int_equal(m.capacity, first.capacity);
        assert_true(probe(&e, "cuda", m.capacity, VB_FIT_DEVICE).fits);
        assert_false(probe(&e, "cuda", m.capacity - 2 * MiB, VB_FIT_DEVICE).fits);
    }
    vb_drive_events_free(&e);
}

/* A replay already made at the search's start (tune's probe at the
 * capacity) stands for the search's first: the same minimum, found in the
 * same number of replays, whether it fits there or not (then the search
 * makes its own, which stops at the OOM), under a limit or a device, in
 * either placement. */
static void test_a_known_first_replay_changes_no_search(void **state)
{
    (void)state;
    vb_drive_events e = load(churn_trace());
    const char *const specs[] = {"pytorch[]", "pytorch[max_split_size_mb:20]", "pytorch[expandable_segments:True]",
                                 "pytorch[garbage_collection_threshold:0.6]", "bfc", "stitch"};
    const uint64_t starts[] = {4 * VB_GiB, 64 * MiB};
    for (size_t s = 0; s < sizeof specs / sizeof specs[0]; s++)
        for (size_t i = 0; i < sizeof starts / sizeof starts[0]; i++)
            for (vb_fit_kind kind = VB_FIT_LIMIT; kind <= VB_FIT_DEVICE; kind++)
                for (int p = VB_SIM_PLACE_TOP_DOWN; p <= VB_SIM_PLACE_RISING; p++) {
                    vb_sim_placement placement = (vb_sim_placement)p;
                    vb_fit_min searched, given;
                    vb_fit_result known;
                    assert_int_equal(vb_fit_min_capacity(&e, specs[s], kind, placement, starts[i], 0, NULL, &searched),
                                     VB_OK);
                    assert_int_equal(vb_fit_probe(&e, specs[s], starts[i], kind, placement, 0, &known), VB_OK);
                    assert_int_equal(known.fits, starts[i] > 64 * MiB);
                    assert_int_equal(vb_fit_min_capacity(&e, specs[s], kind, placement, starts[i], 0, &known, &given),
                                     VB_OK);
                    assert_memory_equal(&given, &searched, sizeof searched);
                }
    vb_drive_events_free(&e);
}

/* Two free 20 MiB blocks tie for a 10 MiB request: the tail of a 40 MiB
 * segment (its head live) and a whole 20 MiB segment made after it. Best
 * fit takes the lower address: placed top-down, the newer segment, so the
 * 40 MiB one frees up whole and later serves 30 MiB (60 MiB reserved);
 * placed rising, the older one's tail, so 30 MiB needs a new segment, and
 * under a limit only the whole 20 MiB one can be released for it (70 MiB). */
static const char *placement_trace(void)
{
    return "a 0 41943040\n"  /* S1: 40 MiB */
           "f 0\n"
           "a 1 20971520\n"  /* S1's head */
           "a 2 20971520\n"  /* S1's tail */
           "a 3 20971520\n"  /* S2: 20 MiB */
           "f 2\n"
           "f 3\n"           /* the tie: S1's tail and S2 */
           "a 4 10485760\n"
           "f 1\n"
           "a 5 31457280\n"; /* 30 MiB */
}

/* Where the driver puts segments can decide whether a job fits: the
 * minimum under both placements is the larger one's, exact, it fits under
 * either from there up, and the smaller one is the interval's low end. */
static void min_capacity_covers_both_placements(void **state)
{
    (void)state;
    vb_drive_events e = load(placement_trace());
    const char *spec = "pytorch[]";
    assert_int_equal(probe_placed(&e, spec, 4 * VB_GiB, VB_SIM_PLACE_TOP_DOWN).peak_reserved, 60 * MiB);
    assert_int_equal(probe_placed(&e, spec, 4 * VB_GiB, VB_SIM_PLACE_RISING).peak_reserved, 90 * MiB);
    vb_fit_min down, up, both;
    uint64_t low = 0;
    assert_int_equal(vb_fit_min_capacity(&e, spec, VB_FIT_LIMIT, VB_SIM_PLACE_TOP_DOWN, 4 * VB_GiB, 0, NULL, &down), VB_OK);
    assert_int_equal(vb_fit_min_capacity(&e, spec, VB_FIT_LIMIT, VB_SIM_PLACE_RISING, 4 * VB_GiB, 0, NULL, &up), VB_OK);
    assert_int_equal(down.capacity, 60 * MiB);
    assert_int_equal(up.capacity, 70 * MiB);
    assert_int_equal(vb_fit_min_capacity_placed(&e, spec, VB_FIT_LIMIT, 4 * VB_GiB, 0, NULL, &both, &low), VB_OK);
    assert_true(both.found && both.exact);
    assert_int_equal(both.capacity, 70 * MiB);
    assert_int_equal(low, 60 * MiB);
    assert_int_equal(both.fails_at, 70 * MiB - 1);
    assert_false(probe_placed(&e, spec, both.fails_at, VB_SIM_PLACE_RISING).fits);
    for (uint64_t c = both.capacity; c <= 100 * MiB; c += 2 * MiB) {
        assert_true(probe_placed(&e, spec, c, VB_SIM_PLACE_TOP_DOWN).fits);
        assert_true(probe_placed(&e, spec, c, VB_SIM_PLACE_RISING).fits);
    }
    /* Expandable segments take one reservation's addresses: one search. */
    assert_false(vb_fit_placement_matters("pytorch[expandable_segments:True]"));
    assert_true(vb_fit_placement_matters("pytorch[roundup_power2_divisions:4]"));
    vb_drive_events_free(&e);
}

/* A limit's sim: memory_fraction 2^-k of 2^k x the capacity, exact. */
static void test_limit_spec_is_exact(void **state)
{
    (void)state;
    const uint64_t capacities[] = {2 * MiB, 3722 * MiB + 12345, 80 * VB_GiB, 150109880320ull};
    for (size_t i = 0; i < sizeof capacities / sizeof capacities[0]; i++) {
        vb_allocator_spec spec;
        uint64_t sim = 0;
        int limited = 0;
        assert_int_equal(vb_fit_spec("pytorch[garbage_collection_threshold:0.6,per_process_memory_fraction:1.0]",
                                     capacities[i], VB_FIT_LIMIT, &spec, &sim, &limited),
                         VB_OK);
        assert_true(limited);
        const char *fraction = NULL;
        for (size_t j = 0; j < spec.entry_count; j++)
            if (strcmp(spec.entries[j].key, "memory_fraction") == 0) fraction = spec.entries[j].value;
        assert_non_null(fraction);
        assert_true(sim >= capacities[i] + VB_GiB);
        assert_int_equal((uint64_t)(strtod(fraction, NULL) * (double)sim), capacities[i]);
        vb_allocator_spec_free(&spec);
    }
}

/* ------------------------------------------------------------------------ */
/* GPU progress (the async backend's pool)                                   */
/* ------------------------------------------------------------------------ */

/* 15 MiB on stream 1, 15 MiB on stream 2 and 1 MiB kept live share a 32
 * MiB granule; the two freed, then 30 MiB on stream 1. GPU infinitely
 * fast: the two frees are complete and merge, the 30 MiB goes there (32
 * MiB reserved). GPU as late as allowed: they are pending on two streams
 * and do not merge, and the granule is not idle (the 1 MiB lives), so the
 * pool takes a new one (64 MiB). */
static void test_progress_extremes_bound_the_pool(void **state)
{
    (void)state;
    vb_drive_events e = load("a 1 15728640 1\na 2 15728640 2\na 4 1048576 1\nf 1 1\nf 2 2\na 3 31457280 1\n"
                             "f 3 1\nf 4 1\n");
    vb_fit_result fast, late, replay;
    assert_int_equal(vb_fit_probe_progress(&e, "async", VB_GiB, VB_PROGRESS_FAST, &fast), VB_OK);
    assert_int_equal(vb_fit_probe_progress(&e, "async", VB_GiB, VB_PROGRESS_LATE, &late), VB_OK);
    assert_int_equal(vb_fit_probe_progress(&e, "async", VB_GiB, VB_PROGRESS_REPLAY, &replay), VB_OK);
    assert_int_equal(fast.peak_reserved, 32 * MiB);
    assert_int_equal(late.peak_reserved, 64 * MiB);
    assert_true(fast.peak_reserved <= replay.peak_reserved && replay.peak_reserved <= late.peak_reserved);
    vb_drive_events_free(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_limit_checks_the_segment_size_not_the_request),
        cmocka_unit_test(test_expandable_limit_checks_the_segment_size_not_the_mapping),
        cmocka_unit_test(test_expandable_maps_past_the_limit),
        cmocka_unit_test(test_oversize_release_comes_first_and_is_not_a_retry),
        cmocka_unit_test(test_oversize_release_leaves_the_rest_of_the_cache),
        cmocka_unit_test(test_garbage_collection_comes_before_the_check),
        cmocka_unit_test(test_events_are_waited_for_before_the_cache_is_released),
        cmocka_unit_test(test_caching_limit_and_device_agree),
        cmocka_unit_test(test_same_limit_interval_gives_the_same_replay),
        cmocka_unit_test(test_min_capacity_fits_from_there_up),
        cmocka_unit_test(test_a_known_first_replay_changes_no_search),
        cmocka_unit_test(garbage_collection_with_nothing_to_collect_decides_as_without_it),
        cmocka_unit_test(a_search_past_its_budget_stays_safe),
        cmocka_unit_test(a_device_search_answers_the_same_from_any_start),
        cmocka_unit_test(test_limit_spec_is_exact),
        cmocka_unit_test(min_capacity_covers_both_placements),
        cmocka_unit_test(test_progress_extremes_bound_the_pool),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
