/* vrambench — `tune`: the grid, the capacity bisection, the parallel
 * evaluation, the Pareto front and the recommendation (see tune.h). */
#include "tune.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "allocators/pytorch_conf.h"
#include "base/measure.h"
#include "replay.h"
#include "context.h"
#include "json_report.h"
#include "runner.h"
#include "scratch.h"
#include "trace.h"
#include "trace_drive.h"
#include "fit.h"

/* A setting other than the defaults is recommended only when it saves at
 * least this fraction of the defaults' peak reserved bytes (or the defaults
 * run out of memory): below it, the defaults are the simpler answer. */
#define RECOMMEND_MIN_SAVING 0.01

/* ======================================================================== */
/* The grid                                                                 */
/* ======================================================================== */

/* PyTorch's settings tried, in PYTORCH_ALLOC_CONF's syntax. Garbage
 * collection acts only under a per-process memory fraction, so those carry
 * one: 0.99, near the whole device. Not 1.0: setMemoryFraction(1.0) sets no
 * limit at all (allowed_memory_maximum = nullopt in the newest PyTorch read,
 * allocators/caching_core.c), and then no collection either. Under tune's
 * capacities the fraction is the capacity's (app/fit.h). */
typedef struct grid_setting {
    const char *conf;
    double memory_fraction; /* < 0: none */
} grid_setting;

static const grid_setting pytorch_grid[] = {
    {"", -1},
    {"expandable_segments:True", -1},
    {"max_split_size_mb:64", -1},
    {"max_split_size_mb:128", -1},
    {"max_split_size_mb:256", -1},
    {"max_split_size_mb:512", -1},
    {"max_split_size_mb:1024", -1},
    {"roundup_power2_divisions:2", -1},
    {"roundup_power2_divisions:4", -1},
    {"roundup_power2_divisions:8", -1},
    {"roundup_power2_divisions:16", -1},
    {"roundup_power2_divisions:[256:1,512:2,>:4]", -1},
    {"roundup_power2_divisions:[64:8,256:4,>:2]", -1},
    {"garbage_collection_threshold:0.6", 0.99},
    {"garbage_collection_threshold:0.8", 0.99},
    {"max_split_size_mb:256,roundup_power2_divisions:4", -1},
    {"max_split_size_mb:512,roundup_power2_divisions:[256:1,512:2,>:4]", -1},
    {"max_split_size_mb:128,roundup_power2_divisions:8", -1},
    {"max_split_size_mb:256,garbage_collection_threshold:0.8", 0.99},
    {"max_split_size_mb:512,max_non_split_rounding_mb:256", -1},
    {"expandable_segments:True,roundup_power2_divisions:4", -1},
    {"expandable_segments:True,roundup_power2_divisions:[256:1,512:2,>:4]", -1},
    {"expandable_segments:True,max_split_size_mb:512", -1},
    {"backend:cudaMallocAsync", -1},
};

#define PYTORCH_GRID_COUNT (sizeof pytorch_grid / sizeof pytorch_grid[0])
#define MAX_CANDIDATES (PYTORCH_GRID_COUNT + 32)

/* Settings in a conf: its top-level commas + 1 (0 for ""). */
static int count_settings(const char *conf)
{
    if (!conf[0]) return 0;
    int count = 1, depth = 0;
    for (; *conf; conf++) {
        depth += (*conf == '[') - (*conf == ']');
        count += *conf == ',' && depth == 0;
    }
    return count;
}

const vb_tune_candidate *vb_tune_grid(size_t *count)
{
    static vb_tune_candidate grid[MAX_CANDIDATES];
    static size_t grid_count;
    if (grid_count == 0) {
        for (size_t i = 0; i < PYTORCH_GRID_COUNT; i++) {
            vb_tune_candidate *c = &grid[grid_count++];
            const grid_setting *g = &pytorch_grid[i];
            if (g->memory_fraction >= 0)
                snprintf(c->spec, sizeof c->spec, "pytorch[%s,per_process_memory_fraction:%.2f]", g->conf,
                         g->memory_fraction);
            else snprintf(c->spec, sizeof c->spec, "pytorch[%s]", g->conf);
            snprintf(c->conf, sizeof c->conf, "%s", g->conf);
            c->is_pytorch = 1;
            c->memory_fraction = g->memory_fraction;
            c->setting_count = count_settings(g->conf);
        }
        /* Every other strategy, as registered (PyTorch's three are above). */
        for (size_t i = 0; vb_allocator_registry[i] && grid_count < MAX_CANDIDATES; i++) {
            const char *name = vb_allocator_registry[i]->name;
            if (!strcmp(name, "caching") || !strcmp(name, "expandable") || !strcmp(name, "async")) continue;
            vb_tune_candidate *c = &grid[grid_count++];
            snprintf(c->spec, sizeof c->spec, "%s", name);
            c->memory_fraction = -1;
        }
    }
    *count = grid_count;
    return grid;
}

/* ======================================================================== */
/* One candidate                                                            */
/* ======================================================================== */

/* A counter of a results entry, 0 when absent. */
static double entry_number(const json_t *entry, const char *key)
{
    return json_number_value(json_object_get(entry, key));
}

/* The replay of one candidate through the runner on `dev`: its one
 * results entry, or NULL with the status in *status. */
static json_t *main_replay(vb_device *dev, const vb_tune_options *options, const vb_tune_candidate *candidate,
                           size_t index, vb_status *status)
{
    vb_allocator_spec spec;
    *status = vb_allocator_spec_parse(candidate->spec, &spec);
    if (*status != VB_OK) return NULL;
    vb_runner_options runner = {1, 0.0, 1, 1}; /* no segment maps: a tune compares figures */
    vb_case c = {&vb_replay_scenario, options->trace_path, &spec, options->label};
    vb_case_result result;
    *status = vb_runner_run_case(dev, &c, &runner, &result);
    json_t *entries = json_array(), *entry = NULL;
    if (*status == VB_OK) {
        *status = entries ? vb_report_add_case(entries, &result, 0, index) : VB_ERR_OOM;
        vb_case_result_free(&result);
    }
    if (*status == VB_OK) entry = json_incref(json_array_get(entries, 0));
    json_decref(entries);
    vb_allocator_spec_free(&spec);
    return entry;
}

