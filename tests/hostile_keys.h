/* vrambench — keys built to collide in base/addr_map's hash as it was
 * before it was seeded (one round of the MurmurHash3 finaliser, nothing
 * else): the tests that such keys now spread out, whatever the seed. */
#ifndef VB_TEST_HOSTILE_KEYS_H
#define VB_TEST_HOSTILE_KEYS_H

#include <stdint.h>

/* The `index`th (from 1) key whose unseeded hash is index << 40, so that
 * its low 40 bits, every table's slot, are 0: the unseeded hash, key ^=
 * key >> 33; key *= C; key ^= key >> 33, run backwards (a shift by 33 or
 * more undoes itself; 0x4f74430c22a54005 is C's inverse mod 2^64). A
 * trace's id map keeps id + 1, so the id is this minus 1. */
static inline uint64_t vb_test_unseeded_collider(uint64_t index)
{
    uint64_t key = index << 40;
    key ^= key >> 33;
    key *= 0x4f74430c22a54005ULL;
    key ^= key >> 33;
    return key;
}

/* How many of them the tests put in: a 1.9 MB trace's worth, enough for
 * the unseeded map to walk runs 40,000 slots long. */
#define VB_TEST_COLLIDERS 40000

/* The longest walk past other keys a lookup may take in the tests: the
 * unseeded hash walks 39,999; with the seeded one, over 2,000 random seeds,
 * the longest of the 40,000 colliders in their 131,072-slot table was 24. */
#define VB_TEST_LONGEST_PROBE 64

#endif
