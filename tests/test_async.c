/* vrambench — the sim's stream-ordered pool (base/device_sim_pool.c) and
 * the `async` allocator on top of it (allocators/async.c).
 *
 * Rules the expected numbers come from: the facts measured of the driver's
 * pool, F1..F14 in docs/sim-models.md (NVIDIA H100, driver 580.159.04;
 * tests named after a fact reproduce that measurement), and the model's
 * rule (base/device_sim_pool.c): the pool's memory is 32 MiB granules behind
 * its address range; requests are placed at 512 B multiples from the start
 * of the best fit (F14) among, in turn, the free ranges pending on the
 * allocating stream, the completed ones with memory behind them, those
 * pending on other streams (the allocating stream waiting for that free),
 * and, once the pool has seen the frees that completed, all completed
 * ones; with none big enough, at the start of the fresh range (addresses
 * never handed out, and free ranges touching them); a granule a new block covers
 * gets the memory of a granule without live blocks, or new memory when none
 * has; at a synchronization and at trim, granules without live blocks whose
 * frees completed go back, highest address first, while more than the
 * threshold (keep_bytes) is reserved. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "allocators/allocator.h"
#include "base/device.h"

#define KiB ((uint64_t)1 << 10)
#define MiB VB_MiB

/* ------------------------------------------------------------------------ */
/* Fixture: a sim device, two created streams                                */
/* ------------------------------------------------------------------------ */

typedef struct fixture {
    vb_device *dev;
    vb_stream a, b;
} fixture;

static int open_sim(void **state)
{
    static fixture f;
    if (vb_sim_open(0, &f.dev) != VB_OK) return -1;
    if (f.dev->ops->stream_create(f.dev, &f.a) != VB_OK) return -1;
    if (f.dev->ops->stream_create(f.dev, &f.b) != VB_OK) return -1;
    *state = &f;
    return 0;
}

static int close_sim(void **state)
{
    fixture *f = *state;
    vb_device_close(f->dev);
    return 0;
}

/* A pool on the fixture's device. */
static vb_pool new_pool(fixture *f, uint64_t release_threshold)
{
    vb_pool pool = NULL;
    assert_int_equal(f->dev->ops->pool_create(f->dev, release_threshold, &pool), VB_OK);
    return pool;
}

static vb_addr pool_malloc(fixture *f, vb_pool pool, uint64_t size, vb_stream stream)
{
    vb_addr addr = 0;
    assert_int_equal(f->dev->ops->pool_malloc(f->dev, pool, size, stream, &addr), VB_OK);
    return addr;
}

static void pool_free(fixture *f, vb_pool pool, vb_addr addr, vb_stream stream)
{
    assert_int_equal(f->dev->ops->pool_free(f->dev, pool, addr, stream), VB_OK);
}

/* What pool_usage reports: bytes the pool holds, and of them in use. */
typedef struct pool_usage {
    uint64_t reserved, used;
} pool_usage;

static pool_usage usage_of(fixture *f, vb_pool pool)
{
    pool_usage usage = {0, 0};
    assert_int_equal(f->dev->ops->pool_usage(f->dev, pool, &usage.reserved, &usage.used), VB_OK);
    return usage;
}

static uint64_t reserved_of(fixture *f, vb_pool pool)
{
    return usage_of(f, pool).reserved;
}

/* A block of `size` taken on stream A and freed there behind `busy_ns` of
 * work on A: the free completes only when that work does. */
static vb_addr freed_behind_busy_work(fixture *f, vb_pool pool, uint64_t size, uint64_t busy_ns)
{
    vb_addr addr = pool_malloc(f, pool, size, f->a);
    f->dev->ops->enqueue_busy(f->dev, f->a, busy_ns);
    pool_free(f, pool, addr, f->a);
    return addr;
}

/* Work queued on `stream` now completes exactly at `end_ns` on the sim's
 * clock (which starts at 0 in these tests): not 1 ns before, but then. */
static void assert_work_queued_now_ends_at(fixture *f, vb_stream stream, uint64_t end_ns)
{
    vb_event after;
    assert_int_equal(f->dev->ops->event_create(f->dev, &after), VB_OK);
    f->dev->ops->event_record(f->dev, after, stream);
    vb_sim_advance(f->dev, end_ns - 1 - vb_sim_now(f->dev));
    assert_false(f->dev->ops->event_query(f->dev, after));
    vb_sim_advance(f->dev, 1);
    assert_true(f->dev->ops->event_query(f->dev, after));
    f->dev->ops->event_destroy(f->dev, after);
}

/* ------------------------------------------------------------------------ */
/* Stream-ordered reuse                                                      */
/* ------------------------------------------------------------------------ */

/* Freed on A with A still busy, the block serves the next request on A. */
static void test_pool_reuses_block_on_freeing_stream_at_once(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, UINT64_MAX);
    vb_addr p = freed_behind_busy_work(f, pool, 2 * MiB, 1000);
    assert_int_equal(pool_malloc(f, pool, 2 * MiB, f->a), p);
    f->dev->ops->pool_destroy(f->dev, pool);
}

/* F10: 16 MiB freed on A behind 1000 ns of work (not complete), then 16 MiB
 * on B: the same address, reserved unchanged (32 MiB), and B now waits for
 * A's free: work queued on B ends after 1000 ns. */
