/* vrambench — unit tests of `buddy` (binary buddy system) on sim. Expected
 * numbers follow from the rules in the comments: blocks are powers of two of
 * at least 512 B, cut by halving the lowest free block of the smallest order
 * that fits, merged with their buddy when it is wholly free; arenas are
 * arena_mb (1 GiB by default) or the request's own power of two. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "allocators/allocator.h"
#include "alloc_fixture.h"

#define KiB ((uint64_t)1 << 10)
#define MiB VB_MiB

/* Most layouts here are easier to work out in 2 MiB arenas than in 1 GiB. */
static const char *const arena_2_mib[] = {"arena_mb=2", NULL};

/* ------------------------------------------------------------------------ */
/* Internal fragmentation                                                    */
/* ------------------------------------------------------------------------ */

/* 1 MiB + 1 B needs the next power of two, a 2 MiB block: allocated /
 * requested = 2097152 / 1048577 = 1.99999809, within 1e-5 of 2. */
static void test_buddy_size_just_above_a_power_of_two_costs_double(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("buddy", 0, NULL);
    vb_must_malloc(f, 1 * MiB + 1);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.requested_bytes, 1 * MiB + 1);
    assert_int_equal(stats.allocated_bytes, 2 * MiB);
    double ratio = (double)stats.allocated_bytes / (double)stats.requested_bytes;
    assert_true(ratio > 2.0 - 1e-5 && ratio < 2.0);
    vb_fixture_close(f);
}

/* Sizes from 257 KiB to 512 KiB all take a 512 KiB block: ten requests of
 * 257 KiB cost 10 x 512 KiB = 5 MiB for 2570 KiB asked. */
static void test_buddy_allocated_counts_whole_blocks(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("buddy", 0, NULL);
    for (int i = 0; i < 10; i++) vb_must_malloc(f, 257 * KiB);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.requested_bytes, 2570 * KiB);
    assert_int_equal(stats.allocated_bytes, 5 * MiB);
    vb_fixture_close(f);
}

/* 1 B and 100 B both take the minimum block of 512 B: allocated 1024. */
static void test_buddy_minimum_block_is_512_bytes(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("buddy", 0, NULL);
    vb_must_malloc(f, 1);
    vb_must_malloc(f, 100);
    assert_int_equal(vb_fixture_stats(f).allocated_bytes, 1024);
    vb_fixture_close(f);
}

/* ------------------------------------------------------------------------ */
/* Split and merge                                                           */
/* ------------------------------------------------------------------------ */

/* A 2 MiB arena cut down to 512 B leaves one free buddy of every size from
 * 512 B to 1 MiB: 12 free blocks + the used one = 13, the largest free block
 * 1 MiB, and free bytes 2 MiB - 512. */
static void test_buddy_split_leaves_one_free_buddy_per_order(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("buddy", 0, arena_2_mib);
    vb_must_malloc(f, 512);
    vb_block_list list = vb_fixture_blocks(f);
    assert_int_equal(list.count, 13);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.largest_free_block, 1 * MiB);
    assert_int_equal(stats.free_cached_bytes, 2 * MiB - 512);
    vb_fixture_close(f);
}

/* Freeing that 512 B block merges it with its buddy, and the result with
 * its buddy, up to the whole arena: one free block of 2 MiB. */
static void test_buddy_merge_restores_one_free_block(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("buddy", 0, arena_2_mib);
    vb_addr a = vb_must_malloc(f, 512);
    vb_must_free(f, a);
    vb_block_list list = vb_fixture_blocks(f);
    assert_int_equal(list.count, 1);
    assert_int_equal(list.blocks[0].block_size, 2 * MiB);
    assert_int_equal(list.blocks[0].allocated, 0);
    vb_fixture_close(f);
}

/* Four 512 B blocks at offsets 0, 512, 1024, 1536: B (512) and C (1024) are
 * neighbours but not buddies (B's buddy is A, C's is D), so freeing B and C
 * leaves two separate 512 B free blocks. A 1 KiB request cannot use them
 * (a wrong merge would give it offset 512): it gets the 1 KiB buddy left
 * free at offset 2048 when C's 2 KiB block was split. */
static void test_buddy_neighbours_that_are_not_buddies_stay_apart(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("buddy", 0, arena_2_mib);
    vb_addr a = vb_must_malloc(f, 512);
    vb_addr b = vb_must_malloc(f, 512);
    vb_addr c = vb_must_malloc(f, 512);
    vb_must_malloc(f, 512);
    assert_int_equal(b, a + 512);
    assert_int_equal(c, a + 1024);
    vb_must_free(f, b);
    vb_must_free(f, c);
    assert_int_equal(vb_must_malloc(f, 1024), a + 2048);
    vb_fixture_close(f);
}

/* X 1 KiB at 0, Y 512 B at 1024, Z 512 B at 1536. X's buddy is the 1 KiB
 * at 1024, which is split and half used: freeing Y then X must leave X a
 * free 1 KiB block and Y a free 512 B block, not one 1.5 KiB block. */
static void test_buddy_merges_only_with_a_wholly_free_buddy(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("buddy", 0, arena_2_mib);
    vb_addr x = vb_must_malloc(f, 1024);
    vb_addr y = vb_must_malloc(f, 512);
    vb_must_malloc(f, 512);
    assert_int_equal(y, x + 1024);
    vb_must_free(f, y);
    vb_must_free(f, x);
    vb_block_list list = vb_fixture_blocks(f);
    assert_int_equal(list.blocks[0].block_size, 1024);
    assert_int_equal(list.blocks[1].block_size, 512);
    vb_fixture_close(f);
}

