/* vrambench — unit tests of `stitch` (expandable segments that stitch) on
 * the simulated device (2 MiB mapping granularity).
 *
 * Every expected number is worked out in the comments from the rules of
 * allocators/stitch.c and allocators/vm_range.c, default options
 * (chunk_mb=8: a large-pool growth creates at least 8 MiB; handle_max_mb=64:
 * and handles of at most 64 MiB):
 *   blocks: caching_core's: 512 B rounding, best fit, split, coalescing,
 *           inside one reserved range per (stream, pool);
 *   growth: a request no free block serves maps new memory at the lowest
 *           place of its stream's range where free and unmapped space hold
 *           it (normally the mapped end): one physical handle of what it
 *           lacks rounded up to 2 MiB (at least chunk_mb in the large
 *           pool, 2 MiB in the small; several of at most handle_max_mb),
 *           one vm_map per handle and one vm_set_access over the handles
 *           mapped together;
 *   stitch: that memory comes first from holes: handles lying wholly
 *           inside a free block (of any stream's range of the same pool,
 *           not the blocks the request grows), each unmapped there (one
 *           vm_unmap per handle) and mapped again; vm_create only for the
 *           rest.
 * With stitch_max_maps=N (0, none, by default; the tests of "Stitched
 * ranges" below use 16) a large request no free block serves is first
 * served by a stitched range: the handles that free blocks (holes) of the
 * pool's ranges hold from a handle start on, mapped whole and side by side
 * into a reservation of its own (one vm_map per handle, one vm_set_access,
 * nothing unmapped, no new memory): while no hole offers all that is still
 * needed, the whole handles of the hole with the most; then the hole that
 * offers the rest with the least to spare, only the bytes used lent. A
 * freed stitched block gives its bytes back to their holes and stays
 * mapped; a later request of its size whose bytes are free again takes it
 * with no driver call. A small-pool growth takes 2 MiB so, from a hole of
 * the large pool.
 * vm_map, vm_set_access and vm_unmap calls are counted by a proxy of the
 * sim's ops table; vm_create calls are the seam's driver_alloc_calls.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "allocators/allocator.h"
#include "alloc_fixture.h"
#include "app/trace.h"

#define MiB VB_MiB

/* ------------------------------------------------------------------------ */
/* A sim whose vm_map / vm_unmap calls are counted                           */
/* ------------------------------------------------------------------------ */

/* The sim's ops reach their state through dev->state only, so a device with
 * the sim's state and a copy of its ops table behaves as the sim itself. */
static vb_device counted_device;
static vb_device_ops counted_ops;
static const vb_device_ops *sim_ops;
static uint64_t map_calls, unmap_calls, set_access_calls, unmapped_bytes;

static vb_status counted_vm_map(vb_device *dev, vb_addr addr, uint64_t size, vb_phys handle)
{
    map_calls++;
    return sim_ops->vm_map(dev, addr, size, handle);
}

static vb_status counted_vm_set_access(vb_device *dev, vb_addr addr, uint64_t size)
{
    set_access_calls++;
    return sim_ops->vm_set_access(dev, addr, size);
}

static vb_status counted_vm_unmap(vb_device *dev, vb_addr addr, uint64_t size)
{
    unmap_calls++;
    unmapped_bytes += size;
    return sim_ops->vm_unmap(dev, addr, size);
}

/* `stitch` with `settings` (NULL-terminated "key=value"s, or NULL) on a
 * sim of `capacity` bytes (0: 80 GiB) seen through the counting proxy; the
 * counts start at 0. */
static vb_alloc_fixture *open_stitch_with(uint64_t capacity, const char *const *settings)
{
    vb_alloc_fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(vb_sim_open(capacity, &f->dev), VB_OK);
    sim_ops = f->dev->ops;
    counted_ops = *sim_ops;
    counted_ops.vm_map = counted_vm_map;
    counted_ops.vm_unmap = counted_vm_unmap;
    counted_ops.vm_set_access = counted_vm_set_access;
    counted_device.ops = &counted_ops;
    counted_device.state = f->dev->state;
    map_calls = unmap_calls = set_access_calls = unmapped_bytes = 0;
    vb_config_entry entries[8];
    char text[8][64];
    vb_config config = {.entries = entries, .count = 0};
    for (size_t i = 0; settings && settings[i]; i++) {
        snprintf(text[i], sizeof text[i], "%s", settings[i]);
        assert_int_equal(vb_config_entry_parse(text[i], &entries[config.count++]), VB_OK);
    }
    assert_int_equal(vb_allocator_create("stitch", &counted_device, &config, &f->alloc), VB_OK);
    return f;
}

