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

/* ------------------------------------------------------------------------ */
/* Scenarios across devices                                                  */
/* ------------------------------------------------------------------------ */

const char *const vb_scenario_device_counters[] = {
    [VB_DEVICE_COUNTER_DEVICES] = "devices",
    [VB_DEVICE_COUNTER_PEER_PEAK_REQUESTED] = "peer_peak_requested_bytes",
    [VB_DEVICE_COUNTER_PEER_PEAK_RESERVED] = "peer_peak_reserved_bytes",
    [VB_DEVICE_COUNTER_PEER_REQUESTED_END] = "peer_requested_bytes_end",
    NULL,
};

vb_status vb_scenario_device_runs(vb_run *run, int needed, vb_run **runs, int *count)
{
    int devices = vb_run_device_count(run), own = vb_run_ordinal(run);
    if (devices < needed)
        return vb_error(VB_ERR_UNSUPPORTED, "needs %d devices, and this machine has %d", needed, devices);
    if (devices > VB_SCENARIO_MAX_DEVICES) devices = VB_SCENARIO_MAX_DEVICES;
    for (int k = 0; k < devices; k++) {
        runs[k] = run;
        if (k != own) VB_TRY(vb_run_peer(run, k, &runs[k]));
    }
    *count = devices;
    return VB_OK;
}

vb_status vb_scenario_synchronize_devices(vb_run *const *runs, int count)
{
    vb_status status = VB_OK;
    for (int k = 0; k < count; k++) {
        vb_device *dev = vb_run_device(runs[k]);
        vb_keep_first(&status, dev->ops->device_synchronize(dev));
    }
    return status;
}

vb_status vb_scenario_report_devices(vb_run *run, vb_run *const *runs, int count)
{
    uint64_t peak_requested = 0, peak_reserved = 0, requested_end = 0;
    for (int k = 0; k < count; k++) {
        if (runs[k] == run) continue;
        vb_alloc_stats stats = vb_scenario_stats(runs[k]);
        if (stats.requested_bytes_peak > peak_requested) peak_requested = stats.requested_bytes_peak;
        if (stats.reserved_bytes_peak > peak_reserved) peak_reserved = stats.reserved_bytes_peak;
        requested_end += stats.requested_bytes;
    }
    const char *const *names = vb_scenario_device_counters;
    vb_status status = vb_run_set_counter(run, names[VB_DEVICE_COUNTER_DEVICES], count);
    vb_keep_first(&status, vb_run_set_counter(run, names[VB_DEVICE_COUNTER_PEER_PEAK_REQUESTED], (double)peak_requested));
    vb_keep_first(&status, vb_run_set_counter(run, names[VB_DEVICE_COUNTER_PEER_PEAK_RESERVED], (double)peak_reserved));
    vb_keep_first(&status, vb_run_set_counter(run, names[VB_DEVICE_COUNTER_PEER_REQUESTED_END], (double)requested_end));
    return status;
}
