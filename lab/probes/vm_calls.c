/* vrambench tools — vm-calls: the virtual-memory driver calls a strategy
 * makes on the simulated device, by kind, with its overhead ratio and host
 * time, for the stitch trade-off measurements (lab/probes/stitch_tradeoff_plot.py).
 *
 *   build/lab/vm-calls [--repeat N] [--config KEY=VALUE]... ALLOCATOR WORKLOAD...
 *
 * A WORKLOAD is a trace file (replayed as `vrambench replay` does) or a
 * registered scenario's name (run once, on a capped device when it asks
 * for one, as the runner runs it). One JSON object per workload on
 * stdout: calls by kind (create, map, unmap, set_access, release, reserve,
 * free, and the plain mem_alloc / mem_free), bytes mapped, peak reserved / peak requested (exact on sim) and the
 * host CPU seconds of the run (process CPU time: steadier than wall time on
 * a shared machine). With --repeat N the workload runs N times on the
 * same allocator, as the benchmark's iterations do, and the calls and host
 * seconds are those of the last run alone (the steady state); the peaks
 * cover every run. Counting happens here, in a copy of the sim's ops
 * table, not in the allocator: the sim's ops reach their state through
 * dev->state only, so the copy behaves as the sim itself.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "allocators/allocator.h"
#include "app/replay.h"
#include "scenarios/scenario.h"

typedef struct vm_counts {
    uint64_t create, map, unmap, set_access, release, reserve, free, mapped_bytes;
    uint64_t mem_alloc, mem_free; /* plain driver allocations (cudaMalloc / cudaFree), for caching */
} vm_counts;

static vm_counts counts;
static const vb_device_ops *sim_ops;

/* Each counted op forwards to the sim's own. */
static vb_status count_create(vb_device *d, uint64_t size, vb_phys *out)
{
    counts.create++;
    return sim_ops->vm_create(d, size, out);
}
static vb_status count_release(vb_device *d, vb_phys h)
{
    counts.release++;
    return sim_ops->vm_release(d, h);
}
static vb_status count_map(vb_device *d, vb_addr a, uint64_t size, vb_phys h)
{
    counts.map++;
    counts.mapped_bytes += size;
    return sim_ops->vm_map(d, a, size, h);
}
static vb_status count_unmap(vb_device *d, vb_addr a, uint64_t size)
{
    counts.unmap++;
    return sim_ops->vm_unmap(d, a, size);
}
static vb_status count_set_access(vb_device *d, vb_addr a, uint64_t size)
{
    counts.set_access++;
    return sim_ops->vm_set_access(d, a, size);
}
static vb_status count_reserve(vb_device *d, uint64_t size, vb_addr *out)
{
    counts.reserve++;
    return sim_ops->vm_reserve(d, size, out);
}
static vb_status count_free(vb_device *d, vb_addr a, uint64_t size)
{
    counts.free++;
    return sim_ops->vm_free(d, a, size);
}

static vb_status count_mem_alloc(vb_device *d, uint64_t size, vb_addr *out)
{
    counts.mem_alloc++;
    return sim_ops->mem_alloc(d, size, out);
}
static vb_status count_mem_free(vb_device *d, vb_addr a)
{
    counts.mem_free++;
    return sim_ops->mem_free(d, a);
}

