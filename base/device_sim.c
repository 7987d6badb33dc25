/* vrambench — the simulated device.
 *
 * Memory figures are exact for whatever the allocator on top does: the sim
 * places and counts cudaMalloc blocks as the CUDA driver does (2 MiB pages,
 * small blocks packed into shared pages, freed addresses reused:
 * device_sim_memory.c), models the stream-ordered pool as measured
 * (device_sim_pool.c), and fails past its capacity.
 * Time is a logical clock in nanoseconds: queued work has a modelled
 * duration and completes when its stream or the device is synchronized, or
 * when a test advances the clock. Nothing runs: the same calls give the same
 * addresses, times and figures every run.
 */
#include "device_sim_internal.h"

#include <stdlib.h>
#include <string.h>

/* Modelled rates, so that scenario timelines have plausible shapes. They are
 * not GPU figures and results from the sim are labelled simulated.
 * H100 SXM datasheet: 67 TFLOP/s fp32 (SGEMM reaches about 50), 3.35 TB/s HBM3;
 * PCIe gen5 pinned host copies reach about 25 GB/s. */
#define SIM_GEMM_FLOP_PER_NS 50000.0    /* 50 TFLOP/s */
#define SIM_DEVICE_BYTES_PER_NS 3000.0  /* 3 TB/s */
#define SIM_HOST_BYTES_PER_NS 25.0      /* 25 GB/s */

#define SIM_FIRST_ADDRESS ((vb_addr)0x7f0000000000ULL)
#define SIM_FIRST_VA ((vb_addr)0x100000000000ULL)
/* Device k of a machine has the addresses above, plus k x this: one address
 * space for the machine, as CUDA's unified addressing, so an address names
 * its device (device 0's are those of a sim of one device). */
#define SIM_DEVICE_STRIDE ((vb_addr)1 << 52)
#define SIM_MAX_RESERVATION (UINT64_C(1) << 46) /* one vm_reserve: 64 TiB (VB_SIM_MAX_CAPACITY) */
#define SIM_PAGE_ACCESSIBLE ((uint64_t)1) /* in mapped_pages values: mapping addresses are 2 MiB aligned */

/* ------------------------------------------------------------------------ */
/* Capacity and addresses                                                    */
/* ------------------------------------------------------------------------ */

vb_status sim_take(vb_device *dev, uint64_t bytes)
{
    sim_state *sim = sim_of(dev);
    if (bytes > sim->capacity - sim->used)
        return vb_error(VB_ERR_OOM, "sim: out of memory: %llu bytes asked, %llu of %llu free",
                        (unsigned long long)bytes, (unsigned long long)(sim->capacity - sim->used),
                        (unsigned long long)sim->capacity);
    sim->used += bytes;
    return VB_OK;
}

void sim_give(vb_device *dev, uint64_t bytes)
{
    sim_of(dev)->used -= bytes;
}

vb_addr sim_next_address(vb_device *dev, uint64_t size)
{
    sim_state *sim = sim_of(dev);
    vb_addr addr = sim->next_addr;
    sim->next_addr += size;
    return addr;
}

/* ------------------------------------------------------------------------ */
/* Clock, streams, events                                                    */
/* ------------------------------------------------------------------------ */

void sim_enqueue(vb_device *dev, vb_stream stream, uint64_t nanoseconds)
{
    sim_state *sim = sim_of(dev);
    struct vb_stream_s *s = sim_stream(dev, stream);
    uint64_t start = s->tail_ns > sim->now_ns ? s->tail_ns : sim->now_ns;
    s->tail_ns = start + nanoseconds;
}

/* Moves the clock to `time` if that is later. */
static void advance_to(vb_device *dev, uint64_t time)
{
    sim_state *sim = sim_of(dev);
    if (time > sim->now_ns) sim->now_ns = time;
    sim_pools_on_synchronize(dev);
}

/* The end of all queued work on every stream. */
static uint64_t last_tail(vb_device *dev)
{
    sim_state *sim = sim_of(dev);
    uint64_t tail = sim->default_stream.tail_ns;
    for (size_t i = 0; i < sim->stream_count; i++)
        if (sim->streams[i]->tail_ns > tail) tail = sim->streams[i]->tail_ns;
    return tail;
}

static vb_status sim_device_synchronize(vb_device *dev)
{
    advance_to(dev, last_tail(dev));
    return VB_OK;
}

static vb_status sim_stream_synchronize(vb_device *dev, vb_stream stream)
{
    advance_to(dev, sim_stream(dev, stream)->tail_ns);
    return VB_OK;
}

static vb_status sim_stream_create(vb_device *dev, vb_stream *out)
{
    sim_state *sim = sim_of(dev);
    if (sim->stream_count == sim->stream_capacity) {
        size_t capacity = sim->stream_capacity ? sim->stream_capacity * 2 : 8;
        struct vb_stream_s **streams = realloc(sim->streams, capacity * sizeof *streams);
        if (!streams) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
        sim->streams = streams;
        sim->stream_capacity = capacity;
    }
    struct vb_stream_s *stream = calloc(1, sizeof *stream);
    if (!stream) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    stream->tail_ns = sim->now_ns;
    sim->streams[sim->stream_count++] = stream;
    *out = stream;
    return VB_OK;
}

