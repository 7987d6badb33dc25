/* vrambench — the caching core's size indexes (allocators/caching_core.c)
 * must give exactly the answers of walking the whole free set in PyTorch's
 * best-fit order, which is what a pool falls back to when host memory runs
 * out for an index. Each test drives two allocators on two identical sim
 * devices through the same seeded random sequence (two streams, small and
 * large sizes, many repeated sizes, frees in random order, now and then
 * empty_cache, a device small enough to hit out-of-memory and its retries)
 * — one indexed, one with indexing stopped — and requires every address,
 * every status and the final statistics to be identical. `caching` keeps
 * its exact classes as heaps, `expandable` all classes as ordered sets, so
 * both kinds are held to the walk. The index by
 * address that vb_cc_allocated_at makes on its first call is checked here
 * too: it must know the blocks handed out before that call and after. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "allocators/caching_core.h"

#include "twin_allocators.h"

#define OPERATIONS 20000

/* Both pools of `t` stop indexing (caching and expandable keep a
 * vb_cc_allocator as their state). */
static void twin_stop_indexing(twin *t)
{
    vb_cc_allocator *cc = t->allocator->state;
    vb_cc_pool_stop_indexing(&cc->small_pool);
    vb_cc_pool_stop_indexing(&cc->large_pool);
}

/* Both pools of `t` stop listing their whole free blocks: its garbage
 * collection walks every free block. */
static void twin_stop_listing_whole(twin *t)
{
    vb_cc_allocator *cc = t->allocator->state;
    vb_cc_pool_stop_listing_whole(&cc->small_pool);
    vb_cc_pool_stop_listing_whole(&cc->large_pool);
}

/* Runs the sequence on the allocator `a` and `b`; before operation
 * `stop_at` (0: from the start) `b` does `stop`. */
static void run_twins_stopping(const char *name, const char *const *settings, uint64_t seed, size_t stop_at,
                               void (*stop)(twin *))
{
    twin a, b;
    twin_open(&a, name, settings);
    twin_open(&b, name, settings);
    uint64_t rng = seed;
    for (size_t op = 0; op < OPERATIONS; op++) {
        if (op == stop_at) stop(&b);
        uint64_t choice = twin_random(&rng);
        size_t slot = (size_t)(choice >> 16) % TWIN_LIVE_SLOTS;
        if (choice % 1000 == 0) {
            assert_int_equal(vb_empty_cache(a.allocator), vb_empty_cache(b.allocator));
        } else if (a.live[slot]) {
            assert_int_equal(vb_free(a.allocator, a.live[slot]), VB_OK);
            assert_int_equal(vb_free(b.allocator, b.live[slot]), VB_OK);
            a.live[slot] = b.live[slot] = 0;
        } else {
            uint64_t size = twin_random_size(&rng);
            int stream = (int)((choice >> 8) % 4 == 0);
            twin_malloc_both(&a, &b, slot, size, stream);
        }
    }
    twin_close_equal(&a, &b);
}

/* run_twins_stopping where `b` stops indexing. */
static void run_twins(const char *name, const char *const *settings, uint64_t seed, size_t stop_at)
{
    run_twins_stopping(name, settings, seed, stop_at, twin_stop_indexing);
}

static void caching_index_matches_walking_the_free_set(void **state)
{
    (void)state;
    run_twins("caching", NULL, 1, 0);
}

static void caching_index_matches_with_oversize_blocks(void **state)
{
    (void)state;
    const char *const settings[] = {"max_split_size_mb=32", NULL};
    run_twins("caching", settings, 2, 0);
}

static void caching_index_matches_with_garbage_collection(void **state)
{
    (void)state;
    const char *const settings[] = {"garbage_collection_threshold=0.5", "memory_fraction=0.6", NULL};
    run_twins("caching", settings, 3, 0);
}

