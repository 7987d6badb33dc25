/* vrambench — PyTorch's allocator settings (the value of PYTORCH_ALLOC_CONF,
 * or of PYTORCH_CUDA_ALLOC_CONF, its deprecated name) read into one of our
 * strategies and its options.
 *
 * "expandable_segments:True,max_split_size_mb:256" is `expandable` with
 * max_split_size_mb=256; without expandable_segments:True it is `caching`;
 * backend:cudaMallocAsync is `async` (which ignores the native options, as
 * PyTorch does, with a warning there).
 *
 * What is accepted and what is refused follows PyTorch's parsers as read at
 * these commits of pytorch/pytorch (main, 2025):
 *   c10/core/AllocatorConfig.h    b42fb11650d1718ca81c6826b0a12247f94665fc
 *     ConfigTokenizer, and the keys AcceleratorAllocatorConfig knows
 *   c10/core/AllocatorConfig.cpp  0ac716637f3258efcaf7fdfb851bdd520c9c1441
 *     AcceleratorAllocatorConfig::parseArgs, and the environment variables
 *   c10/cuda/CUDAAllocatorConfig.cpp b944315b93d36f842ef94d67a041371993234a74
 *     CUDAAllocatorConfig::parseArgs (PyTorch runs both parsers on the text,
 *     the device-independent one first; either may refuse it)
 * Their rules, which the tests (tests/test_pytorch_conf.c) cite one by one:
 *  - Tokens: ',' ':' '[' ']' each stand alone; every other run of
 *    characters is a word; whitespace (std::isspace: space, tab, newline,
 *    \v, \f, \r) is dropped anywhere, inside words too.
 *  - A key is followed by a separator token and a value token; which
 *    separator is not checked (checkToken's answer is unused), so
 *    "expandable_segments,True" passes as "expandable_segments:True" does.
 *    After a value, a token is skipped if there is one (the ','), so a
 *    trailing comma is fine; two commas put ',' where a key should be.
 *  - Numbers as std::stoull / std::stod read them: a leading number, the
 *    rest of the word ignored ("256MB" is 256), "-1" wraps around to
 *    2^64-1; no number at all, or one out of range, is refused. Booleans
 *    are exactly True or False.
 *  - max_split_size_mb, max_non_split_rounding_mb >= 20 (kLargeBuffer),
 *    larger values capped at SIZE_MAX / 1 MiB; garbage_collection_threshold
 *    in (0, 1); per_process_memory_fraction in [0, 1];
 *    roundup_power2_divisions a power of two, or per interval
 *    "[256:1,512:2,>:4]" (boundaries powers of two in MiB, values 0 or
 *    powers of two; each setting of the key edits the same 16 intervals);
 *    backend native or cudaMallocAsync (hipMallocAsync: ROCm builds only).
 *  - Keys with no effect on device memory are checked and accepted:
 *    release_lock_on_cudamalloc (and ROCm's release_lock_on_hipmalloc:
 *    locking), pinned_use_cuda_host_register (pinned_use_hip_host_register),
 *    pinned_num_register_threads (a power of two <= 128),
 *    pinned_reserve_segment_size_mb (> 0), pinned_use_background_threads
 *    (pinned host memory), graph_capture_record_stream_reuse (acts only
 *    during CUDA graph capture, which no trace here has).
 *  - A key PyTorch knows but that changes device memory in a way no
 *    strategy here models is refused as "known to PyTorch, not modelled
 *    here": large_segment_size_mb (the size of large-pool segments).
 *  - Any other key is refused, as PyTorch's CUDA parser does ("Unrecognized
 *    key ... in CUDA allocator config"). */
#ifndef VB_PYTORCH_CONF_H
#define VB_PYTORCH_CONF_H

#include <stddef.h>

#include "allocator.h"

#define VB_PYTORCH_CONF_MAX_ENTRIES 8

/* The environment variables PyTorch reads the settings from, in its order:
 * the first one set (even to "") is the one used; the second is the
 * deprecated name, which older PyTorch reads alone. */
#define VB_PYTORCH_CONF_ENV "PYTORCH_ALLOC_CONF"
#define VB_PYTORCH_CONF_ENV_DEPRECATED "PYTORCH_CUDA_ALLOC_CONF"

typedef struct vb_pytorch_conf {
    char allocator[16];                                 /* "caching", "expandable" or "async" */
    vb_config_entry entries[VB_PYTORCH_CONF_MAX_ENTRIES]; /* our option keys; values in `storage` */
    size_t count;
    char storage[1024];
} vb_pytorch_conf;

/* Reads `conf` (may be "", PyTorch's defaults). VB_ERR_INVALID with one
 * message naming the setting where PyTorch would refuse it, or where it
 * names a setting this suite does not model. */
vb_status vb_pytorch_conf_parse(const char *conf, vb_pytorch_conf *out);

#endif
