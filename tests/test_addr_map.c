/* vrambench — unit tests of base/addr_map (uint64 -> uint64 hash map
 * with linear probing and backward-shift deletion). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "base/addr_map.h"
#include "tests/hostile_keys.h"
#include "test_random.h"

/* Device-like keys: 256-byte aligned, sharing their high bits, as the
 * addresses the map is built for. */
static uint64_t key_of(size_t index)
{
    return 0x7f0000000000ULL + (uint64_t)index * 256;
}

/* A put key can be read back with its value; a key never put cannot. */
static void put_then_get_returns_the_value(void **state)
{
    (void)state;
    vb_addr_map map = VB_ADDR_MAP_INIT;
    uint64_t value = 0;
    assert_false(vb_addr_map_get(&map, key_of(1), &value)); /* empty, no table yet */
    assert_int_equal(vb_addr_map_put(&map, key_of(1), 111), 0);
    assert_int_equal(vb_addr_map_put(&map, key_of(2), 222), 0);
    assert_true(vb_addr_map_get(&map, key_of(1), &value));
    assert_int_equal(value, 111);
    assert_true(vb_addr_map_get(&map, key_of(2), NULL));
    assert_false(vb_addr_map_get(&map, key_of(3), &value));
    assert_int_equal(map.count, 2);
    vb_addr_map_clear(&map);
}

/* Putting a key again replaces its value and does not count it twice. */
static void put_existing_key_replaces_value(void **state)
{
    (void)state;
    vb_addr_map map = VB_ADDR_MAP_INIT;
    uint64_t value = 0;
    vb_addr_map_put(&map, key_of(7), 1);
    vb_addr_map_put(&map, key_of(7), 2);
    assert_int_equal(map.count, 1);
    assert_true(vb_addr_map_get(&map, key_of(7), &value));
    assert_int_equal(value, 2);
    vb_addr_map_clear(&map);
}

/* slot inserts a new key with value 0 and says so; for a present key it
 * says not added and points at the stored value, which a write through it
 * changes. */
static void slot_finds_or_inserts_and_says_which(void **state)
{
    (void)state;
    vb_addr_map map = VB_ADDR_MAP_INIT;
    int added = -1;
    uint64_t *slot = vb_addr_map_slot(&map, key_of(3), &added);
    assert_non_null(slot);
    assert_int_equal(added, 1);
    assert_int_equal(*slot, 0);
    *slot = 33;
    slot = vb_addr_map_slot(&map, key_of(3), &added);
    assert_int_equal(added, 0);
    assert_int_equal(*slot, 33);
    assert_int_equal(map.count, 1);
    assert_null(vb_addr_map_slot(&map, 0, &added));
    vb_addr_map_clear(&map);
}

/* Remove hands back the value, forgets the key, and reports a missing key. */
static void remove_returns_value_and_forgets_key(void **state)
{
    (void)state;
    vb_addr_map map = VB_ADDR_MAP_INIT;
    uint64_t value = 0;
    vb_addr_map_put(&map, key_of(5), 55);
    assert_true(vb_addr_map_remove(&map, key_of(5), &value));
    assert_int_equal(value, 55);
    assert_false(vb_addr_map_get(&map, key_of(5), NULL));
    assert_false(vb_addr_map_remove(&map, key_of(5), &value));
    assert_int_equal(map.count, 0);
    vb_addr_map_clear(&map);
}

/* Key 0 marks an empty slot, so the map refuses it instead of corrupting
 * its count; it is never found. */
static void key_zero_is_refused(void **state)
{
    (void)state;
    vb_addr_map map = VB_ADDR_MAP_INIT;
    vb_addr_map_put(&map, key_of(1), 1);
    assert_int_equal(vb_addr_map_put(&map, 0, 9), -1);
    assert_int_equal(map.count, 1);
    assert_false(vb_addr_map_get(&map, 0, NULL));
    assert_false(vb_addr_map_remove(&map, 0, NULL));
    vb_addr_map_clear(&map);
}

/* Growing past the first table (64 slots, at most half full) and several
 * doublings keeps every entry: 10,000 keys in, all found with their values. */