/* The peak reserved bytes of a replay in a GPU-progress mode, on a sim
 * large enough that it runs out nowhere. */
static vb_status progress_peak(const vb_tune_options *options, const vb_tune_candidate *candidate, uint64_t start,
                               vb_progress progress, uint64_t *peak)
{
    uint64_t capacity = start > VB_GiB ? start : VB_GiB;
    for (;;) {
        vb_fit_result r;
        vb_status status = vb_fit_probe_progress(options->events, candidate->spec, capacity, progress, &r);
        if (status != VB_OK) return status;
        if (r.fits || capacity >= VB_FIT_MAX_CAPACITY / 2) {
            *peak = r.peak_reserved;
            return VB_OK;
        }
        capacity *= 2;
    }
}

/* The smallest GPU class whose memory, less the overhead, is at least
 * `need` (a capacity from which up the replay fits) and on which a device
 * of that memory runs it without OOM; NULL for none. */
static const vb_gpu_class *smallest_gpu(const vb_tune_options *options, const vb_tune_candidate *candidate,
                                        uint64_t need, int probe, vb_status *status)
{
    size_t count;
    const vb_gpu_class *gpus = vb_gpu_classes(&count);
    *status = VB_OK;
    for (size_t i = 0; i < count; i++) {
        if (gpus[i].total_bytes <= options->overhead) continue;
        uint64_t usable = gpus[i].total_bytes - options->overhead;
        if (usable < need) continue;
        if (!probe) return &gpus[i];
        vb_fit_result r;
        *status = vb_fit_probe(options->events, candidate->spec, usable, VB_FIT_DEVICE, VB_SIM_PLACE_TOP_DOWN, 1, &r);
        if (*status == VB_OK && r.fits && vb_fit_placement_matters(candidate->spec))
            *status = vb_fit_probe(options->events, candidate->spec, usable, VB_FIT_DEVICE, VB_SIM_PLACE_RISING, 1, &r);
        if (*status != VB_OK) return NULL;
        if (r.fits) return &gpus[i];
    }
    return NULL;
}

/* Adds what a tune says of a candidate to its entry: the PyTorch setting,
 * utilization, OOMs at the capacity, the minimum capacities and the
 * smallest GPU. A capacity is PyTorch's limit
 * (set_per_process_memory_fraction, app/fit.h) for the strategies that
 * have one, else a device's memory. The main replay ran on `options->device`. */
