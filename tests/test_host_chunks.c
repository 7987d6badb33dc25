/* vrambench — base/host_chunks: 2 MiB host chunks, kept for the next
 * taker up to a limit, never held by two takers at once; the caching
 * allocator, whose block structs come from them, decides the same on
 * chunks another allocator gave back as on new ones; and the heap kept
 * for the command hands out blocks advised for huge pages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allocators/allocator.h"
#include "base/device.h"
#include "base/host_chunks.h"

/* 1 when `address` lies in a mapping of this process whose VmFlags
 * (/proc/self/smaps) say it is advised for huge pages ("hg"). */
static int advised_for_huge_pages(const void *address)
{
    FILE *smaps = fopen("/proc/self/smaps", "r");
    if (!smaps) return 0;
    char line[512];
    int inside = 0, advised = 0;
    while (fgets(line, sizeof line, smaps)) {
        unsigned long long start = 0, end = 0;
        char after = 0;
        if (sscanf(line, "%llx-%llx%c", &start, &end, &after) == 3 && after == ' ') {
            inside = (uintptr_t)address >= start && (uintptr_t)address < end;
        } else if (inside && strncmp(line, "VmFlags:", 8) == 0) {
            advised = strstr(line, " hg") != NULL;
            break;
        }
    }
    fclose(smaps);
    return advised;
}

/* First, on a heap no other test has grown: vb_host_heap_keep advises
 * the heap's start for huge pages, and the blocks malloc hands out next
 * come from there. Where the system has no transparent huge pages, or
 * counts address space as memory (strict overcommit), or a sanitizer
 * keeps a heap of its own, nothing is advised (0), and there is nothing
 * more to check. */
static void the_kept_heap_hands_out_blocks_advised_for_huge_pages(void **state)
{
    (void)state;
    size_t advised = vb_host_heap_keep(64 << 20);
#ifdef VB_HOST_SANITIZER_HEAP
    assert_int_equal(advised, 0);
    skip();
#endif
    if (access("/sys/kernel/mm/transparent_hugepage", F_OK) != 0) skip(); /* no THP in this kernel */
    FILE *policy = fopen("/proc/sys/vm/overcommit_memory", "r");
    int strict = policy && fgetc(policy) == '2';
    if (policy) fclose(policy);
    if (strict) { /* the heap is not grown ahead where address space counts as memory */
        assert_int_equal(advised, 0);
        skip();
    }
    assert_true(advised >= 30 << 20); /* 64 MiB (or 32 where refused) less what lies before a 2 MiB boundary */
    char *block = malloc(8 << 20);    /* below the mmap threshold the heap keeps: from the heap's top */
    assert_non_null(block);
    assert_true(advised_for_huge_pages(block + (4 << 20)));
    free(block);
}

/* Empties the cache, so each test starts from none kept. */
static void drain(void)
{
    size_t kept = vb_host_chunks_kept();
    void **chunks = calloc(kept ? kept : 1, sizeof *chunks);
    assert_non_null(chunks);
    for (size_t i = 0; i < kept; i++) chunks[i] = vb_host_chunk_take();
    for (size_t i = 0; i < kept; i++) free(chunks[i]);
    free(chunks);
    assert_int_equal(vb_host_chunks_kept(), 0);
}

/* A chunk is aligned to its size, and every byte of it can be written. */
static void a_chunk_is_aligned_to_its_size_and_whole(void **state)
{
    (void)state;
    drain();
    unsigned char *chunk = vb_host_chunk_take();
    assert_non_null(chunk);
    assert_int_equal((uintptr_t)chunk % VB_HOST_CHUNK_BYTES, 0);
    memset(chunk, 0xa5, VB_HOST_CHUNK_BYTES);
    assert_int_equal(chunk[VB_HOST_CHUNK_BYTES - 1], 0xa5);
    vb_host_chunk_give(chunk);
    vb_host_chunk_give(NULL); /* nothing */
    assert_int_equal(vb_host_chunks_kept(), 1);
    drain();
}

/* The chunk given back last is the next one taken. */
static void a_chunk_given_back_is_the_next_taken(void **state)
{
    (void)state;
    drain();
    void *first = vb_host_chunk_take(), *second = vb_host_chunk_take();
    assert_ptr_not_equal(first, second);
    vb_host_chunk_give(first);
    vb_host_chunk_give(second);
    assert_int_equal(vb_host_chunks_kept(), 2);
    assert_ptr_equal(vb_host_chunk_take(), second);
    assert_ptr_equal(vb_host_chunk_take(), first);
    assert_int_equal(vb_host_chunks_kept(), 0);
    vb_host_chunk_give(first);
    vb_host_chunk_give(second);
    drain();
}

/* Past VB_HOST_CHUNKS_KEPT, chunks given back are freed, not kept. */
static void the_cache_keeps_no_more_than_its_limit(void **state)
{
    (void)state;
    drain();
    enum { TAKEN = VB_HOST_CHUNKS_KEPT + 5 };
    void *chunks[TAKEN];
    for (size_t i = 0; i < TAKEN; i++) assert_non_null(chunks[i] = vb_host_chunk_take());
    for (size_t i = 0; i < TAKEN; i++) {
        vb_host_chunk_give(chunks[i]);
        assert_int_equal(vb_host_chunks_kept(), i < VB_HOST_CHUNKS_KEPT ? i + 1 : VB_HOST_CHUNKS_KEPT);
    }
    drain();
}

/* Threads that take and give back at once never hold the same chunk: each
 * writes its mark over the chunk it holds and finds it intact before
 * giving it back. */
#define CHURN_THREADS 4
#define CHURN_ROUNDS 200

