/* vrambench — the simulated device's state, shared by the files of the sim
 * backend (device_sim.c, device_sim_memory.c, device_sim_pool.c and
 * device_sim_machine.c) and by nothing else. */
#ifndef VB_DEVICE_SIM_INTERNAL_H
#define VB_DEVICE_SIM_INTERNAL_H

#include <pthread.h>

#include "addr_map.h"
#include "device.h"
#include "driver_pages.h"
#include "ordered_set.h"

/* A stream is the logical time at which its last queued work ends. */
struct vb_stream_s {
    uint64_t tail_ns;
};

/* An event is the logical time its stream reached when it was recorded. */
struct vb_event_s {
    uint64_t at_ns;
};

typedef struct sim_reservation {
    vb_addr addr;
    uint64_t size;
} sim_reservation;

typedef struct sim_state {
    pthread_mutex_t lock;       /* held around every op of the table (calls may come from several threads) */
    uint64_t capacity;          /* bytes the device has */
    uint64_t used;              /* bytes handed out: mem_alloc + vm_create + pools */
    uint64_t now_ns;            /* the logical clock */
    vb_addr next_addr;          /* fresh addresses for pools, above all handed out */
    vb_addr mem_low;            /* mem_alloc's fresh addresses go right below it (device_sim_memory.c) */
    vb_addr next_va;            /* bump pointer for vm_reserve, far from next_addr */
    uint64_t next_phys;         /* next physical handle */
    vb_addr_map live;           /* mem_alloc address -> requested size */
    vb_ordered_set va_free;     /* freed mem_alloc address ranges (device_sim_memory.c) */
    vb_ordered_set gaps_by_addr, gaps_by_size; /* free pieces of small-block pages */
    vb_driver_pages pages;      /* what the live mem_alloc blocks use */
    vb_addr_map phys;           /* physical handle -> size */
    vb_addr_map mappings;       /* mapped address -> physical handle */
    vb_addr_map mapped_pages;   /* page number (address / 2 MiB) -> the address of its mapping,
                                 * | SIM_PAGE_ACCESSIBLE once vm_set_access covered it */
    vb_addr_map mapped_handles; /* physical handle -> how many mappings it has (CUDA allows several) */
    sim_reservation *reservations; /* sorted by address (vm_reserve hands out rising ones) */
    size_t reservation_count, reservation_capacity;
    struct vb_stream_s default_stream;
    struct vb_stream_s **streams; /* created streams, for device_synchronize */
    size_t stream_count, stream_capacity;
    vb_pool *pools;               /* created pools, for sim_pools_on_synchronize */
    size_t pool_count, pool_capacity;
    /* Its machine (device_sim_machine.c). */
    vb_sim_machine *machine;      /* the simulated machine it is a device of */
    int ordinal;                  /* its index there */
    uint64_t peers;               /* bit p: device p may access its memory (itself included) */
    vb_addr mem_top;              /* mem_alloc's addresses lie below it, down to mem_low */
    int rising;                   /* VB_SIM_PLACE_RISING: fresh mem_alloc addresses go at mem_top, up */
    int mem_allocated;            /* 1 once mem_alloc has taken addresses (the placement is then fixed) */
    vb_addr_map page_access;      /* mapped page number -> the devices vm_set_access opened it to
                                   * (bit per ordinal) */
} sim_state;

/* The sim state of a sim device. */
static inline sim_state *sim_of(vb_device *dev)
{
    return (sim_state *)dev->state;
}

/* The stream object behind a handle (NULL is the default stream). */
static inline struct vb_stream_s *sim_stream(vb_device *dev, vb_stream stream)
{
    return stream ? stream : &sim_of(dev)->default_stream;
}

/* Takes `bytes` of the capacity, or VB_ERR_OOM with a message. */
vb_status sim_take(vb_device *dev, uint64_t bytes);

/* Gives `bytes` of the capacity back. */
void sim_give(vb_device *dev, uint64_t bytes);

/* A fresh range of `size` bytes of addresses for mem_alloc or a pool. */
vb_addr sim_next_address(vb_device *dev, uint64_t size);

/* Queues `nanoseconds` of work on `stream`: it ends that long after the later
 * of now and the stream's previous work. */
void sim_enqueue(vb_device *dev, vb_stream stream, uint64_t nanoseconds);

/* cudaMalloc placement (device_sim_memory.c): init/close the state, place
 * a block (taking its driver memory from the capacity), free one. */
void sim_memory_init(sim_state *sim);
void sim_memory_close(sim_state *sim);
vb_status sim_memory_alloc(vb_device *dev, uint64_t size, vb_addr *out);
void sim_memory_free(vb_device *dev, vb_addr addr, uint64_t size);

/* The stream-ordered pool model (device_sim_pool.c). */
vb_status sim_pool_create(vb_device *dev, uint64_t release_threshold, vb_pool *out);
void sim_pool_destroy(vb_device *dev, vb_pool pool);
vb_status sim_pool_malloc(vb_device *dev, vb_pool pool, uint64_t size, vb_stream stream, vb_addr *out);
vb_status sim_pool_free(vb_device *dev, vb_pool pool, vb_addr addr, vb_stream stream);
vb_status sim_pool_trim(vb_device *dev, vb_pool pool, uint64_t keep_bytes);
vb_status sim_pool_usage(vb_device *dev, vb_pool pool, uint64_t *reserved_bytes, uint64_t *used_bytes);
vb_status sim_pool_high(vb_device *dev, vb_pool pool, uint64_t *reserved_high, uint64_t *used_high);
vb_status sim_pool_reset_high(vb_device *dev, vb_pool pool);

/* Called by every synchronization (stream, event, device), after the clock
 * moved: pools release what exceeds their release threshold, as CUDA's do. */
void sim_pools_on_synchronize(vb_device *dev);

/* ---- several devices (device_sim_machine.c) ---- */

/* 1 if `addr` lies in a block or a small-block page mem_alloc handed out
 * and that was not freed (device_sim_memory.c). */
int sim_memory_holds(vb_device *dev, vb_addr addr);

/* 1 if `addr` lies in a pool's address range; *access is the devices the
 * pool was opened to (device_sim_pool.c). */
int sim_pool_holds(vb_device *dev, vb_addr addr, uint64_t *access);

/* Opens device `ordinal` of `machine` with `capacity_bytes` (0 = 80 GiB)
 * (device_sim.c). */
vb_status sim_open_on(vb_sim_machine *machine, int ordinal, uint64_t capacity_bytes, vb_device **out);

/* Takes device `ordinal` of `machine` for `dev`: VB_ERR_INVALID when the
 * machine has no such device or it is open already. On VB_OK the machine
 * is referenced until sim_machine_detach, and *peers is the devices that
 * may access the device's memory (bit per ordinal, itself included). */
vb_status sim_machine_attach(vb_sim_machine *machine, int ordinal, vb_device *dev, uint64_t *peers);

/* Gives device `ordinal` back (its close); the last reference frees the machine. */
void sim_machine_detach(vb_sim_machine *machine, int ordinal);

/* Devices on the machine. */
int sim_machine_device_count(const vb_sim_machine *machine);

/* Where a device-to-device copy that device `by` runs touches another
 * device's memory: VB_OK when it may (the memory was opened to `by`, or the
 * two are no peers and the copy is staged), else VB_ERR_INVALID saying why.
 * Called without `by`'s lock held (it takes the other devices'). */
vb_status sim_machine_check_copy(vb_device *by, vb_addr addr, uint64_t size);

#endif
