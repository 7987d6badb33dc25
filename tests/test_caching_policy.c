/* vrambench — unit tests of the `caching` policy, and of `expandable`
 * (the same policy over one growing mapped range), on the simulated device.
 *
 * Every expected number is worked out in the comments from PyTorch's rules
 * as caching_core.c implements them:
 *   round:   sizes < 512 -> 512, else up to a multiple of 512 (or, with
 *            roundup_power2_divisions = d and size > 512 d, up to the next of
 *            d equal steps between the powers of two around the size);
 *   pool:    rounded size <= 1 MiB -> small pool, else large;
 *   segment: small -> 2 MiB; large < 10 MiB -> 20 MiB; else rounded to 2 MiB;
 *   split:   small when remainder >= 512; large when remainder > 1 MiB and
 *            size < max_split_size;
 *   oversize: a block >= max_split_size serves only requests >= max_split_size
 *            and less than 20 MiB smaller than itself.
 * and for `expandable` (PyTorch's expandable segments):
 *   range:   one reserved range per (stream, pool), grown by mapping whole
 *            chunks (small pool 2 MiB, large pool 20 MiB) at the lowest place
 *            where free space plus unmapped space hold the request;
 *   split:   any remainder >= 512 B, in both pools;
 *   best fit: among fitting blocks, one that cannot grow is preferred to a
 *            smaller one at a range's mapped end;
 *   empty_cache: unmaps every chunk wholly inside a free block.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "allocators/allocator.h"
#include "alloc_fixture.h"
#include "test_random.h"

#define MiB VB_MiB

/* ------------------------------------------------------------------------ */
/* Helpers                                                                    */
/* ------------------------------------------------------------------------ */

static vb_alloc_fixture *open_caching(uint64_t capacity, const char *const *settings)
{
    return vb_fixture_open("caching", capacity, settings);
}

static vb_alloc_fixture *open_expandable(uint64_t capacity)
{
    return vb_fixture_open("expandable", capacity, NULL);
}

/* ------------------------------------------------------------------------ */
/* Rounding                                                                   */
/* ------------------------------------------------------------------------ */

/* 1 -> 512, 512 -> 512, 513 -> 1024: allocated 2048 for requested 1026. */
static void test_sizes_round_up_to_512_bytes(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_caching(0, NULL);
    vb_must_malloc(f, 1);
    vb_must_malloc(f, 512);
    vb_must_malloc(f, 513);
    vb_alloc_stats s = vb_fixture_stats(f);
    assert_int_equal(s.requested_bytes, 1 + 512 + 513);
    assert_int_equal(s.allocated_bytes, 512 + 512 + 1024);
    vb_fixture_close(f);
}

/* divisions 4: 1 MiB + 1 lies in [1 MiB, 2 MiB), steps of 256 KiB ->
 * 1.25 MiB; 5 MiB + 1 in [4, 8) MiB, steps of 1 MiB -> 6 MiB; 8 MiB is a
 * power of two and stays. Allocated 1.25 + 6 + 8 MiB. */
static void test_roundup_power2_divisions_rounds_to_division_steps(void **state)
{
    (void)state;
    const char *const settings[] = {"roundup_power2_divisions=4", NULL};
    vb_alloc_fixture *f = open_caching(0, settings);
    vb_must_malloc(f, MiB + 1);
    vb_must_malloc(f, 5 * MiB + 1);
    vb_must_malloc(f, 8 * MiB);
    assert_int_equal(vb_fixture_stats(f).allocated_bytes, MiB + MiB / 4 + 6 * MiB + 8 * MiB);
    vb_fixture_close(f);
}

/* The per-interval form (PyTorch's "[4:4,>:8]"): the first boundary, 4 MiB,
 * also sets the intervals below it, ">" the ones after: 1 MiB + 1 and
 * 5 MiB + 1 take quarter steps (1.25 and 6 MiB), 9 MiB + 1 in [8, 16) MiB
 * eighth steps of 1 MiB (10 MiB). */
static void test_roundup_power2_divisions_per_interval(void **state)
{
    (void)state;
    const char *const settings[] = {"roundup_power2_divisions=[4:4,>:8]", NULL};
    vb_alloc_fixture *f = open_caching(0, settings);
    vb_must_malloc(f, MiB + 1);
    vb_must_malloc(f, 5 * MiB + 1);
    vb_must_malloc(f, 9 * MiB + 1);
    assert_int_equal(vb_fixture_stats(f).allocated_bytes, MiB + MiB / 4 + 6 * MiB + 10 * MiB);
    vb_fixture_close(f);
}

/* divisions 4 applies only above 512 x 4 = 2048 B: 1200 takes plain 512 B
 * rounding -> 1536 (not the 1280 of quarter steps). */
static void test_roundup_power2_divisions_leaves_sizes_up_to_2048_to_512_rounding(void **state)
{
    (void)state;
    const char *const settings[] = {"roundup_power2_divisions=4", NULL};
    vb_alloc_fixture *f = open_caching(0, settings);
    vb_must_malloc(f, 1200);
    assert_int_equal(vb_fixture_stats(f).allocated_bytes, 1536);
    vb_fixture_close(f);
}

/* ------------------------------------------------------------------------ */
/* Segment sizes                                                              */
/* ------------------------------------------------------------------------ */

/* Reserved bytes after one malloc of `size` on a fresh allocator. */
static uint64_t segment_for(uint64_t size)
{
    vb_alloc_fixture *f = open_caching(0, NULL);
    vb_must_malloc(f, size);
    uint64_t reserved = vb_fixture_stats(f).reserved_bytes;
    vb_fixture_close(f);
    return reserved;
}

