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
uint64_t *vb_id_map_slot(vb_id_map *map, uint64_t id, int *added);

/* 1 and the value of `id` in *value if it is present, else 0. */
int vb_id_map_get(const vb_id_map *map, uint64_t id, uint64_t *value);

/* Asks for the cache line where the value of `id` is kept, when the window
 * holds it (a hint for a look-up to come: changes nothing). */
void vb_id_map_prefetch(const vb_id_map *map, uint64_t id);

/* Removes `id`; 1 if it was present (its value in *value, may be NULL), else 0. */
int vb_id_map_remove(vb_id_map *map, uint64_t id, uint64_t *value);

/* The ids held. */
size_t vb_id_map_count(const vb_id_map *map);

/* Calls `visit` for every id and its value, in no particular order. The map
 * must not change meanwhile. */
void vb_id_map_each(const vb_id_map *map, void (*visit)(void *context, uint64_t id, uint64_t value), void *context);

/* Frees everything; the map is empty and usable again. */
void vb_id_map_clear(vb_id_map *map);

#endif
