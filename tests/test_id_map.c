/* vrambench — unit tests of base/id_map (ids to values: a window array for
 * ids that come in order, a hash map beside it for the rest). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "base/id_map.h"
#include "tests/hostile_keys.h"
#include "test_random.h"

/* slot inserts a new id with value 0 and says so; for a present id it
 * says not added and points at the stored value, which a write through it
 * changes. */
static void slot_finds_or_inserts_and_says_which(void **state)
{
    (void)state;
    vb_id_map map = VB_ID_MAP_INIT;
    int added = -1;
    uint64_t *slot = vb_id_map_slot(&map, 3, &added);
    assert_non_null(slot);
    assert_int_equal(added, 1);
    assert_int_equal(*slot, 0);
    *slot = 33;
    slot = vb_id_map_slot(&map, 3, &added);
    assert_int_equal(added, 0);
    assert_int_equal(*slot, 33);
    assert_int_equal(vb_id_map_count(&map), 1);
    vb_id_map_clear(&map);
}

/* remove gives the value back and forgets the id; a second remove, or one
 * of an id never held, finds nothing. */
static void remove_returns_value_and_forgets_id(void **state)
{
    (void)state;
    vb_id_map map = VB_ID_MAP_INIT;
    *vb_id_map_slot(&map, 0, NULL) = 10;
    *vb_id_map_slot(&map, 1, NULL) = 11;
    uint64_t value = 0;
    assert_true(vb_id_map_remove(&map, 0, &value));
    assert_int_equal(value, 10);
    assert_false(vb_id_map_remove(&map, 0, &value));
    assert_false(vb_id_map_remove(&map, 7, &value));
    assert_false(vb_id_map_remove(&map, UINT64_MAX, &value));
    assert_int_equal(vb_id_map_count(&map), 1);
    vb_id_map_clear(&map);
}

/* The largest id cannot be held (the hash map beside the window keys id + 1). */
static void the_largest_id_is_refused(void **state)
{
    (void)state;
    vb_id_map map = VB_ID_MAP_INIT;
    assert_null(vb_id_map_slot(&map, UINT64_MAX, NULL));
    assert_non_null(vb_id_map_slot(&map, UINT64_MAX - 1, NULL));
    assert_int_equal(vb_id_map_count(&map), 1);
    vb_id_map_clear(&map);
}

/* A trace's ids, numbered in order and freed at random with half of them
 * live (gen-trace's random traces), all stay in the window: no id goes to
 * the hash map, whose look-ups are what the window is for. */
static void ids_in_order_freed_at_random_stay_in_the_window(void **state)
{
    (void)state;
    enum { IDS = 200000 };
    vb_id_map map = VB_ID_MAP_INIT;
    uint64_t *live = malloc(IDS * sizeof *live);
    assert_non_null(live);
    size_t live_count = 0;
    uint64_t rng = 1;
    for (uint64_t id = 0; id < IDS; id++) {
        *vb_id_map_slot(&map, id, NULL) = id + 1;
        live[live_count++] = id;
        if (next_random(&rng) % 100 < 40) { /* a free of a live id at random */
            size_t pick = (size_t)(next_random(&rng) % live_count);
            uint64_t value = 0;
            assert_true(vb_id_map_remove(&map, live[pick], &value));
            assert_int_equal(value, live[pick] + 1);
            live[pick] = live[--live_count];
        }
    }
    assert_int_equal(map.outside.count, 0);
    assert_int_equal(vb_id_map_count(&map), live_count);
    free(live);
    vb_id_map_clear(&map);
}

/* Memory follows the ids held, not the ids seen: a million ids in order,
 * at most 100 held at once, keep the window at its first size (it slides). */
static void a_window_of_few_held_ids_slides_without_growing(void **state)
{
    (void)state;
    vb_id_map map = VB_ID_MAP_INIT;
    for (uint64_t id = 0; id < 1000000; id++) {
        assert_non_null(vb_id_map_slot(&map, id, NULL));
        if (id >= 100) assert_true(vb_id_map_remove(&map, id - 100, NULL));
    }
    size_t first_capacity = map.capacity;
    assert_true(first_capacity > 0 && first_capacity <= 1024);
    assert_int_equal(vb_id_map_count(&map), 100);
    vb_id_map_clear(&map);
}

/* each visits every held id once, with its value, wherever it is kept. */
typedef struct tally {
    uint64_t ids, values;
    size_t visits;
} tally;

