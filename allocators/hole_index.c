/* vrambench — the index of holes (see hole_index.h). */
#include "hole_index.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Orders                                                                     */
/* ------------------------------------------------------------------------ */

/* <0, 0, >0 as a is below, equal to, above b. */
static int compare_u64(uint64_t a, uint64_t b)
{
    return (a > b) - (a < b);
}

/* The place a hole sorts at in a pick: most whole bytes first, the lowest
 * address first among equals (addresses are unique: a total order). */
static int compare_places(const vb_hole_figures *x, const vb_hole_figures *y)
{
    if (x->whole != y->whole) return x->whole > y->whole ? -1 : 1;
    return compare_u64(x->addr, y->addr);
}

/* The hole whose by_addr (movable, by_whole, by_fit) node this is; NULL for NULL. */
static vb_hole *hole_by_addr(const vb_oset_node *node)
{
    return node ? VB_OSET_ENTRY(node, vb_hole, by_addr) : NULL;
}

static vb_hole *hole_movable(const vb_oset_node *node)
{
    return node ? VB_OSET_ENTRY(node, vb_hole, movable) : NULL;
}

static vb_hole *hole_by_whole(const vb_oset_node *node)
{
    return node ? VB_OSET_ENTRY(node, vb_hole, by_whole) : NULL;
}

static vb_hole *hole_by_fit(const vb_oset_node *node)
{
    return node ? VB_OSET_ENTRY(node, vb_hole, by_fit) : NULL;
}

/* by_addr's and movable's order: the address (no two holes share one). */
static int compare_by_addr(const vb_oset_node *a, const vb_oset_node *b)
{
    return compare_u64(hole_by_addr(a)->figures.addr, hole_by_addr(b)->figures.addr);
}

static int compare_movable(const vb_oset_node *a, const vb_oset_node *b)
{
    return compare_u64(hole_movable(a)->figures.addr, hole_movable(b)->figures.addr);
}

/* by_whole's order: the place. */
static int compare_by_whole(const vb_oset_node *a, const vb_oset_node *b)
{
    return compare_places(&hole_by_whole(a)->figures, &hole_by_whole(b)->figures);
}

/* Fewest piece bytes first, then the place: the best fit's order. */
static int compare_by_fit(const vb_oset_node *a, const vb_oset_node *b)
{
    const vb_hole_figures *x = &hole_by_fit(a)->figures, *y = &hole_by_fit(b)->figures;
    if (x->piece != y->piece) return compare_u64(x->piece, y->piece);
    return compare_places(x, y);
}

/* ------------------------------------------------------------------------ */
/* Holes in and out                                                           */
/* ------------------------------------------------------------------------ */

void vb_hole_index_init(vb_hole_index *index, int ranked)
{
    vb_oset_init(&index->by_addr, compare_by_addr);
    vb_oset_init(&index->movable, compare_movable);
    vb_oset_init(&index->by_whole, compare_by_whole);
    vb_oset_init(&index->by_fit, compare_by_fit);
    index->ranked = ranked;
    index->whole = 0;
    index->spares = NULL;
}

void vb_hole_index_clear(vb_hole_index *index)
{
    for (vb_oset_node *node = vb_oset_first(&index->by_addr); node; node = vb_oset_next(&index->by_addr, node)) {
        vb_hole *hole = hole_by_addr(node);
        hole->next_spare = index->spares;
        index->spares = hole;
    }
    vb_hole *spares = index->spares;
    vb_hole_index_init(index, index->ranked);
    index->spares = spares;
}

void vb_hole_index_free(vb_hole_index *index)
{
    vb_hole_index_clear(index);
    while (index->spares) {
        vb_hole *next = index->spares->next_spare;
        free(index->spares);
        index->spares = next;
    }
}

/* Takes `hole` out of every set it is in and keeps its struct for reuse. */
static void remove_hole(vb_hole_index *index, vb_hole *hole)
{
    vb_oset_remove(&index->by_addr, &hole->by_addr);
    if (hole->figures.whole) vb_oset_remove(&index->movable, &hole->movable);
    if (index->ranked) {
        vb_oset_remove(&index->by_whole, &hole->by_whole);
        vb_oset_remove(&index->by_fit, &hole->by_fit);
    }
    index->whole -= hole->figures.whole;
    hole->next_spare = index->spares;
    index->spares = hole;
}

vb_hole *vb_hole_index_from(const vb_hole_index *index, uint64_t addr)
{
    vb_hole probe = {.figures.addr = addr};
    return hole_by_addr(vb_oset_lower_bound_by(&index->by_addr, &probe.by_addr, compare_by_addr));
}

vb_hole *vb_hole_index_next(const vb_hole_index *index, const vb_hole *hole)
{
    return hole_by_addr(vb_oset_next(&index->by_addr, &hole->by_addr));
}

