/* vrambench — the claims: their criteria on recorded measurements, and every
 * claim measured on the simulated device for every allocator. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "app/claims.h"
#include "app/runner.h"

/* ------------------------------------------------------------------------ */
/* Recorded measurements                                                     */
/* ------------------------------------------------------------------------ */

/* A timeline sample with the same figure in every field but the one read. */
static vb_timeline_sample sample(const char *step, uint64_t requested, uint64_t allocated, uint64_t reserved,
                                 uint64_t driver_used)
{
    vb_timeline_sample s = {.requested = requested, .allocated = allocated, .reserved = reserved,
                            .driver_used = driver_used};
    strncpy(s.step, step, sizeof s.step - 1);
    return s;
}

static vb_run_counter counter(const char *name, double value)
{
    vb_run_counter c = {.value = value};
    strncpy(c.name, name, sizeof c.name - 1);
    return c;
}

/* Decides claim `id` on the given samples and counters. */
static vb_decision decide(const char *id, const vb_timeline_sample *timeline, size_t timeline_count,
                          const vb_run_counter *counters, size_t counter_count, int simulated)
{
    const vb_claim *claim = vb_claim_find(id);
    assert_non_null(claim);
    vb_measurement m = {timeline, timeline_count, counters, counter_count, simulated};
    vb_decision d;
    vb_claim_decide(claim, &m, &d);
    return d;
}

#define MiB 1048576ull

/* views: del x frees nothing while y lives, del y frees the tensor. */
static void test_views_claim_holds_when_only_del_y_frees(void **state)
{
    (void)state;
    vb_timeline_sample t[] = {sample("start", 0, 0, 0, 0), sample("x,y=x[:]", 4000000, 0, 0, 0),
                              sample("del x", 4000000, 0, 0, 0), sample("del y", 0, 0, 0, 0)};
    assert_int_equal(decide("view_keeps_storage", t, 4, NULL, 0, 1).verdict, VB_VERDICT_HOLDS);
}

/* views: if del x had freed the storage, the claim would not hold. */
static void test_views_claim_fails_when_del_x_frees(void **state)
{
    (void)state;
    vb_timeline_sample t[] = {sample("start", 0, 0, 0, 0), sample("x,y=x[:]", 4000000, 0, 0, 0),
                              sample("del x", 0, 0, 0, 0), sample("del y", 0, 0, 0, 0)};
    assert_int_equal(decide("view_keeps_storage", t, 4, NULL, 0, 1).verdict, VB_VERDICT_DOES_NOT_HOLD);
}

/* release_specific: the large tensor goes back (20 MiB drop >= 4 MB), the
 * small one does not (0 < 40,000 B): depends. */
static void test_release_specific_depends_when_only_large_goes_back(void **state)
{
    (void)state;
    vb_timeline_sample t[] = {sample("x=randn(1000,1000)", 0, 0, 0, 20 * MiB), sample("empty_cache", 0, 0, 0, 0),
                              sample("small,neighbour=randn(100,100)", 0, 0, 0, 2 * MiB),
                              sample("empty_cache (neighbour alive)", 0, 0, 0, 2 * MiB)};
    vb_run_counter c[] = {counter("large_tensor_bytes", 4000000), counter("small_tensor_bytes", 40000)};
    vb_decision d = decide("release_specific", t, 4, c, 2, 1);
    assert_int_equal(d.verdict, VB_VERDICT_DEPENDS);
    assert_true(d.number_count >= 4);
}

/* A measurement without a step the criterion needs is undecidable, and the
 * reason names the step. */
static void test_missing_step_is_undecidable_and_named(void **state)
{
    (void)state;
    vb_timeline_sample t[] = {sample("start", 0, 0, 0, 0)};
    vb_decision d = decide("view_keeps_storage", t, 1, NULL, 0, 1);
    assert_int_equal(d.verdict, VB_VERDICT_UNDECIDABLE);
    assert_non_null(strstr(d.reason, "x,y=x[:]"));
}

/* Timing claims are undecidable on the simulated device, decided on a GPU:
 * 1.5x per iteration holds (>= 1.10x), 1.05x does not. */
