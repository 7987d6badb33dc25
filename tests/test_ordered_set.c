/* vrambench — unit tests of allocators/ordered_set (the intrusive treap the
 * best-fit allocators search), against a sorted-array reference. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "base/ordered_set.h"

/* A block as allocators embed the node: ordered by (size, address), the
 * address breaking ties as the set requires. */
typedef struct item {
    uint64_t size;
    uint64_t address;
    int in_set;
    vb_oset_node node;
} item;

/* Orders items by (size, address). */
static int compare_items(const vb_oset_node *a, const vb_oset_node *b)
{
    const item *x = VB_OSET_ENTRY(a, item, node), *y = VB_OSET_ENTRY(b, item, node);
    if (x->size != y->size) return x->size < y->size ? -1 : 1;
    if (x->address != y->address) return x->address < y->address ? -1 : 1;
    return 0;
}

/* The item embedding `node`, or NULL for NULL. */
static item *item_of(vb_oset_node *node)
{
    return node ? VB_OSET_ENTRY(node, item, node) : NULL;
}

/* splitmix64, for seeded random operations. */
static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* The reference: pointers to the items in the set, kept sorted. */
typedef struct reference {
    item **items;
    size_t count;
} reference;

/* The position of the first item not before `probe` in the reference. */
static size_t reference_lower_bound(const reference *ref, const item *probe)
{
    size_t low = 0, high = ref->count;
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        if (compare_items(&ref->items[middle]->node, &probe->node) < 0) low = middle + 1;
        else high = middle;
    }
    return low;
}

/* Inserts `it` into the reference at its sorted position. */
static void reference_insert(reference *ref, item *it)
{
    size_t at = reference_lower_bound(ref, it);
    memmove(&ref->items[at + 1], &ref->items[at], (ref->count - at) * sizeof *ref->items);
    ref->items[at] = it;
    ref->count++;
}

/* Removes `it`, which must be in the reference. */
static void reference_remove(reference *ref, item *it)
{
    size_t at = reference_lower_bound(ref, it);
    assert_ptr_equal(ref->items[at], it);
    /* at < count (the assertion); gcc -O3 sees a wrap-around bound otherwise (stringop-overflow). */
    if (at + 1 < ref->count) memmove(&ref->items[at], &ref->items[at + 1], (ref->count - at - 1) * sizeof *ref->items);
    ref->count--;
}

/* Walking first -> next visits exactly the reference, in its order. */
static void assert_same_order(const vb_ordered_set *set, const reference *ref)
{
    assert_int_equal(set->count, ref->count);
    vb_oset_node *node = vb_oset_first(set);
    for (size_t i = 0; i < ref->count; i++) {
        assert_ptr_equal(item_of(node), ref->items[i]);
        node = vb_oset_next(set, node);
    }
    assert_null(node);
}

/* Walking last -> prev visits exactly the reference, backwards. */
static void assert_same_order_backwards(const vb_ordered_set *set, const reference *ref)
{
    vb_oset_node *node = vb_oset_last(set);
    for (size_t i = ref->count; i-- > 0;) {
        assert_ptr_equal(item_of(node), ref->items[i]);
        node = vb_oset_prev(set, node);
    }
    assert_null(node);
}

/* An empty set has no first, last or lower bound. */
static void empty_set_has_no_nodes(void **state)
{
    (void)state;
    vb_ordered_set set;
    vb_oset_init(&set, compare_items);
    item probe = {.size = 1, .address = 1};
    assert_null(vb_oset_first(&set));
    assert_null(vb_oset_last(&set));
    assert_null(vb_oset_lower_bound(&set, &probe.node));
    assert_int_equal(set.count, 0);
}

/* Items inserted in scrambled order come out sorted by (size, address),
 * equal sizes ordered by address. */
static void iteration_is_in_order(void **state)
{
    (void)state;
    enum { COUNT = 1000 };
    static item items[COUNT];
    static item *sorted[COUNT];
    reference ref = {sorted, 0};
    vb_ordered_set set;
    vb_oset_init(&set, compare_items);
    for (size_t i = 0; i < COUNT; i++) {
        size_t scrambled = (i * 7919) % COUNT; /* 7919 is prime, so this visits every index */
        items[scrambled] = (item){.size = (scrambled % 37) * 512, .address = 0x1000 + scrambled * 256};
        vb_oset_insert(&set, &items[scrambled].node);
        reference_insert(&ref, &items[scrambled]);
    }
    assert_same_order(&set, &ref);
}

