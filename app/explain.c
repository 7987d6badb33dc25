/* vrambench — `explain`: a replay to its first out-of-memory, and why (see
 * explain.h). */
#include "explain.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fit.h"
#include "input_file.h"
#include "json_report.h"
#include "scratch.h"
#include "snapshot.h"
#include "trace.h"
#include "trace_drive.h"
#include "tune.h"

/* A stream of a pool with free bytes in segments that hold live blocks. */
#define MAX_SHARES 64

typedef struct share {
    int pool;        /* 0: the strategy has no pools; 1 small; 2 large */
    uint32_t stream; /* the trace's stream id */
    uint64_t bytes;
} share;

/* The allocator's memory at one moment, reserved - allocated by cause. */
typedef struct memory_state {
    uint64_t reserved, allocated, requested, largest_free;
    uint64_t in_live_segments, kept_whole, cached_segments, waiting, rounding;
    /* the async backend's memory is the driver's pool: what it holds and
     * has not handed out is free there or waits for the GPU to pass its
     * frees, laid out as the driver keeps it (no block is seen from here) */
    uint64_t in_driver_pool;
    int largest_free_known;
    share shares[MAX_SHARES];
    size_t share_count;
    int partial; /* more (pool, stream) pairs than MAX_SHARES: the rest summed into the last */
} memory_state;

/* ======================================================================== */
/* The trace, with its recorded out-of-memory requests asked again          */
/* ======================================================================== */

/* What the trace says of the failures in the recorded program: the first
 * one, and how many. */
typedef struct recorded_oom {
    int present;
    uint64_t line, size;
    uint32_t stream;
    uint64_t count;
} recorded_oom;

/* The trace explained: the input, or, when it records failures, a copy in
 * which each becomes an allocation (PyTorch's OOM, asked again) freed
 * before the trace's next event (it never lived in the recorded program;
 * one the trace ends with stays live, as the request was at the end): a
 * scratch file (app/scratch.h: unlinked, nothing left behind whatever ends
 * the command) read as the spooled input `path` (app/input_file.h). The
 * whole trace is copied, not cut at its first failure: a program that
 * caught its OOM and went on allocated after it, and a verdict of "fits"
 * must cover that too. lines[k] is the input's line of the copy's line
 * k + 2 (the header is line 1); failed_lines are the input's lines of its
 * recorded failures, in order. */
typedef struct explained_trace {
    char path[4200];
    int copied; /* path names the copy */
    uint64_t *lines;
    size_t line_count, line_capacity;
    uint64_t *failed_lines;
    size_t failed_count, failed_capacity;
    recorded_oom recorded;
} explained_trace;

/* Appends `value` to a growable list; VB_OK or VB_ERR_HOST_OOM. */
static vb_status append_u64(uint64_t **list, size_t *count, size_t *capacity, uint64_t value)
{
    if (*count == *capacity) {
        size_t grown = *capacity ? *capacity * 2 : 4096;
        uint64_t *more = realloc(*list, grown * sizeof *more);
        if (!more) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
        *list = more;
        *capacity = grown;
    }
    (*list)[(*count)++] = value;
    return VB_OK;
}

/* Writes one line of the copy, made from the input's line `line`. */
static vb_status copy_line(explained_trace *t, FILE *out, uint64_t line, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vfprintf(out, format, args);
    va_end(args);
    return append_u64(&t->lines, &t->line_count, &t->line_capacity, line);
}

/* Writes the copy when the trace records a failure; none: the input is
 * read as it is (no copy). */
