/* vrambench tests — the trace driver (app/trace_drive.h): a trace being
 * read is driven in batches read ahead of the allocator's calls, and must
 * drive exactly as its events loaded into memory do; errors name the line
 * of the event, not the line the reader is at; the allocations a trace
 * leaves live come back tagged with their block keys; and a replay's
 * regular samples fall where the driven event is in the file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "app/trace_drive.h"
#include "base/device.h"
#include "temp_dir.h"
#include "test_random.h"

static vb_temp_dir dir;

static int setup(void **state)
{
    (void)state;
    return vb_temp_dir_make(&dir, "drive");
}

static int teardown(void **state)
{
    (void)state;
    return vb_temp_dir_remove(&dir);
}

/* Writes a random vbtrace of `events` events to `name` (in the test's
 * directory): allocations of up to `max_size` bytes on four streams, ids
 * taken again after their free, a marker every 1,000 events, and the
 * allocations live at the end left live. Returns its path. */
static const char *write_random_trace(const char *name, unsigned events, uint64_t max_size, uint64_t seed)
{
    const char *path = vb_temp_dir_file(&dir, name);
    FILE *file = fopen(path, "w");
    assert_non_null(file);
    fputs("vbtrace 1\n", file);
    enum { IDS = 3000 };
    static int live[IDS];
    static unsigned stream_of[IDS];
    memset(live, 0, sizeof live);
    uint64_t rng = seed;
    for (unsigned i = 0; i < events; i++) {
        if (i % 1000 == 999) fprintf(file, "m phase %u\n", i);
        unsigned id = (unsigned)(next_random(&rng) % IDS);
        if (live[id]) {
            fprintf(file, "f %u %u\n", id, stream_of[id]);
            live[id] = 0;
        } else {
            stream_of[id] = (unsigned)(next_random(&rng) % 4);
            fprintf(file, "a %u %llu %u\n", id, (unsigned long long)(1 + next_random(&rng) % max_size), stream_of[id]);
            live[id] = 1;
        }
    }
    assert_int_equal(fclose(file), 0);
    return path;
}

/* What a drive did, call by call: the allocations' and frees' arguments
 * folded into one running hash, with counts. */
typedef struct witness {
    uint64_t hash;
    uint64_t allocs, frees, marks, events;
    uint64_t last_consumed;
    int consumed_went_back;
    uint64_t consumed[8];        /* through each of the first 8 events */
} witness;

static void fold(witness *w, uint64_t value)
{
    w->hash = (w->hash ^ value) * 0x100000001b3ull;
}

static void on_after_alloc(void *context, vb_addr addr, uint64_t size, uint32_t stream, int oom)
{
    witness *w = context;
    fold(w, addr), fold(w, size), fold(w, stream), fold(w, (uint64_t)oom);
    w->allocs++;
}

static void on_before_free(void *context, vb_addr addr, uint32_t stream)
{
    witness *w = context;
    fold(w, addr), fold(w, stream);
    w->frees++;
}

static vb_status on_mark(void *context, const char *name)
{
    (void)name;
    witness *w = context;
    w->marks++;
    return VB_OK;
}

static vb_status on_after_event(void *context, const vb_drive_result *so_far)
{
    witness *w = context;
    if (so_far->consumed_bytes < w->last_consumed) w->consumed_went_back = 1;
    w->last_consumed = so_far->consumed_bytes;
    uint64_t index = so_far->events + w->marks - 1; /* events driven so far, markers included */
    if (index < 8) w->consumed[index] = so_far->consumed_bytes;
    w->events = so_far->events;
    return VB_OK;
}

/* A device, an allocator on it and a drive target. */
typedef struct bench {
    vb_drive_target target;
    vb_allocator *allocator;
} bench;

static void bench_open(bench *b, const char *allocator, uint64_t capacity)
{
    memset(b, 0, sizeof *b);
    assert_int_equal(vb_sim_open(capacity, &b->target.device), VB_OK);
    vb_config config = {0};
    assert_int_equal(vb_allocator_create(allocator, b->target.device, &config, &b->allocator), VB_OK);
    b->target.allocator = b->allocator;
}