static vb_status tune_fields(const vb_tune_options *options, const vb_tune_candidate *candidate, json_t *entry,
                             int main_on_sim)
{
    double reserved = entry_number(entry, "peak_reserved_bytes");
    double allocated = entry_number(entry, "peak_allocated_bytes");
    double requested = entry_number(entry, "peak_requested_bytes");
    uint64_t capacity = options->capacity ? options->capacity : VB_SIM_DEFAULT_CAPACITY;
    vb_allocator_spec spec;
    vb_status status = vb_allocator_spec_parse(candidate->spec, &spec);
    if (status != VB_OK) return status;
    int limited = vb_fit_has_limit(spec.name), is_async = strcmp(spec.name, "async") == 0;
    int expandable = strcmp(spec.name, "expandable") == 0;
    int is_cuda = strcmp(spec.name, "cuda") == 0;
    int collects = strstr(spec.label, "garbage_collection_threshold") != NULL;
    vb_allocator_spec_free(&spec);

    /* OOMs at the capacity: a probe under the limit (or, for the others on
     * the GPU, a sim device of it); on sim the main replay counted them. */
    vb_fit_result at = {0};
    if (limited || !main_on_sim) {
        status = vb_fit_probe(options->events, candidate->spec, capacity, VB_FIT_LIMIT, VB_SIM_PLACE_TOP_DOWN, 0, &at);
        if (status != VB_OK) return status;
    } else {
        at.ooms = (uint64_t)entry_number(entry, "ooms");
        at.alloc_retries = (uint64_t)entry_number(entry, "alloc_retries");
        at.first_oom_line = (uint64_t)entry_number(entry, "first_oom_line");
        at.first_oom_bytes = (uint64_t)entry_number(entry, "first_oom_bytes");
    }

    /* min_capacity_bytes, under PyTorch's limit: where the driver's
     * placement of segments decides (app/fit.h), the larger of the two
     * placements' (min_capacity_bytes_min the smaller). The async
     * backend's limit counts the bytes handed out (pytorch_used_bytes +
     * size > limit), so it is the requested peak, exactly. */
    vb_fit_min min = {0};
    uint64_t min_low = 0;
    double pool_peak = reserved; /* the async backend's peak with room, at the main replay's progress */
    /* No capacity holds less than the trace's live bytes at its peak: past
     * the largest one, no probe can fit. */
    int hopeless = options->events->peak_live_bytes > VB_FIT_MAX_CAPACITY;
    /* The peak too is an interval where the placement of segments decides:
     * the main replay's (top-down) and a rising one's at the capacity, on
     * sim. Under the limit, each placement's probe at the capacity is its
     * search's first replay. */
    vb_fit_result rising = {0};
    const vb_fit_result *known[2] = {limited ? &at : NULL, NULL};
    if (limited && main_on_sim && !hopeless && vb_fit_placement_matters(candidate->spec)) {
        status = vb_fit_probe(options->events, candidate->spec, capacity, VB_FIT_LIMIT, VB_SIM_PLACE_RISING, 0, &rising);
        if (status != VB_OK) return status;
        known[VB_SIM_PLACE_RISING] = &rising;
    }
    if (hopeless) {
        /* found 0 */
    } else if (is_async) {
        /* A main replay that ran out at the capacity counted neither the
         * requests refused nor the pool's peak with room: the same replay
         * again on devices doubling from twice the capacity until it fits
         * (a pool makes the same choices on any device until one runs out). */
        if (at.ooms) {
            vb_fit_result whole = {0};
            for (uint64_t room = 2 * capacity;; room *= 2) {
                status = vb_fit_probe(options->events, candidate->spec, room, VB_FIT_DEVICE, VB_SIM_PLACE_TOP_DOWN, 1,
                                      &whole);
                if (status != VB_OK) return status;
                if (whole.fits || room >= VB_FIT_MAX_CAPACITY / 2) break;
            }
            requested = (double)whole.peak_requested;
            pool_peak = (double)whole.peak_reserved;
        }
        min = (vb_fit_min){.found = 1, .capacity = (uint64_t)requested, .exact = 1};
        min_low = min.capacity;
    } else if (is_cuda && main_on_sim && at.ooms == 0 && reserved > 0) {
        /* cudaMalloc per allocation, nothing released to retry: the
         * driver sees the same calls under any device until one is
         * refused, so it fits exactly where its peak does (reserved is
         * what the driver uses, counted at the seam). */
        min = (vb_fit_min){.found = 1, .capacity = (uint64_t)reserved, .exact = 1, .lowest_fit = (uint64_t)reserved,
                           .fails_at = (uint64_t)reserved - 1};
        min_low = min.capacity;
    } else {
        /* Strategies without the limit search a device's memory, from the
         * main replay's peak (near the answer: few replays). */
        uint64_t start = limited || reserved <= 0 ? capacity : (uint64_t)reserved;
        status = vb_fit_min_capacity_placed(options->events, candidate->spec, VB_FIT_LIMIT, start,
                                            options->search_events, limited ? known : NULL, &min, &min_low);
        if (status != VB_OK) return status;
    }

    /* A device's memory: the same as the limit for caching without garbage
     * collection; searched for the others; for the async backend the pool's
     * peak, from the two extremes of GPU progress (a pool makes the same
     * choices on any device until one runs out: fitting is monotone). */
    double reserved_min = reserved, reserved_max = reserved;
    uint64_t device_min = min_low, device_max = min.capacity;
    int peaks_differ = 0;
    if (known[VB_SIM_PLACE_RISING]) { /* the OOMs at the capacity: the side's that has more */
        if ((double)rising.peak_reserved < reserved_min) reserved_min = (double)rising.peak_reserved;
        if ((double)rising.peak_reserved > reserved_max) reserved_max = (double)rising.peak_reserved;
        if (rising.ooms > at.ooms) at = rising;
        peaks_differ = reserved_min < reserved_max;
    }
    int device_exact = min.exact, device_found = min.found; /* found: 0 B too, for a trace that allocates nothing */
    if (is_async && !hopeless) {
        uint64_t fast = 0, late = 0;
        status = progress_peak(options, candidate, 2 * (uint64_t)pool_peak, VB_PROGRESS_FAST, &fast);
        if (status == VB_OK) status = progress_peak(options, candidate, 2 * (uint64_t)pool_peak, VB_PROGRESS_LATE, &late);
        if (status != VB_OK) return status;
        reserved_min = (double)(fast < (uint64_t)pool_peak ? fast : (uint64_t)pool_peak);
        reserved_max = (double)(late > (uint64_t)pool_peak ? late : (uint64_t)pool_peak);
        device_min = (uint64_t)reserved_min;
        device_max = (uint64_t)reserved_max;
        device_exact = 1;
    } else if (limited && (collects || expandable) && !hopeless) {
        vb_fit_min device;
        uint64_t device_low = 0;
        /* From the limit's minimum, which a device's is near: with a memory
         * fraction f, the limit is f x the device. */
        double fraction = candidate->memory_fraction > 0 ? candidate->memory_fraction : 1.0;
        uint64_t start = min.found ? (uint64_t)ceil((double)min.capacity / fraction) : capacity;
        status = vb_fit_min_capacity_placed(options->events, candidate->spec, VB_FIT_DEVICE, start,
                                            options->search_events, NULL, &device, &device_low);
        if (status != VB_OK) return status;
        device_found = device.found;
        device_max = device.found ? device.capacity : 0;
        device_min = device.found ? device_low : 0;
        device_exact = 0;
    }

    /* The smallest GPU: its memory less the overhead holds both minimums
     * (each fits from there up) and runs the replay as a device. For
     * caching without garbage collection or expandable segments a device
     * is the limit, which the search showed fits from min_capacity up
     * under both placements: no replay needed. */
    const vb_gpu_class *gpu = NULL;
    if (min.found && device_found) {
        uint64_t need = min.capacity > device_max ? min.capacity : device_max;
        int device_is_limit = limited && !collects && !expandable;
        gpu = smallest_gpu(options, candidate, need, !is_async && !device_is_limit, &status);
        if (status != VB_OK) return status;
    }

    int failed = 0;
    if (candidate->is_pytorch) failed |= json_object_set_new(entry, "pytorch_alloc_conf", json_string(candidate->conf));
    if (candidate->memory_fraction >= 0)
        failed |= json_object_set_new(entry, "memory_fraction", vb_json_number(candidate->memory_fraction));
    failed |= json_object_set_new(entry, "utilization", vb_json_number(reserved > 0 ? allocated / reserved : 0.0));
    failed |= json_object_set_new(entry, "capacity_bytes", vb_json_number((double)capacity));
    failed |= json_object_set_new(entry, "capacity_is_limit", json_boolean(limited));
    failed |= json_object_set_new(entry, "ooms_at_capacity", vb_json_number((double)at.ooms));
    failed |= json_object_set_new(entry, "alloc_retries_at_capacity", vb_json_number((double)at.alloc_retries));
    if (at.first_oom_line) {
        failed |= json_object_set_new(entry, "first_oom_line", vb_json_whole(at.first_oom_line));
        failed |= json_object_set_new(entry, "first_oom_bytes", vb_json_whole(at.first_oom_bytes));
    }
    failed |= json_object_set_new(entry, "min_capacity_bytes",
                                  min.found ? vb_json_number((double)min.capacity) : json_null());
    failed |= json_object_set_new(entry, "min_capacity_exact", json_boolean(min.found && min.exact));
    failed |= json_object_set_new(entry, "min_capacity_search_events",
                                  vb_json_number((double)(options->search_events ? options->search_events
                                                                                 : VB_FIT_DEFAULT_SEARCH_EVENTS)));
    if (min.fails_at)
        failed |= json_object_set_new(entry, "min_capacity_oom_below", vb_json_number((double)min.fails_at));
    if (min.found && min.lowest_fit < min.capacity)
        failed |= json_object_set_new(entry, "min_capacity_lowest_fit", vb_json_number((double)min.lowest_fit));
    failed |= json_object_set_new(entry, "min_capacity_bytes_min", min.found ? vb_json_number((double)min_low) : json_null());
    failed |= json_object_set_new(entry, "min_capacity_bytes_max",
                                  min.found ? vb_json_number((double)min.capacity) : json_null());
    failed |= json_object_set_new(entry, "placement_dependent",
                                  json_boolean((min.found && min_low < min.capacity) || peaks_differ));
    failed |= json_object_set_new(entry, "progress_dependent", json_boolean(is_async));
    failed |= json_object_set_new(entry, "peak_reserved_bytes_min", vb_json_number(reserved_min));
    failed |= json_object_set_new(entry, "peak_reserved_bytes_max", vb_json_number(reserved_max));
    failed |= json_object_set_new(entry, "min_device_bytes_min",
                                  device_found ? vb_json_number((double)device_min) : json_null());
    failed |= json_object_set_new(entry, "min_device_bytes_max",
                                  device_found ? vb_json_number((double)device_max) : json_null());
    failed |= json_object_set_new(entry, "min_device_exact", json_boolean(device_found && device_exact));
    failed |= json_object_set_new(entry, "gpu_overhead_bytes", vb_json_number((double)options->overhead));
    failed |= json_object_set_new(entry, "smallest_gpu",
                                  gpu ? json_pack("{s:s,s:s,s:o,s:o}", "name", gpu->name, "models", gpu->models,
                                                  "total_bytes", vb_json_number((double)gpu->total_bytes),
                                                  "usable_bytes",
                                                  vb_json_number((double)(gpu->total_bytes - options->overhead)))
                                      : json_null());
    return failed ? vb_error(VB_ERR_HOST_OOM, "out of host memory") : VB_OK;
}