vb_hole *vb_hole_index_at(const vb_hole_index *index, uint64_t addr)
{
    vb_hole *hole = vb_hole_index_from(index, addr);
    return hole && hole->figures.addr == addr ? hole : NULL;
}

vb_hole *vb_hole_index_movable_from(const vb_hole_index *index, uint64_t addr)
{
    vb_hole probe = {.figures.addr = addr};
    return hole_movable(vb_oset_lower_bound_by(&index->movable, &probe.movable, compare_movable));
}

vb_status vb_hole_index_put(vb_hole_index *index, const vb_hole_figures *figures)
{
    vb_hole *old = vb_hole_index_at(index, figures->addr);
    if (old) remove_hole(index, old);
    vb_hole *hole = index->spares;
    if (hole) index->spares = hole->next_spare;
    else if (!(hole = malloc(sizeof *hole))) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    memset(hole, 0, sizeof *hole);
    hole->figures = *figures;
    vb_oset_insert_by(&index->by_addr, &hole->by_addr, compare_by_addr);
    if (figures->whole) vb_oset_insert_by(&index->movable, &hole->movable, compare_movable);
    if (index->ranked) {
        vb_oset_insert_by(&index->by_whole, &hole->by_whole, compare_by_whole);
        vb_oset_insert_by(&index->by_fit, &hole->by_fit, compare_by_fit);
    }
    index->whole += figures->whole;
    return VB_OK;
}

void vb_hole_index_forget(vb_hole_index *index, uint64_t lo, uint64_t hi)
{
    vb_hole *hole = vb_hole_index_from(index, lo);
    while (hole && hole->figures.addr < hi) {
        vb_hole *next = vb_hole_index_next(index, hole);
        remove_hole(index, hole);
        hole = next;
    }
}

/* ------------------------------------------------------------------------ */
/* Picking                                                                    */
/* ------------------------------------------------------------------------ */

/* qsort's form of compare_places. */
static int by_place(const void *a, const void *b)
{
    return compare_places(a, b);
}

int vb_hole_pick_sorted(vb_hole_figures *holes, size_t count, uint64_t size, size_t max_maps, vb_hole_maps maps,
                        void *context, vb_hole_choice **out, size_t *out_count)
{
    *out = NULL;
    *out_count = 0;
    if (count == 0) return -1;
    vb_hole_choice *chosen = malloc(count * sizeof *chosen);
    if (!chosen) return -1;
    qsort(holes, count, sizeof *holes, by_place);
    uint64_t needed = size;
    size_t taken_maps = 0, n = 0; /* places [0, n) are taken, in order */
    while (needed > 0 && taken_maps <= max_maps) {
        size_t last = SIZE_MAX;
        for (size_t i = n; i < count; i++)
            if (holes[i].piece >= needed && (last == SIZE_MAX || holes[i].piece < holes[last].piece)) last = i;
        size_t take = last != SIZE_MAX ? last : n;
        if (take >= count || (last == SIZE_MAX && holes[take].whole == 0)) break;
        vb_hole_figures hole = holes[take];
        holes[take] = holes[n];
        holes[n] = hole;
        chosen[n] = (vb_hole_choice){hole, last != SIZE_MAX ? needed : hole.whole};
        taken_maps += maps(context, &hole, chosen[n].bytes);
        needed -= chosen[n++].bytes;
    }
    if (needed > 0 || taken_maps > max_maps) {
        free(chosen);
        return -1;
    }
    *out = chosen;
    *out_count = n;
    return 0;
}

/* A place after the pick's next one whose hole is not the one sorting
 * there: a hole taken from it left the hole of the next place there. */
typedef struct swapped_place {
    vb_hole *place;               /* the hole that sorts at the place */
    vb_hole *hole;                /* the hole there now */
} swapped_place;

/* What a pick keeps while it runs: the choices so far, the swapped places
 * (after the next place) and the holes moved from where they sort. */
typedef struct pick_state {
    vb_hole_choice *chosen;
    size_t chosen_count, chosen_capacity;
    swapped_place *swaps;
    size_t swap_count, swap_capacity;
    vb_hole **moved;
    size_t moved_count, moved_capacity;
} pick_state;

/* Makes room for one more of `count` items of `size` bytes in *items; 0,
 * or -1 when host memory runs out. */
static int room_for_one(void **items, size_t *capacity, size_t count, size_t size)
{
    if (count < *capacity) return 0;
    size_t grown_capacity = *capacity ? 2 * *capacity : 16;
    void *grown = realloc(*items, grown_capacity * size);
    if (!grown) return -1;
    *items = grown;
    *capacity = grown_capacity;
    return 0;
}

/* Marks `hole` moved (once); 0, or -1 when host memory runs out. */
static int mark_moved(pick_state *state, vb_hole *hole)
{
    if (hole->moved) return 0;
    if (room_for_one((void **)&state->moved, &state->moved_capacity, state->moved_count, sizeof *state->moved) != 0)
        return -1;
    hole->moved = 1;
    state->moved[state->moved_count++] = hole;
    return 0;
}

