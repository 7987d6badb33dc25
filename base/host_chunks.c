/* vrambench — host memory in 2 MiB chunks (see host_chunks.h). */
#include "host_chunks.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

/* Under AddressSanitizer a kept chunk is poisoned, so that a struct used
 * after its allocator gave its chunk back is still reported. */
#if defined(__SANITIZE_ADDRESS__)
#define VB_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VB_ASAN 1
#endif
#endif
#ifdef VB_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(chunk) ASAN_POISON_MEMORY_REGION((chunk), VB_HOST_CHUNK_BYTES)
#define UNPOISON(chunk) ASAN_UNPOISON_MEMORY_REGION((chunk), VB_HOST_CHUNK_BYTES)
#else
#define POISON(chunk) ((void)(chunk))
#define UNPOISON(chunk) ((void)(chunk))
#endif

static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
static void *kept[VB_HOST_CHUNKS_KEPT]; /* a stack: the chunk given last, warmest in the caches, goes first */
static size_t kept_count;

void *vb_host_chunk_take(void)
{
    pthread_mutex_lock(&kept_lock);
    void *chunk = kept_count ? kept[--kept_count] : NULL;
    pthread_mutex_unlock(&kept_lock);
    if (chunk) {
        UNPOISON(chunk);
        return chunk;
    }
    chunk = aligned_alloc(VB_HOST_CHUNK_BYTES, VB_HOST_CHUNK_BYTES);
#ifdef MADV_HUGEPAGE
    /* Advice before the first touch, so the pages are faulted in huge; a
     * system without transparent huge pages refuses it, and 4 KiB pages
     * serve just the same. */
    if (chunk) (void)madvise(chunk, VB_HOST_CHUNK_BYTES, MADV_HUGEPAGE);
#endif
    return chunk;
}

void vb_host_chunk_give(void *chunk)
{
    if (!chunk) return;
    pthread_mutex_lock(&kept_lock);
    if (kept_count < VB_HOST_CHUNKS_KEPT) {
        POISON(chunk);
        kept[kept_count++] = chunk;
        chunk = NULL;
    }
    pthread_mutex_unlock(&kept_lock);
    free(chunk);
}

size_t vb_host_chunks_kept(void)
{
    pthread_mutex_lock(&kept_lock);
    size_t count = kept_count;
    pthread_mutex_unlock(&kept_lock);
    return count;
}

#if defined(__GLIBC__) && defined(MADV_HUGEPAGE) && !defined(VB_HOST_SANITIZER_HEAP)
#define VB_HEAP_ADVICE 1
#endif

#ifdef VB_HEAP_ADVICE
/* 1 when the kernel counts address space as memory (vm.overcommit_memory
 * 2, "strict"): there, a heap grown ahead of its use would hold that much
 * of the system's commit limit for the process's life. */
static int strict_overcommit(void)
{
    FILE *policy = fopen("/proc/sys/vm/overcommit_memory", "r");
    if (!policy) return 0;
    int mode = fgetc(policy);
    fclose(policy);
    return mode == '2';
}
#endif

/* The start of vb_host_heap_keep's advice: one block of `bytes` (or half
 * as much where the system refuses that) from the heap, whatever its size
 * (no mmap for it), advised and freed: the heap keeps it as its top, from
 * which later blocks are carved. The bytes advised, or 0. */
static size_t advise_heap_start(size_t bytes)
{
#ifdef VB_HEAP_ADVICE
    if (strict_overcommit()) return 0;
    size_t advised = 0;
    mallopt(M_MMAP_MAX, 0);
    for (; bytes >= 2 * VB_HOST_CHUNK_BYTES; bytes /= 2) {
        char *block = malloc(bytes);
        if (!block) continue;
        uintptr_t start = ((uintptr_t)block + VB_HOST_CHUNK_BYTES - 1) & ~(uintptr_t)(VB_HOST_CHUNK_BYTES - 1);
        uintptr_t end = ((uintptr_t)block + bytes) & ~(uintptr_t)(VB_HOST_CHUNK_BYTES - 1);
        if (madvise((void *)start, end - start, MADV_HUGEPAGE) == 0) advised = end - start;
        free(block);
        break; /* advice refused (no transparent huge pages) would be refused for less too */
    }
    mallopt(M_MMAP_MAX, 65536); /* glibc's default */
    return advised;
#else
    (void)bytes;
    return 0;
#endif
}

size_t vb_host_heap_keep(size_t huge_bytes)
{
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 32 << 20); /* glibc's largest: blocks below 32 MiB come from the heap */
    mallopt(M_TRIM_THRESHOLD, -1);       /* and the heap is never trimmed */
#endif
    return advise_heap_start(huge_bytes);
}