/* Garbage collection looks only at the whole free blocks it lists; the
 * twin walks every free block (PyTorch's way), from the start or from
 * midway (some listed already), and both pools index their blocks. */
static void garbage_collection_over_listed_whole_blocks_matches_walking_every_free_block(void **state)
{
    (void)state;
    const char *const settings[] = {"garbage_collection_threshold=0.5", "memory_fraction=0.6", NULL};
    const char *const oversize[] = {"garbage_collection_threshold=0.8", "memory_fraction=0.9", "max_split_size_mb=32",
                                    NULL};
    run_twins_stopping("caching", settings, 8, 0, twin_stop_listing_whole);
    run_twins_stopping("caching", settings, 9, OPERATIONS / 2, twin_stop_listing_whole);
    run_twins_stopping("caching", oversize, 10, 0, twin_stop_listing_whole);
}

static void caching_index_matches_with_power2_rounding(void **state)
{
    (void)state;
    const char *const settings[] = {"roundup_power2_divisions=4", NULL};
    run_twins("caching", settings, 4, 0);
}

static void expandable_index_matches_walking_the_free_set(void **state)
{
    (void)state;
    run_twins("expandable", NULL, 5, 0);
}

/* Stopping halfway (free blocks already indexed, as when host memory runs
 * out later in a run) changes no answer either. */
static void stopping_indexing_midway_changes_nothing(void **state)
{
    (void)state;
    run_twins("caching", NULL, 6, OPERATIONS / 2);
    run_twins("expandable", NULL, 7, OPERATIONS / 2);
}

/* 1 if `addr` is live in `t`. */
static int twin_holds(const twin *t, vb_addr addr)
{
    for (size_t slot = 0; slot < TWIN_LIVE_SLOTS; slot++)
        if (t->live[slot] == addr) return 1;
    return 0;
}

/* vb_cc_allocated_at answers for every address the seeded sequence has
 * seen: the block handed out there while it is live, NULL once freed. */
static void check_allocated_at(twin *t, const vb_addr *seen, size_t seen_count)
{
    vb_cc_allocator *cc = t->allocator->state;
    for (size_t i = 0; i < seen_count; i++) {
        vb_cc_block *block = vb_cc_allocated_at(cc, seen[i]);
        if (twin_holds(t, seen[i])) {
            assert_non_null(block);
            assert_int_equal(block->addr, seen[i]);
            assert_int_equal(block->allocated, 1);
        } else {
            assert_null(block);
        }
    }
}

/* The address index is made on vb_cc_allocated_at's first call, midway,
 * and kept from then on by every malloc and free. */
static void allocated_at_knows_blocks_from_before_and_after_its_first_call(void **state)
{
    (void)state;
    const char *const names[] = {"caching", "expandable"};
    enum { OPS = 6 * TWIN_LIVE_SLOTS, SEEN = OPS };
    for (size_t n = 0; n < 2; n++) {
        twin t;
        twin_open(&t, names[n], NULL);
        vb_addr seen[SEEN];
        size_t seen_count = 0;
        uint64_t rng = 8 + n;
        for (size_t op = 0; op < OPS; op++) {
            if (op == OPS / 2) check_allocated_at(&t, seen, seen_count); /* the first call: the index is made */
            uint64_t choice = twin_random(&rng);
            size_t slot = (size_t)(choice >> 16) % TWIN_LIVE_SLOTS;
            if (t.live[slot]) {
                assert_int_equal(vb_free(t.allocator, t.live[slot]), VB_OK);
                t.live[slot] = 0;
            } else if (vb_malloc(t.allocator, twin_random_size(&rng), t.streams[choice % 2], &t.live[slot]) == VB_OK) {
                seen[seen_count++] = t.live[slot];
            }
        }
        check_allocated_at(&t, seen, seen_count);
        twin_close(&t);
    }
}

