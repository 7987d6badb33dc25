/* vrambench — the sim's stream-ordered pool (base/device_sim_pool.c) and
 * the `async` allocator on top of it (allocators/async.c).
 *
 * Rules the expected numbers come from: requests round up to 512 B
 * (VB_POOL_ROUNDING); a pool with no usable free range grows by one chunk of
 * the rounded request rounded up to 2 MiB; a block freed on stream S is
 * reusable on S at once and on other streams once S's work queued before
 * the free has completed; at a synchronization the pool releases unused
 * chunks, newest first, while it holds more than its release threshold;
 * trim does the same down to its keep_bytes. */
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

/* The same block asked for on B before A's work completed: B gets a new
 * 2 MiB chunk (the only chunk is exactly p), so 4 MiB are reserved. */
static void test_pool_withholds_block_from_other_stream_until_free_completes(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, UINT64_MAX);
    vb_addr p = freed_behind_busy_work(f, pool, 2 * MiB, 1000);
    vb_addr q = pool_malloc(f, pool, 2 * MiB, f->b);
    assert_true(q != p);
    assert_int_equal(reserved_of(f, pool), 4 * MiB);
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
 * ns), and a block freed on B is withheld from A's peer stream until then. */
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
/* Sizes, best fit, coalescing                                               */
/* ------------------------------------------------------------------------ */

/* 1 byte: the pool counts 512 bytes used (its rounding). */
static void test_pool_rounds_request_to_512_bytes(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, UINT64_MAX);
    pool_malloc(f, pool, 1, f->a);
    assert_int_equal(usage_of(f, pool).used, 512);
    f->dev->ops->pool_destroy(f->dev, pool);
}

/* 3 MiB + 1 byte rounds to 3 MiB + 512, and the chunk to 4 MiB. */
static void test_pool_grows_by_request_rounded_to_2mib(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, UINT64_MAX);
    pool_malloc(f, pool, 3 * MiB + 1, f->a);
    assert_int_equal(reserved_of(f, pool), 4 * MiB);
    f->dev->ops->pool_destroy(f->dev, pool);
}

/* In one 2 MiB chunk: a 256K | b 64K | c 512K | d 64K | 1152K free. Freeing a
 * and c leaves free ranges of 256K, 512K and 1152K; 300K best-fits c's. */
static void test_pool_best_fit_takes_smallest_usable_range(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, UINT64_MAX);
    vb_addr a = pool_malloc(f, pool, 256 * KiB, f->a);
    pool_malloc(f, pool, 64 * KiB, f->a);
    vb_addr c = pool_malloc(f, pool, 512 * KiB, f->a);
    pool_malloc(f, pool, 64 * KiB, f->a);
    pool_free(f, pool, a, f->a);
    pool_free(f, pool, c, f->a);
    assert_int_equal(pool_malloc(f, pool, 300 * KiB, f->a), c);
    f->dev->ops->pool_destroy(f->dev, pool);
}

/* Two 1 MiB blocks fill a 2 MiB chunk; freed, they merge, and a 2 MiB
 * request is served from them at x without growing (reserved stays 2 MiB). */
static void test_pool_coalesces_free_neighbours(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, UINT64_MAX);
    vb_addr x = pool_malloc(f, pool, 1 * MiB, f->a);
    vb_addr y = pool_malloc(f, pool, 1 * MiB, f->a);
    pool_free(f, pool, x, f->a);
    pool_free(f, pool, y, f->a);
    assert_int_equal(pool_malloc(f, pool, 2 * MiB, f->a), x);
    assert_int_equal(reserved_of(f, pool), 2 * MiB);
    f->dev->ops->pool_destroy(f->dev, pool);
}

/* ------------------------------------------------------------------------ */
/* Release threshold and trim                                                */
/* ------------------------------------------------------------------------ */

/* A free is not a synchronization: with threshold 0 the chunk stays. */
static void test_pool_free_alone_releases_nothing(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, 0);
    pool_free(f, pool, pool_malloc(f, pool, 4 * MiB, f->a), f->a);
    assert_int_equal(reserved_of(f, pool), 4 * MiB);
    f->dev->ops->pool_destroy(f->dev, pool);
}

/* Threshold 0: the device synchronize releases the freed 4 MiB chunk. */
static void test_pool_threshold_zero_releases_free_chunks_at_synchronize(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, 0);
    pool_free(f, pool, pool_malloc(f, pool, 4 * MiB, f->a), f->a);
    f->dev->ops->device_synchronize(f->dev);
    assert_int_equal(reserved_of(f, pool), 0);
    f->dev->ops->pool_destroy(f->dev, pool);
}

/* Threshold 4 MiB, three free 4 MiB chunks: 12 > 4 releases one (8), 8 > 4
 * another (4), 4 is not above 4: 4 MiB stay. */
static void test_pool_threshold_keeps_up_to_threshold(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, 4 * MiB);
    vb_addr p[3];
    for (int i = 0; i < 3; i++) p[i] = pool_malloc(f, pool, 4 * MiB, f->a);
    for (int i = 0; i < 3; i++) pool_free(f, pool, p[i], f->a);
    f->dev->ops->device_synchronize(f->dev);
    assert_int_equal(reserved_of(f, pool), 4 * MiB);
    f->dev->ops->pool_destroy(f->dev, pool);
}

