/* vrambench — an intrusive ordered set (a treap): O(log n) expected insert,
 * lower bound and find, O(1) expected remove and successor, with the order
 * given by a comparison function. Allocators embed a vb_oset_node in their
 * block struct and find best fits with vb_oset_lower_bound on a probe key.
 *
 * Nodes know their parent, so removing a node and stepping to its
 * neighbours compare nothing: only the walks down from the root (insert,
 * lower bound) call the comparison. Hot callers use the *_by variants,
 * inline here, with their comparison function named at the call, so the
 * compiler inlines it into the walk instead of calling through a pointer. */
#ifndef VB_ORDERED_SET_H
#define VB_ORDERED_SET_H

#include <stddef.h>
#include <stdint.h>

typedef struct vb_oset_node {
    struct vb_oset_node *left, *right, *parent;
    uint64_t priority;
} vb_oset_node;

/* <0, 0, >0 as a sorts before, equal to, after b. Nodes in one set must
 * never compare equal (break ties by address). */
typedef int (*vb_oset_compare)(const vb_oset_node *a, const vb_oset_node *b);

typedef struct vb_ordered_set {
    vb_oset_node *root;
    vb_oset_compare compare;
    size_t count;
} vb_ordered_set;

void vb_oset_init(vb_ordered_set *set, vb_oset_compare compare);

/* Inserts `node` (not in any set). */
void vb_oset_insert(vb_ordered_set *set, vb_oset_node *node);

/* Removes `node`, which must be in `set`. */
void vb_oset_remove(vb_ordered_set *set, vb_oset_node *node);

/* The first node not before `probe` (probe need not be in the set), or NULL. */
vb_oset_node *vb_oset_lower_bound(const vb_ordered_set *set, const vb_oset_node *probe);

/* The last node before `probe` (probe need not be in the set), or NULL. */
vb_oset_node *vb_oset_last_before(const vb_ordered_set *set, const vb_oset_node *probe);

/* The first node after / the last node before `node` (which is in `set`)
 * in order, or NULL. */
vb_oset_node *vb_oset_next(const vb_ordered_set *set, const vb_oset_node *node);
vb_oset_node *vb_oset_prev(const vb_ordered_set *set, const vb_oset_node *node);

/* The first and last nodes, or NULL when empty. */
vb_oset_node *vb_oset_first(const vb_ordered_set *set);
vb_oset_node *vb_oset_last(const vb_ordered_set *set);

/* The struct that embeds `node` as `member`. */
#define VB_OSET_ENTRY(node, type, member) ((type *)((char *)(node) - offsetof(type, member)))

/* Inserts `node` right after `before`, a node of the set that is the
 * last one sorting before it (the caller vouches for that), without a
 * comparison. Appending a sorted run this way (each node after the one
 * before) builds the set in O(1) amortized per node. */
void vb_oset_insert_after(vb_ordered_set *set, vb_oset_node *node, vb_oset_node *before);

/* ---- inline walks for hot callers (compare must be the set's order) ---- */

/* Links `node` as a new leaf at *link under `parent` (the place a walk down
 * by the set's order found) and restores the heap order by priority. */
void vb_oset_attach(vb_ordered_set *set, vb_oset_node *node, vb_oset_node *parent, vb_oset_node **link);

/* The inline walks prefetch both children of each node they pass: a
 * comparison's outcome is a coin toss the branch predictor often gets
 * wrong, and then the other child is already on its way from the cache. */

/* vb_oset_insert with the comparison inlined. */
static inline void vb_oset_insert_by(vb_ordered_set *set, vb_oset_node *node, vb_oset_compare compare)
{
    vb_oset_node *parent = NULL, **link = &set->root;
    while (*link) {
        parent = *link;
        __builtin_prefetch(parent->left);
        __builtin_prefetch(parent->right);
        link = compare(node, parent) < 0 ? &parent->left : &parent->right;
    }
    vb_oset_attach(set, node, parent, link);
}

/* vb_oset_lower_bound with the comparison inlined. */
static inline vb_oset_node *vb_oset_lower_bound_by(const vb_ordered_set *set, const vb_oset_node *probe,
                                                   vb_oset_compare compare)
{
    vb_oset_node *best = NULL, *at = set->root;
    while (at) {
        __builtin_prefetch(at->left);
        __builtin_prefetch(at->right);
        if (compare(at, probe) < 0) {
            at = at->right;
        } else {
            best = at;
            at = at->left;
        }
    }
    return best;
}

#endif