/* The sequences above keep at most TWIN_LIVE_SLOTS blocks live, so a
 * class rarely holds more than a few free blocks and its heap is a level
 * or two deep. Here one class holds thousands: 4,000 blocks of 512 B are
 * taken from one segment, every other one is freed in random order (its
 * live neighbours keep it from merging), and then random steps take
 * blocks of 512 B to 1.5 KiB and free any (a free between two free
 * blocks merges the three, leaving stale entries), the walking twin
 * checking every address. A heap that orders its entries wrongly at any
 * depth hands out a block that is not the class's lowest. */
static void caching_index_matches_in_classes_of_thousands(void **state)
{
    (void)state;
    enum { BLOCKS = 4000, STEPS = 30000 };
    twin a, b;
    twin_open(&a, "caching", NULL);
    twin_open(&b, "caching", NULL);
    twin_stop_indexing(&b);
    vb_addr *live_a = calloc(BLOCKS, sizeof *live_a), *live_b = calloc(BLOCKS, sizeof *live_b);
    assert_true(live_a && live_b);
    for (size_t i = 0; i < BLOCKS; i++) {
        assert_int_equal(vb_malloc(a.allocator, 512, a.streams[0], &live_a[i]), VB_OK);
        assert_int_equal(vb_malloc(b.allocator, 512, b.streams[0], &live_b[i]), VB_OK);
        assert_int_equal(live_a[i], live_b[i]);
    }
    uint64_t rng = 41;
    for (size_t freed = 0; freed < BLOCKS / 2;) {
        size_t i = 2 * (size_t)(twin_random(&rng) % (BLOCKS / 2));
        if (!live_a[i]) continue;
        assert_int_equal(vb_free(a.allocator, live_a[i]), VB_OK);
        assert_int_equal(vb_free(b.allocator, live_b[i]), VB_OK);
        live_a[i] = live_b[i] = 0;
        freed++;
    }
    size_t blocks, entries, classes;
    vb_cc_allocator *cc = a.allocator->state;
    vb_cc_pool_index_size(&cc->small_pool, &blocks, &entries, &classes);
    assert_true(blocks >= BLOCKS / 2); /* the 512 B class, and the segment's rest */
    for (size_t step = 0; step < STEPS; step++) {
        uint64_t choice = twin_random(&rng);
        size_t i = (size_t)(choice >> 16) % BLOCKS;
        if (live_a[i]) {
            assert_int_equal(vb_free(a.allocator, live_a[i]), VB_OK);
            assert_int_equal(vb_free(b.allocator, live_b[i]), VB_OK);
            live_a[i] = live_b[i] = 0;
        } else {
            uint64_t size = 512 * (1 + choice % 3);
            assert_int_equal(vb_malloc(a.allocator, size, a.streams[0], &live_a[i]), VB_OK);
            assert_int_equal(vb_malloc(b.allocator, size, b.streams[0], &live_b[i]), VB_OK);
            assert_int_equal(live_a[i], live_b[i]);
        }
    }
    free(live_a);
    free(live_b);
    twin_close_equal(&a, &b);
}

/* `caching` keeps each exact class as a heap whose removed blocks leave
 * stale entries behind (allocators/caching_core.c), dropped when they
 * reach the top or when they outnumber the live ones. Here they never
 * reach the top: a free 512 B block L at the segment's low end stays the
 * class's first, while above it a 1,536 B block is split by a 1 KiB
 * request (its 512 B rest joins L's class) and merged back by the free of
 * that request (the rest leaves the class), a thousand times over. The
 * entries must stay within 8 per free block and 65 per class (the
 * rebuild's bound, ENTRIES_PER_LIVE and ENTRIES_SLACK), not grow with the
 * rounds. */
