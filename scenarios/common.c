/* vrambench — helpers every scenario file uses (see common.h). */
#include "common.h"

const vb_name vb_scenario_common_steps[] = {
    [VB_STEP_START] = {"start", "start"},
    [VB_STEP_OUT_OF_MEMORY] = {"out_of_memory", "out of memory"},
    {NULL, NULL},
};

const char *const vb_scenario_common_counters[] = {VB_COUNTER_OUT_OF_MEMORY, NULL};

vb_status vb_scenario_begin(vb_run *run)
{
    vb_status status = vb_run_set_counter(run, VB_COUNTER_OUT_OF_MEMORY, 0);
    if (status == VB_OK) status = vb_run_step(run, vb_scenario_common_steps[VB_STEP_START].text);
    return status;
}

vb_status vb_scenario_outcome(vb_run *run, vb_status status)
{
    if (status != VB_ERR_OOM) return status;
    status = vb_run_step(run, vb_scenario_common_steps[VB_STEP_OUT_OF_MEMORY].text);
    vb_keep_first(&status, vb_run_set_counter(run, VB_COUNTER_OUT_OF_MEMORY, 1));
    return status;
}

vb_status vb_scenario_synchronize(vb_run *run)
{
    vb_device *dev = vb_run_device(run);
    return dev->ops->stream_synchronize(dev, vb_run_stream(run));
}

vb_alloc_stats vb_scenario_stats(vb_run *run)
{
    vb_alloc_stats stats;
    vb_allocator_stats(vb_run_allocator(run), &stats);
    return stats;
}

uint64_t vb_scenario_driver_calls(vb_run *run)
{
    vb_alloc_stats stats = vb_scenario_stats(run);
    return stats.driver_alloc_calls + stats.driver_free_calls;
}
