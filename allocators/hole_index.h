/* vrambench — an index of holes: the free blocks of a pool's ranges that a
 * physical handle starts in (stitch.c), kept up to date as blocks change,
 * in the orders `stitch` chooses holes by.
 *
 * stitch takes memory from holes in two ways: moves unmap the whole
 * handles of holes, lowest address first (reclaim_holes); stitched ranges
 * map again the handles of the holes picked by most whole bytes, then the
 * best fit (pick_holes). Both once walked every block of the pool (or
 * sorted every free block) on each growth: time quadratic in the live
 * blocks. The index holds only the holes, each under the figures it had
 * when noted (a key must not change while it is in an ordered set), so a
 * growth looks at the holes it takes and a few more.
 *
 * The index does not watch blocks: its owner notes each hole it makes or
 * changes (vb_hole_index_put) and forgets the addresses a change leaves
 * behind (vb_hole_index_forget). vb_hole_index_pick repeats the selection
 * of the sort it replaces, ties and all (vb_hole_pick_sorted, which the
 * unit tests hold it to).
 *
 * Internal to allocators/: stitch.c uses it.
 */
#ifndef VB_HOLE_INDEX_H
#define VB_HOLE_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "base/ordered_set.h"
#include "base/status.h"

struct vb_cc_block;

/* What a hole offers, as noted: it starts at `addr`; from the first handle
 * start inside it to its end are `piece` bytes (> 0), of which `whole` are
 * whole handles. */
typedef struct vb_hole_figures {
    uint64_t addr;
    uint64_t whole;
    uint64_t piece;
    struct vb_cc_block *block; /* the free block (the owner's) */
} vb_hole_figures;

/* A hole in the index. */
typedef struct vb_hole {
    vb_hole_figures figures;
    vb_oset_node by_addr;         /* every hole, by address */
    vb_oset_node movable;         /* those with whole handles (whole > 0), by address */
    vb_oset_node by_whole;        /* ranked indexes: most whole bytes first, then lowest address */
    vb_oset_node by_fit;          /* ranked indexes: fewest piece bytes first, then by_whole's order */
    int moved;                    /* during a pick: taken, or moved from where it sorts */
    struct vb_hole *next_spare;
} vb_hole;

/* The holes of one pool. */
typedef struct vb_hole_index {
    vb_ordered_set by_addr, movable, by_whole, by_fit;
    int ranked;                   /* keeps by_whole and by_fit (the pool stitched ranges pick from) */
    uint64_t whole;               /* whole bytes, all holes together */
    vb_hole *spares;              /* recycled entries */
} vb_hole_index;

/* A pick's choice: the hole and the bytes taken from its first handle start. */
typedef struct vb_hole_choice {
    vb_hole_figures hole;
    uint64_t bytes;
} vb_hole_choice;

/* The mappings a stitched range spends on `bytes` of `hole` from its first
 * handle start (stitch: one per handle touched). */
typedef size_t (*vb_hole_maps)(void *context, const vb_hole_figures *hole, uint64_t bytes);

/* An empty index; `ranked` keeps the orders vb_hole_index_pick needs. */
void vb_hole_index_init(vb_hole_index *index, int ranked);

/* Empties the index (its entries kept for reuse). */
void vb_hole_index_clear(vb_hole_index *index);

/* Empties the index and frees every entry. */
void vb_hole_index_free(vb_hole_index *index);

/* Notes a hole, replacing any noted at its address; VB_ERR_HOST_OOM when
 * host memory runs out for it (the index then lacks it). */
vb_status vb_hole_index_put(vb_hole_index *index, const vb_hole_figures *hole);

/* Forgets every hole noted at an address in [lo, hi). */
void vb_hole_index_forget(vb_hole_index *index, uint64_t lo, uint64_t hi);

/* The hole noted at `addr`, or NULL. */
vb_hole *vb_hole_index_at(const vb_hole_index *index, uint64_t addr);

/* The first hole with whole handles at `addr` or after, or NULL. */
vb_hole *vb_hole_index_movable_from(const vb_hole_index *index, uint64_t addr);

/* The first hole at `addr` or after, or NULL (every hole, in address order). */
vb_hole *vb_hole_index_from(const vb_hole_index *index, uint64_t addr);

/* The next hole after `hole` in address order, or NULL. */
vb_hole *vb_hole_index_next(const vb_hole_index *index, const vb_hole *hole);

/* Picks holes for `size` bytes, as vb_hole_pick_sorted does over every
 * hole of a ranked index: into *out (malloc'd, *count of them, in the
 * order they are mapped). 0 when it took at most `max_maps` mappings; -1
 * when not, or when host memory ran out (nothing picked). */
int vb_hole_index_pick(vb_hole_index *index, uint64_t size, size_t max_maps, vb_hole_maps maps, void *context,
                       vb_hole_choice **out, size_t *count);

/* The selection itself, over `holes` (count of them, reordered): sorted
 * by most whole bytes, the lowest address first among equals; then, while
 * no hole offers all that is still needed, the whole handles of the hole
 * at the next place; else the hole offering it with the fewest piece
 * bytes (the first such place among equals), only the bytes needed; each
 * hole taken swaps places with the one at the next place. 0 / -1 and *out
 * as vb_hole_index_pick. */
int vb_hole_pick_sorted(vb_hole_figures *holes, size_t count, uint64_t size, size_t max_maps, vb_hole_maps maps,
                        void *context, vb_hole_choice **out, size_t *out_count);

#endif
