/* Tests of app/runner.c: allocator specs, Google Benchmark's statistics,
 * and the runner's rules (the memory pass: memory figures, timeline and
 * counters that do not depend on the timed iterations; fresh allocator per
 * repetition, iteration counts, segment map at peak, failures). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "app/runner.h"

/* ======================================================================== */
/* A small deterministic scenario for the runner                            */
/* ======================================================================== */

static int scenario_calls;    /* runs so far, warm-up included */
static int fail_on_call;      /* the call that returns an error (0: none) */

/* Allocates 1 MiB ("a"), then 3 MiB ("b"), queues 1 ms of work on the run's
 * stream, frees both ("end"), and reports which call this was. On the cuda
 * allocator (2 MiB driver pages): requested peaks at 4 MiB, reserved at
 * 2 + 4 = 6 MiB, two driver allocations and two frees per run. */
static vb_status two_blocks_run(vb_run *run)
{
    scenario_calls++;
    if (scenario_calls == fail_on_call) return vb_error(VB_ERR_INVALID, "planned failure");
    vb_addr small, large;
    vb_status status = vb_run_malloc(run, VB_MiB, vb_run_stream(run), &small);
    if (status == VB_OK) status = vb_run_step(run, "a");
    if (status == VB_OK) status = vb_run_malloc(run, 3 * VB_MiB, vb_run_stream(run), &large);
    if (status == VB_OK) status = vb_run_step(run, "b");
    if (status == VB_OK)
        status = vb_run_device(run)->ops->enqueue_busy(vb_run_device(run), vb_run_stream(run), 1000000);
    if (status == VB_OK) status = vb_run_free(run, small);
    if (status == VB_OK) status = vb_run_free(run, large);
    if (status == VB_OK) status = vb_run_step(run, "end");
    if (status == VB_OK) status = vb_run_set_counter(run, "call", scenario_calls);
    return status;
}

static const vb_scenario two_blocks = {.name = "two_blocks", .documents = "test", .description = "1 MiB then 3 MiB, both freed", .run = two_blocks_run};
/* The same with a memory pass of one iteration (as a trace replay has). */
static const vb_scenario two_blocks_once = {.name = "two_blocks",
                                            .documents = "test",
                                            .description = "1 MiB then 3 MiB, both freed",
                                            .run = two_blocks_run,
                                            .memory_pass_iterations = 1};

typedef struct fixture {
    vb_device *device;
    vb_allocator_spec spec;
    vb_case_result result;
} fixture;

static int setup(void **state)
{
    static fixture f;
    memset(&f, 0, sizeof f);
    scenario_calls = 0;
    fail_on_call = 0;
    if (vb_sim_open(0, &f.device) != VB_OK) return -1;
    if (vb_allocator_spec_parse("cuda", &f.spec) != VB_OK) return -1;
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    vb_case_result_free(&f->result);
    vb_allocator_spec_free(&f->spec);
    vb_device_close(f->device);
    return 0;
}

/* Runs two_blocks on cuda with `repetitions`, a minimum time and an
 * iteration cap. */
static vb_status run_two_blocks(fixture *f, unsigned repetitions, double min_time_s, uint64_t max_iterations)
{
    vb_runner_options options = {repetitions, min_time_s, max_iterations, 0};
    vb_case c = {&two_blocks, NULL, &f->spec, NULL};
    return vb_runner_run_case(f->device, &c, &options, &f->result);
}

/* ======================================================================== */
/* Allocator specs                                                          */
/* ======================================================================== */

static void test_spec_with_brackets_keeps_entries_in_label(void **state)
{
    (void)state;
    vb_allocator_spec spec;
    assert_int_equal(vb_allocator_spec_parse("cuda[b=2,a=1]", &spec), VB_OK);
    assert_string_equal(spec.label, "cuda[b=2,a=1]");
    assert_int_equal(spec.entry_count, 2);
    assert_string_equal(spec.entries[0].key, "b");
    assert_string_equal(spec.entries[0].value, "2");
    vb_allocator_spec_free(&spec);
}