static void test_empty_cache_cost_is_undecidable_on_sim_and_decided_on_gpu(void **state)
{
    (void)state;
    vb_run_counter slow[] = {counter("every1_iter_ns", 1500), counter("never_iter_ns", 1000),
                             counter("every1_driver_calls", 200), counter("never_driver_calls", 2)};
    vb_run_counter close[] = {counter("every1_iter_ns", 1050), counter("never_iter_ns", 1000),
                              counter("every1_driver_calls", 200), counter("never_driver_calls", 2)};
    assert_int_equal(decide("frequent_empty_cache_costs_time", NULL, 0, slow, 4, 1).verdict, VB_VERDICT_UNDECIDABLE);
    assert_int_equal(decide("frequent_empty_cache_costs_time", NULL, 0, slow, 4, 0).verdict, VB_VERDICT_HOLDS);
    assert_int_equal(decide("frequent_empty_cache_costs_time", NULL, 0, close, 4, 0).verdict,
                     VB_VERDICT_DOES_NOT_HOLD);
}

/* The cleanup claim: undecidable on sim; on a GPU the context alone (500 MiB)
 * makes it fail; nothing left at all (<= one 2 MiB page) makes it hold. */
static void test_cleanup_claim_counts_the_context(void **state)
{
    (void)state;
    vb_run_counter context[] = {counter("residual_driver_bytes", 0), counter("residual_reserved_bytes", 0),
                                counter("context_bytes", 500.0 * MiB)};
    vb_run_counter nothing[] = {counter("residual_driver_bytes", 0), counter("residual_reserved_bytes", 0),
                                counter("context_bytes", 2.0 * MiB)};
    assert_int_equal(decide("cleanup_frees_gpu_completely", NULL, 0, context, 3, 1).verdict, VB_VERDICT_UNDECIDABLE);
    assert_int_equal(decide("cleanup_frees_gpu_completely", NULL, 0, context, 3, 0).verdict,
                     VB_VERDICT_DOES_NOT_HOLD);
    assert_int_equal(decide("cleanup_frees_gpu_completely", NULL, 0, nothing, 3, 0).verdict, VB_VERDICT_HOLDS);
}

/* Batch sweep: strictly rising holds, a tie depends, a fall does not hold. */
static void test_smaller_batch_claim_reads_the_sweep(void **state)
{
    (void)state;
    vb_run_counter rising[] = {counter("batch32_peak_reserved_bytes", 4), counter("batch256_peak_reserved_bytes", 6),
                               counter("batch2048_peak_reserved_bytes", 24),
                               counter("batch8192_peak_reserved_bytes", 72)};
    vb_run_counter tied[] = {counter("batch32_peak_reserved_bytes", 28), counter("batch256_peak_reserved_bytes", 28),
                             counter("batch2048_peak_reserved_bytes", 36),
                             counter("batch8192_peak_reserved_bytes", 86)};
    vb_run_counter falling[] = {counter("batch32_peak_reserved_bytes", 30), counter("batch256_peak_reserved_bytes", 28),
                                counter("batch2048_peak_reserved_bytes", 36),
                                counter("batch8192_peak_reserved_bytes", 86)};
    assert_int_equal(decide("smaller_batch_uses_less", NULL, 0, rising, 4, 1).verdict, VB_VERDICT_HOLDS);
    assert_int_equal(decide("smaller_batch_uses_less", NULL, 0, tied, 4, 1).verdict, VB_VERDICT_DEPENDS);
    assert_int_equal(decide("smaller_batch_uses_less", NULL, 0, falling, 4, 1).verdict, VB_VERDICT_DOES_NOT_HOLD);
}

/* OOM claim: a larger batch with empty_cache than without by more than the
 * search resolution (256 rows) holds; equal batches do not. */
