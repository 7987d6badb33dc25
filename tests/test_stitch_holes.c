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

#define OPERATIONS 20000
#define LIVE_SLOTS 512
#define CAPACITY (4 * VB_GiB)

/* One allocator on its own sim device, with one extra stream. */
typedef struct twin {
    vb_device *dev;
    vb_allocator *allocator;
    vb_stream streams[2];
    vb_addr live[LIVE_SLOTS];
    int stream_of[LIVE_SLOTS];
} twin;

/* Opens `stitch` with up to 4 "key=value" settings (NULL-terminated). */
static void twin_open(twin *t, const char *const *settings)
{
    static char text[4][64];
    vb_config_entry entries[4];
    size_t count = 0;
    for (; settings && settings[count]; count++) {
        snprintf(text[count], sizeof text[count], "%s", settings[count]);
        assert_int_equal(vb_config_entry_parse(text[count], &entries[count]), VB_OK);
    }
    vb_config config = {entries, count};
    memset(t, 0, sizeof *t);
    assert_int_equal(vb_sim_open(CAPACITY, &t->dev), VB_OK);
    assert_int_equal(vb_allocator_create("stitch", t->dev, &config, &t->allocator), VB_OK);
    t->streams[0] = NULL;
    assert_int_equal(t->dev->ops->stream_create(t->dev, &t->streams[1]), VB_OK);
}

static void twin_close(twin *t)
{
    vb_allocator_destroy(t->allocator);
    t->dev->ops->stream_destroy(t->dev, t->streams[1]);
    vb_device_close(t->dev);
}

/* splitmix64, for the seeded sequence. */
static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* A request size: half from a few repeated sizes (ties broken by address),
 * the rest uniform, small (<= 1 MiB) or large (<= 96 MiB). */
static uint64_t random_size(uint64_t *rng)
{
    static const uint64_t repeated[] = {512, 4096, 1 << 20, 3 << 20, 12 << 20, 40 << 20};
    uint64_t pick = next_random(rng);
    if (pick % 2 == 0) return repeated[(pick >> 8) % (sizeof repeated / sizeof repeated[0])];
    if (pick % 4 == 1) return 1 + next_random(rng) % VB_MiB;
    return 1 + next_random(rng) % (96 * VB_MiB);
}

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
    twin_open(&a, settings);
    twin_open(&b, settings);
    uint64_t rng = seed;
    for (size_t op = 0; op < OPERATIONS; op++) {
        if (op == stop_at) vb_stitch_stop_indexing(b.allocator->state);
        uint64_t choice = next_random(&rng);
        size_t slot = (size_t)(choice >> 16) % LIVE_SLOTS;
        if (choice % 1000 == 0) {
            assert_int_equal(vb_empty_cache(a.allocator), vb_empty_cache(b.allocator));
        } else if (choice % 1000 < 20) {
            assert_int_equal(a.dev->ops->stream_synchronize(a.dev, a.streams[1]), VB_OK);
            assert_int_equal(b.dev->ops->stream_synchronize(b.dev, b.streams[1]), VB_OK);
        } else if (a.live[slot]) {
            twin_free(&a, slot, choice);
            twin_free(&b, slot, choice);
        } else {
            uint64_t size = random_size(&rng);
            int stream = (int)((choice >> 8) % 4 == 0);
            vb_status status_a = vb_malloc(a.allocator, size, a.streams[stream], &a.live[slot]);
            vb_status status_b = vb_malloc(b.allocator, size, b.streams[stream], &b.live[slot]);
            assert_int_equal(status_a, status_b);
            if (status_a != VB_OK) a.live[slot] = b.live[slot] = 0;
            assert_int_equal(a.live[slot], b.live[slot]);
            a.stream_of[slot] = b.stream_of[slot] = stream;
        }
    }
    vb_alloc_stats stats_a, stats_b;
    vb_allocator_stats(a.allocator, &stats_a);
    vb_allocator_stats(b.allocator, &stats_b);
    assert_memory_equal(&stats_a, &stats_b, sizeof stats_a);
    twin_close(&a);
    twin_close(&b);
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
