/* vrambench — what the scenario files share: the start and end of a run
 * (an expected out-of-memory is data, not an error), synchronization, and
 * keeping the first error while cleaning up. */
#ifndef VB_SCENARIO_COMMON_H
#define VB_SCENARIO_COMMON_H

#include "runtime/tensor.h"
#include "scenario.h"


/* Keeps the first failure: *status becomes `next` only while it is VB_OK. */
static inline void vb_keep_first(vb_status *status, vb_status next)
{
    if (*status == VB_OK) *status = next;
}

/* Starts a scenario: sets out_of_memory to 0 and samples the step "start"
 * (the baseline every later step is read against). */
vb_status vb_scenario_begin(vb_run *run);

/* Turns a scenario's status into its result. VB_ERR_OOM is what a device too
 * small for the scenario gives: it samples the step "out of memory", sets
 * out_of_memory to 1 and returns VB_OK so the run is reported as data. Call
 * it before releasing what is held, so the sample shows the memory at the
 * failure. Any other status is returned as it is. */
vb_status vb_scenario_outcome(vb_run *run, vb_status status);

/* torch.cuda.synchronize() for the run's stream: waits for its work. */
vb_status vb_scenario_synchronize(vb_run *run);

/* The allocator's statistics now. */
vb_alloc_stats vb_scenario_stats(vb_run *run);

/* Driver calls (allocations plus frees) the allocator has made so far. */
uint64_t vb_scenario_driver_calls(vb_run *run);

/* ---- scenarios across devices (scenario.h, min_devices) ---- */

/* The most devices a scenario across devices uses (the first ones). */
#define VB_SCENARIO_MAX_DEVICES 16

/* The counters of a scenario across devices, its `counters` table: the
 * devices it ran on; the largest peak requested and reserved bytes among
 * the devices other than the run's own (each device's allocator is the
 * strategy's own instance, as the plug-in's one per device); and the
 * requested bytes left on those devices at the end, summed (0 when it
 * released all it allocated). The run's own device has the usual figures. */
enum { VB_DEVICE_COUNTER_DEVICES, VB_DEVICE_COUNTER_PEER_PEAK_REQUESTED, VB_DEVICE_COUNTER_PEER_PEAK_RESERVED,
       VB_DEVICE_COUNTER_PEER_REQUESTED_END };
extern const char *const vb_scenario_device_counters[];

/* The runs of the devices of the run's machine, by ordinal (at most
 * VB_SCENARIO_MAX_DEVICES): the run itself at its own ordinal, vb_run_peer's
 * elsewhere. VB_ERR_UNSUPPORTED with a message when the machine has fewer
 * than `needed`. */
vb_status vb_scenario_device_runs(vb_run *run, int needed, vb_run **runs, int *count);

/* Waits for the work on every stream of each of the `count` devices. */
vb_status vb_scenario_synchronize_devices(vb_run *const *runs, int count);

/* Sets vb_scenario_device_counters from the devices' allocators. */
vb_status vb_scenario_report_devices(vb_run *run, vb_run *const *runs, int count);

#endif