/* ======================================================================== */
/* Parallel evaluation: one child process per candidate                      */
/* ======================================================================== */

/* In a child: evaluates candidate `index` (its main replay too when
 * `entry` is NULL, on sim) and writes {"entry": ...} or {"error": ...,
 * "status": N} to `answer_fd`; the exit status says whether it did. */
static int child_evaluate(const vb_tune_options *options, const vb_tune_candidate *candidate, size_t index,
                          json_t *entry, int answer_fd)
{
    vb_status status = VB_OK;
    int main_on_sim = entry == NULL;
    if (!entry) {
        vb_device *dev = NULL;
        vb_device_options device_options = {.sim_capacity_bytes = options->capacity};
        status = vb_device_open("sim", &device_options, &dev);
        if (status == VB_OK) entry = main_replay(dev, options, candidate, index, &status);
        vb_device_close(dev);
    } else {
        json_incref(entry);
    }
    if (status == VB_OK) status = tune_fields(options, candidate, entry, main_on_sim);
    /* vb_json_text: a message that quotes a name which is not UTF-8 is still an answer. */
    json_t *answer = status == VB_OK ? json_pack("{sO}", "entry", entry)
                                     : json_pack("{sosi}", "error", vb_json_text(vb_last_error()), "status", (int)status);
    json_decref(entry);
    int written = answer && json_dumpfd(answer, answer_fd, JSON_COMPACT) == 0;
    if (!written)
        fprintf(stderr, "vrambench: error: tune: %s: its process cannot give its answer: %s\n", candidate->spec,
                answer ? strerror(errno) : "out of host memory");
    json_decref(answer);
    return written ? 0 : 1;
}

/* Evaluates every candidate, `jobs` processes at once; entries[i] gets
 * candidate i's entry. `main_entries` (cuda) holds the main replays done
 * already, else NULL. */
static vb_status evaluate_all(const vb_tune_options *options, const vb_tune_candidate *grid, size_t count,
                              json_t **main_entries, json_t **entries)
{
    /* Each child answers in a scratch file (app/scratch.h: unlinked, in
     * $TMPDIR), so no name is left behind whatever ends the tune. */
    pid_t *pids = calloc(count, sizeof *pids);
    int *answers = malloc(count * sizeof *answers);
    if (!pids || !answers) {
        free(pids);
        free(answers);
        return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    }
    for (size_t i = 0; i < count; i++) answers[i] = -1;
    size_t next = 0, running = 0, done = 0;
    vb_status status = VB_OK;
    uint64_t started = vb_now_ns();
    pid_t parent = getpid();
    fflush(NULL); /* nothing buffered is written twice by the children */
    while (done < count) {
        while (status == VB_OK && running < options->jobs && next < count) {
            if (!vb_shard_has(options->shard, next)) { /* another shard's (--shard) */
                next++;
                done++;
                continue;
            }
            answers[next] = vb_scratch_file();
            if (answers[next] < 0) {
                status = vb_error(VB_ERR_IO, "cannot make a temporary file in %s: %s", vb_scratch_directory(),
                                  strerror(errno));
                break;
            }
            pid_t pid = fork();
            if (pid < 0) {
                status = vb_error(VB_ERR_IO, "cannot start a process: %s", strerror(errno));
                break;
            }
            if (pid == 0) {
                /* A tune ended by a signal takes its children with it. */
                prctl(PR_SET_PDEATHSIG, SIGTERM);
                if (getppid() != parent) _exit(1);
                _exit(child_evaluate(options, &grid[next], next, main_entries ? main_entries[next] : NULL,
                                     answers[next]));
            }
            pids[next++] = pid;
            running++;
        }
        if (running == 0) break;
        int wait_status = 0;
        pid_t pid = wait(&wait_status);
        if (pid < 0) {
            status = vb_error(VB_ERR_IO, "waiting for a tune process: %s", strerror(errno));
            break;
        }
        size_t i = 0;
        while (i < next && pids[i] != pid) i++;
        if (i == next) continue;
        running--;
        done++;
        json_t *answer = lseek(answers[i], 0, SEEK_SET) == 0 ? json_loadfd(answers[i], 0, NULL) : NULL;
        close(answers[i]);
        answers[i] = -1;
        json_t *entry = json_object_get(answer, "entry");
        if (status == VB_OK && !entry) {
            const char *message = json_string_value(json_object_get(answer, "error"));
            vb_status child_status = (vb_status)json_integer_value(json_object_get(answer, "status"));
            status = message ? vb_error(child_status ? child_status : VB_ERR_INVALID, "%s", message)
                             : vb_error(VB_ERR_INVALID, "%s: the tune process failed (exit status %d)", grid[i].spec,
                                        WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1);
        }
        if (entry) entries[i] = json_incref(entry);
        json_decref(answer);
        if (status == VB_OK && !options->quiet)
            fprintf(stderr, "[%zu/%zu] %s ... done (elapsed %.1f s)\n", done, count, grid[i].spec,
                    (double)(vb_now_ns() - started) / 1e9);
    }
    /* After a failure: no new children; those still running are waited for. */
    while (running > 0 && wait(NULL) > 0) running--;
    for (size_t i = 0; i < count; i++)
        if (answers[i] >= 0) close(answers[i]);
    free(answers);
    free(pids);
    return status;
}

