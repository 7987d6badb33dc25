/* vrambench tests — one allocator on a fresh simulated device, and the
 * checks the per-strategy unit tests (test_bfc, test_binning, test_buddy,
 * test_caching_policy) all make of it.
 *
 * Every helper asserts (cmocka) that the call it wraps succeeded, so a test
 * body only states the property it checks. Config is given as "key=value"
 * strings, the way the CLI and the results JSON spell it.
 */
#ifndef VB_TEST_ALLOC_FIXTURE_H
#define VB_TEST_ALLOC_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "allocators/allocator.h"

#define VB_FIXTURE_MAX_SETTINGS 8
#define VB_BLOCK_LIST_CAPACITY 64

typedef struct vb_alloc_fixture {
    vb_device *dev;      /* a sim; owned */
    vb_allocator *alloc; /* on dev; owned */
} vb_alloc_fixture;

/* Opens a sim of `capacity` bytes (0: its default, 80 GiB) and the
 * allocator `name` on it, configured by `settings` (up to 8 "key=value"
 * strings, NULL-terminated; NULL for none). Both must succeed. */
vb_alloc_fixture *vb_fixture_open(const char *name, uint64_t capacity, const char *const *settings);

/* The status vb_allocator_create gives `name` with `settings` on a fresh sim
 * of `capacity`; whatever it made is closed again. */
vb_status vb_fixture_create_status(const char *name, uint64_t capacity, const char *const *settings);

/* Destroys the allocator, closes the sim and frees the fixture. */
void vb_fixture_close(vb_alloc_fixture *f);

/* vb_malloc of `size` on `stream` (NULL: the default stream), which must
 * succeed with a non-zero pointer. */
vb_addr vb_must_malloc_on(vb_alloc_fixture *f, uint64_t size, vb_stream stream);

/* vb_must_malloc_on the default stream. */
vb_addr vb_must_malloc(vb_alloc_fixture *f, uint64_t size);

/* vb_free, which must succeed. */
void vb_must_free(vb_alloc_fixture *f, vb_addr addr);

/* The allocator's statistics now. */
vb_alloc_stats vb_fixture_stats(vb_alloc_fixture *f);

/* A new stream on the fixture's sim (the sim frees it on close). */
vb_stream vb_fixture_stream(vb_alloc_fixture *f);

/* The record_stream set-up: `addr` is recorded as used on a new stream that
 * then has `busy_ns` of work queued, and is freed while that work is
 * pending. Returns the stream, for vb_sim_complete_stream. */
vb_stream vb_free_while_used_on_busy_stream(vb_alloc_fixture *f, vb_addr addr, uint64_t busy_ns);

/* The blocks segments() reports, in its order. More than the capacity fails
 * the test: a layout that large is not one a comment can work out. */
typedef struct vb_block_list {
    vb_block_info blocks[VB_BLOCK_LIST_CAPACITY];
    size_t count;
} vb_block_list;

vb_block_list vb_fixture_blocks(vb_alloc_fixture *f);

/* Number of distinct segments among the blocks of `list`. */
size_t vb_block_list_segment_count(const vb_block_list *list);

/* Replays the trace at `path` once with allocator `spec` (as the CLI spells
 * it: "caching", "stitch[chunk_mb=2]") on a fresh sim of `capacity` bytes;
 * its peak requested and reserved bytes. The replay must succeed. */
void vb_fixture_replay_peaks(const char *path, const char *spec, uint64_t capacity, double *requested,
                             double *reserved);

#endif