static void test_spec_set_replaces_a_key_and_relabels(void **state)
{
    (void)state;
    vb_allocator_spec spec;
    assert_int_equal(vb_allocator_spec_parse("cuda[a=1]", &spec), VB_OK);
    assert_int_equal(vb_allocator_spec_set(&spec, "a", "3"), VB_OK);
    assert_int_equal(vb_allocator_spec_set(&spec, "c", "4"), VB_OK);
    assert_string_equal(spec.label, "cuda[a=3,c=4]");
    vb_allocator_spec_free(&spec);
}

static void test_malformed_specs_are_invalid(void **state)
{
    (void)state;
    static const char *const bad[] = {"cuda[", "cuda[]", "cuda[a]", "cuda[a=1]x", "[a=1]", "nope", "cuda[[a=1]]",
                                      "cuda[=1]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        vb_allocator_spec spec;
        vb_clear_error();
        assert_int_equal(vb_allocator_spec_parse(bad[i], &spec), VB_ERR_INVALID);
        assert_true(vb_last_error()[0] != '\0');
    }
}

static void test_spec_list_splits_at_top_level_commas_only(void **state)
{
    (void)state;
    vb_allocator_spec *specs;
    size_t count;
    assert_int_equal(vb_allocator_spec_list_parse("cuda[a=1,b=2],cuda", &specs, &count), VB_OK);
    assert_int_equal(count, 2);
    assert_string_equal(specs[0].label, "cuda[a=1,b=2]");
    assert_string_equal(specs[1].label, "cuda");
    vb_allocator_spec_list_free(specs, count);
}

static void test_spec_list_all_expands_and_repeats_are_kept_once(void **state)
{
    (void)state;
    size_t registered = 0;
    while (vb_allocator_registry[registered]) registered++;
    vb_allocator_spec *specs;
    size_t count;
    assert_int_equal(vb_allocator_spec_list_parse("all,cuda,all", &specs, &count), VB_OK);
    assert_int_equal(count, registered);
    vb_allocator_spec_list_free(specs, count);
}

static void test_a_spec_repeated_with_its_options_in_another_order_is_kept_once(void **state)
{
    (void)state;
    vb_allocator_spec *specs;
    size_t count;
    /* the same settings are one row; pytorch[] is asked for by another name, so it stays a row of its own */
    assert_int_equal(vb_allocator_spec_list_parse("cuda[a=1,b=2],cuda[b=2,a=1],cuda[a=1],pytorch[],caching",
                                                  &specs, &count), VB_OK);
    assert_int_equal(count, 4);
    assert_string_equal(specs[0].label, "cuda[a=1,b=2]");
    assert_string_equal(specs[1].label, "cuda[a=1]");
    assert_string_equal(specs[2].label, "pytorch[]");
    assert_string_equal(specs[3].label, "caching");
    vb_allocator_spec_list_free(specs, count);
}

static void test_spec_list_rejects_empty_items_and_open_brackets(void **state)
{
    (void)state;
    static const char *const bad[] = {"cuda,,cuda", "", "cuda[a=1", "cuda]", ",cuda"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        vb_allocator_spec *specs = NULL;
        size_t count = 0;
        assert_int_equal(vb_allocator_spec_list_parse(bad[i], &specs, &count), VB_ERR_INVALID);
    }
}

/* ======================================================================== */
/* Statistics (Google Benchmark's src/statistics.cc)                         */
/* ======================================================================== */

static void test_median_is_middle_or_mean_of_middles(void **state)
{
    (void)state;
    const double odd[] = {3, 1, 2}, even[] = {10, 1, 3, 2}, two[] = {1, 5};
    assert_true(vb_stat_median(odd, 3) == 2.0);
    assert_true(vb_stat_median(even, 4) == 2.5); /* (2 + 3) / 2 */
    assert_true(vb_stat_median(two, 2) == 3.0);  /* GB: the mean below 3 values */
}

static void test_cv_is_stddev_over_mean_and_zero_when_undefined(void **state)
{
    (void)state;
    const double values[] = {2, 4}, zeros[] = {0, 0}, one[] = {7};
    /* stddev of {2, 4} = sqrt(((2-3)^2 + (4-3)^2) / 1) = sqrt(2); mean 3 */
    assert_true(fabs(vb_stat_cv(values, 2) - sqrt(2.0) / 3.0) < 1e-12);
    assert_true(vb_stat_cv(zeros, 2) == 0.0);
    assert_true(vb_stat_cv(one, 1) == 0.0);
}