static vb_status copy_trace(const char *input, explained_trace *t)
{
    memset(t, 0, sizeof *t);
    snprintf(t->path, sizeof t->path, "%s", input);
    vb_trace *trace = NULL;
    vb_status status = vb_trace_open(input, &trace);
    vb_trace_event event;
    while (status == VB_OK) { /* a first look: does it record a failure? */
        status = vb_trace_next(trace, &event);
        if (status != VB_OK || event.kind == VB_TRACE_END) break;
        if (event.kind == VB_TRACE_FAILED_ALLOC) {
            if (!t->recorded.present)
                t->recorded = (recorded_oom){1, vb_trace_line(trace), event.size, event.stream, 0};
            t->recorded.count++;
        }
    }
    vb_trace_close(trace);
    if (status != VB_OK || !t->recorded.present) return status;

    int copy = vb_scratch_file();
    FILE *out = vb_scratch_stream(copy, "w");
    if (!out) {
        vb_status error = vb_error(VB_ERR_IO, "cannot make a temporary file in %s: %s", vb_scratch_directory(),
                                   strerror(errno));
        if (copy >= 0) close(copy);
        return error;
    }
    snprintf(t->path, sizeof t->path, "%s (its recorded out-of-memory requests asked again)", input);
    fputs("vbtrace 1\n", out);
    status = vb_trace_open(input, &trace);
    uint64_t next_id = 0;
    int asked = 0; /* a recorded request is live in the copy, id next_id - 1 */
    uint32_t asked_stream = 0;
    uint64_t asked_line = 0;
    while (status == VB_OK) {
        status = vb_trace_next(trace, &event);
        if (status != VB_OK || event.kind == VB_TRACE_END) break;
        uint64_t line = vb_trace_line(trace);
        if (asked) {
            status = copy_line(t, out, asked_line, "f %llu %u\n", (unsigned long long)(next_id - 1), asked_stream);
            asked = 0;
            if (status != VB_OK) break;
        }
        switch (event.kind) {
        case VB_TRACE_ALLOC:
            vb_trace_tag(trace, next_id + 1);
            status = copy_line(t, out, line, "a %llu %llu %u\n", (unsigned long long)next_id++,
                               (unsigned long long)event.size, event.stream);
            break;
        case VB_TRACE_FREE:
            status = copy_line(t, out, line, "f %llu %u\n", (unsigned long long)(event.tag - 1), event.stream);
            break;
        case VB_TRACE_MARK: status = copy_line(t, out, line, "m %s\n", event.name); break;
        case VB_TRACE_FAILED_ALLOC:
            status = copy_line(t, out, line, "a %llu %llu %u\n", (unsigned long long)next_id++,
                               (unsigned long long)event.size, event.stream);
            if (status == VB_OK) status = append_u64(&t->failed_lines, &t->failed_count, &t->failed_capacity, line);
            asked = 1;
            asked_stream = event.stream;
            asked_line = line;
            break;
        case VB_TRACE_END: break;
        }
    }
    vb_trace_close(trace);
    if ((ferror(out) | fclose(out)) && status == VB_OK)
        status = vb_error(VB_ERR_IO, "cannot write a temporary file in %s: %s", vb_scratch_directory(),
                          strerror(errno));
    if (status != VB_OK) {
        close(copy);
        return status;
    }
    status = vb_input_adopt(t->path, copy);
    t->copied = status == VB_OK;
    return status;
}

/* The input's line of a line of the trace explained. */
static uint64_t input_line(const explained_trace *t, uint64_t line)
{
    if (!t->copied) return line;
    return line >= 2 && line - 2 < t->line_count ? t->lines[line - 2] : line;
}

/* 1 when the input's line `line` is one of its recorded failures. */
static int is_recorded_failure(const explained_trace *t, uint64_t line)
{
    size_t low = 0, high = t->failed_count;
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        if (t->failed_lines[middle] < line) low = middle + 1;
        else high = middle;
    }
    return low < t->failed_count && t->failed_lines[low] == line;
}

static void trace_done(explained_trace *t)
{
    free(t->lines);
    free(t->failed_lines);
    if (t->copied) vb_input_forget(t->path);
    memset(t, 0, sizeof *t);
}

/* ======================================================================== */
/* One replay, held open                                                     */
/* ======================================================================== */

typedef struct session {
    vb_drive_target target;
    vb_allocator *allocator;
    /* the first out-of-memory: its allocation's number (1-based), size and stream */
    uint64_t allocations, failing, failing_size;
    uint32_t failing_stream;
    /* pass 2: the state when the failing request came */
    const char *max_split;
    int pools;
    int driver_pool; /* the async backend: its memory is a driver's pool */
    memory_state at_request;
    int taken;
} session;

static vb_status session_open(session *s, const vb_allocator_spec *spec, uint64_t sim_capacity)
{
    vb_config config = vb_allocator_spec_config(spec);
    vb_status status = vb_sim_open(sim_capacity, &s->target.device);
    if (status == VB_OK) status = vb_allocator_create(spec->name, s->target.device, &config, &s->allocator);
    s->target.allocator = s->allocator;
    return status;
}

static void session_close(session *s)
{
    vb_allocator_destroy(s->allocator);
    s->allocator = NULL;
    if (s->target.device) {
        vb_drive_target_close(&s->target);
        vb_device_close(s->target.device);
        s->target.device = NULL;
    }
}

