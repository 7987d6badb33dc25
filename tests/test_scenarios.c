/* vrambench — the scenarios on the sim, against every registered allocator.
 *
 * Each test builds a sim device (device 0 of the sim's default machine of
 * two devices, so the scenarios across devices run too), an allocator from
 * vb_allocator_registry (so every strategy merged later is covered), and a
 * run, calls the scenario's run directly and reads the timeline and
 * counters it left. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "scenarios/scenario.h"

/* A scenario run on one allocator, kept open so its results can be read. */
typedef struct scenario_run {
    vb_device *dev;
    vb_allocator *allocator;
    vb_run *run;
    vb_status status;
} scenario_run;

/* Runs scenario `scenario_name` on allocator `allocator_name` on a sim of
 * `capacity` bytes (0 = the default 80 GiB). */
static scenario_run run_scenario(const char *scenario_name, const char *allocator_name, uint64_t capacity)
{
    scenario_run r;
    const vb_scenario *scenario = vb_scenario_find(scenario_name);
    assert_non_null(scenario);
    vb_device_options options = {.sim_capacity_bytes = capacity};
    assert_int_equal(vb_device_open("sim", &options, &r.dev), VB_OK);
    assert_int_equal(vb_allocator_create(allocator_name, r.dev, NULL, &r.allocator), VB_OK);
    assert_int_equal(vb_run_create(r.dev, r.allocator, NULL, &r.run), VB_OK);
    r.status = scenario->run(r.run);
    if (r.status != VB_OK)
        print_error("%s on %s: %s: %s\n", scenario_name, allocator_name, vb_status_name(r.status), vb_last_error());
    return r;
}

static void close_run(scenario_run *r)
{
    vb_run_destroy(r->run);
    vb_allocator_destroy(r->allocator);
    vb_device_close(r->dev);
}

/* The sample taken at step `step` (the first of that name); fails if none. */
static const vb_timeline_sample *sample_at(const scenario_run *r, const char *step)
{
    size_t count;
    const vb_timeline_sample *timeline = vb_run_timeline(r->run, &count);
    for (size_t i = 0; i < count; i++)
        if (strcmp(timeline[i].step, step) == 0) return &timeline[i];
    print_error("no step '%s' in the timeline\n", step);
    fail();
    return NULL;
}

/* The counter `name`; fails if the scenario did not set it. */
static double counter(const scenario_run *r, const char *name)
{
    size_t count;
    const vb_run_counter *counters = vb_run_counters(r->run, &count);
    for (size_t i = 0; i < count; i++)
        if (strcmp(counters[i].name, name) == 0) return counters[i].value;
    print_error("no counter '%s'\n", name);
    fail();
    return 0.0;
}

static uint64_t requested_now(const scenario_run *r)
{
    vb_alloc_stats stats;
    vb_allocator_stats(r->allocator, &stats);
    return stats.requested_bytes;
}

/* The scenarios that follow the documents' code examples and report an
 * out-of-memory as data (the out_of_memory counter); the claim scenarios and
 * random_mix have their own conventions. */
static const char *const example_scenarios[] = {
    "views", "function_scope", "async_matmul", "holder_refs", "training_cleanup",
    "no_grad_inference", "dataloader_batches", "empty_cache_loop", NULL,
};

/* ------------------------------------------------------------------------ */
/* Every scenario, every allocator                                           */
/* ------------------------------------------------------------------------ */

static void test_every_scenario_runs_on_every_allocator(void **state)
{
    (void)state;
    for (size_t a = 0; vb_allocator_registry[a]; a++)
        for (size_t s = 0; vb_scenario_registry[s]; s++) {
            scenario_run r = run_scenario(vb_scenario_registry[s]->name, vb_allocator_registry[a]->name, 0);
            assert_int_equal(r.status, VB_OK);
            close_run(&r);
        }
}

/* Every tensor a scenario allocates is released by its end. */
static void test_every_scenario_releases_all_it_allocated(void **state)
{
    (void)state;
    for (size_t a = 0; vb_allocator_registry[a]; a++)
        for (size_t s = 0; vb_scenario_registry[s]; s++) {
            scenario_run r = run_scenario(vb_scenario_registry[s]->name, vb_allocator_registry[a]->name, 0);
            assert_int_equal(requested_now(&r), 0);
            close_run(&r);
        }
}