/* ======================================================================== */
/* The runner                                                               */
/* ======================================================================== */

static void test_timeline_is_iteration_one_only(void **state)
{
    fixture *f = *state;
    assert_int_equal(run_two_blocks(f, 1, 1000.0, 4), VB_OK);
    const vb_repetition_result *rep = &f->result.repetitions[0];
    assert_int_equal(rep->iterations, 4);
    assert_int_equal(rep->timeline_count, 3); /* a, b, end of iteration 1; sampling off after */
    assert_string_equal(rep->timeline[0].step, "a");
    assert_int_equal(rep->timeline[0].requested, VB_MiB);
    assert_int_equal(rep->timeline[1].requested, 4 * VB_MiB);
    assert_int_equal(rep->timeline[1].reserved, 6 * VB_MiB);
    assert_int_equal(rep->timeline[2].requested, 0);
}

static void test_each_repetition_has_a_fresh_allocator(void **state)
{
    fixture *f = *state;
    assert_int_equal(run_two_blocks(f, 3, 1000.0, 5), VB_OK);
    for (size_t i = 0; i < 3; i++) {
        /* The memory pass: 2 driver allocations per iteration, 2 iterations
         * on a fresh allocator. Counting the timed iterations (5 each) or a
         * shared allocator would give 10, 20, 30. */
        assert_true(vb_repetition_counter(&f->result.repetitions[i], "driver_alloc_calls", -1) ==
                    2.0 * VB_MEMORY_PASS_ITERATIONS);
        assert_true(vb_repetition_counter(&f->result.repetitions[i], "driver_free_calls", -1) ==
                    2.0 * VB_MEMORY_PASS_ITERATIONS);
    }
}

/* The memory figures and the timeline are the memory pass's: the same at 1
 * timed iteration and at 40 (an iteration count --min-time could give), for
 * empty_cache_loop on bfc, whose driver calls grow with every iteration run
 * (counted over the timed iterations they would differ 40-fold). */
static void test_memory_figures_do_not_depend_on_the_timed_iterations(void **state)
{
    fixture *f = *state;
    vb_allocator_spec_free(&f->spec);
    assert_int_equal(vb_allocator_spec_parse("bfc", &f->spec), VB_OK);
    vb_case c = {vb_scenario_find("empty_cache_loop"), NULL, &f->spec, NULL};
    vb_case_result few, many;
    vb_runner_options options = {1, 1000.0, 1, 0};
    assert_int_equal(vb_runner_run_case(f->device, &c, &options, &few), VB_OK);
    options.max_iterations = 40;
    assert_int_equal(vb_runner_run_case(f->device, &c, &options, &many), VB_OK);
    assert_int_equal(few.repetitions[0].iterations, 1);
    assert_int_equal(many.repetitions[0].iterations, 40);
    static const char *const memory_counters[] = {"peak_requested_bytes", "peak_allocated_bytes",
                                                  "peak_reserved_bytes", "driver_alloc_calls",
                                                  "driver_free_calls", "alloc_retries", "ooms"};
    for (size_t i = 0; i < sizeof memory_counters / sizeof *memory_counters; i++)
        assert_true(vb_repetition_counter(&few.repetitions[0], memory_counters[i], -1) ==
                    vb_repetition_counter(&many.repetitions[0], memory_counters[i], -2));
    assert_true(vb_repetition_counter(&few.repetitions[0], "peak_reserved_bytes", 0) > 0);
    assert_int_equal(few.repetitions[0].timeline_count, many.repetitions[0].timeline_count);
    assert_true(few.repetitions[0].timeline_count > 0);
    for (size_t i = 0; i < few.repetitions[0].timeline_count; i++) {
        const vb_timeline_sample *a = &few.repetitions[0].timeline[i], *b = &many.repetitions[0].timeline[i];
        assert_string_equal(a->step, b->step);
        assert_int_equal(a->requested, b->requested);
        assert_int_equal(a->allocated, b->allocated);
        assert_int_equal(a->reserved, b->reserved);
    }
    assert_int_equal(few.segment_block_count, many.segment_block_count);
    vb_case_result_free(&few);
    vb_case_result_free(&many);
}

