/* vrambench — the registered scenarios, in the order users see them.
 * To add one: write scenarios/NAME.c defining `const vb_scenario
 * vb_NAME_scenario`, declare it here and put it in the table. */
#include <stdio.h>
#include <string.h>

#include "scenario.h"

extern const vb_scenario vb_views_scenario;
extern const vb_scenario vb_function_scope_scenario;
extern const vb_scenario vb_async_matmul_scenario;
extern const vb_scenario vb_holder_refs_scenario;
extern const vb_scenario vb_training_cleanup_scenario;
extern const vb_scenario vb_no_grad_inference_scenario;
extern const vb_scenario vb_dataloader_batches_scenario;
extern const vb_scenario vb_empty_cache_loop_scenario;
extern const vb_scenario vb_release_specific_scenario;
extern const vb_scenario vb_reuse_after_del_scenario;
extern const vb_scenario vb_leak_loop_scenario;
extern const vb_scenario vb_capped_training_scenario;
extern const vb_scenario vb_random_mix_scenario;
extern const vb_scenario vb_pipeline_step_scenario;
extern const vb_scenario vb_data_parallel_step_scenario;

const vb_scenario *const vb_scenario_registry[] = {
    &vb_views_scenario,
    &vb_function_scope_scenario,
    &vb_async_matmul_scenario,
    &vb_holder_refs_scenario,
    &vb_training_cleanup_scenario,
    &vb_no_grad_inference_scenario,
    &vb_dataloader_batches_scenario,
    &vb_empty_cache_loop_scenario,
    &vb_release_specific_scenario,
    &vb_reuse_after_del_scenario,
    &vb_leak_loop_scenario,
    &vb_capped_training_scenario,
    &vb_random_mix_scenario,
    &vb_pipeline_step_scenario,
    &vb_data_parallel_step_scenario,
    NULL,
};

const vb_scenario *vb_scenario_find(const char *name)
{
    for (size_t i = 0; vb_scenario_registry[i]; i++)
        if (strcmp(vb_scenario_registry[i]->name, name) == 0) return vb_scenario_registry[i];
    return NULL;
}

const char *vb_scenario_step(const vb_scenario *scenario, const char *key)
{
    for (const vb_name *step = scenario->steps; step && step->key; step++)
        if (strcmp(step->key, key) == 0) return step->text;
    for (const vb_name *step = scenario->shared_steps; step && step->key; step++)
        if (strcmp(step->key, key) == 0) return step->text;
    for (const vb_name *step = vb_scenario_common_steps; step->key; step++)
        if (strcmp(step->key, key) == 0) return step->text;
    return NULL;
}

void vb_scenario_family_counter(const vb_counter_family *family, const vb_family_member *member, char *out,
                                size_t capacity)
{
    snprintf(out, capacity, family->pattern, member->name);
}
