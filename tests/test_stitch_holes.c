/* vrambench — stitch's holes index (allocators/stitch.c, hole_index.h)
 * must make exactly the choices of walking every block, which is what the
 * allocator falls back to when host memory runs out for an entry: the
 * same handles moved out of the same holes, the same holes picked for a
 * stitched range. Each test drives two `stitch` allocators on two
 * identical sim devices through the same seeded random sequence (two
 * streams, small and large sizes, many repeated sizes, frees in random
 * order, frees waiting for another stream's work (record_stream), now and
 * then empty_cache, a device small enough to run out of memory and retry)
 * — one indexed, one with indexing stopped — and requires every address,
 * every status and the final statistics to be identical. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "allocators/allocator.h"
#include "allocators/stitch.h"

#include "twin_allocators.h"

#define OPERATIONS 20000

/* Frees the block of `slot`; a block of stream 0 is sometimes used on
 * stream 1 first, whose work then runs a while: the free waits for it. */
static void twin_free(twin *t, size_t slot, uint64_t choice)
{
    if (t->stream_of[slot] == 0 && choice % 5 == 0) {
        assert_int_equal(t->dev->ops->enqueue_busy(t->dev, t->streams[1], 1000 + choice % 100000), VB_OK);
        assert_int_equal(vb_record_stream(t->allocator, t->live[slot], t->streams[1]), VB_OK);
    }
    assert_int_equal(vb_free(t->allocator, t->live[slot]), VB_OK);
    t->live[slot] = 0;
}

/* Runs the sequence on the indexed allocator `a` and `b` (both `stitch`
 * with `settings`); `b` stops indexing before operation `stop_at` (0: from
 * the start). */
static void run_twins(const char *const *settings, uint64_t seed, size_t stop_at)
{
    twin a, b;
    twin_open(&a, "stitch", settings);
    twin_open(&b, "stitch", settings);
    uint64_t rng = seed;
    for (size_t op = 0; op < OPERATIONS; op++) {
        if (op == stop_at) vb_stitch_stop_indexing(b.allocator->state);
        uint64_t choice = twin_random(&rng);
        size_t slot = (size_t)(choice >> 16) % TWIN_LIVE_SLOTS;
        if (choice % 1000 == 0) {
            assert_int_equal(vb_empty_cache(a.allocator), vb_empty_cache(b.allocator));
        } else if (choice % 1000 < 20) {
            assert_int_equal(a.dev->ops->stream_synchronize(a.dev, a.streams[1]), VB_OK);
            assert_int_equal(b.dev->ops->stream_synchronize(b.dev, b.streams[1]), VB_OK);
        } else if (a.live[slot]) {
            twin_free(&a, slot, choice);
            twin_free(&b, slot, choice);
        } else {
            uint64_t size = twin_random_size(&rng);
            int stream = (int)((choice >> 8) % 4 == 0);
            twin_malloc_both(&a, &b, slot, size, stream);
            a.stream_of[slot] = b.stream_of[slot] = stream;
        }
    }
    twin_close_equal(&a, &b);
}

/* The default: moves only (8-64 MiB handles). */
static void moves_match_walking_every_block(void **state)
{
    (void)state;
    run_twins(NULL, 1, 0);
}

/* Small handles: most holes hold whole ones, so moves take many. */
static void moves_of_small_handles_match_walking_every_block(void **state)
{
    (void)state;
    const char *const settings[] = {"chunk_mb=2", "handle_max_mb=2", NULL};
    run_twins(settings, 2, 0);
}

/* Stitched ranges on the default handles. */
static void stitched_ranges_match_sorting_every_hole(void **state)
{
    (void)state;
    const char *const settings[] = {"stitch_max_maps=16", NULL};
    run_twins(settings, 3, 0);
}

/* Stitched ranges on small handles, many pieces each ("small + stitched"). */
static void small_stitched_ranges_match_sorting_every_hole(void **state)
{
    (void)state;
    const char *const settings[] = {"chunk_mb=2", "handle_max_mb=4", "stitch_max_maps=64", NULL};
    run_twins(settings, 4, 0);
    const char *const many[] = {"chunk_mb=2", "handle_max_mb=2", "stitch_max_maps=4096", NULL};
    run_twins(many, 5, 0);
}

/* Stopping halfway (holes already indexed, as when host memory runs out
 * later in a run) changes no choice either. */
static void stopping_indexing_midway_changes_nothing(void **state)
{
    (void)state;
    run_twins(NULL, 6, OPERATIONS / 2);
    const char *const settings[] = {"chunk_mb=2", "handle_max_mb=4", "stitch_max_maps=64", NULL};
    run_twins(settings, 7, OPERATIONS / 2);
}

/* Runs every holes index test of stitch. */
int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(moves_match_walking_every_block),
        cmocka_unit_test(moves_of_small_handles_match_walking_every_block),
        cmocka_unit_test(stitched_ranges_match_sorting_every_hole),
        cmocka_unit_test(small_stitched_ranges_match_sorting_every_hole),
        cmocka_unit_test(stopping_indexing_midway_changes_nothing),
    };
    return cmocka_run_group_tests_name("stitch_holes", tests, NULL, NULL);
}
