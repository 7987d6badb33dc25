/* vrambench — unit tests of `bfc` (TensorFlow/XLA best-fit with coalescing) on sim.
 * Every expected number is worked out from BFC's rules in the comments:
 * 256 B rounding, bins of 256 B << b, best fit by (size, address), split when
 * the chunk is >= 2x the request or the leftover >= 128 MiB, regions of
 * 2 MiB doubling, 0.9x back-off in 2 MiB pages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "allocators/allocator.h"
#include "alloc_fixture.h"

#define KiB ((uint64_t)1 << 10)
#define MiB VB_MiB

/* ------------------------------------------------------------------------ */
/* Rounding and the split rule                                               */
/* ------------------------------------------------------------------------ */

/* 1 B and 257 B round to 256 B and 512 B (kMinAllocationSize multiples); the
 * 2 MiB region is far over twice either, so both are split off exactly:
 * allocated = 256 + 512 = 768 for requested 1 + 257 = 258. */
static void test_bfc_rounds_requests_to_256_bytes(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("bfc", 0, NULL);
    vb_must_malloc(f, 1);
    vb_must_malloc(f, 257);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.requested_bytes, 258);
    assert_int_equal(stats.allocated_bytes, 768);
    vb_fixture_close(f);
}

/* A 1 KiB chunk freed between used chunks, asked for 768 B: 1024 < 2 x 768
 * and the leftover 256 B < 128 MiB, so the whole 1 KiB chunk is handed out
 * and allocated grows by 1024, not 768. */
static void test_bfc_hands_out_whole_chunk_under_twice_the_request(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("bfc", 0, NULL);
    vb_addr a = vb_must_malloc(f, 1 * KiB);
    vb_must_malloc(f, 256); /* keeps A's chunk from merging with the rest */
    vb_must_free(f, a);
    uint64_t allocated_before = vb_fixture_stats(f).allocated_bytes;
    assert_int_equal(vb_must_malloc(f, 768), a);
    assert_int_equal(vb_fixture_stats(f).allocated_bytes - allocated_before, 1 * KiB);
    vb_fixture_close(f);
}

/* 300 MiB needs a region of 2 MiB doubled to 512 MiB. 512 < 2 x 300, but the
 * leftover 212 MiB >= 128 MiB, so the chunk is split: allocated 300 MiB. */
static void test_bfc_splits_when_leftover_reaches_128_mib(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("bfc", 0, NULL);
    vb_must_malloc(f, 300 * MiB);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.reserved_bytes, 512 * MiB);
    assert_int_equal(stats.allocated_bytes, 300 * MiB);
    vb_fixture_close(f);
}

/* 200 MiB needs a region doubled to 256 MiB: 256 < 2 x 200 and the leftover
 * 56 MiB < 128 MiB, so no split: allocated is the whole 256 MiB. */
static void test_bfc_keeps_small_leftover_in_the_chunk(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("bfc", 0, NULL);
    vb_must_malloc(f, 200 * MiB);
    assert_int_equal(vb_fixture_stats(f).allocated_bytes, 256 * MiB);
    vb_fixture_close(f);
}

/* With max_internal_fragmentation_mb=32 the same 200 MiB request splits
 * (leftover 56 MiB >= 32 MiB): allocated 200 MiB. */
static void test_bfc_fragmentation_cap_is_configurable(void **unused)
{
    (void)unused;
    const char *const settings[] = {"max_internal_fragmentation_mb=32", NULL};
    vb_alloc_fixture *f = vb_fixture_open("bfc", 0, settings);
    vb_must_malloc(f, 200 * MiB);
    assert_int_equal(vb_fixture_stats(f).allocated_bytes, 200 * MiB);
    vb_fixture_close(f);
}

/* ------------------------------------------------------------------------ */
/* Bins and best fit                                                         */
/* ------------------------------------------------------------------------ */

/* Layout of the first region: A 1024 | B 256 | C 768 | D 256 | rest free.
 * Freeing A and C leaves free chunks of 1024 (bin 2: 1024..2047), 768
 * (bin 1: 512..1023) and the rest (about 2 MiB, bin 12). */
