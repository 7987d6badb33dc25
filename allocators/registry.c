/* vrambench — the registered allocators, in the order users see them.
 * To add one: write allocators/NAME.c defining `const vb_allocator_ops
 * vb_NAME_allocator`, declare it here and put it in the table. */
#include "allocator.h"

extern const vb_allocator_ops vb_cuda_allocator;
extern const vb_allocator_ops vb_caching_allocator;
extern const vb_allocator_ops vb_async_allocator;
extern const vb_allocator_ops vb_expandable_allocator;
extern const vb_allocator_ops vb_bfc_allocator;
extern const vb_allocator_ops vb_buddy_allocator;
extern const vb_allocator_ops vb_binning_allocator;
extern const vb_allocator_ops vb_stitch_allocator;

const vb_allocator_ops *const vb_allocator_registry[] = {
    &vb_cuda_allocator,
    &vb_caching_allocator,
    &vb_async_allocator,
    &vb_expandable_allocator,
    &vb_bfc_allocator,
    &vb_buddy_allocator,
    &vb_binning_allocator,
    &vb_stitch_allocator,
    NULL,
};