static void growth_keeps_every_entry(void **state)
{
    (void)state;
    vb_addr_map map = VB_ADDR_MAP_INIT;
    for (size_t i = 1; i <= 10000; i++) assert_int_equal(vb_addr_map_put(&map, key_of(i), i * 3), 0);
    assert_int_equal(map.count, 10000);
    assert_true(map.count * 2 <= map.capacity);
    for (size_t i = 1; i <= 10000; i++) {
        uint64_t value = 0;
        assert_true(vb_addr_map_get(&map, key_of(i), &value));
        assert_int_equal(value, i * 3);
    }
    vb_addr_map_clear(&map);
}

/* Context for counting the visits of vb_addr_map_each. */
typedef struct visit_tally {
    unsigned char *seen; /* per key index: how often visited */
    size_t universe;
    size_t visits;
    int wrong_value;
} visit_tally;

/* Counts one visit of `each`, flagging keys or values never put. */
static void tally_visit(void *context, uint64_t key, uint64_t value)
{
    visit_tally *tally = context;
    size_t index = (size_t)((key - key_of(0)) / 256);
    tally->visits++;
    if (index >= tally->universe || value != index * 3) {
        tally->wrong_value = 1;
        return;
    }
    tally->seen[index]++;
}

/* `each` visits every entry exactly once with its value, and nothing else. */
static void each_visits_every_entry_once(void **state)
{
    (void)state;
    vb_addr_map map = VB_ADDR_MAP_INIT;
    enum { UNIVERSE = 3000 };
    for (size_t i = 1; i < UNIVERSE; i += 2) vb_addr_map_put(&map, key_of(i), i * 3);
    for (size_t i = 1; i < UNIVERSE; i += 6) vb_addr_map_remove(&map, key_of(i), NULL);
    unsigned char seen[UNIVERSE] = {0};
    visit_tally tally = {seen, UNIVERSE, 0, 0};
    vb_addr_map_each(&map, tally_visit, &tally);
    assert_false(tally.wrong_value);
    assert_int_equal(tally.visits, map.count);
    for (size_t i = 0; i < UNIVERSE; i++) {
        int expected = (i % 2 == 1) && (i % 6 != 1);
        assert_int_equal(seen[i], expected);
    }
    vb_addr_map_clear(&map);
}

/* Clear empties the map, which stays usable. */
static void clear_leaves_an_empty_usable_map(void **state)
{
    (void)state;
    vb_addr_map map = VB_ADDR_MAP_INIT;
    for (size_t i = 1; i <= 100; i++) vb_addr_map_put(&map, key_of(i), i);
    vb_addr_map_clear(&map);
    assert_int_equal(map.count, 0);
    assert_false(vb_addr_map_get(&map, key_of(1), NULL));
    assert_int_equal(vb_addr_map_put(&map, key_of(1), 4), 0);
    assert_true(vb_addr_map_get(&map, key_of(1), NULL));
    vb_addr_map_clear(&map);
}

/* Runs `operations` random put (`put_percent` of them) / remove / get (10%)
 * over a universe of `universe` keys against a reference array indexed by
 * key, checking every result and, every `full_check_every` operations, every
 * key of the universe. */
