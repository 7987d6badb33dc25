/* Tests of the allocator seam (allocators/allocator.h): what it counts by
 * itself, for every strategy, and how a host allocation failure travels
 * (a failure of the run, never a measured out-of-memory). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "allocators/allocator.h"
#include "app/runner.h"

/* ------------------------------------------------------------------------ */
/* A sim device whose memory-obtaining ops fail as host allocation does      */
/* ------------------------------------------------------------------------ */

static vb_status host_oom_mem_alloc(vb_device *dev, uint64_t size, vb_addr *out)
{
    (void)dev, (void)size, (void)out;
    return vb_error(VB_ERR_HOST_OOM, "out of host memory (test)");
}

static vb_status host_oom_vm_create(vb_device *dev, uint64_t size, vb_phys *out)
{
    (void)dev, (void)size, (void)out;
    return vb_error(VB_ERR_HOST_OOM, "out of host memory (test)");
}

static vb_status host_oom_pool_malloc(vb_device *dev, vb_pool pool, uint64_t size, vb_stream stream, vb_addr *out)
{
    (void)dev, (void)pool, (void)size, (void)stream, (void)out;
    return vb_error(VB_ERR_HOST_OOM, "out of host memory (test)");
}

typedef struct host_oom_device {
    vb_device *sim;
    const vb_device_ops *sim_ops;
    vb_device_ops ops;
} host_oom_device;

/* Makes `sim`'s allocation ops fail with VB_ERR_HOST_OOM (the rest works). */
static void host_oom_open(host_oom_device *d)
{
    assert_int_equal(vb_sim_open(0, &d->sim), VB_OK);
    d->sim_ops = d->sim->ops;
    d->ops = *d->sim->ops;
    d->ops.mem_alloc = host_oom_mem_alloc;
    d->ops.vm_create = host_oom_vm_create;
    d->ops.pool_malloc = host_oom_pool_malloc;
    d->sim->ops = &d->ops;
}

static void host_oom_close(host_oom_device *d)
{
    d->sim->ops = d->sim_ops;
    vb_device_close(d->sim);
}

/* Every strategy passes a host allocation failure on as VB_ERR_HOST_OOM:
 * no ooms, no retry counted, nothing requested. */
static void test_host_oom_is_not_counted_as_an_oom(void **state)
{
    (void)state;
    for (size_t i = 0; vb_allocator_registry[i]; i++) {
        host_oom_device d;
        host_oom_open(&d);
        vb_allocator *allocator = NULL;
        assert_int_equal(vb_allocator_create(vb_allocator_registry[i]->name, d.sim, NULL, &allocator), VB_OK);
        vb_addr addr = 1;
        vb_status status = vb_malloc(allocator, 3 * VB_MiB, NULL, &addr);
        if (status != VB_ERR_HOST_OOM)
            fail_msg("%s: malloc on a device out of host memory returned %s, not out of host memory",
                     vb_allocator_registry[i]->name, vb_status_name(status));
        vb_alloc_stats stats;
        vb_allocator_stats(allocator, &stats);
        assert_int_equal(stats.ooms, 0);
        assert_int_equal(stats.requested_bytes, 0);
        vb_allocator_destroy(allocator);
        host_oom_close(&d);
    }
}

/* The runner reports it as the case's failure, with no result, even for a
 * scenario that measures out-of-memory (capped_training). */
static void test_host_oom_fails_the_case(void **state)
{
    (void)state;
    const char *scenarios[] = {"views", "capped_training"};
    for (size_t i = 0; i < sizeof scenarios / sizeof *scenarios; i++) {
        host_oom_device d;
        host_oom_open(&d);
        vb_allocator_spec spec;
        assert_int_equal(vb_allocator_spec_parse("caching", &spec), VB_OK);
        vb_runner_options options = {1, 0.0, 1, 0};
        vb_case c = {vb_scenario_find(scenarios[i]), NULL, &spec, NULL};
        vb_case_result result;
        memset(&result, 0, sizeof result);
        assert_int_equal(vb_runner_run_case(d.sim, &c, &options, &result), VB_ERR_HOST_OOM);
        assert_int_equal(result.repetition_count, 0);
        vb_case_result_free(&result);
        vb_allocator_spec_free(&spec);
        host_oom_close(&d);
    }
}

/* ------------------------------------------------------------------------ */
/* What the seam counts                                                      */
/* ------------------------------------------------------------------------ */

/* cuda: one mem_alloc per malloc, one mem_free per free; a 1-byte request
 * takes 512 B of a 2 MiB page the driver reserves for it. */