/* ======================================================================== */
/* Pareto front, recommendation, table                                      */
/* ======================================================================== */

/* A candidate's figures as ranking reads them: where one depends on how
 * far the GPU got, its side that protects the user (the most reserved,
 * the larger minimum); OOMs at the capacity counted when that side passes
 * it. */
typedef struct figures {
    double reserved, allocated, driver_calls, time_ns, ooms, min_capacity;
} figures;

static figures figures_of(const json_t *entry)
{
    double reserved = entry_number(entry, "peak_reserved_bytes");
    double reserved_max = entry_number(entry, "peak_reserved_bytes_max");
    double min_capacity = entry_number(entry, "min_capacity_bytes");
    double device_max = entry_number(entry, "min_device_bytes_max");
    double capacity = entry_number(entry, "capacity_bytes");
    double ooms = entry_number(entry, "ooms_at_capacity");
    if (reserved_max > reserved) reserved = reserved_max;
    if (min_capacity > 0 && device_max > min_capacity) min_capacity = device_max;
    if (ooms == 0 && json_is_true(json_object_get(entry, "progress_dependent")) && capacity > 0 && reserved > capacity)
        ooms = 1;
    return (figures){reserved, entry_number(entry, "peak_allocated_bytes"),
                     entry_number(entry, "driver_alloc_calls") + entry_number(entry, "driver_free_calls"),
                     entry_number(entry, "real_time"), ooms, min_capacity};
}

/* 1 if a is at least as good as b in peak reserved, driver calls and time,
 * and better in one. */
static int dominates(const figures *a, const figures *b)
{
    int no_worse = a->reserved <= b->reserved && a->driver_calls <= b->driver_calls && a->time_ns <= b->time_ns;
    int better = a->reserved < b->reserved || a->driver_calls < b->driver_calls || a->time_ns < b->time_ns;
    return no_worse && better;
}

/* Orders PyTorch candidates for the recommendation: no OOM at the capacity
 * first, then peak reserved, fewer settings, driver calls, time. */
static int better_choice(const figures *a, const vb_tune_candidate *ca, const figures *b, const vb_tune_candidate *cb)
{
    if ((a->ooms > 0) != (b->ooms > 0)) return a->ooms == 0;
    if (a->ooms > 0 && a->min_capacity != b->min_capacity)
        return a->min_capacity > 0 && (b->min_capacity == 0 || a->min_capacity < b->min_capacity);
    if (a->reserved != b->reserved) return a->reserved < b->reserved;
    if (ca->setting_count != cb->setting_count) return ca->setting_count < cb->setting_count;
    if (a->driver_calls != b->driver_calls) return a->driver_calls < b->driver_calls;
    return a->time_ns < b->time_ns;
}

static double mib(double bytes)
{
    return bytes / (double)VB_MiB;
}

/* A minimum in MiB, rounded up to `decimals` places: shown to the nearest,
 * 1764229120 bytes (1682.5 MiB) read "1682", a capacity that does not fit;
 * a minimum shown is one from which up it fits. */
static double mib_up(double bytes, int decimals)
{
    double scale = decimals ? pow(10.0, decimals) : 1.0;
    return ceil(bytes / (double)VB_MiB * scale) / scale;
}

/* The recommendation object (and its one-line reason); `events` (NULL when
 * shards are merged) only words the reason when nothing fits. */