static void test_later_repetitions_reuse_the_first_iteration_count(void **state)
{
    fixture *f = *state;
    assert_int_equal(run_two_blocks(f, 3, 1000.0, 7), VB_OK);
    assert_int_equal(f->result.repetition_count, 3);
    for (size_t i = 0; i < 3; i++) assert_int_equal(f->result.repetitions[i].iterations, 7);
}

static void test_zero_min_time_runs_one_iteration(void **state)
{
    fixture *f = *state;
    assert_int_equal(run_two_blocks(f, 2, 0.0, 1000), VB_OK);
    assert_int_equal(f->result.repetitions[0].iterations, 1);
    assert_int_equal(f->result.repetitions[1].iterations, 1);
}

static void test_memory_counters_follow_the_allocator_stats(void **state)
{
    fixture *f = *state;
    assert_int_equal(run_two_blocks(f, 1, 0.0, 1), VB_OK);
    const vb_repetition_result *rep = &f->result.repetitions[0];
    assert_true(vb_repetition_counter(rep, "peak_requested_bytes", -1) == (double)(4 * VB_MiB));
    assert_true(vb_repetition_counter(rep, "peak_reserved_bytes", -1) == (double)(6 * VB_MiB));
    assert_true(vb_repetition_counter(rep, "overhead_ratio", -1) == 1.5); /* 6 MiB / 4 MiB */
    assert_true(vb_repetition_counter(rep, "ooms", -1) == 0.0);
}

static void test_scenario_counters_come_from_iteration_one(void **state)
{
    fixture *f = *state;
    /* Calls: the memory pass's iterations 1 and 2, then the timed ones. */
    assert_int_equal(run_two_blocks(f, 1, 1000.0, 3), VB_OK);
    assert_true(vb_repetition_counter(&f->result.repetitions[0], "call", -1) == 1.0);
}

/* A scenario that declares a one-iteration memory pass: one call before the
 * timed ones, and its driver calls are one iteration's (2). */
static void test_a_scenario_may_declare_its_memory_pass_iterations(void **state)
{
    fixture *f = *state;
    vb_runner_options options = {1, 1000.0, 3, 0};
    vb_case c = {&two_blocks_once, NULL, &f->spec, NULL};
    assert_int_equal(vb_runner_run_case(f->device, &c, &options, &f->result), VB_OK);
    assert_int_equal(scenario_calls, 1 + 3);
    assert_true(vb_repetition_counter(&f->result.repetitions[0], "driver_alloc_calls", -1) == 2.0);
}

static void test_memory_pass_runs_once_before_the_repetitions(void **state)
{
    fixture *f = *state;
    assert_int_equal(run_two_blocks(f, 2, 1000.0, 3), VB_OK);
    assert_int_equal(scenario_calls, VB_MEMORY_PASS_ITERATIONS + 2 * 3);
}

static void test_gpu_time_is_the_sim_clock_of_the_run_stream(void **state)
{
    fixture *f = *state;
    assert_int_equal(run_two_blocks(f, 1, 0.0, 1), VB_OK);
    /* The scenario queues 1 ms of work on the run's stream. */
    assert_true(f->result.repetitions[0].gpu_time_ns == 1e6);
}

static void test_segments_at_peak_are_the_map_when_reserved_peaked(void **state)
{
    fixture *f = *state;
    assert_int_equal(run_two_blocks(f, 1, 0.0, 1), VB_OK);
    assert_true(f->result.has_segments);
    /* Peak reserved came with the 3 MiB malloc: both blocks live, each its
     * own 2 and 4 MiB driver segment. */
    assert_int_equal(f->result.segment_block_count, 2);
    uint64_t sizes = f->result.segments_at_peak[0].segment_size + f->result.segments_at_peak[1].segment_size;
    assert_int_equal(sizes, 6 * VB_MiB);
    assert_true(f->result.segments_at_peak[0].allocated && f->result.segments_at_peak[1].allocated);
}