static void test_pool_f10_other_stream_reuses_a_pending_free_and_waits_for_it(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, UINT64_MAX);
    vb_addr p = freed_behind_busy_work(f, pool, 16 * MiB, 1000);
    assert_int_equal(pool_malloc(f, pool, 16 * MiB, f->b), p);
    assert_int_equal(reserved_of(f, pool), 32 * MiB);
    assert_work_queued_now_ends_at(f, f->b, 1000);
    f->dev->ops->pool_destroy(f->dev, pool);
}

/* Once A's work (and so the free) completed, B reuses the block. */
static void test_pool_hands_block_to_other_stream_after_free_completes(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, UINT64_MAX);
    vb_addr p = freed_behind_busy_work(f, pool, 2 * MiB, 1000);
    vb_sim_complete_stream(f->dev, f->a);
    assert_int_equal(pool_malloc(f, pool, 2 * MiB, f->b), p);
    f->dev->ops->pool_destroy(f->dev, pool);
}

/* stream_wait_event: B waits for A's event, so B's tail moves to A's (1000
 * ns). */
static void test_stream_wait_event_orders_later_work_after_event(void **state)
{
    fixture *f = *state;
    vb_event event;
    assert_int_equal(f->dev->ops->event_create(f->dev, &event), VB_OK);
    f->dev->ops->enqueue_busy(f->dev, f->a, 1000);
    f->dev->ops->event_record(f->dev, event, f->a);
    assert_int_equal(f->dev->ops->stream_wait_event(f->dev, f->b, event), VB_OK);
    vb_event after;
    assert_int_equal(f->dev->ops->event_create(f->dev, &after), VB_OK);
    f->dev->ops->event_record(f->dev, after, f->b);
    vb_sim_advance(f->dev, 999);
    assert_false(f->dev->ops->event_query(f->dev, after));
    vb_sim_advance(f->dev, 1);
    assert_true(f->dev->ops->event_query(f->dev, after));
    f->dev->ops->event_destroy(f->dev, event);
    f->dev->ops->event_destroy(f->dev, after);
}

/* ------------------------------------------------------------------------ */
/* Granules, placement, coalescing                                           */
/* ------------------------------------------------------------------------ */

/* F1: 1 B, 512 B, 1 MiB, 2 MiB + 1, 20 MiB each reserve 32 MiB on an empty
 * pool; 32 MiB + 1 B reserves 64 MiB; 100 MiB reserves 128 MiB. */
static void test_pool_f1_reserves_32_mib_granules(void **state)
{
    fixture *f = *state;
    static const uint64_t sizes[] = {1, 512, 1 * MiB, 2 * MiB + 1, 20 * MiB, 32 * MiB + 1, 100 * MiB};
    static const uint64_t reserved[] = {32 * MiB, 32 * MiB, 32 * MiB, 32 * MiB, 32 * MiB, 64 * MiB, 128 * MiB};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        vb_pool pool = new_pool(f, UINT64_MAX);
        pool_malloc(f, pool, sizes[i], f->a);
        assert_int_equal(reserved_of(f, pool), reserved[i]);
        assert_int_equal(vb_sim_used_bytes(f->dev), reserved[i]);
        f->dev->ops->pool_destroy(f->dev, pool);
    }
}

/* F2: used bytes are the requested bytes, unrounded. */
static void test_pool_f2_counts_requested_bytes_used(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, UINT64_MAX);
    pool_malloc(f, pool, 1, f->a);
    assert_int_equal(usage_of(f, pool).used, 1);
    pool_malloc(f, pool, 512, f->a);
    assert_int_equal(usage_of(f, pool).used, 513);
    f->dev->ops->pool_destroy(f->dev, pool);
}

/* F3: 1000 x 1 KiB: block i at +1024 i, all in one 32 MiB granule. A 1 B
 * request takes 512 B of address space (the model's placement rounding). */
static void test_pool_f3_packs_small_blocks(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, UINT64_MAX);
    vb_addr first = pool_malloc(f, pool, 1 * KiB, f->a);
    for (uint64_t i = 1; i < 1000; i++) assert_int_equal(pool_malloc(f, pool, 1 * KiB, f->a), first + 1024 * i);
    assert_int_equal(pool_malloc(f, pool, 1, f->a), first + 1000 * KiB);
    assert_int_equal(pool_malloc(f, pool, 1, f->a), first + 1000 * KiB + 512);
    assert_int_equal(reserved_of(f, pool), 32 * MiB);
    f->dev->ops->pool_destroy(f->dev, pool);
}

/* F4: 64 MiB freed (no synchronize), then 2 x 32 MiB at +0 and +32 MiB,
 * then (those freed) 8 x 8 MiB: reserved stays 64 MiB throughout. */
static void test_pool_f4_reuses_a_freed_range_for_other_sizes(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, UINT64_MAX);
    vb_addr big = pool_malloc(f, pool, 64 * MiB, f->a);
    pool_free(f, pool, big, f->a);
    vb_addr halves[2] = {pool_malloc(f, pool, 32 * MiB, f->a), pool_malloc(f, pool, 32 * MiB, f->a)};
    assert_int_equal(halves[0], big);
    assert_int_equal(halves[1], big + 32 * MiB);
    pool_free(f, pool, halves[0], f->a);
    pool_free(f, pool, halves[1], f->a);
    for (int i = 0; i < 8; i++) pool_malloc(f, pool, 8 * MiB, f->a);
    assert_int_equal(reserved_of(f, pool), 64 * MiB);
    f->dev->ops->pool_destroy(f->dev, pool);
}