static void test_oom_claim_compares_largest_batches(void **state)
{
    (void)state;
    vb_run_counter better[] = {counter("cap_bytes", 1 << 30), counter("max_batch_with_empty_cache", 40000),
                               counter("max_batch_without_empty_cache", 30000),
                               counter("peak_reserved_with_empty_cache", 1), counter("peak_reserved_without_empty_cache", 1)};
    vb_run_counter same[] = {counter("cap_bytes", 1 << 30), counter("max_batch_with_empty_cache", 30000),
                             counter("max_batch_without_empty_cache", 30000),
                             counter("peak_reserved_with_empty_cache", 1), counter("peak_reserved_without_empty_cache", 1)};
    assert_int_equal(decide("empty_cache_in_loop_avoids_oom", NULL, 0, better, 5, 1).verdict, VB_VERDICT_HOLDS);
    assert_int_equal(decide("empty_cache_in_loop_avoids_oom", NULL, 0, same, 5, 1).verdict, VB_VERDICT_DOES_NOT_HOLD);
}

/* Every catalogue entry names a registered scenario and fixes its texts. */
static void test_every_claim_names_a_scenario_and_a_criterion(void **state)
{
    (void)state;
    size_t count = 0;
    for (size_t i = 0; vb_claim_catalogue[i]; i++, count++) {
        const vb_claim *claim = vb_claim_catalogue[i];
        assert_non_null(vb_scenario_find(claim->scenario));
        assert_true(strlen(claim->claim) > 0 && strlen(claim->criterion) > 0 && strlen(claim->measurement) > 0);
        assert_ptr_equal(vb_claim_find(claim->id), claim);
    }
    assert_true(count >= 11); /* the list */
}

/* ------------------------------------------------------------------------ */
/* Every claim on the simulated device, for every allocator                  */
/* ------------------------------------------------------------------------ */

/* Runs each claim's scenario once per allocator on sim and checks that every
 * claim gets a verdict: holds / does not hold / depends, or undecidable only
 * where the criterion says the sim cannot decide it (and says why). */
static void test_every_claim_gets_a_verdict_on_sim_for_every_allocator(void **state)
{
    (void)state;
    for (size_t a = 0; vb_allocator_registry[a]; a++) {
        vb_allocator_spec spec;
        assert_int_equal(vb_allocator_spec_parse(vb_allocator_registry[a]->name, &spec), VB_OK);
        for (size_t i = 0; vb_claim_catalogue[i]; i++) {
            const vb_claim *claim = vb_claim_catalogue[i];
            vb_device *dev;
            assert_int_equal(vb_sim_open(0, &dev), VB_OK);
            vb_case one = {vb_scenario_find(claim->scenario), NULL, &spec, NULL};
            vb_runner_options options = {.repetitions = 1, .min_time_s = 0.0, .max_iterations = 1};
            vb_case_result result;
            vb_status status = vb_runner_run_case(dev, &one, &options, &result);
            if (status != VB_OK) fail_msg("%s on %s: %s", claim->scenario, spec.label, vb_last_error());
            const vb_repetition_result *rep = &result.repetitions[0];
            vb_measurement m = {rep->timeline, rep->timeline_count, rep->counters, rep->counter_count, 1};
            vb_decision d;
            vb_claim_decide(claim, &m, &d);
            if (d.verdict == VB_VERDICT_UNDECIDABLE && strstr(d.reason, "simulated device") == NULL)
                fail_msg("%s on %s: undecidable for another reason: %s", claim->id, spec.label, d.reason);
            assert_true(strlen(d.reason) > 0);
            vb_case_result_free(&result);
            vb_device_close(dev);
        }
        vb_allocator_spec_free(&spec);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_views_claim_holds_when_only_del_y_frees),
        cmocka_unit_test(test_views_claim_fails_when_del_x_frees),
        cmocka_unit_test(test_release_specific_depends_when_only_large_goes_back),
        cmocka_unit_test(test_missing_step_is_undecidable_and_named),
        cmocka_unit_test(test_empty_cache_cost_is_undecidable_on_sim_and_decided_on_gpu),
        cmocka_unit_test(test_cleanup_claim_counts_the_context),
        cmocka_unit_test(test_smaller_batch_claim_reads_the_sweep),
        cmocka_unit_test(test_oom_claim_compares_largest_batches),
        cmocka_unit_test(test_every_claim_names_a_scenario_and_a_criterion),
        cmocka_unit_test(test_every_claim_gets_a_verdict_on_sim_for_every_allocator),
    };
    return cmocka_run_group_tests_name("claims", tests, NULL, NULL);
}