static vb_status session_drive(session *s, const char *path, const vb_drive_hooks *hooks, vb_drive_result *out)
{
    vb_trace *trace = NULL;
    vb_status status = vb_trace_open(path, &trace);
    if (status == VB_OK) status = vb_drive(&(vb_drive_source){.trace = trace}, &s->target, hooks, 1, out);
    vb_trace_close(trace);
    return status;
}

/* ======================================================================== */
/* The memory by cause                                                       */
/* ======================================================================== */

static uint32_t stream_id(const session *s, vb_stream stream)
{
    for (uint32_t i = 0; i < VB_TRACE_MAX_STREAMS; i++)
        if (s->target.streams[i] && s->target.streams[i] == stream) return i;
    return 0;
}

static void add_share(memory_state *m, int pool, uint32_t stream, uint64_t bytes)
{
    for (size_t i = 0; i < m->share_count; i++)
        if (m->shares[i].pool == pool && m->shares[i].stream == stream) {
            m->shares[i].bytes += bytes;
            return;
        }
    if (m->share_count == MAX_SHARES) {
        m->shares[MAX_SHARES - 1].bytes += bytes;
        m->partial = 1;
        return;
    }
    m->shares[m->share_count++] = (share){pool, stream, bytes};
}

/* The allocator's memory now, by cause. `max_split` is max_split_size in
 * bytes (0: none); `pools`: the strategy keeps PyTorch's small and large
 * pools (a segment holding a live block of 1 MiB or less is small). */
static vb_status take_state(session *s, uint64_t max_split, int pools, memory_state *m)
{
    memset(m, 0, sizeof *m);
    vb_alloc_stats stats;
    vb_allocator_stats(s->allocator, &stats);
    m->reserved = stats.reserved_bytes;
    m->allocated = stats.allocated_bytes;
    m->requested = stats.requested_bytes;
    m->largest_free = stats.largest_free_block;
    struct {
        vb_block_info *items;
        size_t count;
    } list;
    vb_status status = vb_allocator_blocks(s->allocator, &list.items, &list.count);
    if (status != VB_OK) return status;
    uint64_t free_bytes = 0;
    for (size_t i = 0; i < list.count;) {
        size_t end = i;
        int live = 0, small = 0;
        while (end < list.count && list.items[end].segment == list.items[i].segment) {
            if (list.items[end].allocated) {
                live = 1;
                small |= list.items[end].block_size <= VB_MiB;
            }
            end++;
        }
        for (size_t b = i; b < end; b++) {
            const vb_block_info *block = &list.items[b];
            if (block->allocated) continue;
            free_bytes += block->block_size;
            if (max_split && block->block_size >= max_split) m->kept_whole += block->block_size;
            else if (live) add_share(m, pools ? (small ? 1 : 2) : 0, stream_id(s, block->stream), block->block_size);
            else m->cached_segments += block->block_size;
        }
        i = end;
    }
    free(list.items);
    for (size_t i = 0; i < m->share_count; i++) m->in_live_segments += m->shares[i].bytes;
    uint64_t unallocated = m->reserved - m->allocated;
    uint64_t unseen = unallocated > free_bytes ? unallocated - free_bytes : 0;
    if (s->driver_pool) m->in_driver_pool = unseen; /* not rounding: free in the pool, in pieces we cannot see */
    else m->rounding = unseen;
    m->largest_free_known = !s->driver_pool;
    return VB_OK;
}

/* ---- hooks ---- */

static void count_and_note_oom(void *context, vb_addr addr, uint64_t size, uint32_t stream, int oom)
{
    (void)addr;
    session *s = context;
    s->allocations++;
    if (oom && !s->failing) {
        s->failing = s->allocations;
        s->failing_size = size;
        s->failing_stream = stream;
    }
}

static uint64_t max_split_of(const session *s);

static void state_before_failing(void *context, uint64_t size, uint32_t stream)
{
    (void)size;
    (void)stream;
    session *s = context;
    if (++s->allocations != s->failing || s->taken) return;
    s->taken = take_state(s, max_split_of(s), s->pools, &s->at_request) == VB_OK;
}

