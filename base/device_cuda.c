/* vrambench — the cuda backend of the device seam.
 *
 * CUDA runtime for memory, streams, events, stream-ordered pools, pinned
 * host memory and copies; cuBLAS for gemm and axpy; the kernels of
 * device_cuda_kernels.cu for fills, patterns and busy work. The driver
 * API's virtual-memory calls (cuMemCreate, cuMemMap ...) are looked up at
 * run time through the runtime (cudaGetDriverEntryPointByVersion), so the
 * binary does not link libcuda and still starts, and falls back to the sim,
 * on a machine without a driver.
 *
 * Handles: vb_stream is the cudaStream_t, vb_event the cudaEvent_t, vb_pool
 * the cudaMemPool_t, vb_phys the CUmemGenericAllocationHandle, each cast.
 * A NULL vb_stream is the legacy default stream; streams we create are
 * non-blocking, so they do not synchronize with it implicitly.
 *
 * Several GPUs: a device is CUDA device `ordinal`, and every op that calls
 * CUDA first makes it the thread's current device (use_device), so one
 * thread can use several devices through their handles. When a device
 * opens, the devices that may access its memory are worked out over all
 * the GPUs (cudaDeviceCanAccessPeer): every mapping is opened to them
 * (cuda_vm_set_access: one cuMemSetAccess with a descriptor per device, as
 * PyTorch's ExpandableSegment sets access for its peers, there one call per
 * peer and a peer only once enabled), every pool too (cuda_pool_create:
 * cudaMemPoolSetAccess, which PyTorch's CUDAMallocAsyncAllocator calls per
 * peer in enablePeerAccess: pools ignore cudaDeviceEnablePeerAccess), and
 * cudaMalloc memory through context peer access, enabled both ways between
 * every two devices open in the process (note_open), whichever opened
 * first. Nothing the hardware refuses is asked for; between devices that
 * are no peers, copies are staged by the driver.
 *
 * Every CUDA call's result is checked; a failure becomes one vb_error line
 * naming the call and CUDA's own name and text for the error, and the
 * runtime's last-error state is cleared so that a later launch check does not
 * report a stale failure (as PyTorch does after an out-of-memory).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda.h> /* driver API types only: libcuda is never linked */
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include "device.h"
#include "device_cuda_kernels.h"

/* The driver ABI asked of cudaGetDriverEntryPointByVersion: 12.0, which
 * every driver that runs a CUDA 12 or 13 runtime has. The functions used
 * kept the signatures they had in 10.2. */
#define DRIVER_ABI_VERSION 12000

typedef struct driver_api {
    PFN_cuGetErrorName_v6000 get_error_name;
    PFN_cuGetErrorString_v6000 get_error_string;
    PFN_cuMemGetAllocationGranularity_v10020 get_granularity;
    PFN_cuMemAddressReserve_v10020 address_reserve;
    PFN_cuMemAddressFree_v10020 address_free;
    PFN_cuMemCreate_v10020 create;
    PFN_cuMemRelease_v10020 release;
    PFN_cuMemMap_v10020 map;
    PFN_cuMemSetAccess_v10020 set_access;
    PFN_cuMemUnmap_v10020 unmap;
    const char *missing;       /* first entry point not found, NULL when all were */
    char missing_reason[160];
} driver_api;

typedef struct cuda_state {
    int device;
    vb_device_info info;
    driver_api driver;
    uint64_t granularity;      /* cuMemGetAllocationGranularity (minimum), or 2 MiB */
    cublasHandle_t cublas;     /* created on the first gemm or axpy */
    int have_cublas;
    int *peers;                /* the other devices that may access its memory (cudaDeviceCanAccessPeer) */
    int peer_count;
    CUmemAccessDesc *access;   /* read-write for the device, then for each peer: cuMemSetAccess's list */
    struct cudaMemAccessDesc *pool_access; /* read-write for each peer: cudaMemPoolSetAccess's list */
    int noted_open;            /* counted among the open devices (note_open) */
} cuda_state;

/* The backend state of a cuda device. */
static cuda_state *cuda_of(vb_device *dev)
{
    return (cuda_state *)dev->state;
}

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

/* Status for a runtime error: out of memory is VB_ERR_OOM, the rest a
 * device error unless the caller says otherwise. */
static vb_status status_of(cudaError_t err)
{
    return err == cudaErrorMemoryAllocation ? VB_ERR_OOM : VB_ERR_DEVICE;
}

/* Records "cuda: <what>: <cudaErrorName>: <text>" for `err`, clears the
 * runtime's last error, and returns `status`. */
static vb_status runtime_failure(vb_status status, cudaError_t err, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
static vb_status runtime_failure(vb_status status, cudaError_t err, const char *format, ...)
{
    char what[256];
    va_list args;
    va_start(args, format);
    vsnprintf(what, sizeof what, format, args);
    va_end(args);
    (void)cudaGetLastError();
    return vb_error(status, "cuda: %s: %s: %s", what, cudaGetErrorName(err), cudaGetErrorString(err));
}

/* The same for a driver API result. */
static vb_status driver_failure(const driver_api *driver, CUresult result, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
static vb_status driver_failure(const driver_api *driver, CUresult result, const char *format, ...)
{
    char what[256];
    const char *name = NULL, *text = NULL;
    va_list args;
    va_start(args, format);
    vsnprintf(what, sizeof what, format, args);
    va_end(args);
    if (driver->get_error_name && driver->get_error_name(result, &name) != CUDA_SUCCESS) name = NULL;
    if (driver->get_error_string && driver->get_error_string(result, &text) != CUDA_SUCCESS) text = NULL;
    vb_status status = result == CUDA_ERROR_OUT_OF_MEMORY ? VB_ERR_OOM
                       : result == CUDA_ERROR_INVALID_VALUE ? VB_ERR_INVALID
                                                            : VB_ERR_DEVICE;
    if (name && text) return vb_error(status, "cuda: %s: %s: %s", what, name, text);
    return vb_error(status, "cuda: %s: driver error %d", what, (int)result);
}

/* The same for a cuBLAS status. */
static vb_status cublas_failure(cublasStatus_t result, const char *what)
{
    (void)cudaGetLastError();
    return vb_error(result == CUBLAS_STATUS_ALLOC_FAILED ? VB_ERR_OOM
                    : result == CUBLAS_STATUS_INVALID_VALUE ? VB_ERR_INVALID
                                                            : VB_ERR_DEVICE,
                    "cuda: %s: %s", what, cublasGetStatusString(result));
}

/* ------------------------------------------------------------------------ */
/* Driver entry points                                                       */
/* ------------------------------------------------------------------------ */

/* Looks up one driver function; on failure notes it as the missing one. */
static void *driver_symbol(driver_api *driver, const char *symbol)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
    cudaError_t err = cudaGetDriverEntryPointByVersion(symbol, &fn, DRIVER_ABI_VERSION, cudaEnableDefault, &found);
#else
    cudaError_t err = cudaGetDriverEntryPoint(symbol, &fn, cudaEnableDefault, &found);
#endif
    if (err == cudaSuccess && found == cudaDriverEntryPointSuccess && fn) return fn;
    if (!driver->missing) {
        driver->missing = symbol;
        snprintf(driver->missing_reason, sizeof driver->missing_reason, "%s",
                 err != cudaSuccess ? cudaGetErrorString(err)
                 : found == cudaDriverEntryPointVersionNotSufficent ? "the driver is older than CUDA 12.0"
                                                                    : "the driver does not have it");
    }
    (void)cudaGetLastError();
    return NULL;
}

/* Resolves every driver function the virtual-memory ops need. */
static void resolve_driver(driver_api *driver)
{
    driver->get_error_name = (PFN_cuGetErrorName_v6000)driver_symbol(driver, "cuGetErrorName");
    driver->get_error_string = (PFN_cuGetErrorString_v6000)driver_symbol(driver, "cuGetErrorString");
    driver->get_granularity =
        (PFN_cuMemGetAllocationGranularity_v10020)driver_symbol(driver, "cuMemGetAllocationGranularity");
    driver->address_reserve = (PFN_cuMemAddressReserve_v10020)driver_symbol(driver, "cuMemAddressReserve");
    driver->address_free = (PFN_cuMemAddressFree_v10020)driver_symbol(driver, "cuMemAddressFree");
    driver->create = (PFN_cuMemCreate_v10020)driver_symbol(driver, "cuMemCreate");
    driver->release = (PFN_cuMemRelease_v10020)driver_symbol(driver, "cuMemRelease");
    driver->map = (PFN_cuMemMap_v10020)driver_symbol(driver, "cuMemMap");
    driver->set_access = (PFN_cuMemSetAccess_v10020)driver_symbol(driver, "cuMemSetAccess");
    driver->unmap = (PFN_cuMemUnmap_v10020)driver_symbol(driver, "cuMemUnmap");
}

/* Makes the device current on this thread (its primary context: driver
 * calls need a current context, and cudaMalloc, streams, events, pools and
 * launches go to the current device); a no-op when it is already. */
static vb_status use_device(const cuda_state *cuda)
{
    int current = -1;
    if (cudaGetDevice(&current) == cudaSuccess && current == cuda->device) return VB_OK;
    cudaError_t err = cudaSetDevice(cuda->device);
    if (err != cudaSuccess) return runtime_failure(VB_ERR_DEVICE, err, "cudaSetDevice(%d)", cuda->device);
    return VB_OK;
}

/* VB_OK when the virtual-memory calls can be made from this thread: every
 * entry point was found, and the device is current. */
static vb_status vm_ready(cuda_state *cuda)
{
    if (cuda->driver.missing)
        return vb_error(VB_ERR_UNSUPPORTED, "cuda: virtual memory unavailable: driver entry point %s not found (%s)",
                        cuda->driver.missing, cuda->driver.missing_reason);
    return use_device(cuda);
}

/* Pinned device memory on our device: what cuMemCreate makes. */
static CUmemAllocationProp physical_properties(int device)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    return prop;
}

