/* vrambench — a simulated machine of several devices.
 *
 * Each device of a machine keeps its own state (memory, pools, streams,
 * logical clock) under its own lock (device_sim.c). The machine holds what
 * they share: how many there are, which may access which (the peer matrix,
 * as cuDeviceCanAccessPeer answers it on a real machine), and which are
 * open, so that a copy or a direct read by one device can look at another's
 * memory.
 *
 * Who may use a device's memory is what the cuda backend grants
 * (base/device_cuda.c), recorded as it is granted:
 *  - a mapping: the devices its vm_set_access opened it to, per page (the
 *    device and its peers);
 *  - a pool: the devices pool_create opened it to (the same);
 *  - mem_alloc memory: the device's peers, through context peer access,
 *    which the cuda backend enables between every two devices it has open
 *    (a reader and an owner both are, here).
 * A direct read (vb_sim_peer_read) needs that. A copy between peers goes
 * peer to peer and needs it too: on two H200s, PyTorch's a.to("cuda:1")
 * failed with "invalid argument" where a mapping had been opened to its own
 * device only. A copy between devices that are no peers is staged through
 * the host by the driver and needs nothing.
 */
#include "device_sim_internal.h"

#include <stdlib.h>

struct vb_sim_machine {
    pthread_mutex_t lock;      /* guards refs and devices */
    int device_count;
    unsigned refs;             /* the creator's, and one per open device */
    unsigned char *can_access; /* [p * device_count + d]: device p may access device d's memory */
    vb_device **devices;       /* the open devices, by ordinal; NULL where none is */
};

/* What holds an address of a device. */
typedef enum held_kind { HELD_NONE, HELD_MAPPING, HELD_POOL, HELD_MEM_ALLOC } held_kind;

static const char *const held_names[] = {
    [HELD_NONE] = "nothing",
    [HELD_MAPPING] = "mapping",
    [HELD_POOL] = "pool memory",
    [HELD_MEM_ALLOC] = "cudaMalloc memory",
};

/* ------------------------------------------------------------------------ */
/* The machine                                                               */
/* ------------------------------------------------------------------------ */

vb_status vb_sim_machine_create(int device_count, const unsigned char *can_access, vb_sim_machine **out)
{
    if (device_count < 1 || device_count > VB_SIM_MAX_DEVICES)
        return vb_error(VB_ERR_INVALID, "sim: a machine of %d devices (it may have 1 to %d)", device_count,
                        VB_SIM_MAX_DEVICES);
    size_t n = (size_t)device_count;
    vb_sim_machine *machine = calloc(1, sizeof *machine);
    unsigned char *matrix = malloc(n * n);
    vb_device **devices = calloc(n, sizeof *devices);
    if (!machine || !matrix || !devices) {
        free(machine);
        free(matrix);
        free(devices);
        return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    }
    for (size_t p = 0; p < n; p++)
        for (size_t d = 0; d < n; d++) matrix[p * n + d] = p == d || !can_access || can_access[p * n + d] != 0;
    pthread_mutex_init(&machine->lock, NULL);
    machine->device_count = device_count;
    machine->refs = 1;
    machine->can_access = matrix;
    machine->devices = devices;
    *out = machine;
    return VB_OK;
}

/* Drops one reference; the last frees the machine. */
static void unreference(vb_sim_machine *machine)
{
    pthread_mutex_lock(&machine->lock);
    unsigned left = --machine->refs;
    pthread_mutex_unlock(&machine->lock);
    if (left) return;
    pthread_mutex_destroy(&machine->lock);
    free(machine->can_access);
    free(machine->devices);
    free(machine);
}

void vb_sim_machine_release(vb_sim_machine *machine)
{
    if (machine) unreference(machine);
}

vb_status sim_machine_attach(vb_sim_machine *machine, int ordinal, vb_device *dev, uint64_t *peers)
{
    int n = machine->device_count;
    if (ordinal < 0 || ordinal >= n)
        return vb_error(VB_ERR_INVALID, "sim: device %d asked of a simulated machine of %d device%s", ordinal, n,
                        n == 1 ? "" : "s");
    pthread_mutex_lock(&machine->lock);
    int taken = machine->devices[ordinal] != NULL;
    if (!taken) {
        machine->devices[ordinal] = dev;
        machine->refs++;
    }
    pthread_mutex_unlock(&machine->lock);
    if (taken) return vb_error(VB_ERR_INVALID, "sim: device %d of this simulated machine is open already", ordinal);
    uint64_t mask = 0;
    for (int p = 0; p < n; p++)
        if (machine->can_access[(size_t)p * (size_t)n + (size_t)ordinal]) mask |= (uint64_t)1 << p;
    *peers = mask;
    return VB_OK;
}

void sim_machine_detach(vb_sim_machine *machine, int ordinal)
{
    pthread_mutex_lock(&machine->lock);
    machine->devices[ordinal] = NULL;
    pthread_mutex_unlock(&machine->lock);
    unreference(machine);
}

int sim_machine_device_count(const vb_sim_machine *machine)
{
    return machine->device_count;
}

/* 1 if device `p` may access device `d`'s memory (the hardware's answer). */
static int peers(const vb_sim_machine *machine, int p, int d)
{
    return machine->can_access[(size_t)p * (size_t)machine->device_count + (size_t)d];
}

/* ------------------------------------------------------------------------ */
/* Whose memory, open to whom                                                */
/* ------------------------------------------------------------------------ */

