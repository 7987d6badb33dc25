/* vrambench — unit tests of `binning` (RMM binning over a coalescing pool)
 * on sim. Expected numbers follow from the rules in the comments: bins of
 * 256 KiB .. 4 MiB blocks, each taking chunks of 128 blocks from the pool; a
 * request goes to the smallest bin that holds it, or above 4 MiB to the pool,
 * rounded to 256 B, best fit; the pool grows by max(request, pool size) in
 * 2 MiB pages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "allocators/allocator.h"
#include "allocators/binning.h"
#include "alloc_fixture.h"
#include "test_random.h"

#define KiB ((uint64_t)1 << 10)
#define MiB VB_MiB

/* ------------------------------------------------------------------------ */
/* Bin selection                                                             */
/* ------------------------------------------------------------------------ */

/* 1 B is below the smallest bin and takes a whole 256 KiB block; the bin's
 * first chunk is 128 x 256 KiB = 32 MiB, which the pool grows by. */
static void test_binning_small_request_takes_a_smallest_bin_block(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("binning", 0, NULL);
    vb_must_malloc(f, 1);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.allocated_bytes, 256 * KiB);
    assert_int_equal(stats.reserved_bytes, 32 * MiB);
    vb_fixture_close(f);
}

/* 256 KiB + 1 B does not fit a 256 KiB block: the next bin, 512 KiB. */
static void test_binning_request_goes_to_the_smallest_bin_that_holds_it(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("binning", 0, NULL);
    vb_must_malloc(f, 256 * KiB + 1);
    assert_int_equal(vb_fixture_stats(f).allocated_bytes, 512 * KiB);
    vb_fixture_close(f);
}

/* Exactly 4 MiB is the largest bin's block size: a bin block, from a chunk
 * of 128 x 4 MiB = 512 MiB. */
static void test_binning_largest_bin_size_is_served_by_the_bin(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("binning", 0, NULL);
    vb_must_malloc(f, 4 * MiB);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.allocated_bytes, 4 * MiB);
    assert_int_equal(stats.reserved_bytes, 512 * MiB);
    vb_fixture_close(f);
}

/* 1000 B and 3000 B both go to the 256 KiB bin and share its first chunk:
 * consecutive blocks, 256 KiB apart, from one driver allocation. */
static void test_binning_small_requests_share_a_bin_chunk(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("binning", 0, NULL);
    vb_addr first = vb_must_malloc(f, 1000);
    vb_addr second = vb_must_malloc(f, 3000);
    assert_int_equal(second, first + 256 * KiB);
    assert_int_equal(vb_fixture_stats(f).driver_alloc_calls, 1);
    vb_fixture_close(f);
}

/* min_bin_exponent=10, max_bin_exponent=12 makes bins of 1, 2 and 4 KiB:
 * 1 B takes 1 KiB, and 4097 B, above the largest bin, goes to the pool
 * rounded to 256 B: 4352. Allocated 1024 + 4352 = 5376. */
static void test_binning_bin_range_is_configurable(void **unused)
{
    (void)unused;
    const char *const settings[] = {"min_bin_exponent=10", "max_bin_exponent=12", NULL};
    vb_alloc_fixture *f = vb_fixture_open("binning", 0, settings);
    vb_must_malloc(f, 1);
    vb_must_malloc(f, 4097);
    assert_int_equal(vb_fixture_stats(f).allocated_bytes, 5376);
    vb_fixture_close(f);
}

/* ------------------------------------------------------------------------ */
/* The pool                                                                  */
/* ------------------------------------------------------------------------ */

/* 4 MiB + 1 B is above the largest bin: the pool serves it rounded to 256 B
 * (4 MiB + 256), growing by that much in 2 MiB pages: 6 MiB. */
static void test_binning_request_above_the_largest_bin_goes_to_the_pool(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("binning", 0, NULL);
    vb_must_malloc(f, 4 * MiB + 1);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.allocated_bytes, 4 * MiB + 256);
    assert_int_equal(stats.reserved_bytes, 6 * MiB);
    vb_fixture_close(f);
}

/* A 16 MiB upstream block (from a 16 MiB request, freed) serves 5 MiB at its
 * start and 5 MiB after it; freed, both merge with each other and with the
 * free 6 MiB tail: one free block of 16 MiB again. */
static void test_binning_pool_coalesces_freed_neighbours(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("binning", 0, NULL);
    vb_addr whole = vb_must_malloc(f, 16 * MiB);
    vb_must_free(f, whole);
    vb_addr a = vb_must_malloc(f, 5 * MiB);
    vb_addr b = vb_must_malloc(f, 5 * MiB);
    assert_int_equal(a, whole);
    assert_int_equal(b, whole + 5 * MiB);
    vb_must_free(f, a);
    vb_must_free(f, b);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.largest_free_block, 16 * MiB);
    assert_int_equal(stats.free_cached_bytes, 16 * MiB);
    vb_fixture_close(f);
}

/* A 32 MiB upstream block cut into a 6 MiB | g 5 MiB | b 5 MiB | h 16 MiB.
 * With a and b free, 4.5 MiB best-fits b (5 MiB), not the lower a (6 MiB). */
