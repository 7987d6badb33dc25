/* vrambench — `external:PATH.so`: any shared library with PyTorch's
 * pluggable-allocator ABI (torch.cuda.memory.CUDAPluggableAllocator):
 *
 *     void *malloc_fn(ssize_t size, int device, cudaStream_t stream);
 *     void free_fn(void *ptr, ssize_t size, int device, cudaStream_t stream);
 *
 * loaded with dlopen, symbols vb_torch_malloc / vb_torch_free unless the spec
 * names others (external:PATH.so[malloc=SYM,free=SYM]); an optional
 * empty_cache=SYM (default vb_torch_empty_cache when the library has it)
 * serves empty_cache. The library calls CUDA itself, so it runs on the cuda
 * device only: on sim it is refused (after the library and its symbols were
 * checked, so a bad path is the same one error line on every device).
 *
 * What it can count: requested and allocated bytes come from the calls (the
 * ABI says nothing of rounding, so allocated = requested); reserved bytes are
 * what the driver reports, the growth of cudaMemGetInfo's used memory since
 * the allocator was created (the device seam's mem_info), read after every
 * call, and never below the bytes handed out (the driver packs small
 * allocations into pages it already holds). Driver calls and retries are not
 * visible from outside the library and stay 0. */
#include "allocator.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "base/addr_map.h"

typedef void *(*external_malloc_fn)(ssize_t size, int device, void *stream);
typedef void (*external_free_fn)(void *ptr, ssize_t size, int device, void *stream);
typedef void (*external_empty_cache_fn)(void);

typedef struct external_settings {
    const char *path;
    const char *malloc_symbol;
    const char *free_symbol;
    const char *empty_cache_symbol;
} external_settings;

static const vb_option external_options[] = {
    {"path", VB_OPTION_STRING, offsetof(external_settings, path), 0, 0,
     "the shared library (given as external:PATH.so)"},
    {"malloc", VB_OPTION_STRING, offsetof(external_settings, malloc_symbol), 0, 0,
     "symbol of void *fn(ssize_t size, int device, cudaStream_t stream); default vb_torch_malloc"},
    {"free", VB_OPTION_STRING, offsetof(external_settings, free_symbol), 0, 0,
     "symbol of void fn(void *ptr, ssize_t size, int device, cudaStream_t stream); default vb_torch_free"},
    {"empty_cache", VB_OPTION_STRING, offsetof(external_settings, empty_cache_symbol), 0, 0,
     "symbol of void fn(void); default vb_torch_empty_cache when present, else empty_cache does nothing"},
};

typedef struct external_state {
    uint64_t allocated;         /* bytes handed out (the calls' sizes) */
    uint64_t reserved, reserved_peak; /* what the driver reports, see update_reserved */
    vb_device *device;
    int ordinal;                /* the CUDA device index passed to the library */
    external_malloc_fn malloc_fn;
    external_free_fn free_fn;
    external_empty_cache_fn empty_cache_fn; /* NULL: none */
    uint64_t baseline_used;     /* driver-used bytes when created */
    vb_addr_map sizes;          /* address -> requested size */
    vb_addr_map streams;        /* address -> the stream it was allocated on */
} external_state;

/* Looks `symbol` up in `library`; VB_ERR_INVALID naming the library when absent. */
static vb_status find_symbol(void *library, const char *path, const char *symbol, void **out)
{
    dlerror();
    *out = dlsym(library, symbol);
    if (!*out)
        return vb_error(VB_ERR_INVALID,
                        "external:%s: no symbol '%s' (not a PyTorch pluggable allocator? name its functions "
                        "with external:PATH.so[malloc=SYM,free=SYM])",
                        path, symbol);
    return VB_OK;
}

/* Reads the driver's used bytes into reserved (growth since creation, at
 * least the bytes handed out), keeping the peak. */
static void update_reserved(external_state *ext)
{
    uint64_t used = vb_device_used_bytes(ext->device);
    uint64_t reserved = used > ext->baseline_used ? used - ext->baseline_used : 0;
    if (reserved < ext->allocated) reserved = ext->allocated;
    ext->reserved = reserved;
    if (reserved > ext->reserved_peak) ext->reserved_peak = reserved;
}

/* The seam reads reserved bytes here: the library's memory never passes
 * through the device the seam counts. */
static void external_outside_reserved(void *state, uint64_t *current, uint64_t *peak)
{
    external_state *ext = state;
    *current = ext->reserved;
    *peak = ext->reserved_peak;
}