static void test_cuda_counts_by_kind(void **state)
{
    (void)state;
    vb_device *dev;
    vb_allocator *allocator;
    assert_int_equal(vb_sim_open(0, &dev), VB_OK);
    assert_int_equal(vb_allocator_create("cuda", dev, NULL, &allocator), VB_OK);
    vb_addr addr;
    assert_int_equal(vb_malloc(allocator, 1, NULL, &addr), VB_OK);
    vb_alloc_stats stats;
    vb_allocator_stats(allocator, &stats);
    assert_int_equal(stats.requested_bytes, 1);
    /* The driver places a small block at 512 B in a shared 2 MiB page, which
     * is what it uses (base/driver_pages.h). */
    assert_int_equal(stats.allocated_bytes, 512);
    assert_int_equal(stats.reserved_bytes, VB_DRIVER_PAGE);
    assert_int_equal(stats.driver_calls[VB_CALL_MEM_ALLOC], 1);
    assert_int_equal(vb_free(allocator, addr), VB_OK);
    vb_allocator_stats(allocator, &stats);
    assert_int_equal(stats.requested_bytes, 0);
    assert_int_equal(stats.reserved_bytes, 0);
    assert_int_equal(stats.reserved_bytes_peak, VB_DRIVER_PAGE);
    assert_int_equal(stats.driver_calls[VB_CALL_MEM_FREE], 1);
    assert_int_equal(stats.driver_alloc_calls, 1);
    assert_int_equal(stats.driver_free_calls, 1);
    vb_allocator_destroy(allocator);
    vb_device_close(dev);
}

/* A free of an address that is not live is refused by the seam and changes
 * nothing; so is a second free. */
static void test_unknown_and_double_free_are_refused(void **state)
{
    (void)state;
    vb_device *dev;
    vb_allocator *allocator;
    assert_int_equal(vb_sim_open(0, &dev), VB_OK);
    assert_int_equal(vb_allocator_create("caching", dev, NULL, &allocator), VB_OK);
    vb_addr addr;
    assert_int_equal(vb_malloc(allocator, 1000, NULL, &addr), VB_OK);
    assert_int_equal(vb_free(allocator, addr + 512), VB_ERR_INVALID);
    assert_int_equal(vb_free(allocator, addr), VB_OK);
    assert_int_equal(vb_free(allocator, addr), VB_ERR_INVALID);
    vb_alloc_stats stats;
    vb_allocator_stats(allocator, &stats);
    assert_int_equal(stats.requested_bytes, 0);
    assert_int_equal(stats.allocated_bytes, 0);
    vb_allocator_destroy(allocator);
    vb_device_close(dev);
}

/* A block's key frees that block only: once it is freed, its key names
 * nothing, even after another block takes its slot, and a second free by
 * it is refused and changes nothing (every strategy). */
static void test_a_key_names_its_block_only(void **state)
{
    (void)state;
    for (size_t i = 0; vb_allocator_registry[i]; i++) {
        const char *name = vb_allocator_registry[i]->name;
        vb_device *dev;
        vb_allocator *allocator;
        assert_int_equal(vb_sim_open(0, &dev), VB_OK);
        assert_int_equal(vb_allocator_create(name, dev, NULL, &allocator), VB_OK);
        vb_addr a, b, c;
        uint64_t key_a, key_b, key_c;
        assert_int_equal(vb_malloc_keyed(allocator, 1000, NULL, &a, &key_a), VB_OK);
        assert_int_equal(vb_malloc_keyed(allocator, 3 * VB_MiB, NULL, &b, &key_b), VB_OK);
        assert_true(key_a != 0 && key_b != 0 && key_a != key_b);
        assert_int_equal(vb_keyed_addr(allocator, key_a), a);
        assert_int_equal(vb_free_keyed(allocator, key_a), VB_OK);
        assert_int_equal(vb_keyed_addr(allocator, key_a), 0);
        assert_int_equal(vb_free_keyed(allocator, key_a), VB_ERR_INVALID);
        assert_int_equal(vb_malloc_keyed(allocator, 1000, NULL, &c, &key_c), VB_OK);
        if (vb_free_keyed(allocator, key_a) != VB_ERR_INVALID)
            fail_msg("%s: the key of a freed block freed the block allocated after it", name);
        assert_int_equal(vb_free_keyed(allocator, 0), VB_OK);
        vb_alloc_stats stats;
        vb_allocator_stats(allocator, &stats);
        assert_int_equal(stats.requested_bytes, 3 * VB_MiB + 1000);
        assert_int_equal(vb_free_keyed(allocator, key_c), VB_OK);
        assert_int_equal(vb_free(allocator, b), VB_OK);
        assert_int_equal(vb_free_keyed(allocator, key_b), VB_ERR_INVALID);
        vb_allocator_stats(allocator, &stats);
        assert_int_equal(stats.requested_bytes, 0);
        assert_int_equal(stats.allocated_bytes, 0);
        vb_allocator_destroy(allocator);
        vb_device_close(dev);
    }
}