/* 1 MiB is still small: a 2 MiB small-pool segment. */
static void test_1mib_request_gets_2mib_segment(void **state)
{
    (void)state;
    assert_int_equal(segment_for(MiB), 2 * MiB);
}

/* 1 MiB + 1 rounds to 1 MiB + 512: large, under 10 MiB -> 20 MiB. */
static void test_just_over_1mib_gets_20mib_segment(void **state)
{
    (void)state;
    assert_int_equal(segment_for(MiB + 1), 20 * MiB);
}

/* 9.5 MiB is under 10 MiB -> 20 MiB. */
static void test_under_10mib_gets_20mib_segment(void **state)
{
    (void)state;
    assert_int_equal(segment_for(9 * MiB + MiB / 2), 20 * MiB);
}

/* 10 MiB is not under 10 MiB -> its own segment, 10 MiB already a multiple of 2 MiB. */
static void test_10mib_gets_10mib_segment(void **state)
{
    (void)state;
    assert_int_equal(segment_for(10 * MiB), 10 * MiB);
}

/* 11 MiB -> rounded up to 2 MiB -> 12 MiB. */
static void test_11mib_gets_12mib_segment(void **state)
{
    (void)state;
    assert_int_equal(segment_for(11 * MiB), 12 * MiB);
}

/* Twenty 64 KiB requests (1.25 MiB) share one 2 MiB small segment. */
static void test_small_requests_share_one_segment(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_caching(0, NULL);
    for (int i = 0; i < 20; i++) vb_must_malloc(f, 64 << 10);
    vb_alloc_stats s = vb_fixture_stats(f);
    assert_int_equal(s.reserved_bytes, 2 * MiB);
    assert_int_equal(s.driver_alloc_calls, 1);
    vb_fixture_close(f);
}

/* ------------------------------------------------------------------------ */
/* Split / no split                                                           */
/* ------------------------------------------------------------------------ */

/* Small segment of 2 MiB: 1 MiB leaves 1 MiB (split); then 1 MiB - 512
 * leaves exactly 512, which is >= 512 -> split again: three blocks, the
 * last a free 512 B one. */
static void test_small_block_splits_off_a_512_byte_remainder(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_caching(0, NULL);
    vb_must_malloc(f, MiB);
    vb_must_malloc(f, MiB - 512);
    vb_block_list list = vb_fixture_blocks(f);
    assert_int_equal(list.count, 3);
    assert_int_equal(list.blocks[2].block_size, 512);
    assert_int_equal(list.blocks[2].allocated, 0);
    vb_fixture_close(f);
}

/* 19 MiB -> a 20 MiB segment (>= 10 MiB, rounded to 2 MiB); the remainder
 * of exactly 1 MiB is not > 1 MiB -> no split: one block, and the whole
 * 20 MiB counts as allocated. */
static void test_large_remainder_of_exactly_1mib_is_not_split(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_caching(0, NULL);
    vb_must_malloc(f, 19 * MiB);
    assert_int_equal(vb_fixture_blocks(f).count, 1);
    assert_int_equal(vb_fixture_stats(f).allocated_bytes, 20 * MiB);
    vb_fixture_close(f);
}

/* 19 MiB - 512 -> still a 20 MiB segment; remainder 1 MiB + 512 > 1 MiB
 * -> split: two blocks, allocated 19 MiB - 512. */
static void test_large_remainder_over_1mib_is_split(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_caching(0, NULL);
    vb_must_malloc(f, 19 * MiB - 512);
    vb_block_list list = vb_fixture_blocks(f);
    assert_int_equal(list.count, 2);
    assert_int_equal(list.blocks[1].block_size, MiB + 512);
    assert_int_equal(vb_fixture_stats(f).allocated_bytes, 19 * MiB - 512);
    vb_fixture_close(f);
}

/* ------------------------------------------------------------------------ */
/* Best fit, streams, coalescing, empty_cache                                 */
/* ------------------------------------------------------------------------ */

/* Cached unsplit blocks of 14 MiB and 12 MiB: an 11 MiB request takes the
 * 12 MiB one (the smallest that fits; remainder 1 MiB -> no split). */
static void test_best_fit_takes_the_smallest_block_that_fits(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_caching(0, NULL);
    vb_addr big = vb_must_malloc(f, 14 * MiB);
    vb_addr fitting = vb_must_malloc(f, 12 * MiB);
    vb_must_free(f, big);
    vb_must_free(f, fitting);
    assert_int_equal(vb_must_malloc(f, 11 * MiB), fitting);
    vb_fixture_close(f);
}

/* A block cached on one stream is not handed to another: the second
 * stream's 20 MiB request gets a second segment (reserved 40 MiB). */
static void test_cached_block_is_not_used_by_another_stream(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_caching(0, NULL);
    vb_stream other = vb_fixture_stream(f);
    vb_must_free(f, vb_must_malloc(f, 20 * MiB));
    vb_must_malloc_on(f, 20 * MiB, other);
    assert_int_equal(vb_fixture_stats(f).reserved_bytes, 40 * MiB);
    vb_fixture_close(f);
}

/* Three 2 MiB blocks A B C at the front of a 20 MiB segment (14 MiB free
 * after them). Free B, then A (joins B), then C (joins A+B and the 14 MiB
 * rest): one free block of 20 MiB. */