static void sim_stream_destroy(vb_device *dev, vb_stream stream)
{
    sim_state *sim = sim_of(dev);
    if (!stream) return;
    for (size_t i = 0; i < sim->stream_count; i++) {
        if (sim->streams[i] != stream) continue;
        sim->streams[i] = sim->streams[--sim->stream_count];
        break;
    }
    free(stream);
}

static vb_status sim_event_create(vb_device *dev, vb_event *out)
{
    (void)dev;
    *out = calloc(1, sizeof **out);
    return *out ? VB_OK : vb_error(VB_ERR_HOST_OOM, "out of host memory");
}

static void sim_event_destroy(vb_device *dev, vb_event event)
{
    (void)dev;
    free(event);
}

static vb_status sim_event_record(vb_device *dev, vb_event event, vb_stream stream)
{
    sim_state *sim = sim_of(dev);
    uint64_t tail = sim_stream(dev, stream)->tail_ns;
    event->at_ns = tail > sim->now_ns ? tail : sim->now_ns;
    return VB_OK;
}

static int sim_event_query(vb_device *dev, vb_event event)
{
    return event->at_ns <= sim_of(dev)->now_ns;
}

static vb_status sim_event_synchronize(vb_device *dev, vb_event event)
{
    advance_to(dev, event->at_ns);
    return VB_OK;
}

static vb_status sim_event_elapsed_ms(vb_device *dev, vb_event start, vb_event end, double *out)
{
    if (!sim_event_query(dev, start) || !sim_event_query(dev, end))
        return vb_error(VB_ERR_INVALID, "sim: elapsed time of an event that has not completed");
    *out = ((double)end->at_ns - (double)start->at_ns) / 1e6;
    return VB_OK;
}

/* Later work on `stream` starts no earlier than the event's point. */
static vb_status sim_stream_wait_event(vb_device *dev, vb_stream stream, vb_event event)
{
    struct vb_stream_s *s = sim_stream(dev, stream);
    if (event->at_ns > s->tail_ns) s->tail_ns = event->at_ns;
    return VB_OK;
}

/* ------------------------------------------------------------------------ */
/* Raw device memory                                                         */
/* ------------------------------------------------------------------------ */

/* cudaMalloc: placed and counted as the driver does (device_sim_memory.c). */
static vb_status sim_mem_alloc(vb_device *dev, uint64_t size, vb_addr *out)
{
    if (size == 0) return vb_error(VB_ERR_INVALID, "sim: mem_alloc of 0 bytes");
    vb_addr addr = 0;
    VB_TRY(sim_memory_alloc(dev, size, &addr));
    if (vb_addr_map_put(&sim_of(dev)->live, addr, size) != 0) {
        sim_memory_free(dev, addr, size);
        return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    }
    *out = addr;
    return VB_OK;
}

/* cudaFree: waits for the device, then gives the block's memory back. */
static vb_status sim_mem_free(vb_device *dev, vb_addr addr)
{
    uint64_t size;
    if (!vb_addr_map_remove(&sim_of(dev)->live, addr, &size))
        return vb_error(VB_ERR_INVALID, "sim: mem_free of unknown address 0x%llx", (unsigned long long)addr);
    sim_device_synchronize(dev); /* cudaFree waits for the device */
    sim_memory_free(dev, addr, size);
    return VB_OK;
}

static vb_status sim_mem_info(vb_device *dev, uint64_t *free_bytes, uint64_t *total_bytes)
{
    sim_state *sim = sim_of(dev);
    *free_bytes = sim->capacity - sim->used;
    *total_bytes = sim->capacity;
    return VB_OK;
}

/* ------------------------------------------------------------------------ */
/* Virtual memory                                                            */
/* ------------------------------------------------------------------------ */

static uint64_t sim_vm_granularity(vb_device *dev)
{
    (void)dev;
    return VB_DRIVER_PAGE;
}

/* The index of the last reservation starting at or below `addr`, or
 * reservation_count when there is none (binary search: reservations are
 * kept sorted by address). */
static size_t reservation_index(const sim_state *sim, vb_addr addr)
{
    size_t low = 0, high = sim->reservation_count;
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        if (sim->reservations[middle].addr <= addr) low = middle + 1;
        else high = middle;
    }
    return low == 0 ? sim->reservation_count : low - 1;
}

/* The reservation containing [addr, addr+size), or NULL. */
static sim_reservation *reservation_of(sim_state *sim, vb_addr addr, uint64_t size)
{
    size_t i = reservation_index(sim, addr);
    if (i == sim->reservation_count) return NULL;
    sim_reservation *r = &sim->reservations[i];
    return size <= r->size && addr - r->addr <= r->size - size ? r : NULL;
}

