/* vrambench — ids to values: a window array for ids that come in order,
 * a hash map for the rest (see id_map.h). */
#include "id_map.h"

#include <stdlib.h>
#include <string.h>

/* The first window's slots. */
#define FIRST_CAPACITY 1024
/* A window at least 1/GROW_DENSITY held grows to take an id just past its
 * end; a sparser one slides forward instead. */
#define GROW_DENSITY 4

/* The id whose slot `slot` is in the window (base's own residue first). */
static uint64_t id_at(const vb_id_map *map, size_t slot)
{
    return map->base + ((slot - (size_t)map->base) & (map->capacity - 1));
}

/* Sets `capacity` empty slots, the old window's ids placed again; 0, or
 * -1 when host memory runs out (the window unchanged). */
static int resize(vb_id_map *map, size_t capacity)
{
    uint64_t *values = malloc(capacity * sizeof *values);
    uint64_t *held = calloc(capacity / 64, sizeof *held);
    if (!values || !held) {
        free(values);
        free(held);
        return -1;
    }
    /* By words of 64 slots (capacities are multiples of 64): a word's ids
     * follow one another, so they move together to a word of the new
     * window, all but the word where the ids wrap round to the window's
     * start (base's slot inside it), moved slot by slot. Slot by slot
     * throughout, a trace's growing window cost more than the rest of
     * its look-ups. */
    size_t wrap = vb_id_map_slot_of(map, map->base);
    for (size_t word = 0; word < map->capacity / 64; word++) {
        if (!map->held[word]) continue;
        if (wrap % 64 && wrap / 64 == word) {
            for (size_t slot = word * 64; slot < word * 64 + 64; slot++) {
                if (!vb_id_map_held(map, slot)) continue;
                size_t to = (size_t)id_at(map, slot) & (capacity - 1);
                values[to] = map->values[slot];
                held[to / 64] |= 1ULL << (to % 64);
            }
            continue;
        }
        size_t to = (size_t)id_at(map, word * 64) & (capacity - 1);
        held[to / 64] = map->held[word];
        memcpy(&values[to], &map->values[word * 64], 64 * sizeof *values);
    }
    free(map->values);
    free(map->held);
    map->values = values;
    map->held = held;
    map->capacity = capacity;
    return 0;
}

/* Keeps `id` in the hash map beside the window; where its value is. */
static uint64_t *outside_slot(vb_id_map *map, uint64_t id, int *added)
{
    map->outside.sparse = 1; /* looked up on every insert and removal of its ids */
    uint64_t *value = vb_addr_map_slot(&map->outside, id + 1, added);
    if (!value || !*added) return value;
    if (map->outside.count == 1 || id < map->outside_low) map->outside_low = id;
    if (map->outside.count == 1 || id > map->outside_high) map->outside_high = id;
    return value;
}

/* 1 when the hash map may hold `id` (a cheap test before a look-up). */
static int outside_may_hold(const vb_id_map *map, uint64_t id)
{
    return map->outside.count && id >= map->outside_low && id <= map->outside_high;
}

/* Moves the window forward to start at `base`: the ids it leaves behind
 * go to the hash map. 0, or -1 when host memory runs out (the ids moved
 * so far are in the hash map, the window has not moved). */
static int slide(vb_id_map *map, uint64_t base)
{
    uint64_t end = base - map->base < map->capacity ? base : map->base + map->capacity;
    for (uint64_t id = map->base; id < end; id++) {
        size_t slot = vb_id_map_slot_of(map, id);
        if (!vb_id_map_held(map, slot)) continue;
        int added;
        uint64_t *value = outside_slot(map, id, &added);
        if (!value) return -1;
        *value = map->values[slot];
        map->held[slot / 64] &= ~(1ULL << (slot % 64));
        map->window_count--;
    }
    map->base = base;
    return 0;
}

