/* vrambench — `vrambench microbench`: allocator call latency in cache-hit
 * steady state, per allocator and size.
 *
 * Two measurements per (allocator, size) cell, each after a warm-up that
 * fills the cache:
 *   pair        malloc immediately followed by free, the Core issue's figure;
 *   malloc/free `depth` mallocs in a row, then their `depth` frees, timed as
 *               two batches, so each call is seen on its own (depth > 1 keeps
 *               several blocks live, as a real program does).
 * Calls run in batches sized so a batch lasts at least ~5 us, which keeps the
 * clock's own cost under 1%; a batch's time per call is one sample, and the
 * p50/p99 of a cell are taken over its samples (at least 30, up to ~0.25 s of
 * timed work per measurement). A strategy without a cache (cuda) pays the
 * driver on every call, which is the point.
 *
 * --threads N (N > 1): N - 1 more threads run malloc+free pairs of the same
 * size on the same allocator for as long as the cell is measured, so the
 * figures are one thread's latency while others contend for the allocator's
 * lock (allocators/allocator.c); entries are then named .../threads:N.
 *
 * Besides the strategies, two rows time the driver itself, in the same run
 * and the same way, through the device seam: driver:cudaMalloc (mem_alloc +
 * mem_free) and driver:cudaMallocAsync (pool_malloc + pool_free on a pool
 * with release threshold UINT64_MAX, on the default stream, as the strategies
 * are called), so each strategy's own cost over the driver shows. --allocator
 * all includes them; they are always measured on one thread. On sim they time
 * the sim's ops (labelled simulated).
 *
 * A row and a driver row measured minutes apart can land in different
 * states of the machine (on an H100 the pair latency of cudaMallocAsync was
 * bimodal between runs, ~0.85 or ~1.6-2.4 us), so the strategies built on
 * one driver call, `cuda` and `async`, also time their driver twin
 * (cudaMalloc, or a fresh pool's cudaMallocFromPoolAsync) in alternate
 * batches of the same pair measurement: the ratio of the two p50s is their
 * own cost over the driver, taken in the same moments. The twin is warmed up
 * as the strategy is (a pair, then `depth` blocks), so both pools hold the
 * same memory: warmed with one pair only, the twin's pool held less and its
 * pairs ran faster (on sim, `async` read 2.9x its twin that way, 1.2x with
 * equal warm-ups). Each side goes first in every other batch. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocators/allocator.h"
#include "allocators/spec.h"
#include "base/closest.h"
#include "cli.h"
#include "base/measure.h"
#include "context.h"
#include "json_report.h"
#include "output_path.h"

static const uint64_t sizes[] = {512, 64 << 10, 2 << 20, 20 << 20, 256 << 20};

#define BATCH_TARGET_NS 5000.0
#define CELL_BUDGET_NS 250000000ull
#define MIN_SAMPLES 30
#define MAX_SAMPLES 4000
#define MAX_DEPTH 64
#define DEPTH_BYTES_LIMIT (1ull << 30) /* live bytes a malloc batch may hold */

/* The latencies of one cell, in ns per call. */
typedef struct cell_result {
    double pair_p50, pair_p99, malloc_p50, malloc_p99, free_p50, free_p99;
    unsigned pairs_per_batch, depth;
    double driver_allocs_per_pair;
    double twin_pair_p50;     /* the driver twin's pair p50, timed interleaved; 0 without a twin */
} cell_result;

/* What a cell times: a strategy, or the driver's own calls. */
typedef struct timed_target {
    vb_status (*malloc)(void *context, uint64_t size, vb_addr *out);
    vb_status (*free)(void *context, vb_addr addr);
    uint64_t (*driver_allocs)(void *context); /* driver allocations so far */
    void *context;
} timed_target;

/* A strategy's malloc, on the default stream. */
static vb_status allocator_malloc(void *context, uint64_t size, vb_addr *out)
{
    return vb_malloc(context, size, NULL, out);
}

/* A strategy's free. */
static vb_status allocator_free(void *context, vb_addr addr)
{
    return vb_free(context, addr);
}