static json_t *recommend(const vb_tune_candidate *grid, size_t count, json_t **entries, uint64_t capacity,
                         const vb_drive_events *events)
{
    size_t defaults = 0, best = 0, best_overall = 0;
    figures f[MAX_CANDIDATES] = {0}; /* count >= 1 fills f[0]; gcc -O3 cannot tell (maybe-uninitialized) */
    for (size_t i = 0; i < count; i++) f[i] = figures_of(entries[i]);
    for (size_t i = 0; i < count; i++) {
        if (grid[i].is_pytorch && grid[i].conf[0] == '\0') defaults = i;
        if (grid[i].is_pytorch && better_choice(&f[i], &grid[i], &f[best], &grid[best])) best = i;
        if (better_choice(&f[i], &grid[i], &f[best_overall], &grid[best_overall])) best_overall = i;
    }
    const figures *d = &f[defaults];
    char why[600];
    size_t chosen = best;
    /* better_choice puts a setting with a minimum capacity first: none has one. */
    int fits = f[best].ooms == 0 || f[best].min_capacity > 0;
    if (!fits) {
        chosen = defaults;
        uint64_t peak_live = events ? events->peak_live_bytes : 0, largest = events ? events->largest_bytes : 0;
        char reason[160];
        if (!events) /* merged shards (vb_tune_conclude): the trace is not at hand */
            snprintf(reason, sizeof reason, "no candidate found a capacity it fits");
        else if (largest > VB_FIT_MAX_CAPACITY)
            snprintf(reason, sizeof reason, "its largest allocation alone is %.1f MiB", mib((double)largest));
        else
            snprintf(reason, sizeof reason, "it holds %.1f MiB live at its peak%s", mib((double)peak_live),
                     peak_live > VB_FIT_MAX_CAPACITY ? "" : ", and the settings' rounding and fragmentation add more");
        snprintf(why, sizeof why,
                 "nothing fits: every PyTorch setting runs out of memory at %.0f MiB and under every capacity "
                 "up to the largest (" VB_FIT_MAX_CAPACITY_TEXT "): %s",
                 mib((double)capacity), reason);
    } else if (d->ooms == 0 && f[best].reserved > d->reserved * (1.0 - RECOMMEND_MIN_SAVING)) {
        chosen = defaults;
        snprintf(why, sizeof why,
                 "no PyTorch setting in the grid lowers peak reserved memory by %.0f%% or more against the defaults "
                 "(%.1f MiB); keep them",
                 RECOMMEND_MIN_SAVING * 100, mib(d->reserved));
    } else if (f[best].ooms > 0) {
        snprintf(why, sizeof why,
                 "every PyTorch setting runs out of memory at %.0f MiB; this one needs the least device memory "
                 "(%.0f MiB)",
                 mib((double)capacity), mib_up(f[best].min_capacity, 0));
    } else {
        snprintf(why, sizeof why,
                 "lowest peak reserved memory of the PyTorch settings with no OOM at %.0f MiB: %.1f MiB against "
                 "%.1f MiB with the defaults%s",
                 mib((double)capacity), mib(f[best].reserved), mib(d->reserved),
                 d->ooms > 0 ? ", which run out of memory" : "");
    }
    const figures *c = &f[chosen];
    json_t *saving = json_pack("{s:o,s:o,s:o}", "peak_reserved_bytes", vb_json_number(d->reserved - c->reserved),
                               "peak_reserved_percent",
                               vb_json_number(d->reserved > 0 ? 100.0 * (d->reserved - c->reserved) / d->reserved : 0),
                               "min_capacity_bytes", vb_json_number(d->min_capacity - c->min_capacity));
    json_t *recommendation =
        json_pack("{s:b,s:s,s:o,s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:{s:s,s:o}}", "fits", fits, "pytorch_alloc_conf",
                  grid[chosen].conf,
                  "memory_fraction",
                  grid[chosen].memory_fraction >= 0 ? vb_json_number(grid[chosen].memory_fraction) : json_null(),
                  "name", json_string_value(json_object_get(entries[chosen], "name")), "why", why,
                  "peak_reserved_bytes", vb_json_number(c->reserved), "min_capacity_bytes",
                  c->min_capacity > 0 ? vb_json_number(c->min_capacity) : json_null(), "defaults_peak_reserved_bytes",
                  vb_json_number(d->reserved), "defaults_min_capacity_bytes",
                  d->min_capacity > 0 ? vb_json_number(d->min_capacity) : json_null(), "saving", saving,
                  "best_strategy", "name", json_string_value(json_object_get(entries[best_overall], "name")),
                  "peak_reserved_bytes", vb_json_number(f[best_overall].reserved));
    /* What the user's GPU needs: the chosen setting's smallest common GPU
     * (its overhead included) and the device memory behind it. */
    const char *const carried[] = {"min_capacity_exact", "min_device_bytes_max", "peak_reserved_bytes_max",
                                   "gpu_overhead_bytes", "smallest_gpu"};
    for (size_t i = 0; recommendation && i < sizeof carried / sizeof carried[0]; i++) {
        json_t *value = json_object_get(entries[chosen], carried[i]);
        if (value) json_object_set(recommendation, carried[i], value);
    }
    return recommendation;
}

/* Marks on_pareto_front in each entry; the count on the front. */
static size_t mark_pareto(json_t **entries, size_t count)
{
    size_t front = 0;
    for (size_t i = 0; i < count; i++) {
        figures a = figures_of(entries[i]);
        int dominated = 0;
        for (size_t j = 0; j < count && !dominated; j++) {
            figures b = figures_of(entries[j]);
            dominated = j != i && dominates(&b, &a);
        }
        json_object_set_new(entries[i], "on_pareto_front", json_boolean(!dominated));
        front += !dominated;
    }
    return front;
}

/* "a" or, where the two sides differ, "a-b" (MiB, one decimal); minimums
 * (`up`) rounded up. */
static void mib_range(char *out, size_t capacity, double low, double high, int up)
{
    double shown_low = up ? mib_up(low, 1) : mib(low), shown_high = up ? mib_up(high, 1) : mib(high);
    if (high > low) snprintf(out, capacity, "%.1f-%.1f", shown_low, shown_high);
    else snprintf(out, capacity, "%.1f", shown_low);
}