static void a_class_left_over_and_over_keeps_few_stale_entries(void **state)
{
    (void)state;
    twin t;
    twin_open(&t, "caching", NULL);
    vb_cc_allocator *cc = t.allocator->state;
    vb_stream stream = t.streams[0];
    vb_addr low, l, high, region, rest_1, rest_2;
    /* One 2 MiB small segment, handed out from its low end up. */
    assert_int_equal(vb_malloc(t.allocator, 512, stream, &low), VB_OK);
    assert_int_equal(vb_malloc(t.allocator, 512, stream, &l), VB_OK);
    assert_int_equal(vb_malloc(t.allocator, 512, stream, &high), VB_OK);
    assert_int_equal(vb_malloc(t.allocator, 1536, stream, &region), VB_OK);
    assert_int_equal(vb_malloc(t.allocator, VB_MiB, stream, &rest_1), VB_OK);
    assert_int_equal(vb_malloc(t.allocator, VB_MiB - 3072, stream, &rest_2), VB_OK);
    assert_true(l > low && high > l && region > high);
    assert_int_equal(vb_free(t.allocator, l), VB_OK);      /* 512 B, between two live blocks */
    assert_int_equal(vb_free(t.allocator, region), VB_OK); /* 1,536 B, likewise */
    for (int round = 0; round < 1000; round++) {
        vb_addr taken;
        assert_int_equal(vb_malloc(t.allocator, 1024, stream, &taken), VB_OK);
        assert_int_equal(taken, region); /* the front of the 1,536 B block; its rest joins L's class */
        assert_int_equal(vb_free(t.allocator, taken), VB_OK); /* merged back: the rest leaves it */
        size_t blocks, entries, classes;
        vb_cc_pool_index_size(&cc->small_pool, &blocks, &entries, &classes);
        assert_int_equal(blocks, 2);
        assert_true(entries <= 8 * blocks + 65 * classes);
    }
    vb_addr again;
    assert_int_equal(vb_malloc(t.allocator, 512, stream, &again), VB_OK);
    assert_int_equal(again, l); /* L is still the class's first */
    twin_close(&t);
}

/* vb_cc_pool_each_free context: the blocks seen, and whether one was
 * seen twice or was not free. */
typedef struct seen_blocks {
    const vb_cc_block **blocks;
    size_t count, capacity;
    int wrong;
} seen_blocks;

static int note_seen(void *context, vb_cc_block *block)
{
    seen_blocks *seen = context;
    for (size_t i = 0; i < seen->count; i++)
        if (seen->blocks[i] == block) seen->wrong = 1;
    if (block->allocated) seen->wrong = 1;
    if (seen->count < seen->capacity) seen->blocks[seen->count++] = block;
    return 1;
}

/* vb_cc_segments visitor: counts the free blocks of the segment map. */
static void count_free(void *context, const vb_block_info *block)
{
    if (!block->allocated) (*(size_t *)context)++;
}

/* vb_cc_pool_each_free visits each free block of a pool once, whether its
 * classes are heaps (caching) or sets (expandable): together the two pools
 * give every free block of the segment map. */
static void each_free_visits_every_free_block_once(void **state)
{
    (void)state;
    const char *const names[] = {"caching", "expandable"};
    for (size_t n = 0; n < 2; n++) {
        twin t;
        twin_open(&t, names[n], NULL);
        uint64_t rng = 21 + n;
        for (size_t op = 0; op < OPERATIONS / 4; op++) {
            uint64_t choice = twin_random(&rng);
            size_t slot = (size_t)(choice >> 16) % TWIN_LIVE_SLOTS;
            if (t.live[slot]) {
                assert_int_equal(vb_free(t.allocator, t.live[slot]), VB_OK);
                t.live[slot] = 0;
            } else if (vb_malloc(t.allocator, twin_random_size(&rng), t.streams[choice % 2], &t.live[slot]) != VB_OK) {
                t.live[slot] = 0;
            }
        }
        vb_cc_allocator *cc = t.allocator->state;
        seen_blocks seen = {calloc(1 << 16, sizeof *seen.blocks), 0, 1 << 16, 0};
        assert_non_null(seen.blocks);
        vb_cc_pool_each_free(&cc->small_pool, note_seen, &seen);
        vb_cc_pool_each_free(&cc->large_pool, note_seen, &seen);
        size_t free_in_map = 0;
        vb_cc_segments(cc, count_free, &free_in_map);
        assert_false(seen.wrong);
        assert_true(seen.count > 0);
        assert_int_equal(seen.count, free_in_map);
        free(seen.blocks);
        twin_close(&t);
    }
}