/* 1 if `value` is a positive multiple of the granularity. */
static int granular(uint64_t value)
{
    return value % VB_DRIVER_PAGE == 0;
}

static vb_status sim_vm_reserve(vb_device *dev, uint64_t size, vb_addr *out)
{
    sim_state *sim = sim_of(dev);
    if (size == 0 || !granular(size))
        return vb_error(VB_ERR_INVALID, "sim: vm_reserve of %llu bytes (not a positive multiple of 2 MiB)",
                        (unsigned long long)size);
    if (size > SIM_MAX_RESERVATION)
        return vb_error(VB_ERR_INVALID, "sim: vm_reserve of %llu bytes (more than the sim's 64 TiB per reservation)",
                        (unsigned long long)size);
    if (sim->reservation_count == sim->reservation_capacity) {
        size_t capacity = sim->reservation_capacity ? sim->reservation_capacity * 2 : 8;
        sim_reservation *r = realloc(sim->reservations, capacity * sizeof *r);
        if (!r) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
        sim->reservations = r;
        sim->reservation_capacity = capacity;
    }
    sim->reservations[sim->reservation_count].addr = sim->next_va;
    sim->reservations[sim->reservation_count].size = size;
    sim->reservation_count++;
    *out = sim->next_va;
    sim->next_va += size + VB_DRIVER_PAGE; /* a gap, so reservations never touch */
    return VB_OK;
}

/* vb_addr_map_each visitor: counts mapped pages inside [first, end). */
typedef struct page_span {
    uint64_t first, end, inside;
} page_span;

static void count_inside(void *context, uint64_t page, uint64_t value)
{
    page_span *span = context;
    (void)value;
    span->inside += page >= span->first && page < span->end;
}

/* 1 if any 2 MiB page of [addr, addr+size) is mapped: each page looked up,
 * or, for a range of more pages than are mapped (a reservation of 1.125 x a
 * large device), each mapped page checked, so the cost follows the smaller. */
static int range_mapped(const sim_state *sim, vb_addr addr, uint64_t size)
{
    page_span span = {addr / VB_DRIVER_PAGE, (addr + size) / VB_DRIVER_PAGE, 0};
    if (span.end - span.first > sim->mapped_pages.count) {
        vb_addr_map_each(&sim->mapped_pages, count_inside, &span);
        return span.inside > 0;
    }
    for (uint64_t page = span.first; page < span.end; page++)
        if (vb_addr_map_get(&sim->mapped_pages, page, NULL)) return 1;
    return 0;
}

static vb_status sim_vm_free(vb_device *dev, vb_addr addr, uint64_t size)
{
    sim_state *sim = sim_of(dev);
    for (size_t i = 0; i < sim->reservation_count; i++) {
        if (sim->reservations[i].addr != addr || sim->reservations[i].size != size) continue;
        if (range_mapped(sim, addr, size))
            return vb_error(VB_ERR_INVALID, "sim: vm_free of a reservation that is still mapped");
        memmove(&sim->reservations[i], &sim->reservations[i + 1],
                (sim->reservation_count - i - 1) * sizeof sim->reservations[0]); /* stays sorted */
        sim->reservation_count--;
        return VB_OK;
    }
    return vb_error(VB_ERR_INVALID, "sim: vm_free of unknown reservation 0x%llx+%llu",
                    (unsigned long long)addr, (unsigned long long)size);
}

static vb_status sim_vm_create(vb_device *dev, uint64_t size, vb_phys *out)
{
    sim_state *sim = sim_of(dev);
    if (size == 0 || !granular(size))
        return vb_error(VB_ERR_INVALID, "sim: vm_create of %llu bytes (not a positive multiple of 2 MiB)",
                        (unsigned long long)size);
    vb_status status = sim_take(dev, size);
    if (status != VB_OK) return status;
    vb_phys handle = ++sim->next_phys;
    if (vb_addr_map_put(&sim->phys, handle, size) != 0) {
        sim_give(dev, size);
        return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    }
    *out = handle;
    return VB_OK;
}

static vb_status sim_vm_release(vb_device *dev, vb_phys handle)
{
    sim_state *sim = sim_of(dev);
    if (vb_addr_map_get(&sim->mapped_handles, handle, NULL))
        return vb_error(VB_ERR_INVALID, "sim: vm_release of a handle that is still mapped");
    uint64_t size;
    if (!vb_addr_map_remove(&sim->phys, handle, &size))
        return vb_error(VB_ERR_INVALID, "sim: vm_release of unknown handle %llu", (unsigned long long)handle);
    sim_give(dev, size);
    return VB_OK;
}