static void make_two_holes(vb_alloc_fixture *f, vb_addr *a, vb_addr *c)
{
    *a = vb_must_malloc(f, 1024);
    vb_must_malloc(f, 256);
    *c = vb_must_malloc(f, 768);
    vb_must_malloc(f, 256);
    vb_must_free(f, *a);
    vb_must_free(f, *c);
}

/* 600 B rounds to 768, whose bin (1) holds C's 768-byte chunk: an exact fit,
 * taken before A's larger chunk although A has the lower address. */
static void test_bfc_takes_the_fit_in_the_requests_own_bin(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("bfc", 0, NULL);
    vb_addr a, c;
    make_two_holes(f, &a, &c);
    assert_int_equal(vb_must_malloc(f, 600), c);
    vb_fixture_close(f);
}

/* 1000 B rounds to 1024, bin 2. Bin 2 holds A's 1024-byte chunk; C's 768
 * (bin 1) is too small and the remainder (bin 12) too big for a best fit. */
static void test_bfc_best_fit_is_the_smallest_chunk_that_fits(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("bfc", 0, NULL);
    vb_addr a, c;
    make_two_holes(f, &a, &c);
    assert_int_equal(vb_must_malloc(f, 1000), a);
    vb_fixture_close(f);
}

/* The last bin holds every chunk from 256 MiB up, still by size. Region 1
 * (curr 2 MiB doubled to 1024 MiB): A 600 MiB | B 424 MiB. Region 2 (curr
 * stays 1024 MiB): C 300 MiB | D 724 MiB. Two of them are freed, both in
 * bin 20, the larger at the lower address: A and C where region 2 lies
 * above region 1, D and A where it lies below (the sim hands the driver's
 * fresh addresses out top-down). 290 MiB (rounded the same) best-fits the
 * smaller one although the other has the lower address. */
static void test_bfc_last_bin_is_ordered_by_size(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("bfc", 0, NULL);
    vb_addr a = vb_must_malloc(f, 600 * MiB);
    vb_must_malloc(f, 424 * MiB);
    vb_addr c = vb_must_malloc(f, 300 * MiB);
    vb_addr d = vb_must_malloc(f, 724 * MiB);
    assert_int_equal(vb_fixture_stats(f).reserved_bytes, 2048 * MiB);
    vb_addr larger = a < c ? a : d, smaller = a < c ? c : a;
    assert_true(larger < smaller);
    vb_must_free(f, larger);
    vb_must_free(f, smaller);
    assert_int_equal(vb_must_malloc(f, 290 * MiB), smaller);
    vb_fixture_close(f);
}

/* Two free 1 KiB chunks of the same size: the lower address wins the tie. */
static void test_bfc_ties_go_to_the_lower_address(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("bfc", 0, NULL);
    vb_addr first = vb_must_malloc(f, 1024);
    vb_must_malloc(f, 256);
    vb_addr second = vb_must_malloc(f, 1024);
    vb_must_malloc(f, 256);
    vb_must_free(f, second);
    vb_must_free(f, first);
    assert_int_equal(vb_must_malloc(f, 1024), first);
    vb_fixture_close(f);
}

/* ------------------------------------------------------------------------ */
/* Coalescing                                                                */
/* ------------------------------------------------------------------------ */

/* A, B, C of 1 KiB then the rest of the 2 MiB region. Freeing A and C, then
 * B, merges everything back: one free chunk of the whole 2 MiB region. */
static void test_bfc_free_merges_with_both_neighbours(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("bfc", 0, NULL);
    vb_addr a = vb_must_malloc(f, 1024), b = vb_must_malloc(f, 1024), c = vb_must_malloc(f, 1024);
    vb_must_free(f, a);
    vb_must_free(f, c);
    vb_must_free(f, b);
    vb_block_list list = vb_fixture_blocks(f);
    assert_int_equal(list.count, 1);
    assert_int_equal(list.blocks[0].block_size, 2 * MiB);
    assert_int_equal(list.blocks[0].allocated, 0);
    vb_fixture_close(f);
}

/* ------------------------------------------------------------------------ */
/* Regions                                                                   */
/* ------------------------------------------------------------------------ */

