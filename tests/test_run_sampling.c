/* vrambench — tests of the run's latency sampling, of putting an earlier
 * sample into its timeline and of its extra streams (runtime/run.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "scenarios/scenario.h"

typedef struct fixture {
    vb_device *dev;
    vb_allocator *allocator;
    vb_run *run;
} fixture;

static int set_up(void **state)
{
    static fixture f;
    if (vb_sim_open(0, &f.dev) != VB_OK || vb_allocator_create("cuda", f.dev, NULL, &f.allocator) != VB_OK ||
        vb_run_create(f.dev, f.allocator, NULL, &f.run) != VB_OK)
        return -1;
    *state = &f;
    return 0;
}

static int tear_down(void **state)
{
    fixture *f = *state;
    vb_run_destroy(f->run);
    vb_allocator_destroy(f->allocator);
    vb_device_close(f->dev);
    return 0;
}

/* Makes `pairs` malloc+free pairs through the run. */
static void pairs_through_run(vb_run *run, int pairs)
{
    for (int i = 0; i < pairs; i++) {
        vb_addr addr;
        assert_int_equal(vb_run_malloc(run, 4096, vb_run_stream(run), &addr), VB_OK);
        assert_int_equal(vb_run_free(run, addr), VB_OK);
    }
}

static void test_every_call_is_timed_by_default(void **state)
{
    fixture *f = *state;
    pairs_through_run(f->run, 100);
    assert_int_equal(vb_run_malloc_ns(f->run)->count, 100);
    assert_int_equal(vb_run_free_ns(f->run)->count, 100);
}

static void test_sampling_zero_times_no_call(void **state)
{
    fixture *f = *state;
    vb_run_set_latency_sampling(f->run, 0);
    pairs_through_run(f->run, 100);
    assert_int_equal(vb_run_malloc_ns(f->run)->count, 0);
}

static void test_sampling_every_8_times_about_one_call_in_8(void **state)
{
    /* Strides are drawn from [4, 12): 8000 calls give between 8000/12 and
     * 8000/4 + 1 timed ones. */
    fixture *f = *state;
    vb_run_set_latency_sampling(f->run, 8);
    pairs_through_run(f->run, 8000);
    size_t timed = vb_run_malloc_ns(f->run)->count;
    assert_true(timed >= 8000 / 12 && timed <= 8000 / 4 + 1);
}

static void test_sampled_calls_still_allocate(void **state)
{
    fixture *f = *state;
    vb_run_set_latency_sampling(f->run, 0);
    vb_addr addr = 0;
    assert_int_equal(vb_run_malloc(f->run, 1000, vb_run_stream(f->run), &addr), VB_OK);
    vb_alloc_stats stats;
    vb_allocator_stats(f->allocator, &stats);
    assert_int_equal(stats.requested_bytes, 1000);
    assert_int_equal(vb_run_free(f->run, addr), VB_OK);
}

static void test_inserted_sample_lands_at_its_position(void **state)
{
    fixture *f = *state;
    assert_int_equal(vb_run_step(f->run, "first"), VB_OK);
    assert_int_equal(vb_run_step(f->run, "third"), VB_OK);
    vb_timeline_sample sample = {.step = "second", .reserved = 42};
    assert_int_equal(vb_run_insert_sample(f->run, 1, &sample), VB_OK);
    size_t count;
    const vb_timeline_sample *timeline = vb_run_timeline(f->run, &count);
    assert_int_equal(count, 3);
    assert_string_equal(timeline[0].step, "first");
    assert_string_equal(timeline[1].step, "second");
    assert_string_equal(timeline[2].step, "third");
    assert_int_equal(timeline[1].reserved, 42);
}

static void test_insert_past_the_end_appends(void **state)
{
    fixture *f = *state;
    assert_int_equal(vb_run_step(f->run, "first"), VB_OK);
    vb_timeline_sample sample = {.step = "last"};
    assert_int_equal(vb_run_insert_sample(f->run, 99, &sample), VB_OK);
    size_t count;
    const vb_timeline_sample *timeline = vb_run_timeline(f->run, &count);
    assert_int_equal(count, 2);
    assert_string_equal(timeline[1].step, "last");
}

static void test_extra_stream_zero_is_the_run_stream(void **state)
{
    fixture *f = *state;
    vb_stream stream = NULL;
    assert_int_equal(vb_run_extra_stream(f->run, 0, &stream), VB_OK);
    assert_ptr_equal(stream, vb_run_stream(f->run));
}

static void test_extra_stream_is_the_same_on_every_call(void **state)
{
    fixture *f = *state;
    vb_stream first = NULL, again = NULL;
    assert_int_equal(vb_run_extra_stream(f->run, 3, &first), VB_OK);
    assert_int_equal(vb_run_extra_stream(f->run, 3, &again), VB_OK);
    assert_ptr_equal(first, again);
}

static void test_extra_streams_differ_by_index(void **state)
{
    fixture *f = *state;
    vb_stream one = NULL, two = NULL;
    assert_int_equal(vb_run_extra_stream(f->run, 1, &one), VB_OK);
    assert_int_equal(vb_run_extra_stream(f->run, 2, &two), VB_OK);
    assert_ptr_not_equal(one, two);
    assert_ptr_not_equal(one, vb_run_stream(f->run));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_every_call_is_timed_by_default, set_up, tear_down),
        cmocka_unit_test_setup_teardown(test_sampling_zero_times_no_call, set_up, tear_down),
        cmocka_unit_test_setup_teardown(test_sampling_every_8_times_about_one_call_in_8, set_up, tear_down),
        cmocka_unit_test_setup_teardown(test_sampled_calls_still_allocate, set_up, tear_down),
        cmocka_unit_test_setup_teardown(test_inserted_sample_lands_at_its_position, set_up, tear_down),
        cmocka_unit_test_setup_teardown(test_insert_past_the_end_appends, set_up, tear_down),
        cmocka_unit_test_setup_teardown(test_extra_stream_zero_is_the_run_stream, set_up, tear_down),
        cmocka_unit_test_setup_teardown(test_extra_stream_is_the_same_on_every_call, set_up, tear_down),
        cmocka_unit_test_setup_teardown(test_extra_streams_differ_by_index, set_up, tear_down),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