/* Frees by key and by address mix on one allocator: blocks allocated
 * before the first free by address are found by it, a block freed by key
 * is no longer live by address, and record_stream finds blocks by address
 * (every strategy). */
static void test_frees_by_key_and_by_address_mix(void **state)
{
    (void)state;
    enum { BLOCKS = 64 };
    for (size_t i = 0; vb_allocator_registry[i]; i++) {
        const char *name = vb_allocator_registry[i]->name;
        vb_device *dev;
        vb_allocator *allocator;
        vb_stream other;
        assert_int_equal(vb_sim_open(0, &dev), VB_OK);
        assert_int_equal(dev->ops->stream_create(dev, &other), VB_OK);
        assert_int_equal(vb_allocator_create(name, dev, NULL, &allocator), VB_OK);
        vb_addr addrs[BLOCKS];
        uint64_t keys[BLOCKS];
        for (int b = 0; b < BLOCKS; b++)
            assert_int_equal(vb_malloc_keyed(allocator, (uint64_t)(b + 1) * 4096, NULL, &addrs[b], &keys[b]), VB_OK);
        for (int b = 0; b < BLOCKS; b += 4) assert_int_equal(vb_free_keyed(allocator, keys[b]), VB_OK);
        for (int b = 1; b < BLOCKS; b += 4) {
            if (vb_free(allocator, addrs[b]) != VB_OK) fail_msg("%s: free by address of a keyed block refused", name);
            assert_int_equal(vb_free_keyed(allocator, keys[b]), VB_ERR_INVALID);
        }
        for (int b = 0; b < BLOCKS; b += 4) assert_int_equal(vb_free(allocator, addrs[b]), VB_ERR_INVALID);
        assert_int_equal(vb_record_stream(allocator, addrs[2], other), VB_OK);
        if (allocator->ops->record_stream) /* else a no-op, whatever the address */
            assert_int_equal(vb_record_stream(allocator, addrs[0], other), VB_ERR_INVALID);
        for (int b = 2; b < BLOCKS; b += 4) assert_int_equal(vb_free_keyed(allocator, keys[b]), VB_OK);
        for (int b = 3; b < BLOCKS; b += 4) assert_int_equal(vb_free(allocator, addrs[b]), VB_OK);
        for (int b = 2; b < BLOCKS; b += 4) assert_int_equal(vb_free(allocator, addrs[b]), VB_ERR_INVALID);
        vb_alloc_stats stats;
        vb_allocator_stats(allocator, &stats);
        assert_int_equal(stats.requested_bytes, 0);
        assert_int_equal(stats.allocated_bytes, 0);
        vb_allocator_destroy(allocator);
        dev->ops->stream_destroy(dev, other);
        vb_device_close(dev);
    }
}

/* splitmix64, for seeded random sequences. */
static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Runs a seeded sequence of mallocs and frees by key on `name` (a fresh
 * sim); with `hints`, before every call it asks vb_prefetch_frees for every
 * stage of live keys, of keys of freed blocks and of keys that never named
 * anything. The addresses handed out, one after another, go to `addrs`. */
