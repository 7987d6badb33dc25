/* vrambench — the handle every caller holds, wrapped around one ops table:
 * the seam that keeps the statistics (the rules are in allocator.h). */
#include "allocator.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const vb_driver_call_names[VB_DRIVER_CALL_KINDS] = {
    [VB_CALL_MEM_ALLOC] = "mem_alloc",       [VB_CALL_MEM_FREE] = "mem_free",
    [VB_CALL_MEM_INFO] = "mem_info",         [VB_CALL_VM_RESERVE] = "vm_reserve",
    [VB_CALL_VM_FREE] = "vm_free",           [VB_CALL_VM_CREATE] = "vm_create",
    [VB_CALL_VM_RELEASE] = "vm_release",     [VB_CALL_VM_MAP] = "vm_map",
    [VB_CALL_VM_SET_ACCESS] = "vm_set_access", [VB_CALL_VM_UNMAP] = "vm_unmap",         [VB_CALL_POOL_CREATE] = "pool_create",
    [VB_CALL_POOL_DESTROY] = "pool_destroy", [VB_CALL_POOL_MALLOC] = "pool_malloc",
    [VB_CALL_POOL_FREE] = "pool_free",       [VB_CALL_POOL_TRIM] = "pool_trim",
    [VB_CALL_POOL_USAGE] = "pool_usage",
};

/* What the seam keeps of one live block, in its slot. A free slot has
 * address 0 and holds the index + 1 of the next free slot in `requested`.
 * A block's key is its slot + 1 with the slot's generation above it (bit
 * 32 up), so that a key stays the key of that block only. */
typedef struct vb_live_block {
    vb_addr addr;                  /* 0: a free slot */
    uint64_t requested, allocated;
    uint64_t tag;                  /* the strategy's word for the block (vb_grant.tag) */
    uint32_t generation;           /* blocks freed from the slot so far */
} vb_live_block;

/* Slots a key can name: its low 32 bits hold slot + 1. */
#define KEY_SLOTS UINT32_MAX
/* What stands for "no slot". */
#define NO_SLOT UINT64_MAX

/* ------------------------------------------------------------------------ */
/* Counting: use and reservation, with their peaks                           */
/* ------------------------------------------------------------------------ */

/* Adds a block's use, raising the peaks it passes. */
static void add_use(vb_alloc_stats *s, uint64_t requested, uint64_t allocated)
{
    s->requested_bytes += requested;
    s->allocated_bytes += allocated;
    if (s->requested_bytes > s->requested_bytes_peak) s->requested_bytes_peak = s->requested_bytes;
    if (s->allocated_bytes > s->allocated_bytes_peak) s->allocated_bytes_peak = s->allocated_bytes;
}

/* Adds bytes held from the device, raising the reserved peak. */
static void add_reserved(vb_alloc_stats *s, uint64_t bytes)
{
    s->reserved_bytes += bytes;
    if (s->reserved_bytes > s->reserved_bytes_peak) s->reserved_bytes_peak = s->reserved_bytes;
}

/* ------------------------------------------------------------------------ */
/* The counting device: the real device's ops, the memory ops counted        */
/* ------------------------------------------------------------------------ */

/* The counting device never closes the real one. */
static void counting_close(vb_device *dev)
{
    (void)dev;
}

/* The allocator a counting device belongs to. */
static vb_allocator *owner_of(vb_device *dev)
{
    return (vb_allocator *)(void *)((char *)dev - offsetof(vb_allocator, counting_device));
}

/* Counts one call of `kind` and returns the real device. */
static vb_device *count_call(vb_device *dev, vb_driver_call kind)
{
    vb_allocator *allocator = owner_of(dev);
    allocator->counted.driver_calls[kind]++;
    return allocator->device;
}

/* Notes `bytes` held from the device under `key` (an address or a handle);
 * -1 when host memory runs out. */
static int hold(vb_allocator *allocator, vb_addr_map *held, uint64_t key, uint64_t bytes)
{
    if (vb_addr_map_put(held, key, bytes) != 0) return -1;
    add_reserved(&allocator->counted, bytes);
    return 0;
}

/* Notes that what was held under `key` went back to the device. */
static void unhold(vb_allocator *allocator, vb_addr_map *held, uint64_t key)
{
    uint64_t bytes = 0;
    if (vb_addr_map_remove(held, key, &bytes)) allocator->counted.reserved_bytes -= bytes;
}

/* mem_alloc: what the driver really uses is held (base/driver_pages.h:
 * whole 2 MiB pages, small blocks packed into shared ones); driver_blocks
 * keeps each block's size for its free. */