/* A strategy's driver allocation calls so far. */
static uint64_t allocator_driver_allocs(void *context)
{
    vb_alloc_stats stats;
    vb_allocator_stats(context, &stats);
    return stats.driver_alloc_calls;
}

/* The target that times a strategy. */
static timed_target allocator_target(vb_allocator *allocator)
{
    return (timed_target){allocator_malloc, allocator_free, allocator_driver_allocs, allocator};
}

/* The driver's own calls: cudaMalloc/cudaFree, or a pool's. */
typedef struct driver_target {
    vb_device *device;
    vb_pool pool;          /* NULL: cudaMalloc */
    uint64_t allocs;
} driver_target;

/* cudaMalloc, or cudaMallocFromPoolAsync on the default stream. */
static vb_status driver_malloc(void *context, uint64_t size, vb_addr *out)
{
    driver_target *driver = context;
    driver->allocs++;
    vb_device *dev = driver->device;
    return driver->pool ? dev->ops->pool_malloc(dev, driver->pool, size, NULL, out) : dev->ops->mem_alloc(dev, size, out);
}

/* cudaFree, or cudaFreeAsync on the default stream. */
static vb_status driver_free(void *context, vb_addr addr)
{
    driver_target *driver = context;
    vb_device *dev = driver->device;
    return driver->pool ? dev->ops->pool_free(dev, driver->pool, addr, NULL) : dev->ops->mem_free(dev, addr);
}

/* Every driver malloc is a driver allocation. */
static uint64_t driver_allocs(void *context)
{
    return ((driver_target *)context)->allocs;
}

/* Times `pairs` malloc+free pairs of `size`; ns per pair, or < 0 on failure. */
static double time_pairs(const timed_target *target, uint64_t size, unsigned pairs)
{
    uint64_t start = vb_now_ns();
    for (unsigned i = 0; i < pairs; i++) {
        vb_addr addr;
        if (target->malloc(target->context, size, &addr) != VB_OK || target->free(target->context, addr) != VB_OK)
            return -1.0;
    }
    return (double)(vb_now_ns() - start) / pairs;
}

/* Times `depth` mallocs then their frees; ns per call of each, 0 on success. */
static int time_depth(const timed_target *target, uint64_t size, unsigned depth, double *malloc_ns, double *free_ns)
{
    vb_addr addrs[MAX_DEPTH];
    uint64_t start = vb_now_ns();
    for (unsigned i = 0; i < depth; i++)
        if (target->malloc(target->context, size, &addrs[i]) != VB_OK) return -1;
    uint64_t middle = vb_now_ns();
    for (unsigned i = 0; i < depth; i++)
        if (target->free(target->context, addrs[i]) != VB_OK) return -1;
    *malloc_ns = (double)(middle - start) / depth;
    *free_ns = (double)(vb_now_ns() - middle) / depth;
    return 0;
}

/* How many calls make a batch of at least BATCH_TARGET_NS, given one call's time. */
static unsigned batch_for(double one_call_ns, unsigned limit)
{
    if (one_call_ns >= BATCH_TARGET_NS) return 1;
    unsigned count = (unsigned)(BATCH_TARGET_NS / (one_call_ns > 1 ? one_call_ns : 1)) + 1;
    return count < limit ? count : limit;
}

/* 1 while a measurement should take more samples. */
static int wants_more(const vb_samples *samples, uint64_t start)
{
    return samples->count < MAX_SAMPLES && (samples->count < MIN_SAMPLES || vb_now_ns() - start < CELL_BUDGET_NS);
}

/* Sorts the samples and stores their p50 and p99. */
static void take_quantiles(vb_samples *samples, double *p50, double *p99)
{
    vb_sort_doubles(samples->values, samples->count);
    *p50 = vb_quantile(samples->values, samples->count, 0.50);
    *p99 = vb_quantile(samples->values, samples->count, 0.99);
}

#define MAX_THREADS 64

/* What the contending threads share. */
typedef struct contention {
    const timed_target *target;
    uint64_t size;
    atomic_int stop;
    atomic_int failed;
} contention;