static void test_freeing_middle_then_neighbours_coalesces_to_one_block(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_caching(0, NULL);
    vb_addr a = vb_must_malloc(f, 2 * MiB);
    vb_addr b = vb_must_malloc(f, 2 * MiB);
    vb_addr c = vb_must_malloc(f, 2 * MiB);
    vb_must_free(f, b);
    assert_int_equal(vb_fixture_blocks(f).count, 4);
    vb_must_free(f, a);
    vb_must_free(f, c);
    vb_block_list list = vb_fixture_blocks(f);
    assert_int_equal(list.count, 1);
    assert_int_equal(list.blocks[0].block_size, 20 * MiB);
    assert_int_equal(list.blocks[0].allocated, 0);
    vb_fixture_close(f);
}

/* The coalesced 20 MiB segment is unsplit and free: empty_cache returns
 * it (reserved 0, one driver free). */
static void test_empty_cache_releases_a_coalesced_segment(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_caching(0, NULL);
    vb_addr a = vb_must_malloc(f, 2 * MiB);
    vb_addr b = vb_must_malloc(f, 2 * MiB);
    vb_must_free(f, b);
    vb_must_free(f, a);
    assert_int_equal(vb_empty_cache(f->alloc), VB_OK);
    vb_alloc_stats s = vb_fixture_stats(f);
    assert_int_equal(s.reserved_bytes, 0);
    assert_int_equal(s.driver_free_calls, 1);
    vb_fixture_close(f);
}

/* With one 2 MiB block still allocated the 20 MiB segment is split:
 * empty_cache keeps it (reserved stays 20 MiB). */
static void test_empty_cache_keeps_a_segment_in_use(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_caching(0, NULL);
    vb_must_malloc(f, 2 * MiB);
    vb_must_free(f, vb_must_malloc(f, 2 * MiB));
    assert_int_equal(vb_empty_cache(f->alloc), VB_OK);
    assert_int_equal(vb_fixture_stats(f).reserved_bytes, 20 * MiB);
    vb_fixture_close(f);
}

/* A random sequence of mallocs and frees on the default stream, for the
 * empty_cache properties below: live blocks by slot, and the seed. */
#define RANDOM_SLOTS 96
#define RANDOM_STEPS 3000
typedef struct random_blocks {
    vb_addr live[RANDOM_SLOTS];
    uint64_t rng;
} random_blocks;

/* One step: a random slot's block is freed, or (an empty slot) one of 1
 * byte to 1 MiB, to `middling` or to 100 MiB is taken, a third each. */
static void random_block_step(vb_alloc_fixture *f, random_blocks *blocks, uint64_t middling)
{
    uint64_t pick = next_random(&blocks->rng);
    size_t slot = (size_t)(pick % RANDOM_SLOTS);
    if (blocks->live[slot]) {
        vb_must_free(f, blocks->live[slot]);
        blocks->live[slot] = 0;
        return;
    }
    uint64_t limit = (pick >> 8) % 3 == 0 ? MiB : (pick >> 8) % 3 == 1 ? middling : 100 * MiB;
    blocks->live[slot] = vb_must_malloc(f, 1 + next_random(&blocks->rng) % limit);
}

/* vb_block_visitor context: the segments seen and those holding an
 * allocated block (blocks come in address order, a segment's together). */
typedef struct segments_in_use {
    size_t segments, in_use;
    vb_addr last;
    int last_in_use;
} segments_in_use;

static void count_segments_in_use(void *context, const vb_block_info *block)
{
    segments_in_use *seen = context;
    if (seen->segments == 0 || block->segment != seen->last) {
        seen->segments++;
        seen->last = block->segment;
        seen->last_in_use = 0;
    }
    if (block->allocated && !seen->last_in_use) {
        seen->in_use++;
        seen->last_in_use = 1;
    }
}

/* empty_cache gives back every segment with nothing allocated in it, of
 * whatever size: from time to time in a random sequence of small (<= 1
 * MiB: 2 MiB segments), middling (1 to 10 MiB: 20 MiB segments) and large
 * blocks (their own segments, to 100 MiB), every segment left holds an
 * allocated block. (release_pool visits only the free blocks as large as
 * the smallest segment made: this holds it to PyTorch's, which visits all.) */
static void test_empty_cache_releases_every_segment_without_allocated_blocks(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_caching(0, NULL);
    random_blocks blocks = {{0}, 12};
    for (int step = 1; step <= RANDOM_STEPS; step++) {
        random_block_step(f, &blocks, 10 * MiB);
        if (step % 250 != 0) continue;
        assert_int_equal(vb_empty_cache(f->alloc), VB_OK);
        segments_in_use seen = {0, 0, 0, 0};
        f->alloc->ops->segments(f->alloc->state, count_segments_in_use, &seen);
        assert_true(seen.segments > 0);
        assert_int_equal(seen.in_use, seen.segments);
    }
    vb_fixture_close(f);
}

/* 2 MiB allocated in a 20 MiB segment, 512 B in a 2 MiB small one: cached
 * = 18 MiB + (2 MiB - 512); the largest free block is the 18 MiB one. */
static void test_cached_reports_free_bytes_and_largest_block(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_caching(0, NULL);
    vb_must_malloc(f, 2 * MiB);
    vb_must_malloc(f, 512);
    vb_alloc_stats s = vb_fixture_stats(f);
    assert_int_equal(s.free_cached_bytes, 18 * MiB + 2 * MiB - 512);
    assert_int_equal(s.largest_free_block, 18 * MiB);
    vb_fixture_close(f);
}

