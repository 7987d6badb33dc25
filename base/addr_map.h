/* vrambench — a hash map from device addresses (or any non-zero uint64 key)
 * to a uint64 value, open addressing with linear probing and backward-shift
 * deletion. Used wherever a pointer must be looked up: live driver
 * allocations on the sim, the baseline allocator's sizes, test ledgers.
 *
 * Its keys come from input (a trace's ids and pointers), so its hash is
 * seeded with a random value per process: with a fixed hash, keys worked
 * out from its inverse all land in one slot, and each insert walks the run
 * of those before it (a 40k-allocation trace took seconds, a 10 MB one
 * hours). The seed makes the order of vb_addr_map_each differ from run to
 * run: whatever reaches an output or a decision walks the keys in order
 * with vb_addr_map_each_sorted. */
#ifndef VB_ADDR_MAP_H
#define VB_ADDR_MAP_H

#include <stddef.h>
#include <stdint.h>

/* A key and its value side by side: a lookup touches one cache line. */
typedef struct vb_addr_map_entry {
    uint64_t key;       /* 0 marks an empty slot, so key 0 cannot be stored */
    uint64_t value;
} vb_addr_map_entry;

typedef struct vb_addr_map {
    vb_addr_map_entry *entries;
    size_t capacity;    /* a power of two, or 0 before the first insert */
    size_t count;
    int sparse;         /* 0: grows at half full; 1: at a quarter full, for hot maps
                         * (shorter probe runs, fewer mispredicted branches per lookup
                         * and removal, for twice the memory and a longer _each) */
    uint64_t seed;      /* mixed into the hash; drawn when the first table is made */
} vb_addr_map;

/* An empty map needs no set-up beyond zero-initialisation. */
#define VB_ADDR_MAP_INIT {NULL, 0, 0, 0, 0}
/* An empty sparse map (or set `sparse` before the first insert). */
#define VB_ADDR_MAP_SPARSE_INIT {NULL, 0, 0, 1, 0}

/* Inserts or replaces; returns 0, or -1 when host memory runs out or `key` is 0. */
int vb_addr_map_put(vb_addr_map *map, uint64_t key, uint64_t value);

/* Finds `key`, or inserts it with value 0, and returns where its value is
 * kept (valid until the map next changes), so a caller can read and set it
 * with one probe; *added (may be NULL) says whether it was inserted. NULL
 * when host memory runs out or `key` is 0. */
uint64_t *vb_addr_map_slot(vb_addr_map *map, uint64_t key, int *added);

/* 1 and the value in *value (may be NULL) if `key` is present, else 0. */
int vb_addr_map_get(const vb_addr_map *map, uint64_t key, uint64_t *value);

/* Removes `key`; 1 if it was present (its value in *value, may be NULL), else 0. */
int vb_addr_map_remove(vb_addr_map *map, uint64_t key, uint64_t *value);

/* Calls `visit` for every entry, in an order that differs from run to run
 * (the hash is seeded): only for walks whose result does not depend on it.
 * The map must not change meanwhile. */
void vb_addr_map_each(const vb_addr_map *map, void (*visit)(void *context, uint64_t key, uint64_t value),
                      void *context);

/* Replaces every entry's value by what `change` makes of it (the keys,
 * and so the table, unchanged). */
void vb_addr_map_change_values(vb_addr_map *map, uint64_t (*change)(void *context, uint64_t value), void *context);

/* Calls `visit` for every entry in increasing key order, the same every
 * run, for walks whose order can reach an output or a decision (frees of
 * leftovers, listings). Should host memory run out for the sorted copy, it
 * still visits every entry, in vb_addr_map_each's order. The map must not
 * change meanwhile. */
void vb_addr_map_each_sorted(const vb_addr_map *map, void (*visit)(void *context, uint64_t key, uint64_t value),
                             void *context);

/* The longest distance, in slots, from an entry's home slot (where its hash
 * points) to where it is kept: what the slowest look-up walks past. For
 * tests that the hash spreads hostile keys. */
size_t vb_addr_map_longest_probe(const vb_addr_map *map);

/* Frees the table; the map is empty and usable again. */
void vb_addr_map_clear(vb_addr_map *map);

#endif
