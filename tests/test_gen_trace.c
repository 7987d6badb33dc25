/* vrambench — tests of `vrambench gen-trace random`: the traces it writes
 * (read back through the trace reader) and its handling of bad options. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/addr_map.h"
#include "app/cli.h"
#include "app/trace.h"
#include "temp_dir.h"

static vb_temp_dir temp_dir;
static const char *paths[8];

static int make_temp_dir(void **state)
{
    (void)state;
    if (vb_temp_dir_make(&temp_dir, "gen") != 0) return -1;
    const char *names[8] = {"a.trace", "b.trace", "c.trace", "d.trace.gz", "bad.trace", "e.trace", "f.trace", "g.trace"};
    for (int i = 0; i < 8; i++) paths[i] = vb_temp_dir_file(&temp_dir, names[i]);
    return 0;
}

static int remove_temp_dir(void **state)
{
    (void)state;
    return vb_temp_dir_remove(&temp_dir);
}

/* Runs `vrambench gen-trace random` with the given options and `-o out`; returns the exit status. */
static int gen(const char *seed, const char *events, const char *max_size, const char *max_live, const char *out)
{
    char *argv[] = {"gen-trace", "random", "--seed", (char *)seed, "--events", (char *)events,
                    "--max-size", (char *)max_size, "--max-live", (char *)max_live, "-o", (char *)out, NULL};
    return vb_cmd_gen_trace(12, argv);
}

/* What reading a generated trace back shows. */
typedef struct trace_summary {
    uint64_t events;
    uint64_t max_live_bytes;
    uint64_t min_size, max_size;
    uint64_t live_at_end;
} trace_summary;

/* Reads `path` through the trace reader, tracking live bytes by id. */
static trace_summary summarize(const char *path)
{
    trace_summary summary = {0, 0, UINT64_MAX, 0, 0};
    vb_addr_map sizes = VB_ADDR_MAP_INIT;
    uint64_t live_bytes = 0;
    vb_trace *trace;
    assert_int_equal(vb_trace_open(path, &trace), VB_OK);
    for (;;) {
        vb_trace_event event;
        assert_int_equal(vb_trace_next(trace, &event), VB_OK);
        if (event.kind == VB_TRACE_END) break;
        summary.events++;
        if (event.kind == VB_TRACE_ALLOC) {
            assert_int_equal(vb_addr_map_put(&sizes, event.id + 1, event.size), 0);
            /* Past 2^64 live bytes reads as UINT64_MAX, never as a wrapped small number. */
            live_bytes = event.size > UINT64_MAX - live_bytes ? UINT64_MAX : live_bytes + event.size;
            if (live_bytes > summary.max_live_bytes) summary.max_live_bytes = live_bytes;
            if (event.size < summary.min_size) summary.min_size = event.size;
            if (event.size > summary.max_size) summary.max_size = event.size;
        } else if (event.kind == VB_TRACE_FREE) {
            uint64_t size = 0;
            assert_true(vb_addr_map_remove(&sizes, event.id + 1, &size));
            live_bytes -= size;
        }
    }
    summary.live_at_end = vb_trace_live_count(trace);
    vb_trace_close(trace);
    vb_addr_map_clear(&sizes);
    return summary;
}

/* The whole content of a file (caller frees). */
static char *slurp(const char *path, size_t *length)
{
    FILE *file = fopen(path, "rb");
    assert_non_null(file);
    fseek(file, 0, SEEK_END);
    *length = (size_t)ftell(file);
    rewind(file);
    char *data = malloc(*length + 1);
    assert_non_null(data);
    assert_int_equal(fread(data, 1, *length, file), *length);
    fclose(file);
    return data;
}

static void test_same_seed_gives_identical_trace(void **state)
{
    (void)state;
    assert_int_equal(gen("42", "2000", "64K", "1M", paths[0]), VB_EXIT_OK);
    assert_int_equal(gen("42", "2000", "64K", "1M", paths[1]), VB_EXIT_OK);
    size_t length_a, length_b;
    char *a = slurp(paths[0], &length_a), *b = slurp(paths[1], &length_b);
    assert_int_equal(length_a, length_b);
    assert_memory_equal(a, b, length_a);
    free(a);
    free(b);
}

static void test_other_seed_gives_other_trace(void **state)
{
    (void)state;
    assert_int_equal(gen("42", "2000", "64K", "1M", paths[0]), VB_EXIT_OK);
    assert_int_equal(gen("43", "2000", "64K", "1M", paths[1]), VB_EXIT_OK);
    size_t length_a, length_b;
    char *a = slurp(paths[0], &length_a), *b = slurp(paths[1], &length_b);
    assert_true(length_a != length_b || memcmp(a, b, length_a) != 0);
    free(a);
    free(b);
}

static void test_even_event_count_is_exact(void **state)
{
    (void)state;
    assert_int_equal(gen("1", "5000", "4K", "64K", paths[2]), VB_EXIT_OK);
    assert_int_equal(summarize(paths[2]).events, 5000);
}

static void test_odd_event_count_gives_one_fewer(void **state)
{
    (void)state;
    /* Every allocation needs its free, so 5001 events cannot all be written. */
    assert_int_equal(gen("1", "5001", "4K", "64K", paths[2]), VB_EXIT_OK);
    assert_int_equal(summarize(paths[2]).events, 5000);
}