/* ------------------------------------------------------------------------ */
/* Raw device memory                                                         */
/* ------------------------------------------------------------------------ */

static vb_status cuda_mem_alloc(vb_device *dev, uint64_t size, vb_addr *out)
{
    (void)dev;
    void *ptr = NULL;
    if (size == 0) return vb_error(VB_ERR_INVALID, "cuda: mem_alloc of 0 bytes");
    if (size > SIZE_MAX) return vb_error(VB_ERR_OOM, "cuda: out of memory: %llu bytes asked", (unsigned long long)size);
    cudaError_t err = cudaMalloc(&ptr, (size_t)size);
    if (err != cudaSuccess)
        return runtime_failure(status_of(err), err, "cudaMalloc of %llu bytes", (unsigned long long)size);
    *out = (vb_addr)(uintptr_t)ptr;
    return VB_OK;
}

/* cudaFree (it waits for the device); an address cudaFree does not know is VB_ERR_INVALID. */
static vb_status cuda_mem_free(vb_device *dev, vb_addr addr)
{
    (void)dev;
    cudaError_t err = cudaFree((void *)(uintptr_t)addr);
    if (err != cudaSuccess)
        return runtime_failure(err == cudaErrorInvalidValue || err == cudaErrorInvalidDevicePointer ? VB_ERR_INVALID
                                                                                                    : VB_ERR_DEVICE,
                               err, "cudaFree(0x%llx)", (unsigned long long)addr);
    return VB_OK;
}

/* Free and total device memory from cudaMemGetInfo. */
static vb_status cuda_mem_info(vb_device *dev, uint64_t *free_bytes, uint64_t *total_bytes)
{
    (void)dev;
    size_t free_now = 0, total = 0;
    cudaError_t err = cudaMemGetInfo(&free_now, &total);
    if (err != cudaSuccess) return runtime_failure(VB_ERR_DEVICE, err, "cudaMemGetInfo");
    *free_bytes = free_now;
    *total_bytes = total;
    return VB_OK;
}

/* ------------------------------------------------------------------------ */
/* Streams and events                                                        */
/* ------------------------------------------------------------------------ */

/* The CUDA handles behind our opaque ones (NULL stays the default stream). */
static cudaStream_t stream_of(vb_stream stream)
{
    return (cudaStream_t)(void *)stream;
}

static cudaEvent_t event_of(vb_event event)
{
    return (cudaEvent_t)(void *)event;
}

/* A non-blocking stream: no implicit synchronization with the default stream. */
static vb_status cuda_stream_create(vb_device *dev, vb_stream *out)
{
    cudaStream_t stream = NULL;
    (void)dev;
    cudaError_t err = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    if (err != cudaSuccess) return runtime_failure(status_of(err), err, "cudaStreamCreateWithFlags");
    *out = (vb_stream)(void *)stream;
    return VB_OK;
}

/* Destroys a stream we created; the default stream is left alone. A failure
 * can only be reported through the last-error message. */
static void cuda_stream_destroy(vb_device *dev, vb_stream stream)
{
    (void)dev;
    if (!stream) return;
    cudaError_t err = cudaStreamDestroy(stream_of(stream));
    if (err != cudaSuccess) runtime_failure(VB_ERR_DEVICE, err, "cudaStreamDestroy");
}

/* Waits for the stream's queued work. */
static vb_status cuda_stream_synchronize(vb_device *dev, vb_stream stream)
{
    (void)dev;
    cudaError_t err = cudaStreamSynchronize(stream_of(stream));
    if (err != cudaSuccess) return runtime_failure(VB_ERR_DEVICE, err, "cudaStreamSynchronize");
    return VB_OK;
}

/* Waits for all queued work on the device. */
static vb_status cuda_device_synchronize(vb_device *dev)
{
    (void)dev;
    cudaError_t err = cudaDeviceSynchronize();
    if (err != cudaSuccess) return runtime_failure(VB_ERR_DEVICE, err, "cudaDeviceSynchronize");
    return VB_OK;
}

/* Events with timing, so that event_elapsed_ms works on any of them. */
static vb_status cuda_event_create(vb_device *dev, vb_event *out)
{
    cudaEvent_t event = NULL;
    (void)dev;
    cudaError_t err = cudaEventCreate(&event);
    if (err != cudaSuccess) return runtime_failure(status_of(err), err, "cudaEventCreate");
    *out = (vb_event)(void *)event;
    return VB_OK;
}

/* Destroys an event (pending work is not waited for; CUDA frees it later). */
static void cuda_event_destroy(vb_device *dev, vb_event event)
{
    (void)dev;
    if (!event) return;
    cudaError_t err = cudaEventDestroy(event_of(event));
    if (err != cudaSuccess) runtime_failure(VB_ERR_DEVICE, err, "cudaEventDestroy");
}

/* Records the event at the current end of `stream`. */
static vb_status cuda_event_record(vb_device *dev, vb_event event, vb_stream stream)
{
    (void)dev;
    cudaError_t err = cudaEventRecord(event_of(event), stream_of(stream));
    if (err != cudaSuccess) return runtime_failure(VB_ERR_DEVICE, err, "cudaEventRecord");
    return VB_OK;
}

