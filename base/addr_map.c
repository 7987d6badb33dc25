/* vrambench — open-addressing hash map from uint64 keys to uint64 values. */
#include "addr_map.h"

#include <stdlib.h>

/* Spreads device addresses, which share their low (alignment) bits. */
static size_t slot_of(uint64_t key, size_t capacity)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return (size_t)key & (capacity - 1);
}

/* Doubles the table (or makes the first one) and re-inserts every entry. */
static int grow(vb_addr_map *map)
{
    size_t capacity = map->capacity ? map->capacity * 2 : 64;
    vb_addr_map_entry *entries = calloc(capacity, sizeof *entries);
    if (!entries) return -1;
    for (size_t i = 0; i < map->capacity; i++) {
        if (!map->entries[i].key) continue;
        size_t slot = slot_of(map->entries[i].key, capacity);
        while (entries[slot].key) slot = (slot + 1) & (capacity - 1);
        entries[slot] = map->entries[i];
    }
    free(map->entries);
    map->entries = entries;
    map->capacity = capacity;
    return 0;
}

/* Finds or inserts. The table stays at most half full, a sparse one a
 * quarter. Key 0 marks an empty slot, so storing it would count an entry
 * no lookup can find. */
uint64_t *vb_addr_map_slot(vb_addr_map *map, uint64_t key, int *added)
{
    if (key == 0) return NULL;
    if ((map->count + 1) * (map->sparse ? 4 : 2) > map->capacity && grow(map) != 0) return NULL;
    size_t mask = map->capacity - 1;
    size_t slot = slot_of(key, map->capacity);
    vb_addr_map_entry *entries = map->entries;
    while (entries[slot].key && entries[slot].key != key) slot = (slot + 1) & mask;
    int is_new = entries[slot].key == 0;
    if (is_new) {
        map->count++;
        entries[slot].key = key;
        entries[slot].value = 0;
    }
    if (added) *added = is_new;
    return &entries[slot].value;
}

/* Inserts or replaces. */
int vb_addr_map_put(vb_addr_map *map, uint64_t key, uint64_t value)
{
    uint64_t *slot = vb_addr_map_slot(map, key, NULL);
    if (!slot) return -1;
    *slot = value;
    return 0;
}

/* Finds the slot holding `key`, or capacity when absent. */
static size_t find_slot(const vb_addr_map *map, uint64_t key)
{
    if (map->capacity == 0 || key == 0) return map->capacity;
    size_t mask = map->capacity - 1;
    size_t slot = slot_of(key, map->capacity);
    const vb_addr_map_entry *entries = map->entries;
    while (entries[slot].key) {
        if (entries[slot].key == key) return slot;
        slot = (slot + 1) & mask;
    }
    return map->capacity;
}

/* Looks `key` up. */
int vb_addr_map_get(const vb_addr_map *map, uint64_t key, uint64_t *value)
{
    size_t slot = find_slot(map, key);
    if (slot == map->capacity) return 0;
    if (value) *value = map->entries[slot].value;
    return 1;
}

/* Removes `key`, shifting later entries of its probe run back so that no
 * tombstones are needed. */
int vb_addr_map_remove(vb_addr_map *map, uint64_t key, uint64_t *value)
{
    size_t hole = find_slot(map, key);
    if (hole == map->capacity) return 0;
    vb_addr_map_entry *entries = map->entries;
    if (value) *value = entries[hole].value;
    size_t mask = map->capacity - 1;
    size_t next = (hole + 1) & mask;
    while (entries[next].key) {
        size_t home = slot_of(entries[next].key, map->capacity);
        /* Move the entry back if its home is not in (hole, next]. */
        if (((next - home) & mask) >= ((next - hole) & mask)) {
            entries[hole] = entries[next];
            hole = next;
        }
        next = (next + 1) & mask;
    }
    entries[hole].key = 0;
    map->count--;
    return 1;
}

/* Visits every entry. */
void vb_addr_map_each(const vb_addr_map *map, void (*visit)(void *context, uint64_t key, uint64_t value),
                      void *context)
{
    for (size_t i = 0; i < map->capacity; i++)
        if (map->entries[i].key) visit(context, map->entries[i].key, map->entries[i].value);
}

/* Frees the table. */
void vb_addr_map_clear(vb_addr_map *map)
{
    free(map->entries);
    map->entries = NULL;
    map->capacity = map->count = 0;
}