/* segments() lists segments by address, each block inside its segment. */
static void test_segments_are_listed_in_address_order(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_caching(0, NULL);
    vb_must_malloc(f, 30 * MiB);
    vb_must_malloc(f, 512);
    vb_must_malloc(f, 12 * MiB);
    vb_block_list list = vb_fixture_blocks(f);
    assert_int_equal(vb_block_list_segment_count(&list), 3);
    for (size_t i = 1; i < list.count; i++) assert_true(list.blocks[i].block > list.blocks[i - 1].block);
    for (size_t i = 0; i < list.count; i++) {
        assert_true(list.blocks[i].block >= list.blocks[i].segment);
        assert_true(list.blocks[i].block + list.blocks[i].block_size <=
                    list.blocks[i].segment + list.blocks[i].segment_size);
    }
    vb_fixture_close(f);
}

/* ------------------------------------------------------------------------ */
/* max_split_size                                                             */
/* ------------------------------------------------------------------------ */

/* max_split_size 40 MiB: a cached 50 MiB block (>= 40) serves a 45 MiB
 * request (5 MiB < 20 MiB larger) whole, without splitting: allocated
 * 50 MiB, still one driver allocation. */
static void test_oversize_block_serves_request_within_20mib_unsplit(void **state)
{
    (void)state;
    const char *const settings[] = {"max_split_size_mb=40", NULL};
    vb_alloc_fixture *f = open_caching(0, settings);
    vb_addr block = vb_must_malloc(f, 50 * MiB);
    vb_must_free(f, block);
    assert_int_equal(vb_must_malloc(f, 45 * MiB), block);
    vb_alloc_stats s = vb_fixture_stats(f);
    assert_int_equal(s.allocated_bytes, 50 * MiB);
    assert_int_equal(s.driver_alloc_calls, 1);
    assert_int_equal(vb_fixture_blocks(f).count, 1);
    vb_fixture_close(f);
}

/* A cached 70 MiB oversize block and a 50 MiB request: 70 - 50 = 20 MiB is
 * not < 20 MiB -> refused; a new 50 MiB segment (reserved 120 MiB). */
static void test_oversize_block_refuses_request_20mib_smaller(void **state)
{
    (void)state;
    const char *const settings[] = {"max_split_size_mb=40", NULL};
    vb_alloc_fixture *f = open_caching(0, settings);
    vb_must_free(f, vb_must_malloc(f, 70 * MiB));
    vb_must_malloc(f, 50 * MiB);
    assert_int_equal(vb_fixture_stats(f).reserved_bytes, 120 * MiB);
    vb_fixture_close(f);
}

/* A request under max_split_size (30 MiB < 40) never takes an oversize
 * block: the cached 50 MiB stays, a 30 MiB segment is added (80 MiB). */
static void test_oversize_block_refuses_request_below_max_split_size(void **state)
{
    (void)state;
    const char *const settings[] = {"max_split_size_mb=40", NULL};
    vb_alloc_fixture *f = open_caching(0, settings);
    vb_must_free(f, vb_must_malloc(f, 50 * MiB));
    vb_must_malloc(f, 30 * MiB);
    assert_int_equal(vb_fixture_stats(f).reserved_bytes, 80 * MiB);
    vb_fixture_close(f);
}

/* Without the option the same 50 MiB block is split for 30 MiB (remainder
 * 20 MiB > 1 MiB): nothing new reserved. */
static void test_without_max_split_size_large_blocks_split(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_caching(0, NULL);
    vb_must_free(f, vb_must_malloc(f, 50 * MiB));
    vb_must_malloc(f, 30 * MiB);
    assert_int_equal(vb_fixture_stats(f).reserved_bytes, 50 * MiB);
    assert_int_equal(vb_fixture_blocks(f).count, 2);
    vb_fixture_close(f);
}

/* ------------------------------------------------------------------------ */
/* record_stream                                                              */
/* ------------------------------------------------------------------------ */

/* A 20 MiB block used on a busy second stream and freed: the next 20 MiB
 * request on its own stream does not get it back (a second segment). */
static void test_block_not_reused_while_other_stream_work_pending(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_caching(0, NULL);
    vb_addr block = vb_must_malloc(f, 20 * MiB);
    vb_free_while_used_on_busy_stream(f, block, 1000000);
    assert_true(vb_must_malloc(f, 20 * MiB) != block);
    assert_int_equal(vb_fixture_stats(f).reserved_bytes, 40 * MiB);
    vb_fixture_close(f);
}

/* Once the side stream's work completes the block is reused. */
static void test_block_reused_after_other_stream_completes(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_caching(0, NULL);
    vb_addr block = vb_must_malloc(f, 20 * MiB);
    vb_stream side = vb_free_while_used_on_busy_stream(f, block, 1000000);
    vb_sim_complete_stream(f->dev, side);
    assert_int_equal(vb_must_malloc(f, 20 * MiB), block);
    assert_int_equal(vb_fixture_stats(f).reserved_bytes, 20 * MiB);
    vb_fixture_close(f);
}

/* empty_cache waits for the pending event, then frees the segment. */
static void test_empty_cache_waits_for_pending_uses_then_releases(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_caching(0, NULL);
    vb_addr block = vb_must_malloc(f, 20 * MiB);
    vb_free_while_used_on_busy_stream(f, block, 1000000);
    assert_int_equal(vb_empty_cache(f->alloc), VB_OK);
    assert_int_equal(vb_fixture_stats(f).reserved_bytes, 0);
    vb_fixture_close(f);
}

/* record_stream of a pointer that is not allocated is an error. */
static void test_record_stream_of_unknown_pointer_is_invalid(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_caching(0, NULL);
    vb_stream side = vb_fixture_stream(f);
    assert_int_equal(vb_record_stream(f->alloc, 0x1000, side), VB_ERR_INVALID);
    vb_fixture_close(f);
}

/* ------------------------------------------------------------------------ */
/* Out of memory, garbage collection, memory_fraction                         */
/* ------------------------------------------------------------------------ */

