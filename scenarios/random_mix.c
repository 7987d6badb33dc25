/* vrambench — `random_mix`: seeded random allocations and frees with a cap
 * on live memory, in the manner of RMM's random_allocations benchmark
 * (rapidsai/rmm, benchmarks/random_allocations/random_allocations.cpp).
 *
 * The rules taken from RMM:
 *   - 2 x `allocations` operations; each draws a size uniform in
 *     [1, max_size] bytes;
 *   - while blocks are live, an operation allocates with probability 73%,
 *     and only while fewer than `allocations` were made and live bytes plus
 *     the new size stay under `max_usage`; otherwise it frees a live block
 *     picked uniformly at random (with nothing live it always allocates);
 *   - an allocation that fails for lack of memory frees a block instead.
 * RMM sweeps 1000/10000/100000 allocations, max sizes 1..4096 MiB, and caps
 * live memory at 16000 MiB. Our defaults are RMM's smallest count (1000), its
 * 64 MiB max size, and its 16000 MiB cap: 2000 operations, well under a
 * millisecond of host work on sim, and a live set that stays far below an
 * 80 GB GPU. Unlike RMM, whatever is still live at the end is freed (RMM
 * asserts nothing is), so every run ends at zero requested bytes.
 *
 * The parameter (`--param`) overrides the defaults:
 *   "allocations=N,max_size_mb=M,max_usage_mb=U,seed=S" (any subset; M at most U).
 * Steps: "ops=K" every tenth of the operations, then "end" once all is freed.
 * Counters: allocations_made, allocation_failures. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/closest.h"
#include "scenario.h"

/* RMM's allocation probability, in percent. */
#define ALLOCATION_PERCENT 73

/* Its steps (docs/results-json.md, "names"). */
enum { OPS, END };
static const vb_name steps[] = {
    [OPS] = {"ops", "ops=%s"},
    [END] = {"end", "end"},
    {NULL, NULL},
};

/* Its counters. */
enum { ALLOCATIONS_MADE, ALLOCATION_FAILURES };
static const char *const counters[] = {
    [ALLOCATIONS_MADE] = "allocations_made",
    [ALLOCATION_FAILURES] = "allocation_failures",
    NULL,
};

typedef struct mix_settings {
    uint64_t allocations;   /* allocations to make (RMM: num_allocations) */
    uint64_t max_size;      /* bytes; sizes are uniform in [1, max_size] */
    uint64_t max_usage;     /* bytes; live memory stays under this */
    uint64_t seed;
} mix_settings;

#define DEFAULT_SETTINGS {1000, 64 * VB_MiB, 16000 * VB_MiB, 1}

typedef struct live_block {
    vb_addr addr;
    uint64_t size;
} live_block;

/* ------------------------------------------------------------------------ */
/* A small seeded PRNG (splitmix64): the same seed gives the same sequence   */
/* on every machine, which std::default_random_engine does not promise.     */
/* ------------------------------------------------------------------------ */

static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, bound) (bound > 0); the modulo bias is below 2^-40 for the
 * bounds used here, far under anything a benchmark can see. */
static uint64_t random_below(uint64_t *state, uint64_t bound)
{
    return next_random(state) % bound;
}

/* ------------------------------------------------------------------------ */
/* Parameter parsing                                                         */
/* ------------------------------------------------------------------------ */

/* Parses a whole decimal number in [1, max]; 0 on success. */
static int parse_count(const char *text, uint64_t max, uint64_t *out)
{
    if (text[0] < '0' || text[0] > '9') return -1;
    char *end = NULL;
    errno = 0;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0' || value == 0 || value > max) return -1;
    *out = value;
    return 0;
}

/* Its parameter's keys, each a whole number from 1 to its maximum. */
enum { KEY_ALLOCATIONS, KEY_MAX_SIZE_MB, KEY_MAX_USAGE_MB, KEY_SEED, KEY_COUNT };
static const char *const key_names[KEY_COUNT + 1] = {"allocations", "max_size_mb", "max_usage_mb", "seed", NULL};
static const uint64_t key_max[KEY_COUNT] = {100000000, 1 << 20, 1 << 30, UINT64_MAX};

