/* vrambench — the device seam.
 *
 * Everything that touches "the GPU" goes through one table of function
 * pointers (in the manner of SQLite's VFS): raw device allocation, memory
 * info, streams, events, the driver's virtual-memory calls, stream-ordered
 * memory pools, and the little compute the scenarios need.
 *
 * Two backends implement it:
 *   sim   a simulated device (base/device_sim.c): exact memory accounting,
 *         driver allocations rounded to 2 MiB, out-of-memory past its
 *         capacity, streams on a logical clock that tests control.
 *   cuda  the real device (base/device_cuda.c): CUDA runtime, driver API
 *         for virtual memory (resolved at run time, so a build with CUDA still
 *         starts on a machine without a driver), cuBLAS for matrix products.
 *
 * Device addresses are plain integers (vb_addr): on `sim` they do not point at
 * anything, and integer arithmetic is what allocators and tests need anyway.
 * Streams, events and pools are opaque handles; a NULL stream is the device's
 * default stream.
 */
#ifndef VB_DEVICE_H
#define VB_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef uint64_t vb_addr;                  /* a device address; 0 is "none" */
typedef uint64_t vb_phys;                  /* a physical memory handle (virtual-memory API) */
typedef struct vb_stream_s *vb_stream;     /* NULL = the default stream */
typedef struct vb_event_s *vb_event;
typedef struct vb_pool_s *vb_pool;         /* a stream-ordered memory pool */
typedef struct vb_device vb_device;
typedef struct vb_sim_machine vb_sim_machine; /* a simulated machine of several devices */

#define VB_MiB ((uint64_t)1 << 20)
#define VB_GiB ((uint64_t)1 << 30)
#define VB_TiB ((uint64_t)1 << 40)

/* The CUDA driver rounds cudaMalloc to 2 MiB pages; the sim does the same. */
#define VB_DRIVER_PAGE (2 * VB_MiB)

/* Every pointer a device or allocator hands out is aligned to at least this. */
#define VB_MIN_ALIGNMENT 256

/* What a stream-ordered pool takes for one allocation: sizes rounded up to
 * this. CUDA does not document its pool's rounding; 512 B is what was
 * observed of cudaMallocAsync (rapidsai/cudf issue 10384). The sim's pool
 * rounds so, and the async allocator reports its allocated bytes so. */
#define VB_POOL_ROUNDING 512

typedef enum vb_device_kind { VB_DEVICE_SIM = 0, VB_DEVICE_CUDA = 1 } vb_device_kind;

/* What a device says about itself (for the results' context). */
typedef struct vb_device_info {
    vb_device_kind kind;
    char name[128];           /* "NVIDIA H100 80GB HBM3" or "simulated device" */
    int driver_version;       /* cudaDriverGetVersion, 0 on sim */
    int runtime_version;      /* cudaRuntimeGetVersion, 0 on sim */
    uint64_t total_bytes;     /* device memory (sim: its capacity) */
    int simulated;            /* 1 on sim: times are not GPU times */
    int ordinal;              /* the device's index on its machine: the CUDA device index (after
                               * CUDA_VISIBLE_DEVICES), or its index on the simulated machine */
    int device_count;         /* devices on its machine: cudaGetDeviceCount, or the simulated machine's */
    uint64_t context_bytes;   /* driver-used memory the CUDA context took when the device was
                               * opened (NVML before vs cudaMemGetInfo after); 0 when unknown */
} vb_device_info;

/* Where the simulated driver puts cudaMalloc's fresh addresses (freed ranges
 * are reused lowest first either way): the order PyTorch's best fit reads
 * when it breaks a tie between equal free blocks by address. The driver
 * does both (docs/sim-models.md, "cudaMalloc placement"): top-down is what
 * it mostly does and the default; rising is the other extreme, which tune
 * replays too where a minimum capacity depends on it (docs/tune.md). */
typedef enum vb_sim_placement {
    VB_SIM_PLACE_TOP_DOWN = 0, /* fresh addresses right below all others */
    VB_SIM_PLACE_RISING,       /* fresh addresses right above all others */
} vb_sim_placement;

