/* vrambench — unit tests of allocators/hole_index (the index of holes that
 * stitch's moves and stitched ranges choose from): its orders against a
 * sorted-array reference, and its pick against vb_hole_pick_sorted, the
 * sort of every hole it replaces, on seeded random holes full of ties. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "allocators/hole_index.h"
#include "test_random.h"

#define UNIT (2ull << 20)
#define ADDRESSES 400

/* A hole at address slot `slot`: few distinct sizes, so that many holes
 * tie on whole bytes and on piece bytes. */
static vb_hole_figures random_hole(uint64_t *rng, uint64_t slot)
{
    uint64_t whole = next_random(rng) % 4 * UNIT;
    uint64_t piece = whole + (next_random(rng) % 3 == 0 ? next_random(rng) % 3 * UNIT / 2 : 0);
    if (piece == 0) piece = UNIT / 2;
    return (vb_hole_figures){.addr = (slot + 1) * 64 * UNIT, .whole = whole, .piece = piece, .block = NULL};
}

/* The reference: the hole noted at each address slot (piece 0: none). */
typedef struct reference {
    vb_hole_figures at[ADDRESSES];
} reference;

/* Fills `index` and `ref` with `count` random puts (some replacing). */
static void fill(vb_hole_index *index, reference *ref, uint64_t *rng, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        uint64_t slot = next_random(rng) % ADDRESSES;
        vb_hole_figures hole = random_hole(rng, slot);
        assert_int_equal(vb_hole_index_put(index, &hole), VB_OK);
        ref->at[slot] = hole;
    }
}

/* Every hole of `ref` is in `index`, in address order, with its figures;
 * the movable ones (whole handles) in their own order; the sum right. */
static void assert_index_is(const vb_hole_index *index, const reference *ref)
{
    vb_hole *hole = vb_hole_index_from(index, 0);
    vb_hole *movable = vb_hole_index_movable_from(index, 0);
    uint64_t whole = 0;
    for (size_t slot = 0; slot < ADDRESSES; slot++) {
        const vb_hole_figures *expected = &ref->at[slot];
        if (!expected->piece) continue;
        assert_non_null(hole);
        assert_memory_equal(&hole->figures, expected, sizeof *expected);
        assert_ptr_equal(vb_hole_index_at(index, expected->addr), hole);
        hole = vb_hole_index_next(index, hole);
        if (expected->whole) {
            assert_ptr_equal(movable, vb_hole_index_at(index, expected->addr));
            movable = vb_hole_index_movable_from(index, expected->addr + 1);
        }
        whole += expected->whole;
    }
    assert_null(hole);
    assert_null(movable);
    assert_int_equal(index->whole, whole);
}

static void holes_come_in_address_order_and_a_put_replaces(void **state)
{
    (void)state;
    vb_hole_index index;
    vb_hole_index_init(&index, 1);
    reference ref;
    memset(&ref, 0, sizeof ref);
    uint64_t rng = 11;
    fill(&index, &ref, &rng, 3 * ADDRESSES);
    assert_index_is(&index, &ref);
    vb_hole_index_free(&index);
}

static void forget_removes_exactly_the_addresses_in_its_range(void **state)
{
    (void)state;
    vb_hole_index index;
    vb_hole_index_init(&index, 1);
    reference ref;
    memset(&ref, 0, sizeof ref);
    uint64_t rng = 12;
    fill(&index, &ref, &rng, 2 * ADDRESSES);
    for (int round = 0; round < 50; round++) {
        uint64_t lo = next_random(&rng) % ADDRESSES, hi = lo + next_random(&rng) % 20;
        /* slots [lo, hi): their holes go, the others stay */
        vb_hole_index_forget(&index, (lo + 1) * 64 * UNIT, (hi + 1) * 64 * UNIT);
        for (uint64_t slot = lo; slot < hi && slot < ADDRESSES; slot++) ref.at[slot].piece = 0;
        assert_index_is(&index, &ref);
        fill(&index, &ref, &rng, 10);
        assert_index_is(&index, &ref);
    }
    vb_hole_index_clear(&index);
    memset(&ref, 0, sizeof ref);
    assert_index_is(&index, &ref);
    vb_hole_index_free(&index);
}