/* F5 and F6: 8 x 8 MiB (64 MiB), every other one freed in address order
 * (0, 2, 4, 6). 32 MiB does not fit a hole: a new granule after the pool's
 * end, at +64 MiB, reserved 96 MiB. Then 3 MiB and 5 MiB both go into the
 * most recently freed hole, block 6's (+48 MiB, +51 MiB): the 32 MiB request
 * made the pool take in its pending frees, the latest first, so that hole
 * is the oldest 8 MiB range (F14's tie-break). */
static void test_pool_f5_f6_no_remapping_and_latest_hole_first(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, UINT64_MAX);
    vb_addr blocks[8];
    for (int i = 0; i < 8; i++) blocks[i] = pool_malloc(f, pool, 8 * MiB, f->a);
    for (int i = 0; i < 8; i += 2) pool_free(f, pool, blocks[i], f->a);
    assert_int_equal(pool_malloc(f, pool, 32 * MiB, f->a), blocks[0] + 64 * MiB);
    assert_int_equal(reserved_of(f, pool), 96 * MiB);
    assert_int_equal(pool_malloc(f, pool, 3 * MiB, f->a), blocks[0] + 48 * MiB);
    assert_int_equal(pool_malloc(f, pool, 5 * MiB, f->a), blocks[0] + 51 * MiB);
    f->dev->ops->pool_destroy(f->dev, pool);
}

/* F14, best fit: in one granule a 256K | b 64K | c 512K | d 64K | rest free
 * (the fresh range, taken last). Freeing a then c (both pending on A):
 * 200K goes to a, the smallest range that holds it, not c, the latest;
 * 300K then to c and 200K to the rest of c. */
static void test_pool_f14_takes_the_best_fit(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, UINT64_MAX);
    vb_addr a = pool_malloc(f, pool, 256 * KiB, f->a);
    pool_malloc(f, pool, 64 * KiB, f->a);
    vb_addr c = pool_malloc(f, pool, 512 * KiB, f->a);
    pool_malloc(f, pool, 64 * KiB, f->a);
    pool_free(f, pool, a, f->a);
    pool_free(f, pool, c, f->a);
    assert_int_equal(pool_malloc(f, pool, 200 * KiB, f->a), a);
    assert_int_equal(pool_malloc(f, pool, 300 * KiB, f->a), c);
    assert_int_equal(pool_malloc(f, pool, 200 * KiB, f->a), c + 300 * KiB);
    f->dev->ops->pool_destroy(f->dev, pool);
}

/* F14, pending frees: a 4 MiB | b 1 MiB | c 8 MiB | d 1 MiB on A. a freed
 * and synchronized (completed), then c freed (pending on A). 4 MiB on A
 * takes c, A's pending range, before a, the completed exact fit (as the
 * driver placed random-4m's block 19); 4 MiB on B then takes a, a
 * completed range, before the rest of c, pending on A. */
static void test_pool_f14_a_stream_takes_its_pending_frees_first(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, UINT64_MAX);
    vb_addr a = pool_malloc(f, pool, 4 * MiB, f->a);
    pool_malloc(f, pool, 1 * MiB, f->a);
    vb_addr c = pool_malloc(f, pool, 8 * MiB, f->a);
    pool_malloc(f, pool, 1 * MiB, f->a);
    pool_free(f, pool, a, f->a);
    f->dev->ops->stream_synchronize(f->dev, f->a);
    pool_free(f, pool, c, f->a);
    assert_int_equal(pool_malloc(f, pool, 4 * MiB, f->a), c);
    assert_int_equal(pool_malloc(f, pool, 4 * MiB, f->b), a);
    f->dev->ops->pool_destroy(f->dev, pool);
}

/* F14, merging: a 4 MiB | b 4 MiB | c 1 MiB on A. a freed and synchronized
 * (completed), then b freed (pending): the two do not merge, so 3 MiB on A
 * takes b's start (all merged, best fit would take a's). After a
 * synchronization they merge: freeing that 3 MiB again and synchronizing,
 * 8 MiB fits at a without growing the pool. */
static void test_pool_f14_a_pending_free_merges_once_seen_complete(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, UINT64_MAX);
    vb_addr a = pool_malloc(f, pool, 4 * MiB, f->a);
    vb_addr b = pool_malloc(f, pool, 4 * MiB, f->a);
    pool_malloc(f, pool, 1 * MiB, f->a);
    pool_free(f, pool, a, f->a);
    f->dev->ops->stream_synchronize(f->dev, f->a);
    pool_free(f, pool, b, f->a);
    vb_addr x = pool_malloc(f, pool, 3 * MiB, f->a);
    assert_int_equal(x, b);
    pool_free(f, pool, x, f->a);
    f->dev->ops->stream_synchronize(f->dev, f->a);
    assert_int_equal(pool_malloc(f, pool, 8 * MiB, f->a), a);
    assert_int_equal(reserved_of(f, pool), 32 * MiB);
    f->dev->ops->pool_destroy(f->dev, pool);
}

/* F6 and F14 with a stream kept busy: 1 MiB blocks x1 .. x3 and y, live
 * blocks between them. x1 freed on B behind 3 us of work, x2 and x3 on A
 * behind 1 us, y on A behind 1 s (it stays pending). At 5 us the pool sees
 * x1, x2 and x3 complete, the latest freed first (x3, x2, x1: not the
 * order they completed in, x2, x3, x1), so that is the order 1 MiB
 * requests on a third stream take them in (the oldest completed range
 * first); y is left pending. */