static vb_status sim_vm_map(vb_device *dev, vb_addr addr, uint64_t size, vb_phys handle)
{
    sim_state *sim = sim_of(dev);
    uint64_t handle_size;
    if (!vb_addr_map_get(&sim->phys, handle, &handle_size) || handle_size != size)
        return vb_error(VB_ERR_INVALID, "sim: vm_map of unknown handle %llu or wrong size",
                        (unsigned long long)handle);
    if (!granular(addr) || !reservation_of(sim, addr, size))
        return vb_error(VB_ERR_INVALID, "sim: vm_map at 0x%llx outside any reservation", (unsigned long long)addr);
    if (range_mapped(sim, addr, size))
        return vb_error(VB_ERR_INVALID, "sim: vm_map over an existing mapping at 0x%llx", (unsigned long long)addr);
    uint64_t mapped_count = 0;
    vb_addr_map_get(&sim->mapped_handles, handle, &mapped_count);
    int failed = vb_addr_map_put(&sim->mappings, addr, handle) |
                 vb_addr_map_put(&sim->mapped_handles, handle, mapped_count + 1);
    for (uint64_t page = addr / VB_DRIVER_PAGE; page < (addr + size) / VB_DRIVER_PAGE; page++)
        failed |= vb_addr_map_put(&sim->mapped_pages, page, addr);
    return failed ? vb_error(VB_ERR_HOST_OOM, "out of host memory") : VB_OK;
}

/* The mapping at `addr` and its size, or 0 when no mapping starts there. */
static uint64_t mapping_size_at(const sim_state *sim, vb_addr addr)
{
    uint64_t handle, handle_size;
    if (!vb_addr_map_get(&sim->mappings, addr, &handle) || !vb_addr_map_get(&sim->phys, handle, &handle_size))
        return 0;
    return handle_size;
}

/* Removes the one mapping that starts at `addr` (`size` bytes). */
static void remove_mapping(sim_state *sim, vb_addr addr, uint64_t size)
{
    uint64_t handle = 0;
    vb_addr_map_remove(&sim->mappings, addr, &handle);
    uint64_t mapped_count = 0;
    vb_addr_map_get(&sim->mapped_handles, handle, &mapped_count);
    if (mapped_count > 1) vb_addr_map_put(&sim->mapped_handles, handle, mapped_count - 1); /* replaces: no growth */
    else vb_addr_map_remove(&sim->mapped_handles, handle, NULL);
    for (uint64_t page = addr / VB_DRIVER_PAGE; page < (addr + size) / VB_DRIVER_PAGE; page++) {
        vb_addr_map_remove(&sim->mapped_pages, page, NULL);
        vb_addr_map_remove(&sim->page_access, page, NULL);
    }
}

/* [addr, addr+size) must be whole mappings end to end (cuMemUnmap takes a
 * range of several, as cuMemSetAccess does); checked before anything goes. */
static vb_status sim_vm_unmap(vb_device *dev, vb_addr addr, uint64_t size)
{
    sim_state *sim = sim_of(dev);
    uint64_t covered = 0;
    while (covered < size) {
        uint64_t mapping = mapping_size_at(sim, addr + covered);
        if (mapping == 0 || mapping > size - covered) break;
        covered += mapping;
    }
    if (size == 0 || covered != size)
        return vb_error(VB_ERR_INVALID, "sim: vm_unmap of 0x%llx+%llu, which is not whole mappings",
                        (unsigned long long)addr, (unsigned long long)size);
    sim_device_synchronize(dev); /* cuMemUnmap waits for work using the range */
    for (uint64_t offset = 0; offset < size;) {
        uint64_t mapping = mapping_size_at(sim, addr + offset);
        remove_mapping(sim, addr + offset, mapping);
        offset += mapping;
    }
    return VB_OK;
}

/* Every page of [addr, addr+size) must be mapped (CUDA refuses access to
 * an unmapped range); they become accessible until unmapped. */
static vb_status sim_vm_set_access(vb_device *dev, vb_addr addr, uint64_t size)
{
    sim_state *sim = sim_of(dev);
    if (size == 0 || !granular(addr) || !granular(size))
        return vb_error(VB_ERR_INVALID, "sim: vm_set_access of 0x%llx+%llu (not granular)",
                        (unsigned long long)addr, (unsigned long long)size);
    for (uint64_t page = addr / VB_DRIVER_PAGE; page < (addr + size) / VB_DRIVER_PAGE; page++)
        if (!vb_addr_map_get(&sim->mapped_pages, page, NULL))
            return vb_error(VB_ERR_INVALID, "sim: vm_set_access over unmapped memory at 0x%llx",
                            (unsigned long long)(page * VB_DRIVER_PAGE));
    int failed = 0;
    for (uint64_t page = addr / VB_DRIVER_PAGE; page < (addr + size) / VB_DRIVER_PAGE; page++) {
        int added = 0;
        uint64_t *slot = vb_addr_map_slot(&sim->mapped_pages, page, &added);
        if (slot) *slot |= SIM_PAGE_ACCESSIBLE;
        failed |= vb_addr_map_put(&sim->page_access, page, sim->peers); /* the device and its peers */
    }
    return failed ? vb_error(VB_ERR_HOST_OOM, "out of host memory") : VB_OK;
}

/* ------------------------------------------------------------------------ */
/* Host memory, copies and modelled work                                     */
/* ------------------------------------------------------------------------ */