/* 1 when complete. An error (a broken context) reads as "not complete", the
 * answer under which no caller hands memory out too early; the message says
 * what failed. */
static int cuda_event_query(vb_device *dev, vb_event event)
{
    (void)dev;
    cudaError_t err = cudaEventQuery(event_of(event));
    if (err == cudaSuccess) return 1;
    if (err == cudaErrorNotReady) return 0;
    runtime_failure(VB_ERR_DEVICE, err, "cudaEventQuery");
    return 0;
}

/* Waits until the event's work has completed. */
static vb_status cuda_event_synchronize(vb_device *dev, vb_event event)
{
    (void)dev;
    cudaError_t err = cudaEventSynchronize(event_of(event));
    if (err != cudaSuccess) return runtime_failure(VB_ERR_DEVICE, err, "cudaEventSynchronize");
    return VB_OK;
}

/* Milliseconds between two completed events; one not completed is VB_ERR_INVALID as on the sim. */
static vb_status cuda_event_elapsed_ms(vb_device *dev, vb_event start, vb_event end, double *out)
{
    float ms = 0.0f;
    (void)dev;
    cudaError_t err = cudaEventElapsedTime(&ms, event_of(start), event_of(end));
    if (err != cudaSuccess)
        return runtime_failure(err == cudaErrorNotReady ? VB_ERR_INVALID : VB_ERR_DEVICE, err, "cudaEventElapsedTime");
    *out = ms;
    return VB_OK;
}

/* Later work on `stream` waits for the event (no host wait). */
static vb_status cuda_stream_wait_event(vb_device *dev, vb_stream stream, vb_event event)
{
    (void)dev;
    cudaError_t err = cudaStreamWaitEvent(stream_of(stream), event_of(event), 0);
    if (err != cudaSuccess) return runtime_failure(VB_ERR_DEVICE, err, "cudaStreamWaitEvent");
    return VB_OK;
}

/* ------------------------------------------------------------------------ */
/* Virtual memory (driver API)                                               */
/* ------------------------------------------------------------------------ */

static uint64_t cuda_vm_granularity(vb_device *dev)
{
    return cuda_of(dev)->granularity;
}

/* 1 if `value` is a positive multiple of the granularity. */
static int granular(const cuda_state *cuda, uint64_t value)
{
    return value > 0 && value % cuda->granularity == 0;
}

/* cuMemAddressReserve of `size` bytes (a multiple of the granularity) anywhere. */
static vb_status cuda_vm_reserve(vb_device *dev, uint64_t size, vb_addr *out)
{
    cuda_state *cuda = cuda_of(dev);
    CUdeviceptr ptr = 0;
    if (!granular(cuda, size) || size > SIZE_MAX)
        return vb_error(VB_ERR_INVALID, "cuda: vm_reserve of %llu bytes (not a positive multiple of %llu)",
                        (unsigned long long)size, (unsigned long long)cuda->granularity);
    vb_status status = vm_ready(cuda);
    if (status != VB_OK) return status;
    CUresult result = cuda->driver.address_reserve(&ptr, (size_t)size, 0, 0, 0);
    if (result != CUDA_SUCCESS)
        return driver_failure(&cuda->driver, result, "cuMemAddressReserve of %llu bytes", (unsigned long long)size);
    *out = (vb_addr)ptr;
    return VB_OK;
}

/* cuMemAddressFree of a whole reservation. */
static vb_status cuda_vm_free(vb_device *dev, vb_addr addr, uint64_t size)
{
    cuda_state *cuda = cuda_of(dev);
    vb_status status = vm_ready(cuda);
    if (status != VB_OK) return status;
    CUresult result = cuda->driver.address_free((CUdeviceptr)addr, (size_t)size);
    if (result != CUDA_SUCCESS)
        return driver_failure(&cuda->driver, result, "cuMemAddressFree(0x%llx, %llu)", (unsigned long long)addr,
                              (unsigned long long)size);
    return VB_OK;
}

/* cuMemCreate of `size` bytes of device memory; VB_ERR_OOM when the device has too little. */
static vb_status cuda_vm_create(vb_device *dev, uint64_t size, vb_phys *out)
{
    cuda_state *cuda = cuda_of(dev);
    CUmemGenericAllocationHandle handle = 0;
    if (!granular(cuda, size) || size > SIZE_MAX)
        return vb_error(VB_ERR_INVALID, "cuda: vm_create of %llu bytes (not a positive multiple of %llu)",
                        (unsigned long long)size, (unsigned long long)cuda->granularity);
    vb_status status = vm_ready(cuda);
    if (status != VB_OK) return status;
    CUmemAllocationProp prop = physical_properties(cuda->device);
    CUresult result = cuda->driver.create(&handle, (size_t)size, &prop, 0);
    if (result != CUDA_SUCCESS)
        return driver_failure(&cuda->driver, result, "cuMemCreate of %llu bytes", (unsigned long long)size);
    *out = (vb_phys)handle;
    return VB_OK;
}

/* cuMemRelease of an unmapped handle. */
static vb_status cuda_vm_release(vb_device *dev, vb_phys handle)
{
    cuda_state *cuda = cuda_of(dev);
    vb_status status = vm_ready(cuda);
    if (status != VB_OK) return status;
    CUresult result = cuda->driver.release((CUmemGenericAllocationHandle)handle);
    if (result != CUDA_SUCCESS)
        return driver_failure(&cuda->driver, result, "cuMemRelease of handle 0x%llx", (unsigned long long)handle);
    return VB_OK;
}

/* cuMemMap alone: access comes with cuda_vm_set_access, once per range. */
static vb_status cuda_vm_map(vb_device *dev, vb_addr addr, uint64_t size, vb_phys handle)
{
    cuda_state *cuda = cuda_of(dev);
    vb_status status = vm_ready(cuda);
    if (status != VB_OK) return status;
    CUresult result = cuda->driver.map((CUdeviceptr)addr, (size_t)size, 0, (CUmemGenericAllocationHandle)handle, 0);
    if (result != CUDA_SUCCESS)
        return driver_failure(&cuda->driver, result, "cuMemMap of %llu bytes at 0x%llx", (unsigned long long)size,
                              (unsigned long long)addr);
    return VB_OK;
}

/* Read-write access over [addr, addr+size) for our device and each of its
 * peers: one cuMemSetAccess, which may span several adjacent mappings, with
 * one descriptor per device. Every mapping any strategy makes passes here,
 * so each is open to the peers from the start. */
static vb_status cuda_vm_set_access(vb_device *dev, vb_addr addr, uint64_t size)
{
    cuda_state *cuda = cuda_of(dev);
    vb_status status = vm_ready(cuda);
    if (status != VB_OK) return status;
    CUresult result =
        cuda->driver.set_access((CUdeviceptr)addr, (size_t)size, cuda->access, (size_t)cuda->peer_count + 1);
    if (result != CUDA_SUCCESS)
        return driver_failure(&cuda->driver, result, "cuMemSetAccess of %llu bytes at 0x%llx for device %d and %d peer%s",
                              (unsigned long long)size, (unsigned long long)addr, cuda->device, cuda->peer_count,
                              cuda->peer_count == 1 ? "" : "s");
    return VB_OK;
}

/* One cuMemUnmap over whole adjacent mappings (NVIDIA's vectorAddMMAP
 * sample unmaps several with one call). Waits for the device first: unlike
 * cudaFree, cuMemUnmap does not wait for work still using the range (PyTorch's expandable segments synchronize
 * before unmapping for that reason), and the sim models it so. */