/* 256 B: first region 2 MiB (curr becomes 4 MiB). 2 MiB: the first region
 * has only 2 MiB - 256 free, so a 4 MiB region (curr 8). 4 MiB: no free
 * chunk of 4 MiB (2 MiB free in the second region), so an 8 MiB region. */
static void test_bfc_regions_double_from_2_mib(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("bfc", 0, NULL);
    vb_must_malloc(f, 256);
    vb_must_malloc(f, 2 * MiB);
    vb_must_malloc(f, 4 * MiB);
    vb_block_list list = vb_fixture_blocks(f);
    uint64_t segment_sizes[3];
    size_t segments = 0;
    for (size_t i = 0; i < list.count && segments < 3; i++)
        if (i == 0 || list.blocks[i].segment != list.blocks[i - 1].segment)
            segment_sizes[segments++] = list.blocks[i].segment_size;
    assert_int_equal(segments, 3);
    /* The list is in address order: the sim hands fresh addresses out
     * top-down, so the first region made comes last. */
    assert_int_equal(segment_sizes[2], 2 * MiB);
    assert_int_equal(segment_sizes[1], 4 * MiB);
    assert_int_equal(segment_sizes[0], 8 * MiB);
    assert_int_equal(vb_fixture_stats(f).reserved_bytes, 14 * MiB);
    vb_fixture_close(f);
}

/* 5 MiB first: curr doubles 2 -> 4 -> 8 MiB to hold it (an 8 MiB region)
 * and, having doubled for the request, is not doubled again. 8 MiB next:
 * 3 MiB free is too little, curr 8 MiB holds it: another 8 MiB region.
 * Reserved: 16 MiB. */
static void test_bfc_region_doubles_until_it_holds_the_request(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("bfc", 0, NULL);
    vb_must_malloc(f, 5 * MiB);
    assert_int_equal(vb_fixture_stats(f).reserved_bytes, 8 * MiB);
    vb_must_malloc(f, 8 * MiB);
    assert_int_equal(vb_fixture_stats(f).reserved_bytes, 16 * MiB);
    vb_fixture_close(f);
}

/* A 1 GiB sim with 300 MiB taken by someone else (724 MiB free). 600 MiB
 * doubles curr to 1024 MiB; the device refuses, and BFC backs off by 0.9x,
 * each step rounded up to 2 MiB pages: 1024 -> 922 (921.6) -> 830 (829.8)
 * -> 748 (747) -> 674 (673.2) MiB, which fits. Five driver calls. */
static void test_bfc_backs_off_by_0_9_when_the_device_refuses(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("bfc", 1 * VB_GiB, NULL);
    vb_addr other;
    assert_int_equal(f->dev->ops->mem_alloc(f->dev, 300 * MiB, &other), VB_OK);
    vb_must_malloc(f, 600 * MiB);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.reserved_bytes, 674 * MiB);
    assert_int_equal(stats.driver_alloc_calls, 5);
    vb_fixture_close(f);
}

/* empty_cache frees the wholly free first region (2 MiB) and keeps the one
 * with a used chunk (4 MiB), which real BFC would not free either. */
static void test_bfc_empty_cache_frees_wholly_free_regions(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("bfc", 0, NULL);
    vb_addr small = vb_must_malloc(f, 256);
    vb_must_malloc(f, 2 * MiB);
    vb_must_free(f, small);
    assert_int_equal(vb_empty_cache(f->alloc), VB_OK);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.reserved_bytes, 4 * MiB);
    assert_int_equal(stats.driver_free_calls, 1);
    vb_fixture_close(f);
}

/* A 256 B chunk keeps the first region (2 MiB) busy; each cycle allocates
 * 4 MiB, frees it and calls empty_cache. Cycle 1: curr is 4 MiB after the
 * first region, so a 4 MiB region (reserved 6 MiB); empty_cache frees it and
 * sets curr for the 2 MiB kept: 4 MiB again. So every one of 64 cycles
 * reserves 6 MiB at its peak, one driver allocation each. Were the doubling
 * to run on across empty_caches (BFC's rule without its never-free pool),
 * cycle k would take a 2^(k+1) MiB region and reach the whole device. */