static uint64_t max_split_of(const session *s)
{
    if (!s->max_split) return 0;
    char *end = NULL;
    unsigned long long mib = strtoull(s->max_split, &end, 10);
    return end != s->max_split && *end == '\0' && mib < UINT64_MAX / VB_MiB ? mib * VB_MiB : 0;
}

/* ======================================================================== */
/* JSON and the table                                                        */
/* ======================================================================== */

/* Prints to the table, when there is one (NULL: explain --quiet). */
static void say(FILE *table, const char *format, ...) __attribute__((format(printf, 2, 3)));
static void say(FILE *table, const char *format, ...)
{
    if (!table) return;
    va_list arguments;
    va_start(arguments, format);
    vfprintf(table, format, arguments);
    va_end(arguments);
}

static double mib(uint64_t bytes)
{
    return (double)bytes / (double)VB_MiB;
}

static const char *pool_name(int pool)
{
    return pool == 1 ? "small" : pool == 2 ? "large" : NULL;
}

static json_t *state_json(const memory_state *m)
{
    json_t *shares = json_array();
    for (size_t i = 0; shares && i < m->share_count; i++) {
        const char *pool = pool_name(m->shares[i].pool);
        json_array_append_new(shares, json_pack("{s:o,s:I,s:o}", "pool", pool ? json_string(pool) : json_null(),
                                                "stream", (json_int_t)m->shares[i].stream, "bytes",
                                                vb_json_number((double)m->shares[i].bytes)));
    }
    return json_pack("{s:o,s:o,s:o,s:o,s:o,s:{s:o,s:o,s:o,s:o,s:o,s:o},s:o,s:b}", "reserved_bytes",
                     vb_json_number((double)m->reserved), "allocated_bytes", vb_json_number((double)m->allocated),
                     "requested_bytes", vb_json_number((double)m->requested), "largest_free_block",
                     m->largest_free_known ? vb_json_number((double)m->largest_free) : json_null(),
                     "reserved_unallocated_bytes",
                     vb_json_number((double)(m->reserved - m->allocated)), "by_cause", "free_in_live_segments",
                     vb_json_number((double)m->in_live_segments), "kept_whole_by_max_split_size",
                     vb_json_number((double)m->kept_whole), "cached_segments",
                     vb_json_number((double)m->cached_segments), "waiting_on_events",
                     vb_json_number((double)m->waiting), "rounding", vb_json_number((double)m->rounding),
                     "in_driver_pool", vb_json_number((double)m->in_driver_pool),
                     "free_in_live_segments", shares ? shares : json_array(), "more_streams_summed", m->partial);
}

static void print_state(FILE *out, const char *title, const memory_state *m)
{
    if (!out) return;
    fprintf(out, "  %s:\n", title);
    fprintf(out, "    reserved %.1f MiB, allocated %.1f MiB, requested %.1f MiB, ", mib(m->reserved),
            mib(m->allocated), mib(m->requested));
    if (m->largest_free_known) fprintf(out, "largest free block %.1f MiB\n", mib(m->largest_free));
    else fprintf(out, "largest free block not known (the driver's pool keeps its layout)\n");
    fprintf(out, "    reserved but unallocated %.1f MiB:\n", mib(m->reserved - m->allocated));
    fprintf(out, "      %10.1f MiB free in segments that hold live blocks", mib(m->in_live_segments));
    for (size_t i = 0; i < m->share_count; i++) {
        const char *pool = pool_name(m->shares[i].pool);
        fprintf(out, "%s %s%sstream %u: %.1f", i ? "," : ":", pool ? pool : "", pool ? " pool, " : "",
                m->shares[i].stream, mib(m->shares[i].bytes));
    }
    fprintf(out, "\n      %10.1f MiB in free blocks kept whole by max_split_size\n", mib(m->kept_whole));
    fprintf(out, "      %10.1f MiB in cached segments with no live block\n", mib(m->cached_segments));
    fprintf(out, "      %10.1f MiB waiting on other streams' events (a trace carries no record_stream)\n",
            mib(m->waiting));
    if (m->in_driver_pool)
        fprintf(out, "      %10.1f MiB in the driver's pool, free or waiting for the GPU to pass their frees (in pieces "
                     "the pool lays out)\n", mib(m->in_driver_pool));
    else
        fprintf(out, "      %10.1f MiB of rounding (reserved in no block: driver pages, a pool's granules)\n",
                mib(m->rounding));
}

/* ======================================================================== */
/* What if: every tune candidate under the same capacity                     */
/* ======================================================================== */