static vb_status cuda_vm_unmap(vb_device *dev, vb_addr addr, uint64_t size)
{
    cuda_state *cuda = cuda_of(dev);
    vb_status status = vm_ready(cuda);
    if (status == VB_OK) status = cuda_device_synchronize(dev);
    if (status != VB_OK) return status;
    CUresult result = cuda->driver.unmap((CUdeviceptr)addr, (size_t)size);
    if (result == CUDA_ERROR_INVALID_VALUE && size > cuda->granularity) {
        /* A driver that takes one mapping per call: unmap them one by one,
         * finding each one's size by trying granule multiples. */
        for (uint64_t offset = 0; offset < size;) {
            uint64_t piece = cuda->granularity;
            while ((result = cuda->driver.unmap((CUdeviceptr)(addr + offset), (size_t)piece)) != CUDA_SUCCESS &&
                   piece < size - offset)
                piece += cuda->granularity;
            if (result != CUDA_SUCCESS) break;
            offset += piece;
        }
    }
    if (result != CUDA_SUCCESS)
        return driver_failure(&cuda->driver, result, "cuMemUnmap of %llu bytes at 0x%llx", (unsigned long long)size,
                              (unsigned long long)addr);
    return VB_OK;
}

/* ------------------------------------------------------------------------ */
/* Stream-ordered pools                                                      */
/* ------------------------------------------------------------------------ */

static cudaMemPool_t pool_of(vb_pool pool)
{
    return (cudaMemPool_t)(void *)pool;
}

/* A pool of device memory on our device with the given release threshold. */
static vb_status cuda_pool_create(vb_device *dev, uint64_t release_threshold, vb_pool *out)
{
    cuda_state *cuda = cuda_of(dev);
    int supported = 0;
    cudaError_t err = cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, cuda->device);
    if (err != cudaSuccess) return runtime_failure(VB_ERR_DEVICE, err, "cudaDeviceGetAttribute(MemoryPoolsSupported)");
    if (!supported) return vb_error(VB_ERR_UNSUPPORTED, "cuda: this device has no stream-ordered memory pools");
    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = cuda->device;
    cudaMemPool_t pool = NULL;
    err = cudaMemPoolCreate(&pool, &props);
    if (err != cudaSuccess) return runtime_failure(status_of(err), err, "cudaMemPoolCreate");
    uint64_t threshold = release_threshold;
    vb_status status = VB_OK;
    err = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold);
    if (err != cudaSuccess)
        status = runtime_failure(VB_ERR_DEVICE, err, "cudaMemPoolSetAttribute(ReleaseThreshold, %llu)",
                                 (unsigned long long)release_threshold);
    /* Open to the peers: a pool's memory is its device's alone until then. */
    if (status == VB_OK && cuda->peer_count > 0) {
        err = cudaMemPoolSetAccess(pool, cuda->pool_access, (size_t)cuda->peer_count);
        if (err != cudaSuccess)
            status = runtime_failure(VB_ERR_DEVICE, err, "cudaMemPoolSetAccess for %d peer%s", cuda->peer_count,
                                     cuda->peer_count == 1 ? "" : "s");
    }
    if (status != VB_OK) {
        cudaMemPoolDestroy(pool); /* the message above is the one to report */
        (void)cudaGetLastError();
        return status;
    }
    *out = (vb_pool)(void *)pool;
    return VB_OK;
}

/* Destroys the pool; CUDA releases its memory once no allocation from it
 * is outstanding. */
static void cuda_pool_destroy(vb_device *dev, vb_pool pool)
{
    (void)dev;
    if (!pool) return;
    cudaError_t err = cudaMemPoolDestroy(pool_of(pool));
    if (err != cudaSuccess) runtime_failure(VB_ERR_DEVICE, err, "cudaMemPoolDestroy");
}

/* cudaMallocFromPoolAsync on `stream`; VB_ERR_OOM when the pool cannot grow. */
static vb_status cuda_pool_malloc(vb_device *dev, vb_pool pool, uint64_t size, vb_stream stream, vb_addr *out)
{
    void *ptr = NULL;
    if (size == 0) return vb_error(VB_ERR_INVALID, "cuda: pool_malloc of 0 bytes");
    if (size > SIZE_MAX) return vb_error(VB_ERR_OOM, "cuda: out of memory: %llu bytes asked", (unsigned long long)size);
    (void)dev;
    cudaError_t err = cudaMallocFromPoolAsync(&ptr, (size_t)size, pool_of(pool), stream_of(stream));
    if (err != cudaSuccess)
        return runtime_failure(status_of(err), err, "cudaMallocFromPoolAsync of %llu bytes", (unsigned long long)size);
    *out = (vb_addr)(uintptr_t)ptr;
    return VB_OK;
}

/* cudaFreeAsync on `stream`. */
static vb_status cuda_pool_free(vb_device *dev, vb_pool pool, vb_addr addr, vb_stream stream)
{
    (void)dev, (void)pool; /* cudaFreeAsync finds the pool from the pointer */
    cudaError_t err = cudaFreeAsync((void *)(uintptr_t)addr, stream_of(stream));
    if (err != cudaSuccess)
        return runtime_failure(err == cudaErrorInvalidValue ? VB_ERR_INVALID : VB_ERR_DEVICE, err,
                               "cudaFreeAsync(0x%llx)", (unsigned long long)addr);
    return VB_OK;
}

/* cudaMemPoolTrimTo: CUDA keeps what backs live or not yet completed frees. */
static vb_status cuda_pool_trim(vb_device *dev, vb_pool pool, uint64_t keep_bytes)
{
    (void)dev;
    cudaError_t err = cudaMemPoolTrimTo(pool_of(pool), (size_t)(keep_bytes > SIZE_MAX ? SIZE_MAX : keep_bytes));
    if (err != cudaSuccess)
        return runtime_failure(VB_ERR_DEVICE, err, "cudaMemPoolTrimTo(%llu)", (unsigned long long)keep_bytes);
    return VB_OK;
}

/* The pool's ReservedMemCurrent and UsedMemCurrent attributes. */
static vb_status cuda_pool_usage(vb_device *dev, vb_pool pool, uint64_t *reserved_bytes, uint64_t *used_bytes)
{
    uint64_t reserved = 0, used = 0;
    (void)dev;
    cudaError_t err = cudaMemPoolGetAttribute(pool_of(pool), cudaMemPoolAttrReservedMemCurrent, &reserved);
    if (err != cudaSuccess) return runtime_failure(VB_ERR_DEVICE, err, "cudaMemPoolGetAttribute(ReservedMemCurrent)");
    err = cudaMemPoolGetAttribute(pool_of(pool), cudaMemPoolAttrUsedMemCurrent, &used);
    if (err != cudaSuccess) return runtime_failure(VB_ERR_DEVICE, err, "cudaMemPoolGetAttribute(UsedMemCurrent)");
    *reserved_bytes = reserved;
    *used_bytes = used;
    return VB_OK;
}

/* The pool's ReservedMemHigh and UsedMemHigh attributes. */
static vb_status cuda_pool_high(vb_device *dev, vb_pool pool, uint64_t *reserved_high, uint64_t *used_high)
{
    uint64_t reserved = 0, used = 0;
    (void)dev;
    cudaError_t err = cudaMemPoolGetAttribute(pool_of(pool), cudaMemPoolAttrReservedMemHigh, &reserved);
    if (err != cudaSuccess) return runtime_failure(VB_ERR_DEVICE, err, "cudaMemPoolGetAttribute(ReservedMemHigh)");
    err = cudaMemPoolGetAttribute(pool_of(pool), cudaMemPoolAttrUsedMemHigh, &used);
    if (err != cudaSuccess) return runtime_failure(VB_ERR_DEVICE, err, "cudaMemPoolGetAttribute(UsedMemHigh)");
    *reserved_high = reserved;
    *used_high = used;
    return VB_OK;
}