static void test_bfc_empty_cache_cycles_do_not_grow_regions(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("bfc", 0, NULL);
    vb_must_malloc(f, 256);
    for (int cycle = 0; cycle < 64; cycle++) {
        vb_addr tensor = vb_must_malloc(f, 4 * MiB);
        assert_int_equal(vb_fixture_stats(f).reserved_bytes, 6 * MiB);
        vb_must_free(f, tensor);
        assert_int_equal(vb_empty_cache(f->alloc), VB_OK);
        assert_int_equal(vb_fixture_stats(f).reserved_bytes, 2 * MiB);
    }
    assert_int_equal(vb_fixture_stats(f).driver_alloc_calls, 1 + 64);
    vb_fixture_close(f);
}

/* After empty_cache keeps regions of 2 + 4 + 8 = 14 MiB (one used chunk in
 * each), curr is what BFC has for a 14 MiB pool: 16 MiB, the next region
 * (not the 32 MiB the doubling had reached before the 16 MiB region went). */
static void test_bfc_region_size_after_empty_cache_follows_the_kept_regions(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("bfc", 0, NULL);
    vb_must_malloc(f, 256);
    vb_must_malloc(f, 2 * MiB);
    vb_must_malloc(f, 4 * MiB);
    vb_addr spare = vb_must_malloc(f, 16 * MiB); /* a 16 MiB region, freed by empty_cache */
    assert_int_equal(vb_fixture_stats(f).reserved_bytes, 30 * MiB);
    vb_must_free(f, spare);
    assert_int_equal(vb_empty_cache(f->alloc), VB_OK);
    assert_int_equal(vb_fixture_stats(f).reserved_bytes, 14 * MiB);
    vb_must_malloc(f, 5 * MiB); /* over every free leftover (2, 2, 4 MiB) */
    assert_int_equal(vb_fixture_stats(f).reserved_bytes, 30 * MiB);
    vb_fixture_close(f);
}

/* ------------------------------------------------------------------------ */
/* Fragmentation                                                             */
/* ------------------------------------------------------------------------ */

/* The 2 MiB region filled exactly: A 256 KiB | B 256 KiB | C 512 KiB |
 * D 1024 KiB (each split off the rest, D takes the last 1024 KiB whole).
 * Freeing A and C: free = 256 + 512 = 768 KiB, largest = 512 KiB, and BFC's
 * fragmentation (free - largest) / free = 256 / 768 = 1/3. */
static void test_bfc_fragmentation_of_a_known_layout(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("bfc", 0, NULL);
    vb_addr a = vb_must_malloc(f, 256 * KiB);
    vb_must_malloc(f, 256 * KiB);
    vb_addr c = vb_must_malloc(f, 512 * KiB);
    vb_must_malloc(f, 1024 * KiB);
    assert_int_equal(vb_fixture_stats(f).reserved_bytes, 2 * MiB);
    vb_must_free(f, a);
    vb_must_free(f, c);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.free_cached_bytes, 768 * KiB);
    assert_int_equal(stats.largest_free_block, 512 * KiB);
    assert_true(vb_external_fragmentation(&stats) == (double)(256 * KiB) / (double)(768 * KiB));
    vb_fixture_close(f);
}

/* ------------------------------------------------------------------------ */
/* Streams, errors, out of memory                                            */
/* ------------------------------------------------------------------------ */

/* A chunk recorded on a busy stream and freed is not handed out again (the
 * next 1 KiB comes from elsewhere) until that stream's work completes; then
 * the same request gets it back (lowest address, best fit). */
static void test_bfc_record_stream_holds_the_chunk_until_the_work_completes(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("bfc", 0, NULL);
    vb_addr a = vb_must_malloc(f, 1024);
    vb_must_malloc(f, 256);
    vb_stream stream = vb_free_while_used_on_busy_stream(f, a, 1000);
    vb_addr while_busy = vb_must_malloc(f, 1024);
    assert_int_not_equal(while_busy, a);
    vb_sim_complete_stream(f->dev, stream);
    assert_int_equal(vb_must_malloc(f, 1024), a);
    vb_fixture_close(f);
}