/* The table: every candidate, the Pareto front marked, then the recommendation. */
static void print_table(FILE *out, const vb_tune_options *options, const vb_device_info *info,
                        const vb_tune_candidate *grid, json_t **entries, size_t count, const json_t *recommendation)
{
    fprintf(out, "vrambench tune: %s on %s%s; OOMs at %.0f MiB (simulated); min cap: the smallest PyTorch limit "
                 "(set_per_process_memory_fraction) from which up it fits\n",
            options->label, info->name, info->simulated ? " (SIMULATED: memory exact, times host-side)" : "",
            mib((double)(options->capacity ? options->capacity : VB_SIM_DEFAULT_CAPACITY)));
    fprintf(out, "%-2s %-72s %15s %9s %5s %9s %7s %5s %9s %13s %15s %s\n", "", VB_PYTORCH_CONF_ENV ", or [strategy]",
            "rsv MiB", "alloc MiB", "util", "drv calls", "retries", "OOMs", info->simulated ? "host ms" : "time ms", "min cap MiB", "device MiB",
            "smallest GPU");
    for (size_t i = 0; i < count; i++) {
        const json_t *e = entries[i];
        figures f = figures_of(e);
        const char *label = grid[i].is_pytorch ? grid[i].conf : grid[i].spec;
        char shown[300], reserved[48], capacity[32] = "-", device[48] = "-", gpu[64] = "-";
        snprintf(shown, sizeof shown, grid[i].is_pytorch ? "'%s'%s" : "[%s]%s", label,
                 grid[i].memory_fraction >= 0 ? " +fraction" : "");
        double low = entry_number(e, "peak_reserved_bytes_min"), high = entry_number(e, "peak_reserved_bytes_max");
        mib_range(reserved, sizeof reserved, low > 0 ? low : entry_number(e, "peak_reserved_bytes"),
                  high > 0 ? high : entry_number(e, "peak_reserved_bytes"), 0);
        double min_capacity = entry_number(e, "min_capacity_bytes"), lowest = entry_number(e, "min_capacity_lowest_fit");
        double placed_low = entry_number(e, "min_capacity_bytes_min");
        if (min_capacity > 0 && json_is_true(json_object_get(e, "min_capacity_exact")) && placed_low > 0 &&
            placed_low < min_capacity)
            snprintf(capacity, sizeof capacity, "%.0f-%.0f", mib_up(placed_low, 0), mib_up(min_capacity, 0));
        else if (min_capacity > 0 && json_is_true(json_object_get(e, "min_capacity_exact")))
            snprintf(capacity, sizeof capacity, "%.0f", mib_up(min_capacity, 0));
        else if (min_capacity > 0 && lowest > 0)
            snprintf(capacity, sizeof capacity, "~%.0f/%.0f", mib_up(lowest, 0), mib_up(min_capacity, 0));
        else if (min_capacity > 0)
            snprintf(capacity, sizeof capacity, "~%.0f", mib_up(min_capacity, 0));
        double device_low = entry_number(e, "min_device_bytes_min"), device_high = entry_number(e, "min_device_bytes_max");
        if (device_high > 0) mib_range(device, sizeof device, device_low, device_high, 1);
        const char *gpu_name = json_string_value(json_object_get(json_object_get(e, "smallest_gpu"), "name"));
        if (gpu_name) snprintf(gpu, sizeof gpu, "%s", gpu_name);
        fprintf(out, "%-2s %-72s %15s %9.1f %5.3f %9.0f %7.0f %5.0f %9.2f %13s %15s %s\n",
                json_is_true(json_object_get(e, "on_pareto_front")) ? "*" : "", shown, reserved, mib(f.allocated),
                f.reserved > 0 ? f.allocated / f.reserved : 0.0, f.driver_calls,
                entry_number(e, "alloc_retries_at_capacity"), f.ooms, f.time_ns / 1e6, capacity, device, gpu);
    }
    fprintf(out, "  * on the Pareto front of peak reserved, driver calls (allocs + frees) and replay time; util = peak "
                 "allocated / peak reserved;\n    +fraction: with torch.cuda.set_per_process_memory_fraction(0.99), "
                 "which garbage collection needs;\n    min cap: from there up it fits, every capacity checked; "
                 "~a/b: a bisection's answer a (it fits there), every capacity from b up checked;\n    a-b: the "
                 "async backend: from the GPU infinitely fast to as late as the trace allows; PyTorch's caching\n"
                 "    allocator: from the driver placing new segments below all others to above them (ranked by b; "
                 "min cap: it fits from b up\n    either way); device MiB: the memory a GPU must leave PyTorch (from "
                 "there up it fits); smallest GPU: the first class\n    whose smallest model holds that plus %.0f MiB "
                 "overhead\n",
            mib((double)options->overhead));
    if (info->simulated)
        fprintf(out, "  host ms: the replay's host-side time (the allocator's code and the simulated device's model), "
                     "not a GPU time\n");
    if (!recommendation) return; /* a shard's */
    const json_t *saving = json_object_get(recommendation, "saving");
    char fraction[96] = "";
    if (!json_is_null(json_object_get(recommendation, "memory_fraction")))
        snprintf(fraction, sizeof fraction, " with torch.cuda.set_per_process_memory_fraction(%g)",
                 entry_number(recommendation, "memory_fraction"));
    if (!json_is_true(json_object_get(recommendation, "fits"))) {
        fprintf(out, "recommendation: none\n  why: %s\n", json_string_value(json_object_get(recommendation, "why")));
        return;
    }
    fprintf(out, "recommendation: " VB_PYTORCH_CONF_ENV "='%s'%s (older PyTorch: "
                 VB_PYTORCH_CONF_ENV_DEPRECATED ")\n  why: %s\n  saving against the defaults: %.1f MiB "
                 "peak reserved (%.1f%%), %.0f MiB of minimum device capacity\n",
            json_string_value(json_object_get(recommendation, "pytorch_alloc_conf")),
            fraction,
            json_string_value(json_object_get(recommendation, "why")),
            mib(entry_number(saving, "peak_reserved_bytes")), entry_number(saving, "peak_reserved_percent"),
            mib(entry_number(saving, "min_capacity_bytes")));
    const json_t *gpu = json_object_get(recommendation, "smallest_gpu");
    double need = entry_number(recommendation, "min_capacity_bytes");
    if (entry_number(recommendation, "min_device_bytes_max") > need) need = entry_number(recommendation, "min_device_bytes_max");
    if (json_is_object(gpu))
        fprintf(out, "  smallest GPU: %s (%s): %.0f MiB for PyTorch + %.0f MiB overhead; its smallest model reports "
                     "%.0f MiB\n",
                json_string_value(json_object_get(gpu, "name")), json_string_value(json_object_get(gpu, "models")),
                mib_up(need, 0), mib_up(entry_number(recommendation, "gpu_overhead_bytes"), 0),
                floor(mib(entry_number(gpu, "total_bytes"))));
    else if (json_object_get(recommendation, "smallest_gpu"))
        fprintf(out, "  smallest GPU: none of the common sizes (up to 141 GiB) holds %.0f MiB + %.0f MiB overhead\n",
                mib_up(need, 0), mib_up(entry_number(recommendation, "gpu_overhead_bytes"), 0));
}

/* ======================================================================== */
/* Shards (--shard I/N) and their merge                                      */
/* ======================================================================== */

/* A shard's document: its candidates' entries (the others are NULL in
 * `entries`), the context saying which shard; no front, no recommendation.
 * Prints its candidates' table. NULL on host OOM. */