/* 64 MiB device: a cached 40 MiB segment leaves 24 MiB, too little for a
 * 50 MiB request; the cache is released (one driver free) and the retry
 * succeeds: alloc_retries 1, ooms 0, reserved 50 MiB. */
static void test_oom_releases_cache_and_retry_is_counted(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_caching(64 * MiB, NULL);
    vb_must_free(f, vb_must_malloc(f, 40 * MiB));
    vb_must_malloc(f, 50 * MiB);
    vb_alloc_stats s = vb_fixture_stats(f);
    assert_int_equal(s.alloc_retries, 1);
    assert_int_equal(s.ooms, 0);
    assert_int_equal(s.driver_free_calls, 1);
    assert_int_equal(s.reserved_bytes, 50 * MiB);
    vb_fixture_close(f);
}

/* 100 MiB on a 64 MiB device: the retry happens (counted, as PyTorch does)
 * and fails: VB_ERR_OOM, ooms 1. */
static void test_oom_after_failed_retry_is_reported(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_caching(64 * MiB, NULL);
    vb_addr addr = 0;
    assert_int_equal(vb_malloc(f->alloc, 100 * MiB, NULL, &addr), VB_ERR_OOM);
    vb_alloc_stats s = vb_fixture_stats(f);
    assert_int_equal(s.ooms, 1);
    assert_int_equal(s.alloc_retries, 1);
    vb_fixture_close(f);
}

/* With max_split_size 20 MiB on a 64 MiB device, cached oversize blocks of
 * 24 and 30 MiB (10 MiB left free) and a 40 MiB request: no single cached
 * block covers 40 MiB, so release_available_cached_blocks frees from the
 * largest down (30, then 24: 54 >= 40) and the first attempt after it
 * succeeds: no alloc_retries, two driver frees. */
static void test_oom_frees_oversize_blocks_before_whole_cache(void **state)
{
    (void)state;
    const char *const settings[] = {"max_split_size_mb=20", NULL};
    vb_alloc_fixture *f = open_caching(64 * MiB, settings);
    vb_addr a = vb_must_malloc(f, 24 * MiB);
    vb_addr b = vb_must_malloc(f, 30 * MiB);
    vb_must_free(f, a);
    vb_must_free(f, b);
    vb_must_malloc(f, 40 * MiB);
    vb_alloc_stats s = vb_fixture_stats(f);
    assert_int_equal(s.alloc_retries, 0);
    assert_int_equal(s.driver_free_calls, 2);
    assert_int_equal(s.reserved_bytes, 40 * MiB);
    vb_fixture_close(f);
}

/* memory_fraction 0.25 of 100 MiB allows 25 MiB: 20 MiB fits, 10 MiB more
 * does not (30 > 25) even after releasing the (empty) cache: OOM. */
static void test_memory_fraction_caps_reserved_memory(void **state)
{
    (void)state;
    const char *const settings[] = {"memory_fraction=0.25", NULL};
    vb_alloc_fixture *f = open_caching(100 * MiB, settings);
    vb_must_malloc(f, 20 * MiB);
    vb_addr addr = 0;
    assert_int_equal(vb_malloc(f->alloc, 10 * MiB, NULL, &addr), VB_ERR_OOM);
    assert_int_equal(vb_fixture_stats(f).reserved_bytes, 20 * MiB);
    vb_fixture_close(f);
}

/* 200 MiB device, memory_fraction 0.5 (100 MiB allowed), threshold 0.3
 * (30 MiB). Each large-pool get_free_block call ticks the pool's clock:
 *   malloc A 12 MiB (tick 1), malloc B 14 MiB (tick 2), free A, free B
 *   (both stamped 2), malloc C 16 MiB (tick 3, no fit; reserved 26 <= 30:
 *   no GC), free C (stamped 3), malloc D 18 MiB (tick 4, no fit; reserved
 *   42 > 30: GC). Ages A 2, B 2, C 1, average 5/3: A and B (>= 5/3) go,
 *   26 MiB >= the 12 MiB target. Reserved 42 - 26 + 18 = 34 MiB, and C's
 *   16 MiB is still cached. */
static void test_garbage_collection_frees_the_oldest_cached_segments(void **state)
{
    (void)state;
    const char *const settings[] = {"memory_fraction=0.5", "garbage_collection_threshold=0.3", NULL};
    vb_alloc_fixture *f = open_caching(200 * MiB, settings);
    vb_addr a = vb_must_malloc(f, 12 * MiB);
    vb_addr b = vb_must_malloc(f, 14 * MiB);
    vb_must_free(f, a);
    vb_must_free(f, b);
    vb_must_free(f, vb_must_malloc(f, 16 * MiB));
    vb_must_malloc(f, 18 * MiB);
    vb_alloc_stats s = vb_fixture_stats(f);
    assert_int_equal(s.reserved_bytes, 34 * MiB);
    assert_int_equal(s.free_cached_bytes, 16 * MiB);
    assert_int_equal(s.driver_free_calls, 2);
    vb_fixture_close(f);
}

/* ------------------------------------------------------------------------ */
/* Bad input                                                                  */
/* ------------------------------------------------------------------------ */

/* Creating with `setting` must fail with VB_ERR_INVALID and a message. */
static void expect_config_refused(const char *setting)
{
    const char *const settings[] = {setting, NULL};
    vb_clear_error();
    assert_int_equal(vb_fixture_create_status("caching", 0, settings), VB_ERR_INVALID);
    assert_true(strlen(vb_last_error()) > 0);
}

/* PyTorch's rules for the per-interval form: boundaries and values powers
 * of two (a value may be 0), the list closed, nothing after it. */
