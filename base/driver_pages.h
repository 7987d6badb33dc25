/* vrambench — what the driver really uses for cudaMalloc blocks.
 *
 * Measured on an NVIDIA H100 (driver 580.159.04; lab/probes/probe_driver.c,
 * results/probe-driver-nvidia-h100-20261122.txt): a cudaMalloc over 2 MiB
 * takes its size rounded up to 2 MiB pages of its own; smaller ones are
 * packed, at 512 B multiples (40,000 B blocks at a 40,448 B stride), into
 * shared 2 MiB pages, and a page goes back when its last block is freed
 * (freeing a 40 KB cudaMalloc does not lower cudaMemGetInfo's used memory
 * while its page holds others).
 *
 * This ledger counts that from the addresses the driver handed out, so it
 * is exact on the GPU and on sim alike: a large block counts its pages, a
 * small one the 2 MiB-aligned page it lies in, once for all its page's live
 * blocks. */
#ifndef VB_DRIVER_PAGES_H
#define VB_DRIVER_PAGES_H

#include <stdint.h>

#include "addr_map.h"
#include "device.h"

/* The driver's placement granule for packed blocks. */
#define VB_DRIVER_SMALL_ROUNDING 512

typedef struct vb_driver_pages {
    vb_addr_map small_pages;   /* page number -> live small blocks in it */
    uint64_t bytes;            /* driver memory behind the live blocks */
} vb_driver_pages;

/* 1 if the driver packs a cudaMalloc of `size` bytes into a shared page. */
int vb_driver_is_small(uint64_t size);

/* The bytes a cudaMalloc of `size` occupies: 512 B multiples when packed,
 * else whole 2 MiB pages (0 when rounding overflows). */
uint64_t vb_driver_block_bytes(uint64_t size);

/* Counts a live block the driver placed at `addr`; returns the driver
 * memory it added (0 for a small block in a page already in use), or
 * UINT64_MAX when host memory runs out (nothing counted). */
uint64_t vb_driver_pages_add(vb_driver_pages *pages, vb_addr addr, uint64_t size);

/* Stops counting a block; returns the driver memory that went back. */
uint64_t vb_driver_pages_remove(vb_driver_pages *pages, vb_addr addr, uint64_t size);

void vb_driver_pages_clear(vb_driver_pages *pages);

#endif