/* first and last are the smallest and largest item. */
static void first_and_last_are_the_extremes(void **state)
{
    (void)state;
    item items[5] = {{.size = 30, .address = 1}, {.size = 10, .address = 9}, {.size = 50, .address = 2},
                     {.size = 10, .address = 3}, {.size = 50, .address = 1}};
    vb_ordered_set set;
    vb_oset_init(&set, compare_items);
    for (size_t i = 0; i < 5; i++) vb_oset_insert(&set, &items[i].node);
    /* smallest (10, 3), largest (50, 2) */
    assert_ptr_equal(item_of(vb_oset_first(&set)), &items[3]);
    assert_ptr_equal(item_of(vb_oset_last(&set)), &items[2]);
}

/* lower_bound finds the first item not before a probe that is not in the
 * set: the best fit for a size. Sizes 512, 1024, 1024, 4096 at addresses
 * 1..4: a probe (1000, 0) lands on (1024, 2); (1024, 3) on (1024, 3);
 * (1025, 0) on (4096, 4); (4097, 0) on nothing. */
static void lower_bound_finds_first_not_before_probe(void **state)
{
    (void)state;
    item items[4] = {{.size = 512, .address = 1}, {.size = 1024, .address = 2}, {.size = 1024, .address = 3},
                     {.size = 4096, .address = 4}};
    vb_ordered_set set;
    vb_oset_init(&set, compare_items);
    for (size_t i = 0; i < 4; i++) vb_oset_insert(&set, &items[3 - i].node);
    item probe = {.size = 1000, .address = 0};
    assert_ptr_equal(item_of(vb_oset_lower_bound(&set, &probe.node)), &items[1]);
    probe = (item){.size = 1024, .address = 3};
    assert_ptr_equal(item_of(vb_oset_lower_bound(&set, &probe.node)), &items[2]);
    probe = (item){.size = 1025, .address = 0};
    assert_ptr_equal(item_of(vb_oset_lower_bound(&set, &probe.node)), &items[3]);
    probe = (item){.size = 4097, .address = 0};
    assert_null(vb_oset_lower_bound(&set, &probe.node));
}

/* next of the last item is NULL; next of a middle item is its successor. */
static void next_steps_to_the_successor(void **state)
{
    (void)state;
    item items[3] = {{.size = 1, .address = 1}, {.size = 2, .address = 1}, {.size = 3, .address = 1}};
    vb_ordered_set set;
    vb_oset_init(&set, compare_items);
    for (size_t i = 0; i < 3; i++) vb_oset_insert(&set, &items[i].node);
    assert_ptr_equal(item_of(vb_oset_next(&set, &items[0].node)), &items[1]);
    assert_ptr_equal(item_of(vb_oset_next(&set, &items[1].node)), &items[2]);
    assert_null(vb_oset_next(&set, &items[2].node));
}

/* prev of the first item is NULL; prev of a middle item is its predecessor. */
static void prev_steps_to_the_predecessor(void **state)
{
    (void)state;
    item items[3] = {{.size = 1, .address = 1}, {.size = 2, .address = 1}, {.size = 3, .address = 1}};
    vb_ordered_set set;
    vb_oset_init(&set, compare_items);
    for (size_t i = 0; i < 3; i++) vb_oset_insert(&set, &items[i].node);
    assert_ptr_equal(item_of(vb_oset_prev(&set, &items[2].node)), &items[1]);
    assert_ptr_equal(item_of(vb_oset_prev(&set, &items[1].node)), &items[0]);
    assert_null(vb_oset_prev(&set, &items[0].node));
}

/* last_before finds the last item before a probe that is not in the set:
 * sizes 1024, 2048, 4096 (address 0); probe (2048, 1) -> 2048; probe
 * (2048, 0) is the 2048 item itself, so -> 1024; probe (1024, 0) -> none. */
static void last_before_finds_last_before_probe(void **state)
{
    (void)state;
    item items[3] = {{.size = 1024}, {.size = 2048}, {.size = 4096}};
    vb_ordered_set set;
    vb_oset_init(&set, compare_items);
    for (size_t i = 0; i < 3; i++) vb_oset_insert(&set, &items[i].node);
    item probe = {.size = 2048, .address = 1};
    assert_ptr_equal(item_of(vb_oset_last_before(&set, &probe.node)), &items[1]);
    probe = (item){.size = 2048, .address = 0};
    assert_ptr_equal(item_of(vb_oset_last_before(&set, &probe.node)), &items[0]);
    probe = (item){.size = 1024, .address = 0};
    assert_null(vb_oset_last_before(&set, &probe.node));
}