static void random_ops_against_reference(size_t universe, size_t operations, size_t full_check_every,
                                         uint64_t put_percent, uint64_t seed)
{
    vb_addr_map map = VB_ADDR_MAP_INIT;
    uint64_t *reference = calloc(universe, sizeof *reference); /* 0 = absent, else value */
    uint64_t *keys = calloc(universe, sizeof *keys);
    assert_non_null(reference);
    assert_non_null(keys);
    uint64_t rng = seed;
    /* Random 256-aligned keys: sequential addresses land in distinct slots
     * (the hash spreads arithmetic sequences evenly), random ones collide,
     * which is what exercises the probe runs. Index i+1 in the top bits
     * keeps them distinct and non-zero. */
    for (size_t i = 0; i < universe; i++) keys[i] = ((uint64_t)(i + 1) << 48) | ((next_random(&rng) >> 24) << 8);
    size_t present = 0;
    for (size_t op = 0; op < operations; op++) {
        size_t index = (size_t)(next_random(&rng) % universe);
        uint64_t key = keys[index];
        uint64_t roll = next_random(&rng) % 100;
        uint64_t value = 0;
        if (roll < put_percent) {
            uint64_t new_value = (next_random(&rng) | 1);
            assert_int_equal(vb_addr_map_put(&map, key, new_value), 0);
            present += reference[index] == 0;
            reference[index] = new_value;
        } else if (roll < 90) { /* remove */
            int found = vb_addr_map_remove(&map, key, &value);
            assert_int_equal(found, reference[index] != 0);
            if (found) assert_int_equal(value, reference[index]);
            present -= reference[index] != 0;
            reference[index] = 0;
        } else {
            int found = vb_addr_map_get(&map, key, &value);
            assert_int_equal(found, reference[index] != 0);
            if (found) assert_int_equal(value, reference[index]);
        }
        assert_int_equal(map.count, present);
        if (op % full_check_every == 0) {
            for (size_t i = 0; i < universe; i++) {
                int found = vb_addr_map_get(&map, keys[i], &value);
                assert_int_equal(found, reference[i] != 0);
                if (found) assert_int_equal(value, reference[i]);
            }
        }
    }
    vb_addr_map_clear(&map);
    free(reference);
    free(keys);
}

/* Backward-shift deletion keeps every remaining key reachable: 32 keys in
 * the first table of 64 slots (it grows only when a 33rd key arrives), kept
 * near half full by putting twice as often as removing, so probe runs are
 * long and wrap around the end; 200,000 operations, every key checked every 50. */
static void backward_shift_keeps_keys_reachable_in_a_crowded_table(void **state)
{
    (void)state;
    random_ops_against_reference(32, 200000, 50, 60, 1);
}

/* The first table has 64 slots: a map grows to 128 at its 33rd key (half
 * full), a sparse one at its 17th (a quarter). */
static void sparse_map_grows_at_a_quarter_full(void **state)
{
    (void)state;
    vb_addr_map plain = VB_ADDR_MAP_INIT, sparse = VB_ADDR_MAP_SPARSE_INIT;
    for (size_t i = 1; i <= 16; i++) {
        vb_addr_map_put(&plain, key_of(i), i);
        vb_addr_map_put(&sparse, key_of(i), i);
    }
    assert_int_equal(plain.capacity, 64);
    assert_int_equal(sparse.capacity, 64);
    vb_addr_map_put(&sparse, key_of(17), 17);
    assert_int_equal(sparse.capacity, 128);
    for (size_t i = 17; i <= 32; i++) vb_addr_map_put(&plain, key_of(i), i);
    assert_int_equal(plain.capacity, 64);
    vb_addr_map_put(&plain, key_of(33), 33);
    assert_int_equal(plain.capacity, 128);
    vb_addr_map_clear(&plain);
    vb_addr_map_clear(&sparse);
}

/* The same over 5,000 keys, across growth, every key checked every 10,000. */
static void random_ops_match_reference_across_growth(void **state)
{
    (void)state;
    random_ops_against_reference(5000, 200000, 10000, 45, 2);
}

/* Puts keys[0..count) in `map`, checks the longest probe, removes every
 * other one and checks that the rest are found and still spread. */
static void assert_keys_stay_spread(vb_addr_map *map, const uint64_t *keys, size_t count)
{
    for (size_t i = 0; i < count; i++) assert_int_equal(vb_addr_map_put(map, keys[i], i), 0);
    assert_int_equal(map->count, count);
    assert_true(vb_addr_map_longest_probe(map) <= VB_TEST_LONGEST_PROBE);
    for (size_t i = 0; i < count; i += 2) assert_true(vb_addr_map_remove(map, keys[i], NULL));
    for (size_t i = 1; i < count; i += 2) {
        uint64_t value = 0;
        assert_true(vb_addr_map_get(map, keys[i], &value));
        assert_int_equal(value, i);
    }
    assert_true(vb_addr_map_longest_probe(map) <= VB_TEST_LONGEST_PROBE);
    vb_addr_map_clear(map);
}

/* 40,000 keys worked out from the inverse of the map's old, unseeded hash
 * share slot 0 of every table there (each insert walked past all the
 * others: a trace of them replayed in quadratic time); with the seeded
 * hash they spread like any keys, in a plain map and in a sparse one. */
