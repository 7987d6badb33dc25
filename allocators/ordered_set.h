/* vrambench — an intrusive ordered set (a treap): O(log n) expected insert,
 * remove, lower bound and successor, with the order given by a comparison
 * function. Allocators embed a vb_oset_node in their block struct and find
 * best fits with vb_oset_lower_bound on a probe key. */
#ifndef VB_ORDERED_SET_H
#define VB_ORDERED_SET_H

#include <stddef.h>
#include <stdint.h>

typedef struct vb_oset_node {
    struct vb_oset_node *left, *right;
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

/* The first node after `node` in order, or NULL. */
vb_oset_node *vb_oset_next(const vb_ordered_set *set, const vb_oset_node *node);

/* The first and last nodes, or NULL when empty. */
vb_oset_node *vb_oset_first(const vb_ordered_set *set);
vb_oset_node *vb_oset_last(const vb_ordered_set *set);

/* The struct that embeds `node` as `member`. */
#define VB_OSET_ENTRY(node, type, member) ((type *)((char *)(node) - offsetof(type, member)))

#endif