/* Removing the root, a leaf and the extremes leaves the rest in order. */
static void remove_keeps_the_rest_in_order(void **state)
{
    (void)state;
    enum { COUNT = 64 };
    item items[COUNT];
    item *sorted[COUNT];
    reference ref = {sorted, 0};
    vb_ordered_set set;
    vb_oset_init(&set, compare_items);
    for (size_t i = 0; i < COUNT; i++) {
        items[i] = (item){.size = i * 512, .address = i};
        vb_oset_insert(&set, &items[i].node);
        reference_insert(&ref, &items[i]);
    }
    for (int round = 0; round < 8; round++) {
        /* root, a leaf, the first, the last, in turn, each chosen from the set as it is now */
        vb_oset_node *victim = set.root;
        if (round % 4 == 1)
            while (victim->left || victim->right) victim = victim->left ? victim->left : victim->right;
        if (round % 4 == 2) victim = vb_oset_first(&set);
        if (round % 4 == 3) victim = vb_oset_last(&set);
        vb_oset_remove(&set, victim);
        reference_remove(&ref, item_of(victim));
        assert_same_order(&set, &ref);
    }
}

/* 200,000 random inserts and removes of 2,000 items with many equal sizes;
 * after each, count, first and last match the reference, and every 1,000
 * operations the full order and 100 random lower bounds do too. */
static void random_ops_match_sorted_reference(void **state)
{
    (void)state;
    enum { COUNT = 2000 };
    item *items = calloc(COUNT, sizeof *items);
    item **sorted = calloc(COUNT, sizeof *sorted);
    assert_non_null(items);
    assert_non_null(sorted);
    reference ref = {sorted, 0};
    vb_ordered_set set;
    vb_oset_init(&set, compare_items);
    uint64_t rng = 7;
    for (size_t op = 0; op < 200000; op++) {
        item *it = &items[next_random(&rng) % COUNT];
        if (it->in_set) {
            vb_oset_remove(&set, &it->node);
            reference_remove(&ref, it);
            it->in_set = 0;
        } else {
            it->size = (next_random(&rng) % 64) * 512; /* many equal sizes */
            it->address = (uint64_t)(it - items) * 256;
            /* Half the inserts take the inline walk hot callers use. */
            if (op % 2) vb_oset_insert(&set, &it->node);
            else vb_oset_insert_by(&set, &it->node, compare_items);
            reference_insert(&ref, it);
            it->in_set = 1;
        }
        assert_int_equal(set.count, ref.count);
        assert_ptr_equal(item_of(vb_oset_first(&set)), ref.count ? ref.items[0] : NULL);
        assert_ptr_equal(item_of(vb_oset_last(&set)), ref.count ? ref.items[ref.count - 1] : NULL);
        if (op % 1000 != 0) continue;
        assert_same_order(&set, &ref);
        assert_same_order_backwards(&set, &ref);
        for (int probe_index = 0; probe_index < 100; probe_index++) {
            item probe = {.size = next_random(&rng) % (65 * 512), .address = next_random(&rng) % (COUNT * 256)};
            size_t at = reference_lower_bound(&ref, &probe);
            assert_ptr_equal(item_of(vb_oset_lower_bound(&set, &probe.node)), at < ref.count ? ref.items[at] : NULL);
            assert_ptr_equal(item_of(vb_oset_lower_bound_by(&set, &probe.node, compare_items)),
                             at < ref.count ? ref.items[at] : NULL);
            assert_ptr_equal(item_of(vb_oset_last_before(&set, &probe.node)), at > 0 ? ref.items[at - 1] : NULL);
        }
    }
    free(items);
    free(sorted);
}

/* Checks the subtree under `node` (whose parent is `parent`): every child
 * links back to its parent and no child outranks it by priority. Returns
 * the number of nodes. */
static size_t check_links(const vb_oset_node *node, const vb_oset_node *parent)
{
    if (!node) return 0;
    assert_ptr_equal(node->parent, parent);
    if (parent) assert_true(node->priority <= parent->priority);
    return 1 + check_links(node->left, node) + check_links(node->right, node);
}

/* After 20,000 random inserts and removes of 500 items, parent links and
 * the heap order by priority hold everywhere (removal and stepping rely on
 * the links), and the tree holds exactly `count` nodes. */
static void links_and_heap_order_hold_after_random_ops(void **state)
{
    (void)state;
    enum { COUNT = 500 };
    item *items = calloc(COUNT, sizeof *items);
    assert_non_null(items);
    vb_ordered_set set;
    vb_oset_init(&set, compare_items);
    uint64_t rng = 11;
    for (size_t op = 0; op < 20000; op++) {
        item *it = &items[next_random(&rng) % COUNT];
        if (it->in_set) {
            vb_oset_remove(&set, &it->node);
            it->in_set = 0;
        } else {
            it->size = (next_random(&rng) % 16) * 512;
            it->address = (uint64_t)(it - items) * 256;
            vb_oset_insert(&set, &it->node);
            it->in_set = 1;
        }
        if (op % 500 == 0) assert_int_equal(check_links(set.root, NULL), set.count);
    }
    assert_int_equal(check_links(set.root, NULL), set.count);
    free(items);
}