static vb_status sim_host_alloc_pinned(vb_device *dev, uint64_t size, void **out)
{
    (void)dev;
    *out = malloc(size ? size : 1);
    return *out ? VB_OK : vb_error(VB_ERR_HOST_OOM, "out of host memory for %llu pinned bytes", (unsigned long long)size);
}

static void sim_host_free_pinned(vb_device *dev, void *ptr)
{
    (void)dev;
    free(ptr);
}

/* Duration of moving `bytes` at `bytes_per_ns`. */
static uint64_t transfer_ns(uint64_t bytes, double bytes_per_ns)
{
    return (uint64_t)((double)bytes / bytes_per_ns) + 1;
}

static vb_status sim_memcpy_async(vb_device *dev, void *host, vb_addr device_addr, uint64_t size,
                                  vb_copy_kind kind, vb_stream stream)
{
    (void)host;
    (void)device_addr;
    sim_enqueue(dev, stream, transfer_ns(size, kind == VB_COPY_DEVICE_TO_DEVICE ? SIM_DEVICE_BYTES_PER_NS
                                                                                 : SIM_HOST_BYTES_PER_NS));
    return VB_OK;
}

static vb_status sim_enqueue_busy(vb_device *dev, vb_stream stream, uint64_t nanoseconds)
{
    sim_enqueue(dev, stream, nanoseconds);
    return VB_OK;
}

static vb_status sim_gemm_f32(vb_device *dev, vb_stream stream, int transpose_a, int transpose_b, int m,
                              int n, int k, float alpha, vb_addr a, int lda, vb_addr b, int ldb, float beta,
                              vb_addr c, int ldc)
{
    (void)transpose_a, (void)transpose_b, (void)alpha, (void)a, (void)lda, (void)b, (void)ldb;
    (void)beta, (void)c, (void)ldc;
    if (m < 0 || n < 0 || k < 0) return vb_error(VB_ERR_INVALID, "sim: gemm with a negative dimension");
    double flops = 2.0 * m * n * k;
    sim_enqueue(dev, stream, (uint64_t)(flops / SIM_GEMM_FLOP_PER_NS) + 1);
    return VB_OK;
}

static vb_status sim_fill_random_f32(vb_device *dev, vb_stream stream, vb_addr addr, uint64_t count,
                                     uint64_t seed)
{
    (void)addr, (void)seed;
    sim_enqueue(dev, stream, transfer_ns(count * 4, SIM_DEVICE_BYTES_PER_NS));
    return VB_OK;
}

static vb_status sim_relu_f32(vb_device *dev, vb_stream stream, vb_addr out, vb_addr in, uint64_t count)
{
    (void)out, (void)in;
    sim_enqueue(dev, stream, transfer_ns(count * 8, SIM_DEVICE_BYTES_PER_NS));
    return VB_OK;
}

static vb_status sim_axpy_f32(vb_device *dev, vb_stream stream, float alpha, vb_addr x, vb_addr y,
                              uint64_t count)
{
    (void)alpha, (void)x, (void)y;
    sim_enqueue(dev, stream, transfer_ns(count * 12, SIM_DEVICE_BYTES_PER_NS));
    return VB_OK;
}

static vb_status sim_fill_pattern(vb_device *dev, vb_stream stream, vb_addr addr, uint64_t size, uint64_t seed)
{
    (void)addr, (void)seed;
    sim_enqueue(dev, stream, transfer_ns(size, SIM_DEVICE_BYTES_PER_NS));
    return VB_OK;
}

static vb_status sim_verify_pattern(vb_device *dev, vb_addr addr, uint64_t size, uint64_t seed,
                                    uint64_t *mismatched_bytes)
{
    (void)dev, (void)addr, (void)size, (void)seed, (void)mismatched_bytes;
    return vb_error(VB_ERR_UNSUPPORTED, "sim: memory holds no data, so it cannot be read back");
}

/* ------------------------------------------------------------------------ */
/* Device                                                                    */
/* ------------------------------------------------------------------------ */

static void sim_info(vb_device *dev, vb_device_info *out)
{
    memset(out, 0, sizeof *out);
    out->kind = VB_DEVICE_SIM;
    strcpy(out->name, "simulated device");
    out->total_bytes = sim_of(dev)->capacity;
    out->simulated = 1;
    out->ordinal = sim_of(dev)->ordinal;
    out->device_count = sim_machine_device_count(sim_of(dev)->machine);
}

/* Fixed when the device was opened, from the machine's matrix. */
static int sim_peer_access(vb_device *dev, int peer)
{
    return peer >= 0 && peer < VB_SIM_MAX_DEVICES && (sim_of(dev)->peers >> peer & 1);
}