/* Setting a high-water mark to 0 restarts it from the current value (the
 * only value CUDA accepts for these attributes). */
static vb_status cuda_pool_reset_high(vb_device *dev, vb_pool pool)
{
    uint64_t zero = 0;
    (void)dev;
    cudaError_t err = cudaMemPoolSetAttribute(pool_of(pool), cudaMemPoolAttrReservedMemHigh, &zero);
    if (err != cudaSuccess) return runtime_failure(VB_ERR_DEVICE, err, "cudaMemPoolSetAttribute(ReservedMemHigh, 0)");
    err = cudaMemPoolSetAttribute(pool_of(pool), cudaMemPoolAttrUsedMemHigh, &zero);
    if (err != cudaSuccess) return runtime_failure(VB_ERR_DEVICE, err, "cudaMemPoolSetAttribute(UsedMemHigh, 0)");
    return VB_OK;
}

/* ------------------------------------------------------------------------ */
/* Host memory and copies                                                    */
/* ------------------------------------------------------------------------ */

static vb_status cuda_host_alloc_pinned(vb_device *dev, uint64_t size, void **out)
{
    void *ptr = NULL;
    (void)dev;
    if (size > SIZE_MAX) return vb_error(VB_ERR_OOM, "cuda: %llu pinned bytes asked", (unsigned long long)size);
    cudaError_t err = cudaMallocHost(&ptr, size ? (size_t)size : 1);
    if (err != cudaSuccess)
        return runtime_failure(status_of(err), err, "cudaMallocHost of %llu bytes", (unsigned long long)size);
    *out = ptr;
    return VB_OK;
}

/* cudaFreeHost of what host_alloc_pinned returned (NULL is fine). */
static void cuda_host_free_pinned(vb_device *dev, void *ptr)
{
    (void)dev;
    if (!ptr) return;
    cudaError_t err = cudaFreeHost(ptr);
    if (err != cudaSuccess) runtime_failure(VB_ERR_DEVICE, err, "cudaFreeHost");
}

/* cudaMemcpyAsync in the direction `kind` names (device.h: for device to
 * device, `host` holds the source device address). */
static vb_status cuda_memcpy_async(vb_device *dev, void *host, vb_addr device_addr, uint64_t size, vb_copy_kind kind,
                                   vb_stream stream)
{
    void *device_ptr = (void *)(uintptr_t)device_addr;
    cudaError_t err;
    (void)dev;
    switch (kind) {
    case VB_COPY_HOST_TO_DEVICE:
        err = cudaMemcpyAsync(device_ptr, host, (size_t)size, cudaMemcpyHostToDevice, stream_of(stream));
        break;
    case VB_COPY_DEVICE_TO_HOST:
        err = cudaMemcpyAsync(host, device_ptr, (size_t)size, cudaMemcpyDeviceToHost, stream_of(stream));
        break;
    case VB_COPY_DEVICE_TO_DEVICE:
        err = cudaMemcpyAsync(device_ptr, host, (size_t)size, cudaMemcpyDeviceToDevice, stream_of(stream));
        break;
    default:
        return vb_error(VB_ERR_INVALID, "cuda: memcpy_async of unknown kind %d", (int)kind);
    }
    if (err != cudaSuccess)
        return runtime_failure(VB_ERR_DEVICE, err, "cudaMemcpyAsync of %llu bytes", (unsigned long long)size);
    return VB_OK;
}

/* ------------------------------------------------------------------------ */
/* Work: kernels and cuBLAS                                                  */
/* ------------------------------------------------------------------------ */

/* A kernel launcher's result as a status. */
static vb_status launched(cudaError_t err, const char *kernel)
{
    if (err != cudaSuccess) return runtime_failure(VB_ERR_DEVICE, err, "launch of %s", kernel);
    return VB_OK;
}

/* The launchers of device_cuda_kernels.cu, their launch errors as statuses. */
static vb_status cuda_enqueue_busy(vb_device *dev, vb_stream stream, uint64_t nanoseconds)
{
    (void)dev;
    return launched(vb_cuda_launch_busy(stream_of(stream), nanoseconds), "busy kernel");
}

static vb_status cuda_fill_random_f32(vb_device *dev, vb_stream stream, vb_addr addr, uint64_t count, uint64_t seed)
{
    (void)dev;
    return launched(vb_cuda_launch_fill_random_f32(stream_of(stream), (float *)(uintptr_t)addr, count, seed),
                    "fill_random_f32");
}

static vb_status cuda_relu_f32(vb_device *dev, vb_stream stream, vb_addr out, vb_addr in, uint64_t count)
{
    (void)dev;
    return launched(vb_cuda_launch_relu_f32(stream_of(stream), (float *)(uintptr_t)out,
                                            (const float *)(uintptr_t)in, count),
                    "relu_f32");
}

static vb_status cuda_fill_pattern(vb_device *dev, vb_stream stream, vb_addr addr, uint64_t size, uint64_t seed)
{
    (void)dev;
    return launched(vb_cuda_launch_fill_pattern(stream_of(stream), (void *)(uintptr_t)addr, size, seed),
                    "fill_pattern");
}

/* Waits for all queued work (the fill may be on any stream), then reads the
 * range back on the default stream. */
static vb_status cuda_verify_pattern(vb_device *dev, vb_addr addr, uint64_t size, uint64_t seed,
                                     uint64_t *mismatched_bytes)
{
    vb_status status = cuda_device_synchronize(dev);
    if (status != VB_OK) return status;
    cudaError_t err = vb_cuda_verify_pattern(NULL, (const void *)(uintptr_t)addr, size, seed, mismatched_bytes);
    if (err != cudaSuccess)
        return runtime_failure(VB_ERR_DEVICE, err, "verify_pattern over %llu bytes at 0x%llx",
                               (unsigned long long)size, (unsigned long long)addr);
    return VB_OK;
}

/* The cuBLAS handle, created on first use, bound to `stream`. */
static vb_status cublas_on(cuda_state *cuda, vb_stream stream, cublasHandle_t *out)
{
    cublasStatus_t result;
    if (!cuda->have_cublas) {
        result = cublasCreate(&cuda->cublas);
        if (result != CUBLAS_STATUS_SUCCESS) return cublas_failure(result, "cublasCreate");
        cuda->have_cublas = 1;
    }
    result = cublasSetStream(cuda->cublas, stream_of(stream));
    if (result != CUBLAS_STATUS_SUCCESS) return cublas_failure(result, "cublasSetStream");
    *out = cuda->cublas;
    return VB_OK;
}

/* cublasSgemm on `stream`, column-major, alpha and beta from the host. */
static vb_status cuda_gemm_f32(vb_device *dev, vb_stream stream, int transpose_a, int transpose_b, int m, int n,
                               int k, float alpha, vb_addr a, int lda, vb_addr b, int ldb, float beta, vb_addr c,
                               int ldc)
{
    cublasHandle_t handle = NULL; /* set by cublas_on before use; gcc -O3 cannot tell (maybe-uninitialized) */
    if (m < 0 || n < 0 || k < 0) return vb_error(VB_ERR_INVALID, "cuda: gemm with a negative dimension");
    vb_status status = cublas_on(cuda_of(dev), stream, &handle);
    if (status != VB_OK) return status;
    cublasStatus_t result = cublasSgemm(handle, transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                                        transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha,
                                        (const float *)(uintptr_t)a, lda, (const float *)(uintptr_t)b, ldb, &beta,
                                        (float *)(uintptr_t)c, ldc);
    if (result != CUBLAS_STATUS_SUCCESS) return cublas_failure(result, "cublasSgemm");
    return VB_OK;
}