static vb_status counting_mem_alloc(vb_device *dev, uint64_t size, vb_addr *out)
{
    vb_allocator *allocator = owner_of(dev);
    vb_device *real = count_call(dev, VB_CALL_MEM_ALLOC);
    allocator->counted.driver_alloc_calls++;
    vb_status status = real->ops->mem_alloc(real, size, out);
    if (status != VB_OK) return status;
    uint64_t added = 0;
    if (vb_addr_map_put(&allocator->driver_blocks, *out, size) != 0 ||
        (added = vb_driver_pages_add(&allocator->driver_pages, *out, size)) == UINT64_MAX) {
        vb_addr_map_remove(&allocator->driver_blocks, *out, NULL);
        real->ops->mem_free(real, *out);
        return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    }
    add_reserved(&allocator->counted, added);
    return VB_OK;
}

/* mem_free: a driver free; the bytes go when the device took them back. */
static vb_status counting_mem_free(vb_device *dev, vb_addr addr)
{
    vb_allocator *allocator = owner_of(dev);
    vb_device *real = count_call(dev, VB_CALL_MEM_FREE);
    allocator->counted.driver_free_calls++;
    vb_status status = real->ops->mem_free(real, addr);
    uint64_t size = 0;
    if (status == VB_OK && vb_addr_map_remove(&allocator->driver_blocks, addr, &size))
        allocator->counted.reserved_bytes -= vb_driver_pages_remove(&allocator->driver_pages, addr, size);
    return status;
}

/* Counted, passed on. */
static vb_status counting_mem_info(vb_device *dev, uint64_t *free_bytes, uint64_t *total_bytes)
{
    vb_device *real = count_call(dev, VB_CALL_MEM_INFO);
    return real->ops->mem_info(real, free_bytes, total_bytes);
}

/* Address space holds no memory: counted, passed on. */
static vb_status counting_vm_reserve(vb_device *dev, uint64_t size, vb_addr *out)
{
    vb_device *real = count_call(dev, VB_CALL_VM_RESERVE);
    return real->ops->vm_reserve(real, size, out);
}

/* Counted, passed on. */
static vb_status counting_vm_free(vb_device *dev, vb_addr addr, uint64_t size)
{
    vb_device *real = count_call(dev, VB_CALL_VM_FREE);
    return real->ops->vm_free(real, addr, size);
}

/* vm_create: the physical memory is what is held, mapped or not. */
static vb_status counting_vm_create(vb_device *dev, uint64_t size, vb_phys *out)
{
    vb_allocator *allocator = owner_of(dev);
    vb_device *real = count_call(dev, VB_CALL_VM_CREATE);
    allocator->counted.driver_alloc_calls++;
    vb_status status = real->ops->vm_create(real, size, out);
    if (status != VB_OK) return status;
    if (hold(allocator, &allocator->phys_chunks, *out, size) != 0) {
        real->ops->vm_release(real, *out);
        return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    }
    return VB_OK;
}

/* vm_release: a driver free; the chunk's bytes go when it is released. */
static vb_status counting_vm_release(vb_device *dev, vb_phys handle)
{
    vb_allocator *allocator = owner_of(dev);
    vb_device *real = count_call(dev, VB_CALL_VM_RELEASE);
    allocator->counted.driver_free_calls++;
    vb_status status = real->ops->vm_release(real, handle);
    if (status == VB_OK) unhold(allocator, &allocator->phys_chunks, handle);
    return status;
}

/* Mapping moves no bytes between device and allocator: counted, passed on. */
static vb_status counting_vm_map(vb_device *dev, vb_addr addr, uint64_t size, vb_phys handle)
{
    vb_device *real = count_call(dev, VB_CALL_VM_MAP);
    return real->ops->vm_map(real, addr, size, handle);
}

/* Counted, passed on. */
static vb_status counting_vm_set_access(vb_device *dev, vb_addr addr, uint64_t size)
{
    vb_device *real = count_call(dev, VB_CALL_VM_SET_ACCESS);
    return real->ops->vm_set_access(real, addr, size);
}

/* Counted, passed on. */
static vb_status counting_vm_unmap(vb_device *dev, vb_addr addr, uint64_t size)
{
    vb_device *real = count_call(dev, VB_CALL_VM_UNMAP);
    return real->ops->vm_unmap(real, addr, size);
}

