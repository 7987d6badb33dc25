/* vrambench — the PyTorch plug-in: every vrambench strategy behind PyTorch's
 * pluggable-allocator ABI (torch.cuda.memory.CUDAPluggableAllocator), built
 * as build/libvrambench_torch.so by `make plugin`.
 *
 *     void *vb_torch_malloc(ssize_t size, int device, cudaStream_t stream);
 *     void vb_torch_free(void *ptr, ssize_t size, int device, cudaStream_t stream);
 *
 * The strategy is VRAMBENCH_ALLOCATOR ("stitch", "caching[max_split_size_mb=256]"),
 * parsed by the CLI's own spec parser (allocators/spec.h). One allocator per
 * CUDA device, created on that device's first call. PyTorch's streams are
 * cudaStream_t, and the cuda backend's vb_stream is the cudaStream_t itself
 * (base/device_cuda.c), so streams pass through unchanged.
 *
 * Failures are loud: PyTorch's pluggable allocator does not check what the
 * allocation function returns (a NULL would become a tensor at address 0), so
 * a bad VRAMBENCH_ALLOCATOR and an out-of-memory print one line on stderr and
 * abort. VRAMBENCH_TORCH_ON_OOM=null makes an out-of-memory return NULL
 * instead (any other value is a set-up error), for callers that check
 * (vrambench's own external: strategy, whose conformance suite asks for
 * more than the device has). python/vrambench/plugin.py calls vb_torch_init
 * first, which reports a bad spec as a Python error before anything is
 * installed.
 *
 * Threads: PyTorch calls from several threads (autograd's among them); the
 * allocator handle's lock (allocators/allocator.c) serializes the calls into
 * a strategy, and the device table below is set up under its own mutex.
 *
 * Several GPUs: device d's allocator works on vrambench's cuda device d,
 * whose memory is open to every GPU that can access d's (base/device.h,
 * peer_access): mappings and pools are opened to the peers as they are made,
 * so PyTorch's copies between devices (a.to("cuda:1")) work with every
 * strategy. The cuda backend switches the thread's current device to the
 * one it works on; PyTorch frees a block without a device guard
 * (CUDAPluggableAllocator::raw_delete calls the free function as it is), so
 * every entry point here puts the caller's current device back. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include <cuda_runtime_api.h>

#include "allocators/allocator.h"
#include "allocators/spec.h"
#include "base/closest.h"

#define MAX_DEVICES 64

static pthread_mutex_t setup_lock = PTHREAD_MUTEX_INITIALIZER;
static vb_device *devices[MAX_DEVICES];
static vb_allocator *_Atomic allocators[MAX_DEVICES];
static char setup_error[768];   /* the first set-up failure, "" while none */

/* Parses VRAMBENCH_ALLOCATOR (`text`, may be NULL) into `spec`; VB_OK, or a
 * status with setup_error filled. */
static vb_status parse_spec(const char *text, vb_allocator_spec *spec)
{
    if (!text || !text[0]) {
        snprintf(setup_error, sizeof setup_error,
                 "VRAMBENCH_ALLOCATOR is %s (a vrambench allocator spec: stitch, caching[max_split_size_mb=256], ...)",
                 text ? "empty" : "not set");
        return VB_ERR_INVALID;
    }
    if (strcmp(text, "all") == 0) {
        snprintf(setup_error, sizeof setup_error,
                 "VRAMBENCH_ALLOCATOR='all': the plug-in serves one strategy (stitch, caching[max_split_size_mb=256], ...)");
        return VB_ERR_INVALID;
    }
    vb_status status = vb_allocator_spec_parse(text, spec);
    if (status == VB_OK && vb_allocator_find(spec->name) == &vb_external_allocator) {
        vb_allocator_spec_free(spec);
        status = vb_error(VB_ERR_INVALID, "the plug-in serves vrambench's own strategies, not '%s'", text);
    }
    /* The value cut short (VB_SPEC_QUOTED): a long one would push the reason out of the line. */
    if (status != VB_OK)
        snprintf(setup_error, sizeof setup_error, "VRAMBENCH_ALLOCATOR='%.*s%s': %s", VB_SPEC_QUOTED(text),
                 vb_last_error());
    return status;
}

/* What VRAMBENCH_TORCH_ON_OOM may say besides nothing (unset or empty:
 * an out-of-memory aborts). */
static const char *const on_oom_values[] = {"null", NULL};

/* Checks VRAMBENCH_TORCH_ON_OOM; VB_OK, or VB_ERR_INVALID with setup_error
 * filled: a misspelt value ("NULL", "none") would otherwise mean abort
 * without a word. */