static void test_pool_f6_sees_completed_frees_latest_first_while_others_stay_pending(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, UINT64_MAX);
    vb_stream c = NULL;
    assert_int_equal(f->dev->ops->stream_create(f->dev, &c), VB_OK);
    vb_addr blocks[4];
    for (int i = 0; i < 4; i++) {
        blocks[i] = pool_malloc(f, pool, 1 * MiB, i == 0 ? f->b : f->a);
        pool_malloc(f, pool, 64 * KiB, f->a);
    }
    vb_addr x1 = blocks[0], x2 = blocks[1], x3 = blocks[2], y = blocks[3];
    f->dev->ops->enqueue_busy(f->dev, f->b, 3000);
    pool_free(f, pool, x1, f->b);
    f->dev->ops->enqueue_busy(f->dev, f->a, 1000);
    pool_free(f, pool, x2, f->a);
    pool_free(f, pool, x3, f->a);
    f->dev->ops->enqueue_busy(f->dev, f->a, 1000000000);
    pool_free(f, pool, y, f->a);
    vb_sim_advance(f->dev, 5000);
    assert_int_equal(pool_malloc(f, pool, 1 * MiB, c), x3);
    assert_int_equal(pool_malloc(f, pool, 1 * MiB, c), x2);
    assert_int_equal(pool_malloc(f, pool, 1 * MiB, c), x1);
    assert_int_equal(pool_malloc(f, pool, 1 * MiB, f->a), y);
    f->dev->ops->pool_destroy(f->dev, pool);
    f->dev->ops->stream_destroy(f->dev, c);
}

/* F11: 3 x 32 MiB fill granules 0-2 (96 MiB); the first freed leaves
 * granule 0 without a live block. 64 MiB fits no free range: it goes to the
 * fresh range at +96 MiB (granules 3-4), one of them backed by granule 0's
 * memory: reserved 128 MiB, not 160. A 32 MiB block at +0 then needs new
 * memory again: 160 MiB. */
static void test_pool_f11_an_empty_granule_gives_its_memory_to_a_new_block(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, UINT64_MAX);
    vb_addr p[3];
    for (int i = 0; i < 3; i++) p[i] = pool_malloc(f, pool, 32 * MiB, f->a);
    pool_free(f, pool, p[0], f->a);
    assert_int_equal(pool_malloc(f, pool, 64 * MiB, f->a), p[0] + 96 * MiB);
    assert_int_equal(reserved_of(f, pool), 128 * MiB);
    assert_int_equal(vb_sim_used_bytes(f->dev), 128 * MiB);
    assert_int_equal(pool_malloc(f, pool, 32 * MiB, f->a), p[0]);
    assert_int_equal(reserved_of(f, pool), 160 * MiB);
    f->dev->ops->pool_destroy(f->dev, pool);
}

/* F11 with a pending free: 32 MiB on A freed behind 1000 ns of work
 * (granule 0 empty, its free pending), 16 + 48 MiB live after it (granules
 * 1-2). 40 MiB on B fits no free range: the fresh range at +96 MiB
 * (granules 3-4), one backed by granule 0's memory, so B waits for A's free
 * (the model's choice, as for F10's reuse): reserved 128 MiB, B's work ends
 * at 1000 ns. */
static void test_pool_f11_moved_memory_waits_for_its_pending_free(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, UINT64_MAX);
    vb_addr first = pool_malloc(f, pool, 32 * MiB, f->a);
    pool_malloc(f, pool, 16 * MiB, f->a);
    pool_malloc(f, pool, 48 * MiB, f->a);
    f->dev->ops->enqueue_busy(f->dev, f->a, 1000);
    pool_free(f, pool, first, f->a);
    assert_int_equal(pool_malloc(f, pool, 40 * MiB, f->b), first + 96 * MiB);
    assert_int_equal(reserved_of(f, pool), 128 * MiB);
    assert_work_queued_now_ends_at(f, f->b, 1000);
    f->dev->ops->pool_destroy(f->dev, pool);
}

/* The leak_loop/async sequence recorded on an H200 (results/nvidia-h200-
 * 20261122.json): 100 x (a, b, c of 4,000,000 + 1,000,000 (i % 4) B; free
 * a, b, c), then 100 x (the same, keeping c): reserved every 10 kept
 * iterations was 96, 128, 192, 256, 288, 352, 384, 448, 512, 544 MiB on the
 * GPU; the pool model gives the same. */
static void test_pool_reproduces_the_gpu_leak_loop_timeline(void **state)
{
    fixture *f = *state;
    static const uint64_t gpu_mib[10] = {96, 128, 192, 256, 288, 352, 384, 448, 512, 544};
    vb_pool pool = new_pool(f, UINT64_MAX);
    for (int i = 0; i < 100; i++) {
        uint64_t bytes = (1000 + 250 * (uint64_t)(i % 4)) * 4000;
        vb_addr a = pool_malloc(f, pool, bytes, f->a), b = pool_malloc(f, pool, bytes, f->a);
        vb_addr c = pool_malloc(f, pool, bytes, f->a);
        pool_free(f, pool, a, f->a);
        pool_free(f, pool, b, f->a);
        pool_free(f, pool, c, f->a);
    }
    for (int i = 0; i < 100; i++) {
        uint64_t bytes = (1000 + 250 * (uint64_t)(i % 4)) * 4000;
        vb_addr a = pool_malloc(f, pool, bytes, f->a), b = pool_malloc(f, pool, bytes, f->a);
        pool_malloc(f, pool, bytes, f->a); /* kept */
        pool_free(f, pool, a, f->a);
        pool_free(f, pool, b, f->a);
        if ((i + 1) % 10 == 0) assert_int_equal(reserved_of(f, pool), gpu_mib[i / 10] * MiB);
    }
    f->dev->ops->pool_destroy(f->dev, pool);
}