/* pool_create: the seam remembers the pool, to read its memory with the stats. */
static vb_status counting_pool_create(vb_device *dev, uint64_t release_threshold, vb_pool *out)
{
    vb_allocator *allocator = owner_of(dev);
    vb_device *real = count_call(dev, VB_CALL_POOL_CREATE);
    if (allocator->pool_count == allocator->pool_capacity) {
        size_t capacity = allocator->pool_capacity ? allocator->pool_capacity * 2 : 2;
        vb_pool *pools = realloc(allocator->pools, capacity * sizeof *pools);
        if (!pools) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
        allocator->pools = pools;
        allocator->pool_capacity = capacity;
    }
    vb_status status = real->ops->pool_create(real, release_threshold, out);
    if (status == VB_OK) allocator->pools[allocator->pool_count++] = *out;
    return status;
}

/* pool_destroy: the pool's memory leaves the stats with it. */
static void counting_pool_destroy(vb_device *dev, vb_pool pool)
{
    vb_allocator *allocator = owner_of(dev);
    vb_device *real = count_call(dev, VB_CALL_POOL_DESTROY);
    for (size_t i = 0; i < allocator->pool_count; i++)
        if (allocator->pools[i] == pool) {
            allocator->pools[i] = allocator->pools[--allocator->pool_count];
            break;
        }
    real->ops->pool_destroy(real, pool);
}

/* pool_malloc and pool_free: a driver allocation and a driver free each. */
static vb_status counting_pool_malloc(vb_device *dev, vb_pool pool, uint64_t size, vb_stream stream, vb_addr *out)
{
    vb_device *real = count_call(dev, VB_CALL_POOL_MALLOC);
    owner_of(dev)->counted.driver_alloc_calls++;
    return real->ops->pool_malloc(real, pool, size, stream, out);
}

/* Counted as a driver free, passed on. */
static vb_status counting_pool_free(vb_device *dev, vb_pool pool, vb_addr addr, vb_stream stream)
{
    vb_device *real = count_call(dev, VB_CALL_POOL_FREE);
    owner_of(dev)->counted.driver_free_calls++;
    return real->ops->pool_free(real, pool, addr, stream);
}

/* pool_trim: a driver free when it released memory (the pool's reserved
 * bytes dropped across the call). Trims are rare: two queries are cheap here. */
static vb_status counting_pool_trim(vb_device *dev, vb_pool pool, uint64_t keep_bytes)
{
    vb_device *real = count_call(dev, VB_CALL_POOL_TRIM);
    uint64_t before = 0, after = 0, used = 0;
    int known = real->ops->pool_usage(real, pool, &before, &used) == VB_OK;
    vb_status status = real->ops->pool_trim(real, pool, keep_bytes);
    if (status == VB_OK && known && real->ops->pool_usage(real, pool, &after, &used) == VB_OK && after < before)
        owner_of(dev)->counted.driver_free_calls++;
    return status;
}

/* A strategy's own query of its pool: counted, passed on. */
static vb_status counting_pool_usage(vb_device *dev, vb_pool pool, uint64_t *reserved_bytes, uint64_t *used_bytes)
{
    vb_device *real = count_call(dev, VB_CALL_POOL_USAGE);
    return real->ops->pool_usage(real, pool, reserved_bytes, used_bytes);
}

/* Makes the counting device of `allocator` around `dev`. The ops that are
 * not counted are the real device's own: the counting device carries the
 * real device's state, which is all a backend's op reads of its handle. */
static void counting_init(vb_allocator *allocator, vb_device *dev)
{
    vb_device_ops *ops = &allocator->counting_ops;
    *ops = *dev->ops;
    ops->close = counting_close;
    ops->mem_alloc = counting_mem_alloc;
    ops->mem_free = counting_mem_free;
    ops->mem_info = counting_mem_info;
    ops->vm_reserve = counting_vm_reserve;
    ops->vm_free = counting_vm_free;
    ops->vm_create = counting_vm_create;
    ops->vm_release = counting_vm_release;
    ops->vm_map = counting_vm_map;
    ops->vm_set_access = counting_vm_set_access;
    ops->vm_unmap = counting_vm_unmap;
    ops->pool_create = counting_pool_create;
    ops->pool_destroy = counting_pool_destroy;
    ops->pool_malloc = counting_pool_malloc;
    ops->pool_free = counting_pool_free;
    ops->pool_trim = counting_pool_trim;
    ops->pool_usage = counting_pool_usage;
    allocator->counting_device = (vb_device){ops, dev->state};
}

/* The allocator whose counting device `dev` is, or NULL. */
static vb_allocator *seam_of(vb_device *dev)
{
    return dev && dev->ops->close == counting_close ? owner_of(dev) : NULL;
}

/* The counts of the allocator a counting device belongs to. */
const vb_alloc_stats *vb_seam_stats(vb_device *counting_device)
{
    vb_allocator *allocator = seam_of(counting_device);
    return allocator ? &allocator->counted : NULL;
}