static vb_status check_on_oom(void)
{
    const char *value = getenv("VRAMBENCH_TORCH_ON_OOM");
    if (!value || !value[0] || vb_name_known(value, on_oom_values)) return VB_OK;
    char hint[96];
    snprintf(setup_error, sizeof setup_error,
             "VRAMBENCH_TORCH_ON_OOM='%.*s%s' is not null (an out-of-memory returns NULL) or unset (it aborts)%s",
             VB_SPEC_QUOTED(value), vb_did_you_mean(value, on_oom_values, hint, sizeof hint));
    return VB_ERR_INVALID;
}

/* The caller's current device, to put back when we are done (-1: none). */
static int caller_device(void)
{
    int device = -1;
    if (cudaGetDevice(&device) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    return device;
}

/* Makes `device` (from caller_device) current again if it no longer is. */
static void restore_device(int device)
{
    int now = -1;
    if (device < 0 || (cudaGetDevice(&now) == cudaSuccess && now == device)) return;
    if (cudaSetDevice(device) != cudaSuccess) (void)cudaGetLastError();
}

/* Creates the allocator for `device` (the setup lock held); VB_OK or a
 * status with setup_error filled. */
static vb_status create_for(int device)
{
    const char *text = getenv("VRAMBENCH_ALLOCATOR");
    vb_allocator_spec spec;
    vb_status status = check_on_oom();
    if (status == VB_OK) status = parse_spec(text, &spec);
    if (status != VB_OK) return status;
    int previous = caller_device();
    vb_device_options options = {.ordinal = device};
    status = vb_device_open("cuda", &options, &devices[device]);
    if (status == VB_OK) {
        vb_config config = vb_allocator_spec_config(&spec);
        vb_allocator *allocator = NULL;
        status = vb_allocator_create(spec.name, devices[device], &config, &allocator);
        if (status == VB_OK) allocators[device] = allocator;
    }
    if (status != VB_OK)
        snprintf(setup_error, sizeof setup_error, "VRAMBENCH_ALLOCATOR='%.*s%s' on cuda device %d: %s",
                 VB_SPEC_QUOTED(text), device, vb_last_error());
    vb_allocator_spec_free(&spec);
    restore_device(previous);
    return status;
}

/* The allocator of `device`, created on first use; NULL with setup_error set. */
static vb_allocator *allocator_for(int device)
{
    if (device < 0 || device >= MAX_DEVICES) {
        snprintf(setup_error, sizeof setup_error, "cuda device %d is beyond the %d the plug-in serves", device,
                 MAX_DEVICES);
        return NULL;
    }
    vb_allocator *allocator = allocators[device];
    if (allocator) return allocator;
    pthread_mutex_lock(&setup_lock);
    if (!allocators[device] && !setup_error[0]) create_for(device);
    allocator = allocators[device];
    pthread_mutex_unlock(&setup_lock);
    return allocator;
}

/* Prints the one error line and stops the process: the ABI has no way to
 * report a failure (see the top of this file). */
static void die(const char *what)
{
    fprintf(stderr, "vrambench_torch: error: %s\n", what);
    fflush(stderr);
    abort();
}

/* Checks VRAMBENCH_ALLOCATOR (its strategy and options, by creating it on a
 * simulated device) and that there is a GPU; NULL when all is well, else
 * the error line (for python/vrambench/plugin.py to raise). It opens no CUDA
 * device: each device's allocator is made at its first allocation, so a
 * process of a multi-GPU job (one rank per GPU, torch.cuda.set_device(rank)
 * after use()) makes a context on its own GPU only. */
const char *vb_torch_init(void)
{
    static char no_device[256];
    int count = 0;
    vb_allocator_spec spec;
    pthread_mutex_lock(&setup_lock);
    /* Until a device's allocator is made, use() may be called again with a
     * corrected spec (the library stays loaded): an earlier spec's error is
     * not this one's. */
    int any_made = 0;
    for (int device = 0; device < MAX_DEVICES; device++)
        if (allocators[device]) any_made = 1;
    if (!any_made) setup_error[0] = '\0';
    vb_status status = setup_error[0] ? VB_ERR_INVALID : check_on_oom();
    if (status == VB_OK) status = parse_spec(getenv("VRAMBENCH_ALLOCATOR"), &spec);
    if (status == VB_OK) {
        vb_device *sim = NULL;
        vb_allocator *trial = NULL;
        vb_config config = vb_allocator_spec_config(&spec);
        status = vb_sim_open(0, &sim);
        if (status == VB_OK) status = vb_allocator_create(spec.name, sim, &config, &trial);
        if (status != VB_OK)
            snprintf(setup_error, sizeof setup_error, "VRAMBENCH_ALLOCATOR='%.*s%s': %s", VB_SPEC_QUOTED(spec.label),
                     vb_last_error());
        vb_allocator_destroy(trial);
        vb_device_close(sim);
        vb_allocator_spec_free(&spec);
    }
    pthread_mutex_unlock(&setup_lock);
    if (status != VB_OK) return setup_error;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        (void)cudaGetLastError();
        snprintf(no_device, sizeof no_device, "no CUDA device: %s",
                 err != cudaSuccess ? cudaGetErrorString(err) : "the driver reports none");
        return no_device;
    }
    return NULL;
}