/* On the 80 GiB default none of the examples runs out of memory. */
static void test_no_example_runs_out_of_memory_on_the_default_device(void **state)
{
    (void)state;
    for (size_t a = 0; vb_allocator_registry[a]; a++)
        for (size_t s = 0; example_scenarios[s]; s++) {
            scenario_run r = run_scenario(example_scenarios[s], vb_allocator_registry[a]->name, 0);
            assert_true(counter(&r, "out_of_memory") == 0.0);
            close_run(&r);
        }
}

/* On a 16 MiB device most examples cannot finish: each still returns VB_OK
 * (the OOM is data) and holds nothing afterwards. */
static void test_every_example_treats_oom_as_data_on_a_small_device(void **state)
{
    (void)state;
    for (size_t a = 0; vb_allocator_registry[a]; a++)
        for (size_t s = 0; example_scenarios[s]; s++) {
            scenario_run r = run_scenario(example_scenarios[s], vb_allocator_registry[a]->name, 16 * VB_MiB);
            assert_int_equal(r.status, VB_OK);
            assert_int_equal(requested_now(&r), 0);
            close_run(&r);
        }
}

/* async_matmul's first 400,000,000-byte matrix cannot fit in 16 MiB: the
 * scenario says so in its out_of_memory counter. */
static void test_async_matmul_reports_out_of_memory_on_a_small_device(void **state)
{
    (void)state;
    for (size_t a = 0; vb_allocator_registry[a]; a++) {
        scenario_run r = run_scenario("async_matmul", vb_allocator_registry[a]->name, 16 * VB_MiB);
        assert_true(counter(&r, "out_of_memory") == 1.0);
        close_run(&r);
    }
}

/* ------------------------------------------------------------------------ */
/* views and function_scope                                                  */
/* ------------------------------------------------------------------------ */

/* y = x[:] still references the storage: `del x` changes nothing requested. */
static void test_views_requested_unchanged_at_del_x(void **state)
{
    (void)state;
    for (size_t a = 0; vb_allocator_registry[a]; a++) {
        scenario_run r = run_scenario("views", vb_allocator_registry[a]->name, 0);
        assert_int_equal(sample_at(&r, "del x")->requested, sample_at(&r, "x,y=x[:]")->requested);
        close_run(&r);
    }
}

/* `del y` drops the last reference: the 1000 x 1000 x 4 = 4,000,000 bytes go. */
static void test_views_requested_drops_at_del_y(void **state)
{
    (void)state;
    for (size_t a = 0; vb_allocator_registry[a]; a++) {
        scenario_run r = run_scenario("views", vb_allocator_registry[a]->name, 0);
        assert_int_equal(sample_at(&r, "x,y=x[:]")->requested - sample_at(&r, "del y")->requested, 4000000);
        close_run(&r);
    }
}

/* Once `result` is released, requested bytes are where they started, after
 * having risen (to 3 x 4,000,000 + 8 at "c = a + b"). */
static void test_function_scope_returns_to_its_starting_requested_bytes(void **state)
{
    (void)state;
    for (size_t a = 0; vb_allocator_registry[a]; a++) {
        scenario_run r = run_scenario("function_scope", vb_allocator_registry[a]->name, 0);
        size_t count;
        const vb_timeline_sample *timeline = vb_run_timeline(r.run, &count);
        assert_true(count >= 2);
        assert_int_equal(sample_at(&r, "c = a + b")->requested - timeline[0].requested, 12000008);
        assert_int_equal(timeline[count - 1].requested, timeline[0].requested);
        close_run(&r);
    }
}

/* ------------------------------------------------------------------------ */
/* holder_refs, training_cleanup, no_grad_inference                          */
/* ------------------------------------------------------------------------ */

/* y = self.tensor * 2 does not reference self.tensor: `tensor_holder = None`
 * frees the holder's 10000 x 10000 x 4 = 400,000,000 bytes. */
static void test_holder_refs_holder_none_frees_the_holders_tensor(void **state)
{
    (void)state;
    for (size_t a = 0; vb_allocator_registry[a]; a++) {
        scenario_run r = run_scenario("holder_refs", vb_allocator_registry[a]->name, 0);
        assert_true(counter(&r, "freed_at_holder_none_bytes") == 400000000.0);
        close_run(&r);
    }
}