static void sim_close(vb_device *dev)
{
    sim_state *sim = sim_of(dev);
    /* From the back: sim_pool_destroy takes each pool off the list. */
    while (sim->pool_count > 0) sim_pool_destroy(dev, sim->pools[sim->pool_count - 1]);
    for (size_t i = 0; i < sim->stream_count; i++) free(sim->streams[i]);
    free(sim->pools);
    free(sim->streams);
    free(sim->reservations);
    vb_addr_map_clear(&sim->live);
    sim_memory_close(sim);
    vb_addr_map_clear(&sim->phys);
    vb_addr_map_clear(&sim->mappings);
    vb_addr_map_clear(&sim->mapped_pages);
    vb_addr_map_clear(&sim->mapped_handles);
    vb_addr_map_clear(&sim->page_access);
    sim_machine_detach(sim->machine, sim->ordinal);
    pthread_mutex_destroy(&sim->lock);
    free(sim);
    free(dev);
}

/* ------------------------------------------------------------------------ */
/* The lock: every op of the table runs under the device's mutex             */
/* ------------------------------------------------------------------------ */

/* The sim's state is plain data shared by every caller: allocators on
 * several threads (the conformance suite's threaded test, the PyTorch
 * plug-in's pattern) reach it through the table, so each entry takes the
 * device's mutex around the unlocked function. Functions inside the backend
 * call each other unlocked. The mutex is recursive so that an op reached
 * again from inside (none is today) cannot deadlock. */
#define SIM_LOCKED(type, name, params, args)          \
    static type locked_##name params                  \
    {                                                 \
        pthread_mutex_lock(&sim_of(dev)->lock);       \
        type result_ = sim_##name args;               \
        pthread_mutex_unlock(&sim_of(dev)->lock);     \
        return result_;                               \
    }
#define SIM_LOCKED_VOID(name, params, args)           \
    static void locked_##name params                  \
    {                                                 \
        pthread_mutex_lock(&sim_of(dev)->lock);       \
        sim_##name args;                              \
        pthread_mutex_unlock(&sim_of(dev)->lock);     \
    }

SIM_LOCKED_VOID(info, (vb_device *dev, vb_device_info *out), (dev, out))
SIM_LOCKED(vb_status, mem_alloc, (vb_device *dev, uint64_t size, vb_addr *out), (dev, size, out))
SIM_LOCKED(vb_status, mem_free, (vb_device *dev, vb_addr addr), (dev, addr))
SIM_LOCKED(vb_status, mem_info, (vb_device *dev, uint64_t *free_bytes, uint64_t *total_bytes), (dev, free_bytes, total_bytes))
SIM_LOCKED(vb_status, stream_create, (vb_device *dev, vb_stream *out), (dev, out))
SIM_LOCKED_VOID(stream_destroy, (vb_device *dev, vb_stream stream), (dev, stream))
SIM_LOCKED(vb_status, stream_synchronize, (vb_device *dev, vb_stream stream), (dev, stream))
SIM_LOCKED(vb_status, device_synchronize, (vb_device *dev), (dev))
SIM_LOCKED(vb_status, event_create, (vb_device *dev, vb_event *out), (dev, out))
SIM_LOCKED_VOID(event_destroy, (vb_device *dev, vb_event event), (dev, event))
SIM_LOCKED(vb_status, event_record, (vb_device *dev, vb_event event, vb_stream stream), (dev, event, stream))
SIM_LOCKED(int, event_query, (vb_device *dev, vb_event event), (dev, event))
SIM_LOCKED(vb_status, event_synchronize, (vb_device *dev, vb_event event), (dev, event))
SIM_LOCKED(vb_status, event_elapsed_ms, (vb_device *dev, vb_event start, vb_event end, double *out), (dev, start, end, out))
SIM_LOCKED(vb_status, stream_wait_event, (vb_device *dev, vb_stream stream, vb_event event), (dev, stream, event))
SIM_LOCKED(uint64_t, vm_granularity, (vb_device *dev), (dev))
SIM_LOCKED(vb_status, vm_reserve, (vb_device *dev, uint64_t size, vb_addr *out), (dev, size, out))
SIM_LOCKED(vb_status, vm_free, (vb_device *dev, vb_addr addr, uint64_t size), (dev, addr, size))
SIM_LOCKED(vb_status, vm_create, (vb_device *dev, uint64_t size, vb_phys *out), (dev, size, out))
SIM_LOCKED(vb_status, vm_release, (vb_device *dev, vb_phys handle), (dev, handle))
SIM_LOCKED(vb_status, vm_map, (vb_device *dev, vb_addr addr, uint64_t size, vb_phys handle), (dev, addr, size, handle))
SIM_LOCKED(vb_status, vm_set_access, (vb_device *dev, vb_addr addr, uint64_t size), (dev, addr, size))
SIM_LOCKED(vb_status, vm_unmap, (vb_device *dev, vb_addr addr, uint64_t size), (dev, addr, size))
SIM_LOCKED(vb_status, pool_create, (vb_device *dev, uint64_t release_threshold, vb_pool *out), (dev, release_threshold, out))
SIM_LOCKED_VOID(pool_destroy, (vb_device *dev, vb_pool pool), (dev, pool))
SIM_LOCKED(vb_status, pool_malloc, (vb_device *dev, vb_pool pool, uint64_t size, vb_stream stream, vb_addr *out), (dev, pool, size, stream, out))
SIM_LOCKED(vb_status, pool_free, (vb_device *dev, vb_pool pool, vb_addr addr, vb_stream stream), (dev, pool, addr, stream))
SIM_LOCKED(vb_status, pool_trim, (vb_device *dev, vb_pool pool, uint64_t keep_bytes), (dev, pool, keep_bytes))
SIM_LOCKED(vb_status, pool_usage, (vb_device *dev, vb_pool pool, uint64_t *reserved_bytes, uint64_t *used_bytes), (dev, pool, reserved_bytes, used_bytes))
SIM_LOCKED(vb_status, pool_high, (vb_device *dev, vb_pool pool, uint64_t *reserved_high, uint64_t *used_high), (dev, pool, reserved_high, used_high))
SIM_LOCKED(vb_status, pool_reset_high, (vb_device *dev, vb_pool pool), (dev, pool))
SIM_LOCKED(vb_status, host_alloc_pinned, (vb_device *dev, uint64_t size, void **out), (dev, size, out))
SIM_LOCKED_VOID(host_free_pinned, (vb_device *dev, void *ptr), (dev, ptr))
SIM_LOCKED(vb_status, memcpy_async, (vb_device *dev, void *host, vb_addr device_addr, uint64_t size, vb_copy_kind kind, vb_stream stream), (dev, host, device_addr, size, kind, stream))
SIM_LOCKED(int, peer_access, (vb_device *dev, int peer), (dev, peer))

