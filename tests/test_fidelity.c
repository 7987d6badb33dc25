/* vrambench — fidelity of `caching` against real PyTorch.
 *
 * tests/fixtures/traces/ (resnet50, gpt2: recorded on an NVIDIA H200) and
 * tests/fixtures/torch/ (bert_amp, resnet18_varres, two_stream,
 * generate_short: on an NVIDIA H100) hold allocation traces of real
 * training and inference loops recorded with PyTorch's own
 * CUDACachingAllocator (lab/harnesses/record_torch_traces.py, torch
 * 2.11.0+cu130), and NAME.json what PyTorch's memory_stats() reported for
 * the same run. Replaying a trace with `caching` on the simulated device
 * must give the same requested peak (the trace is faithful) and the same
 * reserved peak to the byte (the policy is, down to its best-fit
 * tie-break by address, which follows the driver's address order:
 * base/device_sim_memory.c). Tests are run from the repository root (make
 * test). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>

#include "alloc_fixture.h"


/* PyTorch's figure `key` from the fixture's "peaks" object, or from its top
 * level where the recorder put it there (`workload`: the fixture's path
 * without .json). */
static double pytorch_peak(const char *workload, const char *key)
{
    char path[256];
    snprintf(path, sizeof path, "%s.json", workload);
    json_error_t error;
    json_t *root = json_load_file(path, 0, &error);
    if (!root) fail_msg("cannot read %s: %s", path, error.text);
    json_t *value = json_object_get(json_object_get(root, "peaks"), key);
    if (!value) value = json_object_get(root, key);
    if (!json_is_number(value)) fail_msg("%s has no peaks.%s", path, key);
    double number = json_number_value(value);
    json_decref(root);
    return number;
}

/* Replays the workload's trace with `caching` on a sim as large as the GPU
 * it was recorded on; its peak requested and reserved bytes. */
static void replayed(const char *workload, double *requested, double *reserved)
{
    char path[256];
    snprintf(path, sizeof path, "%s.trace.gz", workload);
    vb_fixture_replay_peaks(path, "caching", (uint64_t)pytorch_peak(workload, "device_total_bytes"), requested,
                            reserved);
}

/* Checks one workload: requested and reserved peaks equal PyTorch's. */
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
    assert_true(ours_reserved == theirs_reserved);
}

static void test_resnet50_peak_reserved_is_pytorchs(void **state)
{
    (void)state;
    check_workload("tests/fixtures/traces/resnet50");
}

static void test_gpt2_peak_reserved_is_pytorchs(void **state)
{
    (void)state;
    check_workload("tests/fixtures/traces/gpt2");
}

/* Many distinct sizes (dynamic padding, mixed precision). */
static void test_bert_amp_peak_reserved_is_pytorchs(void **state)
{
    (void)state;
    check_workload("tests/fixtures/torch/bert_amp");
}

/* Many equal-sized segments: the best-fit tie-break by address decides. */
static void test_resnet18_varres_peak_reserved_is_pytorchs(void **state)
{
    (void)state;
    check_workload("tests/fixtures/torch/resnet18_varres");
}

/* Two streams, blocks freed at free_completed after record_stream. */
static void test_two_stream_peak_reserved_is_pytorchs(void **state)
{
    (void)state;
    check_workload("tests/fixtures/torch/two_stream");
}

/* Small requests peaking while the large ones are low (a generate() loop's
 * key/value cache at batch sizes 2 to 8). */
static void test_generate_short_peak_reserved_is_pytorchs(void **state)
{
    (void)state;
    check_workload("tests/fixtures/torch/generate_short");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resnet50_peak_reserved_is_pytorchs),
        cmocka_unit_test(test_gpt2_peak_reserved_is_pytorchs),
        cmocka_unit_test(test_bert_amp_peak_reserved_is_pytorchs),
        cmocka_unit_test(test_resnet18_varres_peak_reserved_is_pytorchs),
        cmocka_unit_test(test_two_stream_peak_reserved_is_pytorchs),
        cmocka_unit_test(test_generate_short_peak_reserved_is_pytorchs),
    };
    return cmocka_run_group_tests_name("fidelity: caching vs PyTorch 2.11 (H200, H100)", tests, NULL, NULL);
}