/* A contending thread: pairs until told to stop. */
static void *contend(void *argument)
{
    contention *c = argument;
    while (!atomic_load_explicit(&c->stop, memory_order_relaxed))
        if (time_pairs(c->target, c->size, 64) < 0) {
            atomic_store(&c->failed, 1);
            break;
        }
    return NULL;
}

/* The warm-up before a cell's measurements: a pair, then `depth` blocks, so
 * the cache holds what both measurements use; 0 on success. */
static int warm_up(const timed_target *target, uint64_t size, unsigned depth)
{
    double malloc_ns, free_ns;
    return time_pairs(target, size, 1) < 0 || time_depth(target, size, depth, &malloc_ns, &free_ns) != 0 ? -1 : 0;
}

/* Measures one (allocator, size) cell; with a `twin` (may be NULL), the
 * twin's pairs too, a batch of them beside each of the target's. */
static vb_status measure_cell(const timed_target *target, const timed_target *twin, uint64_t size, cell_result *out)
{
    vb_samples pairs = {0}, mallocs = {0}, frees = {0}, twin_pairs = {0};
    vb_status status = VB_ERR_DEVICE; /* a failing malloc/free leaves its own message */
    vb_clear_error();
    uint64_t depth_limit = DEPTH_BYTES_LIMIT / size;
    out->depth = depth_limit < 1 ? 1 : depth_limit > MAX_DEPTH ? MAX_DEPTH : (unsigned)depth_limit;
    /* The twin warmed up the same way: both pools hold the same memory when their pairs are timed. */
    if (warm_up(target, size, out->depth) != 0 || (twin && warm_up(twin, size, out->depth) != 0)) goto done;
    uint64_t allocs_before = target->driver_allocs(target->context);
    double one = time_pairs(target, size, 1);
    if (one < 0) goto done;
    out->pairs_per_batch = batch_for(one, 100000);
    uint64_t timed_pairs = 1;
    for (uint64_t start = vb_now_ns(), batch = 0; wants_more(&pairs, start); batch++) {
        /* The twin's batch goes first every other time, so neither side is
         * always the one that follows the other. Its pairs are not counted in
         * the target's driver allocations: the twin counts its own. */
        int twin_first = twin && (batch & 1);
        double twin_pair = twin_first ? time_pairs(twin, size, out->pairs_per_batch) : 0;
        double per_pair = time_pairs(target, size, out->pairs_per_batch);
        if (twin && !twin_first) twin_pair = time_pairs(twin, size, out->pairs_per_batch);
        if (per_pair < 0 || vb_samples_add(&pairs, per_pair) != 0) goto done;
        if (twin && (twin_pair < 0 || vb_samples_add(&twin_pairs, twin_pair) != 0)) goto done;
        timed_pairs += out->pairs_per_batch;
    }
    out->driver_allocs_per_pair =
        (double)(target->driver_allocs(target->context) - allocs_before) / (double)timed_pairs;
    for (uint64_t start = vb_now_ns(); wants_more(&mallocs, start);) {
        double malloc_ns, free_ns;
        if (time_depth(target, size, out->depth, &malloc_ns, &free_ns) != 0 ||
            vb_samples_add(&mallocs, malloc_ns) != 0 || vb_samples_add(&frees, free_ns) != 0)
            goto done;
    }
    take_quantiles(&pairs, &out->pair_p50, &out->pair_p99);
    if (twin) {
        double unused_p99;
        take_quantiles(&twin_pairs, &out->twin_pair_p50, &unused_p99);
    }
    take_quantiles(&mallocs, &out->malloc_p50, &out->malloc_p99);
    take_quantiles(&frees, &out->free_p50, &out->free_p99);
    status = VB_OK;
done:
    vb_samples_free(&pairs);
    vb_samples_free(&mallocs);
    vb_samples_free(&frees);
    vb_samples_free(&twin_pairs);
    return status;
}

/* Appends the cell as a Google Benchmark entry "microbench/ALLOCATOR/BYTES"
 * (real_time and cpu_time: the pair's p50; the counters as docs/results-json.md
 * names them); 0 on success. */