/* For an id out of the window's range: moves the window to it when the
 * window is empty (made on first use), grows or slides it when the id is
 * just past its end, else leaves it (the id goes to the hash map). 0, or
 * -1 when host memory runs out. */
static int make_room(vb_id_map *map, uint64_t id)
{
    if (map->window_count == 0) {
        if (!map->capacity && resize(map, FIRST_CAPACITY) != 0) return -1;
        map->base = id;
        return 0;
    }
    if (id < map->base || id - map->base >= 2 * (uint64_t)map->capacity) return 0;
    if (map->window_count * GROW_DENSITY >= map->capacity) return resize(map, map->capacity * 2);
    return slide(map, id + 1 - map->capacity);
}

/* vb_id_map_slot (id_map.h) for the ids its inline part leaves. */
uint64_t *vb_id_map_slot_rest(vb_id_map *map, uint64_t id, int *added)
{
    int is_new = 0;
    if (added) *added = 0;
    if (id == UINT64_MAX) return NULL;
    if (!vb_id_map_in_window(map, id) && make_room(map, id) != 0) return NULL;
    if (!vb_id_map_in_window(map, id)) {
        uint64_t *value = outside_slot(map, id, &is_new);
        if (added) *added = is_new;
        return value;
    }
    size_t slot = vb_id_map_slot_of(map, id);
    if (vb_id_map_held(map, slot)) return &map->values[slot];
    uint64_t value = 0;
    /* Held in the hash map since before the window reached it: moved in. */
    int moved = outside_may_hold(map, id) && vb_addr_map_remove(&map->outside, id + 1, &value);
    map->values[slot] = value;
    map->held[slot / 64] |= 1ULL << (slot % 64);
    map->window_count++;
    if (added) *added = !moved;
    return &map->values[slot];
}

/* vb_id_map_get and vb_id_map_remove (id_map.h) once the window has not
 * got `id`. */
int vb_id_map_get_outside(const vb_id_map *map, uint64_t id, uint64_t *value)
{
    return map->outside.count && id != UINT64_MAX && vb_addr_map_get(&map->outside, id + 1, value);
}

int vb_id_map_remove_outside(vb_id_map *map, uint64_t id, uint64_t *value)
{
    return map->outside.count && id != UINT64_MAX && vb_addr_map_remove(&map->outside, id + 1, value);
}

size_t vb_id_map_count(const vb_id_map *map)
{
    return map->window_count + map->outside.count;
}

/* vb_id_map_each's walk over the hash map: its keys are id + 1. */
typedef struct outside_walk {
    void (*visit)(void *context, uint64_t id, uint64_t value);
    void *context;
} outside_walk;

static void visit_outside(void *context, uint64_t key, uint64_t value)
{
    const outside_walk *walk = context;
    walk->visit(walk->context, key - 1, value);
}

/* The window's ids by slot, then the hash map's by id (its own order is
 * seeded: see addr_map.h). */
void vb_id_map_each(const vb_id_map *map, void (*visit)(void *context, uint64_t id, uint64_t value), void *context)
{
    for (size_t slot = 0; slot < map->capacity; slot++)
        if (vb_id_map_held(map, slot)) visit(context, id_at(map, slot), map->values[slot]);
    outside_walk walk = {visit, context};
    vb_addr_map_each_sorted(&map->outside, visit_outside, &walk);
}

void vb_id_map_change_values(vb_id_map *map, uint64_t (*change)(void *context, uint64_t value), void *context)
{
    for (size_t slot = 0; slot < map->capacity; slot++)
        if (vb_id_map_held(map, slot)) map->values[slot] = change(context, map->values[slot]);
    vb_addr_map_change_values(&map->outside, change, context);
}

void vb_id_map_clear(vb_id_map *map)
{
    free(map->values);
    free(map->held);
    vb_addr_map_clear(&map->outside);
    *map = (vb_id_map)VB_ID_MAP_INIT;
}