static void keys_colliding_under_the_unseeded_hash_stay_spread(void **state)
{
    (void)state;
    uint64_t *keys = malloc(VB_TEST_COLLIDERS * sizeof *keys);
    assert_non_null(keys);
    for (size_t i = 0; i < VB_TEST_COLLIDERS; i++) keys[i] = vb_test_unseeded_collider(i + 1);
    vb_addr_map plain = VB_ADDR_MAP_INIT, sparse = VB_ADDR_MAP_SPARSE_INIT;
    assert_keys_stay_spread(&plain, keys, VB_TEST_COLLIDERS);
    assert_keys_stay_spread(&sparse, keys, VB_TEST_COLLIDERS);
    free(keys);
}

/* With the seed XORed into the key before one finaliser round, a slot
 * would depend only on (key's low 33 bits ^ its high 31) and a few bits
 * above bit 33: keys j << 51 | j << 18 agree on those for every j and
 * every seed, so no seed could spread them. The seeded hash does. */
static void keys_colliding_under_one_round_whatever_its_seed_stay_spread(void **state)
{
    (void)state;
    enum { COUNT = 8191 };
    uint64_t keys[COUNT];
    for (uint64_t j = 1; j <= COUNT; j++) keys[j - 1] = j << 51 | j << 18;
    vb_addr_map map = VB_ADDR_MAP_SPARSE_INIT;
    assert_keys_stay_spread(&map, keys, COUNT);
}

/* Records the keys each_sorted visits, in order, and checks their values. */
typedef struct sorted_walk {
    uint64_t *keys;
    size_t count;
    int wrong_value;
} sorted_walk;

static void record_visit(void *context, uint64_t key, uint64_t value)
{
    sorted_walk *walk = context;
    if (value != ~key) walk->wrong_value = 1;
    walk->keys[walk->count++] = key;
}

/* each_sorted visits every entry once, in increasing key order (the same
 * every run, whatever the seed), after removals too. */
static void each_sorted_visits_keys_in_increasing_order(void **state)
{
    (void)state;
    enum { COUNT = 5000 };
    vb_addr_map map = VB_ADDR_MAP_INIT;
    uint64_t rng = 7;
    for (size_t i = 0; i < COUNT; i++) {
        uint64_t key = next_random(&rng) | 1;
        vb_addr_map_put(&map, key, ~key);
        if (i % 3 == 0) vb_addr_map_remove(&map, key, NULL);
    }
    uint64_t *keys = malloc(COUNT * sizeof *keys);
    assert_non_null(keys);
    sorted_walk walk = {keys, 0, 0};
    vb_addr_map_each_sorted(&map, record_visit, &walk);
    assert_false(walk.wrong_value);
    assert_int_equal(walk.count, map.count);
    for (size_t i = 1; i < walk.count; i++) assert_true(keys[i - 1] < keys[i]);
    for (size_t i = 0; i < walk.count; i++) assert_true(vb_addr_map_get(&map, keys[i], NULL));
    free(keys);
    vb_addr_map_clear(&map);
}

/* Runs every addr_map test. */
int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(put_then_get_returns_the_value),
        cmocka_unit_test(put_existing_key_replaces_value),
        cmocka_unit_test(slot_finds_or_inserts_and_says_which),
        cmocka_unit_test(remove_returns_value_and_forgets_key),
        cmocka_unit_test(key_zero_is_refused),
        cmocka_unit_test(growth_keeps_every_entry),
        cmocka_unit_test(each_visits_every_entry_once),
        cmocka_unit_test(clear_leaves_an_empty_usable_map),
        cmocka_unit_test(backward_shift_keeps_keys_reachable_in_a_crowded_table),
        cmocka_unit_test(random_ops_match_reference_across_growth),
        cmocka_unit_test(sparse_map_grows_at_a_quarter_full),
        cmocka_unit_test(keys_colliding_under_the_unseeded_hash_stay_spread),
        cmocka_unit_test(keys_colliding_under_one_round_whatever_its_seed_stay_spread),
        cmocka_unit_test(each_sorted_visits_keys_in_increasing_order),
    };
    return cmocka_run_group_tests_name("addr_map", tests, NULL, NULL);
}