/* The optimizer holds the model's parameters: `del model` frees nothing. */
static void test_training_cleanup_del_model_alone_frees_nothing(void **state)
{
    (void)state;
    for (size_t a = 0; vb_allocator_registry[a]; a++) {
        scenario_run r = run_scenario("training_cleanup", vb_allocator_registry[a]->name, 0);
        assert_true(counter(&r, "freed_at_del_model_bytes") == 0.0);
        close_run(&r);
    }
}

/* A loader holds its dataset: `del train_dataset` frees nothing, `del
 * train_loader` frees the 16384 x 1024 x 4 data and 16384 x 8 labels
 * (67,108,864 + 131,072 = 67,239,936 bytes). */
static void test_training_cleanup_dataset_goes_with_its_loader(void **state)
{
    (void)state;
    for (size_t a = 0; vb_allocator_registry[a]; a++) {
        scenario_run r = run_scenario("training_cleanup", vb_allocator_registry[a]->name, 0);
        assert_int_equal(sample_at(&r, "del train_dataset")->requested, sample_at(&r, "empty_cache")->requested);
        assert_int_equal(sample_at(&r, "del test_dataset")->requested - sample_at(&r, "del train_loader")->requested,
                         67239936);
        close_run(&r);
    }
}

/* Under no_grad the forward holds at most two 4096 x 4096 fp32 activations
 * at once (a layer's output and its ReLU): 2 x 67,108,864 = 134,217,728
 * bytes above the model and input. */
static void test_no_grad_forward_holds_two_activations_at_most(void **state)
{
    (void)state;
    for (size_t a = 0; vb_allocator_registry[a]; a++) {
        scenario_run r = run_scenario("no_grad_inference", vb_allocator_registry[a]->name, 0);
        assert_true(counter(&r, "no_grad_extra_peak_bytes") == 134217728.0);
        close_run(&r);
    }
}

/* The training step keeps its activations for backward and makes grads: its
 * extra peak is above the no_grad forward's. */
static void test_training_step_peaks_above_no_grad_forward(void **state)
{
    (void)state;
    for (size_t a = 0; vb_allocator_registry[a]; a++) {
        scenario_run r = run_scenario("no_grad_inference", vb_allocator_registry[a]->name, 0);
        assert_true(counter(&r, "train_extra_peak_bytes") > counter(&r, "no_grad_extra_peak_bytes"));
        close_run(&r);
    }
}

/* ------------------------------------------------------------------------ */
/* dataloader_batches and the run's peaks                                    */
/* ------------------------------------------------------------------------ */

/* Peak requested grows with the batch size: 32 < 256 < 2048 < 8192. */
static void test_dataloader_peak_requested_grows_with_batch_size(void **state)
{
    (void)state;
    for (size_t a = 0; vb_allocator_registry[a]; a++) {
        scenario_run r = run_scenario("dataloader_batches", vb_allocator_registry[a]->name, 0);
        assert_true(counter(&r, "batch32_peak_requested_bytes") < counter(&r, "batch256_peak_requested_bytes"));
        assert_true(counter(&r, "batch256_peak_requested_bytes") < counter(&r, "batch2048_peak_requested_bytes"));
        assert_true(counter(&r, "batch2048_peak_requested_bytes") < counter(&r, "batch8192_peak_requested_bytes"));
        close_run(&r);
    }
}

/* The run's peak spans the phase resets: it is the largest batch's peak
 * (batch 8192), not only the last window's. */
static void test_run_peak_requested_spans_phase_resets(void **state)
{
    (void)state;
    for (size_t a = 0; vb_allocator_registry[a]; a++) {
        scenario_run r = run_scenario("dataloader_batches", vb_allocator_registry[a]->name, 0);
        vb_run_peaks peaks;
        vb_run_get_peaks(r.run, &peaks);
        assert_true((double)peaks.requested == counter(&r, "batch8192_peak_requested_bytes"));
        close_run(&r);
    }
}

/* A window with a 10 MiB peak, then a reset and a 1 MiB window: the
 * allocator's peak is 1 MiB, the run's stays 10 MiB. */