/* Process CPU seconds: on a shared machine steadier than wall time. */
static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Runs one workload on a fresh sim with a fresh allocator and prints its line. */
static int measure(const char *allocator_name, const vb_config *config, const char *workload, int repeat)
{
    vb_device *sim = NULL;
    if (vb_sim_open(0, &sim) != VB_OK) return 1;
    sim_ops = sim->ops;
    vb_device_ops ops = *sim_ops;
    ops.vm_create = count_create;
    ops.vm_release = count_release;
    ops.vm_map = count_map;
    ops.vm_unmap = count_unmap;
    ops.vm_set_access = count_set_access;
    ops.vm_reserve = count_reserve;
    ops.vm_free = count_free;
    ops.mem_alloc = count_mem_alloc;
    ops.mem_free = count_mem_free;
    vb_device counted = {.ops = &ops, .state = sim->state};
    memset(&counts, 0, sizeof counts);

    const vb_scenario *scenario = vb_scenario_find(workload);
    const char *parameter = scenario ? NULL : workload;
    if (!scenario) scenario = &vb_replay_scenario;
    vb_allocator *allocator = NULL;
    vb_run *run = NULL;
    /* A scenario that asks for a capped device gets one, as the runner gives it. */
    vb_device *capped = NULL, *device = &counted;
    vb_status status = VB_OK;
    if (scenario->device_cap_bytes) status = vb_device_cap_open(&counted, scenario->device_cap_bytes, &capped);
    if (capped) device = capped;
    if (status == VB_OK) status = vb_allocator_create(allocator_name, device, config, &allocator);
    if (status == VB_OK) status = vb_run_create(device, allocator, parameter, &run);
    if (status == VB_OK) {
        vb_run_set_sampling(run, 0);
        vb_run_set_latency_sampling(run, 0);
    }
    double start = now_s();
    for (int i = 0; i < repeat && status == VB_OK; i++) {
        memset(&counts, 0, sizeof counts);
        start = now_s();
        status = scenario->run(run);
    }
    double seconds = now_s() - start;
    if (status != VB_OK) {
        fprintf(stderr, "vm-calls: error: %s: %s\n", workload, vb_last_error());
        vb_run_destroy(run);
        vb_allocator_destroy(allocator);
        vb_device_close(capped);
        vb_device_close(sim);
        return 1;
    }
    vb_run_peaks peaks;
    vb_run_get_peaks(run, &peaks);
    printf("{\"workload\": \"%s\", \"allocator\": \"%s\", \"repeat\": %d, \"config\": \"", workload,
           allocator_name, repeat);
    for (size_t i = 0; config && i < config->count; i++)
        printf("%s%s=%s", i ? "," : "", config->entries[i].key, config->entries[i].value);
    printf("\", \"create\": %llu, \"map\": %llu, \"unmap\": %llu, \"set_access\": %llu, \"release\": %llu, "
           "\"reserve\": %llu, \"free\": %llu, \"mem_alloc\": %llu, \"mem_free\": %llu, \"mapped_mib\": %.0f, \"peak_requested\": %llu, "
           "\"peak_reserved\": %llu, \"overhead\": %.5f, \"host_s\": %.4f}\n",
           (unsigned long long)counts.create, (unsigned long long)counts.map, (unsigned long long)counts.unmap,
           (unsigned long long)counts.set_access, (unsigned long long)counts.release,
           (unsigned long long)counts.reserve, (unsigned long long)counts.free, (unsigned long long)counts.mem_alloc,
           (unsigned long long)counts.mem_free, counts.mapped_bytes / 1048576.0,
           (unsigned long long)peaks.requested, (unsigned long long)peaks.reserved,
           peaks.requested ? (double)peaks.reserved / (double)peaks.requested : 0.0, seconds);
    fflush(stdout);
    vb_run_destroy(run);
    vb_allocator_destroy(allocator);
    vb_device_close(capped);
    vb_device_close(sim);
    return 0;
}

int main(int argc, char **argv)
{
    vb_config_entry entries[32];
    vb_config config = {.entries = entries, .count = 0};
    int i = 1, repeat = 1;
    if (i + 1 < argc && strcmp(argv[i], "--repeat") == 0) {
        repeat = atoi(argv[i + 1]);
        i += 2;
        if (repeat < 1) {
            fprintf(stderr, "vm-calls: error: --repeat needs a positive count\n");
            return 2;
        }
    }
    for (; i + 1 < argc && strcmp(argv[i], "--config") == 0; i += 2) {
        if (config.count == 32 || vb_config_entry_parse(argv[i + 1], &entries[config.count]) != VB_OK) {
            fprintf(stderr, "vm-calls: error: bad --config %s\n", argv[i + 1]);
            return 2;
        }
        config.count++;
    }
    if (argc - i < 2) {
        fprintf(stderr, "usage: vm-calls [--repeat N] [--config KEY=VALUE]... ALLOCATOR WORKLOAD...\n");
        return 2;
    }
    int failed = 0;
    for (int w = i + 1; w < argc; w++) failed |= measure(argv[i], &config, argv[w], repeat);
    return failed;
}