static void test_roundup_power2_divisions_per_interval_refusals(void **state)
{
    (void)state;
    expect_config_refused("roundup_power2_divisions=[3:1]");
    expect_config_refused("roundup_power2_divisions=[4:3]");
    expect_config_refused("roundup_power2_divisions=[4:1");
    expect_config_refused("roundup_power2_divisions=[4:1]x");
    expect_config_refused("roundup_power2_divisions=[4:1,,>:2]");
    expect_config_refused("roundup_power2_divisions=[>2]");
}

static void test_unknown_config_key_is_invalid(void **state)
{
    (void)state;
    expect_config_refused("max_split_size=64");
}

static void test_non_numeric_config_value_is_invalid(void **state)
{
    (void)state;
    expect_config_refused("max_split_size_mb=lots");
}

/* PyTorch refuses max_split_size_mb below 20 (kLargeBuffer). */
static void test_max_split_size_below_20mb_is_invalid(void **state)
{
    (void)state;
    expect_config_refused("max_split_size_mb=10");
}

static void test_roundup_divisions_not_power_of_two_is_invalid(void **state)
{
    (void)state;
    expect_config_refused("roundup_power2_divisions=3");
}

/* The threshold must be below 1. */
static void test_garbage_collection_threshold_of_1_is_invalid(void **state)
{
    (void)state;
    expect_config_refused("garbage_collection_threshold=1");
}

static void test_memory_fraction_above_1_is_invalid(void **state)
{
    (void)state;
    expect_config_refused("memory_fraction=1.5");
}

/* A second free of the same pointer is an error and changes nothing. */
static void test_double_free_is_invalid(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_caching(0, NULL);
    vb_addr addr = vb_must_malloc(f, 4096);
    vb_must_free(f, addr);
    vb_alloc_stats before = vb_fixture_stats(f);
    assert_int_equal(vb_free(f->alloc, addr), VB_ERR_INVALID);
    vb_alloc_stats after = vb_fixture_stats(f);
    assert_memory_equal(&before, &after, sizeof before);
    vb_fixture_close(f);
}

/* ------------------------------------------------------------------------ */
/* expandable                                                                 */
/* ------------------------------------------------------------------------ */

/* 512 B is small: one 2 MiB chunk is mapped. */
static void test_expandable_small_pool_maps_2mib_chunks(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_expandable(0);
    vb_must_malloc(f, 512);
    assert_int_equal(vb_fixture_stats(f).reserved_bytes, 2 * MiB);
    vb_fixture_close(f);
}

/* 30 MiB needs two 20 MiB chunks (40 MiB mapped, two vm_create calls); the
 * 10 MiB after the block is split off free: allocated 30 MiB. */
static void test_expandable_large_pool_maps_20mib_chunks(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_expandable(0);
    vb_must_malloc(f, 30 * MiB);
    vb_alloc_stats s = vb_fixture_stats(f);
    assert_int_equal(s.reserved_bytes, 40 * MiB);
    assert_int_equal(s.driver_alloc_calls, 2);
    assert_int_equal(s.allocated_bytes, 30 * MiB);
    vb_fixture_close(f);
}

/* 19 MiB in one 20 MiB chunk leaves 1 MiB, >= 512 B: split (caching keeps
 * the whole 20 MiB), so allocated is 19 MiB. */
static void test_expandable_splits_a_large_remainder_of_1mib(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_expandable(0);
    vb_must_malloc(f, 19 * MiB);
    assert_int_equal(vb_fixture_stats(f).allocated_bytes, 19 * MiB);
    assert_int_equal(vb_fixture_blocks(f).count, 2);
    vb_fixture_close(f);
}

/* Two 30 MiB requests: the first maps chunks 0-1 (40 MiB, 10 free at the
 * end); the second starts in that free 10 MiB and maps chunk 2 after it.
 * One segment of 60 MiB, three vm_create calls in all. */
static void test_expandable_grows_one_segment_instead_of_adding_segments(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_expandable(0);
    vb_addr first = vb_must_malloc(f, 30 * MiB);
    assert_int_equal(vb_must_malloc(f, 30 * MiB), first + 30 * MiB);
    vb_block_list list = vb_fixture_blocks(f);
    assert_int_equal(vb_block_list_segment_count(&list), 1);
    assert_int_equal(list.blocks[0].segment_size, 60 * MiB);
    assert_int_equal(vb_fixture_stats(f).driver_alloc_calls, 3);
    vb_fixture_close(f);
}

/* Free blocks: a 10 MiB one between allocated blocks and an 8 MiB one at
 * the mapped end (a 10 MiB: chunk 0 -> a [0,10), b 10 MiB takes [10,20),
 * c 12 MiB maps chunk 1 -> c [20,32), free end [32,40); then a is freed).
 * An 8 MiB request skips the end block, which could grow, for a's block. */
static void test_expandable_best_fit_prefers_a_block_that_cannot_grow(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_expandable(0);
    vb_addr a = vb_must_malloc(f, 10 * MiB);
    vb_must_malloc(f, 10 * MiB);
    vb_must_malloc(f, 12 * MiB);
    vb_must_free(f, a);
    assert_int_equal(vb_must_malloc(f, 8 * MiB), a);
    vb_fixture_close(f);
}

/* Freeing everything and empty_cache unmaps and releases all three chunks
 * of the two 30 MiB blocks and gives the range back: reserved 0, three
 * vm_release calls, no segment left. */
