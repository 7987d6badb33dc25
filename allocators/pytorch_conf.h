/* vrambench — PyTorch's allocator settings (PYTORCH_CUDA_ALLOC_CONF /
 * PYTORCH_ALLOC_CONF) read into one of our strategies and its options.
 *
 * "expandable_segments:True,max_split_size_mb:256" is `expandable` with
 * max_split_size_mb=256; without expandable_segments:True it is `caching`;
 * backend:cudaMallocAsync is `async`. PyTorch's rules are kept
 * (c10/core/AllocatorConfig.cpp, c10/cuda/CUDAAllocatorConfig.cpp): keys
 * and values separated by ':', settings by ',', spaces ignored, a later
 * setting of a key replacing an earlier one; max_split_size_mb and
 * max_non_split_rounding_mb >= 20; garbage_collection_threshold in (0, 1);
 * roundup_power2_divisions a power of two, or per interval "[256:1,>:4]"
 * with powers of two (values may be 0); per_process_memory_fraction in
 * [0, 1]; booleans True/False. An unknown key is refused, as PyTorch does
 * ("Unrecognized key ... in CUDA allocator config"). Keys that change only
 * host memory or locking (release_lock_on_cudamalloc, pinned_*,
 * graph_capture_record_stream_reuse) are checked and have no effect here. */
#ifndef VB_PYTORCH_CONF_H
#define VB_PYTORCH_CONF_H

#include <stddef.h>

#include "allocator.h"

#define VB_PYTORCH_CONF_MAX_ENTRIES 8

typedef struct vb_pytorch_conf {
    char allocator[16];                                 /* "caching", "expandable" or "async" */
    vb_config_entry entries[VB_PYTORCH_CONF_MAX_ENTRIES]; /* our option keys; values in `storage` */
    size_t count;
    char storage[1024];
} vb_pytorch_conf;

/* Reads `conf` (may be "", PyTorch's defaults). VB_ERR_INVALID with one
 * message naming the setting where PyTorch would refuse it. */
vb_status vb_pytorch_conf_parse(const char *conf, vb_pytorch_conf *out);

#endif
