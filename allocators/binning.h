/* vrambench — what allocators/binning.c offers beyond its ops table.
 *
 * Internal to allocators/ and its tests.
 */
#ifndef VB_BINNING_H
#define VB_BINNING_H

#include <stddef.h>

/* The bin chunks and upstream blocks of the `binning` allocator whose
 * state this is that have no chunk in use, found by walking every one of
 * them (empty_cache looks only at those it listed as they became free).
 * Exposed for tests: after empty_cache there must be none. */
size_t vb_binning_wholly_free_regions(void *state);

#endif