/* How to open a device. Zero-initialise and set what you need. */
typedef struct vb_device_options {
    uint64_t sim_capacity_bytes;   /* sim only; 0 = default 80 GiB; at most VB_SIM_MAX_CAPACITY */
    uint64_t cuda_cap_bytes;       /* cuda only: > 0 opens it under a cap (vb_device_cap_wrap):
                                    * allocations through it past this many bytes are out of
                                    * memory, counted as the sim counts them; 0 = none */
    int ordinal;                   /* which device of the machine: 0 (the first) to device_count - 1:
                                    * the CUDA device index, or device `ordinal` of the simulated
                                    * machine; one the machine lacks is VB_ERR_INVALID */
    vb_sim_machine *sim_machine;   /* sim only: the simulated machine whose device `ordinal` opens
                                    * (vb_sim_machine_create); NULL: a machine of its own of
                                    * VB_SIM_DEFAULT_DEVICES devices that can all access each other */
    vb_sim_placement sim_placement; /* sim only: where cudaMalloc's fresh addresses go (default top-down) */
} vb_device_options;

#define VB_SIM_DEFAULT_CAPACITY (80 * VB_GiB)
/* The most memory a sim device can have: 56 TiB. Its address layout takes
 * one vm_reserve up to 64 TiB, and expandable segments (expandable, stitch)
 * reserve 1.125 x the device's memory in one, as PyTorch does, so above
 * 56 TiB they could not start; far above it the stream-ordered pool's
 * per-granule tables (device_sim_pool.c) outgrow host memory. */
#define VB_SIM_MAX_CAPACITY (56 * VB_TiB)
/* Its text, for messages. */
#define VB_SIM_MAX_CAPACITY_TEXT "56TiB"

/* A sim opened by vb_device_open (the CLI's --device sim) is device 0 of a
 * machine of two devices that can access each other's memory, as two GPUs
 * on NVLink: scenarios across devices run on sim too. */
#define VB_SIM_DEFAULT_DEVICES 2

/* The most devices a simulated machine has (a peer set is a 64-bit mask). */
#define VB_SIM_MAX_DEVICES 64

/* Which way host<->device copies go. */
typedef enum vb_copy_kind {
    VB_COPY_HOST_TO_DEVICE,
    VB_COPY_DEVICE_TO_HOST,
    VB_COPY_DEVICE_TO_DEVICE,
} vb_copy_kind;

/* The ops table. Every function takes the device it belongs to. Unless said
 * otherwise, a function returns VB_OK or an error status with a message. */