static int add_entry(json_t *benchmarks, const char *allocator, uint64_t size, unsigned threads,
                     const cell_result *cell)
{
    char name[700];
    if (threads > 1)
        snprintf(name, sizeof name, "microbench/%s/%llu/threads:%u", allocator, (unsigned long long)size, threads);
    else
        snprintf(name, sizeof name, "microbench/%s/%llu", allocator, (unsigned long long)size);
    json_t *entry = json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:s, s:s}", "name", name, "run_name", name, "run_type",
                              "iteration", "repetitions", 1, "repetition_index", 0, "threads", (int)threads,
                              "time_unit", "ns",
                              "allocator", allocator);
    if (!entry) return -1;
    const struct {
        const char *key;
        double value;
    } numbers[] = {{"iterations", 1},
                   {"real_time", cell->pair_p50},
                   {"cpu_time", cell->pair_p50},
                   {"bytes", (double)size},
                   {"pair_ns_p50", cell->pair_p50},
                   {"pair_ns_p99", cell->pair_p99},
                   {"malloc_ns_p50", cell->malloc_p50},
                   {"malloc_ns_p99", cell->malloc_p99},
                   {"free_ns_p50", cell->free_p50},
                   {"free_ns_p99", cell->free_p99},
                   {"depth", cell->depth},
                   {"driver_allocs_per_pair", cell->driver_allocs_per_pair}};
    int failed = 0;
    if (cell->twin_pair_p50 > 0) {
        failed |= json_object_set_new(entry, "driver_twin_pair_ns_p50", vb_json_number(cell->twin_pair_p50));
        failed |= json_object_set_new(entry, "pair_to_driver_twin", vb_json_number(cell->pair_p50 / cell->twin_pair_p50));
    }
    if (strncmp(allocator, VB_EXTERNAL_PREFIX, strlen(VB_EXTERNAL_PREFIX)) == 0)
        failed |= json_object_set_new(entry, "reserved_bytes_source", json_string(VB_EXTERNAL_RESERVED_SOURCE));
    for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++) {
        json_t *number = vb_json_number(numbers[i].value);
        failed |= !number || json_object_set_new(entry, numbers[i].key, number);
    }
    return failed | json_array_append_new(benchmarks, entry);
}

/* Where the table goes: `file` (NULL under --quiet), and whether the
 * device is the simulated one (its "driver" is a model timed on the host). */
typedef struct table_out {
    FILE *file;
    int simulated;
} table_out;

/* Prints a cell's line; with a driver twin, the strategy's p50 over the
 * twin's after it. */
static void print_cell(const table_out *table, const char *name, uint64_t size, const cell_result *cell)
{
    if (!table->file) return;
    fprintf(table->file, "%-22s %10llu %9.1f %9.1f %10.1f %10.1f %9.1f %9.1f %7u %6.2f", name,
            (unsigned long long)size, cell->pair_p50, cell->pair_p99, cell->malloc_p50, cell->malloc_p99,
            cell->free_p50, cell->free_p99, cell->depth, cell->driver_allocs_per_pair);
    if (cell->twin_pair_p50 > 0)
        fprintf(table->file, "   %5.2fx %s (%.1f)", cell->pair_p50 / cell->twin_pair_p50,
                table->simulated ? "sim driver model" : "driver", cell->twin_pair_p50);
    fputc('\n', table->file);
    fflush(table->file);
}

/* Creates the allocator, measures a cell, prints its line and, when a
 * document is given, adds its entry. */
