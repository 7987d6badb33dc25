/* vrambench — treap: a binary search tree by key that is a heap by random
 * priority, which keeps its depth logarithmic in expectation. Parent links
 * make removal and stepping compare-free; everything is iterative. */
#include "ordered_set.h"

/* A pseudo-random priority from a per-process counter (splitmix64): the
 * tree's shape varies with it, the order of its nodes never does. */
static uint64_t next_priority(void)
{
    static uint64_t state = 0x9e3779b97f4a7c15ULL;
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void vb_oset_init(vb_ordered_set *set, vb_oset_compare compare)
{
    set->root = NULL;
    set->compare = compare;
    set->count = 0;
}

/* The link that points at `node`: its parent's child field, or the root. */
static vb_oset_node **link_to(vb_ordered_set *set, const vb_oset_node *node)
{
    vb_oset_node *parent = node->parent;
    if (!parent) return &set->root;
    return parent->left == node ? &parent->left : &parent->right;
}

/* Lifts `node` above its parent, keeping the order (one rotation). */
static void rotate_up(vb_ordered_set *set, vb_oset_node *node)
{
    vb_oset_node *parent = node->parent;
    vb_oset_node **above = link_to(set, parent);
    if (parent->left == node) {
        parent->left = node->right;
        if (node->right) node->right->parent = parent;
        node->right = parent;
    } else {
        parent->right = node->left;
        if (node->left) node->left->parent = parent;
        node->left = parent;
    }
    node->parent = parent->parent;
    parent->parent = node;
    *above = node;
}

/* Rotations only move nodes up past lower priorities: expected fewer than
 * two per insert. */
void vb_oset_attach(vb_ordered_set *set, vb_oset_node *node, vb_oset_node *parent, vb_oset_node **link)
{
    node->left = node->right = NULL;
    node->parent = parent;
    node->priority = next_priority();
    *link = node;
    set->count++;
    while (node->parent && node->parent->priority < node->priority) rotate_up(set, node);
}

void vb_oset_insert(vb_ordered_set *set, vb_oset_node *node)
{
    vb_oset_insert_by(set, node, set->compare);
}

/* The new node goes where a walk down would have put it: as the right
 * child of its predecessor if that has none, else as the left child of its
 * successor, the leftmost node of that right subtree. When appending, the
 * predecessor is the last node and has no right child; the rotations that
 * follow only ever lift nodes off the right spine, so a run of appends
 * costs O(1) amortized each. */
void vb_oset_insert_after(vb_ordered_set *set, vb_oset_node *node, vb_oset_node *before)
{
    if (!before->right) {
        vb_oset_attach(set, node, before, &before->right);
        return;
    }
    vb_oset_node *after = before->right;
    while (after->left) after = after->left;
    vb_oset_attach(set, node, after, &after->left);
}

/* Joins two treaps, every node of `left` before every node of `right`, into
 * *link under `parent`: walks down the facing spines only (expected O(1)
 * nodes in a treap). */
static void merge_into(vb_oset_node **link, vb_oset_node *parent, vb_oset_node *left, vb_oset_node *right)
{
    while (left && right) {
        if (left->priority > right->priority) {
            *link = left;
            left->parent = parent;
            parent = left;
            link = &left->right;
            left = left->right;
        } else {
            *link = right;
            right->parent = parent;
            parent = right;
            link = &right->left;
            right = right->left;
        }
    }
    vb_oset_node *rest = left ? left : right;
    *link = rest;
    if (rest) rest->parent = parent;
}

void vb_oset_remove(vb_ordered_set *set, vb_oset_node *node)
{
    merge_into(link_to(set, node), node->parent, node->left, node->right);
    node->left = node->right = node->parent = NULL;
    set->count--;
}

vb_oset_node *vb_oset_lower_bound(const vb_ordered_set *set, const vb_oset_node *probe)
{
    return vb_oset_lower_bound_by(set, probe, set->compare);
}

vb_oset_node *vb_oset_last_before(const vb_ordered_set *set, const vb_oset_node *probe)
{
    vb_oset_node *best = NULL, *at = set->root;
    while (at) {
        if (set->compare(at, probe) < 0) {
            best = at;
            at = at->right;
        } else {
            at = at->left;
        }
    }
    return best;
}

/* The in-order successor: the leftmost node of the right subtree, else the
 * first ancestor reached from its left. */
vb_oset_node *vb_oset_next(const vb_ordered_set *set, const vb_oset_node *node)
{
    (void)set;
    if (node->right) {
        vb_oset_node *at = node->right;
        while (at->left) at = at->left;
        return at;
    }
    while (node->parent && node->parent->right == node) node = node->parent;
    return node->parent;
}

/* The mirror of vb_oset_next. */
vb_oset_node *vb_oset_prev(const vb_ordered_set *set, const vb_oset_node *node)
{
    (void)set;
    if (node->left) {
        vb_oset_node *at = node->left;
        while (at->right) at = at->right;
        return at;
    }
    while (node->parent && node->parent->left == node) node = node->parent;
    return node->parent;
}

vb_oset_node *vb_oset_first(const vb_ordered_set *set)
{
    vb_oset_node *at = set->root;
    while (at && at->left) at = at->left;
    return at;
}

vb_oset_node *vb_oset_last(const vb_ordered_set *set)
{
    vb_oset_node *at = set->root;
    while (at && at->right) at = at->right;
    return at;
}
