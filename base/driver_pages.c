/* vrambench — what the driver really uses for cudaMalloc blocks (see driver_pages.h). */
#include "driver_pages.h"

int vb_driver_is_small(uint64_t size)
{
    return size > 0 && size < VB_DRIVER_PAGE;
}

uint64_t vb_driver_block_bytes(uint64_t size)
{
    uint64_t granule = vb_driver_is_small(size) ? VB_DRIVER_SMALL_ROUNDING : VB_DRIVER_PAGE;
    if (size > UINT64_MAX - (granule - 1)) return 0;
    return (size + granule - 1) / granule * granule;
}

uint64_t vb_driver_pages_add(vb_driver_pages *pages, vb_addr addr, uint64_t size)
{
    if (!vb_driver_is_small(size)) {
        uint64_t bytes = vb_driver_block_bytes(size);
        pages->bytes += bytes;
        return bytes;
    }
    int added = 0;
    uint64_t *count = vb_addr_map_slot(&pages->small_pages, addr / VB_DRIVER_PAGE + 1, &added);
    if (!count) return UINT64_MAX;
    (*count)++;
    if (!added) return 0;
    pages->bytes += VB_DRIVER_PAGE;
    return VB_DRIVER_PAGE;
}

uint64_t vb_driver_pages_remove(vb_driver_pages *pages, vb_addr addr, uint64_t size)
{
    if (!vb_driver_is_small(size)) {
        uint64_t bytes = vb_driver_block_bytes(size);
        pages->bytes -= bytes;
        return bytes;
    }
    uint64_t key = addr / VB_DRIVER_PAGE + 1; /* + 1: key 0 cannot be stored */
    uint64_t count = 0;
    if (!vb_addr_map_get(&pages->small_pages, key, &count) || count == 0) return 0;
    if (count > 1) {
        vb_addr_map_put(&pages->small_pages, key, count - 1); /* replaces: needs no memory */
        return 0;
    }
    vb_addr_map_remove(&pages->small_pages, key, NULL);
    pages->bytes -= VB_DRIVER_PAGE;
    return VB_DRIVER_PAGE;
}

void vb_driver_pages_clear(vb_driver_pages *pages)
{
    vb_addr_map_clear(&pages->small_pages);
    pages->bytes = 0;
}