/* `stitch` with the default options (see open_stitch_with). */
static vb_alloc_fixture *open_stitch(uint64_t capacity)
{
    return open_stitch_with(capacity, NULL);
}

/* ------------------------------------------------------------------------ */
/* Fragmentation: free memory in non-adjacent pieces                         */
/* ------------------------------------------------------------------------ */

/* a..e = 20 MiB each (live together, 100 MiB); free a, c, e (60 MiB free in
 * three pieces, a and c between live blocks); f = 60 MiB, returned. */
static vb_addr stranding_sequence(vb_alloc_fixture *f)
{
    vb_addr block[5];
    for (int i = 0; i < 5; i++) block[i] = vb_must_malloc(f, 20 * MiB);
    vb_must_free(f, block[0]);
    vb_must_free(f, block[2]);
    vb_must_free(f, block[4]);
    return vb_must_malloc(f, 60 * MiB);
}

/* Peak reserved bytes of the stranding sequence:
 * caching: 20 MiB >= 10 MiB is its own segment rounded to 2 MiB, so five
 *   20 MiB segments (100). The free 20 MiB blocks cannot hold 60: a new
 *   60 MiB segment. Peak 100 + 60 = 160 MiB.
 * expandable: one range, 20 MiB chunks: a..e map chunks 0-4 (100). f finds
 *   no free block of 60; the free block e at the mapped end [80,100) grows
 *   by two chunks into [80,140). Peak 140 MiB; a and c stay stranded.
 * stitch: as expandable, but the two chunks f grows by are those of the
 *   holes a and c, unmapped and mapped at [100,140). Peak 100 MiB. */
static uint64_t stranding_sequence_peak(vb_alloc_fixture *f)
{
    stranding_sequence(f);
    uint64_t peak = vb_fixture_stats(f).reserved_bytes_peak;
    vb_fixture_close(f);
    return peak;
}

static void test_caching_strands_the_free_pieces_peak_160mib(void **state)
{
    (void)state;
    assert_int_equal(stranding_sequence_peak(vb_fixture_open("caching", 0, NULL)), 160 * MiB);
}

static void test_expandable_strands_the_inner_pieces_peak_140mib(void **state)
{
    (void)state;
    assert_int_equal(stranding_sequence_peak(vb_fixture_open("expandable", 0, NULL)), 140 * MiB);
}

static void test_stitch_serves_the_big_request_from_the_holes_peak_100mib(void **state)
{
    (void)state;
    assert_int_equal(stranding_sequence_peak(open_stitch(0)), 100 * MiB);
}

/* The same sequence's driver calls: 5 chunks created for a..e (5 maps, 5
 * set_access), none for f, which moves the chunks of a and c: 2 unmaps (40
 * MiB), 2 maps, one set_access over both; nothing released. e's chunk is
 * not moved: f grows e's block, and taking from it would only map the same
 * chunk back. */
static void test_stitched_request_takes_no_new_device_memory(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_stitch(0);
    assert_true(vb_sim_accessible(f->dev, stranding_sequence(f), 60 * MiB));
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.driver_alloc_calls, 5);
    assert_int_equal(stats.driver_free_calls, 0);
    assert_int_equal(unmap_calls, 2);
    assert_int_equal(unmapped_bytes, 40 * MiB);
    assert_int_equal(map_calls, 5 + 2);
    assert_int_equal(set_access_calls, 5 + 1);
    vb_fixture_close(f);
}

/* On a sim of exactly 100 MiB, stitch serves f from the holes at once;
 * expandable can map no new chunk, so it frees its whole cache (unmapping
 * a, c and e) and retries: one alloc_retry. Neither runs out of memory. */
static void test_stitch_needs_no_cache_flush_at_capacity(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_stitch(100 * MiB);
    stranding_sequence(f);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.alloc_retries, 0);
    assert_int_equal(stats.ooms, 0);
    vb_fixture_close(f);
    f = vb_fixture_open("expandable", 100 * MiB, NULL);
    stranding_sequence(f);
    stats = vb_fixture_stats(f);
    assert_int_equal(stats.alloc_retries, 1);
    assert_int_equal(stats.ooms, 0);
    vb_fixture_close(f);
}

/* x = 15 MiB maps handle [0,16); y = 10 MiB lacks 9 beyond the free
 * [15,16): handle [16,26); z = 15 MiB lacks 14: handle [26,40). y freed
 * leaves [15,25), which holds no whole handle ([16,26) still holds z's
 * first MiB). w = 20 MiB fits no free block and no hole has a handle: a new
 * 20 MiB one (4 created, no unmap, reserved 16 + 10 + 14 + 20 = 60 MiB). */