static void bench_close(bench *b)
{
    vb_allocator_destroy(b->allocator);
    vb_drive_target_close(&b->target);
    vb_device_close(b->target.device);
}

/* Drives `source` into a fresh `allocator`, the hooks watching; its stats
 * at the end in *stats. */
static vb_status drive_watched(const vb_drive_source *source, const char *allocator, uint64_t capacity,
                               int stop_at_oom, witness *w, vb_drive_result *result, vb_alloc_stats *stats)
{
    bench b;
    bench_open(&b, allocator, capacity);
    memset(w, 0, sizeof *w);
    vb_drive_hooks hooks = {.context = w, .after_alloc = on_after_alloc, .before_free = on_before_free,
                            .mark = on_mark, .after_event = on_after_event};
    vb_status status = vb_drive(source, &b.target, &hooks, stop_at_oom, result);
    vb_allocator_stats(b.allocator, stats);
    bench_close(&b);
    return status;
}

/* drive_watched of the trace at `path`, read as it is driven. */
static vb_status drive_text(const char *path, const char *allocator, uint64_t capacity, witness *w,
                            vb_drive_result *result, vb_alloc_stats *stats)
{
    vb_trace *trace = NULL;
    assert_int_equal(vb_trace_open(path, &trace), VB_OK);
    vb_status status = drive_watched(&(vb_drive_source){.trace = trace}, allocator, capacity, 0, w, result, stats);
    vb_trace_close(trace);
    return status;
}

/* A trace of many batches, read as it is driven, makes the same calls with
 * the same results as its events loaded into memory first (tune's way),
 * markers aside (loaded events have none), on every kind of strategy. */
static void a_trace_read_in_batches_drives_as_its_loaded_events(void **state)
{
    (void)state;
    const char *path = write_random_trace("batches.trace", 20000, 4u << 20, 7);
    vb_drive_events loaded;
    assert_int_equal(vb_drive_load(path, &loaded), VB_OK);
    const char *allocators[] = {"caching", "expandable", "stitch", "bfc"};
    for (size_t i = 0; i < sizeof allocators / sizeof *allocators; i++) {
        for (int small = 0; small < 2; small++) {
            uint64_t capacity = small ? 2ull << 30 : 80ull << 30; /* 2 GiB: some out of memory */
            witness from_text, from_memory;
            vb_drive_result text_result, memory_result;
            vb_alloc_stats text_stats, memory_stats;
            assert_int_equal(drive_text(path, allocators[i], capacity, &from_text, &text_result, &text_stats), VB_OK);
            assert_int_equal(drive_watched(&(vb_drive_source){.events = &loaded}, allocators[i], capacity, 0,
                                           &from_memory, &memory_result, &memory_stats),
                             VB_OK);
            assert_int_equal(from_text.hash, from_memory.hash);
            assert_int_equal(from_text.allocs, from_memory.allocs);
            assert_int_equal(from_text.frees, from_memory.frees);
            assert_int_equal(from_text.events, from_memory.events);
            assert_int_equal(from_text.marks, 20);
            assert_int_equal(text_result.ooms, memory_result.ooms);
            assert_int_equal(text_result.first_oom_line, memory_result.first_oom_line);
            assert_int_equal(text_stats.reserved_bytes_peak, memory_stats.reserved_bytes_peak);
            assert_int_equal(text_stats.allocated_bytes, memory_stats.allocated_bytes);
            if (small) assert_true(text_result.ooms > 0);
        }
    }
    vb_drive_events_free(&loaded);
}

/* Writes `text` (a vbtrace body) to `name`; returns its path. */
static const char *write_trace(const char *name, const char *text)
{
    const char *path = vb_temp_dir_file(&dir, name);
    FILE *file = fopen(path, "w");
    assert_non_null(file);
    fputs("vbtrace 1\n", file);
    fputs(text, file);
    assert_int_equal(fclose(file), 0);
    return path;
}

/* A malformed line well past the first batch: every event before it is
 * driven, and the error is the reader's, naming that line. */
