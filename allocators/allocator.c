/* vrambench — the handle every caller holds, wrapped around one ops table. */
#include "allocator.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The statistics a strategy keeps at the start of its state. */
static vb_alloc_stats *state_stats(const vb_allocator *allocator)
{
    return (vb_alloc_stats *)allocator->state;
}

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

/* The handle's lock: one per allocator, around every call into the strategy
 * (allocator.h, "Thread safety"). Uncontended, a lock and an unlock cost a
 * few tens of nanoseconds on the cache-hit path (README, microbench). */
static void allocator_lock(vb_allocator *allocator)
{
    pthread_mutex_lock(&allocator->lock);
}

static void allocator_unlock(vb_allocator *allocator)
{
    pthread_mutex_unlock(&allocator->lock);
}

/* Creates an allocator by name on `dev`. */
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
    if (!allocator) return vb_error(VB_ERR_OOM, "out of host memory");
    allocator->ops = ops;
    allocator->device = dev;
    if (!config) config = &no_config;
    /* external:PATH: PATH reaches the strategy as the first entry "path". */
    vb_config_entry *with_path = NULL;
    vb_config external_config;
    if (ops == &vb_external_allocator) {
        with_path = calloc(config->count + 1, sizeof *with_path);
        if (!with_path) {
            free(allocator);
            return vb_error(VB_ERR_OOM, "out of host memory");
        }
        with_path[0] = (vb_config_entry){"path", name + strlen(VB_EXTERNAL_PREFIX)};
        for (size_t i = 0; i < config->count; i++) with_path[i + 1] = config->entries[i];
        external_config = (vb_config){with_path, config->count + 1};
        config = &external_config;
    }
    vb_status status = ops->create(dev, config, &allocator->state);
    free(with_path);
    if (status != VB_OK) {
        free(allocator);
        return status;
    }
    pthread_mutex_init(&allocator->lock, NULL);
    *out = allocator;
    return VB_OK;
}

/* Destroys the instance and the handle. */
void vb_allocator_destroy(vb_allocator *allocator)
{
    if (!allocator) return;
    allocator->ops->destroy(allocator->state);
    pthread_mutex_destroy(&allocator->lock);
    free(allocator);
}

/* External fragmentation of a stats snapshot. */
double vb_external_fragmentation(const vb_alloc_stats *stats)
{
    if (stats->free_cached_bytes == 0) return 0.0;
    return (double)(stats->free_cached_bytes - stats->largest_free_block) /
           (double)stats->free_cached_bytes;
}

/* The statistics now, with the cached-free figures asked of the strategy.
 * The strategy is asked first, so that one whose figures can change outside
 * its calls (async: the pool releases memory at synchronizations) can bring
 * its stats up to date before they are copied. */
static void read_stats(vb_allocator *allocator, vb_alloc_stats *out)
{
    uint64_t free_cached_bytes = 0, largest_free_block = 0;
    allocator->ops->cached(allocator->state, &free_cached_bytes, &largest_free_block);
    *out = *state_stats(allocator);
    out->free_cached_bytes = free_cached_bytes;
    out->largest_free_block = largest_free_block;
}

/* read_stats under the handle's lock. */
void vb_allocator_stats(vb_allocator *allocator, vb_alloc_stats *out)
{
    allocator_lock(allocator);
    read_stats(allocator, out);
    allocator_unlock(allocator);
}

/* Restarts the peaks from the current values. */
void vb_allocator_reset_peaks(vb_allocator *allocator)
{
    vb_alloc_stats stats;
    allocator_lock(allocator);
    vb_stats_reset_peaks(state_stats(allocator));
    read_stats(allocator, &stats);
    allocator->seen_reserved_peak = stats.reserved_bytes_peak;
    allocator->external_frag_at_peak = vb_external_fragmentation(&stats);
    allocator_unlock(allocator);
}

/* malloc with the shared size-0 rule. When the call raised the reserved peak,
 * the fragmentation "at peak" is taken now: peaks rise only when memory comes
 * from the device, rare next to cache hits, so the walk stays off the hot path. */
vb_status vb_malloc(vb_allocator *allocator, uint64_t size, vb_stream stream, vb_addr *out)
{
    if (size == 0) {
        *out = 0;
        return VB_OK;
    }
    allocator_lock(allocator);
    vb_status status = allocator->ops->malloc(allocator->state, size, stream, out);
    if (status == VB_OK && state_stats(allocator)->reserved_bytes_peak > allocator->seen_reserved_peak) {
        vb_alloc_stats stats;
        read_stats(allocator, &stats);
        allocator->seen_reserved_peak = stats.reserved_bytes_peak;
        allocator->external_frag_at_peak = vb_external_fragmentation(&stats);
    }
    allocator_unlock(allocator);
    return status;
}

/* free with the shared rule that address 0 is a no-op. */
vb_status vb_free(vb_allocator *allocator, vb_addr addr)
{
    if (addr == 0) return VB_OK;
    allocator_lock(allocator);
    vb_status status = allocator->ops->free(allocator->state, addr);
    allocator_unlock(allocator);
    return status;
}

/* record_stream, a no-op for strategies that rely on the device's ordering. */
vb_status vb_record_stream(vb_allocator *allocator, vb_addr addr, vb_stream stream)
{
    if (!allocator->ops->record_stream || addr == 0) return VB_OK;
    allocator_lock(allocator);
    vb_status status = allocator->ops->record_stream(allocator->state, addr, stream);
    allocator_unlock(allocator);
    return status;
}

vb_status vb_empty_cache(vb_allocator *allocator)
{
    allocator_lock(allocator);
    vb_status status = allocator->ops->empty_cache(allocator->state);
    allocator_unlock(allocator);
    return status;
}
