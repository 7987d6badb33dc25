/* vrambench — OOM on a truly full GPU (lab/gpu-session.sh, stage fullgpu).
 *
 *   build/fullgpu [--scenario NAME] [--allocator NAME[,NAME]]
 *
 * For each allocator strategy (default: every registered one):
 *   1. the driver's used memory (cudaMemGetInfo) is taken as the baseline;
 *   2. the device is filled to its last MiB from outside the allocator:
 *      cudaMalloc in a loop, 1 GiB blocks, then halves down to 1 MiB;
 *   3. one scenario runs through the runner, as `vrambench run --device
 *      cuda` runs it: its status must be out of memory (VB_ERR_OOM, or its
 *      out_of_memory counter at 1), not a crash and not any other error;
 *   4. an allocator of the strategy is created while the device is full and
 *      asked for 64 MiB: out of memory again;
 *   5. the filler is freed: the same allocator must now serve 64 MiB (a
 *      usable allocator after an OOM), free it and empty its cache;
 *   6. after destroy, the driver's used memory must be back at the baseline
 *      within 2 MiB.
 * Prints one table row per strategy; exits 1 when any check fails, 2 on bad
 * usage, 3 when the device cannot be filled (no CUDA device). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "allocators/allocator.h"
#include "app/runner.h"
#include "base/device.h"
#include "scenarios/scenario.h"

#define MiB (1024ull * 1024ull)
#define PROBE_BYTES (64 * MiB)
#define BASELINE_TOLERANCE (2 * MiB)

/* The filler: every cudaMalloc'd block, to be freed again. */
typedef struct filler {
    void **blocks;
    size_t count, capacity;
    uint64_t bytes;
} filler;

/* cudaMalloc until not even 1 MiB more fits; 0, or -1 on host OOM. */
static int fill_device(filler *f)
{
    for (uint64_t chunk = 1024 * MiB; chunk >= MiB; chunk /= 2) {
        for (;;) {
            void *block = NULL;
            if (cudaMalloc(&block, chunk) != cudaSuccess) {
                cudaGetLastError(); /* out of memory is not sticky: clear it */
                break;
            }
            if (f->count == f->capacity) {
                size_t capacity = f->capacity ? f->capacity * 2 : 256;
                void **grown = realloc(f->blocks, capacity * sizeof *grown);
                if (!grown) {
                    cudaFree(block);
                    return -1;
                }
                f->blocks = grown;
                f->capacity = capacity;
            }
            f->blocks[f->count++] = block;
            f->bytes += chunk;
        }
    }
    return 0;
}

/* Frees every filler block. */
static void release_device(filler *f)
{
    for (size_t i = 0; i < f->count; i++) cudaFree(f->blocks[i]);
    free(f->blocks);
    *f = (filler){0};
}

/* Free device memory now, by the driver. */
static uint64_t free_bytes(void)
{
    size_t free_now = 0, total = 0;
    cudaMemGetInfo(&free_now, &total);
    return free_now;
}