static void test_expandable_empty_cache_unmaps_every_free_chunk(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_expandable(0);
    vb_addr a = vb_must_malloc(f, 30 * MiB);
    vb_addr b = vb_must_malloc(f, 30 * MiB);
    vb_must_free(f, a);
    vb_must_free(f, b);
    assert_int_equal(vb_empty_cache(f->alloc), VB_OK);
    vb_alloc_stats s = vb_fixture_stats(f);
    assert_int_equal(s.reserved_bytes, 0);
    assert_int_equal(s.driver_free_calls, 3);
    assert_int_equal(vb_fixture_blocks(f).count, 0);
    vb_fixture_close(f);
}

/* With a [0,30) still allocated, the free block [30,60) holds only chunk 2
 * ([40,60)) whole: empty_cache unmaps that one; reserved 40 MiB, and
 * [30,40) stays mapped and free. */
static void test_expandable_empty_cache_keeps_chunks_in_use(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_expandable(0);
    vb_must_malloc(f, 30 * MiB);
    vb_must_free(f, vb_must_malloc(f, 30 * MiB));
    assert_int_equal(vb_empty_cache(f->alloc), VB_OK);
    vb_alloc_stats s = vb_fixture_stats(f);
    assert_int_equal(s.reserved_bytes, 40 * MiB);
    assert_int_equal(s.free_cached_bytes, 10 * MiB);
    vb_fixture_close(f);
}

/* vb_block_visitor context: the bytes of the units that allocated blocks
 * touch, each unit counted once (blocks come in address order). A range
 * of the small pool maps 2 MiB units and holds blocks of at most 1 MiB; a
 * range of the large pool maps 20 MiB units. */
typedef struct touched_units {
    uint64_t bytes;
    vb_addr segment;      /* the segment of the last unit counted */
    uint64_t last_unit;   /* ... and that unit */
    int counted;
} touched_units;

static void count_touched_units(void *context, const vb_block_info *block)
{
    touched_units *touched = context;
    if (!block->allocated) return;
    uint64_t unit = block->block_size <= MiB ? 2 * MiB : 20 * MiB;
    uint64_t first = (block->block - block->segment) / unit;
    uint64_t last = (block->block + block->block_size - 1 - block->segment) / unit;
    if (touched->counted && touched->segment == block->segment && first == touched->last_unit) first++;
    if (first <= last) touched->bytes += (last - first + 1) * unit;
    touched->segment = block->segment;
    touched->last_unit = last;
    touched->counted = 1;
}

/* empty_cache unmaps every unit that holds no allocated byte, however the
 * free space lies: from time to time in a random sequence of small
 * (<= 1 MiB), middling (1 to 20 MiB) and large (to 100 MiB) blocks, on one
 * stream (so free neighbours always merge), reserved bytes after
 * empty_cache equal the units the allocated blocks touch. (release_pool
 * visits only the free blocks of at least a unit: this holds it to
 * PyTorch's, which visits them all.) */
static void test_expandable_empty_cache_unmaps_every_unit_without_allocated_bytes(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_expandable(0);
    random_blocks blocks = {{0}, 11};
    for (int step = 1; step <= RANDOM_STEPS; step++) {
        random_block_step(f, &blocks, 20 * MiB);
        if (step % 250 != 0) continue;
        assert_int_equal(vb_empty_cache(f->alloc), VB_OK);
        touched_units touched = {0, 0, 0, 0};
        f->alloc->ops->segments(f->alloc->state, count_touched_units, &touched);
        assert_int_equal(vb_fixture_stats(f).reserved_bytes, touched.bytes);
    }
    vb_fixture_close(f);
}

/* The OOM case of caching above (64 MiB device, 40 MiB cached, 50 MiB
 * asked) needs no retry here: the free 40 MiB grows by one 20 MiB chunk to
 * 60 MiB, which the device has. */
static void test_expandable_grows_into_freed_space_without_a_retry(void **state)
{
    (void)state;
    vb_alloc_fixture *f = open_expandable(64 * MiB);
    vb_must_free(f, vb_must_malloc(f, 40 * MiB));
    vb_must_malloc(f, 50 * MiB);
    vb_alloc_stats s = vb_fixture_stats(f);
    assert_int_equal(s.alloc_retries, 0);
    assert_int_equal(s.reserved_bytes, 60 * MiB);
    vb_fixture_close(f);
}

/* expandable takes every option caching takes (PyTorch accepts them all
 * with expandable_segments:True), and refuses a key neither knows. */
static void test_expandable_takes_caching_options_and_refuses_unknown(void **state)
{
    (void)state;
    const char *const settings[] = {"max_split_size_mb=64", "max_non_split_rounding_mb=40",
                                    "roundup_power2_divisions=[256:1,512:2,>:4]",
                                    "garbage_collection_threshold=0.5", "memory_fraction=0.9", NULL};
    assert_int_equal(vb_fixture_create_status("expandable", 0, settings), VB_OK);
    const char *const unknown[] = {"release_threshold=1", NULL};
    assert_int_equal(vb_fixture_create_status("expandable", 0, unknown), VB_ERR_INVALID);
}

/* Peak reserved bytes of the issue-4 sequence on `name`:
 *   a = 30 MiB, b = 30 MiB; free a, free b; c = 20 MiB; d = 32 MiB.
 * caching: a and b are 30 MiB segments (60). c best-fits a's segment and
 *   splits it (remainder 10 MiB > 1 MiB): the 10 MiB is stranded in a split
 *   segment. d finds free blocks of 10 and 30 MiB, none >= 32: a new 32 MiB
 *   segment. Peak 60 + 32 = 92 MiB, with 40 MiB cached.
 * expandable: a maps chunks 0-1 ([0,30) + 10 free), b grows the free 10 by
 *   chunk 2 ([30,60)): 60 MiB. Freed, a and b coalesce into [0,60); c takes
 *   [0,20), d [20,52) of the same free block. Peak 60 MiB. */
