/* vrambench — `vrambench microbench`: malloc+free pair latency in cache-hit
 * steady state, per allocator and size.
 *
 * After one warm-up pair fills the cache, pairs run in batches sized so a
 * batch lasts at least ~5 us (the clock's own cost then stays under 1%); the
 * per-pair time of each batch is one sample, and p50/p99 are taken over the
 * samples of a cell (at least 30, up to 0.25 s of timed work). A strategy
 * without a cache (cuda) pays the driver on every pair, which is the point. */
#include <stdio.h>
#include <string.h>

#include "../allocators/allocator.h"
#include "cli.h"
#include "measure.h"

static const uint64_t sizes[] = {512, 64 << 10, 2 << 20, 20 << 20, 256 << 20};

#define BATCH_TARGET_NS 5000.0
#define CELL_BUDGET_NS 250000000ull
#define MIN_SAMPLES 30
#define MAX_SAMPLES 4000

/* Times `pairs` malloc+free pairs of `size`; returns ns per pair or < 0 on failure. */
static double time_batch(vb_allocator *allocator, uint64_t size, unsigned pairs)
{
    uint64_t start = vb_now_ns();
    for (unsigned i = 0; i < pairs; i++) {
        vb_addr addr;
        if (vb_malloc(allocator, size, NULL, &addr) != VB_OK || vb_free(allocator, addr) != VB_OK) return -1.0;
    }
    return (double)(vb_now_ns() - start) / pairs;
}

/* Measures one (allocator, size) cell and prints its line. */
static int measure_cell(vb_device *dev, const char *name, uint64_t size)
{
    vb_allocator *allocator;
    vb_status status = vb_allocator_create(name, dev, NULL, &allocator);
    if (status != VB_OK) return vb_cli_status_error(status);
    int exit_status = VB_EXIT_OK;
    vb_samples samples = {0};
    double first = time_batch(allocator, size, 1); /* warm-up: fills the cache */
    vb_alloc_stats before, after;
    vb_allocator_stats(allocator, &before);
    double one = time_batch(allocator, size, 1);
    if (first < 0 || one < 0) {
        exit_status = vb_cli_error(VB_EXIT_FAILURE, "microbench: %s failed at %llu bytes: %s", name,
                                   (unsigned long long)size, vb_last_error());
        goto done;
    }
    unsigned pairs = one >= BATCH_TARGET_NS ? 1 : (unsigned)(BATCH_TARGET_NS / (one > 1 ? one : 1)) + 1;
    uint64_t start = vb_now_ns();
    while (samples.count < MAX_SAMPLES &&
           (samples.count < MIN_SAMPLES || vb_now_ns() - start < CELL_BUDGET_NS)) {
        double per_pair = time_batch(allocator, size, pairs);
        if (per_pair < 0 || vb_samples_add(&samples, per_pair) != 0) {
            exit_status = vb_cli_error(VB_EXIT_FAILURE, "microbench: %s failed at %llu bytes", name,
                                       (unsigned long long)size);
            goto done;
        }
    }
    vb_allocator_stats(allocator, &after);
    vb_sort_doubles(samples.values, samples.count);
    uint64_t timed_pairs = (uint64_t)samples.count * pairs + 1;
    printf("%-24s %10llu %8u %12.1f %12.1f %14.2f\n", name, (unsigned long long)size, pairs,
           vb_quantile(samples.values, samples.count, 0.50), vb_quantile(samples.values, samples.count, 0.99),
           (double)(after.driver_alloc_calls - before.driver_alloc_calls) / (double)timed_pairs);
done:
    vb_samples_free(&samples);
    vb_allocator_destroy(allocator);
    return exit_status;
}

int vb_cmd_microbench(int argc, char **argv)
{
    const char *allocator_spec = "all", *device_kind = "auto";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--allocator") == 0 && i + 1 < argc) allocator_spec = argv[++i];
        else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) device_kind = argv[++i];
        else return vb_cli_error(VB_EXIT_USAGE, "microbench: unknown or incomplete option '%s'", argv[i]);
    }
    vb_name_list allocators;
    int exit_status = vb_cli_names(allocator_spec, "allocator", vb_cli_allocator_names(), &allocators);
    if (exit_status != VB_EXIT_OK) return exit_status;
    vb_device *dev = NULL;
    vb_status status = vb_device_open(device_kind, NULL, &dev);
    if (status != VB_OK) {
        vb_name_list_free(&allocators);
        return vb_cli_status_error(status);
    }
    vb_device_info info;
    dev->ops->info(dev, &info);
    printf("# microbench on %s (%s): malloc+free pair latency, cache-hit steady state\n", info.name,
           info.simulated ? "simulated device: host-side cost of the allocator logic only" : "real GPU");
    printf("%-24s %10s %8s %12s %12s %14s\n", "allocator", "bytes", "pairs/b", "p50 ns/pair", "p99 ns/pair",
           "driver allocs/pair");
    for (size_t a = 0; a < allocators.count && exit_status == VB_EXIT_OK; a++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0] && exit_status == VB_EXIT_OK; s++) {
            exit_status = measure_cell(dev, allocators.names[a], sizes[s]);
            fflush(stdout);
        }
    vb_device_close(dev);
    vb_name_list_free(&allocators);
    return exit_status;
}