/* Freeing twice, or a pointer never handed out, is VB_ERR_INVALID. */
static void test_bfc_rejects_double_and_unknown_free(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("bfc", 0, NULL);
    vb_addr a = vb_must_malloc(f, 1024);
    vb_must_free(f, a);
    assert_int_equal(vb_free(f->alloc, a), VB_ERR_INVALID);
    assert_int_equal(vb_free(f->alloc, a + 256), VB_ERR_INVALID);
    vb_fixture_close(f);
}

/* A size near UINT64_MAX overflows the rounding: out of memory, counted. */
static void test_bfc_absurd_size_is_out_of_memory(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("bfc", 0, NULL);
    vb_addr addr;
    assert_int_equal(vb_malloc(f->alloc, UINT64_MAX - 10, NULL, &addr), VB_ERR_OOM);
    assert_int_equal(vb_fixture_stats(f).ooms, 1);
    vb_fixture_close(f);
}

/* On a 64 MiB sim: 2 MiB takes a 2 MiB region (curr 4 MiB); 60 MiB doubles
 * curr to 64 MiB, capped by the memory limit to the 62 MiB left, which the
 * device gives. Both freed, 64 MiB fits no chunk (2 and 62 MiB) and the limit
 * leaves no room to grow: garbage collection frees both wholly free regions
 * (one retry) and a 64 MiB region (curr, not doubled again) serves. */
static void test_bfc_out_of_memory_frees_free_regions_and_retries(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("bfc", 64 * MiB, NULL);
    vb_addr small = vb_must_malloc(f, 2 * MiB);
    vb_addr big = vb_must_malloc(f, 60 * MiB);
    assert_int_equal(vb_fixture_stats(f).reserved_bytes, 64 * MiB);
    vb_must_free(f, small);
    vb_must_free(f, big);
    vb_must_malloc(f, 64 * MiB);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.alloc_retries, 1);
    assert_int_equal(stats.reserved_bytes, 64 * MiB);
    vb_fixture_close(f);
}

/* An unknown option is refused with VB_ERR_INVALID. */
static void test_bfc_rejects_unknown_option(void **unused)
{
    (void)unused;
    const char *const settings[] = {"allow_growth=0", NULL};
    assert_int_equal(vb_fixture_create_status("bfc", 0, settings), VB_ERR_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bfc_rounds_requests_to_256_bytes),
        cmocka_unit_test(test_bfc_hands_out_whole_chunk_under_twice_the_request),
        cmocka_unit_test(test_bfc_splits_when_leftover_reaches_128_mib),
        cmocka_unit_test(test_bfc_keeps_small_leftover_in_the_chunk),
        cmocka_unit_test(test_bfc_fragmentation_cap_is_configurable),
        cmocka_unit_test(test_bfc_takes_the_fit_in_the_requests_own_bin),
        cmocka_unit_test(test_bfc_best_fit_is_the_smallest_chunk_that_fits),
        cmocka_unit_test(test_bfc_last_bin_is_ordered_by_size),
        cmocka_unit_test(test_bfc_ties_go_to_the_lower_address),
        cmocka_unit_test(test_bfc_free_merges_with_both_neighbours),
        cmocka_unit_test(test_bfc_regions_double_from_2_mib),
        cmocka_unit_test(test_bfc_region_doubles_until_it_holds_the_request),
        cmocka_unit_test(test_bfc_backs_off_by_0_9_when_the_device_refuses),
        cmocka_unit_test(test_bfc_empty_cache_frees_wholly_free_regions),
        cmocka_unit_test(test_bfc_empty_cache_cycles_do_not_grow_regions),
        cmocka_unit_test(test_bfc_region_size_after_empty_cache_follows_the_kept_regions),
        cmocka_unit_test(test_bfc_fragmentation_of_a_known_layout),
        cmocka_unit_test(test_bfc_record_stream_holds_the_chunk_until_the_work_completes),
        cmocka_unit_test(test_bfc_rejects_double_and_unknown_free),
        cmocka_unit_test(test_bfc_absurd_size_is_out_of_memory),
        cmocka_unit_test(test_bfc_out_of_memory_frees_free_regions_and_retries),
        cmocka_unit_test(test_bfc_rejects_unknown_option),
    };
    return cmocka_run_group_tests_name("bfc", tests, NULL, NULL);
}