static int run_cell(vb_device *dev, const vb_allocator_spec *spec, uint64_t size, unsigned threads, json_t *document,
                    const table_out *table)
{
    vb_allocator *allocator;
    const char *name = spec->label;
    vb_config config = vb_allocator_spec_config(spec);
    vb_status status = vb_allocator_create(spec->name, dev, &config, &allocator);
    if (status != VB_OK) return vb_cli_status_error(status);
    cell_result cell = {0};
    timed_target target = allocator_target(allocator);
    /* `cuda` and `async` on one thread: their driver twin, timed interleaved. */
    driver_target twin_driver = {dev, NULL, 0};
    int has_twin = threads == 1 && (strcmp(spec->name, "cuda") == 0 || strcmp(spec->name, "async") == 0);
    if (has_twin && strcmp(spec->name, "async") == 0)
        status = dev->ops->pool_create(dev, UINT64_MAX, &twin_driver.pool);
    timed_target twin = {driver_malloc, driver_free, driver_allocs, &twin_driver};
    contention c = {&target, size, 0, 0};
    pthread_t helpers[MAX_THREADS];
    unsigned started = 0;
    while (status == VB_OK && started + 1 < threads && pthread_create(&helpers[started], NULL, contend, &c) == 0)
        started++;
    if (status == VB_OK) status = measure_cell(&target, has_twin ? &twin : NULL, size, &cell);
    atomic_store(&c.stop, 1);
    for (unsigned i = 0; i < started; i++) pthread_join(helpers[i], NULL);
    if (status == VB_OK && (started + 1 < threads || atomic_load(&c.failed)))
        status = vb_error(VB_ERR_DEVICE, "a contending thread %s", started + 1 < threads ? "could not start" : "failed");
    if (twin_driver.pool) dev->ops->pool_destroy(dev, twin_driver.pool);
    vb_allocator_destroy(allocator);
    if (status != VB_OK)
        return vb_cli_error(VB_EXIT_FAILURE, "microbench: %s at %llu bytes: %s", name, (unsigned long long)size,
                            vb_last_error()[0] ? vb_last_error() : "out of host memory");
    print_cell(table, name, size, &cell);
    if (document && add_entry(json_object_get(document, "benchmarks"), name, size, threads, &cell) != 0)
        return vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
    return VB_EXIT_OK;
}

#define DRIVER_MALLOC "driver:cudaMalloc"
#define DRIVER_MALLOC_ASYNC "driver:cudaMallocAsync"

/* Measures a driver row (`name` DRIVER_MALLOC or DRIVER_MALLOC_ASYNC), prints
 * its line and, when a document is given, adds its entry. */
static int run_driver_cell(vb_device *dev, const char *name, uint64_t size, json_t *document,
                           const table_out *table)
{
    driver_target driver = {dev, NULL, 0};
    vb_status status = VB_OK;
    if (strcmp(name, DRIVER_MALLOC_ASYNC) == 0) status = dev->ops->pool_create(dev, UINT64_MAX, &driver.pool);
    timed_target target = {driver_malloc, driver_free, driver_allocs, &driver};
    cell_result cell = {0};
    if (status == VB_OK) status = measure_cell(&target, NULL, size, &cell);
    if (driver.pool) dev->ops->pool_destroy(dev, driver.pool);
    if (status != VB_OK)
        return vb_cli_error(VB_EXIT_FAILURE, "microbench: %s at %llu bytes: %s", name, (unsigned long long)size,
                            vb_last_error()[0] ? vb_last_error() : "out of host memory");
    print_cell(table, name, size, &cell);
    if (document && add_entry(json_object_get(document, "benchmarks"), name, size, 1, &cell) != 0)
        return vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
    return VB_EXIT_OK;
}

/* Takes the driver rows out of an --allocator list (top-level items
 * "driver:cudaMalloc", "driver:cudaMallocAsync"; "all" asks for both too):
 * `strategies` gets the rest (owned, maybe empty), `drivers` which rows.
 * An unknown "driver:" item is a usage error. */
static int split_driver_rows(const char *list, char **strategies, int drivers[2])
{
    *strategies = calloc(strlen(list) + 1, 1);
    if (!*strategies) return vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
    drivers[0] = drivers[1] = 0;
    size_t used = 0;
    for (const char *item = list; item;) {
        size_t length = vb_spec_list_item_length(item);
        const char *end = item + length;
        if (length == strlen(DRIVER_MALLOC) && strncmp(item, DRIVER_MALLOC, length) == 0) drivers[0] = 1;
        else if (length == strlen(DRIVER_MALLOC_ASYNC) && strncmp(item, DRIVER_MALLOC_ASYNC, length) == 0)
            drivers[1] = 1;
        else if (strncmp(item, "driver:", 7) == 0) {
            free(*strategies);
            static const char *const rows[] = {DRIVER_MALLOC, DRIVER_MALLOC_ASYNC, NULL};
            char *row = strndup(item, length), did_you_mean[64];
            if (!row) return vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
            int exit_code = vb_cli_error(VB_EXIT_USAGE, "microbench: unknown driver row '%s'%s (known: %s, %s)", row,
                                         vb_did_you_mean(row, rows, did_you_mean, sizeof did_you_mean),
                                         DRIVER_MALLOC, DRIVER_MALLOC_ASYNC);
            free(row);
            return exit_code;
        } else {
            if (length == 3 && strncmp(item, "all", 3) == 0) drivers[0] = drivers[1] = 1;
            used += (size_t)sprintf(*strategies + used, "%s%.*s", used ? "," : "", (int)length, item);
        }
        item = *end ? end + 1 : NULL;
    }
    return VB_EXIT_OK;
}