static void test_hole_smaller_than_a_chunk_is_not_taken(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_stitch(0);
    vb_must_malloc(f, 15 * MiB);
    vb_addr y = vb_must_malloc(f, 10 * MiB);
    vb_must_malloc(f, 15 * MiB);
    vb_must_free(f, y);
    vb_must_malloc(f, 20 * MiB);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.driver_alloc_calls, 4);
    assert_int_equal(unmap_calls, 0);
    assert_int_equal(stats.reserved_bytes, 60 * MiB);
    vb_fixture_close(f);
}

/* a, b, c = 20 MiB on stream s; b freed is a hole of s's range. 20 MiB on
 * stream t (which never reuses s's free blocks) gets a range of its own,
 * and the chunk it maps is b's: 3 created, 1 unmap, reserved 60 MiB. */
static void test_hole_of_another_stream_is_taken(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_stitch(0);
    vb_stream s = vb_fixture_stream(f), t = vb_fixture_stream(f);
    vb_must_malloc_on(f, 20 * MiB, s);
    vb_addr b = vb_must_malloc_on(f, 20 * MiB, s);
    vb_must_malloc_on(f, 20 * MiB, s);
    vb_must_free(f, b);
    vb_addr on_t = vb_must_malloc_on(f, 20 * MiB, t);
    assert_true(vb_sim_accessible(f->dev, on_t, 20 * MiB));
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.driver_alloc_calls, 3);
    assert_int_equal(unmap_calls, 1);
    assert_int_equal(stats.reserved_bytes, 60 * MiB);
    vb_fixture_close(f);
}

/* A block freed while another stream still uses it (record_stream) is not
 * a hole until that work is done: a, b, c = 20 MiB, b freed so; another 20
 * MiB creates a chunk (4 created, no unmap, reserved 80 MiB). */
static void test_block_freed_while_in_use_is_not_taken(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_stitch(0);
    vb_must_malloc(f, 20 * MiB);
    vb_addr b = vb_must_malloc(f, 20 * MiB);
    vb_must_malloc(f, 20 * MiB);
    vb_free_while_used_on_busy_stream(f, b, 1000000);
    vb_must_malloc(f, 20 * MiB);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.driver_alloc_calls, 4);
    assert_int_equal(unmap_calls, 0);
    assert_int_equal(stats.reserved_bytes, 80 * MiB);
    vb_fixture_close(f);
}

/* A hole of the small pool does not serve the large pool (a handle moved
 * there would serve only small requests): six 1 MiB blocks fill small
 * handles 0-2; the third and fourth freed leave handle 1 whole and free;
 * 2 MiB (a large request) creates an 8 MiB handle: 4 created, no unmap,
 * reserved 6 + 8 = 14 MiB. */
static void test_small_pool_hole_is_not_taken_by_the_large_pool(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_stitch(0);
    vb_addr small[6];
    for (int i = 0; i < 6; i++) small[i] = vb_must_malloc(f, 1 * MiB);
    vb_must_free(f, small[2]);
    vb_must_free(f, small[3]);
    vb_addr large = vb_must_malloc(f, 2 * MiB);
    assert_true(vb_sim_accessible(f->dev, large, 2 * MiB));
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.driver_alloc_calls, 4);
    assert_int_equal(unmap_calls, 0);
    assert_int_equal(stats.reserved_bytes, 14 * MiB);
    vb_fixture_close(f);
}

/* ------------------------------------------------------------------------ */
/* Stitched ranges (stitch_max_maps)                                         */
/* ------------------------------------------------------------------------ */

/* `stitch` with stitched ranges of up to 16 mappings. */
static vb_alloc_fixture *open_stitching(uint64_t capacity)
{
    const char *const settings[] = {"stitch_max_maps=16", NULL};
    return open_stitch_with(capacity, settings);
}

/* The stranding sequence with stitched ranges: 5 handles created for a..e
 * (5 maps, 5 set_access); f maps the handles of the three holes a, c and
 * e again, whole, where they are (3 maps, one set_access over them), and
 * nothing is unmapped, created or released. Peak 100 MiB. */
static void test_stitched_request_maps_the_holes_handles_again(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_stitching(0);
    assert_true(vb_sim_accessible(f->dev, stranding_sequence(f), 60 * MiB));
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.driver_alloc_calls, 5);
    assert_int_equal(stats.driver_free_calls, 0);
    assert_int_equal(stats.reserved_bytes_peak, 100 * MiB);
    assert_int_equal(unmap_calls, 0);
    assert_int_equal(map_calls, 5 + 3);
    assert_int_equal(set_access_calls, 5 + 1);
    vb_fixture_close(f);
}

