/* vrambench — what allocators/stitch.c offers beyond its ops table.
 *
 * Internal to allocators/ and its tests.
 */
#ifndef VB_STITCH_H
#define VB_STITCH_H

/* Stops using the holes index in the `stitch` allocator whose state this
 * is, as happens when host memory runs out for an entry: from then on its
 * moves and stitched ranges walk every block, as before the index.
 * Exposed for tests: both ways must choose alike. */
void vb_stitch_stop_indexing(void *state);

#endif