static void test_live_bytes_never_exceed_max_live(void **state)
{
    (void)state;
    assert_int_equal(gen("7", "20000", "8K", "100000", paths[2]), VB_EXIT_OK);
    assert_true(summarize(paths[2]).max_live_bytes <= 100000);
}

static void test_live_bytes_never_exceed_a_max_live_near_2_to_the_64(void **state)
{
    (void)state;
    /* 16777215T is 2^64 - 2^40: live bytes + the next size wrapped past 2^64 and passed the check. */
    assert_int_equal(gen("1", "20", "16777215T", "16777215T", paths[2]), VB_EXIT_OK);
    assert_true(summarize(paths[2]).max_live_bytes <= UINT64_C(16777215) << 40);
}

static void test_sizes_are_within_one_and_max_size(void **state)
{
    (void)state;
    assert_int_equal(gen("7", "20000", "1000", "1M", paths[2]), VB_EXIT_OK);
    trace_summary summary = summarize(paths[2]);
    assert_true(summary.min_size >= 1);
    assert_true(summary.max_size <= 1000);
}

static void test_everything_is_freed_by_the_end(void **state)
{
    (void)state;
    assert_int_equal(gen("9", "3000", "4K", "1M", paths[2]), VB_EXIT_OK);
    assert_int_equal(summarize(paths[2]).live_at_end, 0);
}

static void test_gz_name_writes_gzip_the_reader_reads(void **state)
{
    (void)state;
    assert_int_equal(gen("3", "1000", "4K", "64K", paths[3]), VB_EXIT_OK);
    size_t length;
    char *data = slurp(paths[3], &length);
    assert_true(length > 2 && (unsigned char)data[0] == 0x1f && (unsigned char)data[1] == 0x8b);
    free(data);
    assert_int_equal(summarize(paths[3]).events, 1000);
}

static void test_bad_byte_count_exits_2_and_leaves_no_file(void **state)
{
    (void)state;
    unlink(paths[4]);
    assert_int_equal(gen("1", "100", "lots", "1M", paths[4]), VB_EXIT_USAGE);
    assert_int_equal(access(paths[4], F_OK), -1);
}

static void test_max_live_below_max_size_exits_2_and_leaves_no_file(void **state)
{
    (void)state;
    unlink(paths[4]);
    assert_int_equal(gen("1", "100", "2M", "1M", paths[4]), VB_EXIT_USAGE);
    assert_int_equal(access(paths[4], F_OK), -1);
}

static void test_zero_events_exits_2(void **state)
{
    (void)state;
    assert_int_equal(gen("1", "0", "1K", "1M", paths[4]), VB_EXIT_USAGE);
}

static void test_missing_output_exits_2(void **state)
{
    (void)state;
    char *argv[] = {"gen-trace", "random", "--events", "10", "--max-size", "1K", "--max-live", "1M", NULL};
    assert_int_equal(vb_cmd_gen_trace(8, argv), VB_EXIT_USAGE);
}

static void test_unknown_option_exits_2(void **state)
{
    (void)state;
    char *argv[] = {"gen-trace", "random", "--bogus", "1", NULL};
    assert_int_equal(vb_cmd_gen_trace(4, argv), VB_EXIT_USAGE);
}

static void test_unknown_generator_exits_2(void **state)
{
    (void)state;
    char *argv[] = {"gen-trace", "normal", NULL};
    assert_int_equal(vb_cmd_gen_trace(2, argv), VB_EXIT_USAGE);
}

static void test_unwritable_output_exits_2_before_writing(void **state)
{
    (void)state;
    assert_int_equal(gen("1", "10", "1K", "1M", "/nonexistent-dir/x.trace"), VB_EXIT_USAGE);
    /* A device is never replaced (nor opened in place). */
    assert_int_equal(gen("1", "10", "1K", "1M", "/dev/null"), VB_EXIT_USAGE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_seed_gives_identical_trace),
        cmocka_unit_test(test_other_seed_gives_other_trace),
        cmocka_unit_test(test_even_event_count_is_exact),
        cmocka_unit_test(test_odd_event_count_gives_one_fewer),
        cmocka_unit_test(test_live_bytes_never_exceed_max_live),
        cmocka_unit_test(test_live_bytes_never_exceed_a_max_live_near_2_to_the_64),
        cmocka_unit_test(test_sizes_are_within_one_and_max_size),
        cmocka_unit_test(test_everything_is_freed_by_the_end),
        cmocka_unit_test(test_gz_name_writes_gzip_the_reader_reads),
        cmocka_unit_test(test_bad_byte_count_exits_2_and_leaves_no_file),
        cmocka_unit_test(test_max_live_below_max_size_exits_2_and_leaves_no_file),
        cmocka_unit_test(test_zero_events_exits_2),
        cmocka_unit_test(test_missing_output_exits_2),
        cmocka_unit_test(test_unknown_option_exits_2),
        cmocka_unit_test(test_unknown_generator_exits_2),
        cmocka_unit_test(test_unwritable_output_exits_2_before_writing),
    };
    return cmocka_run_group_tests(tests, make_temp_dir, remove_temp_dir);
}