/* ------------------------------------------------------------------------ */
/* Live blocks                                                                */
/* ------------------------------------------------------------------------ */

/* Every live block's address and tag, slot by slot. */
void vb_seam_each_live(vb_device *counting_device, void (*visit)(void *context, vb_addr addr, uint64_t tag),
                       void *context)
{
    vb_allocator *allocator = seam_of(counting_device);
    if (!allocator) return;
    for (size_t slot = 0; slot < allocator->block_count; slot++)
        if (allocator->blocks[slot].addr) visit(context, allocator->blocks[slot].addr, allocator->blocks[slot].tag);
}

/* Makes sure `live` indexes every live block by address, building it from
 * the slots the first time a call names a block by its address. A strategy
 * that handed out one address twice while it was live is caught here (or,
 * once the index is kept, at the malloc that does it). */
static vb_status index_live(vb_allocator *allocator)
{
    if (allocator->live_indexed) return VB_OK;
    for (size_t slot = 0; slot < allocator->block_count; slot++) {
        vb_addr addr = allocator->blocks[slot].addr;
        if (!addr) continue;
        int added = 0;
        uint64_t *value = vb_addr_map_slot(&allocator->live, addr, &added);
        if (!value || !added) {
            vb_addr_map_clear(&allocator->live);
            if (!value) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
            return vb_error(VB_ERR_INVALID, "%s: malloc handed out 0x%llx while it was still live",
                            allocator->ops->name, (unsigned long long)addr);
        }
        *value = slot;
    }
    allocator->live_indexed = 1;
    return VB_OK;
}

/* The slot of the live block `key` names, or NO_SLOT. */
static uint64_t slot_of_key(const vb_allocator *allocator, uint64_t key)
{
    uint64_t slot = (key & KEY_SLOTS) - 1;
    if ((key & KEY_SLOTS) == 0 || slot >= allocator->block_count) return NO_SLOT;
    const vb_live_block *block = &allocator->blocks[slot];
    return block->addr && block->generation == (uint32_t)(key >> 32) ? slot : NO_SLOT;
}

/* Records a live block and gives its key; 0, -1 when host memory runs out
 * (or the slots a key can name), -2 when `addr` is live already (a
 * strategy's bug, seen where the address index is kept). */
static int track_block(vb_allocator *allocator, vb_addr addr, uint64_t requested, const vb_grant *grant,
                       uint64_t *key)
{
    uint64_t slot;
    if (allocator->free_slots) {
        slot = allocator->free_slots - 1;
    } else {
        if (allocator->block_count == KEY_SLOTS) return -1;
        if (allocator->block_count == allocator->block_capacity) {
            size_t capacity = allocator->block_capacity ? allocator->block_capacity * 2 : 256;
            vb_live_block *blocks = realloc(allocator->blocks, capacity * sizeof *blocks);
            if (!blocks) return -1;
            allocator->blocks = blocks;
            allocator->block_capacity = capacity;
        }
        slot = allocator->block_count;
        allocator->blocks[slot].generation = 0;
    }
    if (allocator->live_indexed) {
        int added = 0;
        uint64_t *value = vb_addr_map_slot(&allocator->live, addr, &added);
        if (!value) return -1;
        if (!added) return -2;
        *value = slot;
    }
    vb_live_block *block = &allocator->blocks[slot];
    if (allocator->free_slots) {
        allocator->free_slots = block->requested;
        /* The next malloc reads the slot now first on the list: its miss,
         * asked for now, overlaps with this call's work. */
        if (allocator->free_slots) __builtin_prefetch(&allocator->blocks[allocator->free_slots - 1]);
    } else {
        allocator->block_count++;
    }
    block->addr = addr;
    block->requested = requested;
    block->allocated = grant->size;
    block->tag = grant->tag;
    *key = (uint64_t)block->generation << 32 | (slot + 1);
    return 0;
}

/* Frees the live block of `slot` through the strategy and empties the slot
 * (its address is out of `live` already); on failure nothing changes. */
static vb_status free_slot(vb_allocator *allocator, uint64_t slot)
{
    vb_live_block *block = &allocator->blocks[slot];
    vb_status status = allocator->ops->free(allocator->state, block->addr, block->tag);
    if (status != VB_OK) return status;
    allocator->counted.requested_bytes -= block->requested;
    allocator->counted.allocated_bytes -= block->allocated;
    block->addr = 0;
    block->generation++;
    block->requested = allocator->free_slots;
    allocator->free_slots = slot + 1;
    return VB_OK;
}