/* ------------------------------------------------------------------------ */
/* Arenas                                                                    */
/* ------------------------------------------------------------------------ */

/* The default arena is 1 GiB: the first 1 B request reserves it all. */
static void test_buddy_default_arena_is_1_gib(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("buddy", 0, NULL);
    vb_must_malloc(f, 1);
    assert_int_equal(vb_fixture_stats(f).reserved_bytes, 1 * VB_GiB);
    vb_fixture_close(f);
}

/* With 2 MiB arenas, 3 MiB gets an arena of its own power of two, 4 MiB,
 * all of it allocated. */
static void test_buddy_large_request_gets_its_own_arena(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("buddy", 0, arena_2_mib);
    vb_must_malloc(f, 3 * MiB);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.reserved_bytes, 4 * MiB);
    assert_int_equal(stats.allocated_bytes, 4 * MiB);
    vb_fixture_close(f);
}

/* On a 600 MiB sim the 1 GiB arena is refused; the next power of two down,
 * 512 MiB, fits: two driver calls, 512 MiB reserved. */
static void test_buddy_halves_the_arena_when_the_device_refuses(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("buddy", 600 * MiB, NULL);
    vb_must_malloc(f, 1);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.driver_alloc_calls, 2);
    assert_int_equal(stats.reserved_bytes, 512 * MiB);
    vb_fixture_close(f);
}

/* Two 2 MiB arenas (two 2 MiB blocks); freeing the first block and
 * empty_cache frees its arena only: reserved 2 MiB, one driver free. */
static void test_buddy_empty_cache_frees_wholly_free_arenas(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("buddy", 0, arena_2_mib);
    vb_addr first = vb_must_malloc(f, 2 * MiB);
    vb_must_malloc(f, 2 * MiB);
    vb_must_free(f, first);
    assert_int_equal(vb_empty_cache(f->alloc), VB_OK);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.reserved_bytes, 2 * MiB);
    assert_int_equal(stats.driver_free_calls, 1);
    vb_fixture_close(f);
}

/* ------------------------------------------------------------------------ */
/* Streams, errors, out of memory                                            */
/* ------------------------------------------------------------------------ */

/* A block recorded on a busy stream and freed is not reused (the next 512 B
 * is its neighbour) until the stream's work completes; then it is the lowest
 * free 512 B block again. */
static void test_buddy_record_stream_holds_the_block_until_the_work_completes(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("buddy", 0, arena_2_mib);
    vb_addr a = vb_must_malloc(f, 512);
    vb_stream stream = vb_free_while_used_on_busy_stream(f, a, 1000);
    assert_int_equal(vb_must_malloc(f, 512), a + 512);
    vb_sim_complete_stream(f->dev, stream);
    assert_int_equal(vb_must_malloc(f, 512), a);
    vb_fixture_close(f);
}

/* Freeing twice, or a pointer never handed out, is VB_ERR_INVALID. */
static void test_buddy_rejects_double_and_unknown_free(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("buddy", 0, arena_2_mib);
    vb_addr a = vb_must_malloc(f, 512);
    vb_must_free(f, a);
    assert_int_equal(vb_free(f->alloc, a), VB_ERR_INVALID);
    assert_int_equal(vb_free(f->alloc, a + 512), VB_ERR_INVALID);
    vb_fixture_close(f);
}

/* Above 2^63 no power of two exists: out of memory, counted, no crash. */
static void test_buddy_absurd_size_is_out_of_memory(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("buddy", 0, NULL);
    vb_addr addr;
    assert_int_equal(vb_malloc(f->alloc, UINT64_MAX - 10, NULL, &addr), VB_ERR_OOM);
    assert_int_equal(vb_fixture_stats(f).ooms, 1);
    vb_fixture_close(f);
}

/* arena_mb must be a power of two: 3 is refused. */
static void test_buddy_rejects_arena_that_is_not_a_power_of_two(void **unused)
{
    (void)unused;
    const char *const settings[] = {"arena_mb=3", NULL};
    assert_int_equal(vb_fixture_create_status("buddy", 0, settings), VB_ERR_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buddy_size_just_above_a_power_of_two_costs_double),
        cmocka_unit_test(test_buddy_allocated_counts_whole_blocks),
        cmocka_unit_test(test_buddy_minimum_block_is_512_bytes),
        cmocka_unit_test(test_buddy_split_leaves_one_free_buddy_per_order),
        cmocka_unit_test(test_buddy_merge_restores_one_free_block),
        cmocka_unit_test(test_buddy_neighbours_that_are_not_buddies_stay_apart),
        cmocka_unit_test(test_buddy_merges_only_with_a_wholly_free_buddy),
        cmocka_unit_test(test_buddy_default_arena_is_1_gib),
        cmocka_unit_test(test_buddy_large_request_gets_its_own_arena),
        cmocka_unit_test(test_buddy_halves_the_arena_when_the_device_refuses),
        cmocka_unit_test(test_buddy_empty_cache_frees_wholly_free_arenas),
        cmocka_unit_test(test_buddy_record_stream_holds_the_block_until_the_work_completes),
        cmocka_unit_test(test_buddy_rejects_double_and_unknown_free),
        cmocka_unit_test(test_buddy_absurd_size_is_out_of_memory),
        cmocka_unit_test(test_buddy_rejects_arena_that_is_not_a_power_of_two),
    };
    return cmocka_run_group_tests_name("buddy", tests, NULL, NULL);
}