static void tally_visit(void *context, uint64_t id, uint64_t value)
{
    tally *t = context;
    t->ids += id;
    t->values += value;
    t->visits++;
}

/* How the ids of a random run are drawn. */
typedef enum id_kind {
    IDS_IN_ORDER,      /* 0, 1, 2, ... */
    IDS_REUSED,        /* small ids (below 4096), drawn again whether held or not */
    IDS_SPARSE,        /* random 64-bit ids */
    IDS_MIXED,         /* in order, with reused and random ones among them */
} id_kind;

/* The next id of `kind`. */
static uint64_t draw_id(id_kind kind, uint64_t *rng, uint64_t *next_in_order)
{
    uint64_t pick = next_random(rng) % 10;
    if (kind == IDS_REUSED || (kind == IDS_MIXED && pick == 0)) return next_random(rng) % 4096;
    if (kind == IDS_SPARSE || (kind == IDS_MIXED && pick == 1)) return next_random(rng) >> 1; /* never UINT64_MAX */
    return (*next_in_order)++;
}

/* Runs `operations` random inserts (`insert_percent` of them), removes (of
 * held ids) and look-ups (of ids drawn at random, held or not) against a
 * vb_addr_map as the reference, checking every result and the count, and
 * every `full_check_every` operations every held id and a walk with
 * vb_id_map_each. */
static void random_ops_against_reference(id_kind kind, size_t operations, size_t full_check_every,
                                         uint64_t insert_percent, uint64_t seed)
{
    vb_id_map map = VB_ID_MAP_INIT;
    vb_addr_map reference = VB_ADDR_MAP_INIT; /* id + 1 -> value */
    uint64_t *held = calloc(operations + 1, sizeof *held);
    assert_non_null(held);
    size_t held_count = 0;
    uint64_t rng = seed, next_in_order = 0;
    for (size_t op = 0; op < operations; op++) {
        uint64_t roll = next_random(&rng) % 100;
        uint64_t expected = 0, value = 0;
        if (roll < insert_percent || held_count == 0) {
            uint64_t id = draw_id(kind, &rng, &next_in_order);
            int was_held = vb_addr_map_get(&reference, id + 1, &expected);
            int added = -1;
            uint64_t *slot = vb_id_map_slot(&map, id, &added);
            assert_non_null(slot);
            assert_int_equal(added, !was_held);
            if (was_held) {
                assert_int_equal(*slot, expected);
                continue;
            }
            assert_int_equal(*slot, 0);
            *slot = next_random(&rng);
            assert_int_equal(vb_addr_map_put(&reference, id + 1, *slot), 0);
            held[held_count++] = id;
        } else if (roll < 95) {
            size_t pick = (size_t)(next_random(&rng) % held_count);
            assert_true(vb_id_map_remove(&map, held[pick], &value));
            assert_true(vb_addr_map_remove(&reference, held[pick] + 1, &expected));
            assert_int_equal(value, expected);
            assert_false(vb_id_map_remove(&map, held[pick], NULL));
            held[pick] = held[--held_count];
        } else {
            uint64_t id = draw_id(kind, &rng, &next_in_order);
            int was_held = vb_addr_map_get(&reference, id + 1, &expected);
            assert_int_equal(vb_id_map_get(&map, id, &value), was_held);
            if (was_held) {
                assert_int_equal(value, expected);
                continue;
            }
            assert_false(vb_id_map_remove(&map, id, NULL));
        }
        assert_int_equal(vb_id_map_count(&map), held_count);
        if (op % full_check_every == 0) {
            tally want = {0, 0, 0};
            for (size_t h = 0; h < held_count; h++) {
                assert_true(vb_addr_map_get(&reference, held[h] + 1, &expected));
                assert_true(vb_id_map_get(&map, held[h], &value));
                assert_int_equal(value, expected);
                int added = -1;
                uint64_t *slot = vb_id_map_slot(&map, held[h], &added);
                assert_int_equal(added, 0);
                assert_int_equal(*slot, expected);
                tally_visit(&want, held[h], expected);
            }
            tally seen = {0, 0, 0};
            vb_id_map_each(&map, tally_visit, &seen);
            assert_memory_equal(&seen, &want, sizeof seen);
        }
    }
    vb_id_map_clear(&map);
    assert_int_equal(vb_id_map_count(&map), 0);
    vb_addr_map_clear(&reference);
    free(held);
}