/* One strategy's checks; prints its row and returns 1 when all passed. */
static int check_strategy(vb_device *dev, const char *name, const vb_scenario *scenario)
{
    const char *scenario_result = "-", *oom_result = "-", *after_result = "-";
    int passed = 1;
    uint64_t baseline = vb_device_used_bytes(dev);
    filler f = {0};
    if (fill_device(&f) != 0) {
        release_device(&f);
        printf("| %-10s | host out of memory while filling |\n", name);
        return 0;
    }
    uint64_t left = free_bytes(), filled = f.bytes;

    /* 3: a scenario through the runner, as `vrambench run` runs it. */
    vb_allocator_spec spec;
    vb_case_result result;
    vb_status status = vb_allocator_spec_parse(name, &spec);
    if (status == VB_OK) {
        vb_case c = {scenario, NULL, &spec, NULL};
        vb_runner_options options = vb_runner_default_options();
        options.min_time_s = 0;
        options.max_iterations = 1;
        memset(&result, 0, sizeof result);
        status = vb_runner_run_case(dev, &c, &options, &result);
        /* A scenario that handles OOM itself (scenarios/common.c) ends well
         * with its out_of_memory counter at 1: that is the OOM status too. */
        if (status == VB_OK && result.repetition_count > 0 &&
            vb_repetition_counter(&result.repetitions[0], VB_COUNTER_OUT_OF_MEMORY, 0) >= 1)
            status = VB_ERR_OOM;
        if (status == VB_OK || status == VB_ERR_OOM) vb_case_result_free(&result);
        vb_allocator_spec_free(&spec);
    }
    scenario_result = status == VB_ERR_OOM ? "OOM" : status == VB_OK ? "ran (no OOM)" : vb_status_name(status);
    if (status != VB_ERR_OOM) {
        passed = 0;
        fprintf(stderr, "fullgpu: %s: %s: %s\n", name, scenario->name, status == VB_OK ? "no OOM" : vb_last_error());
    }

    /* 4 and 5: one allocator, out of memory while full, usable after. */
    vb_allocator *allocator = NULL;
    status = vb_allocator_create(name, dev, NULL, &allocator);
    if (status == VB_OK) {
        vb_addr addr = 0;
        status = vb_malloc(allocator, PROBE_BYTES, NULL, &addr);
        oom_result = status == VB_ERR_OOM ? "OOM" : status == VB_OK ? "served" : vb_status_name(status);
        if (status == VB_OK) vb_free(allocator, addr);
        if (status != VB_ERR_OOM) passed = 0;
        release_device(&f);
        status = vb_malloc(allocator, PROBE_BYTES, NULL, &addr);
        after_result = status == VB_OK ? "usable" : vb_status_name(status);
        if (status == VB_OK) status = vb_free(allocator, addr);
        if (status == VB_OK) status = vb_empty_cache(allocator);
        if (status != VB_OK) passed = 0;
        vb_allocator_destroy(allocator);
    } else {
        oom_result = "create failed";
        fprintf(stderr, "fullgpu: %s: creating it on a full device: %s\n", name, vb_last_error());
        passed = 0;
        release_device(&f);
    }
    release_device(&f);

    /* 6: the driver's used memory back at the baseline. */
    cudaDeviceSynchronize();
    uint64_t used = vb_device_used_bytes(dev);
    double delta_mib = ((double)used - (double)baseline) / (double)MiB;
    if ((used > baseline ? used - baseline : baseline - used) > BASELINE_TOLERANCE) passed = 0;
    printf("| %-10s | %9.0f | %7.2f | %-14s | %-13s | %-10s | %+10.2f | %-4s |\n", name,
           (double)filled / (double)MiB, (double)left / (double)MiB, scenario_result, oom_result, after_result,
           delta_mib, passed ? "ok" : "FAIL");
    fflush(stdout);
    return passed;
}

int main(int argc, char **argv)
{
    const char *scenario_name = "reuse_after_del", *allocators = NULL;
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 < argc && strcmp(argv[i], "--scenario") == 0) scenario_name = argv[i + 1];
        else if (i + 1 < argc && strcmp(argv[i], "--allocator") == 0) allocators = argv[i + 1];
        else {
            fprintf(stderr, "usage: fullgpu [--scenario NAME] [--allocator NAME[,NAME]]\n");
            return 2;
        }
    }
    const vb_scenario *scenario = vb_scenario_find(scenario_name);
    if (!scenario) {
        fprintf(stderr, "fullgpu: unknown scenario '%s'\n", scenario_name);
        return 2;
    }
    vb_device *dev = NULL;
    if (vb_device_open("cuda", NULL, &dev) != VB_OK) {
        fprintf(stderr, "fullgpu: %s\n", vb_last_error());
        return 3;
    }
    vb_device_info info;
    dev->ops->info(dev, &info);
    printf("fullgpu on %s: device filled to its last MiB by cudaMalloc outside the allocator; scenario %s;\n"
           "probe %llu MiB; used memory after destroy must be within %llu MiB of the baseline\n",
           info.name, scenario->name, PROBE_BYTES / MiB, BASELINE_TOLERANCE / MiB);
    printf("| %-10s | %9s | %7s | %-14s | %-13s | %-10s | %10s | %-4s |\n", "allocator", "fill MiB", "left MiB",
           "scenario full", "malloc full", "after", "used-base", "");
    int failures = 0, checked = 0;
    for (size_t i = 0; vb_allocator_registry[i]; i++) {
        const char *name = vb_allocator_registry[i]->name;
        if (allocators) {
            /* a whole item of the comma-separated list */
            size_t length = strlen(name);
            const char *at = strstr(allocators, name);
            while (at && !((at == allocators || at[-1] == ',') && (at[length] == ',' || at[length] == '\0')))
                at = strstr(at + 1, name);
            if (!at) continue;
        }
        checked++;
        failures += !check_strategy(dev, name, scenario);
    }
    vb_device_close(dev);
    printf("fullgpu: %d of %d strategies passed\n", checked - failures, checked);
    return failures || checked == 0 ? 1 : 0;
}