void *vb_torch_malloc(ssize_t size, int device, cudaStream_t stream)
{
    vb_allocator *allocator = allocator_for(device);
    if (!allocator) die(setup_error);
    if (size <= 0) return NULL;
    vb_addr addr = 0;
    int previous = caller_device();
    vb_status status = vb_malloc(allocator, (uint64_t)size, (vb_stream)(void *)stream, &addr);
    restore_device(previous);
    const char *on_oom = getenv("VRAMBENCH_TORCH_ON_OOM");
    if (status == VB_ERR_OOM && on_oom && strcmp(on_oom, "null") == 0) return NULL;
    if (status != VB_OK) {
        char line[768];
        snprintf(line, sizeof line, "malloc of %lld bytes on cuda device %d failed: %s (%s)", (long long)size,
                 device, vb_status_name(status), vb_last_error());
        die(line);
    }
    return (void *)(uintptr_t)addr;
}

void vb_torch_free(void *ptr, ssize_t size, int device, cudaStream_t stream)
{
    (void)size;
    (void)stream; /* the strategy knows the stream the block was allocated on */
    vb_allocator *allocator = allocator_for(device);
    if (!allocator || !ptr) return;
    int previous = caller_device();
    vb_status status = vb_free(allocator, (vb_addr)(uintptr_t)ptr);
    restore_device(previous);
    if (status != VB_OK) {
        char line[768];
        snprintf(line, sizeof line, "free of %p on cuda device %d failed: %s", ptr, device, vb_last_error());
        die(line);
    }
}

/* Returns every cached byte of every device's allocator to the driver. */
void vb_torch_empty_cache(void)
{
    int previous = caller_device();
    for (int device = 0; device < MAX_DEVICES; device++)
        if (allocators[device]) vb_empty_cache(allocators[device]);
    restore_device(previous);
}

/* The figures vb_torch_stats hands out, in its order: the library's ABI, kept
 * apart from vb_alloc_stats (which grows with the seam's counts by kind), so
 * a caller's buffer never depends on that struct's size. */
#define TORCH_STATS(X)                                                                                  \
    X(requested_bytes) X(allocated_bytes) X(reserved_bytes) X(requested_bytes_peak)                     \
    X(allocated_bytes_peak) X(reserved_bytes_peak) X(driver_alloc_calls) X(driver_free_calls)           \
    X(alloc_retries) X(ooms) X(free_cached_bytes) X(largest_free_block)
#define TORCH_STAT_NAME(field) #field ","
#define TORCH_STAT_COUNT(field) +1

/* The names of vb_torch_stats's figures, comma-separated, in its order
 * (python/vrambench/plugin.py reads them from here). */
const char *vb_torch_stat_names(void)
{
    return TORCH_STATS(TORCH_STAT_NAME);
}

/* Writes the first `count` figures of `device`'s allocator (at most
 * vb_torch_stat_names's number) into `out`; returns how many were written,
 * or -1 when that device has no allocator yet. */
int vb_torch_stats(int device, uint64_t *out, int count)
{
    if (device < 0 || device >= MAX_DEVICES || !allocators[device] || count < 0) return -1;
    vb_alloc_stats stats;
    int previous = caller_device();
    vb_allocator_stats(allocators[device], &stats); /* pool figures are asked of the pool's device */
    restore_device(previous);
    const uint64_t values[] = {
#define TORCH_STAT_VALUE(field) stats.field,
        TORCH_STATS(TORCH_STAT_VALUE)
#undef TORCH_STAT_VALUE
    };
    int available = 0 TORCH_STATS(TORCH_STAT_COUNT);
    if (count > available) count = available;
    memcpy(out, values, (size_t)count * sizeof *out);
    return count;
}

/* Restarts the peaks of `device`'s allocator from the current values. */
void vb_torch_reset_peak_stats(int device)
{
    if (device < 0 || device >= MAX_DEVICES || !allocators[device]) return;
    int previous = caller_device();
    vb_allocator_reset_peaks(allocators[device]);
    restore_device(previous);
}

/* The allocator spec served (VRAMBENCH_ALLOCATOR at set-up). */
const char *vb_torch_allocator(void)
{
    const char *text = getenv("VRAMBENCH_ALLOCATOR");
    return text ? text : "";
}