static json_t *shard_document(const vb_tune_options *options, vb_device *dev, const vb_tune_candidate *grid,
                              size_t count, json_t **entries, const vb_allocator_spec *specs, size_t spec_count,
                              const vb_device_info *info, FILE *table)
{
    json_t *doc = vb_report_document(vb_report_context(dev, NULL, specs, spec_count));
    if (!doc || vb_shard_describe(json_object_get(doc, "context"), options->shard, count) != 0) {
        json_decref(doc);
        return NULL;
    }
    vb_tune_candidate shown[MAX_CANDIDATES];
    json_t *shown_entries[MAX_CANDIDATES];
    size_t held = 0;
    for (size_t i = 0; i < count; i++) {
        if (!entries[i]) continue;
        shown[held] = grid[i];
        shown_entries[held++] = entries[i];
        if (json_array_append(json_object_get(doc, "benchmarks"), entries[i]) != 0) {
            json_decref(doc);
            return NULL;
        }
    }
    if (table) { /* NULL: --quiet */
        print_table(table, options, info, shown, shown_entries, held, NULL);
        fprintf(table, "shard %zu/%zu: %zu of the %zu candidates; the recommendation comes with `vrambench merge` of "
                       "all %zu shards\n",
                options->shard.index, options->shard.count, held, count, options->shard.count);
    }
    return doc;
}

vb_status vb_tune_conclude(json_t *document)
{
    size_t count;
    const vb_tune_candidate *grid = vb_tune_grid(&count);
    json_t *benchmarks = json_object_get(document, "benchmarks"), *entries[MAX_CANDIDATES] = {0};
    if (json_array_size(benchmarks) != count)
        return vb_error(VB_ERR_INVALID, "the tune's entries are %zu, not the %zu candidates of the grid (a shard "
                                        "missing, or a tune of another vrambench version)",
                        json_array_size(benchmarks), count);
    size_t i;
    json_t *entry;
    json_array_foreach(benchmarks, i, entry) {
        json_t *index = json_object_get(entry, "per_family_instance_index");
        json_int_t k = json_is_integer(index) ? json_integer_value(index) : -1;
        const char *conf = json_string_value(json_object_get(entry, "pytorch_alloc_conf"));
        if (k < 0 || (size_t)k >= count || entries[k] || grid[k].is_pytorch != (conf != NULL) ||
            (conf && strcmp(conf, grid[k].conf) != 0))
            return vb_error(VB_ERR_INVALID, "tune entry %zu is not candidate %lld of this vrambench's grid (or "
                                            "comes twice)", i, (long long)k);
        entries[k] = entry;
    }
    mark_pareto(entries, count);
    uint64_t capacity = (uint64_t)entry_number(entries[0], "capacity_bytes");
    json_t *recommendation = recommend(grid, count, entries, capacity ? capacity : VB_SIM_DEFAULT_CAPACITY, NULL);
    if (!recommendation || json_object_set_new(document, "recommendation", recommendation) != 0)
        return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    return VB_OK;
}

/* ======================================================================== */
/* The whole tune                                                           */
/* ======================================================================== */

vb_status vb_tune_run(const vb_tune_options *given, FILE *table, json_t **document)
{
    vb_tune_options copy = *given, *options = &copy;
    vb_drive_events events;
    vb_status status = vb_drive_load(options->trace_path, &events);
    if (status != VB_OK) return status;
    options->events = &events;
    size_t count;
    const vb_tune_candidate *grid = vb_tune_grid(&count);
    vb_allocator_spec specs[MAX_CANDIDATES];
    size_t spec_count = 0;
    json_t *main_entries[MAX_CANDIDATES] = {0}, *entries[MAX_CANDIDATES] = {0};
    vb_device *dev = NULL;
    int on_cuda = strcmp(options->device, "cuda") == 0;
    vb_device_options device_options = {.sim_capacity_bytes = on_cuda ? 0 : options->capacity};
    status = vb_device_open(options->device, &device_options, &dev);
    for (size_t i = 0; i < count && status == VB_OK; i++) {
        status = vb_allocator_spec_parse(grid[i].spec, &specs[i]);
        if (status == VB_OK) spec_count++;
    }
    /* On the GPU the main replays run here, one after another; the sim
     * work (bisection, OOMs at the capacity) is then spread over processes. */
    for (size_t i = 0; on_cuda && i < count && status == VB_OK; i++) {
        if (!vb_shard_has(options->shard, i)) continue;
        main_entries[i] = main_replay(dev, options, &grid[i], i, &status);
        if (status == VB_OK && !options->quiet) fprintf(stderr, "[%zu/%zu] %s on the GPU\n", i + 1, count, grid[i].spec);
    }
    if (status == VB_OK) status = evaluate_all(options, grid, count, on_cuda ? main_entries : NULL, entries);
    json_t *doc = NULL;
    if (status == VB_OK && options->shard.count > 1) {
        vb_device_info info;
        dev->ops->info(dev, &info);
        doc = shard_document(options, dev, grid, count, entries, specs, spec_count, &info, table);
        if (!doc) status = vb_error(VB_ERR_HOST_OOM, "out of host memory");
    } else if (status == VB_OK) {
        vb_device_info info;
        dev->ops->info(dev, &info);
        mark_pareto(entries, count);
        uint64_t capacity = options->capacity ? options->capacity : VB_SIM_DEFAULT_CAPACITY;
        json_t *recommendation = recommend(grid, count, entries, capacity, options->events);
        doc = vb_report_document(vb_report_context(dev, NULL, specs, spec_count));
        json_t *benchmarks = json_object_get(doc, "benchmarks");
        for (size_t i = 0; doc && i < count; i++) json_array_append(benchmarks, entries[i]);
        if (!doc || !recommendation || json_object_set(doc, "recommendation", recommendation) != 0) {
            json_decref(doc);
            doc = NULL;
            status = vb_error(VB_ERR_HOST_OOM, "out of host memory");
        } else if (table) {
            print_table(table, options, &info, grid, entries, count, recommendation);
        }
        json_decref(recommendation);
    }
    for (size_t i = 0; i < count; i++) {
        json_decref(main_entries[i]);
        json_decref(entries[i]);
    }
    for (size_t i = 0; i < spec_count; i++) vb_allocator_spec_free(&specs[i]);
    vb_device_close(dev);
    vb_drive_events_free(&events);
    *document = doc;
    return status;
}