static void test_binning_pool_takes_the_best_fit(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("binning", 0, NULL);
    vb_addr whole = vb_must_malloc(f, 32 * MiB);
    vb_must_free(f, whole);
    vb_addr a = vb_must_malloc(f, 6 * MiB);
    vb_must_malloc(f, 5 * MiB);
    vb_addr b = vb_must_malloc(f, 5 * MiB);
    vb_must_malloc(f, 16 * MiB);
    vb_must_free(f, a);
    vb_must_free(f, b);
    assert_int_equal(vb_must_malloc(f, 4608 * KiB), b);
    vb_fixture_close(f);
}

/* The pool grows by max(request, pool size): 10 MiB first (pool 0), then
 * 6 MiB grows by the pool's 10 MiB: reserved 20 MiB. */
static void test_binning_pool_grows_by_at_least_its_size(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("binning", 0, NULL);
    vb_must_malloc(f, 10 * MiB);
    vb_must_malloc(f, 6 * MiB);
    assert_int_equal(vb_fixture_stats(f).reserved_bytes, 20 * MiB);
    vb_fixture_close(f);
}

/* ------------------------------------------------------------------------ */
/* Releasing memory                                                          */
/* ------------------------------------------------------------------------ */

/* After 1 B is freed, its bin chunk is wholly free: empty_cache gives it back
 * to the pool and the pool's wholly free 32 MiB block to the device. */
static void test_binning_empty_cache_returns_wholly_free_chunks_to_the_device(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("binning", 0, NULL);
    vb_addr a = vb_must_malloc(f, 1);
    vb_must_free(f, a);
    assert_int_equal(vb_empty_cache(f->alloc), VB_OK);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.reserved_bytes, 0);
    assert_int_equal(stats.driver_free_calls, 1);
    vb_fixture_close(f);
}

/* A bin chunk with one block in use stays: reserved still 32 MiB. */
static void test_binning_empty_cache_keeps_a_chunk_in_use(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("binning", 0, NULL);
    vb_must_malloc(f, 1);
    vb_addr b = vb_must_malloc(f, 1);
    vb_must_free(f, b);
    assert_int_equal(vb_empty_cache(f->alloc), VB_OK);
    assert_int_equal(vb_fixture_stats(f).reserved_bytes, 32 * MiB);
    vb_fixture_close(f);
}

/* A pool made at creation (initial_pool_mb) that nothing was taken from
 * is wholly free: empty_cache gives it back. */
static void test_binning_empty_cache_returns_an_initial_pool_never_used(void **unused)
{
    (void)unused;
    const char *const settings[] = {"initial_pool_mb=64", NULL};
    vb_alloc_fixture *f = vb_fixture_open("binning", 0, settings);
    assert_int_equal(vb_fixture_stats(f).reserved_bytes, 64 * MiB);
    assert_int_equal(vb_empty_cache(f->alloc), VB_OK);
    assert_int_equal(vb_fixture_stats(f).reserved_bytes, 0);
    assert_int_equal(vb_binning_wholly_free_regions(f->alloc->state), 0);
    vb_fixture_close(f);
}

/* empty_cache looks only at the regions it listed as they became wholly
 * free; a walk over every region must find none left after it. A random
 * sequence of bin-sized (1 B to 4 MiB) and pool-sized (to 64 MiB)
 * blocks, chunks of 128 and of 8 blocks, on a 768 MiB sim where some
 * requests run out of memory (each such one empties the cache too): from
 * time to time, empty_cache, then no bin chunk and no upstream block is
 * without a block in use. */
static void test_binning_empty_cache_leaves_no_wholly_free_region(void **unused)
{
    (void)unused;
    const char *const chunked[] = {"blocks_per_chunk=8", NULL};
    const char *const *settings[] = {NULL, chunked};
    for (size_t s = 0; s < 2; s++) {
        vb_alloc_fixture *f = vb_fixture_open("binning", 768 * MiB, settings[s]);
        vb_addr live[64] = {0};
        uint64_t rng = 5 + s;
        for (int step = 1; step <= 4000; step++) {
            uint64_t pick = next_random(&rng);
            size_t slot = (size_t)(pick % 64);
            if (live[slot]) {
                vb_must_free(f, live[slot]);
                live[slot] = 0;
            } else {
                uint64_t limit = (pick >> 8) % 2 ? 4 * MiB : 64 * MiB;
                vb_addr addr = 0;
                vb_status status = vb_malloc(f->alloc, 1 + next_random(&rng) % limit, NULL, &addr);
                assert_true(status == VB_OK || status == VB_ERR_OOM);
                live[slot] = status == VB_OK ? addr : 0;
            }
            if (step % 200 != 0) continue;
            assert_int_equal(vb_empty_cache(f->alloc), VB_OK);
            assert_int_equal(vb_binning_wholly_free_regions(f->alloc->state), 0);
        }
        assert_true(vb_fixture_stats(f).alloc_retries > 0); /* the out-of-memory path was taken */
        vb_fixture_close(f);
    }
}