enum { OPT_ALLOCATOR, OPT_DEVICE, OPT_THREADS, OPT_OUT, OPT_FORCE, OPT_QUIET, OPTION_COUNT };
static const vb_cli_option options[OPTION_COUNT + 1] = {
    [OPT_ALLOCATOR] = {"--allocator", NULL, "SPEC[,SPEC]|all",
                       "the allocators (default all, with both driver rows; vrambench list allocators); besides\n"
                       "the strategies, the rows driver:cudaMalloc and driver:cudaMallocAsync time the driver\n"
                       "itself, e.g. --allocator caching,driver:cudaMalloc",
                       0},
    [OPT_DEVICE] = {"--device", NULL, "auto|cuda|sim",
                    "where it runs (default auto: the GPU when one is found, else the simulated device, whose\n"
                    "figures are the host-side time of the allocator and the device's model, not GPU times)",
                    0},
    [OPT_THREADS] = {"--threads", NULL, "N",
                     "threads on one allocator (1 to 64; default 1): N - 1 more run malloc+free pairs while one\n"
                     "is timed, so its figures are those under contention, e.g. --threads 4",
                     0},
    [OPT_OUT] = {"--out", NULL, "FILE.json",
                 "the cells as Google Benchmark JSON (ns per call).\n" VB_CLI_OUT_TEMPLATE,
                 0},
    [OPT_FORCE] = VB_CLI_FORCE_OPTION,
    [OPT_QUIET] = {"--quiet", NULL, NULL, "errors only: no table, no 'wrote FILE'", 0},
    [OPTION_COUNT] = {NULL, NULL, NULL, NULL, 0},
};

static const vb_cli_usage usage = {
    "microbench", NULL,
    "Times malloc+free in cache-hit steady state per allocator and request size (512 B to 256 MiB), in ns per\n"
    "call: pair p50/p99 (malloc then free), malloc and free p50/p99 (`depth` calls in a row) and driver\n"
    "allocations per pair; cuda and async also as a ratio over their driver twin, timed in alternate batches.",
    options, 0,
    "example:\n  vrambench microbench --allocator caching,cuda --device cuda --out out/microbench-{device}-{date}.json"};