typedef struct vb_device_ops {
    const char *name; /* "sim" or "cuda" */

    void (*close)(vb_device *dev);
    void (*info)(vb_device *dev, vb_device_info *out);

    /* ---- raw device memory (cudaMalloc / cudaFree) ---- */
    /* Allocates `size` bytes (> 0); VB_ERR_OOM when the device cannot. */
    vb_status (*mem_alloc)(vb_device *dev, uint64_t size, vb_addr *out);
    /* Frees what mem_alloc returned. Like cudaFree, it waits for the device
     * to finish its queued work first. An unknown address is VB_ERR_INVALID. */
    vb_status (*mem_free)(vb_device *dev, vb_addr addr);
    /* Free and total device memory as the driver sees them (cudaMemGetInfo). */
    vb_status (*mem_info)(vb_device *dev, uint64_t *free_bytes, uint64_t *total_bytes);

    /* ---- streams and events ---- */
    vb_status (*stream_create)(vb_device *dev, vb_stream *out);
    void (*stream_destroy)(vb_device *dev, vb_stream stream);
    /* Waits until every piece of work queued on `stream` has completed. */
    vb_status (*stream_synchronize)(vb_device *dev, vb_stream stream);
    /* Waits until all work on every stream has completed. */
    vb_status (*device_synchronize)(vb_device *dev);
    vb_status (*event_create)(vb_device *dev, vb_event *out);
    void (*event_destroy)(vb_device *dev, vb_event event);
    /* Marks the point in `stream` reached once all work queued so far completes. */
    vb_status (*event_record)(vb_device *dev, vb_event event, vb_stream stream);
    /* 1 if the recorded work has completed (or the event was never recorded), else 0. */
    int (*event_query)(vb_device *dev, vb_event event);
    vb_status (*event_synchronize)(vb_device *dev, vb_event event);
    /* Milliseconds between two completed events (sim: on its logical clock). */
    vb_status (*event_elapsed_ms)(vb_device *dev, vb_event start, vb_event end, double *out);
    /* Makes work queued on `stream` from now on wait until the work `event`
     * marks has completed (cudaStreamWaitEvent); no host wait. An event never
     * recorded is already complete. */
    vb_status (*stream_wait_event)(vb_device *dev, vb_stream stream, vb_event event);

    /* ---- virtual memory (cuMemAddressReserve / cuMemCreate / cuMemMap ...) ---- */
    /* The mapping granularity: sizes and offsets below are multiples of it. */
    uint64_t (*vm_granularity)(vb_device *dev);
    /* Reserves `size` bytes of address space (no memory behind it). */
    vb_status (*vm_reserve)(vb_device *dev, uint64_t size, vb_addr *out);
    /* Returns a reservation; everything in it must be unmapped. */
    vb_status (*vm_free)(vb_device *dev, vb_addr addr, uint64_t size);
    /* Creates `size` bytes of physical memory; VB_ERR_OOM when the device cannot. */
    vb_status (*vm_create)(vb_device *dev, uint64_t size, vb_phys *out);
    /* Releases physical memory; it must not be mapped anywhere. */
    vb_status (*vm_release)(vb_device *dev, vb_phys handle);
    /* Maps the whole of `handle` at `addr` (inside a reservation), cuMemMap;
     * a handle may be mapped at several addresses at once, but only whole:
     * on an H100 (driver 580) cuMemMap of part of a handle (an offset, or a
     * smaller size) fails with CUDA_ERROR_NOT_SUPPORTED, as its
     * documentation says ("offset ... currently must be zero").
     * The device cannot use it until vm_set_access covers it. */
    vb_status (*vm_map)(vb_device *dev, vb_addr addr, uint64_t size, vb_phys handle);
    /* Makes [addr, addr+size), every byte of it mapped (by one vm_map or by
     * several adjacent ones), readable and writable by the device and by
     * every peer that peer_access names: one cuMemSetAccess with one
     * descriptor per device, however many mappings the range covers. So
     * every mapping a strategy makes (growth, a remap, a stitched range) is
     * open to the peers, and no strategy can forget them. */
    vb_status (*vm_set_access)(vb_device *dev, vb_addr addr, uint64_t size);
    /* Unmaps [addr, addr+size), which must be exactly covered by whole
     * mappings (one or several adjacent ones): one cuMemUnmap. Like
     * cudaFree it waits for the device's queued work first, once per call. */
    vb_status (*vm_unmap)(vb_device *dev, vb_addr addr, uint64_t size);

    /* ---- stream-ordered pools (cudaMemPoolCreate / cudaMallocFromPoolAsync) ---- */
    /* A pool that keeps up to `release_threshold` bytes across
     * synchronizations, open to every peer that peer_access names
     * (cudaMemPoolSetAccess: pools ignore cudaDeviceEnablePeerAccess). */
    vb_status (*pool_create)(vb_device *dev, uint64_t release_threshold, vb_pool *out);
    void (*pool_destroy)(vb_device *dev, vb_pool pool);
    /* Allocates in stream order: usable by work queued on `stream` from now on. */
    vb_status (*pool_malloc)(vb_device *dev, vb_pool pool, uint64_t size, vb_stream stream, vb_addr *out);
    /* Frees in stream order: the memory is reusable on `stream` at once, and on
     * other streams too, which then wait for the work queued on `stream` so far
     * (the pool's default cudaMemPoolReuseAllowInternalDependencies). */
    vb_status (*pool_free)(vb_device *dev, vb_pool pool, vb_addr addr, vb_stream stream);
    /* Releases unused pool memory until at most `keep_bytes` stay reserved. */
    vb_status (*pool_trim)(vb_device *dev, vb_pool pool, uint64_t keep_bytes);
    /* Bytes the pool holds from the device, and bytes of it handed out. */
    vb_status (*pool_usage)(vb_device *dev, vb_pool pool, uint64_t *reserved_bytes, uint64_t *used_bytes);
    /* The most bytes the pool has held from the device, and handed out, since
     * it was created or its marks were last reset (cudaMemPoolAttrReservedMemHigh
     * and cudaMemPoolAttrUsedMemHigh): the peaks, with no query per allocation. */
    vb_status (*pool_high)(vb_device *dev, vb_pool pool, uint64_t *reserved_high, uint64_t *used_high);
    /* Restarts both marks from the current values (CUDA: setting them to 0). */
    vb_status (*pool_reset_high)(vb_device *dev, vb_pool pool);

    /* ---- host memory and copies ---- */
    /* Page-locked host memory (cudaMallocHost; plain malloc on sim). */
    vb_status (*host_alloc_pinned)(vb_device *dev, uint64_t size, void **out);
    void (*host_free_pinned)(vb_device *dev, void *ptr);
    /* Queues a copy on `stream`. On sim no bytes move; its duration is modelled.
     * For VB_COPY_DEVICE_TO_DEVICE, `host` holds the source device address
     * (cast to a pointer) and `device_addr` is the destination. */
    vb_status (*memcpy_async)(vb_device *dev, void *host, vb_addr device_addr, uint64_t size,
                              vb_copy_kind kind, vb_stream stream);

    /* ---- work (for scenarios and tests) ---- */
    /* Queues work that keeps `stream` busy for about `nanoseconds`. */
    vb_status (*enqueue_busy)(vb_device *dev, vb_stream stream, uint64_t nanoseconds);
    /* C[m x n] = alpha * op(A) * op(B) + beta * C, column-major fp32 (cublasSgemm).
     * transpose_a / transpose_b select op(X) = X^T. */
    vb_status (*gemm_f32)(vb_device *dev, vb_stream stream, int transpose_a, int transpose_b,
                          int m, int n, int k, float alpha, vb_addr a, int lda,
                          vb_addr b, int ldb, float beta, vb_addr c, int ldc);
    /* Fills `count` floats with pseudo-random values in [-1, 1) from `seed`. */
    vb_status (*fill_random_f32)(vb_device *dev, vb_stream stream, vb_addr addr, uint64_t count, uint64_t seed);
    /* out[i] = max(in[i], 0) over `count` floats (out may equal in). */
    vb_status (*relu_f32)(vb_device *dev, vb_stream stream, vb_addr out, vb_addr in, uint64_t count);
    /* y[i] += alpha * x[i] over `count` floats. */
    vb_status (*axpy_f32)(vb_device *dev, vb_stream stream, float alpha, vb_addr x, vb_addr y, uint64_t count);
    /* Writes a byte pattern derived from (`seed`, offset) over [addr, addr+size). */
    vb_status (*fill_pattern)(vb_device *dev, vb_stream stream, vb_addr addr, uint64_t size, uint64_t seed);
    /* Reads [addr, addr+size) back and counts bytes that differ from the pattern
     * fill_pattern(seed) writes. Synchronizes. VB_ERR_UNSUPPORTED on sim. */
    vb_status (*verify_pattern)(vb_device *dev, vb_addr addr, uint64_t size, uint64_t seed, uint64_t *mismatched_bytes);

    /* ---- the other devices of its machine ---- */
    /* 1 if device `peer` (an ordinal of this device's machine) may read and
     * write the memory this device hands out: the device itself, and every
     * other device the hardware lets access its memory
     * (cuDeviceCanAccessPeer(peer, this device)); 0 otherwise. Worked out
     * over all the machine's devices when the device is opened, so the
     * answer does not depend on which devices were used first, and nothing
     * the hardware refuses is asked for. Mappings (vm_set_access) and pools
     * (pool_create) are opened to these peers as they are made; mem_alloc
     * memory through context peer access, which the cuda backend enables
     * both ways between every two devices it has open in the process. A
     * device that is no peer still gets copies (staged through the host),
     * not direct access. */
    int (*peer_access)(vb_device *dev, int peer);
} vb_device_ops;