/* Applies "key=value,..." to `settings`. VB_ERR_INVALID names the bad part. */
static vb_status parse_parameter(const char *parameter, mix_settings *settings)
{
    char text[256];
    if (snprintf(text, sizeof text, "%s", parameter) >= (int)sizeof text)
        return vb_error(VB_ERR_INVALID, "random_mix: parameter '%s' is too long", parameter);
    unsigned given = 0; /* keys seen: each takes one value */
    for (char *save = NULL, *item = strtok_r(text, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *equals = strchr(item, '=');
        if (!equals)
            return vb_error(VB_ERR_INVALID, "random_mix: parameter '%s' is not KEY=VALUE", item);
        *equals = '\0';
        const char *key = item, *value = equals + 1;
        int k = 0;
        while (k < KEY_COUNT && strcmp(key, key_names[k]) != 0) k++;
        if (k == KEY_COUNT) {
            const char *nearest = vb_closest_name(key, key_names);
            return vb_error(VB_ERR_INVALID,
                            "random_mix: unknown parameter '%s'%s%s%s (known: allocations, max_size_mb, "
                            "max_usage_mb, seed)", key, nearest ? "; did you mean " : "", nearest ? nearest : "",
                            nearest ? "?" : "");
        }
        if (given & 1u << k) return vb_error(VB_ERR_INVALID, "random_mix: parameter %s given twice", key);
        given |= 1u << k;
        uint64_t number;
        if (parse_count(value, key_max[k], &number) != 0)
            return vb_error(VB_ERR_INVALID, "random_mix: bad value '%s' for %s (a whole number from 1 to %llu)", value,
                            key, (unsigned long long)key_max[k]);
        switch (k) {
        case KEY_ALLOCATIONS: settings->allocations = number; break;
        case KEY_MAX_SIZE_MB: settings->max_size = number * VB_MiB; break;
        case KEY_MAX_USAGE_MB: settings->max_usage = number * VB_MiB; break;
        default: settings->seed = number; break;
        }
    }
    /* The cap holds only while one allocation fits under it (gen-trace
     * refuses the same: --max-live below --max-size): else the first one,
     * made with nothing live as RMM does, passes it. */
    if (settings->max_size > settings->max_usage)
        return vb_error(VB_ERR_INVALID,
                        "random_mix: max_size_mb %llu%s is above max_usage_mb %llu%s: one allocation would pass the cap",
                        (unsigned long long)(settings->max_size / VB_MiB), given & 1u << KEY_MAX_SIZE_MB ? "" : " (the default)",
                        (unsigned long long)(settings->max_usage / VB_MiB),
                        given & 1u << KEY_MAX_USAGE_MB ? "" : " (the default)");
    return VB_OK;
}

/* `run --param`, checked before anything runs. */
static vb_status random_mix_check_parameter(const char *parameter)
{
    mix_settings settings = DEFAULT_SETTINGS;
    return parse_parameter(parameter, &settings);
}

/* ------------------------------------------------------------------------ */
/* The scenario                                                              */
/* ------------------------------------------------------------------------ */

/* Frees the live block at `index`, moving the last one into its place. */
static vb_status free_at(vb_run *run, live_block *live, uint64_t *live_count, uint64_t *live_bytes,
                         uint64_t index)
{
    live_block victim = live[index];
    live[index] = live[--*live_count];
    *live_bytes -= victim.size;
    return vb_run_free(run, victim.addr);
}

static vb_status random_mix_run(vb_run *run)
{
    mix_settings settings = DEFAULT_SETTINGS;
    if (vb_run_parameter(run)) {
        vb_status status = parse_parameter(vb_run_parameter(run), &settings);
        if (status != VB_OK) return status;
    }
    uint64_t operations = 2 * settings.allocations, step_every = operations / 10 ? operations / 10 : 1;
    live_block *live = malloc(settings.allocations * sizeof *live);
    if (!live) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    uint64_t rng = settings.seed, live_count = 0, live_bytes = 0, made = 0, failures = 0;
    vb_status status = VB_OK;
    for (uint64_t op = 1; op <= operations && status == VB_OK; op++) {
        uint64_t size = 1 + random_below(&rng, settings.max_size);
        int allocate = 1;
        if (live_count > 0)
            allocate = random_below(&rng, 100) < ALLOCATION_PERCENT && made < settings.allocations &&
                       live_bytes + size < settings.max_usage;
        /* With nothing live RMM allocates anyway; past the count there is
         * no room left in `live`, so this one op does nothing instead. */
        if (allocate && made == settings.allocations) allocate = 0;
        if (allocate) {
            vb_addr addr;
            status = vb_run_malloc(run, size, vb_run_stream(run), &addr);
            if (status == VB_OK) {
                live[live_count++] = (live_block){addr, size};
                live_bytes += size;
                made++;
            } else if (status == VB_ERR_OOM) {
                status = VB_OK; /* RMM frees a block instead */
                failures++;
                allocate = 0;
            }
        }
        if (!allocate && status == VB_OK && live_count > 0)
            status = free_at(run, live, &live_count, &live_bytes, random_below(&rng, live_count));
        if (status == VB_OK && op % step_every == 0) {
            char ops[24], step[40];
            snprintf(ops, sizeof ops, "%" PRIu64, op);
            snprintf(step, sizeof step, steps[OPS].text, ops);
            status = vb_run_step(run, step);
        }
    }
    while (live_count > 0) {
        vb_status freed = free_at(run, live, &live_count, &live_bytes, live_count - 1);
        if (status == VB_OK) status = freed;
    }
    free(live);
    if (status != VB_OK) return status;
    status = vb_run_step(run, steps[END].text);
    if (status == VB_OK) status = vb_run_set_counter(run, counters[ALLOCATIONS_MADE], (double)made);
    if (status == VB_OK) status = vb_run_set_counter(run, counters[ALLOCATION_FAILURES], (double)failures);
    return status;
}

const vb_scenario vb_random_mix_scenario = {
    .name = "random_mix",
    .documents = "RMM random_allocations",
    .description = "seeded random alloc/free (73% alloc, sizes uniform up to 64 MiB, live memory under 16000 MiB)",
    .run = random_mix_run,
    .steps = steps,
    .counters = counters,
    .parameter = "allocations=N,max_size_mb=M,max_usage_mb=U,seed=S (any subset)",
    .check_parameter = random_mix_check_parameter,
};