/* f freed gives a, c and e back to the range: 20 MiB then fits a's free
 * block again, with no driver call and no new memory. */
static void test_freed_stitched_block_gives_its_holes_back(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_stitching(0);
    vb_must_free(f, stranding_sequence(f));
    int maps = map_calls;
    assert_true(vb_sim_accessible(f->dev, vb_must_malloc(f, 20 * MiB), 20 * MiB));
    assert_int_equal(map_calls, maps);
    assert_int_equal(vb_fixture_stats(f).reserved_bytes, 100 * MiB);
    vb_fixture_close(f);
}

/* f freed and asked for again while its holes are free: it takes the same
 * stitched range, no driver call, the same address. */
static void test_stitched_range_is_reused_with_no_driver_call(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_stitching(0);
    vb_addr stitched = stranding_sequence(f);
    vb_must_free(f, stitched);
    int maps = map_calls, accesses = set_access_calls;
    assert_int_equal(vb_must_malloc(f, 60 * MiB), stitched);
    assert_int_equal(map_calls, maps);
    assert_int_equal(set_access_calls, accesses);
    assert_int_equal(vb_fixture_stats(f).driver_alloc_calls, 5);
    vb_fixture_close(f);
}

/* a..d = 20 MiB, one handle each; a and c freed. 30 MiB: no hole offers
 * it all, so a's whole handle, then the rest from c, the hole that offers
 * it: both handles mapped whole (2 maps), but only c's first 10 MiB lent,
 * so 10 MiB then fits the rest of c where it is, with no driver call.
 * Nothing created past a..d: reserved 80 MiB. */
static void test_stitched_block_lends_only_the_bytes_it_uses(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_stitching(0);
    vb_addr block[4];
    for (int i = 0; i < 4; i++) block[i] = vb_must_malloc(f, 20 * MiB);
    vb_must_free(f, block[0]);
    vb_must_free(f, block[2]);
    assert_true(vb_sim_accessible(f->dev, vb_must_malloc(f, 30 * MiB), 30 * MiB));
    assert_int_equal(map_calls, 4 + 2);
    vb_addr rest = vb_must_malloc(f, 10 * MiB);
    assert_int_equal(rest, block[2] + 10 * MiB);
    assert_int_equal(map_calls, 4 + 2);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.driver_alloc_calls, 4);
    assert_int_equal(stats.reserved_bytes, 80 * MiB);
    vb_fixture_close(f);
}

/* a, b, c = 20 MiB on stream s; b freed is a hole of s's range. 20 MiB on
 * stream t (which never reuses s's free blocks) maps b's handle again
 * (after waiting for s): 3 created, no unmap, 1 map, reserved 60 MiB. */
static void test_stitched_range_takes_a_hole_of_another_stream(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_stitching(0);
    vb_stream s = vb_fixture_stream(f), t = vb_fixture_stream(f);
    vb_must_malloc_on(f, 20 * MiB, s);
    vb_addr b = vb_must_malloc_on(f, 20 * MiB, s);
    vb_must_malloc_on(f, 20 * MiB, s);
    vb_must_free(f, b);
    assert_true(vb_sim_accessible(f->dev, vb_must_malloc_on(f, 20 * MiB, t), 20 * MiB));
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.driver_alloc_calls, 3);
    assert_int_equal(unmap_calls, 0);
    assert_int_equal(map_calls, 3 + 1);
    assert_int_equal(stats.reserved_bytes, 60 * MiB);
    vb_fixture_close(f);
}

/* A small pool's growth takes 2 MiB of a large-pool hole: a and b = 20 MiB
 * (2 handles), a freed; 4 KiB then needs a small unit: a's handle mapped
 * again (1 map, nothing created: reserved 40 MiB). Freed, the unit goes
 * back, and 20 MiB fits a's place again with no driver call. */
static void test_small_pool_grows_into_a_large_pool_hole(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_stitching(0);
    vb_addr a = vb_must_malloc(f, 20 * MiB);
    vb_must_malloc(f, 20 * MiB);
    vb_must_free(f, a);
    vb_addr small = vb_must_malloc(f, 4096);
    assert_true(vb_sim_accessible(f->dev, small, 4096));
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.driver_alloc_calls, 2);
    assert_int_equal(map_calls, 2 + 1);
    assert_int_equal(stats.reserved_bytes, 40 * MiB);
    vb_must_free(f, small);
    assert_true(vb_sim_accessible(f->dev, vb_must_malloc(f, 20 * MiB), 20 * MiB));
    assert_int_equal(map_calls, 2 + 1);
    assert_int_equal(vb_fixture_stats(f).reserved_bytes, 40 * MiB);
    vb_fixture_close(f);
}

