/* vrambench — cases re-run on the simulated device as a library (sim_rerun.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"
#include "sim_rerun.h"
#include "text.h"

/* Opens a sim device of `capacity_bytes` (0: the default). */
static vb_status open_sim(uint64_t capacity_bytes, vb_device **device)
{
    vb_device_options options = {.sim_capacity_bytes = capacity_bytes};
    return vb_device_open("sim", &options, device);
}

/* vb_allocator_spec_list_check, with no external library loaded: an
 * external: spec is refused first. */
static vb_status check_specs(vb_device *device, const vb_allocator_spec *specs, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (strncmp(specs[i].name, VB_EXTERNAL_PREFIX, strlen(VB_EXTERNAL_PREFIX)) == 0)
            return vb_error(VB_ERR_INVALID, "%s runs on the cuda device only, not on the simulated one",
                            specs[i].label);
    return vb_allocator_spec_list_check(device, specs, count);
}

void vb_sim_rerun_cases_free(vb_case_result *results, size_t count)
{
    for (size_t i = 0; results && i < count; i++) vb_case_result_free(&results[i]);
    free(results);
}

vb_status vb_sim_rerun_cases(const vb_sim_rerun *request, vb_case_result **results, size_t *count)
{
    *results = NULL;
    *count = 0;
    size_t rows = request->trace ? 1 : request->scenario_count;
    for (size_t s = 0; !request->trace && s < rows; s++)
        if (!vb_scenario_find(request->scenarios[s]))
            return vb_error(VB_ERR_INVALID, "unknown scenario '%s'", request->scenarios[s]);
    char label[256] = "";
    if (request->trace) {
        const char *slash = strrchr(request->trace, '/');
        snprintf(label, sizeof label, "replay:%s", slash ? slash + 1 : request->trace);
        vb_text_sanitize(label, 1); /* as `replay` labels it: a file name need not be UTF-8 */
    }
    vb_device *device = NULL;
    vb_status status = open_sim(request->capacity_bytes, &device);
    if (status == VB_OK) status = check_specs(device, request->specs, request->spec_count);
    vb_case_result *out = status == VB_OK ? calloc(rows * request->spec_count + 1, sizeof *out) : NULL;
    if (status == VB_OK && !out) status = vb_error(VB_ERR_HOST_OOM, "out of host memory");
    vb_runner_options options = {.repetitions = 1, .min_time_s = 0.0, .max_iterations = 1};
    size_t done = 0;
    for (size_t s = 0; s < rows && status == VB_OK; s++)
        for (size_t a = 0; a < request->spec_count && status == VB_OK; a++) {
            vb_case c = request->trace ? (vb_case){&vb_replay_scenario, request->trace, &request->specs[a], label}
                                       : (vb_case){vb_scenario_find(request->scenarios[s]), NULL,
                                                   &request->specs[a], NULL};
            status = vb_runner_run_case(device, &c, &options, &out[done]);
            if (status == VB_OK) done++;
        }
    vb_device_close(device);
    if (status != VB_OK) {
        vb_sim_rerun_cases_free(out, done);
        return status;
    }
    *results = out;
    *count = done;
    return VB_OK;
}

vb_status vb_sim_rerun_claims(const vb_allocator_spec *specs, size_t spec_count, vb_decision **decisions,
                              size_t *claim_count)
{
    size_t claims = 0;
    while (vb_claim_catalogue[claims]) claims++;
    *decisions = NULL;
    *claim_count = claims;
    vb_device *device = NULL;
    vb_status status = open_sim(0, &device);
    if (status == VB_OK) status = check_specs(device, specs, spec_count);
    vb_decision *out = status == VB_OK ? calloc(spec_count * claims + 1, sizeof *out) : NULL;
    if (status == VB_OK && !out) status = vb_error(VB_ERR_HOST_OOM, "out of host memory");
    for (size_t a = 0; a < spec_count && status == VB_OK; a++)
        for (size_t i = 0; i < claims && status == VB_OK; i++) {
            /* Each scenario runs once; its run decides every claim it measures. */
            size_t first = 0;
            while (strcmp(vb_claim_catalogue[first]->scenario, vb_claim_catalogue[i]->scenario) != 0) first++;
            if (first < i) continue;
            const vb_scenario *scenario = vb_scenario_find(vb_claim_catalogue[i]->scenario);
            status = scenario ? vb_claims_measure(device, scenario, &specs[a], vb_claim_catalogue, claims,
                                                  out + a * claims)
                              : vb_error(VB_ERR_UNSUPPORTED, "claim %s names scenario '%s', which is not built in",
                                         vb_claim_catalogue[i]->id, vb_claim_catalogue[i]->scenario);
        }
    vb_device_close(device);
    if (status != VB_OK) {
        free(out);
        return status;
    }
    *decisions = out;
    return VB_OK;
}
