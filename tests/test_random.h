/* vrambench tests — splitmix64: a seeded, portable stream of
 * pseudo-random numbers, for tests that make random operations or inputs
 * (the same seed, the same stream on every machine). */
#ifndef VB_TEST_RANDOM_H
#define VB_TEST_RANDOM_H

#include <stdint.h>

/* The next number of the stream whose state is *state (any start value). */
static inline uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

#endif