/* Ids in order, more inserted than removed (the window grows), then fewer
 * (it slides, leaving ids behind in the hash map). */
static void random_ops_with_ids_in_order(void **state)
{
    (void)state;
    random_ops_against_reference(IDS_IN_ORDER, 100000, 5000, 70, 1);
    random_ops_against_reference(IDS_IN_ORDER, 100000, 5000, 52, 2);
    random_ops_against_reference(IDS_IN_ORDER, 100000, 5000, 30, 3);
}

/* Small ids allocated again once freed: below the window, or in it. */
static void random_ops_with_reused_ids(void **state)
{
    (void)state;
    random_ops_against_reference(IDS_REUSED, 50000, 2500, 55, 4);
}

/* Random 64-bit ids: far from any window, in the hash map. */
static void random_ops_with_sparse_ids(void **state)
{
    (void)state;
    random_ops_against_reference(IDS_SPARSE, 50000, 2500, 60, 5);
}

/* All three at once: ids the window reaches while the hash map holds them. */
static void random_ops_with_mixed_ids(void **state)
{
    (void)state;
    random_ops_against_reference(IDS_MIXED, 100000, 5000, 60, 6);
    random_ops_against_reference(IDS_MIXED, 100000, 5000, 45, 7);
}

/* Records the ids vb_id_map_each visits, in order. */
typedef struct id_walk {
    uint64_t *ids;
    size_t count;
} id_walk;

static void record_id(void *context, uint64_t id, uint64_t value)
{
    (void)value;
    id_walk *walk = context;
    walk->ids[walk->count++] = id;
}

/* A trace whose ids are the unseeded hash's colliders minus 1 (a 1.9 MB
 * trace, replayed in seconds before the hash was seeded): the first id
 * places the window, the rest are far from it, in the hash map, where
 * they spread like any ids; each visits them in increasing order, the
 * same every run (a replay frees leftovers in that order). */
static void ids_colliding_under_the_unseeded_hash_stay_spread(void **state)
{
    (void)state;
    vb_id_map map = VB_ID_MAP_INIT;
    for (uint64_t i = 1; i <= VB_TEST_COLLIDERS; i++) {
        uint64_t *slot = vb_id_map_slot(&map, vb_test_unseeded_collider(i) - 1, NULL);
        assert_non_null(slot);
        *slot = i;
    }
    assert_int_equal(vb_id_map_count(&map), VB_TEST_COLLIDERS);
    assert_true(map.outside.count >= VB_TEST_COLLIDERS - 1);
    assert_true(vb_addr_map_longest_probe(&map.outside) <= VB_TEST_LONGEST_PROBE);
    for (uint64_t i = 1; i <= VB_TEST_COLLIDERS; i++) {
        uint64_t value = 0;
        assert_true(vb_id_map_get(&map, vb_test_unseeded_collider(i) - 1, &value));
        assert_int_equal(value, i);
    }
    uint64_t *ids = malloc(VB_TEST_COLLIDERS * sizeof *ids);
    assert_non_null(ids);
    id_walk walk = {ids, 0};
    vb_id_map_each(&map, record_id, &walk);
    assert_int_equal(walk.count, VB_TEST_COLLIDERS);
    size_t window_ids = VB_TEST_COLLIDERS - map.outside.count;
    for (size_t k = window_ids + 1; k < walk.count; k++) assert_true(ids[k - 1] < ids[k]);
    free(ids);
    vb_id_map_clear(&map);
}

/* Runs every id_map test. */
int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(slot_finds_or_inserts_and_says_which),
        cmocka_unit_test(remove_returns_value_and_forgets_id),
        cmocka_unit_test(the_largest_id_is_refused),
        cmocka_unit_test(ids_in_order_freed_at_random_stay_in_the_window),
        cmocka_unit_test(a_window_of_few_held_ids_slides_without_growing),
        cmocka_unit_test(random_ops_with_ids_in_order),
        cmocka_unit_test(random_ops_with_reused_ids),
        cmocka_unit_test(random_ops_with_sparse_ids),
        cmocka_unit_test(random_ops_with_mixed_ids),
        cmocka_unit_test(ids_colliding_under_the_unseeded_hash_stay_spread),
    };
    return cmocka_run_group_tests_name("id_map", tests, NULL, NULL);
}
