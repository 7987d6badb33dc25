/* vrambench — treap: a binary search tree by key that is a heap by random
 * priority, which keeps its depth logarithmic in expectation. */
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

/* Splits `tree` into nodes before `key` (*less) and the rest (*rest). */
static void split(vb_oset_node *tree, const vb_oset_node *key, vb_oset_compare compare, vb_oset_node **less,
                  vb_oset_node **rest)
{
    if (!tree) {
        *less = *rest = NULL;
    } else if (compare(tree, key) < 0) {
        split(tree->right, key, compare, &tree->right, rest);
        *less = tree;
    } else {
        split(tree->left, key, compare, less, &tree->left);
        *rest = tree;
    }
}

/* Joins two treaps where every node of `left` sorts before every node of `right`. */
static vb_oset_node *merge(vb_oset_node *left, vb_oset_node *right)
{
    if (!left) return right;
    if (!right) return left;
    if (left->priority > right->priority) {
        left->right = merge(left->right, right);
        return left;
    }
    right->left = merge(left, right->left);
    return right;
}

void vb_oset_insert(vb_ordered_set *set, vb_oset_node *node)
{
    node->priority = next_priority();
    node->left = node->right = NULL;
    /* Walk down while the existing nodes outrank the new one, then split there. */
    vb_oset_node **link = &set->root;
    while (*link && (*link)->priority > node->priority)
        link = set->compare(node, *link) < 0 ? &(*link)->left : &(*link)->right;
    split(*link, node, set->compare, &node->left, &node->right);
    *link = node;
    set->count++;
}

void vb_oset_remove(vb_ordered_set *set, vb_oset_node *node)
{
    vb_oset_node **link = &set->root;
    while (*link != node) {
        /* The node is in the set, so the walk reaches it. */
        link = set->compare(node, *link) < 0 ? &(*link)->left : &(*link)->right;
    }
    *link = merge(node->left, node->right);
    node->left = node->right = NULL;
    set->count--;
}

vb_oset_node *vb_oset_lower_bound(const vb_ordered_set *set, const vb_oset_node *probe)
{
    vb_oset_node *best = NULL, *at = set->root;
    while (at) {
        if (set->compare(at, probe) < 0) {
            at = at->right;
        } else {
            best = at;
            at = at->left;
        }
    }
    return best;
}

vb_oset_node *vb_oset_next(const vb_ordered_set *set, const vb_oset_node *node)
{
    vb_oset_node *best = NULL, *at = set->root;
    while (at) {
        if (set->compare(at, node) <= 0) {
            at = at->right;
        } else {
            best = at;
            at = at->left;
        }
    }
    return best;
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