/* A peak that keeps rising, with frees between the rises and after the
 * last: 40 rounds of three small blocks (a 2 MiB small segment each time
 * the cache runs dry) and one 12 MiB block, every other round freeing the
 * round's first block and every third round's big one; then all freed. */
static vb_status staircase_run(vb_run *run)
{
    vb_addr kept[160];
    size_t count = 0;
    vb_status status = VB_OK;
    for (int round = 0; round < 40 && status == VB_OK; round++) {
        vb_addr first = 0, big = 0, block = 0;
        status = vb_run_malloc(run, 700 * 1024, vb_run_stream(run), &first);
        for (int i = 0; i < 2 && status == VB_OK; i++) {
            status = vb_run_malloc(run, (uint64_t)(300 + 100 * i) * 1024, vb_run_stream(run), &block);
            kept[count++] = block;
        }
        if (status == VB_OK) status = vb_run_malloc(run, 12 * VB_MiB, vb_run_stream(run), &big);
        if (status == VB_OK && round % 2) status = vb_run_free(run, first);
        else kept[count++] = first;
        if (status == VB_OK && round % 3 == 0) status = vb_run_free(run, big);
        else kept[count++] = big;
    }
    for (size_t i = 0; i < count && status == VB_OK; i++) status = vb_run_free(run, kept[count - 1 - i]);
    return status;
}

static const vb_scenario staircase = {.name = "staircase", .documents = "test",
                                      .description = "a peak that keeps rising", .run = staircase_run};

/* A run made by hand: caching on a fresh sim device. */
typedef struct hand_run {
    vb_device *dev;
    vb_allocator *allocator;
    vb_run *run;
} hand_run;

static hand_run hand_run_open(void)
{
    hand_run h = {NULL, NULL, NULL};
    assert_int_equal(vb_sim_open(0, &h.dev), VB_OK);
    assert_int_equal(vb_allocator_create("caching", h.dev, NULL, &h.allocator), VB_OK);
    assert_int_equal(vb_run_create(h.dev, h.allocator, NULL, &h.run), VB_OK);
    return h;
}

static void hand_run_close(hand_run *h)
{
    vb_run_destroy(h->run);
    vb_allocator_destroy(h->allocator);
    vb_device_close(h->dev);
}

/* The runner takes the map lazily on sim (a counting pass and a forked
 * twin that walks once, at the last peak's call): it must be the map of a
 * run that walks at every peak, block for block. */
static void test_lazy_segment_map_is_the_map_of_walking_every_peak(void **state)
{
    fixture *f = *state;
    vb_allocator_spec_free(&f->spec);
    assert_int_equal(vb_allocator_spec_parse("caching", &f->spec), VB_OK);
    vb_runner_options options = {1, 0.0, 1, 0};
    vb_case c = {&staircase, NULL, &f->spec, NULL};
    assert_int_equal(vb_runner_run_case(f->device, &c, &options, &f->result), VB_OK);

    /* The same memory pass by hand on a fresh device, walking at every peak. */
    hand_run h = hand_run_open();
    vb_run *run = h.run;
    vb_run_set_segment_capture(run, 1);
    for (unsigned i = 0; i < VB_MEMORY_PASS_ITERATIONS; i++) assert_int_equal(staircase_run(run), VB_OK);
    size_t count = 0;
    const vb_block_info *blocks = vb_run_segments_at_peak(run, &count);
    assert_true(count > 40);
    assert_int_equal(f->result.segment_block_count, count);
    for (size_t i = 0; i < count; i++) {
        const vb_peak_block *lazy = &f->result.segments_at_peak[i];
        assert_int_equal(lazy->segment, blocks[i].segment);
        assert_int_equal(lazy->segment_size, blocks[i].segment_size);
        assert_int_equal(lazy->block, blocks[i].block);
        assert_int_equal(lazy->block_size, blocks[i].block_size);
        assert_int_equal(lazy->allocated, blocks[i].allocated);
    }
    hand_run_close(&h);
}