static void keyed_sequence(const char *name, int hints, vb_addr *addrs, size_t count, vb_alloc_stats *stats)
{
    enum { LIVE = 64 };
    vb_device *dev;
    vb_allocator *allocator;
    assert_int_equal(vb_sim_open(4 * VB_GiB, &dev), VB_OK);
    assert_int_equal(vb_allocator_create(name, dev, NULL, &allocator), VB_OK);
    uint64_t keys[LIVE] = {0}, stale[LIVE] = {0}, rng = 3, garbage = 5;
    for (size_t i = 0; i < count; i++) {
        uint64_t pick = next_random(&rng), slot = pick % LIVE;
        if (hints) {
            /* Every stage of a live key, of a freed one and of garbage, and
             * the stages mixed. */
            uint64_t live[VB_PREFETCH_STAGES], freed[VB_PREFETCH_STAGES], noise[VB_PREFETCH_STAGES],
                mixed[VB_PREFETCH_STAGES];
            for (int stage = 0; stage < VB_PREFETCH_STAGES; stage++) {
                live[stage] = keys[(slot + 1) % LIVE];
                freed[stage] = stale[(slot + 2) % LIVE];
                noise[stage] = next_random(&garbage);
                mixed[stage] = stage % 3 == 0 ? keys[(slot + 1 + stage) % LIVE]
                               : stage % 3 == 1 ? stale[(slot + stage) % LIVE] : next_random(&garbage);
            }
            vb_prefetch_frees(allocator, live);
            vb_prefetch_frees(allocator, freed);
            vb_prefetch_frees(allocator, noise);
            vb_prefetch_frees(allocator, mixed);
        }
        addrs[i] = 0;
        if (keys[slot]) {
            assert_int_equal(vb_free_keyed(allocator, keys[slot]), VB_OK);
            stale[slot] = keys[slot];
            keys[slot] = 0;
        } else {
            uint64_t size = 1 + (pick >> 8) % (pick & 1 ? 64 * VB_MiB : VB_MiB);
            vb_status status = vb_malloc_keyed(allocator, size, NULL, &addrs[i], &keys[slot]);
            assert_true(status == VB_OK || status == VB_ERR_OOM);
        }
    }
    vb_allocator_stats(allocator, stats);
    vb_allocator_destroy(allocator);
    vb_device_close(dev);
}

/* Prefetch hints change no decision of any strategy (the same addresses,
 * the same statistics), whatever key they name. */
static void test_prefetch_hints_change_nothing(void **state)
{
    (void)state;
    enum { CALLS = 4000 };
    static vb_addr plain[CALLS], hinted[CALLS];
    for (size_t i = 0; vb_allocator_registry[i]; i++) {
        const char *name = vb_allocator_registry[i]->name;
        vb_alloc_stats plain_stats, hinted_stats;
        keyed_sequence(name, 0, plain, CALLS, &plain_stats);
        keyed_sequence(name, 1, hinted, CALLS, &hinted_stats);
        for (size_t call = 0; call < CALLS; call++)
            if (plain[call] != hinted[call]) fail_msg("%s: call %zu gave another address with hints", name, call);
        assert_memory_equal(&plain_stats, &hinted_stats, sizeof plain_stats);
    }
}

/* async: mallocs and frees make no pool query (issue: no instrumentation in
 * the hot path); the reserved figure and its peak come from the pool when
 * the stats are read, and a peak reset restarts the pool's mark. */
static void test_async_reads_the_pool_only_with_the_stats(void **state)
{
    (void)state;
    vb_device *dev;
    vb_allocator *allocator;
    assert_int_equal(vb_sim_open(0, &dev), VB_OK);
    assert_int_equal(vb_allocator_create("async", dev, NULL, &allocator), VB_OK);
    vb_addr blocks[8];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 8; i++) assert_int_equal(vb_malloc(allocator, 3 * VB_MiB, NULL, &blocks[i]), VB_OK);
        for (int i = 0; i < 8; i++) assert_int_equal(vb_free(allocator, blocks[i]), VB_OK);
    }
    assert_int_equal(allocator->counted.driver_calls[VB_CALL_POOL_USAGE], 0);
    vb_alloc_stats stats;
    vb_allocator_stats(allocator, &stats);
    assert_int_equal(stats.driver_calls[VB_CALL_POOL_MALLOC], 24);
    assert_int_equal(stats.driver_calls[VB_CALL_POOL_FREE], 24);
    assert_int_equal(stats.allocated_bytes_peak, 24 * VB_MiB);
    assert_true(stats.reserved_bytes_peak >= 24 * VB_MiB);
    assert_int_equal(stats.reserved_bytes, stats.reserved_bytes_peak); /* the pool keeps it (threshold max) */
    assert_int_equal(vb_empty_cache(allocator), VB_OK);
    vb_allocator_reset_peaks(allocator);
    vb_allocator_stats(allocator, &stats);
    assert_int_equal(stats.reserved_bytes, 0);
    assert_int_equal(stats.reserved_bytes_peak, 0);
    assert_int_equal(stats.driver_free_calls, 24 + 1); /* the frees and the trim that released memory */
    vb_allocator_destroy(allocator);
    vb_device_close(dev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_oom_is_not_counted_as_an_oom),
        cmocka_unit_test(test_host_oom_fails_the_case),
        cmocka_unit_test(test_cuda_counts_by_kind),
        cmocka_unit_test(test_unknown_and_double_free_are_refused),
        cmocka_unit_test(test_a_key_names_its_block_only),
        cmocka_unit_test(test_frees_by_key_and_by_address_mix),
        cmocka_unit_test(test_prefetch_hints_change_nothing),
        cmocka_unit_test(test_async_reads_the_pool_only_with_the_stats),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
