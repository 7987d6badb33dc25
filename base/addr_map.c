/* vrambench — open-addressing hash map from uint64 keys to uint64 values. */
#include "addr_map.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* The process's hash seed (see addr_map.h), drawn once. */
static uint64_t process_seed;
static pthread_once_t process_seed_once = PTHREAD_ONCE_INIT;

/* Draws process_seed from the kernel, or, should getrandom fail (an old
 * kernel, a sandbox), from the clock, the pid and where the stack and this
 * library lie (ASLR): enough that no trace written in advance can know it. */
static void draw_process_seed(void)
{
    uint64_t seed = 0;
    if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != (ssize_t)sizeof seed) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        uint64_t local = (uint64_t)(uintptr_t)&now ^ (uint64_t)(uintptr_t)&process_seed << 17;
        seed = ((uint64_t)now.tv_sec * 1000000007ULL + (uint64_t)now.tv_nsec) ^ (uint64_t)getpid() << 40 ^ local;
    }
    process_seed = seed;
}

/* Spreads device addresses, which share their low (alignment) bits, and
 * keys chosen to collide: the key XOR the seed goes through both rounds of
 * the MurmurHash3 finaliser, so which keys share a slot follows from a
 * value no input knows. (After one round, as this map once had, a slot is
 * a function of a few linear combinations of the key's bits: keys that
 * agree on those share a slot whatever seed is XORed in first.) */
static size_t slot_of(uint64_t key, uint64_t seed, size_t capacity)
{
    key ^= seed;
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    key *= 0xc4ceb9fe1a85ec53ULL;
    key ^= key >> 33;
    return (size_t)key & (capacity - 1);
}

/* Doubles the table (or makes the first one, drawing the map's seed) and
 * re-inserts every entry. */
static int grow(vb_addr_map *map)
{
    size_t capacity = map->capacity ? map->capacity * 2 : 64;
    vb_addr_map_entry *entries = calloc(capacity, sizeof *entries);
    if (!entries) return -1;
    if (!map->capacity) {
        pthread_once(&process_seed_once, draw_process_seed);
        map->seed = process_seed;
    }
    for (size_t i = 0; i < map->capacity; i++) {
        if (!map->entries[i].key) continue;
        size_t slot = slot_of(map->entries[i].key, map->seed, capacity);
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
    size_t slot = slot_of(key, map->seed, map->capacity);
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
    size_t slot = slot_of(key, map->seed, map->capacity);
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
        size_t home = slot_of(entries[next].key, map->seed, map->capacity);
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

void vb_addr_map_change_values(vb_addr_map *map, uint64_t (*change)(void *context, uint64_t value), void *context)
{
    for (size_t i = 0; i < map->capacity; i++)
        if (map->entries[i].key) map->entries[i].value = change(context, map->entries[i].value);
}

/* vb_addr_map_each_sorted's copy of the entries, and its order. */
static int compare_keys(const void *a, const void *b)
{
    uint64_t x = ((const vb_addr_map_entry *)a)->key, y = ((const vb_addr_map_entry *)b)->key;
    return (x > y) - (x < y);
}

/* Visits a sorted copy of the entries (the map's own order on host OOM). */
void vb_addr_map_each_sorted(const vb_addr_map *map, void (*visit)(void *context, uint64_t key, uint64_t value),
                             void *context)
{
    if (!map->count) return;
    vb_addr_map_entry *sorted = malloc(map->count * sizeof *sorted);
    if (!sorted) {
        vb_addr_map_each(map, visit, context);
        return;
    }
    size_t count = 0;
    for (size_t i = 0; i < map->capacity; i++)
        if (map->entries[i].key) sorted[count++] = map->entries[i];
    qsort(sorted, count, sizeof *sorted, compare_keys);
    for (size_t i = 0; i < count; i++) visit(context, sorted[i].key, sorted[i].value);
    free(sorted);
}

/* Measures every entry's distance from its home slot. */
size_t vb_addr_map_longest_probe(const vb_addr_map *map)
{
    size_t longest = 0, mask = map->capacity - 1;
    for (size_t i = 0; i < map->capacity; i++) {
        if (!map->entries[i].key) continue;
        size_t distance = (i - slot_of(map->entries[i].key, map->seed, map->capacity)) & mask;
        if (distance > longest) longest = distance;
    }
    return longest;
}

/* Frees the table. */
void vb_addr_map_clear(vb_addr_map *map)
{
    free(map->entries);
    map->entries = NULL;
    map->capacity = map->count = 0;
}