/* What of `owner`'s memory holds [addr, addr+size) (`owner`'s lock held),
 * and, in *access, the devices it is open to (a mapping: those every page
 * of the range is open to; an unmapped page is open to none). */
static held_kind held_by(vb_device *owner, vb_addr addr, uint64_t size, uint64_t *access)
{
    sim_state *sim = sim_of(owner);
    uint64_t first = addr / VB_DRIVER_PAGE;
    if (vb_addr_map_get(&sim->mapped_pages, first, NULL)) {
        uint64_t last = (addr + size - 1) / VB_DRIVER_PAGE, open_to = ~(uint64_t)0;
        for (uint64_t page = first; page <= last && open_to; page++) {
            uint64_t page_open_to = 0;
            if (!vb_addr_map_get(&sim->mapped_pages, page, NULL) ||
                !vb_addr_map_get(&sim->page_access, page, &page_open_to))
                page_open_to = 0;
            open_to &= page_open_to;
        }
        *access = open_to;
        return HELD_MAPPING;
    }
    if (sim_pool_holds(owner, addr, access)) return HELD_POOL;
    if (sim_memory_holds(owner, addr)) {
        *access = sim->peers;
        return HELD_MEM_ALLOC;
    }
    return HELD_NONE;
}

/* The open device of `machine` whose memory holds [addr, addr+size), or -1;
 * what holds it and whom it is open to. */
static int find_holder(vb_sim_machine *machine, vb_addr addr, uint64_t size, held_kind *kind, uint64_t *access)
{
    int holder = -1;
    *kind = HELD_NONE;
    pthread_mutex_lock(&machine->lock);
    for (int k = 0; k < machine->device_count && holder < 0; k++) {
        vb_device *dev = machine->devices[k];
        if (!dev) continue;
        pthread_mutex_lock(&sim_of(dev)->lock);
        *kind = held_by(dev, addr, size, access);
        pthread_mutex_unlock(&sim_of(dev)->lock);
        if (*kind != HELD_NONE) holder = k;
    }
    pthread_mutex_unlock(&machine->lock);
    return holder;
}

/* VB_ERR_INVALID unless [addr, addr+size) is a range the sim can look at. */
static vb_status check_range(int by, const char *verb, vb_addr addr, uint64_t size)
{
    if (size == 0 || size > ((uint64_t)1 << 46) || addr > UINT64_MAX - size)
        return vb_error(VB_ERR_INVALID, "sim: device %d %s 0x%llx+%llu: not a range of device memory", by, verb,
                        (unsigned long long)addr, (unsigned long long)size);
    return VB_OK;
}

/* VB_OK when device `by` may use the memory `holder` holds (of kind `kind`,
 * open to `access`); else why not. */
static vb_status may_use(const vb_sim_machine *machine, int by, int holder, held_kind kind, uint64_t access,
                         const char *verb, vb_addr addr, uint64_t size)
{
    if (access >> by & 1) return VB_OK;
    if (holder == by)
        return vb_error(VB_ERR_INVALID, "sim: device %d %s 0x%llx+%llu: its own %s, not made accessible", by, verb,
                        (unsigned long long)addr, (unsigned long long)size, held_names[kind]);
    if (!peers(machine, by, holder))
        return vb_error(VB_ERR_INVALID, "sim: device %d %s 0x%llx+%llu: device %d's %s, and device %d is no peer of it",
                        by, verb, (unsigned long long)addr, (unsigned long long)size, holder, held_names[kind], by);
    return vb_error(VB_ERR_INVALID, "sim: device %d %s 0x%llx+%llu: device %d's %s was not opened to it "
                    "(CUDA: invalid argument)", by, verb, (unsigned long long)addr, (unsigned long long)size,
                    holder, held_names[kind]);
}

vb_status vb_sim_peer_read(vb_device *reader, vb_addr addr, uint64_t size)
{
    if (!vb_device_is_sim(reader)) return vb_error(VB_ERR_INVALID, "vb_sim_peer_read of a device that is no sim");
    sim_state *sim = sim_of(vb_device_uncapped(reader));
    VB_TRY(check_range(sim->ordinal, "reads", addr, size));
    held_kind kind;
    uint64_t access = 0;
    int holder = find_holder(sim->machine, addr, size, &kind, &access);
    if (holder < 0)
        return vb_error(VB_ERR_INVALID, "sim: device %d reads 0x%llx+%llu, which no device of its machine holds",
                        sim->ordinal, (unsigned long long)addr, (unsigned long long)size);
    return may_use(sim->machine, sim->ordinal, holder, kind, access, "reads", addr, size);
}

vb_status sim_machine_check_copy(vb_device *by, vb_addr addr, uint64_t size)
{
    sim_state *sim = sim_of(by);
    if (sim->machine->device_count == 1 || size == 0) return VB_OK;
    VB_TRY(check_range(sim->ordinal, "copies", addr, size));
    held_kind kind;
    uint64_t access = 0;
    int holder = find_holder(sim->machine, addr, size, &kind, &access);
    /* Its own memory, or no device's: as on a machine of one device. Not
     * peers: the driver stages the copy through the host. */
    if (holder < 0 || holder == sim->ordinal || !peers(sim->machine, sim->ordinal, holder)) return VB_OK;
    return may_use(sim->machine, sim->ordinal, holder, kind, access, "copies", addr, size);
}

int vb_sim_owner(vb_device *dev, vb_addr addr)
{
    vb_sim_machine *machine = vb_sim_machine_of(dev);
    if (!machine) return -1;
    held_kind kind;
    uint64_t access = 0;
    return find_holder(machine, addr, 1, &kind, &access);
}
