/* vrambench — host memory in 2 MiB chunks, for the structs a strategy
 * keeps per block (the caching core's slabs).
 *
 * Why not plain malloc: a replay of a long trace reaches its block
 * structs in no order, tens of MiB of them, so with 4 KiB pages nearly
 * every step misses the TLB as well as the cache. A chunk is 2 MiB-aligned
 * and advised for transparent huge pages (madvise MADV_HUGEPAGE, where the
 * system has it), so the kernel can map it as one page. And each
 * repetition replays on a fresh allocator, whose structs, were their
 * memory handed back to the kernel, would be faulted in again, zeroed,
 * inside the timed pass: chunks given back are kept, process-wide and
 * under a lock (tune replays in several threads), up to
 * VB_HOST_CHUNKS_KEPT, for the next allocator to take. The vrambench
 * command keeps all its freed memory anyway (app/main.c); a program that
 * links the library, as the PyTorch plug-in is, does not. */
#ifndef VB_HOST_CHUNKS_H
#define VB_HOST_CHUNKS_H

#include <stddef.h>

#define VB_HOST_CHUNK_BYTES ((size_t)2 << 20)
#define VB_HOST_CHUNKS_KEPT 64 /* 128 MiB at most held with no user */

/* A chunk of VB_HOST_CHUNK_BYTES, aligned to its size, its contents
 * undefined: one kept, else a new one. NULL when host memory runs out. */
void *vb_host_chunk_take(void);

/* Gives a chunk of vb_host_chunk_take back: kept for the next take while
 * fewer than VB_HOST_CHUNKS_KEPT are, else freed. NULL does nothing. */
void vb_host_chunk_give(void *chunk);

/* The chunks kept now (for tests). */
size_t vb_host_chunks_kept(void);

#endif
