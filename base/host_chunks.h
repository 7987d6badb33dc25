/* vrambench — host memory in 2 MiB chunks, for the structs a strategy
 * keeps per block (the caching core's slabs); and the process heap kept
 * and on huge pages, for the vrambench command (vb_host_heap_keep).
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
 * command keeps all its freed memory anyway (vb_host_heap_keep); a program
 * that links the library, as the PyTorch plug-in is, does not. */
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

/* For a program's start, before it allocates much (the vrambench command:
 * app/main.c); where there is glibc's heap, from which every block below
 * glibc's mmap threshold comes:
 *  - Keeps the memory the process frees for its own later use: blocks
 *    below 32 MiB come from the heap, which is never trimmed. A replay's
 *    timed repetition then reuses the pages its memory pass faulted in,
 *    instead of timing the kernel zeroing fresh pages for the allocator's
 *    own bookkeeping (a fifth of the first repetition of a short trace).
 *    The peak use is the same; it is not given back until exit.
 *  - Grows the heap by up to `huge_bytes` of address space at once and
 *    advises that for transparent huge pages, as glibc's own
 *    glibc.malloc.hugetlb=1 tunable does its heap: the arrays a long
 *    replay reads in no order (the seam's slots, the heaps of free
 *    blocks, a trace's keys) then sit on 2 MiB pages too, as the block
 *    structs do. A page is faulted in only when first used.
 * Returns the bytes advised: 0 where the system has no transparent huge
 * pages, where it counts address space as memory (strict overcommit: the
 * heap is not grown ahead there), or under a sanitizer (which has a heap
 * of its own). */
size_t vb_host_heap_keep(size_t huge_bytes);

/* 1 where AddressSanitizer or ThreadSanitizer replaces malloc with a
 * heap of its own, which vb_host_heap_keep leaves alone. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define VB_HOST_SANITIZER_HEAP 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define VB_HOST_SANITIZER_HEAP 1
#endif
#endif

/* What the vrambench command has vb_host_heap_keep advise: more than a
 * replay of a 400,000-event random trace uses (about 160 MiB). */
#define VB_HOST_HEAP_HUGE_BYTES ((size_t)512 << 20)

#endif