int vb_cmd_microbench(int argc, char **argv)
{
    const char *allocator_spec = "all", *device_kind = "auto", *out = NULL;
    unsigned threads = 1;
    int quiet = 0, force = 0;
    vb_cli_parser parser;
    vb_cli_parser_init(&parser, &usage, argc, argv);
    const char *value;
    for (int option; (option = vb_cli_next(&parser, &value)) != VB_CLI_END;) {
        switch (option) {
        case VB_CLI_STOP: return parser.exit_status;
        case OPT_ALLOCATOR: allocator_spec = value; break;
        case OPT_DEVICE: device_kind = value; break;
        case OPT_THREADS: {
            char *end = NULL;
            unsigned long count = strtoul(value, &end, 10);
            if (*end != '\0' || count < 1 || count > MAX_THREADS || value[0] < '0' || value[0] > '9')
                return vb_cli_error(VB_EXIT_USAGE, "microbench: bad --threads '%s' (a whole number from 1 to %d)",
                                    value, MAX_THREADS);
            threads = (unsigned)count;
            break;
        }
        case OPT_OUT: out = value; break;
        case OPT_FORCE: force = 1; break;
        case OPT_QUIET: quiet = 1; break;
        }
    }
    char *strategies = NULL;
    int drivers[2];
    int exit_status = split_driver_rows(allocator_spec, &strategies, drivers);
    if (exit_status != VB_EXIT_OK) return exit_status;
    vb_allocator_spec *specs = NULL;
    size_t spec_count = 0;
    vb_status status = strategies[0] ? vb_allocator_spec_list_parse(strategies, &specs, &spec_count) : VB_OK;
    free(strategies);
    if (status != VB_OK) return vb_cli_status_error(status);
    vb_device *dev = NULL;
    status = vb_device_open(device_kind, NULL, &dev);
    if (status != VB_OK) {
        vb_allocator_spec_list_free(specs, spec_count);
        return vb_cli_status_error(status);
    }
    status = vb_allocator_spec_list_check(dev, specs, spec_count); /* a bad key: its line before the table's head */
    if (status != VB_OK) {
        vb_device_close(dev);
        vb_allocator_spec_list_free(specs, spec_count);
        return vb_cli_status_error(status);
    }
    vb_device_info info;
    dev->ops->info(dev, &info);
    char out_path[4096] = "";
    json_t *document = NULL;
    if (out) {
        status = vb_report_output_path(out, &info, force, out_path, sizeof out_path);
        if (status == VB_OK) document = vb_report_document(vb_report_context(dev, NULL, NULL, 0));
        if (status != VB_OK || !document) {
            vb_device_close(dev);
            vb_allocator_spec_list_free(specs, spec_count);
            return status != VB_OK ? vb_cli_status_error(status) : vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
        }
    }
    table_out table = {quiet ? NULL : stdout, info.simulated};
    if (table.file) {
        if (info.simulated)
            printf("# microbench on the SIMULATED device: every figure is the host-side time of the allocator's code\n"
                   "# and the simulated device's model (the driver rows: the model's own calls), not a GPU or\n"
                   "# driver time; ns per call, cache-hit steady state%s\n",
                   threads > 1 ? ", one thread's figures while the others contend" : "");
        else
            printf("# microbench on %s: ns per call, cache-hit steady state%s\n", info.name,
                   threads > 1 ? ", one thread's figures while the others contend" : "");
        if (threads > 1) printf("# threads: %u on one allocator\n", threads);
        printf("# pair = malloc then free; malloc/free = `depth` calls in a row, timed apart; drv/pr = driver "
               "allocations per pair\n");
        if (threads == 1)
            printf("# cuda, async: Nx %s (ns) = pair p50 over their driver twin's, timed in alternate batches\n",
                   info.simulated ? "sim driver model" : "driver");
        printf("%-22s %10s %9s %9s %10s %10s %9s %9s %7s %6s\n", "allocator", "bytes", "pair p50", "pair p99",
               "malloc p50", "malloc p99", "free p50", "free p99", "depth", "drv/pr");
        vb_cli_flush_stdout();
    }
    for (size_t a = 0; a < spec_count && exit_status == VB_EXIT_OK; a++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0] && exit_status == VB_EXIT_OK; s++)
            exit_status = run_cell(dev, &specs[a], sizes[s], threads, document, &table);
    static const char *const driver_rows[2] = {DRIVER_MALLOC, DRIVER_MALLOC_ASYNC};
    for (int d = 0; d < 2 && exit_status == VB_EXIT_OK; d++)
        for (size_t s = 0; drivers[d] && s < sizeof sizes / sizeof sizes[0] && exit_status == VB_EXIT_OK; s++)
            exit_status = run_driver_cell(dev, driver_rows[d], sizes[s], document, &table);
    if (exit_status == VB_EXIT_OK && document) {
        status = vb_report_write(document, out_path);
        exit_status = status == VB_OK ? VB_EXIT_OK : vb_cli_status_error(status);
        if (exit_status == VB_EXIT_OK && !quiet) vb_cli_line(stderr, "vrambench: wrote %s", out_path);
    }
    json_decref(document);
    vb_device_close(dev);
    vb_allocator_spec_list_free(specs, spec_count);
    return exit_status;
}