/* ------------------------------------------------------------------------ */
/* Registry look-ups                                                          */
/* ------------------------------------------------------------------------ */

/* The strategy named `name`, or NULL. */
const vb_allocator_ops *vb_allocator_find(const char *name)
{
    if (strncmp(name, VB_EXTERNAL_PREFIX, strlen(VB_EXTERNAL_PREFIX)) == 0) return &vb_external_allocator;
    for (size_t i = 0; vb_allocator_registry[i]; i++)
        if (strcmp(vb_allocator_registry[i]->name, name) == 0) return vb_allocator_registry[i];
    return NULL;
}

/* Lists the registered names, comma-separated, into `out`. */
void vb_allocator_names(char *out, size_t capacity)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; vb_allocator_registry[i] && used < capacity; i++)
        used += (size_t)snprintf(out + used, capacity - used, "%s%s", i ? ", " : "",
                                 vb_allocator_registry[i]->name);
}

/* ------------------------------------------------------------------------ */
/* The handle                                                                 */
/* ------------------------------------------------------------------------ */

/* The handle's lock: one per allocator, around every call into the strategy
 * (allocator.h, "Thread safety"). */
static void allocator_lock(vb_allocator *allocator)
{
    vb_seam_lock_take(&allocator->lock);
}

static void allocator_unlock(vb_allocator *allocator)
{
    vb_seam_lock_give(&allocator->lock);
}

/* Frees what the seam itself holds. */
static void free_handle(vb_allocator *allocator)
{
    vb_addr_map_clear(&allocator->live);
    vb_addr_map_clear(&allocator->driver_blocks);
    vb_driver_pages_clear(&allocator->driver_pages);
    vb_addr_map_clear(&allocator->phys_chunks);
    free(allocator->blocks);
    free(allocator->pools);
    free(allocator->recipe_name); /* one block with the entries and their strings */
    free(allocator);
}

/* Keeps a copy of the name and configuration, in one block: the name, the
 * entries, then their strings. 0, or -1 when host memory runs out. */
static int keep_recipe(vb_allocator *allocator, const char *name, const vb_config *config)
{
    size_t bytes = strlen(name) + 1 + config->count * sizeof(vb_config_entry);
    for (size_t i = 0; i < config->count; i++)
        bytes += strlen(config->entries[i].key) + 1 + strlen(config->entries[i].value) + 1;
    char *block = malloc(bytes + _Alignof(vb_config_entry));
    if (!block) return -1;
    size_t name_bytes = strlen(name) + 1;
    size_t entries_at = (name_bytes + _Alignof(vb_config_entry) - 1) / _Alignof(vb_config_entry) *
                        _Alignof(vb_config_entry);
    memcpy(block, name, name_bytes);
    vb_config_entry *entries = (vb_config_entry *)(void *)(block + entries_at);
    char *text = (char *)(entries + config->count);
    for (size_t i = 0; i < config->count; i++) {
        size_t key = strlen(config->entries[i].key) + 1, value = strlen(config->entries[i].value) + 1;
        entries[i].key = memcpy(text, config->entries[i].key, key);
        entries[i].value = memcpy(text + key, config->entries[i].value, value);
        text += key + value;
    }
    allocator->recipe_name = block;
    allocator->recipe = (vb_config){entries, config->count};
    return 0;
}

/* Creates an allocator by name on `dev`, the strategy on the counting device. */
vb_status vb_allocator_create(const char *name, vb_device *dev, const vb_config *config,
                              vb_allocator **out)
{
    static const vb_config no_config = {NULL, 0};
    const vb_allocator_ops *ops = vb_allocator_find(name);
    if (!ops) {
        char names[512];
        vb_allocator_names(names, sizeof names);
        return vb_error(VB_ERR_INVALID, "unknown allocator '%s' (known: %s)", name, names);
    }
    vb_allocator *allocator = calloc(1, sizeof *allocator);
    if (!allocator) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    allocator->ops = ops;
    allocator->device = dev;
    allocator->live.sparse = 1; /* looked up on every malloc and free */
    counting_init(allocator, dev);
    if (!config) config = &no_config;
    if (keep_recipe(allocator, name, config) != 0) {
        free_handle(allocator);
        return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    }
    /* external:PATH: PATH reaches the strategy as the first entry "path". */
    vb_config_entry *with_path = NULL;
    vb_config external_config;
    if (ops == &vb_external_allocator) {
        with_path = calloc(config->count + 1, sizeof *with_path);
        if (!with_path) {
            free_handle(allocator);
            return vb_error(VB_ERR_HOST_OOM, "out of host memory");
        }
        with_path[0] = (vb_config_entry){"path", name + strlen(VB_EXTERNAL_PREFIX)};
        for (size_t i = 0; i < config->count; i++) with_path[i + 1] = config->entries[i];
        external_config = (vb_config){with_path, config->count + 1};
        config = &external_config;
    }
    vb_status status = ops->create(&allocator->counting_device, config, &allocator->state);
    free(with_path);
    if (status != VB_OK) {
        free_handle(allocator);
        return status;
    }
    vb_seam_lock_init(&allocator->lock);
    *out = allocator;
    return VB_OK;
}