/* vb_trace_tag of an allocation: its 512-B rounded size and whether it is
 * a small-pool request (<= 1 MiB, as caching_core's pools split them). */
#define SMALL_TAG (1ull << 63)

/* The peaks of a trace's small-pool and large-pool requests (512-B
 * rounded), each on its own. */
static void pool_request_peaks(const char *path, uint64_t *small_peak, uint64_t *large_peak)
{
    vb_trace *trace;
    assert_int_equal(vb_trace_open(path, &trace), VB_OK);
    uint64_t live[2] = {0, 0}, peak[2] = {0, 0};
    vb_trace_event event;
    for (;;) {
        assert_int_equal(vb_trace_next(trace, &event), VB_OK);
        if (event.kind == VB_TRACE_END) break;
        if (event.kind == VB_TRACE_ALLOC) {
            uint64_t rounded = (event.size + 511) / 512 * 512;
            int small = rounded <= MiB;
            vb_trace_tag(trace, rounded | (small ? SMALL_TAG : 0));
            live[small] += rounded;
            if (live[small] > peak[small]) peak[small] = live[small];
        } else if (event.kind == VB_TRACE_FREE && event.tag) {
            live[(event.tag & SMALL_TAG) != 0] -= event.tag & ~SMALL_TAG;
        }
    }
    vb_trace_close(trace);
    *small_peak = peak[1];
    *large_peak = peak[0];
}

/* A transformers generate() loop recorded with PyTorch on an H100
 * (tests/fixtures/torch/generate_short): its small requests peak while its
 * large ones are low. Pools kept apart reserve at least both peaks
 * together (the default: no memory moves between them, none goes back
 * before empty_cache); with stitched ranges small-pool growth takes
 * large-pool holes, and the peak reserved stays below that sum. */
static void test_small_pool_shares_the_large_pools_memory_on_a_generate_trace(void **state)
{
    (void)state;
    const char *path = "tests/fixtures/torch/generate_short.trace.gz";
    uint64_t small_peak, large_peak;
    pool_request_peaks(path, &small_peak, &large_peak);
    double requested, apart, shared;
    vb_fixture_replay_peaks(path, "stitch", 0, &requested, &apart);
    vb_fixture_replay_peaks(path, "stitch[chunk_mb=2,handle_max_mb=4,stitch_max_maps=64]", 0, &requested, &shared);
    print_message("small peak %.1f MiB, large peak %.1f MiB; reserved: apart %.1f MiB, shared %.1f MiB\n",
                  (double)small_peak / MiB, (double)large_peak / MiB, apart / MiB, shared / MiB);
    assert_true(small_peak > 0 && requested < (double)(small_peak + large_peak));
    assert_true(apart >= (double)(small_peak + large_peak));
    assert_true(shared < (double)(small_peak + large_peak));
}

/* ------------------------------------------------------------------------ */
/* Returning memory                                                          */
/* ------------------------------------------------------------------------ */

/* Small and large blocks, one served from the holes among them, all
 * freed: empty_cache releases every handle created (with stitched ranges,
 * after unmapping the dormant ones) and the sim holds nothing. */
static void check_empty_cache_returns_everything(vb_alloc_fixture *f)
{
    vb_addr block[5];
    for (int i = 0; i < 5; i++) block[i] = vb_must_malloc(f, 20 * MiB);
    vb_must_free(f, block[0]);
    vb_must_free(f, block[2]);
    vb_must_free(f, block[4]);
    vb_addr stitched = vb_must_malloc(f, 60 * MiB);
    vb_addr small = vb_must_malloc(f, 4096);
    vb_must_free(f, block[1]);
    vb_must_free(f, block[3]);
    vb_must_free(f, stitched);
    vb_must_free(f, small);
    assert_int_equal(vb_empty_cache(f->alloc), VB_OK);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.reserved_bytes, 0);
    assert_int_equal(stats.driver_free_calls, stats.driver_alloc_calls);
    assert_int_equal(vb_sim_used_bytes(f->dev), 0);
    vb_fixture_close(f);
}

static void test_empty_cache_returns_reserved_to_zero(void **state)
{
    (void)state;
    check_empty_cache_returns_everything(open_stitch(0));
}

static void test_empty_cache_releases_stitched_ranges_too(void **state)
{
    (void)state;
    check_empty_cache_returns_everything(open_stitching(0));
}