/* On a 16 MiB sim the 1 MiB bin's chunk of 128 MiB is refused, and so are
 * 64 and 32 MiB; 16 blocks (16 MiB) fit. */
static void test_binning_bin_chunk_shrinks_when_the_device_refuses(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("binning", 16 * MiB, NULL);
    vb_must_malloc(f, 1 * MiB);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.reserved_bytes, 16 * MiB);
    assert_int_equal(stats.driver_alloc_calls, 4);
    vb_fixture_close(f);
}

/* On a 40 MiB sim a freed 1 B leaves a 32 MiB bin chunk cached; 20 MiB then
 * cannot grow the pool (32 MiB, then 20 MiB refused: 8 MiB free), so the
 * cache is given back (the chunk, then its upstream block) and the retry
 * grows a 20 MiB block: one retry, reserved 20 MiB. */
static void test_binning_out_of_memory_frees_the_cache_and_retries(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("binning", 40 * MiB, NULL);
    vb_addr a = vb_must_malloc(f, 1);
    vb_must_free(f, a);
    vb_must_malloc(f, 20 * MiB);
    vb_alloc_stats stats = vb_fixture_stats(f);
    assert_int_equal(stats.alloc_retries, 1);
    assert_int_equal(stats.reserved_bytes, 20 * MiB);
    vb_fixture_close(f);
}

/* ------------------------------------------------------------------------ */
/* Streams and bad input                                                     */
/* ------------------------------------------------------------------------ */

/* A bin block recorded on a busy stream and freed is not reused (the next
 * 1 B gets the following block) until the stream's work completes; then it
 * is the lowest free block of the bin again. */
static void test_binning_record_stream_holds_the_block_until_the_work_completes(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("binning", 0, NULL);
    vb_addr a = vb_must_malloc(f, 1);
    vb_stream stream = vb_free_while_used_on_busy_stream(f, a, 1000);
    assert_int_equal(vb_must_malloc(f, 1), a + 256 * KiB);
    vb_sim_complete_stream(f->dev, stream);
    assert_int_equal(vb_must_malloc(f, 1), a);
    vb_fixture_close(f);
}

/* Freeing twice, or a pointer never handed out, is VB_ERR_INVALID. */
static void test_binning_rejects_double_and_unknown_free(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("binning", 0, NULL);
    vb_addr a = vb_must_malloc(f, 1);
    vb_must_free(f, a);
    assert_int_equal(vb_free(f->alloc, a), VB_ERR_INVALID);
    assert_int_equal(vb_free(f->alloc, a + 256), VB_ERR_INVALID);
    vb_fixture_close(f);
}

/* A size near UINT64_MAX overflows the rounding: out of memory, counted. */
static void test_binning_absurd_size_is_out_of_memory(void **unused)
{
    (void)unused;
    vb_alloc_fixture *f = vb_fixture_open("binning", 0, NULL);
    vb_addr addr;
    assert_int_equal(vb_malloc(f->alloc, UINT64_MAX - 10, NULL, &addr), VB_ERR_OOM);
    assert_int_equal(vb_fixture_stats(f).ooms, 1);
    vb_fixture_close(f);
}

/* A smallest bin above the largest is refused. */
static void test_binning_rejects_an_empty_bin_range(void **unused)
{
    (void)unused;
    const char *const settings[] = {"min_bin_exponent=20", "max_bin_exponent=18", NULL};
    assert_int_equal(vb_fixture_create_status("binning", 0, settings), VB_ERR_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_binning_small_request_takes_a_smallest_bin_block),
        cmocka_unit_test(test_binning_request_goes_to_the_smallest_bin_that_holds_it),
        cmocka_unit_test(test_binning_largest_bin_size_is_served_by_the_bin),
        cmocka_unit_test(test_binning_small_requests_share_a_bin_chunk),
        cmocka_unit_test(test_binning_bin_range_is_configurable),
        cmocka_unit_test(test_binning_request_above_the_largest_bin_goes_to_the_pool),
        cmocka_unit_test(test_binning_pool_coalesces_freed_neighbours),
        cmocka_unit_test(test_binning_pool_takes_the_best_fit),
        cmocka_unit_test(test_binning_pool_grows_by_at_least_its_size),
        cmocka_unit_test(test_binning_empty_cache_returns_wholly_free_chunks_to_the_device),
        cmocka_unit_test(test_binning_empty_cache_keeps_a_chunk_in_use),
        cmocka_unit_test(test_binning_empty_cache_returns_an_initial_pool_never_used),
        cmocka_unit_test(test_binning_empty_cache_leaves_no_wholly_free_region),
        cmocka_unit_test(test_binning_bin_chunk_shrinks_when_the_device_refuses),
        cmocka_unit_test(test_binning_out_of_memory_frees_the_cache_and_retries),
        cmocka_unit_test(test_binning_record_stream_holds_the_block_until_the_work_completes),
        cmocka_unit_test(test_binning_rejects_double_and_unknown_free),
        cmocka_unit_test(test_binning_absurd_size_is_out_of_memory),
        cmocka_unit_test(test_binning_rejects_an_empty_bin_range),
    };
    return cmocka_run_group_tests_name("binning", tests, NULL, NULL);
}