static vb_status what_if(const vb_explain_options *options, const explained_trace *t,
                         const vb_drive_events *events, FILE *table, json_t **out)
{
    vb_status status = VB_OK;
    size_t count;
    const vb_tune_candidate *grid = vb_tune_grid(&count);
    json_t *list = json_array();
    say(table, "what if (each tune candidate under %.0f MiB):\n", mib(options->capacity));
    for (size_t i = 0; i < count && status == VB_OK; i++) {
        vb_fit_result r, rising = {0};
        status = vb_fit_probe(events, grid[i].spec, options->capacity, VB_FIT_LIMIT, VB_SIM_PLACE_TOP_DOWN, 1, &r);
        if (status != VB_OK) break;
        /* Where the driver's placement of segments decides (app/fit.h), it
         * fits when it fits under both placements the sim models. */
        int placed = vb_fit_placement_matters(grid[i].spec);
        if (placed) {
            status = vb_fit_probe(events, grid[i].spec, options->capacity, VB_FIT_LIMIT, VB_SIM_PLACE_RISING, 1, &rising);
            if (status != VB_OK) break;
        }
        int split = placed && r.fits != rising.fits;
        /* By how much: under a limit, the capacities that make the same
         * decisions (under both placements: the nearer bound); the
         * strategies that never release memory to retry (cuda, and the
         * async backend, which PyTorch does not retry) fit exactly when
         * their peak does. */
        double spare = -1, shortfall = -1;
        if (split) {
            r.fits = 0;
            if (!r.first_oom_line) r.first_oom_line = rising.first_oom_line;
        } else if (r.limited) {
            uint64_t same_from = r.same_from, same_to = r.same_to;
            if (placed && rising.same_from > same_from) same_from = rising.same_from;
            if (placed && rising.same_to && (!same_to || rising.same_to < same_to)) same_to = rising.same_to;
            if (r.fits) spare = (double)(options->capacity - same_from);
            else if (same_to) shortfall = (double)(same_to - options->capacity);
        } else if (strstr(grid[i].spec, "cudaMallocAsync") || strcmp(grid[i].spec, "cuda") == 0) {
            vb_fit_result whole;
            status = vb_fit_probe(events, grid[i].spec, VB_FIT_MAX_CAPACITY / 64, VB_FIT_DEVICE, VB_SIM_PLACE_TOP_DOWN,
                                  1, &whole);
            if (status != VB_OK) break;
            r.fits = whole.peak_reserved <= options->capacity;
            if (r.fits) spare = (double)(options->capacity - whole.peak_reserved);
            else shortfall = (double)(whole.peak_reserved - options->capacity);
        }
        const char *label = grid[i].is_pytorch ? grid[i].conf : grid[i].spec;
        char margin[64] = "";
        if (split) snprintf(margin, sizeof margin, "OOM or fits: where the driver places segments decides");
        /* Bounds, each rounded to its safe side: the spare down, the shortfall up. */
        else if (spare >= 0)
            snprintf(margin, sizeof margin, "fits, with at least %.0f MiB to spare", floor(spare / (double)VB_MiB));
        else if (shortfall >= 0)
            snprintf(margin, sizeof margin, "OOM: needs at least %.0f MiB more", ceil(shortfall / (double)VB_MiB));
        else snprintf(margin, sizeof margin, "%s", r.fits ? "fits" : "OOM");
        char shown[300];
        snprintf(shown, sizeof shown, grid[i].is_pytorch ? "'%s'%s" : "[%s]%s", label,
                 grid[i].memory_fraction >= 0 ? " +fraction" : "");
        say(table, "  %-72s %s", shown, margin);
        if (!r.fits && r.first_oom_line)
            say(table, " (first at line %llu)", (unsigned long long)input_line(t, r.first_oom_line));
        say(table, "\n");
        json_array_append_new(
            list, json_pack("{s:s,s:o,s:b,s:b,s:b,s:o,s:o,s:o}", "candidate", grid[i].spec, "pytorch_alloc_conf",
                            grid[i].is_pytorch ? json_string(grid[i].conf) : json_null(), "capacity_is_limit",
                            r.limited, "fits", r.fits, "placement_dependent", split, "first_oom_line",
                            !r.fits && r.first_oom_line ? vb_json_number((double)input_line(t, r.first_oom_line))
                                                        : json_null(),
                            "spare_bytes_at_least", spare >= 0 ? vb_json_number(spare) : json_null(),
                            "short_bytes_at_least", shortfall >= 0 ? vb_json_number(shortfall) : json_null()));
    }
    *out = list;
    return status;
}