/* What is in use stays: a live 4 KiB block keeps its 2 MiB small handle; a
 * live 10 MiB block its handle [0,10). 50 MiB mapped handle [10,60);
 * freed, empty_cache unmaps and releases it. Reserved 2 + 10 = 12 MiB. */
static void test_empty_cache_keeps_chunks_in_use(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_stitch(0);
    vb_must_malloc(f, 4096);
    vb_must_malloc(f, 10 * MiB);
    vb_must_free(f, vb_must_malloc(f, 50 * MiB));
    assert_int_equal(vb_empty_cache(f->alloc), VB_OK);
    assert_int_equal(vb_fixture_stats(f).reserved_bytes, 12 * MiB);
    vb_fixture_close(f);
}

/* On a 64 MiB sim, 40 MiB (two chunks) is live; another 40 MiB needs two
 * more, the device has room for one: the created one goes back, the cache
 * holds nothing free to release, one oom. Reserved 40 MiB. */
static void test_oom_leaves_nothing_behind(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_stitch(64 * MiB);
    vb_must_malloc(f, 40 * MiB);
    vb_addr out = 0;
    assert_int_equal(vb_malloc(f->alloc, 40 * MiB, NULL, &out), VB_ERR_OOM);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.ooms, 1);
    assert_int_equal(stats.reserved_bytes, 40 * MiB);
    assert_int_equal(vb_sim_used_bytes(f->dev), 40 * MiB);
    vb_fixture_close(f);
}

/* ------------------------------------------------------------------------ */
/* Access and invariants                                                     */
/* ------------------------------------------------------------------------ */

/* Every block handed out is mapped and accessible to the device, however
 * it was made: at the growing end, split from a free block, from holes of
 * its own or another stream's range, or small. */
static void check_accessible_blocks(const char *const *settings)
{
    vb_alloc_fixture *f = open_stitch_with(0, settings);
    vb_stream other = vb_fixture_stream(f);
    vb_addr first = vb_must_malloc(f, 100 * MiB);
    assert_true(vb_sim_accessible(f->dev, first, 100 * MiB));
    vb_must_free(f, first);
    vb_addr split = vb_must_malloc(f, 60 * MiB);
    assert_true(vb_sim_accessible(f->dev, split, 60 * MiB));
    vb_addr middle = vb_must_malloc(f, 30 * MiB);
    vb_must_malloc(f, 30 * MiB);
    vb_must_free(f, middle);
    vb_must_free(f, split);
    vb_addr stitched = vb_must_malloc_on(f, 80 * MiB, other);
    assert_true(vb_sim_accessible(f->dev, stitched, 80 * MiB));
    vb_addr small = vb_must_malloc(f, 4096);
    assert_true(vb_sim_accessible(f->dev, small, 4096));
    vb_addr odd = vb_must_malloc(f, 7 * MiB + 3);
    assert_true(vb_sim_accessible(f->dev, odd, 7 * MiB + 3));
    vb_fixture_close(f);
}

static void test_every_block_handed_out_is_accessible(void **state)
{
    (void)state;
    check_accessible_blocks(NULL);
    const char *const fine[] = {"chunk_mb=2", NULL};
    check_accessible_blocks(fine);
    const char *const capped[] = {"handle_max_mb=20", NULL};
    check_accessible_blocks(capped);
    const char *const unlimited[] = {"handle_max_mb=0", NULL};
    check_accessible_blocks(unlimited);
}

/* A seeded random mix on two streams (sizes from 1 KiB to 96 MiB, some
 * freed while their stream is busy) with `settings`: every block handed out
 * is accessible, live blocks never overlap, requested <= allocated <=
 * reserved = what the sim holds, and once everything is freed empty_cache
 * leaves the sim holding nothing. */