vb_status vb_allocator_create_like(const vb_allocator *model, vb_device *dev, vb_allocator **out)
{
    return vb_allocator_create(model->recipe_name, dev, &model->recipe, out);
}

/* Destroys the instance and the handle. */
void vb_allocator_destroy(vb_allocator *allocator)
{
    if (!allocator) return;
    allocator->ops->destroy(allocator->state);
    vb_seam_lock_destroy(&allocator->lock);
    free_handle(allocator);
}

/* External fragmentation of a stats snapshot. */
double vb_external_fragmentation(const vb_alloc_stats *stats)
{
    if (stats->free_cached_bytes == 0) return 0.0;
    return (double)(stats->free_cached_bytes - stats->largest_free_block) /
           (double)stats->free_cached_bytes;
}

/* The counts, with the memory of the strategy's pools read now: current
 * reserved bytes, and the peak from each pool's high-water mark (added to
 * the counted peak: exact, as no strategy holds memory both ways), and what
 * an external strategy holds outside the seam. Caller holds the lock. */
static void read_counts(vb_allocator *allocator, vb_alloc_stats *out)
{
    *out = allocator->counted;
    vb_device *real = allocator->device;
    for (size_t i = 0; i < allocator->pool_count; i++) {
        uint64_t reserved = 0, used = 0, reserved_high = 0, used_high = 0;
        if (real->ops->pool_usage(real, allocator->pools[i], &reserved, &used) != VB_OK) continue;
        if (real->ops->pool_high(real, allocator->pools[i], &reserved_high, &used_high) != VB_OK ||
            reserved_high < reserved)
            reserved_high = reserved;
        out->reserved_bytes += reserved;
        out->reserved_bytes_peak += reserved_high;
    }
    if (allocator->ops->outside_reserved) {
        uint64_t current = 0, peak = 0;
        allocator->ops->outside_reserved(allocator->state, &current, &peak);
        out->reserved_bytes += current;
        out->reserved_bytes_peak += peak > current ? peak : current;
    }
    out->free_cached_bytes = 0;
    out->largest_free_block = 0;
}

/* read_counts and the cached figures: everything reserved and not handed
 * out, and the strategy's largest free run of it. Caller holds the lock. */
static void read_stats(vb_allocator *allocator, vb_alloc_stats *out)
{
    read_counts(allocator, out);
    if (out->reserved_bytes > out->allocated_bytes) out->free_cached_bytes = out->reserved_bytes - out->allocated_bytes;
    out->largest_free_block = allocator->ops->largest_free_block ? allocator->ops->largest_free_block(allocator->state)
                                                                 : out->free_cached_bytes;
}

/* Takes the fragmentation now as the one at the reserved peak. Caller holds
 * the lock. */
static void note_fragmentation(vb_allocator *allocator)
{
    vb_alloc_stats stats;
    read_stats(allocator, &stats);
    allocator->seen_reserved_peak = stats.reserved_bytes_peak;
    allocator->external_frag_at_peak = vb_external_fragmentation(&stats);
}

/* read_counts under the handle's lock. */
void vb_allocator_counts(vb_allocator *allocator, vb_alloc_stats *out)
{
    allocator_lock(allocator);
    read_counts(allocator, out);
    allocator_unlock(allocator);
}

/* read_stats under the handle's lock. */
void vb_allocator_stats(vb_allocator *allocator, vb_alloc_stats *out)
{
    allocator_lock(allocator);
    read_stats(allocator, out);
    allocator_unlock(allocator);
}

/* Restarts the peaks from the current values, the pools' marks too. */
void vb_allocator_reset_peaks(vb_allocator *allocator)
{
    allocator_lock(allocator);
    vb_alloc_stats *s = &allocator->counted;
    s->requested_bytes_peak = s->requested_bytes;
    s->allocated_bytes_peak = s->allocated_bytes;
    s->reserved_bytes_peak = s->reserved_bytes;
    vb_device *real = allocator->device;
    for (size_t i = 0; i < allocator->pool_count; i++) real->ops->pool_reset_high(real, allocator->pools[i]);
    note_fragmentation(allocator);
    allocator_unlock(allocator);
}