/* A device: its ops and the backend's own state. */
struct vb_device {
    const vb_device_ops *ops;
    void *state;
};

/* Opens a device by kind: "sim", "cuda", or "auto" (cuda when a GPU is
 * present, else sim). `options` may be NULL. A name that is none of these is
 * VB_ERR_INVALID; "cuda" without a usable GPU or a build without CUDA is
 * VB_ERR_UNSUPPORTED. */
vb_status vb_device_open(const char *kind, const vb_device_options *options, vb_device **out);

/* Closes a device opened by vb_device_open (NULL is fine). */
void vb_device_close(vb_device *dev);

/* Opens device `ordinal` of the machine `dev` (or the device under its caps)
 * belongs to, of its kind and uncapped: CUDA device `ordinal`, or device
 * `ordinal` of the same simulated machine with `dev`'s capacity. An ordinal
 * the machine lacks is VB_ERR_INVALID. */
vb_status vb_device_open_peer(vb_device *dev, int ordinal, vb_device **out);

/* 1 if this build includes the cuda backend. */
int vb_device_cuda_built(void);

/* 1 if the cuda backend is built and finds at least one GPU. */
int vb_device_cuda_available(void);

/* Bytes the driver reports as in use (total - free from mem_info). */
uint64_t vb_device_used_bytes(vb_device *dev);