/* Default-like threshold UINT64_MAX: nothing is released at synchronize. */
static void test_pool_max_threshold_keeps_everything_at_synchronize(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, UINT64_MAX);
    pool_free(f, pool, pool_malloc(f, pool, 4 * MiB, f->a), f->a);
    f->dev->ops->device_synchronize(f->dev);
    assert_int_equal(reserved_of(f, pool), 4 * MiB);
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
    assert_int_equal(reserved_of(f, pool), 2 * MiB);
    f->dev->ops->pool_destroy(f->dev, pool);
}

/* Trim to 0 after everything was freed and completed: reserved 0. */
static void test_pool_trim_to_zero_leaves_reserved_zero(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, UINT64_MAX);
    pool_free(f, pool, pool_malloc(f, pool, 3 * MiB, f->a), f->a);
    pool_free(f, pool, pool_malloc(f, pool, 64 * MiB, f->b), f->b);
    f->dev->ops->device_synchronize(f->dev);
    assert_int_equal(f->dev->ops->pool_trim(f->dev, pool, 0), VB_OK);
    assert_int_equal(reserved_of(f, pool), 0);
    f->dev->ops->pool_destroy(f->dev, pool);
}

/* A live 2 MiB block keeps its chunk: trim(0) leaves 2 of 6 MiB. */
static void test_pool_trim_keeps_chunks_with_live_blocks(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, UINT64_MAX);
    pool_malloc(f, pool, 2 * MiB, f->a);
    pool_free(f, pool, pool_malloc(f, pool, 4 * MiB, f->a), f->a);
    f->dev->ops->pool_trim(f->dev, pool, 0);
    assert_int_equal(reserved_of(f, pool), 2 * MiB);
    f->dev->ops->pool_destroy(f->dev, pool);
}

/* Three free 4 MiB chunks, trim to keep 5 MiB: 12 > 5 -> 8 > 5 -> 4: 4 MiB stay. */
static void test_pool_trim_stops_at_keep_bytes(void **state)
{
    fixture *f = *state;
    vb_pool pool = new_pool(f, UINT64_MAX);
    vb_addr p[3];
    for (int i = 0; i < 3; i++) p[i] = pool_malloc(f, pool, 4 * MiB, f->a);
    for (int i = 0; i < 3; i++) pool_free(f, pool, p[i], f->a);
    f->dev->ops->pool_trim(f->dev, pool, 5 * MiB);
    assert_int_equal(reserved_of(f, pool), 4 * MiB);
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

/* 1 byte reserves the pool's first 2 MiB chunk. */
static void test_async_reserved_is_pool_reserved(void **state)
{
    fixture *f = *state;
    vb_allocator *async = open_async(f, NULL, NULL);
    async_malloc(async, 1, f->a);
    assert_int_equal(stats_of(async).reserved_bytes, 2 * MiB);
    vb_allocator_destroy(async);
}

/* Default threshold (max): free + synchronize keeps the 2 MiB. */
static void test_async_default_threshold_keeps_memory_at_synchronize(void **state)
{
    fixture *f = *state;
    vb_allocator *async = open_async(f, NULL, NULL);
    assert_int_equal(vb_free(async, async_malloc(async, 1 * MiB, f->a)), VB_OK);
    f->dev->ops->device_synchronize(f->dev);
    assert_int_equal(stats_of(async).reserved_bytes, 2 * MiB);
    vb_allocator_destroy(async);
}

/* release_threshold=0: free + synchronize gives the 2 MiB back, and the
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

/* Used on B (record_stream) with B busy for 1000 ns: after the free, A's
 * next 2 MiB request must not get the block (B has not completed). */
static void test_async_record_stream_withholds_block_until_stream_completes(void **state)
{
    fixture *f = *state;
    vb_allocator *async = open_async(f, NULL, NULL);
    vb_addr p = async_malloc(async, 2 * MiB, f->a);
    assert_int_equal(vb_record_stream(async, p, f->b), VB_OK);
    f->dev->ops->enqueue_busy(f->dev, f->b, 1000);
    assert_int_equal(vb_free(async, p), VB_OK);
    assert_true(async_malloc(async, 2 * MiB, f->a) != p);
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

/* 1 MiB live of a 2 MiB chunk: cached = 2 MiB - 1 MiB. */
static void test_async_free_cached_is_reserved_minus_used(void **state)
{
    fixture *f = *state;
    vb_allocator *async = open_async(f, NULL, NULL);
    async_malloc(async, 1 * MiB, f->a);
    assert_int_equal(stats_of(async).free_cached_bytes, 1 * MiB);
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
        T(test_pool_withholds_block_from_other_stream_until_free_completes),
        T(test_pool_hands_block_to_other_stream_after_free_completes),
        T(test_stream_wait_event_orders_later_work_after_event),
        T(test_pool_rounds_request_to_512_bytes),
        T(test_pool_grows_by_request_rounded_to_2mib),
        T(test_pool_best_fit_takes_smallest_usable_range),
        T(test_pool_coalesces_free_neighbours),
        T(test_pool_free_alone_releases_nothing),
        T(test_pool_threshold_zero_releases_free_chunks_at_synchronize),
        T(test_pool_threshold_keeps_up_to_threshold),
        T(test_pool_max_threshold_keeps_everything_at_synchronize),
        T(test_pool_release_waits_for_free_to_complete),
        T(test_pool_trim_to_zero_leaves_reserved_zero),
        T(test_pool_trim_keeps_chunks_with_live_blocks),
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
        T(test_async_record_stream_withholds_block_until_stream_completes),
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