/* Two 16 MiB blocks fill a granule; freed, they merge, and a 32 MiB request
 * is served from them at x without growing (reserved stays 32 MiB). */
static void test_pool_coalesces_free_neighbours(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, UINT64_MAX);
    vb_addr x = pool_malloc(f, pool, 16 * MiB, f->a);
    vb_addr y = pool_malloc(f, pool, 16 * MiB, f->b);
    pool_free(f, pool, x, f->a);
    pool_free(f, pool, y, f->b);
    assert_int_equal(pool_malloc(f, pool, 32 * MiB, f->a), x);
    assert_int_equal(reserved_of(f, pool), 32 * MiB);
    f->dev->ops->pool_destroy(f->dev, pool);
}

/* F7: threshold 0, 2 x 40 MiB: the second right after the first, across
 * granules; reserved 96 MiB, used 80 MiB. */
static void test_pool_f7_blocks_span_granules(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, 0);
    vb_addr first = pool_malloc(f, pool, 40 * MiB, f->a);
    assert_int_equal(pool_malloc(f, pool, 40 * MiB, f->a), first + 40 * MiB);
    assert_int_equal(reserved_of(f, pool), 96 * MiB);
    assert_int_equal(usage_of(f, pool).used, 80 * MiB);
    f->dev->ops->pool_destroy(f->dev, pool);
}

/* ------------------------------------------------------------------------ */
/* Release threshold and trim                                                */
/* ------------------------------------------------------------------------ */

/* F9: threshold 0, 2 x 40 MiB, the first freed: 96 MiB stay until the
 * synchronize, then 64 MiB (the wholly free first granule went back, the
 * partly used second stayed). */
static void test_pool_f9_threshold_zero_releases_free_granules_at_synchronize(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, 0);
    vb_addr first = pool_malloc(f, pool, 40 * MiB, f->a);
    vb_addr second = pool_malloc(f, pool, 40 * MiB, f->a);
    pool_free(f, pool, first, f->a);
    assert_int_equal(reserved_of(f, pool), 96 * MiB);
    f->dev->ops->stream_synchronize(f->dev, f->a);
    assert_int_equal(reserved_of(f, pool), 64 * MiB);
    pool_free(f, pool, second, f->a);
    f->dev->ops->stream_synchronize(f->dev, f->a);
    assert_int_equal(reserved_of(f, pool), 0);
    f->dev->ops->pool_destroy(f->dev, pool);
}

/* Threshold 32 MiB, three free granules: 96 > 32 releases one (64), 64 > 32
 * another (32), 32 is not above 32: 32 MiB stay. */
static void test_pool_threshold_keeps_up_to_threshold(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, 32 * MiB);
    vb_addr p[3];
    for (int i = 0; i < 3; i++) p[i] = pool_malloc(f, pool, 32 * MiB, f->a);
    for (int i = 0; i < 3; i++) pool_free(f, pool, p[i], f->a);
    f->dev->ops->device_synchronize(f->dev);
    assert_int_equal(reserved_of(f, pool), 32 * MiB);
    f->dev->ops->pool_destroy(f->dev, pool);
}

/* Threshold UINT64_MAX: nothing is released at synchronize. */
static void test_pool_max_threshold_keeps_everything_at_synchronize(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, UINT64_MAX);
    pool_free(f, pool, pool_malloc(f, pool, 4 * MiB, f->a), f->a);
    f->dev->ops->device_synchronize(f->dev);
    assert_int_equal(reserved_of(f, pool), 32 * MiB);
    f->dev->ops->pool_destroy(f->dev, pool);
}

/* Threshold 0, block freed on A behind 1000 ns of work; synchronizing B
 * (clock at 10 ns) cannot release memory whose free has not completed. */
static void test_pool_release_waits_for_free_to_complete(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, 0);
    freed_behind_busy_work(f, pool, 2 * MiB, 1000);
    f->dev->ops->enqueue_busy(f->dev, f->b, 10);
    f->dev->ops->stream_synchronize(f->dev, f->b);
    assert_int_equal(reserved_of(f, pool), 32 * MiB);
    f->dev->ops->pool_destroy(f->dev, pool);
}

/* F8: all freed and completed, trim to 0: reserved 0 (the next block starts
 * at the pool's first address again). */
static void test_pool_f8_trim_to_zero_releases_every_free_granule(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, UINT64_MAX);
    vb_addr first = pool_malloc(f, pool, 3 * MiB, f->a);
    pool_free(f, pool, first, f->a);
    pool_free(f, pool, pool_malloc(f, pool, 64 * MiB, f->b), f->b);
    f->dev->ops->device_synchronize(f->dev);
    assert_int_equal(f->dev->ops->pool_trim(f->dev, pool, 0), VB_OK);
    assert_int_equal(reserved_of(f, pool), 0);
    assert_int_equal(pool_malloc(f, pool, 1 * MiB, f->a), first);
    f->dev->ops->pool_destroy(f->dev, pool);
}

/* F8: a live block keeps its granule: 1 MiB live + 1 MiB freed in one
 * granule, trim to 0 keeps 32 MiB; with a live block in every granule trim
 * releases nothing. */