static void *churn(void *argument)
{
    unsigned char mark = (unsigned char)(uintptr_t)argument;
    for (int round = 0; round < CHURN_ROUNDS; round++) {
        unsigned char *chunk = vb_host_chunk_take();
        if (!chunk) return (void *)1;
        memset(chunk, mark, 4096);
        memset(chunk + VB_HOST_CHUNK_BYTES - 4096, mark, 4096);
        for (size_t i = 0; i < 4096; i++)
            if (chunk[i] != mark || chunk[VB_HOST_CHUNK_BYTES - 1 - i] != mark) return (void *)1;
        vb_host_chunk_give(chunk);
    }
    return NULL;
}

static void threads_never_hold_the_same_chunk(void **state)
{
    (void)state;
    drain();
    pthread_t threads[CHURN_THREADS];
    for (uintptr_t i = 0; i < CHURN_THREADS; i++)
        assert_int_equal(pthread_create(&threads[i], NULL, churn, (void *)(i + 1)), 0);
    for (int i = 0; i < CHURN_THREADS; i++) {
        void *failed = NULL;
        assert_int_equal(pthread_join(threads[i], &failed), 0);
        assert_null(failed);
    }
    assert_true(vb_host_chunks_kept() <= CHURN_THREADS);
    drain();
}

/* Enough live blocks that the caching allocator's structs fill several
 * chunks. */
#define LIVE_BLOCKS 40000

/* Allocates LIVE_BLOCKS blocks of seeded sizes, frees every third, allocates
 * as many again; the addresses handed out go to `addrs` (2 * LIVE_BLOCKS),
 * the final statistics to `stats`. */
static void run_caching(vb_addr *addrs, vb_alloc_stats *stats)
{
    vb_device *dev = NULL;
    vb_allocator *allocator = NULL;
    vb_config config = {0};
    assert_int_equal(vb_sim_open(80 * VB_GiB, &dev), VB_OK);
    assert_int_equal(vb_allocator_create("caching", dev, &config, &allocator), VB_OK);
    uint64_t seed = 12345;
    for (size_t i = 0; i < 2 * LIVE_BLOCKS; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        uint64_t size = 512 + (seed >> 33) % (64 << 10);
        assert_int_equal(vb_malloc(allocator, size, NULL, &addrs[i]), VB_OK);
        if (i == LIVE_BLOCKS - 1)
            for (size_t j = 0; j < LIVE_BLOCKS; j += 3) assert_int_equal(vb_free(allocator, addrs[j]), VB_OK);
    }
    vb_allocator_stats(allocator, stats);
    vb_allocator_destroy(allocator);
    vb_device_close(dev);
}

/* Even an allocator of a single block takes its structs from a chunk, the
 * one the allocator before it gave back: a repetition's fresh allocator
 * reuses the memory the one before faulted in, instead of faulting fresh
 * pages in inside its timed pass (slabs that started small came from
 * malloc, which did not hand the same memory back). */
static void a_small_allocator_takes_its_structs_from_the_kept_chunks(void **state)
{
    (void)state;
    drain();
    vb_device *dev = NULL;
    assert_int_equal(vb_sim_open(80 * VB_GiB, &dev), VB_OK);
    vb_config config = {0};
    for (int round = 0; round < 2; round++) {
        vb_allocator *allocator = NULL;
        assert_int_equal(vb_allocator_create("caching", dev, &config, &allocator), VB_OK);
        vb_addr addr = 0;
        assert_int_equal(vb_malloc(allocator, 4096, NULL, &addr), VB_OK);
        assert_int_equal(vb_host_chunks_kept(), 0); /* round 1 took the chunk round 0 gave back */
        vb_allocator_destroy(allocator);
        assert_int_equal(vb_host_chunks_kept(), 1);
    }
    vb_device_close(dev);
    drain();
}

static void caching_decides_the_same_on_chunks_given_back(void **state)
{
    (void)state;
    drain();
    vb_addr *fresh = calloc(2 * LIVE_BLOCKS, sizeof *fresh), *reused = calloc(2 * LIVE_BLOCKS, sizeof *reused);
    assert_non_null(fresh);
    assert_non_null(reused);
    vb_alloc_stats fresh_stats, reused_stats;
    run_caching(fresh, &fresh_stats);
    size_t kept = vb_host_chunks_kept();
    assert_true(kept > 0); /* its structs filled chunks, which it gave back */
    run_caching(reused, &reused_stats);
    assert_memory_equal(fresh, reused, 2 * LIVE_BLOCKS * sizeof *fresh);
    assert_int_equal(fresh_stats.reserved_bytes_peak, reused_stats.reserved_bytes_peak);
    assert_int_equal(fresh_stats.allocated_bytes, reused_stats.allocated_bytes);
    assert_int_equal(fresh_stats.driver_alloc_calls, reused_stats.driver_alloc_calls);
    assert_int_equal(vb_host_chunks_kept(), kept); /* took the kept ones, gave them back */
    free(fresh);
    free(reused);
    drain();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_kept_heap_hands_out_blocks_advised_for_huge_pages), /* first: a fresh heap */
        cmocka_unit_test(a_chunk_is_aligned_to_its_size_and_whole),
        cmocka_unit_test(a_chunk_given_back_is_the_next_taken),
        cmocka_unit_test(the_cache_keeps_no_more_than_its_limit),
        cmocka_unit_test(threads_never_hold_the_same_chunk),
        cmocka_unit_test(a_small_allocator_takes_its_structs_from_the_kept_chunks),
        cmocka_unit_test(caching_decides_the_same_on_chunks_given_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