/* Counting finds the call of the last peak; a run told that call takes its
 * one snapshot there only when its calls so far match (the fingerprint),
 * so a twin that went another way gives no map rather than a wrong one. */
static void test_capture_at_a_call_checks_the_fingerprint(void **state)
{
    (void)state;
    uint64_t call = 0, fingerprint = 0;
    for (int attempt = 0; attempt < 3; attempt++) {
        hand_run h = hand_run_open();
        vb_run *run = h.run;
        if (attempt == 0) vb_run_count_peak_calls(run);
        else vb_run_capture_at_call(run, call, attempt == 1 ? fingerprint : fingerprint + 1);
        assert_int_equal(staircase_run(run), VB_OK);
        size_t count = 0;
        vb_run_segments_at_peak(run, &count);
        if (attempt == 0) {
            call = vb_run_last_peak_call(run, &fingerprint);
            assert_true(call > 1);
            assert_int_equal(count, 0); /* counting walks nothing */
        } else {
            assert_int_equal(vb_run_captured_at_call(run), attempt == 1);
            assert_true(attempt == 1 ? count > 0 : count == 0);
        }
        hand_run_close(&h);
    }
}

static void test_names_carry_scenario_parameter_and_allocator_label(void **state)
{
    fixture *f = *state;
    vb_allocator_spec_free(&f->spec);
    assert_int_equal(vb_allocator_spec_parse("cuda", &f->spec), VB_OK);
    vb_runner_options options = {1, 0.0, 1, 0};
    vb_case c = {&two_blocks, "p1", &f->spec, NULL};
    assert_int_equal(vb_runner_run_case(f->device, &c, &options, &f->result), VB_OK);
    assert_string_equal(f->result.name, "two_blocks:p1/cuda");
    assert_string_equal(f->result.scenario, "two_blocks:p1");
}

static void test_a_failing_scenario_fails_the_case_with_its_name(void **state)
{
    fixture *f = *state;
    fail_on_call = 4; /* the memory pass's 2, timed iteration 1, then timed iteration 2 fails */
    assert_int_equal(run_two_blocks(f, 1, 1000.0, 5), VB_ERR_INVALID);
    assert_non_null(strstr(vb_last_error(), "two_blocks/cuda: planned failure"));
    assert_int_equal(f->result.repetition_count, 0);
    assert_null(f->result.repetitions);
}

static void test_random_mix_ends_with_nothing_requested(void **state)
{
    fixture *f = *state;
    vb_runner_options options = {1, 0.0, 1, 0};
    vb_case c = {vb_scenario_find("random_mix"), "allocations=200,max_size_mb=8", &f->spec, NULL};
    assert_int_equal(vb_runner_run_case(f->device, &c, &options, &f->result), VB_OK);
    const vb_repetition_result *rep = &f->result.repetitions[0];
    assert_string_equal(rep->timeline[rep->timeline_count - 1].step, "end");
    assert_int_equal(rep->timeline[rep->timeline_count - 1].requested, 0);
    /* RMM's count: every allocation is made (nothing runs out on 80 GiB). */
    assert_true(vb_repetition_counter(rep, "allocations_made", -1) == 200.0);
}

static void test_random_mix_keeps_live_memory_under_the_cap(void **state)
{
    fixture *f = *state;
    vb_runner_options options = {1, 0.0, 1, 0};
    vb_case c = {vb_scenario_find("random_mix"), "allocations=500,max_size_mb=8,max_usage_mb=32", &f->spec, NULL};
    assert_int_equal(vb_runner_run_case(f->device, &c, &options, &f->result), VB_OK);
    assert_true(vb_repetition_counter(&f->result.repetitions[0], "peak_requested_bytes", -1) < 32.0 * VB_MiB);
}

static void test_random_mix_is_deterministic_for_a_seed(void **state)
{
    fixture *f = *state;
    vb_runner_options options = {2, 0.0, 1, 0};
    vb_case c = {vb_scenario_find("random_mix"), "allocations=300,seed=7", &f->spec, NULL};
    assert_int_equal(vb_runner_run_case(f->device, &c, &options, &f->result), VB_OK);
    assert_true(vb_repetition_counter(&f->result.repetitions[0], "peak_requested_bytes", -1) ==
                vb_repetition_counter(&f->result.repetitions[1], "peak_requested_bytes", -2));
}