static void test_pool_f8_trim_keeps_granules_with_live_blocks(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, UINT64_MAX);
    pool_malloc(f, pool, 1 * MiB, f->a);
    pool_free(f, pool, pool_malloc(f, pool, 1 * MiB, f->a), f->a);
    f->dev->ops->pool_trim(f->dev, pool, 0);
    assert_int_equal(reserved_of(f, pool), 32 * MiB);
    pool_malloc(f, pool, 40 * MiB, f->a); /* the 31 MiB free tail + a granule (F7) */
    f->dev->ops->pool_trim(f->dev, pool, 0);
    assert_int_equal(reserved_of(f, pool), 64 * MiB);
    f->dev->ops->pool_destroy(f->dev, pool);
}

/* Three free granules, trim to keep 40 MiB: 96 > 40 -> 64 > 40 -> 32: 32 MiB stay. */
static void test_pool_trim_stops_at_keep_bytes(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, UINT64_MAX);
    vb_addr p[3];
    for (int i = 0; i < 3; i++) p[i] = pool_malloc(f, pool, 32 * MiB, f->a);
    for (int i = 0; i < 3; i++) pool_free(f, pool, p[i], f->a);
    f->dev->ops->pool_trim(f->dev, pool, 40 * MiB);
    assert_int_equal(reserved_of(f, pool), 32 * MiB);
    f->dev->ops->pool_destroy(f->dev, pool);
}

/* ------------------------------------------------------------------------ */
/* Bad input and out of memory                                               */
/* ------------------------------------------------------------------------ */

static void test_pool_free_of_unknown_address_is_invalid(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, UINT64_MAX);
    vb_addr p = pool_malloc(f, pool, 1 * MiB, f->a);
    assert_int_equal(f->dev->ops->pool_free(f->dev, pool, p + 512, f->a), VB_ERR_INVALID);
    f->dev->ops->pool_destroy(f->dev, pool);
}

static void test_pool_double_free_is_invalid(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, UINT64_MAX);
    vb_addr p = pool_malloc(f, pool, 1 * MiB, f->a);
    pool_free(f, pool, p, f->a);
    assert_int_equal(f->dev->ops->pool_free(f->dev, pool, p, f->a), VB_ERR_INVALID);
    f->dev->ops->pool_destroy(f->dev, pool);
}

/* A 64 MiB device: 128 MiB is out of memory, and 1 MiB still works after. */
static void test_pool_out_of_memory_leaves_pool_usable(void **state)
{
    (void)state;
    vb_device *dev;
    vb_pool pool;
    vb_addr addr;
    assert_int_equal(vb_sim_open(64 * MiB, &dev), VB_OK);
    assert_int_equal(dev->ops->pool_create(dev, UINT64_MAX, &pool), VB_OK);
    assert_int_equal(dev->ops->pool_malloc(dev, pool, 128 * MiB, NULL, &addr), VB_ERR_OOM);
    assert_int_equal(dev->ops->pool_malloc(dev, pool, 1 * MiB, NULL, &addr), VB_OK);
    vb_device_close(dev);
}

/* Sizes near UINT64_MAX overflow the rounding: out of memory, no crash. */
static void test_pool_absurd_size_is_out_of_memory(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, UINT64_MAX);
    vb_addr addr;
    assert_int_equal(f->dev->ops->pool_malloc(f->dev, pool, UINT64_MAX - 100, f->a, &addr), VB_ERR_OOM);
    f->dev->ops->pool_destroy(f->dev, pool);
}

/* Destroying a pool gives its memory back, live blocks included. */
static void test_pool_destroy_returns_memory_to_device(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, UINT64_MAX);
    pool_malloc(f, pool, 10 * MiB, f->a);
    f->dev->ops->pool_destroy(f->dev, pool);
    assert_int_equal(vb_sim_used_bytes(f->dev), 0);
}

/* ------------------------------------------------------------------------ */
/* The async allocator                                                       */
/* ------------------------------------------------------------------------ */

/* An async allocator with at most one key=value setting. */
static vb_status new_async(fixture *f, const char *key, const char *value, vb_allocator **out)
{
    vb_config_entry entry = {key, value};
    vb_config config = {&entry, key ? 1 : 0};
    return vb_allocator_create("async", f->dev, &config, out);
}

/* new_async, which must succeed. */
static vb_allocator *open_async(fixture *f, const char *key, const char *value)
{
    vb_allocator *async = NULL;
    assert_int_equal(new_async(f, key, value, &async), VB_OK);
    return async;
}

static vb_addr async_malloc(vb_allocator *allocator, uint64_t size, vb_stream stream)
{
    vb_addr addr = 0;
    assert_int_equal(vb_malloc(allocator, size, stream, &addr), VB_OK);
    return addr;
}

static vb_alloc_stats stats_of(vb_allocator *allocator)
{
    vb_alloc_stats stats;
    vb_allocator_stats(allocator, &stats);
    return stats;
}

/* 1 byte: requested 1, allocated 512 (the pool's rounding). */
static void test_async_allocated_is_size_rounded_to_512(void **state)
{
    fixture *f = *state;
    vb_allocator *async = open_async(f, NULL, NULL);
    async_malloc(async, 1, f->a);
    assert_int_equal(stats_of(async).allocated_bytes, 512);
    vb_allocator_destroy(async);
}