static vb_status external_create(vb_device *dev, const vb_config *config, void **state)
{
    external_settings settings = {NULL, "vb_torch_malloc", "vb_torch_free", NULL};
    vb_status status = vb_config_apply(config, external_options, sizeof external_options / sizeof *external_options,
                                       &settings, "external");
    if (status != VB_OK) return status;
    if (!settings.path || !settings.path[0])
        return vb_error(VB_ERR_INVALID, "external: no library named (external:PATH.so)");
    /* dlopen searches the library path for a bare name; a file name is what users mean. */
    if (!strchr(settings.path, '/'))
        return vb_error(VB_ERR_INVALID, "external:%s: give the library as a path (./%s)", settings.path,
                        settings.path);
    /* Never dlclosed: a library that calls CUDA may keep state past our use of it. */
    void *library = dlopen(settings.path, RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        const char *why = dlerror();
        return vb_error(VB_ERR_INVALID, "external:%s: cannot load it: %s", settings.path, why ? why : "unknown error");
    }
    void *malloc_fn = NULL, *free_fn = NULL, *empty_cache_fn = NULL;
    status = find_symbol(library, settings.path, settings.malloc_symbol, &malloc_fn);
    if (status == VB_OK) status = find_symbol(library, settings.path, settings.free_symbol, &free_fn);
    if (status == VB_OK && settings.empty_cache_symbol)
        status = find_symbol(library, settings.path, settings.empty_cache_symbol, &empty_cache_fn);
    else if (status == VB_OK)
        empty_cache_fn = dlsym(library, "vb_torch_empty_cache");
    if (status != VB_OK) return status;
    vb_device_info info;
    dev->ops->info(dev, &info);
    if (info.simulated)
        return vb_error(VB_ERR_INVALID,
                        "external:%s calls CUDA itself and runs on the cuda device only, not on the simulated one "
                        "(--device cuda)",
                        settings.path);
    external_state *ext = calloc(1, sizeof *ext);
    if (!ext) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    ext->device = dev;
    ext->ordinal = info.ordinal;
    /* POSIX guarantees dlsym's result converts to a function pointer. */
    memcpy(&ext->malloc_fn, &malloc_fn, sizeof malloc_fn);
    memcpy(&ext->free_fn, &free_fn, sizeof free_fn);
    memcpy(&ext->empty_cache_fn, &empty_cache_fn, sizeof empty_cache_fn);
    /* A library may keep its cache across our instances (the plug-in serves
     * one allocator per device for the whole process): emptied first, so the
     * baseline is the driver's use with nothing of the library's cached. */
    if (ext->empty_cache_fn) ext->empty_cache_fn();
    ext->baseline_used = vb_device_used_bytes(dev);
    *state = ext;
    return VB_OK;
}

/* Frees one leftover allocation at destroy time. */
static void free_leftover(void *context, uint64_t addr, uint64_t size)
{
    external_state *ext = context;
    uint64_t stream = 0;
    vb_addr_map_get(&ext->streams, addr, &stream);
    ext->free_fn((void *)(uintptr_t)addr, (ssize_t)size, ext->ordinal, (void *)(uintptr_t)stream);
}

/* Frees what is still allocated, then empties the library's cache: a library
 * that keeps its cache across our instances (the plug-in) would otherwise
 * hold blocks tied to streams the caller destroys next, and its next
 * empty_cache would synchronize a dead stream (seen on an H100: SIGSEGV in
 * cudaStreamSynchronize under the plug-in serving stitch). */
static void external_destroy(void *state)
{
    external_state *ext = state;
    vb_addr_map_each_sorted(&ext->sizes, free_leftover, ext); /* the same frees every run */
    if (ext->empty_cache_fn) ext->empty_cache_fn();
    vb_addr_map_clear(&ext->sizes);
    vb_addr_map_clear(&ext->streams);
    free(ext);
}

/* Calls the library's malloc; NULL from it is out of memory. */
static vb_status external_malloc(void *state, uint64_t size, vb_stream stream, vb_grant *out)
{
    external_state *ext = state;
    if (size > (uint64_t)SSIZE_MAX) {
        return vb_error(VB_ERR_OOM, "external: %llu bytes cannot be asked through the ABI (ssize_t)",
                        (unsigned long long)size);
    }
    void *ptr = ext->malloc_fn((ssize_t)size, ext->ordinal, (void *)stream);
    vb_addr addr = (vb_addr)(uintptr_t)ptr;
    if (!ptr) {
        return vb_error(VB_ERR_OOM, "external: the library returned NULL for %llu bytes", (unsigned long long)size);
    }
    if (vb_addr_map_put(&ext->sizes, addr, size) != 0 ||
        vb_addr_map_put(&ext->streams, addr, (uint64_t)(uintptr_t)stream) != 0) {
        vb_addr_map_remove(&ext->sizes, addr, NULL);
        ext->free_fn(ptr, (ssize_t)size, ext->ordinal, (void *)stream);
        return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    }
    ext->allocated += size;
    update_reserved(ext);
    out->addr = addr;
    out->size = size;
    return VB_OK;
}

/* Calls the library's free with the size and stream of the malloc. */
static vb_status external_free(void *state, vb_addr addr, uint64_t tag)
{
    (void)tag; /* unused: its own bookkeeping knows the block */
    external_state *ext = state;
    uint64_t size = 0, stream = 0;
    if (!vb_addr_map_remove(&ext->sizes, addr, &size))
        return vb_error(VB_ERR_INVALID, "external: free of 0x%llx, which is not allocated", (unsigned long long)addr);
    vb_addr_map_remove(&ext->streams, addr, &stream);
    ext->free_fn((void *)(uintptr_t)addr, (ssize_t)size, ext->ordinal, (void *)(uintptr_t)stream);
    ext->allocated -= size;
    update_reserved(ext);
    return VB_OK;
}

/* The library's empty_cache when it has one. */
static vb_status external_empty_cache(void *state)
{
    external_state *ext = state;
    if (ext->empty_cache_fn) ext->empty_cache_fn();
    update_reserved(ext);
    return VB_OK;
}

const vb_allocator_ops vb_external_allocator = {
    .name = VB_EXTERNAL_PREFIX "PATH.so",
    .description = "a shared library with PyTorch's pluggable-allocator ABI (cuda device only; reserved = "
                   "cudaMemGetInfo growth)",
    .options = external_options,
    .option_count = sizeof external_options / sizeof *external_options,
    .create = external_create,
    .destroy = external_destroy,
    .malloc = external_malloc,
    .free = external_free,
    .record_stream = NULL, /* the library sees only malloc/free; PyTorch's record_stream is its own business */
    .empty_cache = external_empty_cache,
    .largest_free_block = NULL, /* what the library caches is not visible from outside */
    .segments = NULL,
    .outside_reserved = external_outside_reserved,
};