static void test_run_peaks_survive_a_reset(void **state)
{
    (void)state;
    vb_device *dev;
    vb_allocator *allocator;
    vb_run *run;
    vb_addr addr;
    assert_int_equal(vb_sim_open(0, &dev), VB_OK);
    assert_int_equal(vb_allocator_create("cuda", dev, NULL, &allocator), VB_OK);
    assert_int_equal(vb_run_create(dev, allocator, NULL, &run), VB_OK);
    assert_int_equal(vb_run_malloc(run, 10 * VB_MiB, vb_run_stream(run), &addr), VB_OK);
    assert_int_equal(vb_run_free(run, addr), VB_OK);
    vb_run_reset_peaks(run);
    assert_int_equal(vb_run_malloc(run, VB_MiB, vb_run_stream(run), &addr), VB_OK);
    assert_int_equal(vb_run_free(run, addr), VB_OK);
    vb_alloc_stats stats;
    vb_allocator_stats(allocator, &stats);
    vb_run_peaks peaks;
    vb_run_get_peaks(run, &peaks);
    assert_int_equal(stats.requested_bytes_peak, VB_MiB);
    assert_int_equal(peaks.requested, 10 * VB_MiB);
    vb_run_destroy(run);
    vb_allocator_destroy(allocator);
    vb_device_close(dev);
}

/* ------------------------------------------------------------------------ */
/* empty_cache_loop                                                          */
/* ------------------------------------------------------------------------ */

/* 1 if `allocator_name` keeps freed memory across a synchronize (as the
 * loop's .item() does) and empty_cache gives some of it back: then emptying
 * the cache every iteration must cost driver calls. */
static int caches_what_empty_cache_releases(const char *allocator_name)
{
    vb_device *dev;
    vb_allocator *allocator;
    vb_stream stream;
    vb_addr addr;
    assert_int_equal(vb_sim_open(0, &dev), VB_OK);
    assert_int_equal(vb_allocator_create(allocator_name, dev, NULL, &allocator), VB_OK);
    assert_int_equal(dev->ops->stream_create(dev, &stream), VB_OK);
    assert_int_equal(vb_malloc(allocator, 100 * 100 * 4, stream, &addr), VB_OK);
    assert_int_equal(vb_free(allocator, addr), VB_OK);
    assert_int_equal(dev->ops->stream_synchronize(dev, stream), VB_OK);
    vb_alloc_stats cached, emptied;
    vb_allocator_stats(allocator, &cached);
    assert_int_equal(vb_empty_cache(allocator), VB_OK);
    vb_allocator_stats(allocator, &emptied);
    vb_allocator_destroy(allocator);
    dev->ops->stream_destroy(dev, stream);
    vb_device_close(dev);
    return cached.reserved_bytes > 0 && emptied.reserved_bytes < cached.reserved_bytes;
}

/* With a cache, empty_cache every iteration means new driver allocations
 * every iteration (at least in 004's loop, which holds nothing between
 * iterations): more driver calls over the scenario than never emptying.
 * Without one (cuda: every free is already a driver free) the counts are
 * equal. */
static void test_empty_cache_every_iteration_costs_driver_calls_when_cached(void **state)
{
    (void)state;
    for (size_t a = 0; vb_allocator_registry[a]; a++) {
        const char *name = vb_allocator_registry[a]->name;
        int cached = caches_what_empty_cache_releases(name);
        scenario_run r = run_scenario("empty_cache_loop", name, 0);
        double every1 = counter(&r, "every1_driver_calls"), never = counter(&r, "never_driver_calls");
        print_message("%s: %s; driver calls every1 %.0f, never %.0f\n", name,
                      cached ? "caches (expect every1 > never)" : "no cache (expect every1 == never)", every1, never);
        if (cached)
            assert_true(every1 > never);
        else
            assert_true(every1 == never);
        close_run(&r);
    }
}

/* cuda has no cache: the three variants make the same driver calls. */
static void test_cuda_driver_calls_do_not_depend_on_empty_cache(void **state)
{
    (void)state;
    scenario_run r = run_scenario("empty_cache_loop", "cuda", 0);
    assert_true(counter(&r, "every1_driver_calls") == counter(&r, "never_driver_calls"));
    assert_true(counter(&r, "every10_driver_calls") == counter(&r, "never_driver_calls"));
    close_run(&r);
}

/* ------------------------------------------------------------------------ */
/* Scenarios across devices                                                  */
/* ------------------------------------------------------------------------ */

static const char *const device_scenarios[] = {"pipeline_step", "data_parallel_step", NULL};

/* Each runs on both devices of the machine, the other device through its
 * own instance of the strategy, and leaves nothing requested on either. */