static void a_malformed_line_ends_the_drive_after_the_events_before_it(void **state)
{
    (void)state;
    char *text = malloc(6000 * 16);
    assert_non_null(text);
    size_t length = 0;
    for (unsigned i = 0; i < 5000; i++) length += (size_t)sprintf(text + length, "a %u 4096\n", i);
    strcpy(text + length, "a 5000 12x\na 5001 4096\n");
    const char *path = write_trace("malformed.trace", text);
    free(text);
    witness w;
    vb_drive_result result;
    vb_alloc_stats stats;
    assert_int_equal(drive_text(path, "caching", 80ull << 30, &w, &result, &stats), VB_ERR_INVALID);
    assert_int_equal(w.allocs, 5000);
    assert_int_equal(result.events, 5000);
    assert_int_equal(stats.allocated_bytes, 5000 * 4096ull);
    assert_non_null(strstr(vb_last_error(), "malformed.trace:5002: "));
}

/* The first allocation that finds no memory is named by its own line,
 * though the reader has read a batch past it. */
static void the_first_out_of_memory_names_the_line_of_its_event(void **state)
{
    (void)state;
    char *text = malloc(4000 * 24);
    assert_non_null(text);
    size_t length = 0;
    for (unsigned i = 0; i < 1000; i++) length += (size_t)sprintf(text + length, "a %u 4096\nf %u\n", i, i);
    length += (size_t)sprintf(text + length, "a 7 1099511627776\n"); /* 1 TiB: no room on an 80 GiB device */
    for (unsigned i = 0; i < 1000; i++) length += (size_t)sprintf(text + length, "a %u 512\n", 1000 + i);
    const char *path = write_trace("huge.trace", text);
    free(text);
    witness w;
    vb_drive_result result;
    vb_alloc_stats stats;
    assert_int_equal(drive_text(path, "caching", 80ull << 30, &w, &result, &stats), VB_OK);
    assert_int_equal(result.ooms, 1);
    assert_int_equal(result.first_oom_line, 2002);
    assert_int_equal(result.first_oom_bytes, 1ull << 40);
    assert_int_equal(result.events, 3001);
}

/* Frees vb_trace_each_live's allocations by their tags, counting those
 * that were live blocks. */
typedef struct leftovers {
    vb_allocator *allocator;
    uint64_t visited, freed, untagged;
} leftovers;

static void free_leftover(void *context, uint64_t id, uint64_t tag)
{
    (void)id;
    leftovers *l = context;
    l->visited++;
    if (!tag) {
        l->untagged++;
        return;
    }
    if (vb_keyed_addr(l->allocator, tag) && vb_free_keyed(l->allocator, tag) == VB_OK) l->freed++;
}

/* After a drive, every allocation the trace left live is tagged with its
 * block's key (a replay frees them by it): freeing them all leaves nothing
 * allocated. With the drive stopped at its first out of memory,
 * allocations read ahead of it but never driven have no key (and the
 * frees read ahead were never driven: their blocks stay). */
static void allocations_left_live_come_back_tagged_with_their_keys(void **state)
{
    (void)state;
    const char *path = write_random_trace("leftovers.trace", 9000, 1u << 20, 11);
    for (int stop = 0; stop < 2; stop++) {
        bench b;
        bench_open(&b, "caching", stop ? 256ull << 20 : 80ull << 30);
        vb_trace *trace = NULL;
        assert_int_equal(vb_trace_open(path, &trace), VB_OK);
        vb_drive_result result;
        assert_int_equal(vb_drive(&(vb_drive_source){.trace = trace}, &b.target, NULL, stop, &result), VB_OK);
        assert_int_equal(result.stopped, stop);
        vb_alloc_stats before;
        vb_allocator_stats(b.allocator, &before);
        leftovers l = {.allocator = b.allocator};
        vb_trace_each_live(trace, free_leftover, &l);
        vb_alloc_stats after;
        vb_allocator_stats(b.allocator, &after);
        assert_int_equal(l.visited, vb_trace_live_count(trace));
        assert_true(l.freed > 0);
        if (stop) {
            assert_true(l.untagged > 0);
        } else {
            assert_int_equal(l.untagged, 0);
            assert_int_equal(after.allocated_bytes, 0);
        }
        vb_trace_close(trace);
        bench_close(&b);
    }
}

/* Where each driven event ends in the file rises with the events and
 * reaches the file's size with the last: a replay's regular samples fall
 * where the driven event is, not where the reader has read ahead to. */