/* One random free, or malloc of up to 1 MiB (the small pool; never out
 * of memory on the twin's device, which would walk the free set again). */
static void small_random_step(twin *t, uint64_t *rng)
{
    uint64_t choice = twin_random(rng);
    size_t slot = (size_t)(choice >> 16) % TWIN_LIVE_SLOTS;
    if (t->live[slot]) {
        assert_int_equal(vb_free(t->allocator, t->live[slot]), VB_OK);
        t->live[slot] = 0;
    } else {
        uint64_t size = 1 + twin_random(rng) % VB_MiB;
        assert_int_equal(vb_malloc(t->allocator, size, t->streams[choice % 2], &t->live[slot]), VB_OK);
    }
}

/* The free blocks of a pool that each_free visits (each once, each free). */
static size_t free_blocks_of(vb_cc_pool *pool)
{
    seen_blocks seen = {calloc(1 << 16, sizeof *seen.blocks), 0, 1 << 16, 0};
    assert_non_null(seen.blocks);
    vb_cc_pool_each_free(pool, note_seen, &seen);
    assert_false(seen.wrong);
    free(seen.blocks);
    return seen.count;
}

/* A walk over a pool's free set (empty_cache's, here) moves its free
 * blocks out of the size indexes into pool->blocks, which then answers
 * best fit; once enough inserts and erases have passed with no other
 * walk, every free block is back in the indexes. (That the answers are
 * the same either way is what the twins above check.) */
static void a_walked_pool_goes_back_to_its_size_indexes(void **state)
{
    (void)state;
    const char *const names[] = {"caching", "expandable"};
    for (size_t n = 0; n < 2; n++) {
        twin t;
        twin_open(&t, names[n], NULL);
        vb_cc_allocator *cc = t.allocator->state;
        vb_cc_pool *pool = &cc->small_pool;
        uint64_t rng = 31 + n;
        for (size_t op = 0; op < OPERATIONS / 4; op++) small_random_step(&t, &rng);
        size_t blocks, entries, classes;
        vb_cc_pool_index_size(pool, &blocks, &entries, &classes);
        assert_true(blocks > 0);
        assert_false(pool->blocks_kept);

        assert_int_equal(vb_empty_cache(t.allocator), VB_OK);
        size_t free_after_walk = free_blocks_of(pool);
        assert_true(free_after_walk > 0); /* split segments keep their free blocks */
        assert_true(pool->blocks_kept);
        assert_int_equal(pool->blocks.count, free_after_walk);
        vb_cc_pool_index_size(pool, &blocks, &entries, &classes);
        assert_int_equal(blocks, 0);

        for (int step = 0; step < 8; step++) small_random_step(&t, &rng);
        assert_true(pool->blocks_kept); /* not right after the walk: a few hundred updates first */
        for (size_t op = 0; pool->blocks_kept && op < 4 * OPERATIONS; op++) small_random_step(&t, &rng);
        assert_false(pool->blocks_kept);
        assert_int_equal(pool->blocks.count, 0);
        vb_cc_pool_index_size(pool, &blocks, &entries, &classes);
        assert_int_equal(blocks, free_blocks_of(pool));
        assert_true(blocks > 0);
        twin_close(&t);
    }
}

/* Checks, for every block of every segment of `cc`, that what its first
 * cache line says for the hot path agrees with the rest (vb_cc_block):
 * its pool flag names its segment's pool, in_use is set exactly while it
 * has record_stream uses or events, a block in a heap (heap_stamp not 0)
 * is indexed, and an indexed block is free. Returns the blocks checked. */