static void test_random_mix_rejects_an_unknown_parameter(void **state)
{
    fixture *f = *state;
    vb_runner_options options = {1, 0.0, 1, 0};
    vb_case c = {vb_scenario_find("random_mix"), "sizes=3", &f->spec, NULL};
    assert_int_equal(vb_runner_run_case(f->device, &c, &options, &f->result), VB_ERR_INVALID);
    assert_non_null(strstr(vb_last_error(), "unknown parameter 'sizes'"));
}

/* A scenario across devices is skipped on a machine of one device, with the
 * reason; on the sim's default machine of two it runs. */
static void test_a_scenario_across_devices_is_skipped_on_one_device_with_the_reason(void **state)
{
    (void)state;
    const vb_scenario *scenario = vb_scenario_find("pipeline_step");
    char why[128];
    vb_device *one = NULL, *two = NULL;
    assert_int_equal(vb_sim_open(0, &one), VB_OK);
    assert_string_equal(vb_runner_skip_reason(one, scenario, why, sizeof why),
                        "it runs across 2 devices and this machine has 1");
    assert_null(vb_runner_skip_reason(one, vb_scenario_find("views"), why, sizeof why));
    assert_int_equal(vb_device_open("sim", NULL, &two), VB_OK);
    assert_null(vb_runner_skip_reason(two, scenario, why, sizeof why));
    vb_device_close(one);
    vb_device_close(two);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spec_with_brackets_keeps_entries_in_label),
        cmocka_unit_test(test_spec_set_replaces_a_key_and_relabels),
        cmocka_unit_test(test_malformed_specs_are_invalid),
        cmocka_unit_test(test_spec_list_splits_at_top_level_commas_only),
        cmocka_unit_test(test_spec_list_all_expands_and_repeats_are_kept_once),
        cmocka_unit_test(test_a_spec_repeated_with_its_options_in_another_order_is_kept_once),
        cmocka_unit_test(test_spec_list_rejects_empty_items_and_open_brackets),
        cmocka_unit_test(test_median_is_middle_or_mean_of_middles),
        cmocka_unit_test(test_cv_is_stddev_over_mean_and_zero_when_undefined),
        cmocka_unit_test(test_a_scenario_across_devices_is_skipped_on_one_device_with_the_reason),
        cmocka_unit_test_setup_teardown(test_timeline_is_iteration_one_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_each_repetition_has_a_fresh_allocator, setup, teardown),
        cmocka_unit_test_setup_teardown(test_later_repetitions_reuse_the_first_iteration_count, setup, teardown),
        cmocka_unit_test_setup_teardown(test_zero_min_time_runs_one_iteration, setup, teardown),
        cmocka_unit_test_setup_teardown(test_memory_counters_follow_the_allocator_stats, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scenario_counters_come_from_iteration_one, setup, teardown),
        cmocka_unit_test_setup_teardown(test_memory_pass_runs_once_before_the_repetitions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_scenario_may_declare_its_memory_pass_iterations, setup, teardown),
        cmocka_unit_test_setup_teardown(test_memory_figures_do_not_depend_on_the_timed_iterations, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gpu_time_is_the_sim_clock_of_the_run_stream, setup, teardown),
        cmocka_unit_test_setup_teardown(test_segments_at_peak_are_the_map_when_reserved_peaked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lazy_segment_map_is_the_map_of_walking_every_peak, setup, teardown),
        cmocka_unit_test(test_capture_at_a_call_checks_the_fingerprint),
        cmocka_unit_test_setup_teardown(test_names_carry_scenario_parameter_and_allocator_label, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_failing_scenario_fails_the_case_with_its_name, setup, teardown),
        cmocka_unit_test_setup_teardown(test_random_mix_ends_with_nothing_requested, setup, teardown),
        cmocka_unit_test_setup_teardown(test_random_mix_keeps_live_memory_under_the_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_random_mix_is_deterministic_for_a_seed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_random_mix_rejects_an_unknown_parameter, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