static uint64_t stranding_sequence_peak(const char *name)
{
    vb_alloc_fixture *f = vb_fixture_open(name, 0, NULL);
    vb_addr a = vb_must_malloc(f, 30 * MiB);
    vb_addr b = vb_must_malloc(f, 30 * MiB);
    vb_must_free(f, a);
    vb_must_free(f, b);
    vb_must_malloc(f, 20 * MiB);
    vb_must_malloc(f, 32 * MiB);
    uint64_t peak = vb_fixture_stats(f).reserved_bytes_peak;
    vb_fixture_close(f);
    return peak;
}

static void test_caching_strands_split_segment_memory_peak_92mib(void **state)
{
    (void)state;
    assert_int_equal(stranding_sequence_peak("caching"), 92 * MiB);
}

static void test_expandable_reuses_it_peak_60mib(void **state)
{
    (void)state;
    assert_int_equal(stranding_sequence_peak("expandable"), 60 * MiB);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes_round_up_to_512_bytes),
        cmocka_unit_test(test_roundup_power2_divisions_rounds_to_division_steps),
        cmocka_unit_test(test_roundup_power2_divisions_leaves_sizes_up_to_2048_to_512_rounding),
        cmocka_unit_test(test_roundup_power2_divisions_per_interval),
        cmocka_unit_test(test_roundup_power2_divisions_per_interval_refusals),
        cmocka_unit_test(test_1mib_request_gets_2mib_segment),
        cmocka_unit_test(test_just_over_1mib_gets_20mib_segment),
        cmocka_unit_test(test_under_10mib_gets_20mib_segment),
        cmocka_unit_test(test_10mib_gets_10mib_segment),
        cmocka_unit_test(test_11mib_gets_12mib_segment),
        cmocka_unit_test(test_small_requests_share_one_segment),
        cmocka_unit_test(test_small_block_splits_off_a_512_byte_remainder),
        cmocka_unit_test(test_large_remainder_of_exactly_1mib_is_not_split),
        cmocka_unit_test(test_large_remainder_over_1mib_is_split),
        cmocka_unit_test(test_best_fit_takes_the_smallest_block_that_fits),
        cmocka_unit_test(test_cached_block_is_not_used_by_another_stream),
        cmocka_unit_test(test_freeing_middle_then_neighbours_coalesces_to_one_block),
        cmocka_unit_test(test_empty_cache_releases_a_coalesced_segment),
        cmocka_unit_test(test_empty_cache_keeps_a_segment_in_use),
        cmocka_unit_test(test_empty_cache_releases_every_segment_without_allocated_blocks),
        cmocka_unit_test(test_cached_reports_free_bytes_and_largest_block),
        cmocka_unit_test(test_segments_are_listed_in_address_order),
        cmocka_unit_test(test_oversize_block_serves_request_within_20mib_unsplit),
        cmocka_unit_test(test_oversize_block_refuses_request_20mib_smaller),
        cmocka_unit_test(test_oversize_block_refuses_request_below_max_split_size),
        cmocka_unit_test(test_without_max_split_size_large_blocks_split),
        cmocka_unit_test(test_block_not_reused_while_other_stream_work_pending),
        cmocka_unit_test(test_block_reused_after_other_stream_completes),
        cmocka_unit_test(test_empty_cache_waits_for_pending_uses_then_releases),
        cmocka_unit_test(test_record_stream_of_unknown_pointer_is_invalid),
        cmocka_unit_test(test_oom_releases_cache_and_retry_is_counted),
        cmocka_unit_test(test_oom_after_failed_retry_is_reported),
        cmocka_unit_test(test_oom_frees_oversize_blocks_before_whole_cache),
        cmocka_unit_test(test_memory_fraction_caps_reserved_memory),
        cmocka_unit_test(test_garbage_collection_frees_the_oldest_cached_segments),
        cmocka_unit_test(test_unknown_config_key_is_invalid),
        cmocka_unit_test(test_non_numeric_config_value_is_invalid),
        cmocka_unit_test(test_max_split_size_below_20mb_is_invalid),
        cmocka_unit_test(test_roundup_divisions_not_power_of_two_is_invalid),
        cmocka_unit_test(test_garbage_collection_threshold_of_1_is_invalid),
        cmocka_unit_test(test_memory_fraction_above_1_is_invalid),
        cmocka_unit_test(test_double_free_is_invalid),
        cmocka_unit_test(test_expandable_small_pool_maps_2mib_chunks),
        cmocka_unit_test(test_expandable_large_pool_maps_20mib_chunks),
        cmocka_unit_test(test_expandable_splits_a_large_remainder_of_1mib),
        cmocka_unit_test(test_expandable_grows_one_segment_instead_of_adding_segments),
        cmocka_unit_test(test_expandable_best_fit_prefers_a_block_that_cannot_grow),
        cmocka_unit_test(test_expandable_empty_cache_unmaps_every_free_chunk),
        cmocka_unit_test(test_expandable_empty_cache_keeps_chunks_in_use),
        cmocka_unit_test(test_expandable_empty_cache_unmaps_every_unit_without_allocated_bytes),
        cmocka_unit_test(test_expandable_grows_into_freed_space_without_a_retry),
        cmocka_unit_test(test_expandable_takes_caching_options_and_refuses_unknown),
        cmocka_unit_test(test_caching_strands_split_segment_memory_peak_92mib),
        cmocka_unit_test(test_expandable_reuses_it_peak_60mib),
    };
    return cmocka_run_group_tests_name("caching and expandable policy", tests, NULL, NULL);
}