static void test_scenarios_across_devices_use_both_devices_and_release_all(void **state)
{
    (void)state;
    for (size_t a = 0; vb_allocator_registry[a]; a++)
        for (size_t s = 0; device_scenarios[s]; s++) {
            scenario_run r = run_scenario(device_scenarios[s], vb_allocator_registry[a]->name, 0);
            assert_int_equal(r.status, VB_OK);
            assert_true(counter(&r, "devices") == 2.0);
            assert_true(counter(&r, "peer_peak_requested_bytes") > 0.0);
            assert_true(counter(&r, "peer_peak_reserved_bytes") >= counter(&r, "peer_peak_requested_bytes"));
            assert_true(counter(&r, "peer_requested_bytes_end") == 0.0);
            assert_int_equal(requested_now(&r), 0);
            close_run(&r);
        }
}

/* On a machine of one device they do not run (`vrambench run` skips them
 * with a note): the error says what is missing. */
static void test_scenarios_across_devices_need_two_devices(void **state)
{
    (void)state;
    for (size_t s = 0; device_scenarios[s]; s++) {
        vb_device *dev = NULL;
        vb_allocator *allocator = NULL;
        vb_run *run = NULL;
        assert_int_equal(vb_sim_open(0, &dev), VB_OK);
        assert_int_equal(vb_allocator_create("caching", dev, NULL, &allocator), VB_OK);
        assert_int_equal(vb_run_create(dev, allocator, NULL, &run), VB_OK);
        assert_int_equal(vb_scenario_find(device_scenarios[s])->run(run), VB_ERR_UNSUPPORTED);
        assert_non_null(strstr(vb_last_error(), "needs 2 devices, and this machine has 1"));
        vb_run_destroy(run);
        vb_allocator_destroy(allocator);
        vb_device_close(dev);
    }
}

/* pipeline_step deletes each activation it sends on where it was made: after
 * the forward of its 4 microbatches, device 0 holds exactly stage 0's weights
 * (1024 x 2048 and 2048 x 2048 fp32) and what autograd saved per microbatch
 * (the input, 512 x 1024, and the ReLU's output, 512 x 2048), not the
 * outputs (512 x 2048 each) it sent to device 1. */
static void test_pipeline_step_frees_activations_on_the_device_that_sent_them(void **state)
{
    (void)state;
    const uint64_t weights = (1024 * 2048 + 2048 * 2048) * 4, saved = (512 * 1024 + 512 * 2048) * 4;
    for (size_t a = 0; vb_allocator_registry[a]; a++) {
        scenario_run r = run_scenario("pipeline_step", vb_allocator_registry[a]->name, 0);
        assert_int_equal(sample_at(&r, "forward of every microbatch (activations sent on)")->requested,
                         weights + 4 * saved);
        close_run(&r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_scenario_runs_on_every_allocator),
        cmocka_unit_test(test_every_scenario_releases_all_it_allocated),
        cmocka_unit_test(test_no_example_runs_out_of_memory_on_the_default_device),
        cmocka_unit_test(test_every_example_treats_oom_as_data_on_a_small_device),
        cmocka_unit_test(test_async_matmul_reports_out_of_memory_on_a_small_device),
        cmocka_unit_test(test_views_requested_unchanged_at_del_x),
        cmocka_unit_test(test_views_requested_drops_at_del_y),
        cmocka_unit_test(test_function_scope_returns_to_its_starting_requested_bytes),
        cmocka_unit_test(test_holder_refs_holder_none_frees_the_holders_tensor),
        cmocka_unit_test(test_training_cleanup_del_model_alone_frees_nothing),
        cmocka_unit_test(test_training_cleanup_dataset_goes_with_its_loader),
        cmocka_unit_test(test_no_grad_forward_holds_two_activations_at_most),
        cmocka_unit_test(test_training_step_peaks_above_no_grad_forward),
        cmocka_unit_test(test_dataloader_peak_requested_grows_with_batch_size),
        cmocka_unit_test(test_run_peak_requested_spans_phase_resets),
        cmocka_unit_test(test_run_peaks_survive_a_reset),
        cmocka_unit_test(test_empty_cache_every_iteration_costs_driver_calls_when_cached),
        cmocka_unit_test(test_cuda_driver_calls_do_not_depend_on_empty_cache),
        cmocka_unit_test(test_scenarios_across_devices_use_both_devices_and_release_all),
        cmocka_unit_test(test_scenarios_across_devices_need_two_devices),
        cmocka_unit_test(test_pipeline_step_frees_activations_on_the_device_that_sent_them),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