/* maps for the tests: one per started unit of the bytes taken, and one
 * more for holes at odd slots, so that the limit cuts picks short. */
static size_t unit_maps(void *context, const vb_hole_figures *hole, uint64_t bytes)
{
    (void)context;
    return (size_t)((bytes + UNIT - 1) / UNIT) + (size_t)(hole->addr / (64 * UNIT) % 2);
}

/* vb_hole_index_pick and vb_hole_pick_sorted give the same answer and the
 * same choices for `size` bytes under `max_maps`. */
static void assert_picks_agree(vb_hole_index *index, const reference *ref, uint64_t size, size_t max_maps)
{
    vb_hole_figures all[ADDRESSES];
    size_t count = 0;
    for (size_t slot = 0; slot < ADDRESSES; slot++)
        if (ref->at[slot].piece) all[count++] = ref->at[slot];
    vb_hole_choice *sorted = NULL, *indexed = NULL;
    size_t sorted_count = 0, indexed_count = 0;
    int sorted_result = vb_hole_pick_sorted(all, count, size, max_maps, unit_maps, NULL, &sorted, &sorted_count);
    int indexed_result = vb_hole_index_pick(index, size, max_maps, unit_maps, NULL, &indexed, &indexed_count);
    assert_int_equal(indexed_result, sorted_result);
    assert_int_equal(indexed_count, sorted_count);
    for (size_t i = 0; i < sorted_count; i++) {
        assert_int_equal(indexed[i].hole.addr, sorted[i].hole.addr);
        assert_int_equal(indexed[i].bytes, sorted[i].bytes);
    }
    free(sorted);
    free(indexed);
}

static void pick_chooses_as_sorting_every_hole_does(void **state)
{
    (void)state;
    static const size_t limits[] = {0, 1, 2, 4, 16, 64, 4096};
    for (uint64_t seed = 1; seed <= 40; seed++) {
        vb_hole_index index;
        vb_hole_index_init(&index, 1);
        reference ref;
        memset(&ref, 0, sizeof ref);
        uint64_t rng = seed;
        fill(&index, &ref, &rng, seed % 4 == 0 ? 5 : seed * 12);
        for (int round = 0; round < 40; round++) {
            uint64_t size = (1 + next_random(&rng) % (seed % 3 == 0 ? 8 : 64)) * UNIT / 2;
            assert_picks_agree(&index, &ref, size, limits[next_random(&rng) % (sizeof limits / sizeof *limits)]);
        }
        /* The index is left as it was: the same picks again. */
        assert_index_is(&index, &ref);
        assert_picks_agree(&index, &ref, 7 * UNIT, 64);
        vb_hole_index_free(&index);
    }
}

static void pick_from_no_holes_picks_nothing(void **state)
{
    (void)state;
    vb_hole_index index;
    vb_hole_index_init(&index, 1);
    vb_hole_choice *choices = (vb_hole_choice *)&index; /* overwritten */
    size_t count = 1;
    assert_int_equal(vb_hole_index_pick(&index, UNIT, 64, unit_maps, NULL, &choices, &count), -1);
    assert_null(choices);
    assert_int_equal(count, 0);
    vb_hole_index_free(&index);
}

/* Runs every hole index test. */
int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(holes_come_in_address_order_and_a_put_replaces),
        cmocka_unit_test(forget_removes_exactly_the_addresses_in_its_range),
        cmocka_unit_test(pick_chooses_as_sorting_every_hole_does),
        cmocka_unit_test(pick_from_no_holes_picks_nothing),
    };
    return cmocka_run_group_tests_name("hole_index", tests, NULL, NULL);
}