static void check_random_mix(const char *const *settings)
{
    enum { OPS = 3000, SLOTS = 64 };
    vb_alloc_fixture *f = open_stitch_with(0, settings);
    vb_stream streams[2] = {vb_fixture_stream(f), vb_fixture_stream(f)};
    vb_addr addr[SLOTS] = {0};
    uint64_t size[SLOTS] = {0};
    uint64_t seed = 42;
    for (int op = 0; op < OPS; op++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        unsigned slot = (unsigned)(seed >> 33) % SLOTS;
        if (addr[slot]) {
            if ((seed >> 20) % 8 == 0) vb_free_while_used_on_busy_stream(f, addr[slot], 1000);
            else vb_must_free(f, addr[slot]);
            addr[slot] = 0;
            continue;
        }
        uint64_t shift = 10 + (seed >> 40) % 17; /* 1 KiB .. 64 MiB, times up to 1.5 */
        size[slot] = ((uint64_t)1 << shift) + (seed >> 8) % ((uint64_t)1 << (shift - 1));
        addr[slot] = vb_must_malloc_on(f, size[slot], streams[(seed >> 50) & 1]);
        assert_true(vb_sim_accessible(f->dev, addr[slot], size[slot]));
        for (unsigned other = 0; other < SLOTS; other++)
            if (other != slot && addr[other])
                assert_true(addr[other] + size[other] <= addr[slot] || addr[slot] + size[slot] <= addr[other]);
        vb_alloc_stats stats = vb_fixture_stats(f);
        assert_true(stats.requested_bytes <= stats.allocated_bytes);
        assert_true(stats.allocated_bytes <= stats.reserved_bytes);
        assert_int_equal(stats.reserved_bytes, vb_sim_used_bytes(f->dev));
    }
    for (unsigned slot = 0; slot < SLOTS; slot++)
        if (addr[slot]) vb_must_free(f, addr[slot]);
    assert_int_equal(vb_empty_cache(f->alloc), VB_OK);
    assert_int_equal(vb_fixture_stats(f).reserved_bytes, 0);
    assert_int_equal(vb_sim_used_bytes(f->dev), 0);
    vb_fixture_close(f);
}

static void test_random_mix_keeps_the_invariants(void **state)
{
    (void)state;
    check_random_mix(NULL);
    const char *const fine[] = {"chunk_mb=2", NULL};
    check_random_mix(fine);
    const char *const coarse[] = {"chunk_mb=64", NULL};
    check_random_mix(coarse);
    const char *const capped[] = {"chunk_mb=2", "handle_max_mb=6", NULL};
    check_random_mix(capped);
    const char *const unlimited[] = {"handle_max_mb=0", NULL};
    check_random_mix(unlimited);
    const char *const stitching[] = {"stitch_max_maps=16", NULL};
    check_random_mix(stitching);
    const char *const small_stitching[] = {"chunk_mb=2", "handle_max_mb=4", "stitch_max_maps=64", NULL};
    check_random_mix(small_stitching);
}

/* ------------------------------------------------------------------------ */
/* Options                                                                   */
/* ------------------------------------------------------------------------ */

/* 3 MiB is a large request: by default it maps one 8 MiB handle; with
 * chunk_mb=2, one 4 MiB handle (3 MiB rounded up to the granularity). */
static void test_chunk_mb_sets_the_growth_step(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_stitch(0);
    vb_must_malloc(f, 3 * MiB);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.reserved_bytes, 8 * MiB);
    assert_int_equal(stats.driver_alloc_calls, 1);
    vb_fixture_close(f);
    const char *const settings[] = {"chunk_mb=2", NULL};
    f = open_stitch_with(0, settings);
    vb_must_malloc(f, 3 * MiB);
    stats = vb_fixture_stats(f);
    assert_int_equal(stats.reserved_bytes, 4 * MiB);
    assert_int_equal(stats.driver_alloc_calls, 1);
    assert_int_equal(stats.allocated_bytes, 3 * MiB);
    vb_fixture_close(f);
}

/* A growth maps handles of at most handle_max_mb (64 by default), one
 * set_access over them: 101 MiB maps 64 + 38 MiB (two creates and maps);
 * with handle_max_mb=0 (no limit) one 102 MiB handle; with 40, 40 + 40 +
 * 22 MiB. Reserved 102 MiB each time. */
static void check_growth_handles(const char *const *settings, uint64_t handles)
{
    vb_alloc_fixture *f = open_stitch_with(0, settings);
    assert_true(vb_sim_accessible(f->dev, vb_must_malloc(f, 101 * MiB), 101 * MiB));
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.reserved_bytes, 102 * MiB);
    assert_int_equal(stats.driver_alloc_calls, handles);
    assert_int_equal(map_calls, handles);
    assert_int_equal(set_access_calls, 1);
    vb_fixture_close(f);
}

static void test_a_growth_maps_handles_up_to_handle_max_mb(void **state)
{
    (void)state;
    check_growth_handles(NULL, 2);
    const char *const unlimited[] = {"handle_max_mb=0", NULL};
    check_growth_handles(unlimited, 1);
    const char *const forty[] = {"handle_max_mb=40", NULL};
    check_growth_handles(forty, 3);
}

/* The old design's options are gone. */
static void test_unknown_option_is_invalid(void **state)
{
    (void)state;
    const char *const settings[] = {"granule_mb=8", NULL};
    assert_int_equal(vb_fixture_create_status("stitch", 0, settings), VB_ERR_INVALID);
}