/* cublasSaxpy takes an int count, so longer vectors go in pieces. */
static vb_status cuda_axpy_f32(vb_device *dev, vb_stream stream, float alpha, vb_addr x, vb_addr y, uint64_t count)
{
    const uint64_t piece = (uint64_t)1 << 30;
    cublasHandle_t handle = NULL; /* set by cublas_on before use; gcc -O3 cannot tell (maybe-uninitialized) */
    vb_status status = cublas_on(cuda_of(dev), stream, &handle);
    if (status != VB_OK) return status;
    for (uint64_t done = 0; done < count; done += piece) {
        uint64_t n = count - done < piece ? count - done : piece;
        cublasStatus_t result = cublasSaxpy(handle, (int)n, &alpha, (const float *)(uintptr_t)x + done, 1,
                                            (float *)(uintptr_t)y + done, 1);
        if (result != CUBLAS_STATUS_SUCCESS) return cublas_failure(result, "cublasSaxpy");
    }
    return VB_OK;
}

/* ------------------------------------------------------------------------ */
/* Device                                                                    */
/* ------------------------------------------------------------------------ */

static void cuda_info(vb_device *dev, vb_device_info *out)
{
    *out = cuda_of(dev)->info;
}

/* The device itself and the peers found when it opened. */
static int cuda_peer_access(vb_device *dev, int peer)
{
    const cuda_state *cuda = cuda_of(dev);
    if (peer == cuda->device) return 1;
    for (int i = 0; i < cuda->peer_count; i++)
        if (cuda->peers[i] == peer) return 1;
    return 0;
}

static void note_closed(const cuda_state *cuda);

/* Releases what the backend holds itself; memory, streams and pools belong
 * to their creators. */
static void cuda_close(vb_device *dev)
{
    cuda_state *cuda = cuda_of(dev);
    if (cuda->have_cublas) {
        (void)use_device(cuda); /* the handle belongs to its device */
        cublasStatus_t result = cublasDestroy(cuda->cublas);
        if (result != CUBLAS_STATUS_SUCCESS) cublas_failure(result, "cublasDestroy");
    }
    if (cuda->noted_open) note_closed(cuda);
    free(cuda->peers);
    free(cuda->access);
    free(cuda->pool_access);
    free(cuda);
    free(dev);
}

/* ------------------------------------------------------------------------ */
/* The device current for every op                                          */
/* ------------------------------------------------------------------------ */

/* Each op that calls CUDA runs with its device current (use_device), so no
 * caller has to think of cudaSetDevice: a stream, event or pool is created
 * on its device, a NULL stream is its device's default stream, a launch
 * goes to it. The virtual-memory ops do so in vm_ready. The current device
 * stays switched; the plug-in, which shares the thread with PyTorch, puts
 * PyTorch's back (plugin/torch_plugin.c). */
#define ON_DEVICE(name, params, args)              \
    static vb_status current_##name params         \
    {                                              \
        VB_TRY(use_device(cuda_of(dev)));          \
        return cuda_##name args;                   \
    }
#define ON_DEVICE_VOID(name, params, args)         \
    static void current_##name params              \
    {                                              \
        (void)use_device(cuda_of(dev));            \
        cuda_##name args;                          \
    }