/* ======================================================================== */
/* The whole explain                                                         */
/* ======================================================================== */

vb_status vb_explain_run(const vb_explain_options *options, FILE *table, json_t **document)
{
    *document = NULL;
    vb_allocator_spec spec;
    uint64_t sim_capacity = 0;
    int limited = 0;
    vb_allocator_spec given;
    vb_status status = vb_allocator_spec_parse(options->spec, &given);
    if (status != VB_OK) return status;
    char label[sizeof given.label];
    snprintf(label, sizeof label, "%s", given.label);
    vb_allocator_spec_free(&given);
    status = vb_fit_spec(options->spec, options->capacity, VB_FIT_LIMIT, &spec, &sim_capacity, &limited);
    if (status != VB_OK) return status;
    explained_trace t;
    status = copy_trace(options->trace_path, &t);
    session *s = calloc(1, sizeof *s);
    if (!s && status == VB_OK) status = vb_error(VB_ERR_HOST_OOM, "out of host memory");
    for (size_t i = 0; s && i < spec.entry_count; i++)
        if (strcmp(spec.entries[i].key, "max_split_size_mb") == 0) s->max_split = spec.entries[i].value;
    if (s) s->pools = vb_fit_has_limit(spec.name);
    if (s) s->driver_pool = strcmp(spec.name, "async") == 0;

    /* Pass 1: where the first OOM is. */
    vb_drive_result result = {0};
    vb_alloc_stats end_stats = {0};
    memory_state at_oom = {0};
    if (status == VB_OK) status = session_open(s, &spec, sim_capacity);
    if (status == VB_OK) {
        vb_drive_hooks hooks = {.context = s, .after_alloc = count_and_note_oom};
        status = session_drive(s, t.path, &hooks, &result);
    }
    if (status == VB_OK) vb_allocator_stats(s->allocator, &end_stats);
    uint64_t failing = s ? s->failing : 0;
    if (s) session_close(s);
    /* Pass 2: the same replay, the state taken when the failing request
     * comes and when it has failed. */
    if (status == VB_OK && failing) {
        uint64_t failing_size = s->failing_size;
        uint32_t failing_stream = s->failing_stream;
        s->allocations = 0;
        status = session_open(s, &spec, sim_capacity);
        if (status == VB_OK) {
            vb_drive_hooks hooks = {.context = s, .before_alloc = state_before_failing};
            status = session_drive(s, t.path, &hooks, &result);
        }
        if (status == VB_OK && !s->taken) status = vb_error(VB_ERR_INVALID, "explain: the replay did not repeat itself");
        if (status == VB_OK) status = take_state(s, max_split_of(s), s->pools, &at_oom);
        s->failing_size = failing_size;
        s->failing_stream = failing_stream;
        session_close(s);
    }

    /* The replay places new segments top-down, as the driver mostly does;
     * where that decides (app/fit.h), the other placement's outcome too. */
    vb_fit_result rising = {0};
    int placed = status == VB_OK && vb_fit_placement_matters(options->spec);
    vb_drive_events events = {0}; /* read once, for the probes below */
    if (status == VB_OK && (placed || options->what_if)) status = vb_drive_load(t.path, &events);
    if (status == VB_OK && placed)
        status = vb_fit_probe(&events, options->spec, options->capacity, VB_FIT_LIMIT, VB_SIM_PLACE_RISING, 1,
                              &rising);
    int placement_decides = placed && rising.fits == (failing != 0);

    uint64_t line = failing ? input_line(&t, result.first_oom_line) : 0;
    int at_recorded = failing && is_recorded_failure(&t, line);
    json_t *doc = NULL;
    if (status == VB_OK) {
        say(table, "vrambench explain: %s with %s under %.1f MiB (%s)\n", options->input_label, label,
            mib(options->capacity),
            limited ? "PyTorch's limit: set_per_process_memory_fraction" : "a device's memory");
        json_t *oom = json_null();
        if (failing) {
            say(table, "out of memory at trace line %llu: %llu bytes (%.1f MiB) asked on stream %u",
                (unsigned long long)line, (unsigned long long)s->failing_size, mib(s->failing_size),
                s->failing_stream);
            if (at_recorded) say(table, " (the request the recorded program could not serve)\n");
            else if (t.recorded.present && line < t.recorded.line)
                say(table, " (before the request the recorded program could not serve, at line %llu)\n",
                    (unsigned long long)t.recorded.line);
            else if (t.recorded.present)
                say(table, " (after the request the recorded program could not serve, at line %llu, was served)\n",
                    (unsigned long long)t.recorded.line);
            else say(table, "\n");
            print_state(table, "when the request came", &s->at_request);
            print_state(table, "when the allocator gave up (after releasing what it could: PyTorch's message)",
                        &at_oom);
            oom = json_pack("{s:o,s:o,s:I,s:b,s:o,s:o}", "line", vb_json_number((double)line), "request_bytes",
                            vb_json_number((double)s->failing_size), "stream", (json_int_t)s->failing_stream,
                            "recorded", at_recorded, "at_request", state_json(&s->at_request), "at_oom",
                            state_json(&at_oom));
        } else {
            say(table, "it fits: no allocation runs out of memory (peak reserved %.1f MiB)\n",
                mib(end_stats.reserved_bytes_peak));
            if (t.recorded.count == 1)
                say(table, "  the request the recorded program could not serve (line %llu, %llu bytes) is served: "
                           "the capacity given is more than it had\n",
                    (unsigned long long)t.recorded.line, (unsigned long long)t.recorded.size);
            else if (t.recorded.present)
                say(table, "  the %llu requests the recorded program could not serve (the first at line %llu, %llu "
                           "bytes) are served: the capacity given is more than it had\n",
                    (unsigned long long)t.recorded.count, (unsigned long long)t.recorded.line,
                    (unsigned long long)t.recorded.size);
        }
        if (placement_decides && failing)
            say(table, "  (with the driver placing new segments above the others instead of below, it fits: "
                       "where the driver puts segments decides here; docs/tune.md)\n");
        else if (placement_decides)
            say(table, "  but with the driver placing new segments above the others instead of below, it runs out "
                       "at trace line %llu: where the driver puts segments decides here (docs/tune.md)\n",
                (unsigned long long)input_line(&t, rising.first_oom_line));
        json_t *recorded = t.recorded.present
                               ? json_pack("{s:o,s:o,s:I,s:b,s:o}", "line", vb_json_number((double)t.recorded.line),
                                           "request_bytes", vb_json_number((double)t.recorded.size), "stream",
                                           (json_int_t)t.recorded.stream, "reproduced", at_recorded, "count",
                                           vb_json_number((double)t.recorded.count))
                               : json_null();
        doc = json_pack("{s:s,s:s,s:s,s:o,s:b,s:b,s:o,s:o,s:o,s:o}", "trace", options->input_label, "allocator",
                        options->spec, "allocator_label", label, "capacity_bytes",
                        vb_json_number((double)options->capacity), "capacity_is_limit", limited, "fits", !failing,
                        "peak_reserved_bytes", vb_json_number((double)end_stats.reserved_bytes_peak), "oom", oom,
                        "recorded_oom", recorded, "snapshot", json_null());
        if (!doc) status = vb_error(VB_ERR_HOST_OOM, "out of host memory");
        if (doc && placed &&
            json_object_set_new(doc, "fits_by_placement",
                                json_pack("{s:b,s:b}", "top-down", !failing, "rising", rising.fits)) != 0)
            status = vb_error(VB_ERR_HOST_OOM, "out of host memory");
    }
    if (status == VB_OK && options->what_if) {
        json_t *list = NULL;
        status = what_if(options, &t, &events, table, &list);
        if (list) json_object_set_new(doc, "what_if", list);
    }
    if (status == VB_OK && options->snapshot_path) {
        status = vb_snapshot_write_until(t.path, &spec, sim_capacity, VB_SIM_PLACE_TOP_DOWN, 1, options->snapshot_path);
        if (status == VB_OK) {
            json_object_set_new(doc, "snapshot", json_string(options->snapshot_path));
            say(table, "snapshot of %s: %s (PyTorch's viewer: pytorch.org/memory_viz)\n",
                failing ? "that moment" : "the end", options->snapshot_path);
        }
    }
    free(s);
    vb_drive_events_free(&events);
    trace_done(&t);
    vb_allocator_spec_free(&spec);
    if (status != VB_OK) {
        json_decref(doc);
        return status;
    }
    *document = doc;
    return VB_OK;
}