/* 1 byte reserves the pool's first 32 MiB granule (F1). */
static void test_async_reserved_is_pool_reserved(void **state)
{
    fixture *f = *state;
    vb_allocator *async = open_async(f, NULL, NULL);
    async_malloc(async, 1, f->a);
    assert_int_equal(stats_of(async).reserved_bytes, 32 * MiB);
    vb_allocator_destroy(async);
}

/* Default threshold (max): free + synchronize keeps the 32 MiB granule. */
static void test_async_default_threshold_keeps_memory_at_synchronize(void **state)
{
    fixture *f = *state;
    vb_allocator *async = open_async(f, NULL, NULL);
    assert_int_equal(vb_free(async, async_malloc(async, 1 * MiB, f->a)), VB_OK);
    f->dev->ops->device_synchronize(f->dev);
    assert_int_equal(stats_of(async).reserved_bytes, 32 * MiB);
    vb_allocator_destroy(async);
}

/* release_threshold=0: free + synchronize gives the granule back, and the
 * stats read afterwards show it. */
static void test_async_threshold_zero_releases_at_synchronize(void **state)
{
    fixture *f = *state;
    vb_allocator *async = open_async(f, "release_threshold", "0");
    assert_int_equal(vb_free(async, async_malloc(async, 1 * MiB, f->a)), VB_OK);
    f->dev->ops->device_synchronize(f->dev);
    assert_int_equal(stats_of(async).reserved_bytes, 0);
    vb_allocator_destroy(async);
}

/* Freed with A busy, the block serves A's next request at once. */
static void test_async_free_reuses_on_allocating_stream_at_once(void **state)
{
    fixture *f = *state;
    vb_allocator *async = open_async(f, NULL, NULL);
    vb_addr p = async_malloc(async, 2 * MiB, f->a);
    f->dev->ops->enqueue_busy(f->dev, f->a, 1000);
    assert_int_equal(vb_free(async, p), VB_OK);
    assert_int_equal(async_malloc(async, 2 * MiB, f->a), p);
    vb_allocator_destroy(async);
}

/* Used on B (record_stream) with B busy for 1000 ns: the free waits for B
 * (on the unifying stream). A's next 2 MiB request gets the block at once,
 * as the driver's pool allows (F10), and A's later work waits for B's. */
static void test_async_record_stream_orders_reuse_after_the_recorded_stream(void **state)
{
    fixture *f = *state;
    vb_allocator *async = open_async(f, NULL, NULL);
    vb_addr p = async_malloc(async, 2 * MiB, f->a);
    assert_int_equal(vb_record_stream(async, p, f->b), VB_OK);
    f->dev->ops->enqueue_busy(f->dev, f->b, 1000);
    assert_int_equal(vb_free(async, p), VB_OK);
    assert_int_equal(async_malloc(async, 2 * MiB, f->a), p);
    assert_work_queued_now_ends_at(f, f->a, 1000);
    vb_allocator_destroy(async);
}

/* The same, once B's work completed: A gets the block back. */
static void test_async_record_stream_block_reused_after_stream_completes(void **state)
{
    fixture *f = *state;
    vb_allocator *async = open_async(f, NULL, NULL);
    vb_addr p = async_malloc(async, 2 * MiB, f->a);
    assert_int_equal(vb_record_stream(async, p, f->b), VB_OK);
    f->dev->ops->enqueue_busy(f->dev, f->b, 1000);
    assert_int_equal(vb_free(async, p), VB_OK);
    vb_sim_complete_stream(f->dev, f->b);
    assert_int_equal(async_malloc(async, 2 * MiB, f->a), p);
    vb_allocator_destroy(async);
}

/* Everything freed, then empty_cache: reserved 0. */
static void test_async_empty_cache_leaves_reserved_zero(void **state)
{
    fixture *f = *state;
    vb_allocator *async = open_async(f, NULL, NULL);
    vb_addr p = async_malloc(async, 5 * MiB, f->a);
    vb_addr q = async_malloc(async, 100, f->b);
    f->dev->ops->enqueue_busy(f->dev, f->b, 1000);
    vb_free(async, p);
    vb_free(async, q);
    assert_int_equal(vb_empty_cache(async), VB_OK);
    assert_int_equal(stats_of(async).reserved_bytes, 0);
    vb_allocator_destroy(async);
}

/* malloc, free, empty_cache: one pool_free plus one trim that released
 * memory = 2 driver free calls; 1 driver alloc call. */
static void test_async_counts_pool_calls_and_releasing_trims(void **state)
{
    fixture *f = *state;
    vb_allocator *async = open_async(f, NULL, NULL);
    vb_free(async, async_malloc(async, 1 * MiB, f->a));
    vb_empty_cache(async);
    vb_alloc_stats stats = stats_of(async);
    assert_int_equal(stats.driver_alloc_calls, 1);
    assert_int_equal(stats.driver_free_calls, 2);
    vb_allocator_destroy(async);
}

/* 1 MiB live of a 32 MiB granule: cached = 32 MiB - 1 MiB. */
static void test_async_free_cached_is_reserved_minus_used(void **state)
{
    fixture *f = *state;
    vb_allocator *async = open_async(f, NULL, NULL);
    async_malloc(async, 1 * MiB, f->a);
    assert_int_equal(stats_of(async).free_cached_bytes, 31 * MiB);
    vb_allocator_destroy(async);
}

