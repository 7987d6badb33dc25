/* Tests of base/device_cap.c: a capped device refuses allocations past its
 * cap whatever the device under it has free, and reports the cap. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base/device.h"

#define MiB VB_MiB

/* A 64 MiB cap on an 80 GiB sim: 3 x 20 MiB fit (counted as 3 x 20 MiB,
 * whole 2 MiB pages), a fourth does not; freeing one makes room again.
 * mem_info: total = the cap, free = the cap less what is counted. */
static void test_mem_alloc_is_refused_past_the_cap(void **unused)
{
    (void)unused;
    vb_device *sim, *dev;
    assert_int_equal(vb_sim_open(0, &sim), VB_OK);
    assert_int_equal(vb_device_cap_open(sim, 64 * MiB, &dev), VB_OK);
    assert_true(vb_device_is_sim(dev));
    vb_addr blocks[3], more;
    for (int i = 0; i < 3; i++) assert_int_equal(dev->ops->mem_alloc(dev, 20 * MiB, &blocks[i]), VB_OK);
    uint64_t free_bytes, total_bytes;
    assert_int_equal(dev->ops->mem_info(dev, &free_bytes, &total_bytes), VB_OK);
    assert_int_equal(total_bytes, 64 * MiB);
    assert_int_equal(free_bytes, 4 * MiB);
    assert_int_equal(dev->ops->mem_alloc(dev, 20 * MiB, &more), VB_ERR_OOM);
    assert_int_equal(dev->ops->mem_alloc(dev, 4 * MiB + 1, &more), VB_ERR_OOM); /* 6 MiB of pages */
    assert_int_equal(dev->ops->mem_free(dev, blocks[0]), VB_OK);
    assert_int_equal(dev->ops->mem_alloc(dev, 20 * MiB, &more), VB_OK);
    assert_int_equal(dev->ops->mem_free(dev, more), VB_OK);
    for (int i = 1; i < 3; i++) assert_int_equal(dev->ops->mem_free(dev, blocks[i]), VB_OK);
    assert_int_equal(vb_sim_used_bytes(sim), 0);
    vb_device_close(dev);
    assert_int_equal(sim->ops->mem_alloc(sim, 100 * MiB, &more), VB_OK); /* the sim itself is not capped */
    vb_device_close(sim);
}

/* Physical memory of the virtual-memory API counts as well. */
static void test_vm_create_is_refused_past_the_cap(void **unused)
{
    (void)unused;
    vb_device *sim, *dev;
    assert_int_equal(vb_sim_open(0, &sim), VB_OK);
    assert_int_equal(vb_device_cap_open(sim, 8 * MiB, &dev), VB_OK);
    vb_phys a, b;
    assert_int_equal(dev->ops->vm_create(dev, 6 * MiB, &a), VB_OK);
    assert_int_equal(dev->ops->vm_create(dev, 4 * MiB, &b), VB_ERR_OOM);
    assert_int_equal(dev->ops->vm_release(dev, a), VB_OK);
    assert_int_equal(dev->ops->vm_create(dev, 8 * MiB, &b), VB_OK);
    assert_int_equal(dev->ops->vm_release(dev, b), VB_OK);
    vb_device_close(dev);
    vb_device_close(sim);
}

/* A pool malloc whose growth passes the cap is undone: OOM, and the pool
 * holds what it held before. */
static void test_pool_growth_past_the_cap_is_undone(void **unused)
{
    (void)unused;
    vb_device *sim, *dev;
    assert_int_equal(vb_sim_open(0, &sim), VB_OK);
    assert_int_equal(vb_device_cap_open(sim, 100 * MiB, &dev), VB_OK);
    vb_pool pool;
    assert_int_equal(dev->ops->pool_create(dev, UINT64_MAX, &pool), VB_OK);
    vb_addr a, b;
    assert_int_equal(dev->ops->pool_malloc(dev, pool, 60 * MiB, NULL, &a), VB_OK);
    uint64_t reserved_before, used;
    assert_int_equal(dev->ops->pool_usage(dev, pool, &reserved_before, &used), VB_OK);
    assert_int_equal(dev->ops->pool_malloc(dev, pool, 60 * MiB, NULL, &b), VB_ERR_OOM);
    uint64_t reserved_after;
    assert_int_equal(dev->ops->pool_usage(dev, pool, &reserved_after, &used), VB_OK);
    assert_int_equal(reserved_after, reserved_before);
    assert_int_equal(used, 60 * MiB);
    assert_int_equal(dev->ops->pool_free(dev, pool, a, NULL), VB_OK);
    dev->ops->pool_destroy(dev, pool);
    vb_device_close(dev);
    vb_device_close(sim);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mem_alloc_is_refused_past_the_cap),
        cmocka_unit_test(test_vm_create_is_refused_past_the_cap),
        cmocka_unit_test(test_pool_growth_past_the_cap_is_undone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