/* Pools only: their high-water marks are read (nothing else), and the
 * peak they make compared with the one seen. */
void vb_allocator_note_peak(vb_allocator *allocator)
{
    if (allocator->pool_count == 0) return;
    allocator_lock(allocator);
    uint64_t peak = allocator->counted.reserved_bytes_peak;
    vb_device *real = allocator->device;
    for (size_t i = 0; i < allocator->pool_count; i++) {
        uint64_t reserved_high = 0, used_high = 0;
        if (real->ops->pool_high(real, allocator->pools[i], &reserved_high, &used_high) == VB_OK) peak += reserved_high;
    }
    if (peak > allocator->seen_reserved_peak) note_fragmentation(allocator);
    allocator_unlock(allocator);
}

/* Narrows the limit interval of the run by a call's (vb_grant). */
static void note_limit(vb_alloc_stats *s, const vb_grant *grant)
{
    if (grant->limit_same_from > s->limit_same_from) s->limit_same_from = grant->limit_same_from;
    if (grant->limit_same_to && (!s->limit_same_to || grant->limit_same_to < s->limit_same_to))
        s->limit_same_to = grant->limit_same_to;
}

/* The body of vb_malloc, under the lock. */
static vb_status malloc_locked(vb_allocator *allocator, uint64_t size, vb_stream stream, vb_addr *out,
                               uint64_t *out_key)
{
    vb_grant grant = {0};
    vb_status status = allocator->ops->malloc(allocator->state, size, stream, &grant);
    allocator->counted.alloc_retries += grant.retried != 0;
    note_limit(&allocator->counted, &grant);
    if (status != VB_OK) {
        allocator->counted.ooms += status == VB_ERR_OOM;
        return status;
    }
    uint64_t key = 0;
    int tracked = track_block(allocator, grant.addr, size, &grant, &key);
    if (tracked == -2)
        return vb_error(VB_ERR_INVALID, "%s: malloc handed out 0x%llx, which is still live", allocator->ops->name,
                        (unsigned long long)grant.addr);
    if (tracked != 0) {
        allocator->ops->free(allocator->state, grant.addr, grant.tag);
        return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    }
    add_use(&allocator->counted, size, grant.size);
    if (allocator->counted.reserved_bytes_peak > allocator->seen_reserved_peak) note_fragmentation(allocator);
    *out = grant.addr;
    if (out_key) *out_key = key;
    return VB_OK;
}

/* malloc with the shared size-0 rule; counts the use, the OOM or the retry.
 * When the call raised the reserved peak, the fragmentation "at peak" is
 * taken now: peaks rise only when memory comes from the device, rare next
 * to cache hits, so the walk stays off the hot path. */
vb_status vb_malloc_keyed(vb_allocator *allocator, uint64_t size, vb_stream stream, vb_addr *out, uint64_t *key)
{
    if (key) *key = 0;
    if (size == 0) {
        *out = 0;
        return VB_OK;
    }
    allocator_lock(allocator);
    vb_status status = malloc_locked(allocator, size, stream, out, key);
    allocator_unlock(allocator);
    return status;
}

vb_status vb_malloc(vb_allocator *allocator, uint64_t size, vb_stream stream, vb_addr *out)
{
    return vb_malloc_keyed(allocator, size, stream, out, NULL);
}

/* The body of vb_free, under the lock: the slot from the address index. */
static vb_status free_locked(vb_allocator *allocator, vb_addr addr)
{
    vb_status status = index_live(allocator);
    if (status != VB_OK) return status;
    uint64_t slot;
    if (!vb_addr_map_remove(&allocator->live, addr, &slot))
        return vb_error(VB_ERR_INVALID, "%s: free of 0x%llx, which is not allocated (unknown or freed twice)",
                        allocator->ops->name, (unsigned long long)addr);
    status = free_slot(allocator, slot);
    if (status != VB_OK) vb_addr_map_put(&allocator->live, addr, slot); /* cannot fail: the entry's room is still there */
    return status;
}

/* free with the shared rule that address 0 is a no-op; an address that is
 * not live never reaches the strategy. */
vb_status vb_free(vb_allocator *allocator, vb_addr addr)
{
    if (addr == 0) return VB_OK;
    allocator_lock(allocator);
    vb_status status = free_locked(allocator, addr);
    allocator_unlock(allocator);
    return status;
}

