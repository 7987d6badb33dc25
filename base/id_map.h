/* vrambench — a map from ids (any uint64 but the largest) to a uint64
 * value, for ids that mostly come in order (a trace's allocation ids:
 * gen-trace and torch2trace number them 0, 1, 2, ...).
 *
 * The ids of a window [base, base + capacity) are kept in an array, one
 * slot per id (the id modulo the capacity), so that looking one up costs
 * one read of an array a few bytes per id wide, where a hash map costs a
 * read of a table four times the live ids wide (a cache miss, once the
 * table outgrows the cache). The window follows the ids as they come: an
 * id just past its end makes it grow when at least a quarter of its slots
 * are held, else slide, and the ids it leaves behind (and ids too far
 * from it) are kept in a hash map (vb_addr_map) beside it. Memory stays a
 * few words per id held, whatever the ids: a window grows only while a
 * quarter of it is held, so it takes at most 8 slots of 8 bytes (and a
 * bit) per id it held then, no more than a sparse vb_addr_map's 4 to 8
 * entries of 16 bytes; like vb_addr_map, it never shrinks. */
#ifndef VB_ID_MAP_H
#define VB_ID_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "addr_map.h"

typedef struct vb_id_map {
    uint64_t *values;       /* the window's values, at id % capacity */
    uint64_t *held;         /* a bit per window slot: 1 when it holds its id */
    size_t capacity;        /* window slots: a power of two; 0 before the first insert */
    uint64_t base;          /* the window covers ids [base, base + capacity) */
    size_t window_count;    /* ids held in the window */
    vb_addr_map outside;    /* id + 1 -> value, for ids held outside the window */
    uint64_t outside_low;   /* while `outside` holds any: no id it holds is below this ... */
    uint64_t outside_high;  /* ... or above this (the window checks it only in between) */
} vb_id_map;

/* An empty map needs no set-up beyond zero-initialisation. */
#define VB_ID_MAP_INIT {0}

/* Finds `id`, or inserts it with value 0, and returns where its value is
 * kept (valid until the map next changes); *added (may be NULL) says
 * whether it was inserted. NULL when host memory runs out or `id` is
 * UINT64_MAX. */
static inline uint64_t *vb_id_map_slot(vb_id_map *map, uint64_t id, int *added);

/* 1 and the value of `id` in *value if it is present, else 0. */
static inline int vb_id_map_get(const vb_id_map *map, uint64_t id, uint64_t *value);

/* Removes `id`; 1 if it was present (its value in *value, may be NULL), else 0. */
static inline int vb_id_map_remove(vb_id_map *map, uint64_t id, uint64_t *value);

/* The ids held. */
size_t vb_id_map_count(const vb_id_map *map);

/* Calls `visit` for every id and its value, in an order that depends only
 * on what the map was given (not on the hash's seed). The map must not
 * change meanwhile. */
void vb_id_map_each(const vb_id_map *map, void (*visit)(void *context, uint64_t id, uint64_t value), void *context);

/* Replaces the value of every id held by what `change` makes of it. */
void vb_id_map_change_values(vb_id_map *map, uint64_t (*change)(void *context, uint64_t value), void *context);

/* Frees everything; the map is empty and usable again. */
void vb_id_map_clear(vb_id_map *map);

/* ------------------------------------------------------------------------ */
/* The common cases inline: a trace reader does one insert, one look-up and
 * one removal per allocation, each a few instructions when the id is in
 * the window, where a call into id_map.c cost more than the work. The
 * rest is in id_map.c.                                                      */
/* ------------------------------------------------------------------------ */

/* vb_id_map_slot, vb_id_map_get, vb_id_map_remove for what the inline
 * parts leave: ids out of the window, ids the hash map may hold. */
uint64_t *vb_id_map_slot_rest(vb_id_map *map, uint64_t id, int *added);
int vb_id_map_get_outside(const vb_id_map *map, uint64_t id, uint64_t *value);
int vb_id_map_remove_outside(vb_id_map *map, uint64_t id, uint64_t *value);

/* 1 when `id` is in the window's range (an empty window, capacity 0, has none). */
static inline int vb_id_map_in_window(const vb_id_map *map, uint64_t id)
{
    return id - map->base < map->capacity;
}

/* The window slot of `id` (in the window's range). */
static inline size_t vb_id_map_slot_of(const vb_id_map *map, uint64_t id)
{
    return (size_t)id & (map->capacity - 1);
}

/* 1 when window slot `slot` holds an id. */
static inline int vb_id_map_held(const vb_id_map *map, size_t slot)
{
    return (int)(map->held[slot / 64] >> (slot % 64) & 1);
}

static inline uint64_t *vb_id_map_slot(vb_id_map *map, uint64_t id, int *added)
{
    if (vb_id_map_in_window(map, id) && id != UINT64_MAX) {
        size_t slot = vb_id_map_slot_of(map, id);
        uint64_t bit = 1ULL << (slot % 64), *held = &map->held[slot / 64];
        if (*held & bit) {
            if (added) *added = 0;
            return &map->values[slot];
        }
        /* A new id the hash map cannot hold (it holds none in this range). */
        if (!map->outside.count || id < map->outside_low || id > map->outside_high) {
            *held |= bit;
            map->values[slot] = 0;
            map->window_count++;
            if (added) *added = 1;
            return &map->values[slot];
        }
    }
    return vb_id_map_slot_rest(map, id, added);
}

static inline int vb_id_map_get(const vb_id_map *map, uint64_t id, uint64_t *value)
{
    if (vb_id_map_in_window(map, id)) {
        size_t slot = vb_id_map_slot_of(map, id);
        if (vb_id_map_held(map, slot)) {
            *value = map->values[slot];
            return 1;
        }
    }
    return map->outside.count && vb_id_map_get_outside(map, id, value);
}

static inline int vb_id_map_remove(vb_id_map *map, uint64_t id, uint64_t *value)
{
    if (vb_id_map_in_window(map, id)) {
        size_t slot = vb_id_map_slot_of(map, id);
        uint64_t bit = 1ULL << (slot % 64), *held = &map->held[slot / 64];
        if (*held & bit) {
            if (value) *value = map->values[slot];
            *held &= ~bit;
            map->window_count--;
            return 1;
        }
    }
    return map->outside.count && vb_id_map_remove_outside(map, id, value);
}

#endif