/* A device-to-device copy first checks, without this device's lock (it
 * takes the other device's), that any side in another device's memory was
 * opened to this one (sim_machine_check_copy). */
static vb_status checked_memcpy_async(vb_device *dev, void *host, vb_addr device_addr, uint64_t size,
                                      vb_copy_kind kind, vb_stream stream)
{
    if (kind == VB_COPY_DEVICE_TO_DEVICE) {
        VB_TRY(sim_machine_check_copy(dev, (vb_addr)(uintptr_t)host, size));
        VB_TRY(sim_machine_check_copy(dev, device_addr, size));
    }
    return locked_memcpy_async(dev, host, device_addr, size, kind, stream);
}
SIM_LOCKED(vb_status, enqueue_busy, (vb_device *dev, vb_stream stream, uint64_t nanoseconds), (dev, stream, nanoseconds))
SIM_LOCKED(vb_status, gemm_f32, (vb_device *dev, vb_stream stream, int transpose_a, int transpose_b, int m, int n, int k, float alpha, vb_addr a, int lda, vb_addr b, int ldb, float beta, vb_addr c, int ldc), (dev, stream, transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
SIM_LOCKED(vb_status, fill_random_f32, (vb_device *dev, vb_stream stream, vb_addr addr, uint64_t count, uint64_t seed), (dev, stream, addr, count, seed))
SIM_LOCKED(vb_status, relu_f32, (vb_device *dev, vb_stream stream, vb_addr out, vb_addr in, uint64_t count), (dev, stream, out, in, count))
SIM_LOCKED(vb_status, axpy_f32, (vb_device *dev, vb_stream stream, float alpha, vb_addr x, vb_addr y, uint64_t count), (dev, stream, alpha, x, y, count))
SIM_LOCKED(vb_status, fill_pattern, (vb_device *dev, vb_stream stream, vb_addr addr, uint64_t size, uint64_t seed), (dev, stream, addr, size, seed))
SIM_LOCKED(vb_status, verify_pattern, (vb_device *dev, vb_addr addr, uint64_t size, uint64_t seed, uint64_t *mismatched_bytes), (dev, addr, size, seed, mismatched_bytes))

static const vb_device_ops sim_ops = {
    .name = "sim",
    .close = sim_close,
    .info = locked_info,
    .mem_alloc = locked_mem_alloc,
    .mem_free = locked_mem_free,
    .mem_info = locked_mem_info,
    .stream_create = locked_stream_create,
    .stream_destroy = locked_stream_destroy,
    .stream_synchronize = locked_stream_synchronize,
    .device_synchronize = locked_device_synchronize,
    .event_create = locked_event_create,
    .event_destroy = locked_event_destroy,
    .event_record = locked_event_record,
    .event_query = locked_event_query,
    .event_synchronize = locked_event_synchronize,
    .event_elapsed_ms = locked_event_elapsed_ms,
    .stream_wait_event = locked_stream_wait_event,
    .vm_granularity = locked_vm_granularity,
    .vm_reserve = locked_vm_reserve,
    .vm_free = locked_vm_free,
    .vm_create = locked_vm_create,
    .vm_release = locked_vm_release,
    .vm_map = locked_vm_map,
    .vm_set_access = locked_vm_set_access,
    .vm_unmap = locked_vm_unmap,
    .pool_create = locked_pool_create,
    .pool_destroy = locked_pool_destroy,
    .pool_malloc = locked_pool_malloc,
    .pool_free = locked_pool_free,
    .pool_trim = locked_pool_trim,
    .pool_usage = locked_pool_usage,
    .pool_high = locked_pool_high,
    .pool_reset_high = locked_pool_reset_high,
    .host_alloc_pinned = locked_host_alloc_pinned,
    .host_free_pinned = locked_host_free_pinned,
    .memcpy_async = checked_memcpy_async,
    .enqueue_busy = locked_enqueue_busy,
    .gemm_f32 = locked_gemm_f32,
    .fill_random_f32 = locked_fill_random_f32,
    .relu_f32 = locked_relu_f32,
    .axpy_f32 = locked_axpy_f32,
    .fill_pattern = locked_fill_pattern,
    .verify_pattern = locked_verify_pattern,
    .peer_access = locked_peer_access,
};

/* Opens device `ordinal` of `machine`: its addresses are those of device 0
 * moved up by ordinal x SIM_DEVICE_STRIDE. */
vb_status sim_open_on(vb_sim_machine *machine, int ordinal, uint64_t capacity_bytes, vb_device **out)
{
    if (capacity_bytes > VB_SIM_MAX_CAPACITY)
        return vb_error(VB_ERR_INVALID, "sim: a capacity of %llu bytes is more than the simulated device can have "
                        "(at most " VB_SIM_MAX_CAPACITY_TEXT ")", (unsigned long long)capacity_bytes);
    vb_device *dev = calloc(1, sizeof *dev);
    sim_state *sim = calloc(1, sizeof *sim);
    if (!dev || !sim) {
        free(dev);
        free(sim);
        return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    }
    vb_status status = sim_machine_attach(machine, ordinal, dev, &sim->peers);
    if (status != VB_OK) {
        free(dev);
        free(sim);
        return status;
    }
    sim->machine = machine;
    sim->ordinal = ordinal;
    pthread_mutexattr_t recursive;
    pthread_mutexattr_init(&recursive);
    pthread_mutexattr_settype(&recursive, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&sim->lock, &recursive);
    pthread_mutexattr_destroy(&recursive);
    sim->capacity = capacity_bytes ? capacity_bytes : VB_SIM_DEFAULT_CAPACITY;
    sim->next_addr = SIM_FIRST_ADDRESS + (vb_addr)ordinal * SIM_DEVICE_STRIDE;
    sim->mem_low = sim->next_addr;
    sim->mem_top = sim->next_addr;
    sim->next_va = SIM_FIRST_VA + (vb_addr)ordinal * SIM_DEVICE_STRIDE;
    sim_memory_init(sim);
    dev->ops = &sim_ops;
    dev->state = sim;
    *out = dev;
    return VB_OK;
}

/* A machine of one device, opened. */
vb_status vb_sim_open(uint64_t capacity_bytes, vb_device **out)
{
    vb_sim_machine *machine = NULL;
    VB_TRY(vb_sim_machine_create(1, NULL, &machine));
    vb_status status = sim_open_on(machine, 0, capacity_bytes, out);
    vb_sim_machine_release(machine);
    return status;
}

vb_sim_machine *vb_sim_machine_of(vb_device *dev)
{
    return vb_device_is_sim(dev) ? sim_of(vb_device_uncapped(dev))->machine : NULL;
}

int vb_device_is_sim(vb_device *dev)
{
    return vb_device_uncapped(dev)->ops == &sim_ops;
}

void vb_sim_advance(vb_device *dev, uint64_t nanoseconds)
{
    pthread_mutex_lock(&sim_of(dev)->lock);
    advance_to(dev, sim_of(dev)->now_ns + nanoseconds);
    pthread_mutex_unlock(&sim_of(dev)->lock);
}

void vb_sim_complete_stream(vb_device *dev, vb_stream stream)
{
    locked_stream_synchronize(dev, stream);
}

uint64_t vb_sim_now(vb_device *dev)
{
    pthread_mutex_lock(&sim_of(dev)->lock);
    uint64_t now = sim_of(dev)->now_ns;
    pthread_mutex_unlock(&sim_of(dev)->lock);
    return now;
}

uint64_t vb_sim_used_bytes(vb_device *dev)
{
    pthread_mutex_lock(&sim_of(dev)->lock);
    uint64_t used = sim_of(dev)->used;
    pthread_mutex_unlock(&sim_of(dev)->lock);
    return used;
}

int vb_sim_accessible(vb_device *dev, vb_addr addr, uint64_t size)
{
    sim_state *sim = sim_of(dev);
    int accessible = 1;
    pthread_mutex_lock(&sim->lock);
    for (uint64_t page = addr / VB_DRIVER_PAGE;
         accessible && page < (addr + size + VB_DRIVER_PAGE - 1) / VB_DRIVER_PAGE; page++) {
        uint64_t value = 0;
        accessible = vb_addr_map_get(&sim->mapped_pages, page, &value) && (value & SIM_PAGE_ACCESSIBLE);
    }
    pthread_mutex_unlock(&sim->lock);
    return accessible;
}