ON_DEVICE(mem_alloc, (vb_device *dev, uint64_t size, vb_addr *out), (dev, size, out))
ON_DEVICE(mem_free, (vb_device *dev, vb_addr addr), (dev, addr))
ON_DEVICE(mem_info, (vb_device *dev, uint64_t *free_bytes, uint64_t *total_bytes), (dev, free_bytes, total_bytes))
ON_DEVICE(stream_create, (vb_device *dev, vb_stream *out), (dev, out))
ON_DEVICE_VOID(stream_destroy, (vb_device *dev, vb_stream stream), (dev, stream))
ON_DEVICE(stream_synchronize, (vb_device *dev, vb_stream stream), (dev, stream))
ON_DEVICE(device_synchronize, (vb_device *dev), (dev))
ON_DEVICE(event_create, (vb_device *dev, vb_event *out), (dev, out))
ON_DEVICE_VOID(event_destroy, (vb_device *dev, vb_event event), (dev, event))
ON_DEVICE(event_record, (vb_device *dev, vb_event event, vb_stream stream), (dev, event, stream))
ON_DEVICE(event_synchronize, (vb_device *dev, vb_event event), (dev, event))
ON_DEVICE(event_elapsed_ms, (vb_device *dev, vb_event start, vb_event end, double *out), (dev, start, end, out))
ON_DEVICE(stream_wait_event, (vb_device *dev, vb_stream stream, vb_event event), (dev, stream, event))
ON_DEVICE(pool_create, (vb_device *dev, uint64_t release_threshold, vb_pool *out), (dev, release_threshold, out))
ON_DEVICE_VOID(pool_destroy, (vb_device *dev, vb_pool pool), (dev, pool))
ON_DEVICE(pool_malloc, (vb_device *dev, vb_pool pool, uint64_t size, vb_stream stream, vb_addr *out), (dev, pool, size, stream, out))
ON_DEVICE(pool_free, (vb_device *dev, vb_pool pool, vb_addr addr, vb_stream stream), (dev, pool, addr, stream))
ON_DEVICE(pool_trim, (vb_device *dev, vb_pool pool, uint64_t keep_bytes), (dev, pool, keep_bytes))
ON_DEVICE(pool_usage, (vb_device *dev, vb_pool pool, uint64_t *reserved_bytes, uint64_t *used_bytes), (dev, pool, reserved_bytes, used_bytes))
ON_DEVICE(pool_high, (vb_device *dev, vb_pool pool, uint64_t *reserved_high, uint64_t *used_high), (dev, pool, reserved_high, used_high))
ON_DEVICE(pool_reset_high, (vb_device *dev, vb_pool pool), (dev, pool))
ON_DEVICE(host_alloc_pinned, (vb_device *dev, uint64_t size, void **out), (dev, size, out))
ON_DEVICE_VOID(host_free_pinned, (vb_device *dev, void *ptr), (dev, ptr))
ON_DEVICE(memcpy_async, (vb_device *dev, void *host, vb_addr device_addr, uint64_t size, vb_copy_kind kind, vb_stream stream), (dev, host, device_addr, size, kind, stream))
ON_DEVICE(enqueue_busy, (vb_device *dev, vb_stream stream, uint64_t nanoseconds), (dev, stream, nanoseconds))
ON_DEVICE(gemm_f32, (vb_device *dev, vb_stream stream, int transpose_a, int transpose_b, int m, int n, int k, float alpha, vb_addr a, int lda, vb_addr b, int ldb, float beta, vb_addr c, int ldc), (dev, stream, transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
ON_DEVICE(fill_random_f32, (vb_device *dev, vb_stream stream, vb_addr addr, uint64_t count, uint64_t seed), (dev, stream, addr, count, seed))
ON_DEVICE(relu_f32, (vb_device *dev, vb_stream stream, vb_addr out, vb_addr in, uint64_t count), (dev, stream, out, in, count))
ON_DEVICE(axpy_f32, (vb_device *dev, vb_stream stream, float alpha, vb_addr x, vb_addr y, uint64_t count), (dev, stream, alpha, x, y, count))
ON_DEVICE(fill_pattern, (vb_device *dev, vb_stream stream, vb_addr addr, uint64_t size, uint64_t seed), (dev, stream, addr, size, seed))
ON_DEVICE(verify_pattern, (vb_device *dev, vb_addr addr, uint64_t size, uint64_t seed, uint64_t *mismatched_bytes), (dev, addr, size, seed, mismatched_bytes))

/* An error switching devices reads as "not complete", as cuda_event_query's own. */
static int current_event_query(vb_device *dev, vb_event event)
{
    return use_device(cuda_of(dev)) == VB_OK && cuda_event_query(dev, event);
}

static const vb_device_ops cuda_ops = {
    .name = "cuda",
    .close = cuda_close,
    .info = cuda_info,
    .mem_alloc = current_mem_alloc,
    .mem_free = current_mem_free,
    .mem_info = current_mem_info,
    .stream_create = current_stream_create,
    .stream_destroy = current_stream_destroy,
    .stream_synchronize = current_stream_synchronize,
    .device_synchronize = current_device_synchronize,
    .event_create = current_event_create,
    .event_destroy = current_event_destroy,
    .event_record = current_event_record,
    .event_query = current_event_query,
    .event_synchronize = current_event_synchronize,
    .event_elapsed_ms = current_event_elapsed_ms,
    .stream_wait_event = current_stream_wait_event,
    .vm_granularity = cuda_vm_granularity,
    .vm_reserve = cuda_vm_reserve,
    .vm_free = cuda_vm_free,
    .vm_create = cuda_vm_create,
    .vm_release = cuda_vm_release,
    .vm_map = cuda_vm_map,
    .vm_set_access = cuda_vm_set_access,
    .vm_unmap = cuda_vm_unmap,
    .pool_create = current_pool_create,
    .pool_destroy = current_pool_destroy,
    .pool_malloc = current_pool_malloc,
    .pool_free = current_pool_free,
    .pool_trim = current_pool_trim,
    .pool_usage = current_pool_usage,
    .pool_high = current_pool_high,
    .pool_reset_high = current_pool_reset_high,
    .host_alloc_pinned = current_host_alloc_pinned,
    .host_free_pinned = current_host_free_pinned,
    .memcpy_async = current_memcpy_async,
    .enqueue_busy = current_enqueue_busy,
    .gemm_f32 = current_gemm_f32,
    .fill_random_f32 = current_fill_random_f32,
    .relu_f32 = current_relu_f32,
    .axpy_f32 = current_axpy_f32,
    .fill_pattern = current_fill_pattern,
    .verify_pattern = current_verify_pattern,
    .peer_access = cuda_peer_access,
};

/* Why the last vb_cuda_device_count() found no GPU ("" when it found one). */
static char unavailable_reason[256];

/* GPUs the runtime sees; 0, never a crash, without a driver or a GPU. */
int vb_cuda_device_count(void)
{
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err == cudaErrorInsufficientDriver) {
        /* What the runtime says when there is no driver at all, too. */
        snprintf(unavailable_reason, sizeof unavailable_reason,
                 "no NVIDIA driver, or one older than this build's CUDA runtime %d.%d", CUDART_VERSION / 1000,
                 CUDART_VERSION % 1000 / 10);
        (void)cudaGetLastError();
        return 0;
    }
    if (err != cudaSuccess) {
        snprintf(unavailable_reason, sizeof unavailable_reason, "cudaGetDeviceCount: %s: %s", cudaGetErrorName(err),
                 cudaGetErrorString(err));
        (void)cudaGetLastError();
        return 0;
    }
    if (count <= 0) snprintf(unavailable_reason, sizeof unavailable_reason, "the CUDA driver reports no GPU");
    else unavailable_reason[0] = '\0';
    return count > 0 ? count : 0;
}

/* The reason kept by the last vb_cuda_device_count() that returned 0. */
const char *vb_cuda_unavailable_reason(void)
{
    return unavailable_reason;
}

/* NVML (libnvidia-ml, which ships with the driver, loaded at run time) is
 * the one view of device memory that exists before a CUDA context does, so
 * the context's own share can be measured: used memory before creating it
 * and after. */
typedef struct nvml_memory {
    unsigned long long total, free, used; /* nvmlMemory_t */
} nvml_memory;

typedef struct nvml_probe {
    void *library;
    void *device;
    int (*memory_info)(void *device, nvml_memory *out);
    int (*shutdown)(void);
} nvml_probe;

/* Opens NVML on the device with the PCI bus id of CUDA device `device`; 0 on
 * success. Failing is no error: the context's size is then unknown. */
static int nvml_open(int device, nvml_probe *probe)
{
    char bus_id[32];
    memset(probe, 0, sizeof *probe);
    if (cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    probe->library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!probe->library) return -1;
    int (*init)(void) = (int (*)(void))dlsym(probe->library, "nvmlInit_v2");
    int (*by_bus_id)(const char *, void **) =
        (int (*)(const char *, void **))dlsym(probe->library, "nvmlDeviceGetHandleByPciBusId_v2");
    probe->memory_info = (int (*)(void *, nvml_memory *))dlsym(probe->library, "nvmlDeviceGetMemoryInfo");
    probe->shutdown = (int (*)(void))dlsym(probe->library, "nvmlShutdown");
    if (!init || !by_bus_id || !probe->memory_info || !probe->shutdown || init() != 0) {
        dlclose(probe->library);
        probe->library = NULL;
        return -1;
    }
    if (by_bus_id(bus_id, &probe->device) != 0) {
        probe->shutdown();
        dlclose(probe->library);
        probe->library = NULL;
        return -1;
    }
    return 0;
}

/* Used device memory as NVML sees it; 0 when unknown. */
static uint64_t nvml_used(const nvml_probe *probe)
{
    nvml_memory memory;
    if (!probe->library || probe->memory_info(probe->device, &memory) != 0) return 0;
    return memory.used;
}

static void nvml_close(nvml_probe *probe)
{
    if (!probe->library) return;
    probe->shutdown();
    dlclose(probe->library);
    probe->library = NULL;
}

/* Makes device cuda->device's primary context current on this thread and
 * fills in what the device says about itself. */
static vb_status init_device(cuda_state *cuda, int device_count)
{
    nvml_probe nvml;
    int have_nvml = nvml_open(cuda->device, &nvml) == 0;
    uint64_t used_before_context = have_nvml ? nvml_used(&nvml) : 0;
    cudaError_t err = cudaSetDevice(cuda->device);
    if (err == cudaSuccess) err = cudaFree(NULL); /* creates the context on runtimes before 12.0 too */
    uint64_t used_after_context = have_nvml && err == cudaSuccess ? nvml_used(&nvml) : 0;
    if (have_nvml) nvml_close(&nvml);
    if (err != cudaSuccess) return runtime_failure(VB_ERR_DEVICE, err, "initialising device %d", cuda->device);
    /* Loads our kernels now (CUDA loads modules lazily, at first launch), so
     * a later first launch does not move the driver's used memory under an
     * allocator that reads it (external:, allocators/external.c). */
    err = vb_cuda_launch_busy(NULL, 0);
    if (err == cudaSuccess) err = cudaDeviceSynchronize();
    if (err != cudaSuccess) return runtime_failure(VB_ERR_DEVICE, err, "loading the backend's kernels");

    struct cudaDeviceProp props;
    err = cudaGetDeviceProperties(&props, cuda->device);
    if (err != cudaSuccess) return runtime_failure(VB_ERR_DEVICE, err, "cudaGetDeviceProperties(%d)", cuda->device);
    vb_device_info *info = &cuda->info;
    memset(info, 0, sizeof *info);
    info->kind = VB_DEVICE_CUDA;
    info->ordinal = cuda->device;
    info->device_count = device_count;
    size_t name_length = strnlen(props.name, sizeof props.name);
    if (name_length >= sizeof info->name) name_length = sizeof info->name - 1; /* names are far shorter */
    memcpy(info->name, props.name, name_length);
    info->name[name_length] = '\0';
    info->total_bytes = props.totalGlobalMem;
    if (used_before_context && used_after_context > used_before_context)
        info->context_bytes = used_after_context - used_before_context;
    err = cudaDriverGetVersion(&info->driver_version);
    if (err == cudaSuccess) err = cudaRuntimeGetVersion(&info->runtime_version);
    if (err != cudaSuccess) return runtime_failure(VB_ERR_DEVICE, err, "cudaDriverGetVersion/cudaRuntimeGetVersion");

    resolve_driver(&cuda->driver);
    cuda->granularity = VB_DRIVER_PAGE;
    if (!cuda->driver.missing) {
        CUmemAllocationProp prop = physical_properties(cuda->device);
        size_t granularity = 0;
        CUresult result = cuda->driver.get_granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
        if (result != CUDA_SUCCESS)
            return driver_failure(&cuda->driver, result, "cuMemGetAllocationGranularity");
        if (granularity > 0) cuda->granularity = granularity;
    }
    return VB_OK;
}

/* ------------------------------------------------------------------------ */
/* Peers                                                                     */
/* ------------------------------------------------------------------------ */

/* The other devices that may access this one's memory, over all the GPUs
 * (cudaDeviceCanAccessPeer(p, device): "p is capable of directly accessing
 * device's memory"; a device query, no context is made), and the access
 * lists vm_set_access and pool_create give the driver. */
static vb_status find_peers(cuda_state *cuda)
{
    int count = cuda->info.device_count;
    cuda->peers = calloc((size_t)count, sizeof *cuda->peers);
    cuda->access = calloc((size_t)count, sizeof *cuda->access);
    cuda->pool_access = calloc((size_t)count, sizeof *cuda->pool_access);
    if (!cuda->peers || !cuda->access || !cuda->pool_access) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    cuda->access[0].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    cuda->access[0].location.id = cuda->device;
    cuda->access[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    for (int peer = 0; peer < count; peer++) {
        if (peer == cuda->device) continue;
        int can = 0;
        cudaError_t err = cudaDeviceCanAccessPeer(&can, peer, cuda->device);
        if (err != cudaSuccess)
            return runtime_failure(VB_ERR_DEVICE, err, "cudaDeviceCanAccessPeer(%d, %d)", peer, cuda->device);
        if (!can) continue;
        int i = cuda->peer_count++;
        cuda->peers[i] = peer;
        cuda->access[i + 1].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        cuda->access[i + 1].location.id = peer;
        cuda->access[i + 1].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        cuda->pool_access[i].location.type = cudaMemLocationTypeDevice;
        cuda->pool_access[i].location.id = peer;
        cuda->pool_access[i].flags = cudaMemAccessFlagsProtReadWrite;
    }
    return VB_OK;
}

/* The devices open in this process, by ordinal: how many handles each.
 * Context peer access (cudaDeviceEnablePeerAccess, what makes cudaMalloc
 * memory usable by another device) is a matter of two contexts, so it is
 * enabled when the second of two devices opens, both ways: after both are
 * open the answer is the same whichever came first. */
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static int *open_handles;
static int open_capacity;

/* Lets device `from` access device `to`'s cudaMalloc memory, where the
 * hardware allows it. Already enabled (by PyTorch's get_p2p_access, say) is
 * fine; past the driver's peer limit (cudaErrorTooManyPeers) copies are
 * staged and direct access is not had. */
static vb_status enable_context_peer(int from, int to)
{
    int can = 0;
    cudaError_t err = cudaDeviceCanAccessPeer(&can, from, to);
    if (err != cudaSuccess) return runtime_failure(VB_ERR_DEVICE, err, "cudaDeviceCanAccessPeer(%d, %d)", from, to);
    if (!can) return VB_OK;
    err = cudaSetDevice(from);
    if (err == cudaSuccess) err = cudaDeviceEnablePeerAccess(to, 0);
    if (err == cudaSuccess) return VB_OK;
    (void)cudaGetLastError();
    if (err == cudaErrorPeerAccessAlreadyEnabled || err == cudaErrorTooManyPeers) return VB_OK;
    return runtime_failure(VB_ERR_DEVICE, err, "cudaDeviceEnablePeerAccess(%d) on device %d", to, from);
}

/* Counts the device among the open ones, enabling context peer access
 * between it and each device already open, both ways; leaves it current. */
static vb_status note_open(cuda_state *cuda)
{
    int count = cuda->info.device_count;
    vb_status status = VB_OK;
    pthread_mutex_lock(&open_lock);
    if (open_capacity < count) {
        int *grown = realloc(open_handles, (size_t)count * sizeof *grown);
        if (grown) {
            memset(grown + open_capacity, 0, (size_t)(count - open_capacity) * sizeof *grown);
            open_handles = grown;
            open_capacity = count;
        } else {
            status = vb_error(VB_ERR_HOST_OOM, "out of host memory");
        }
    }
    for (int other = 0; other < count && status == VB_OK; other++) {
        if (other == cuda->device || open_handles[other] == 0) continue;
        status = enable_context_peer(other, cuda->device);
        if (status == VB_OK) status = enable_context_peer(cuda->device, other);
    }
    if (status == VB_OK) {
        open_handles[cuda->device]++;
        cuda->noted_open = 1;
    }
    pthread_mutex_unlock(&open_lock);
    vb_status current = use_device(cuda);
    return status != VB_OK ? status : current;
}

/* Counts a handle of the device closed (context peer access stays: the
 * primary contexts do). */
static void note_closed(const cuda_state *cuda)
{
    pthread_mutex_lock(&open_lock);
    open_handles[cuda->device]--;
    pthread_mutex_unlock(&open_lock);
}

/* ------------------------------------------------------------------------ */
/* Opening                                                                   */
/* ------------------------------------------------------------------------ */

/* Opens CUDA device `ordinal` (an index after CUDA_VISIBLE_DEVICES), its
 * peers found and context peer access enabled with the devices already
 * open; base/device.c puts a cap around it when asked. */
vb_status vb_cuda_open(int ordinal, vb_device **out)
{
    int count = vb_cuda_device_count();
    if (count == 0) return vb_error(VB_ERR_UNSUPPORTED, "cuda: no usable GPU (%s)", unavailable_reason);
    if (ordinal < 0 || ordinal >= count)
        return vb_error(VB_ERR_INVALID, "cuda: device %d asked of a machine of %d GPU%s", ordinal, count,
                        count == 1 ? "" : "s");
    vb_device *dev = calloc(1, sizeof *dev);
    cuda_state *cuda = calloc(1, sizeof *cuda);
    if (!dev || !cuda) {
        free(dev);
        free(cuda);
        return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    }
    dev->ops = &cuda_ops;
    dev->state = cuda;
    cuda->device = ordinal;
    vb_status status = init_device(cuda, count);
    if (status == VB_OK) status = find_peers(cuda);
    if (status == VB_OK) status = note_open(cuda);
    if (status != VB_OK) {
        cuda_close(dev);
        return status;
    }
    *out = dev;
    return VB_OK;
}