static size_t check_first_lines(vb_cc_allocator *cc, size_t *in_use)
{
    size_t blocks = 0;
    for (vb_oset_node *node = vb_oset_first(&cc->segments); node; node = vb_oset_next(&cc->segments, node)) {
        vb_cc_segment *segment = VB_OSET_ENTRY(node, vb_cc_segment, node);
        for (vb_cc_block *block = segment->head; block; block = block->next, blocks++) {
            assert_ptr_equal(vb_cc_block_pool(cc, block), segment->pool);
            assert_int_equal(block->in_use, block->event_count != 0 || block->use_count != 0);
            if (block->heap_stamp) assert_true(block->indexed);
            if (block->indexed) assert_int_equal(block->allocated, 0);
            *in_use += block->in_use;
        }
    }
    return blocks;
}

/* A random run of each caching-style strategy, with record_stream on the
 * other stream now and then, keeps every block's first cache line in
 * agreement with the rest (check_first_lines), checked as it goes. */
static void a_blocks_first_line_agrees_with_the_rest(void **state)
{
    (void)state;
    const char *const names[] = {"caching", "expandable", "stitch"};
    const char *const stitching[] = {"stitch_max_maps=8", NULL};
    for (size_t n = 0; n < 3; n++) {
        twin t;
        twin_open(&t, names[n], n == 2 ? stitching : NULL);
        vb_cc_allocator *cc = t.allocator->state;
        uint64_t rng = 77 + n;
        size_t checked = 0, in_use = 0;
        for (size_t op = 0; op < OPERATIONS; op++) {
            uint64_t choice = twin_random(&rng);
            size_t slot = (size_t)(choice >> 16) % TWIN_LIVE_SLOTS;
            if (t.live[slot] && choice % 7 == 0) {
                assert_int_equal(vb_record_stream(t.allocator, t.live[slot], t.streams[1 - t.stream_of[slot]]), VB_OK);
            } else if (t.live[slot]) {
                assert_int_equal(vb_free(t.allocator, t.live[slot]), VB_OK);
                t.live[slot] = 0;
            } else {
                t.stream_of[slot] = (int)(choice % 2);
                if (vb_malloc(t.allocator, twin_random_size(&rng), t.streams[t.stream_of[slot]], &t.live[slot]) !=
                    VB_OK)
                    t.live[slot] = 0;
            }
            if (op % 1000 == 999) checked += check_first_lines(cc, &in_use);
        }
        assert_true(checked > 0);
        assert_true(in_use > 0); /* record_stream's flag was seen set, not only clear */
        twin_close(&t);
    }
}

/* Runs every caching index test. */
int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(caching_index_matches_walking_the_free_set),
        cmocka_unit_test(caching_index_matches_with_oversize_blocks),
        cmocka_unit_test(caching_index_matches_with_garbage_collection),
        cmocka_unit_test(garbage_collection_over_listed_whole_blocks_matches_walking_every_free_block),
        cmocka_unit_test(caching_index_matches_with_power2_rounding),
        cmocka_unit_test(caching_index_matches_in_classes_of_thousands),
        cmocka_unit_test(expandable_index_matches_walking_the_free_set),
        cmocka_unit_test(stopping_indexing_midway_changes_nothing),
        cmocka_unit_test(allocated_at_knows_blocks_from_before_and_after_its_first_call),
        cmocka_unit_test(a_class_left_over_and_over_keeps_few_stale_entries),
        cmocka_unit_test(each_free_visits_every_free_block_once),
        cmocka_unit_test(a_walked_pool_goes_back_to_its_size_indexes),
        cmocka_unit_test(a_blocks_first_line_agrees_with_the_rest),
    };
    return cmocka_run_group_tests_name("caching_index", tests, NULL, NULL);
}