/* The swapped place whose sorting hole is `place`, or SIZE_MAX. */
static size_t swap_at(const pick_state *state, const vb_hole *place)
{
    for (size_t i = 0; i < state->swap_count; i++)
        if (state->swaps[i].place == place) return i;
    return SIZE_MAX;
}

/* The first hole of the best fit's order offering `needed` bytes that is
 * still where it sorts (not moved), or NULL. */
static vb_hole *best_unmoved(const vb_hole_index *index, uint64_t needed)
{
    /* The most whole bytes there can be: the probe sorts before every hole of `needed` piece bytes. */
    vb_hole probe = {.figures = {.addr = 0, .whole = UINT64_MAX, .piece = needed}};
    vb_oset_node *node = vb_oset_lower_bound_by(&index->by_fit, &probe.by_fit, compare_by_fit);
    while (node && hole_by_fit(node)->moved) node = vb_oset_next(&index->by_fit, node);
    return hole_by_fit(node);
}

/* vb_hole_pick_sorted without the sort: the sorted order is the index's
 * by_whole, and the pick's swaps are few (one per hole taken), so a place
 * holds the hole sorting there unless a swap is recorded for it. The best
 * fit is the first unmoved hole of by_fit's order from `needed` on, or a
 * swapped place's hole when that offers fewer piece bytes or, as many, sits
 * at an earlier place. */
int vb_hole_index_pick(vb_hole_index *index, uint64_t size, size_t max_maps, vb_hole_maps maps, void *context,
                       vb_hole_choice **out, size_t *count)
{
    *out = NULL;
    *count = 0;
    if (index->by_addr.count == 0) return -1;
    pick_state state = {0};
    vb_hole *next_place = hole_by_whole(vb_oset_first(&index->by_whole)); /* the hole sorting at place n */
    uint64_t needed = size;
    size_t taken_maps = 0;
    int failed = 0;
    while (needed > 0 && taken_maps <= max_maps) {
        size_t next_swap = next_place ? swap_at(&state, next_place) : SIZE_MAX;
        vb_hole *next_hole = next_swap != SIZE_MAX ? state.swaps[next_swap].hole : next_place;
        vb_hole *fit = best_unmoved(index, needed), *fit_place = fit;
        size_t fit_swap = SIZE_MAX;
        for (size_t i = 0; i < state.swap_count; i++) {
            const vb_hole *hole = state.swaps[i].hole;
            if (hole->figures.piece < needed) continue;
            if (!fit || hole->figures.piece < fit->figures.piece ||
                (hole->figures.piece == fit->figures.piece &&
                 compare_places(&state.swaps[i].place->figures, &fit_place->figures) < 0)) {
                fit = state.swaps[i].hole;
                fit_place = state.swaps[i].place;
                fit_swap = i;
            }
        }
        if (!fit && (!next_hole || next_hole->figures.whole == 0)) break;
        vb_hole *taken = fit ? fit : next_hole;
        if (taken != next_hole) {
            /* The hole at the next place goes to the place of the one taken. */
            if (fit_swap != SIZE_MAX) {
                state.swaps[fit_swap].hole = next_hole;
            } else if (room_for_one((void **)&state.swaps, &state.swap_capacity, state.swap_count,
                                    sizeof *state.swaps) == 0) {
                state.swaps[state.swap_count++] = (swapped_place){fit_place, next_hole};
            } else {
                failed = 1;
                break;
            }
            if (mark_moved(&state, next_hole) != 0) {
                failed = 1;
                break;
            }
        }
        /* The next place is taken: no swap is recorded for it any more. */
        if (next_swap != SIZE_MAX) state.swaps[next_swap] = state.swaps[--state.swap_count];
        if (mark_moved(&state, taken) != 0 ||
            room_for_one((void **)&state.chosen, &state.chosen_capacity, state.chosen_count, sizeof *state.chosen) != 0) {
            failed = 1;
            break;
        }
        vb_hole_choice *choice = &state.chosen[state.chosen_count++];
        *choice = (vb_hole_choice){taken->figures, fit ? needed : taken->figures.whole};
        taken_maps += maps(context, &choice->hole, choice->bytes);
        needed -= choice->bytes;
        next_place = next_place ? hole_by_whole(vb_oset_next(&index->by_whole, &next_place->by_whole)) : NULL;
    }
    for (size_t i = 0; i < state.moved_count; i++) state.moved[i]->moved = 0;
    free(state.moved);
    free(state.swaps);
    if (failed || needed > 0 || taken_maps > max_maps) {
        free(state.chosen);
        return -1;
    }
    *out = state.chosen;
    *count = state.chosen_count;
    return 0;
}
