/* vrambench — fidelity of `caching` against real PyTorch.
 *
 * tests/fixtures/traces/NAME.trace.gz are allocation traces of real training
 * loops recorded with PyTorch's own CUDACachingAllocator on an NVIDIA H200
 * (tools/record_torch_traces.py, torch 2.11.0+cu130), and NAME.json holds
 * what PyTorch's memory_stats() reported for the same run. Replaying a trace
 * with `caching` on the simulated device must give the same requested peak
 * (the trace is faithful) and a reserved peak within 2% of PyTorch's (the
 * policy is). Tests are run from the repository root (make test). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>

#include "app/replay.h"
#include "app/runner.h"

#define FIXTURES "tests/fixtures/traces/"

/* PyTorch's figure `key` from the fixture's "peaks" object. */
static double pytorch_peak(const char *workload, const char *key)
{
    char path[256];
    snprintf(path, sizeof path, FIXTURES "%s.json", workload);
    json_error_t error;
    json_t *root = json_load_file(path, 0, &error);
    if (!root) fail_msg("cannot read %s: %s", path, error.text);
    json_t *value = json_object_get(json_object_get(root, "peaks"), key);
    if (!json_is_number(value)) fail_msg("%s has no peaks.%s", path, key);
    double number = json_number_value(value);
    json_decref(root);
    return number;
}

/* Replays the workload's trace with `caching` on a sim as large as the H200
 * it was recorded on; its peak requested and reserved bytes. */
static void replayed(const char *workload, double *requested, double *reserved)
{
    char path[256];
    snprintf(path, sizeof path, FIXTURES "%s.trace.gz", workload);
    vb_device *dev;
    vb_allocator_spec spec;
    vb_case_result result;
    assert_int_equal(vb_sim_open((uint64_t)pytorch_peak(workload, "device_total_bytes"), &dev), VB_OK);
    assert_int_equal(vb_allocator_spec_parse("caching", &spec), VB_OK);
    vb_case one = {&vb_replay_scenario, path, &spec, NULL};
    vb_runner_options options = {.repetitions = 1, .min_time_s = 0.0, .max_iterations = 1};
    vb_status status = vb_runner_run_case(dev, &one, &options, &result);
    if (status != VB_OK) fail_msg("replay of %s failed: %s", path, vb_last_error());
    *requested = vb_repetition_counter(&result.repetitions[0], "peak_requested_bytes", NAN);
    *reserved = vb_repetition_counter(&result.repetitions[0], "peak_reserved_bytes", NAN);
    vb_case_result_free(&result);
    vb_allocator_spec_free(&spec);
    vb_device_close(dev);
}

/* Checks one workload: requested peak equal, reserved peak within 2%. */
static void check_workload(const char *workload)
{
    double ours_requested, ours_reserved;
    replayed(workload, &ours_requested, &ours_reserved);
    double theirs_requested = pytorch_peak(workload, "requested_bytes.all.peak");
    double theirs_reserved = pytorch_peak(workload, "reserved_bytes.all.peak");
    print_message("%s: peak reserved %.0f (PyTorch %.0f, %+.3f%%), peak requested %.0f (PyTorch %.0f)\n", workload,
                  ours_reserved, theirs_reserved, 100.0 * (ours_reserved - theirs_reserved) / theirs_reserved,
                  ours_requested, theirs_requested);
    assert_true(ours_requested == theirs_requested);
    assert_true(fabs(ours_reserved - theirs_reserved) <= 0.02 * theirs_reserved);
}

static void test_resnet50_peak_reserved_within_2_percent_of_pytorch(void **state)
{
    (void)state;
    check_workload("resnet50");
}

static void test_gpt2_peak_reserved_within_2_percent_of_pytorch(void **state)
{
    (void)state;
    check_workload("gpt2");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resnet50_peak_reserved_within_2_percent_of_pytorch),
        cmocka_unit_test(test_gpt2_peak_reserved_within_2_percent_of_pytorch),
    };
    return cmocka_run_group_tests_name("fidelity: caching vs PyTorch 2.11 on an H200", tests, NULL, NULL);
}