static void each_event_says_where_it_ends_in_the_file(void **state)
{
    (void)state;
    const char *path = write_trace("positions.trace", "a 1 100\na 2 200\nf 1\nm middle\nf 2\n");
    witness w;
    vb_drive_result result;
    vb_alloc_stats stats;
    assert_int_equal(drive_text(path, "caching", 80ull << 30, &w, &result, &stats), VB_OK);
    assert_false(w.consumed_went_back);
    const uint64_t ends[] = {18, 26, 30, 39, 43}; /* each line's end: "vbtrace 1\n" is 10 bytes, ... */
    for (size_t i = 0; i < 5; i++) assert_int_equal(w.consumed[i], ends[i]);
    assert_int_equal(w.marks, 1);
}

/* after_event_from's hook: the events it saw, and it moves the mark on
 * by `step` bytes past where each call was. */
typedef struct paced {
    uint64_t from, step, calls;
    uint64_t seen[8];
} paced;

static vb_status on_paced_event(void *context, const vb_drive_result *so_far)
{
    paced *p = context;
    if (p->calls < 8) p->seen[p->calls] = so_far->consumed_bytes;
    p->calls++;
    p->from = so_far->consumed_bytes + p->step;
    return VB_OK;
}

/* With after_event_from, after_event is called only after the events that
 * end at or past the bytes it points to, the hook moving it on: here at
 * the first event past byte 20, then at the first 10 bytes or more past
 * that one, and never again past the end. */
static void after_event_is_called_from_the_bytes_it_asks_for(void **state)
{
    (void)state;
    /* Each line's end, counting "vbtrace 1\n": 18, 26, 30, 39, 43. */
    const char *path = write_trace("paced.trace", "a 1 100\na 2 200\nf 1\nm middle\nf 2\n");
    bench b;
    bench_open(&b, "caching", 80ull << 30);
    vb_trace *trace = NULL;
    assert_int_equal(vb_trace_open(path, &trace), VB_OK);
    paced p = {.from = 20, .step = 10};
    vb_drive_hooks hooks = {.context = &p, .after_event = on_paced_event, .after_event_from = &p.from};
    vb_drive_result result;
    assert_int_equal(vb_drive(&(vb_drive_source){.trace = trace}, &b.target, &hooks, 0, &result), VB_OK);
    assert_int_equal(p.calls, 2);
    assert_int_equal(p.seen[0], 26);
    assert_int_equal(p.seen[1], 39);
    vb_trace_close(trace);
    bench_close(&b);
}

/* A trace whose first batch holds no allocation (recorded failures, then
 * a marker past the drive's look-ahead) drives, and the allocations after
 * it too: the look-ahead reads the key of whatever item lies ahead. */
static void a_trace_that_opens_with_no_allocation_drives(void **state)
{
    (void)state;
    char text[4096];
    size_t length = 0;
    for (unsigned i = 0; i < 100; i++) length += (size_t)sprintf(text + length, "o 4096\n");
    length += (size_t)sprintf(text + length, "m after the failures\n");
    for (unsigned i = 0; i < 50; i++) length += (size_t)sprintf(text + length, "a %u 4096\nf %u\n", i, i);
    const char *path = write_trace("opens-with-failures.trace", text);
    witness w;
    vb_drive_result result;
    vb_alloc_stats stats;
    assert_int_equal(drive_text(path, "caching", 80ull << 30, &w, &result, &stats), VB_OK);
    assert_int_equal(result.recorded_failures, 100);
    assert_int_equal(w.allocs, 50);
    assert_int_equal(w.frees, 50);
    assert_int_equal(stats.allocated_bytes, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_trace_read_in_batches_drives_as_its_loaded_events),
        cmocka_unit_test(a_malformed_line_ends_the_drive_after_the_events_before_it),
        cmocka_unit_test(the_first_out_of_memory_names_the_line_of_its_event),
        cmocka_unit_test(allocations_left_live_come_back_tagged_with_their_keys),
        cmocka_unit_test(each_event_says_where_it_ends_in_the_file),
        cmocka_unit_test(after_event_is_called_from_the_bytes_it_asks_for),
        cmocka_unit_test(a_trace_that_opens_with_no_allocation_drives),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