/* 3 MiB is not a multiple of the sim's 2 MiB granularity. */
static void test_chunk_mb_not_a_multiple_of_the_granularity_is_invalid(void **state)
{
    (void)state;
    const char *const settings[] = {"chunk_mb=3", NULL};
    assert_int_equal(vb_fixture_create_status("stitch", 0, settings), VB_ERR_INVALID);
}

/* A handle limit that is not whole mapping units (3, 11) or is below one
 * growth step (4 under chunk_mb=8) would be changed without a word: it is
 * refused; 0 (no limit), 8 and 10 are taken. */
static void test_handle_max_mb_of_no_whole_handle_is_invalid(void **state)
{
    (void)state;
    const char *const refused[] = {"handle_max_mb=3", "handle_max_mb=11", "handle_max_mb=4", "handle_max_mb=1"};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        const char *const settings[] = {"chunk_mb=8", refused[i], NULL};
        assert_int_equal(vb_fixture_create_status("stitch", 0, settings), VB_ERR_INVALID);
    }
    const char *const taken[] = {"handle_max_mb=0", "handle_max_mb=8", "handle_max_mb=10"};
    for (size_t i = 0; i < sizeof taken / sizeof *taken; i++) {
        const char *const settings[] = {"chunk_mb=8", taken[i], NULL};
        assert_int_equal(vb_fixture_create_status("stitch", 0, settings), VB_OK);
    }
}

/* The accepted range of chunk_mb is 2..1024. */
static void test_chunk_mb_out_of_range_is_invalid(void **state)
{
    (void)state;
    const char *const zero[] = {"chunk_mb=0", NULL};
    assert_int_equal(vb_fixture_create_status("stitch", 0, zero), VB_ERR_INVALID);
    const char *const huge[] = {"chunk_mb=2048", NULL};
    assert_int_equal(vb_fixture_create_status("stitch", 0, huge), VB_ERR_INVALID);
}

static void test_non_numeric_option_value_is_invalid(void **state)
{
    (void)state;
    const char *const settings[] = {"chunk_mb=lots", NULL};
    assert_int_equal(vb_fixture_create_status("stitch", 0, settings), VB_ERR_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_caching_strands_the_free_pieces_peak_160mib),
        cmocka_unit_test(test_expandable_strands_the_inner_pieces_peak_140mib),
        cmocka_unit_test(test_stitch_serves_the_big_request_from_the_holes_peak_100mib),
        cmocka_unit_test(test_stitched_request_takes_no_new_device_memory),
        cmocka_unit_test(test_stitch_needs_no_cache_flush_at_capacity),
        cmocka_unit_test(test_hole_smaller_than_a_chunk_is_not_taken),
        cmocka_unit_test(test_hole_of_another_stream_is_taken),
        cmocka_unit_test(test_block_freed_while_in_use_is_not_taken),
        cmocka_unit_test(test_small_pool_hole_is_not_taken_by_the_large_pool),
        cmocka_unit_test(test_stitched_request_maps_the_holes_handles_again),
        cmocka_unit_test(test_freed_stitched_block_gives_its_holes_back),
        cmocka_unit_test(test_stitched_range_is_reused_with_no_driver_call),
        cmocka_unit_test(test_stitched_block_lends_only_the_bytes_it_uses),
        cmocka_unit_test(test_stitched_range_takes_a_hole_of_another_stream),
        cmocka_unit_test(test_small_pool_grows_into_a_large_pool_hole),
        cmocka_unit_test(test_small_pool_shares_the_large_pools_memory_on_a_generate_trace),
        cmocka_unit_test(test_empty_cache_releases_stitched_ranges_too),
        cmocka_unit_test(test_empty_cache_returns_reserved_to_zero),
        cmocka_unit_test(test_empty_cache_keeps_chunks_in_use),
        cmocka_unit_test(test_oom_leaves_nothing_behind),
        cmocka_unit_test(test_every_block_handed_out_is_accessible),
        cmocka_unit_test(test_random_mix_keeps_the_invariants),
        cmocka_unit_test(test_chunk_mb_sets_the_growth_step),
        cmocka_unit_test(test_a_growth_maps_handles_up_to_handle_max_mb),
        cmocka_unit_test(test_unknown_option_is_invalid),
        cmocka_unit_test(test_chunk_mb_not_a_multiple_of_the_granularity_is_invalid),
        cmocka_unit_test(test_handle_max_mb_of_no_whole_handle_is_invalid),
        cmocka_unit_test(test_chunk_mb_out_of_range_is_invalid),
        cmocka_unit_test(test_non_numeric_option_value_is_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