/* The body of vb_free_keyed, under the lock: the slot from the key. */
static vb_status free_keyed_locked(vb_allocator *allocator, uint64_t key)
{
    uint64_t slot = slot_of_key(allocator, key);
    if (slot == NO_SLOT)
        return vb_error(VB_ERR_INVALID, "%s: free of block key 0x%llx, which names no live block (freed twice?)",
                        allocator->ops->name, (unsigned long long)key);
    vb_addr addr = allocator->blocks[slot].addr;
    if (allocator->live_indexed) vb_addr_map_remove(&allocator->live, addr, NULL);
    vb_status status = free_slot(allocator, slot);
    if (status != VB_OK && allocator->live_indexed) vb_addr_map_put(&allocator->live, addr, slot);
    return status;
}

/* free by key; key 0 is a no-op, as address 0 is to vb_free. */
vb_status vb_free_keyed(vb_allocator *allocator, uint64_t key)
{
    if (key == 0) return VB_OK;
    allocator_lock(allocator);
    vb_status status = free_keyed_locked(allocator, key);
    allocator_unlock(allocator);
    return status;
}

/* Stage 0 touches the slot's lines only (a slot is 40 bytes: half of
 * them straddle two lines, and slot_of_key reads the generation, at the
 * end); the later ones read the slot, for the strategy's tag. */
void vb_prefetch_frees(const vb_allocator *allocator, const uint64_t keys[VB_PREFETCH_STAGES])
{
    uint64_t slot = (keys[0] & KEY_SLOTS) - 1;
    if ((keys[0] & KEY_SLOTS) != 0 && slot < allocator->block_count) {
        const vb_live_block *block = &allocator->blocks[slot];
        __builtin_prefetch(block);
        __builtin_prefetch(&block->generation);
    }
    if (!allocator->ops->prefetch_free) return;
    uint64_t tags[VB_STRATEGY_PREFETCH_STAGES];
    for (int stage = 1; stage < VB_PREFETCH_STAGES; stage++) {
        slot = slot_of_key(allocator, keys[stage]);
        tags[stage - 1] = slot == NO_SLOT ? 0 : allocator->blocks[slot].tag;
    }
    allocator->ops->prefetch_free(allocator->state, tags);
}

/* The address in the key's slot, under the lock (a malloc may move the slots). */
vb_addr vb_keyed_addr(vb_allocator *allocator, uint64_t key)
{
    allocator_lock(allocator);
    uint64_t slot = slot_of_key(allocator, key);
    vb_addr addr = slot == NO_SLOT ? 0 : allocator->blocks[slot].addr;
    allocator_unlock(allocator);
    return addr;
}

/* record_stream, a no-op for strategies that rely on the device's ordering. */
vb_status vb_record_stream(vb_allocator *allocator, vb_addr addr, vb_stream stream)
{
    if (!allocator->ops->record_stream || addr == 0) return VB_OK;
    allocator_lock(allocator);
    uint64_t slot;
    vb_status status = index_live(allocator);
    if (status == VB_OK)
        status = vb_addr_map_get(&allocator->live, addr, &slot)
                     ? allocator->ops->record_stream(allocator->state, addr, allocator->blocks[slot].tag, stream)
                     : vb_error(VB_ERR_INVALID, "%s: record_stream on 0x%llx, which is not allocated",
                                allocator->ops->name, (unsigned long long)addr);
    allocator_unlock(allocator);
    return status;
}

/* empty_cache through the ops table. */
vb_status vb_empty_cache(vb_allocator *allocator)
{
    allocator_lock(allocator);
    vb_status status = allocator->ops->empty_cache(allocator->state);
    allocator_unlock(allocator);
    return status;
}

/* vb_allocator_blocks' array as the visitor fills it. */
typedef struct block_array {
    vb_block_info *items;
    size_t count, capacity;
    int failed;
} block_array;

static void append_block(void *context, const vb_block_info *block)
{
    block_array *array = context;
    if (array->count == array->capacity) {
        size_t capacity = array->capacity ? array->capacity * 2 : 256;
        vb_block_info *more = realloc(array->items, capacity * sizeof *more);
        if (!more) {
            array->failed = 1;
            return;
        }
        array->items = more;
        array->capacity = capacity;
    }
    array->items[array->count++] = *block;
}

vb_status vb_allocator_blocks(vb_allocator *allocator, vb_block_info **out, size_t *count)
{
    block_array array = {0};
    if (allocator->ops->segments) {
        allocator_lock(allocator);
        allocator->ops->segments(allocator->state, append_block, &array);
        allocator_unlock(allocator);
    }
    if (array.failed) {
        free(array.items);
        array = (block_array){0};
    }
    *out = array.items;
    *count = array.count;
    return array.failed ? vb_error(VB_ERR_HOST_OOM, "out of host memory") : VB_OK;
}