/* Appending 10,000 items in order with insert_after (each after the one
 * before), then putting 1,000 more each right after a random present item
 * it follows, keeps the order, the links and the heap order. */
static void insert_after_keeps_order_and_links(void **state)
{
    (void)state;
    enum { COUNT = 10000, MORE = 1000 };
    item *items = calloc(COUNT + MORE, sizeof *items);
    item **sorted = calloc(COUNT + MORE, sizeof *sorted);
    assert_non_null(items);
    assert_non_null(sorted);
    reference ref = {sorted, 0};
    vb_ordered_set set;
    vb_oset_init(&set, compare_items);
    for (size_t i = 0; i < COUNT; i++) {
        items[i] = (item){.size = i * 2, .address = 0};
        if (i == 0) vb_oset_insert(&set, &items[i].node);
        else vb_oset_insert_after(&set, &items[i].node, &items[i - 1].node);
        reference_insert(&ref, &items[i]);
    }
    uint64_t rng = 5;
    for (size_t i = COUNT; i < COUNT + MORE; i++) {
        /* size 2k + 1 sorts right after item k (size 2k), or after an odd
         * item already put there with a lower address: after the last of them */
        size_t k = (size_t)(next_random(&rng) % COUNT);
        items[i] = (item){.size = k * 2 + 1, .address = i};
        size_t at = reference_lower_bound(&ref, &items[i]);
        vb_oset_insert_after(&set, &items[i].node, &ref.items[at - 1]->node);
        reference_insert(&ref, &items[i]);
    }
    assert_same_order(&set, &ref);
    assert_int_equal(check_links(set.root, NULL), set.count);
    free(items);
    free(sorted);
}

/* The height of the tree under `node`, counting no deeper than `limit`
 * (so a degenerate tree cannot exhaust the stack). */
static size_t height_capped(const vb_oset_node *node, size_t limit)
{
    if (!node || limit == 0) return 0;
    size_t left = height_capped(node->left, limit - 1), right = height_capped(node->right, limit - 1);
    return 1 + (left > right ? left : right);
}

/* The tree stays shallow where a plain search tree degenerates: 100,000
 * items inserted in ascending order, then every other one removed. A treap
 * of n nodes has expected height about 3 ln n (35 for n = 100,000); 80 is a
 * bound a balanced tree never reaches and a list far exceeds. */
static void depth_stays_logarithmic_for_sorted_inserts(void **state)
{
    (void)state;
    enum { COUNT = 100000, HEIGHT_LIMIT = 80 };
    item *items = calloc(COUNT, sizeof *items);
    assert_non_null(items);
    vb_ordered_set set;
    vb_oset_init(&set, compare_items);
    for (size_t i = 0; i < COUNT; i++) {
        items[i] = (item){.size = i, .address = i};
        vb_oset_insert(&set, &items[i].node);
    }
    assert_in_range(height_capped(set.root, HEIGHT_LIMIT + 1), 1, HEIGHT_LIMIT);
    for (size_t i = 0; i < COUNT; i += 2) vb_oset_remove(&set, &items[i].node);
    assert_in_range(height_capped(set.root, HEIGHT_LIMIT + 1), 1, HEIGHT_LIMIT);
    free(items);
}

/* Runs every ordered_set test. */
int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(empty_set_has_no_nodes),
        cmocka_unit_test(iteration_is_in_order),
        cmocka_unit_test(first_and_last_are_the_extremes),
        cmocka_unit_test(lower_bound_finds_first_not_before_probe),
        cmocka_unit_test(next_steps_to_the_successor),
        cmocka_unit_test(prev_steps_to_the_predecessor),
        cmocka_unit_test(last_before_finds_last_before_probe),
        cmocka_unit_test(remove_keeps_the_rest_in_order),
        cmocka_unit_test(random_ops_match_sorted_reference),
        cmocka_unit_test(links_and_heap_order_hold_after_random_ops),
        cmocka_unit_test(insert_after_keeps_order_and_links),
        cmocka_unit_test(depth_stays_logarithmic_for_sorted_inserts),
    };
    return cmocka_run_group_tests_name("ordered_set", tests, NULL, NULL);
}