/* ---- a capped device (base/device_cap.c) ---- */

/* Opens a device that is `inner` with a capacity of `cap_bytes`: mem_alloc,
 * vm_create and pool_malloc through it are VB_ERR_OOM once this device's
 * allocations would pass the cap, whatever the GPU has free; mem_info and
 * info report the cap as the total. As PyTorch's
 * set_per_process_memory_fraction, it makes a memory limit the same on every
 * GPU and on sim. Closing it leaves `inner` open. */
vb_status vb_device_cap_open(vb_device *inner, uint64_t cap_bytes, vb_device **out);

/* vb_device_cap_open, and closing the capped device closes `inner` too (what
 * vb_device_open makes of vb_device_options.cuda_cap_bytes). */
vb_status vb_device_cap_wrap(vb_device *inner, uint64_t cap_bytes, vb_device **out);

/* The device under any caps (`dev` itself when it is not capped). */
vb_device *vb_device_uncapped(vb_device *dev);

/* ---- the simulated device's own controls (tests and modelled work) ---- */

/* Opens a sim device of the given capacity (0 = 80 GiB): the one device of
 * a machine of its own; VB_ERR_INVALID above VB_SIM_MAX_CAPACITY. */
vb_status vb_sim_open(uint64_t capacity_bytes, vb_device **out);

/* Sets where `dev` (a sim device that has not allocated yet) puts
 * cudaMalloc's fresh addresses; VB_ERR_INVALID on any other device or
 * after its first mem_alloc. */
vb_status vb_sim_set_placement(vb_device *dev, vb_sim_placement placement);

/* The placement of a sim device (top-down for any other device). */
vb_sim_placement vb_sim_placement_of(vb_device *dev);

/* A simulated machine of `device_count` devices (1 to VB_SIM_MAX_DEVICES),
 * where device p may access device d's memory when can_access[p *
 * device_count + d] is non-zero (the diagonal is ignored; NULL: every pair
 * can, as on NVLink). Its devices are opened with vb_device_open("sim")
 * (options.sim_machine, options.ordinal), each with its own memory, pools,
 * streams and logical clock, and addresses of their own (one address
 * space, as CUDA's unified addressing). The machine lives until it is
 * released and its last device closed. */
vb_status vb_sim_machine_create(int device_count, const unsigned char *can_access, vb_sim_machine **out);

/* Drops the creator's reference (NULL is fine). */
void vb_sim_machine_release(vb_sim_machine *machine);

/* The machine a sim device (or a capped one on it) belongs to. */
vb_sim_machine *vb_sim_machine_of(vb_device *dev);

/* A simulated direct read of [addr, addr+size) by sim device `reader` (a
 * kernel of `reader` reading it): VB_OK when the memory is `reader`'s own
 * and usable, or another device's of its machine that was opened to
 * `reader` (its mapping's vm_set_access, its pool, or context peer access
 * for mem_alloc memory); else VB_ERR_INVALID saying why. A device-to-device
 * memcpy_async on a sim device checks the other device's side so too, where
 * the two are peers; between devices that are not, the copy is staged
 * through the host and needs no access. */
vb_status vb_sim_peer_read(vb_device *reader, vb_addr addr, uint64_t size);

/* The ordinal of the device of `dev`'s simulated machine whose memory
 * (mem_alloc, a pool or a mapping) holds `addr`, or -1 when none does. */
int vb_sim_owner(vb_device *dev, vb_addr addr);

/* 1 if `dev` is a sim device (or a capped one on a sim device). */
int vb_device_is_sim(vb_device *dev);

/* Moves the sim's logical clock forward: queued work whose end falls inside
 * the step completes. */
void vb_sim_advance(vb_device *dev, uint64_t nanoseconds);

/* Completes all work queued on `stream` so far (the clock moves to its end). */
void vb_sim_complete_stream(vb_device *dev, vb_stream stream);

/* The sim's logical clock, in nanoseconds since it was opened. */
uint64_t vb_sim_now(vb_device *dev);

/* Bytes the sim has handed out to mem_alloc, vm_create and pools together. */
uint64_t vb_sim_used_bytes(vb_device *dev);

/* 1 if every byte of [addr, addr+size) is mapped and vm_set_access made it
 * usable by the device (tests check allocators hand out nothing less). */
int vb_sim_accessible(vb_device *dev, vb_addr addr, uint64_t size);

#endif
