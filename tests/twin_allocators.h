/* vrambench tests — twin allocators: two of one strategy, each on its own
 * identical sim device with one extra stream, driven through the same
 * seeded sequence, so that a test can hold an indexed allocator to one that
 * walks (tests/test_caching_index.c, tests/test_stitch_holes.c). */
#ifndef VB_TESTS_TWIN_ALLOCATORS_H
#define VB_TESTS_TWIN_ALLOCATORS_H

#include <stdint.h>

#include "allocators/allocator.h"

#define TWIN_LIVE_SLOTS 512
#define TWIN_CAPACITY (4 * VB_GiB)

/* One allocator on its own sim device (TWIN_CAPACITY), with one extra
 * stream (streams[0] is the default one); live blocks by slot. */
typedef struct twin {
    vb_device *dev;
    vb_allocator *allocator;
    vb_stream streams[2];
    vb_addr live[TWIN_LIVE_SLOTS];
    int stream_of[TWIN_LIVE_SLOTS];
} twin;

/* Opens `name` with up to 4 "key=value" settings (NULL-terminated, or
 * NULL for none); asserts every step. */
void twin_open(twin *t, const char *name, const char *const *settings);

/* Destroys the allocator (it returns what is live), the stream, the device. */
void twin_close(twin *t);

/* The same request on both twins, into `slot`: the same outcome and
 * address asserted (a failed one leaves the slot 0). */
void twin_malloc_both(twin *a, twin *b, size_t slot, uint64_t size, int stream);

/* Asserts that the twins ended with the same statistics, then closes both. */
void twin_close_equal(twin *a, twin *b);

/* splitmix64: the seeded sequence's next number. */
uint64_t twin_random(uint64_t *state);

/* A request size: half from a few repeated sizes (ties broken by address),
 * the rest uniform, small (<= 1 MiB) or large (<= 96 MiB). */
uint64_t twin_random_size(uint64_t *rng);

#endif