static void test_async_free_of_unknown_pointer_is_invalid(void **state)
{
    fixture *f = *state;
    vb_allocator *async = open_async(f, NULL, NULL);
    vb_addr p = async_malloc(async, 1 * MiB, f->a);
    assert_int_equal(vb_free(async, p + 256), VB_ERR_INVALID);
    vb_allocator_destroy(async);
}

static void test_async_double_free_is_invalid(void **state)
{
    fixture *f = *state;
    vb_allocator *async = open_async(f, NULL, NULL);
    vb_addr p = async_malloc(async, 1 * MiB, f->a);
    assert_int_equal(vb_free(async, p), VB_OK);
    assert_int_equal(vb_free(async, p), VB_ERR_INVALID);
    vb_allocator_destroy(async);
}

/* 128 MiB on a 64 MiB device: out of memory, counted once. */
static void test_async_out_of_memory_is_counted(void **state)
{
    (void)state;
    vb_device *dev;
    vb_allocator *async;
    vb_addr addr;
    assert_int_equal(vb_sim_open(64 * MiB, &dev), VB_OK);
    assert_int_equal(vb_allocator_create("async", dev, NULL, &async), VB_OK);
    assert_int_equal(vb_malloc(async, 128 * MiB, NULL, &addr), VB_ERR_OOM);
    assert_int_equal(stats_of(async).ooms, 1);
    vb_allocator_destroy(async);
    vb_device_close(dev);
}

/* ------------------------------------------------------------------------ */
/* Configuration                                                             */
/* ------------------------------------------------------------------------ */

static void test_async_config_unknown_key_is_invalid(void **state)
{
    vb_allocator *async;
    assert_int_equal(new_async(*state, "max_split_size_mb", "256", &async), VB_ERR_INVALID);
}

static void test_async_config_non_number_is_invalid(void **state)
{
    vb_allocator *async;
    assert_int_equal(new_async(*state, "release_threshold", "lots", &async), VB_ERR_INVALID);
}

static void test_async_config_negative_is_invalid(void **state)
{
    vb_allocator *async;
    assert_int_equal(new_async(*state, "release_threshold", "-1", &async), VB_ERR_INVALID);
}

static void test_async_config_accepts_max(void **state)
{
    vb_allocator *async;
    assert_int_equal(new_async(*state, "release_threshold", "max", &async), VB_OK);
    vb_allocator_destroy(async);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, open_sim, close_sim)
    const struct CMUnitTest tests[] = {
        T(test_pool_reuses_block_on_freeing_stream_at_once),
        T(test_pool_f10_other_stream_reuses_a_pending_free_and_waits_for_it),
        T(test_pool_hands_block_to_other_stream_after_free_completes),
        T(test_stream_wait_event_orders_later_work_after_event),
        T(test_pool_f1_reserves_32_mib_granules),
        T(test_pool_f2_counts_requested_bytes_used),
        T(test_pool_f3_packs_small_blocks),
        T(test_pool_f4_reuses_a_freed_range_for_other_sizes),
        T(test_pool_f5_f6_no_remapping_and_latest_hole_first),
        T(test_pool_f14_takes_the_best_fit),
        T(test_pool_f14_a_stream_takes_its_pending_frees_first),
        T(test_pool_f14_a_pending_free_merges_once_seen_complete),
        T(test_pool_f6_sees_completed_frees_latest_first_while_others_stay_pending),
        T(test_pool_f11_an_empty_granule_gives_its_memory_to_a_new_block),
        T(test_pool_f11_moved_memory_waits_for_its_pending_free),
        T(test_pool_reproduces_the_gpu_leak_loop_timeline),
        T(test_pool_coalesces_free_neighbours),
        T(test_pool_f7_blocks_span_granules),
        T(test_pool_f9_threshold_zero_releases_free_granules_at_synchronize),
        T(test_pool_threshold_keeps_up_to_threshold),
        T(test_pool_max_threshold_keeps_everything_at_synchronize),
        T(test_pool_release_waits_for_free_to_complete),
        T(test_pool_f8_trim_to_zero_releases_every_free_granule),
        T(test_pool_f8_trim_keeps_granules_with_live_blocks),
        T(test_pool_trim_stops_at_keep_bytes),
        T(test_pool_free_of_unknown_address_is_invalid),
        T(test_pool_double_free_is_invalid),
        T(test_pool_out_of_memory_leaves_pool_usable),
        T(test_pool_absurd_size_is_out_of_memory),
        T(test_pool_destroy_returns_memory_to_device),
        T(test_async_allocated_is_size_rounded_to_512),
        T(test_async_reserved_is_pool_reserved),
        T(test_async_default_threshold_keeps_memory_at_synchronize),
        T(test_async_threshold_zero_releases_at_synchronize),
        T(test_async_free_reuses_on_allocating_stream_at_once),
        T(test_async_record_stream_orders_reuse_after_the_recorded_stream),
        T(test_async_record_stream_block_reused_after_stream_completes),
        T(test_async_empty_cache_leaves_reserved_zero),
        T(test_async_counts_pool_calls_and_releasing_trims),
        T(test_async_free_cached_is_reserved_minus_used),
        T(test_async_free_of_unknown_pointer_is_invalid),
        T(test_async_double_free_is_invalid),
        T(test_async_out_of_memory_is_counted),
        T(test_async_config_unknown_key_is_invalid),
        T(test_async_config_non_number_is_invalid),
        T(test_async_config_negative_is_invalid),
        T(test_async_config_accepts_max),
    };
#undef T
    return cmocka_run_group_tests_name("async", tests, NULL, NULL);
}
