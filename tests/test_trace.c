/* vrambench — tests of the trace reader (vbtrace and RMM CSV, plain and gzip,
 * every kind of bad input) and of the replay scenario on the `cuda` baseline. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "app/runner.h"
#include "app/trace.h"
#include "app/replay.h"
#include "temp_dir.h"

/* ------------------------------------------------------------------------ */
/* Files                                                                     */
/* ------------------------------------------------------------------------ */

static vb_temp_dir temp_dir;

static int make_temp_dir(void **state)
{
    (void)state;
    return vb_temp_dir_make(&temp_dir, "trace");
}

static int remove_temp_dir(void **state)
{
    (void)state;
    return vb_temp_dir_remove(&temp_dir);
}

/* The path of `name` in the test directory (remembered for clean-up). */
static const char *temp_path(const char *name)
{
    return vb_temp_dir_file(&temp_dir, name);
}

/* Writes `text` to `name` in the test directory and returns its path. */
static const char *write_file(const char *name, const char *text)
{
    const char *path = temp_path(name);
    FILE *file = fopen(path, "wb");
    assert_non_null(file);
    assert_int_equal(fwrite(text, 1, strlen(text), file), strlen(text));
    assert_int_equal(fclose(file), 0);
    return path;
}

/* Writes `text` gzip-compressed to `name` and returns its path. */
static const char *write_gzip_file(const char *name, const char *text)
{
    const char *path = temp_path(name);
    gzFile file = gzopen(path, "wb");
    assert_non_null(file);
    assert_int_equal(gzwrite(file, text, (unsigned)strlen(text)), (int)strlen(text));
    assert_int_equal(gzclose(file), Z_OK);
    return path;
}

/* Opens `path`, which must succeed. */
static vb_trace *open_ok(const char *path)
{
    vb_trace *trace = NULL;
    assert_int_equal(vb_trace_open(path, &trace), VB_OK);
    return trace;
}

/* The next event, which must be read without error. */
static vb_trace_event next_ok(vb_trace *trace)
{
    vb_trace_event event;
    assert_int_equal(vb_trace_next(trace, &event), VB_OK);
    return event;
}

/* Reads `path` to its end or first error; returns the status and leaves the
 * error message in vb_last_error(). */
static vb_status read_all(const char *path)
{
    vb_trace *trace = NULL;
    vb_clear_error();
    vb_status status = vb_trace_open(path, &trace);
    if (status != VB_OK) return status;
    vb_trace_event event = {0};
    do status = vb_trace_next(trace, &event);
    while (status == VB_OK && event.kind != VB_TRACE_END);
    vb_trace_close(trace);
    return status;
}

/* Checks that reading `text` fails with VB_ERR_INVALID and a message that
 * starts with "PATH:LINE:". */
static void expect_invalid_at(const char *name, const char *text, int line)
{
    const char *path = write_file(name, text);
    assert_int_equal(read_all(path), VB_ERR_INVALID);
    char prefix[300];
    snprintf(prefix, sizeof prefix, "%s:%d: ", path, line);
    if (strncmp(vb_last_error(), prefix, strlen(prefix)) != 0)
        fail_msg("expected a message starting with '%s', got '%s'", prefix, vb_last_error());
}

/* ------------------------------------------------------------------------ */
/* vrambench's format                                                        */
/* ------------------------------------------------------------------------ */

static void test_vbtrace_alloc_line_gives_id_size_and_stream(void **state)
{
    (void)state;
    vb_trace *trace = open_ok(write_file("alloc.trace", "vbtrace 1\na 7 4096 2\n"));
    vb_trace_event event = next_ok(trace);
    assert_int_equal(event.kind, VB_TRACE_ALLOC);
    assert_int_equal(event.id, 7);
    assert_int_equal(event.size, 4096);
    assert_int_equal(event.stream, 2);
    vb_trace_close(trace);
}

/* `o SIZE [STREAM]`: a request that ran out of memory in the recorded
 * program (torch2trace's oom): nothing allocated, no id; malformed ones
 * are refused with their line. */
static void test_vbtrace_out_of_memory_line_is_a_recorded_failure(void **state)
{
    (void)state;
    vb_trace *trace = open_ok(write_file("hand.trace", "vbtrace 1\na 1 10\no 83886080 3\no 512\nf 1\n"));
    assert_int_equal(next_ok(trace).kind, VB_TRACE_ALLOC);
    vb_trace_event event = next_ok(trace);
    assert_int_equal(event.kind, VB_TRACE_FAILED_ALLOC);
    assert_int_equal(event.size, 83886080);
    assert_int_equal(event.stream, 3);
    event = next_ok(trace);
    assert_int_equal(event.kind, VB_TRACE_FAILED_ALLOC);
    assert_int_equal(event.stream, 0);
    assert_int_equal(next_ok(trace).kind, VB_TRACE_FREE);
    vb_trace_close(trace);
    expect_invalid_at("hand.trace", "vbtrace 1\no\n", 2);
    expect_invalid_at("hand.trace", "vbtrace 1\no lots\n", 2);
    expect_invalid_at("hand.trace", "vbtrace 1\no 1 2 3\n", 2);
    expect_invalid_at("hand.trace", "vbtrace 1\no 1 4096\n", 2);
}

static void test_vbtrace_stream_defaults_to_zero(void **state)
{
    (void)state;
    vb_trace *trace = open_ok(write_file("nostream.trace", "vbtrace 1\na 1 10\nf 1\n"));
    assert_int_equal(next_ok(trace).stream, 0);
    assert_int_equal(next_ok(trace).stream, 0);
    vb_trace_close(trace);
}

static void test_vbtrace_free_line_gives_its_id(void **state)
{
    (void)state;
    vb_trace *trace = open_ok(write_file("free.trace", "vbtrace 1\na 3 10\nf 3 0\n"));
    next_ok(trace);
    vb_trace_event event = next_ok(trace);
    assert_int_equal(event.kind, VB_TRACE_FREE);
    assert_int_equal(event.id, 3);
    vb_trace_close(trace);
}

static void test_vbtrace_marker_name_is_rest_of_line_trimmed(void **state)
{
    (void)state;
    vb_trace *trace = open_ok(write_file("mark.trace", "vbtrace 1\nm   del x, then y  \n"));
    vb_trace_event event = next_ok(trace);
    assert_int_equal(event.kind, VB_TRACE_MARK);
    assert_string_equal(event.name, "del x, then y");
    vb_trace_close(trace);
}

static void test_vbtrace_comments_and_blank_lines_are_skipped(void **state)
{
    (void)state;
    vb_trace *trace = open_ok(write_file("comments.trace", "vbtrace 1\n# a comment\n\n   \n  # indented\na 1 5\n"));
    vb_trace_event event = next_ok(trace);
    assert_int_equal(event.kind, VB_TRACE_ALLOC);
    assert_int_equal(vb_trace_line(trace), 6);
    vb_trace_close(trace);
}

static void test_vbtrace_crlf_line_endings_are_accepted(void **state)
{
    (void)state;
    vb_trace *trace = open_ok(write_file("crlf.trace", "vbtrace 1\r\na 1 5\r\nm step\r\n"));
    assert_int_equal(next_ok(trace).size, 5);
    assert_string_equal(next_ok(trace).name, "step");
    vb_trace_close(trace);
}

static void test_vbtrace_end_comes_after_last_event(void **state)
{
    (void)state;
    vb_trace *trace = open_ok(write_file("end.trace", "vbtrace 1\na 1 5\n"));
    next_ok(trace);
    assert_int_equal(next_ok(trace).kind, VB_TRACE_END);
    vb_trace_close(trace);
}

static void test_vbtrace_id_may_be_reused_after_free(void **state)
{
    (void)state;
    assert_int_equal(read_all(write_file("reuse.trace", "vbtrace 1\na 1 5\nf 1\na 1 6\nf 1\n")), VB_OK);
}

static void test_vbtrace_blanks_between_fields_read_like_single_spaces(void **state)
{
    (void)state;
    /* The single-space lines take the fast path, these the general one. */
    vb_trace *trace = open_ok(write_file("blanks.trace", "vbtrace 1\na  7\t4096 2 \n f 7\n"));
    vb_trace_event event = next_ok(trace);
    assert_int_equal(event.kind, VB_TRACE_ALLOC);
    assert_int_equal(event.id, 7);
    assert_int_equal(event.size, 4096);
    assert_int_equal(event.stream, 2);
    event = next_ok(trace);
    assert_int_equal(event.kind, VB_TRACE_FREE);
    assert_int_equal(event.id, 7);
    vb_trace_close(trace);
}

/* Lines cross the reader's 64 KiB buffer many times: 20,000 allocations
 * "a I I*512" (about 240 KiB) then their frees, each read back in order. */
static void test_vbtrace_lines_across_buffer_refills_read_in_order(void **state)
{
    (void)state;
    enum { COUNT = 20000 };
    size_t capacity = (size_t)COUNT * 40 + 16, used = 0;
    char *text = malloc(capacity);
    assert_non_null(text);
    used += (size_t)snprintf(text + used, capacity - used, "vbtrace 1\n");
    for (int i = 0; i < COUNT; i++) used += (size_t)snprintf(text + used, capacity - used, "a %d %d\n", i, i * 512);
    for (int i = 0; i < COUNT; i++) used += (size_t)snprintf(text + used, capacity - used, "f %d 0\n", i);
    vb_trace *trace = open_ok(write_file("long.trace", text));
    free(text);
    for (uint64_t i = 0; i < COUNT; i++) {
        vb_trace_event event = next_ok(trace);
        assert_int_equal(event.kind, VB_TRACE_ALLOC);
        assert_int_equal(event.id, i);
        assert_int_equal(event.size, i * 512);
    }
    for (uint64_t i = 0; i < COUNT; i++) {
        vb_trace_event event = next_ok(trace);
        assert_int_equal(event.kind, VB_TRACE_FREE);
        assert_int_equal(event.id, i);
    }
    assert_int_equal(next_ok(trace).kind, VB_TRACE_END);
    assert_int_equal(vb_trace_line(trace), 1 + 2 * COUNT);
    vb_trace_close(trace);
}

/* Sizes of every length from 1 to 20 digits are read exactly: the prefixes
 * of 98765432109876543210 up to 19 digits, then 18446744073709551615
 * (UINT64_MAX, 20 digits), and 000123 (leading zeros, 123). */
static void test_vbtrace_sizes_of_every_length_read_exactly(void **state)
{
    (void)state;
    const char *digits = "98765432109876543210";
    char text[2048] = "vbtrace 1\n";
    uint64_t expected[21];
    for (int length = 1; length <= 19; length++) {
        char line[64], size[32];
        snprintf(size, sizeof size, "%.*s", length, digits);
        snprintf(line, sizeof line, "a %d %s\n", length, size);
        strcat(text, line);
        expected[length - 1] = strtoull(size, NULL, 10);
    }
    strcat(text, "a 20 18446744073709551615\na 21 000123\n");
    expected[19] = UINT64_MAX;
    expected[20] = 123;
    vb_trace *trace = open_ok(write_file("lengths.trace", text));
    for (int i = 0; i < 21; i++) {
        vb_trace_event event = next_ok(trace);
        assert_int_equal(event.id, i + 1);
        assert_int_equal(event.size, expected[i]);
    }
    vb_trace_close(trace);
}

static void test_vbtrace_tag_comes_back_with_the_free(void **state)
{
    (void)state;
    vb_trace *trace = open_ok(write_file("tag.trace", "vbtrace 1\na 1 5\na 2 5\nf 1\nf 2\n"));
    next_ok(trace);
    vb_trace_tag(trace, 0x1000);
    next_ok(trace); /* id 2 is left untagged */
    assert_int_equal(next_ok(trace).tag, 0x1000);
    assert_int_equal(next_ok(trace).tag, 0);
    vb_trace_close(trace);
}

/* Tallies vb_trace_each_live's visits: ids and tags summed. */
typedef struct live_tally {
    uint64_t visits, id_sum, tag_sum;
} live_tally;

static void tally_live(void *context, uint64_t id, uint64_t tag)
{
    live_tally *tally = context;
    tally->visits++;
    tally->id_sum += id;
    tally->tag_sum += tag;
}

static void test_each_live_visits_live_allocations_with_their_tags(void **state)
{
    (void)state;
    /* ids 3 (tag 30) and 4 (tag 40) stay live, 5 is freed: 2 visits, ids 7, tags 70 */
    vb_trace *trace = open_ok(write_file("each.trace", "vbtrace 1\na 3 5\na 4 5\na 5 5\nf 5\n"));
    for (uint64_t id = 3; id <= 5; id++) {
        next_ok(trace);
        vb_trace_tag(trace, id * 10);
    }
    next_ok(trace);
    live_tally tally = {0};
    vb_trace_each_live(trace, tally_live, &tally);
    assert_int_equal(tally.visits, 2);
    assert_int_equal(tally.id_sum, 7);
    assert_int_equal(tally.tag_sum, 70);
    vb_trace_close(trace);
}

/* vb_trace_retag_live's change: the tag plus 1000. */
static uint64_t add_thousand(void *context, uint64_t tag)
{
    (*(int *)context)++;
    return tag + 1000;
}

/* vb_trace_retag_live changes the tag of every live allocation, those the
 * id window holds and those far from it (kept in its hash map), and of
 * no freed one; a free read afterwards carries the new tag. */
static void test_retag_live_changes_every_live_tag(void **state)
{
    (void)state;
    vb_trace *trace = open_ok(write_file("retag.trace", "vbtrace 1\na 3 5\na 4 5\na 5 5\na 9000000000 5\nf 5\nf 4\n"));
    uint64_t ids[] = {3, 4, 5, 9000000000ull};
    for (size_t i = 0; i < 4; i++) {
        next_ok(trace);
        vb_trace_tag(trace, ids[i] % 100);
    }
    next_ok(trace); /* f 5 */
    int changes = 0;
    vb_trace_retag_live(trace, add_thousand, &changes);
    assert_int_equal(changes, 3);
    live_tally tally = {0};
    vb_trace_each_live(trace, tally_live, &tally);
    assert_int_equal(tally.visits, 3);
    assert_int_equal(tally.tag_sum, 3 + 4 + 0 + 3000);
    assert_int_equal(next_ok(trace).tag, 1004); /* f 4 */
    vb_trace_close(trace);
}

static void test_gzip_trace_reads_like_plain(void **state)
{
    (void)state;
    vb_trace *trace = open_ok(write_gzip_file("small.trace.gz", "vbtrace 1\na 1 123\nf 1\n"));
    assert_int_equal(next_ok(trace).size, 123);
    assert_int_equal(next_ok(trace).kind, VB_TRACE_FREE);
    assert_int_equal(next_ok(trace).kind, VB_TRACE_END);
    vb_trace_close(trace);
}

static void test_gzip_total_bytes_is_uncompressed_size(void **state)
{
    (void)state;
    const char *text = "vbtrace 1\na 1 123\nf 1\n";
    vb_trace *trace = open_ok(write_gzip_file("size.trace.gz", text));
    assert_int_equal(vb_trace_total_bytes(trace), strlen(text));
    vb_trace_close(trace);
}

static void test_live_count_follows_allocations_and_frees(void **state)
{
    (void)state;
    vb_trace *trace = open_ok(write_file("live.trace", "vbtrace 1\na 1 5\na 2 5\nf 1\n"));
    next_ok(trace);
    next_ok(trace);
    assert_int_equal(vb_trace_live_count(trace), 2);
    next_ok(trace);
    assert_int_equal(vb_trace_live_count(trace), 1);
    vb_trace_close(trace);
}

/* ------------------------------------------------------------------------ */
/* RMM's CSV                                                                 */
/* ------------------------------------------------------------------------ */

#define RMM_HEADER_LINE "Thread,Time,Action,Pointer,Size,Stream\n"

static void test_rmm_format_is_detected_from_header(void **state)
{
    (void)state;
    vb_trace *trace = open_ok(write_file("header.csv", RMM_HEADER_LINE));
    assert_int_equal(vb_trace_get_format(trace), VB_TRACE_FORMAT_RMM_CSV);
    vb_trace_close(trace);
}

static void test_rmm_free_gets_the_id_of_its_allocation(void **state)
{
    (void)state;
    vb_trace *trace = open_ok(write_file("pair.csv", RMM_HEADER_LINE
                                         "140,10:00:00.000001,allocate,0x7f0000000000,1024,0x0\n"
                                         "140,10:00:00.000002,allocate,0x7f0000000400,2048,0x0\n"
                                         "140,10:00:00.000003,free,0x7f0000000000,1024,0x0\n"));
    vb_trace_event first = next_ok(trace);
    vb_trace_event second = next_ok(trace);
    vb_trace_event freed = next_ok(trace);
    assert_int_equal(first.kind, VB_TRACE_ALLOC);
    assert_int_equal(first.size, 1024);
    assert_int_equal(second.size, 2048);
    assert_int_not_equal(first.id, second.id);
    assert_int_equal(freed.kind, VB_TRACE_FREE);
    assert_int_equal(freed.id, first.id);
    vb_trace_close(trace);
}

static void test_rmm_pointer_reused_after_free_is_a_new_id(void **state)
{
    (void)state;
    vb_trace *trace = open_ok(write_file("reuse.csv", RMM_HEADER_LINE
                                         "1,t,allocate,0x1000,16,0x0\n"
                                         "1,t,free,0x1000,16,0x0\n"
                                         "1,t,allocate,0x1000,32,0x0\n"));
    uint64_t first = next_ok(trace).id;
    next_ok(trace);
    assert_int_not_equal(next_ok(trace).id, first);
    vb_trace_close(trace);
}

static void test_rmm_tag_comes_back_with_the_free(void **state)
{
    (void)state;
    vb_trace *trace = open_ok(write_file("tag.csv", RMM_HEADER_LINE
                                         "1,t,allocate,0x1000,16,0x0\n"
                                         "1,t,allocate,0x2000,16,0x0\n"
                                         "1,t,free,0x2000,16,0x0\n"
                                         "1,t,free,0x1000,16,0x0\n"));
    next_ok(trace);
    vb_trace_tag(trace, 11);
    next_ok(trace);
    vb_trace_tag(trace, 22);
    assert_int_equal(next_ok(trace).tag, 22);
    assert_int_equal(next_ok(trace).tag, 11);
    vb_trace_close(trace);
}

static void test_rmm_each_live_gives_ids_and_tags(void **state)
{
    (void)state;
    /* ids 0 (tag 5) and 2 (tag 7) stay live; id 1 was freed and its record reused by id 2 */
    vb_trace *trace = open_ok(write_file("each.csv", RMM_HEADER_LINE
                                         "1,t,allocate,0x1000,16,0x0\n"
                                         "1,t,allocate,0x2000,16,0x0\n"
                                         "1,t,free,0x2000,16,0x0\n"
                                         "1,t,allocate,0x3000,16,0x0\n"));
    next_ok(trace);
    vb_trace_tag(trace, 5);
    next_ok(trace);
    vb_trace_tag(trace, 6);
    next_ok(trace);
    next_ok(trace);
    vb_trace_tag(trace, 7);
    live_tally tally = {0};
    vb_trace_each_live(trace, tally_live, &tally);
    assert_int_equal(tally.visits, 2);
    assert_int_equal(tally.id_sum, 2);
    assert_int_equal(tally.tag_sum, 12);
    int changes = 0;
    vb_trace_retag_live(trace, add_thousand, &changes);
    assert_int_equal(changes, 2);
    tally = (live_tally){0};
    vb_trace_each_live(trace, tally_live, &tally);
    assert_int_equal(tally.tag_sum, 2012);
    vb_trace_close(trace);
}

static void test_rmm_hex_without_prefix_is_accepted(void **state)
{
    (void)state;
    /* Newer RMM writes pointers and streams with %llx: no 0x. */
    vb_trace *trace = open_ok(write_file("nox.csv", RMM_HEADER_LINE
                                         "1,t,allocate,7f00ab000000,64,0\n"
                                         "1,t,free,7f00ab000000,64,0\n"));
    assert_int_equal(next_ok(trace).kind, VB_TRACE_ALLOC);
    assert_int_equal(next_ok(trace).kind, VB_TRACE_FREE);
    vb_trace_close(trace);
}

static void test_rmm_default_stream_is_zero_others_numbered_in_order(void **state)
{
    (void)state;
    vb_trace *trace = open_ok(write_file("streams.csv", RMM_HEADER_LINE
                                         "1,t,allocate,0x100,1,0x0\n"
                                         "1,t,allocate,0x200,1,0x5555aaaa0000\n"
                                         "1,t,allocate,0x300,1,0x5555bbbb0000\n"
                                         "1,t,allocate,0x400,1,0x5555aaaa0000\n"));
    assert_int_equal(next_ok(trace).stream, 0);
    assert_int_equal(next_ok(trace).stream, 1);
    assert_int_equal(next_ok(trace).stream, 2);
    assert_int_equal(next_ok(trace).stream, 1);
    vb_trace_close(trace);
}

static void test_rmm_allocate_failure_is_a_failed_allocation(void **state)
{
    (void)state;
    vb_trace *trace = open_ok(write_file("failure.csv", RMM_HEADER_LINE "1,t,allocate failure,0x0,999,0x0\n"));
    vb_trace_event event = next_ok(trace);
    assert_int_equal(event.kind, VB_TRACE_FAILED_ALLOC);
    assert_int_equal(event.size, 999);
    vb_trace_close(trace);
}

static void test_rmm_null_pointer_allocation_and_free_are_skipped(void **state)
{
    (void)state;
    vb_trace *trace = open_ok(write_file("null.csv", RMM_HEADER_LINE
                                         "1,t,allocate,0x0,0,0x0\n"
                                         "1,t,free,0x0,0,0x0\n"
                                         "1,t,allocate,0x100,8,0x0\n"));
    vb_trace_event event = next_ok(trace);
    assert_int_equal(event.kind, VB_TRACE_ALLOC);
    assert_int_equal(event.size, 8);
    vb_trace_close(trace);
}

/* ------------------------------------------------------------------------ */
/* Bad input: one error naming the file and the line                          */
/* ------------------------------------------------------------------------ */

static void test_bad_alloc_missing_size_names_line(void **state)
{
    (void)state;
    expect_invalid_at("nosize.trace", "vbtrace 1\na 1 10\na 2\n", 3);
}

static void test_bad_number_names_line(void **state)
{
    (void)state;
    expect_invalid_at("badnum.trace", "vbtrace 1\na 1 12x\n", 2);
}

static void test_bad_too_many_fields_names_line(void **state)
{
    (void)state;
    expect_invalid_at("fields.trace", "vbtrace 1\nf 1 0 9\n", 2);
}

static void test_bad_unknown_action_names_line(void **state)
{
    (void)state;
    expect_invalid_at("action.trace", "vbtrace 1\n# fine\nx 1 2\n", 3);
}

static void test_bad_free_of_id_never_allocated_names_line(void **state)
{
    (void)state;
    expect_invalid_at("never.trace", "vbtrace 1\na 1 10\nf 2\n", 3);
}

static void test_bad_free_of_id_already_freed_names_line(void **state)
{
    (void)state;
    expect_invalid_at("twice.trace", "vbtrace 1\na 1 10\nf 1\nf 1\n", 4);
}

static void test_bad_alloc_of_live_id_names_line(void **state)
{
    (void)state;
    expect_invalid_at("live.trace", "vbtrace 1\na 1 10\na 1 20\n", 3);
}

static void test_bad_truncated_last_line_names_line(void **state)
{
    (void)state;
    expect_invalid_at("cut.trace", "vbtrace 1\na 1 10\nf 1", 3);
}

static void test_bad_stream_out_of_range_names_line(void **state)
{
    (void)state;
    expect_invalid_at("stream.trace", "vbtrace 1\na 1 10 1024\n", 2);
}

static void test_bad_marker_without_name_names_line(void **state)
{
    (void)state;
    expect_invalid_at("noname.trace", "vbtrace 1\nm   \n", 2);
}

static void test_bad_marker_name_too_long_names_line(void **state)
{
    (void)state;
    expect_invalid_at("longname.trace",
                      "vbtrace 1\nm 0123456789012345678901234567890123456789012345678901234567890123\n", 2);
}

static void test_bad_line_too_long_names_line(void **state)
{
    (void)state;
    size_t length = 70000;
    char *text = malloc(length + 32);
    assert_non_null(text);
    strcpy(text, "vbtrace 1\nm ");
    memset(text + strlen(text), 'x', length);
    strcpy(text + 12 + length, "\n");
    expect_invalid_at("longline.trace", text, 2);
    free(text);
}

static void test_bad_nul_byte_names_line(void **state)
{
    (void)state;
    const char text[] = "vbtrace 1\na 1 5\0 junk\n";
    const char *path = temp_path("nul.trace");
    FILE *file = fopen(path, "wb");
    assert_non_null(file);
    assert_int_equal(fwrite(text, 1, sizeof text - 1, file), sizeof text - 1);
    assert_int_equal(fclose(file), 0);
    assert_int_equal(read_all(path), VB_ERR_INVALID);
    char prefix[300];
    snprintf(prefix, sizeof prefix, "%s:2: ", path);
    assert_true(strncmp(vb_last_error(), prefix, strlen(prefix)) == 0);
}

static void test_bad_header_names_line_one(void **state)
{
    (void)state;
    expect_invalid_at("header.trace", "a 1 10\n", 1);
}

static void test_bad_version_names_line_one(void **state)
{
    (void)state;
    expect_invalid_at("version.trace", "vbtrace 2\n", 1);
}

static void test_bad_empty_file_names_line_one(void **state)
{
    (void)state;
    expect_invalid_at("empty.trace", "", 1);
}

static void test_bad_rmm_unknown_action_names_line(void **state)
{
    (void)state;
    expect_invalid_at("action.csv", RMM_HEADER_LINE "1,t,allocate,0x100,1,0x0\n1,t,resize,0x100,2,0x0\n", 3);
}

static void test_bad_rmm_field_count_names_line(void **state)
{
    (void)state;
    expect_invalid_at("count.csv", RMM_HEADER_LINE "1,t,allocate,0x100,1\n", 2);
}

static void test_bad_rmm_free_of_unknown_pointer_names_line(void **state)
{
    (void)state;
    expect_invalid_at("unknown.csv", RMM_HEADER_LINE "1,t,allocate,0x100,1,0x0\n1,t,free,0x200,1,0x0\n", 3);
}

static void test_bad_rmm_pointer_not_hex_names_line(void **state)
{
    (void)state;
    expect_invalid_at("hex.csv", RMM_HEADER_LINE "1,t,allocate,0xzz,1,0x0\n", 2);
}

/* Checks that reading `path` fails with VB_ERR_INVALID at `line` and a
 * message holding `words`. */
static void expect_message(const char *path, int line, const char *words)
{
    assert_int_equal(read_all(path), VB_ERR_INVALID);
    char prefix[300];
    snprintf(prefix, sizeof prefix, "%s:%d: ", path, line);
    if (strncmp(vb_last_error(), prefix, strlen(prefix)) != 0 || !strstr(vb_last_error(), words))
        fail_msg("expected '%s...%s', got '%s'", prefix, words, vb_last_error());
}

static void test_an_id_of_2_to_the_64_or_its_reserved_last_is_out_of_range_not_malformed(void **state)
{
    (void)state;
    /* Both are numbers: "malformed ... (expected a number)" said otherwise. */
    expect_message(write_file("id_last.trace", "vbtrace 1\na 18446744073709551615 1\n"), 2,
                   "id 18446744073709551615 out of range (0 to 18446744073709551614; 2^64-1 is reserved)");
    expect_message(write_file("id_past.trace", "vbtrace 1\na 1 1\nf 18446744073709551616\n"), 3,
                   "id 18446744073709551616 out of range");
}

static void test_a_gzip_of_a_gzip_is_named_compressed_twice(void **state)
{
    (void)state;
    const char *inner = write_gzip_file("inner.trace.gz", "vbtrace 1\na 1 4\nf 1\n");
    FILE *file = fopen(inner, "rb");
    assert_non_null(file);
    char bytes[256];
    size_t length = fread(bytes, 1, sizeof bytes, file);
    fclose(file);
    const char *outer = temp_path("outer.trace.gz");
    gzFile gz = gzopen(outer, "wb");
    assert_non_null(gz);
    assert_int_equal(gzwrite(gz, bytes, (unsigned)length), (int)length);
    assert_int_equal(gzclose(gz), Z_OK);
    expect_message(outer, 1, "compressed twice");
}

static void test_a_pickle_plain_or_compressed_is_named_a_pickle_not_a_trace(void **state)
{
    (void)state;
    /* pickle.dumps({}) at protocols 2, 4 and 5 (PROTO and its version
     * first), 0 and 1 (a dict's opcodes first). */
    static const char *const pickles[] = {"\x80\x02}q\x01.", "\x80\x04}\x94.", "\x80\x05}\x94.", "(dp0\n.", "}."};
    for (size_t i = 0; i < sizeof pickles / sizeof pickles[0]; i++) {
        expect_message(write_file("snapshot.pickle", pickles[i]), 1, "not a trace but a Python pickle");
        expect_message(write_gzip_file("snapshot.pickle.gz", pickles[i]), 1, "not a trace but a Python pickle");
    }
    /* PROTO with no protocol there is none (0x80 0x06), and a lone 0x80 byte, are not taken for one. */
    assert_int_equal(read_all(write_file("binary", "\x80\x06}.")), VB_ERR_INVALID);
    assert_null(strstr(vb_last_error(), "pickle"));
    assert_int_equal(read_all(write_file("one_byte", "\x80")), VB_ERR_INVALID);
    assert_null(strstr(vb_last_error(), "pickle"));
}

static void test_rmm_streams_besides_the_default_are_refused_past_the_count_the_message_names(void **state)
{
    (void)state;
    /* The default stream (0) is one of VB_TRACE_MAX_STREAMS: 1023 others fit, the 1024th is refused. */
    size_t capacity = 64 * VB_TRACE_MAX_STREAMS + 64, used = 0;
    char *text = malloc(capacity);
    assert_non_null(text);
    used += (size_t)snprintf(text, capacity, RMM_HEADER_LINE);
    for (int i = 1; i < VB_TRACE_MAX_STREAMS; i++)
        used += (size_t)snprintf(text + used, capacity - used, "1,t,allocate,0x%x,8,0x%x\n", 16 * i, i);
    assert_int_equal(read_all(write_file("streams_fit.csv", text)), VB_OK);
    snprintf(text + used, capacity - used, "1,t,allocate,0x%x,8,0x%x\n", 16 * VB_TRACE_MAX_STREAMS,
             VB_TRACE_MAX_STREAMS);
    char words[64];
    snprintf(words, sizeof words, "more than %d distinct streams besides the default", VB_TRACE_MAX_STREAMS - 1);
    expect_message(write_file("streams_over.csv", text), VB_TRACE_MAX_STREAMS + 1, words);
    free(text);
}

static void test_error_is_sticky(void **state)
{
    (void)state;
    vb_trace *trace = open_ok(write_file("sticky.trace", "vbtrace 1\nq\na 1 1\n"));
    vb_trace_event event;
    assert_int_equal(vb_trace_next(trace, &event), VB_ERR_INVALID);
    assert_int_equal(vb_trace_next(trace, &event), VB_ERR_INVALID);
    vb_trace_close(trace);
}

static void test_missing_file_is_io_error_naming_it(void **state)
{
    (void)state;
    const char *path = temp_path("does-not-exist.trace");
    assert_int_equal(read_all(path), VB_ERR_IO);
    assert_non_null(strstr(vb_last_error(), path));
}

static void test_directory_is_io_error(void **state)
{
    (void)state;
    assert_int_equal(read_all(temp_dir.path), VB_ERR_IO);
}

static void test_truncated_gzip_is_refused_at_its_last_good_line(void **state)
{
    (void)state;
    /* A long trace compressed, then cut in half: zlib finds the stream ends early. */
    size_t capacity = 200000, used = 0;
    char *text = malloc(capacity);
    assert_non_null(text);
    used += (size_t)snprintf(text, capacity, "vbtrace 1\n");
    for (int i = 0; used + 64 < capacity; i++)
        used += (size_t)snprintf(text + used, capacity - used, "a %d %d\nf %d\n", i, i * 7919 % 100000, i);
    const char *path = write_gzip_file("cut.trace.gz", text);
    free(text);
    FILE *file = fopen(path, "r+b");
    assert_non_null(file);
    fseek(file, 0, SEEK_END);
    long size = ftell(file);
    assert_int_equal(fclose(file), 0);
    assert_int_equal(truncate(path, size / 2), 0);
    assert_int_equal(read_all(path), VB_ERR_INVALID);
    assert_non_null(strstr(vb_last_error(), path));
    /* Reported where the data ends (thousands of lines in), not at line 1. */
    const char *line = vb_last_error() + strlen(path) + 1;
    assert_true(strtoull(line, NULL, 10) > 1000);
    assert_non_null(strstr(vb_last_error(), "ends early"));
}

/* The longest line is 65535 bytes whichever its ending: "\n" and "\r\n"
 * are not part of it (a CRLF file is as good as an LF one). */
static void test_the_longest_line_is_the_same_with_lf_and_crlf(void **state)
{
    (void)state;
    static const char *const endings[] = {"\n", "\r\n"};
    for (int e = 0; e < 2; e++)
        for (size_t length = 65535; length <= 65536; length++) {
            size_t capacity = length + 64;
            char *text = malloc(capacity);
            assert_non_null(text);
            int used = snprintf(text, capacity, "vbtrace 1%s#", endings[e]);
            memset(text + used, 'x', length - 1);
            snprintf(text + used + length - 1, capacity - used - length + 1, "%sa 1 5%sf 1%s", endings[e],
                     endings[e], endings[e]);
            vb_status status = read_all(write_file("long.trace", text));
            free(text);
            if (length == 65535 && status != VB_OK)
                fail_msg("a %zu-byte line ending %s was refused: %s", length, e ? "CRLF" : "LF", vb_last_error());
            if (length == 65536 && (status != VB_ERR_INVALID || !strstr(vb_last_error(), ":2: line longer than 65535")))
                fail_msg("a %zu-byte line ending %s: %s", length, e ? "CRLF" : "LF", vb_last_error());
        }
}

/* An error of the gzip data before any whole line names the gzip stream
 * and its byte, never a line 0 or 1 that holds nothing. */
static void test_gzip_errors_before_any_line_name_the_stream(void **state)
{
    (void)state;
    const char *good = write_gzip_file("good.trace.gz", "vbtrace 1\na 1 64\nf 1\n");
    FILE *file = fopen(good, "rb");
    assert_non_null(file);
    unsigned char bytes[256];
    size_t size = fread(bytes, 1, sizeof bytes, file);
    fclose(file);
    assert_true(size > 20);
    const char *cut = temp_path("cut.trace.gz"), *flags = temp_path("flags.trace.gz");
    file = fopen(cut, "wb");
    assert_int_equal(fwrite(bytes, 1, 12, file), 12); /* inside the header */
    assert_int_equal(fclose(file), 0);
    bytes[3] = 0xe0; /* reserved header flags */
    file = fopen(flags, "wb");
    assert_int_equal(fwrite(bytes, 1, size, file), size);
    assert_int_equal(fclose(file), 0);
    const char *paths[] = {cut, flags};
    const char *problems[] = {"gzip stream: ends early, at byte 12 of the file", "gzip stream: corrupt data at byte"};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(read_all(paths[i]), VB_ERR_INVALID);
        const char *after = strstr(vb_last_error(), paths[i]);
        after = after ? after + strlen(paths[i]) : ""; /* "PATH:LINE:" would put a digit here */
        if (!strstr(vb_last_error(), problems[i]) || (after[0] == ':' && after[1] >= '0' && after[1] <= '9') ||
            strstr(vb_last_error(), "line 0"))
            fail_msg("%s: '%s' (expected '%s', no line)", paths[i], vb_last_error(), problems[i]);
    }
}

/* The bytes of file `path` appended to file `to`. */
static void append_file(const char *to, const char *path)
{
    FILE *in = fopen(path, "rb"), *out = fopen(to, "ab");
    assert_non_null(in);
    assert_non_null(out);
    char chunk[4096];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, in)) > 0) assert_int_equal(fwrite(chunk, 1, got, out), got);
    fclose(in);
    assert_int_equal(fclose(out), 0);
}

static void test_gzip_members_in_a_row_read_as_one_trace(void **state)
{
    (void)state;
    /* `cat a.gz b.gz` is valid gzip (RFC 1952, 2.2): both members' lines count. */
    char joined[4096];
    snprintf(joined, sizeof joined, "%s", write_gzip_file("first.gz", "vbtrace 1\na 1 64\n"));
    append_file(joined, write_gzip_file("second.gz", "f 1\na 2 32\n"));
    vb_trace *trace = open_ok(joined);
    assert_int_equal(next_ok(trace).kind, VB_TRACE_ALLOC);
    assert_int_equal(next_ok(trace).kind, VB_TRACE_FREE);
    vb_trace_event last = next_ok(trace);
    assert_int_equal(last.kind, VB_TRACE_ALLOC);
    assert_int_equal(last.id, 2);
    assert_int_equal(next_ok(trace).kind, VB_TRACE_END);
    vb_trace_close(trace);
}

static void test_plain_bytes_after_gzip_are_refused_with_their_offset(void **state)
{
    (void)state;
    char joined[4096];
    snprintf(joined, sizeof joined, "%s", write_gzip_file("junk.gz", "vbtrace 1\na 1 64\nf 1\n"));
    FILE *file = fopen(joined, "rb");
    fseek(file, 0, SEEK_END);
    long size = ftell(file);
    fclose(file);
    append_file(joined, write_file("junk.txt", "a 5 100\n"));
    assert_int_equal(read_all(joined), VB_ERR_INVALID);
    char offset[64];
    snprintf(offset, sizeof offset, "at byte %ld of the file", size);
    assert_non_null(strstr(vb_last_error(), offset));
}

static void test_a_fifo_is_read_once_through_its_spooled_copy(void **state)
{
    (void)state;
    const char *fifo = temp_path("pipe");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    pid_t writer = fork();
    assert_true(writer >= 0);
    if (writer == 0) {
        FILE *out = fopen(fifo, "w");
        fputs("vbtrace 1\na 1 64\nm step\nf 1\n", out);
        _exit(fclose(out) == 0 ? 0 : 1);
    }
    assert_int_equal(vb_trace_spool(fifo), VB_OK);
    int child_status;
    waitpid(writer, &child_status, 0);
    /* Opened twice (check, then a run): both read the whole trace. */
    for (int pass = 0; pass < 2; pass++) {
        vb_trace *trace = open_ok(fifo);
        assert_int_equal(next_ok(trace).kind, VB_TRACE_ALLOC);
        assert_int_equal(next_ok(trace).kind, VB_TRACE_MARK);
        assert_int_equal(next_ok(trace).kind, VB_TRACE_FREE);
        assert_int_equal(next_ok(trace).kind, VB_TRACE_END);
        vb_trace_close(trace);
    }
    vb_trace_spool_release();
}

static void test_marker_names_that_are_not_utf8_text_are_refused(void **state)
{
    (void)state;
    expect_invalid_at("latin1.trace", "vbtrace 1\nm ok\nm caf\xe9\n", 3);
    expect_invalid_at("overlong.trace", "vbtrace 1\nm \xc0\xaf\n", 2);
    expect_invalid_at("control.trace", "vbtrace 1\nm a\x1b[31m\n", 2);
    vb_trace *trace = open_ok(write_file("utf8.trace", "vbtrace 1\nm caf\xc3\xa9 \xe2\x9c\x93\n"));
    assert_string_equal(next_ok(trace).name, "caf\xc3\xa9 \xe2\x9c\x93");
    vb_trace_close(trace);
}

/* ------------------------------------------------------------------------ */
/* Replay                                                                    */
/* ------------------------------------------------------------------------ */

/* A trace worked out by hand:
 *   a 1 1000      requested 1000
 *   a 2 3000000   requested 3001000
 *   m both live
 *   f 1           requested 3000000
 *   a 3 5000      requested 3005000   <- the peak: ids 2 and 3 live
 *   f 2           requested 5000
 *   a 4 100       requested 5100
 *   f 3, f 4      requested 0
 *   a 5 7         requested 7, never freed by the trace
 * On `cuda` every allocation is its own driver allocation in 2 MiB pages:
 * ids 1 and 2 live take 2 + 4 MiB, ids 2 and 3 take 4 + 2 MiB, so the reserved
 * peak is 6 MiB. Events: 5 allocations + 4 frees = 9; 1 live at the end. */
static const char hand_trace[] = "vbtrace 1\n"
                                 "a 1 1000\n"
                                 "a 2 3000000\n"
                                 "m both live\n"
                                 "f 1\n"
                                 "a 3 5000\n"
                                 "f 2\n"
                                 "a 4 100\n"
                                 "f 3\n"
                                 "f 4\n"
                                 "a 5 7\n";

typedef struct replay_fixture {
    vb_device *dev;
    vb_allocator *allocator;
    vb_run *run;
} replay_fixture;

/* Replays `path` on `cuda` over a sim of `capacity` bytes (0 = default); returns the status. */
static vb_status replay(replay_fixture *fixture, const char *path, uint64_t capacity)
{
    assert_int_equal(vb_sim_open(capacity, &fixture->dev), VB_OK);
    assert_int_equal(vb_allocator_create("cuda", fixture->dev, NULL, &fixture->allocator), VB_OK);
    assert_int_equal(vb_run_create(fixture->dev, fixture->allocator, path, &fixture->run), VB_OK);
    vb_clear_error();
    return vb_replay_scenario.run(fixture->run);
}

static void replay_done(replay_fixture *fixture)
{
    vb_run_destroy(fixture->run);
    vb_allocator_destroy(fixture->allocator);
    vb_device_close(fixture->dev);
}

/* The value of counter `name` of a run (fails the test when absent). */
static double counter(vb_run *run, const char *name)
{
    size_t count;
    const vb_run_counter *counters = vb_run_counters(run, &count);
    for (size_t i = 0; i < count; i++)
        if (strcmp(counters[i].name, name) == 0) return counters[i].value;
    fail_msg("no counter '%s'", name);
    return 0;
}

static void test_replay_peak_requested_on_cuda(void **state)
{
    (void)state;
    replay_fixture fixture;
    assert_int_equal(replay(&fixture, write_file("hand.trace", hand_trace), 0), VB_OK);
    vb_alloc_stats stats;
    vb_allocator_stats(fixture.allocator, &stats);
    assert_int_equal(stats.requested_bytes_peak, 3005000);
    replay_done(&fixture);
}

static void test_replay_peak_reserved_on_cuda(void **state)
{
    (void)state;
    replay_fixture fixture;
    assert_int_equal(replay(&fixture, write_file("hand.trace", hand_trace), 0), VB_OK);
    vb_alloc_stats stats;
    vb_allocator_stats(fixture.allocator, &stats);
    assert_int_equal(stats.reserved_bytes_peak, 6 * VB_MiB);
    replay_done(&fixture);
}

static void test_replay_counts_events(void **state)
{
    (void)state;
    replay_fixture fixture;
    assert_int_equal(replay(&fixture, write_file("hand.trace", hand_trace), 0), VB_OK);
    assert_true(counter(fixture.run, "events") == 9.0);
    replay_done(&fixture);
}

static void test_replay_counts_live_at_end(void **state)
{
    (void)state;
    replay_fixture fixture;
    assert_int_equal(replay(&fixture, write_file("hand.trace", hand_trace), 0), VB_OK);
    assert_true(counter(fixture.run, "live_at_end") == 1.0);
    replay_done(&fixture);
}

static void test_replay_frees_what_trace_left_live(void **state)
{
    (void)state;
    replay_fixture fixture;
    assert_int_equal(replay(&fixture, write_file("hand.trace", hand_trace), 0), VB_OK);
    vb_alloc_stats stats;
    vb_allocator_stats(fixture.allocator, &stats);
    assert_int_equal(stats.requested_bytes, 0);
    replay_done(&fixture);
}

static void test_replay_timeline_has_start_marker_and_end_in_order(void **state)
{
    (void)state;
    replay_fixture fixture;
    assert_int_equal(replay(&fixture, write_file("hand.trace", hand_trace), 0), VB_OK);
    size_t count, marker = 0;
    const vb_timeline_sample *timeline = vb_run_timeline(fixture.run, &count);
    assert_true(count >= 3);
    assert_string_equal(timeline[0].step, "start of trace");
    assert_string_equal(timeline[count - 1].step, "end of trace");
    for (size_t i = 0; i < count; i++)
        if (strcmp(timeline[i].step, "both live") == 0) marker = i;
    assert_true(marker > 0 && marker < count - 1);
    /* At the marker ids 1 and 2 are live: 1000 + 3000000 bytes. */
    assert_int_equal(timeline[marker].requested, 3001000);
    replay_done(&fixture);
}

static void test_replay_timeline_has_peak_reserved_where_it_happened(void **state)
{
    (void)state;
    /* The reserved peak (6 MiB) is first reached by `a 2`, before the marker;
     * `a 3` only comes back to it. Then ids 1 and 2 are live: 3001000 bytes. */
    replay_fixture fixture;
    assert_int_equal(replay(&fixture, write_file("hand.trace", hand_trace), 0), VB_OK);
    size_t count, peak = 0, marker = 0;
    const vb_timeline_sample *timeline = vb_run_timeline(fixture.run, &count);
    for (size_t i = 0; i < count; i++) {
        if (strcmp(timeline[i].step, "peak reserved") == 0) peak = i;
        if (strcmp(timeline[i].step, "both live") == 0) marker = i;
    }
    assert_true(peak > 0 && peak < marker);
    assert_int_equal(timeline[peak].reserved, 6 * VB_MiB);
    assert_int_equal(timeline[peak].requested, 3001000);
    replay_done(&fixture);
}

static void test_replay_end_sample_holds_live_allocations(void **state)
{
    (void)state;
    replay_fixture fixture;
    assert_int_equal(replay(&fixture, write_file("hand.trace", hand_trace), 0), VB_OK);
    size_t count;
    const vb_timeline_sample *timeline = vb_run_timeline(fixture.run, &count);
    assert_int_equal(timeline[count - 1].requested, 7);
    replay_done(&fixture);
}

static void test_replay_out_of_memory_is_counted_and_trace_goes_on(void **state)
{
    (void)state;
    /* A 64 MiB device: the 100 MiB allocation fails, its free is skipped, and
     * the allocations after it are served. */
    replay_fixture fixture;
    const char *path = write_file("hand.trace", "vbtrace 1\na 1 104857600\na 2 1000\nf 1\nf 2\na 3 2000\n");
    assert_int_equal(replay(&fixture, path, 64 * VB_MiB), VB_OK);
    vb_alloc_stats stats;
    vb_allocator_stats(fixture.allocator, &stats);
    assert_int_equal(stats.ooms, 1);
    assert_int_equal(stats.requested_bytes_peak, 2000);
    replay_done(&fixture);
}

static void test_replay_uses_several_streams(void **state)
{
    (void)state;
    replay_fixture fixture;
    const char *path = write_file("streams.trace", "vbtrace 1\na 1 10 0\na 2 10 5\na 3 10 1023\nf 2 5\nf 1\n");
    assert_int_equal(replay(&fixture, path, 0), VB_OK);
    assert_true(counter(fixture.run, "events") == 5.0);
    replay_done(&fixture);
}

static void test_replay_of_rmm_log_counts_recorded_failures(void **state)
{
    (void)state;
    replay_fixture fixture;
    const char *path = write_file("failures.csv", RMM_HEADER_LINE
                                  "1,t,allocate,0x100,10,0x0\n"
                                  "1,t,allocate failure,0x0,99999999999,0x0\n"
                                  "1,t,free,0x100,10,0x0\n");
    assert_int_equal(replay(&fixture, path, 0), VB_OK);
    assert_true(counter(fixture.run, "recorded_failures") == 1.0);
    replay_done(&fixture);
}

static void test_replay_of_bad_trace_is_invalid_naming_file_and_line(void **state)
{
    (void)state;
    replay_fixture fixture;
    const char *path = write_file("badreplay.trace", "vbtrace 1\na 1 10\nf 9\n");
    assert_int_equal(replay(&fixture, path, 0), VB_ERR_INVALID);
    char prefix[300];
    snprintf(prefix, sizeof prefix, "%s:3: ", path);
    assert_true(strncmp(vb_last_error(), prefix, strlen(prefix)) == 0);
    replay_done(&fixture);
}

static void test_replay_of_bad_trace_frees_what_it_allocated(void **state)
{
    (void)state;
    replay_fixture fixture;
    assert_int_equal(replay(&fixture, write_file("badreplay.trace", "vbtrace 1\na 1 10\nf 9\n"), 0), VB_ERR_INVALID);
    vb_alloc_stats stats;
    vb_allocator_stats(fixture.allocator, &stats);
    assert_int_equal(stats.requested_bytes, 0);
    replay_done(&fixture);
}

static void test_replay_runs_under_the_runner_named_by_its_trace(void **state)
{
    (void)state;
    /* The runner repeats the scenario on one run (iterations) and names the
     * result SCENARIO:PARAMETER/ALLOCATOR. */
    const char *path = write_file("runner.trace", "vbtrace 1\na 1 10 0\na 2 10 2\nf 2 2\nf 1\n");
    vb_device *dev;
    assert_int_equal(vb_sim_open(0, &dev), VB_OK);
    vb_allocator_spec spec;
    assert_int_equal(vb_allocator_spec_parse("cuda", &spec), VB_OK);
    vb_case c = {&vb_replay_scenario, path, &spec, NULL};
    vb_runner_options options = vb_runner_default_options();
    options.max_iterations = 5;
    vb_case_result result;
    assert_int_equal(vb_runner_run_case(dev, &c, &options, &result), VB_OK);
    char expected[300];
    snprintf(expected, sizeof expected, "replay:%s/cuda", path);
    assert_string_equal(result.name, expected);
    vb_case_result_free(&result);
    vb_allocator_spec_free(&spec);
    vb_device_close(dev);
}

static void test_replay_without_trace_is_invalid(void **state)
{
    (void)state;
    replay_fixture fixture;
    assert_int_equal(replay(&fixture, NULL, 0), VB_ERR_INVALID);
    replay_done(&fixture);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vbtrace_alloc_line_gives_id_size_and_stream),
        cmocka_unit_test(test_vbtrace_stream_defaults_to_zero),
        cmocka_unit_test(test_vbtrace_out_of_memory_line_is_a_recorded_failure),
        cmocka_unit_test(test_vbtrace_free_line_gives_its_id),
        cmocka_unit_test(test_vbtrace_marker_name_is_rest_of_line_trimmed),
        cmocka_unit_test(test_vbtrace_comments_and_blank_lines_are_skipped),
        cmocka_unit_test(test_vbtrace_crlf_line_endings_are_accepted),
        cmocka_unit_test(test_vbtrace_end_comes_after_last_event),
        cmocka_unit_test(test_vbtrace_id_may_be_reused_after_free),
        cmocka_unit_test(test_vbtrace_blanks_between_fields_read_like_single_spaces),
        cmocka_unit_test(test_vbtrace_lines_across_buffer_refills_read_in_order),
        cmocka_unit_test(test_vbtrace_sizes_of_every_length_read_exactly),
        cmocka_unit_test(test_vbtrace_tag_comes_back_with_the_free),
        cmocka_unit_test(test_each_live_visits_live_allocations_with_their_tags),
        cmocka_unit_test(test_retag_live_changes_every_live_tag),
        cmocka_unit_test(test_gzip_trace_reads_like_plain),
        cmocka_unit_test(test_gzip_total_bytes_is_uncompressed_size),
        cmocka_unit_test(test_live_count_follows_allocations_and_frees),
        cmocka_unit_test(test_rmm_format_is_detected_from_header),
        cmocka_unit_test(test_rmm_free_gets_the_id_of_its_allocation),
        cmocka_unit_test(test_rmm_pointer_reused_after_free_is_a_new_id),
        cmocka_unit_test(test_rmm_tag_comes_back_with_the_free),
        cmocka_unit_test(test_rmm_each_live_gives_ids_and_tags),
        cmocka_unit_test(test_rmm_hex_without_prefix_is_accepted),
        cmocka_unit_test(test_rmm_default_stream_is_zero_others_numbered_in_order),
        cmocka_unit_test(test_rmm_allocate_failure_is_a_failed_allocation),
        cmocka_unit_test(test_rmm_null_pointer_allocation_and_free_are_skipped),
        cmocka_unit_test(test_bad_alloc_missing_size_names_line),
        cmocka_unit_test(test_bad_number_names_line),
        cmocka_unit_test(test_bad_too_many_fields_names_line),
        cmocka_unit_test(test_bad_unknown_action_names_line),
        cmocka_unit_test(test_bad_free_of_id_never_allocated_names_line),
        cmocka_unit_test(test_bad_free_of_id_already_freed_names_line),
        cmocka_unit_test(test_bad_alloc_of_live_id_names_line),
        cmocka_unit_test(test_bad_truncated_last_line_names_line),
        cmocka_unit_test(test_bad_stream_out_of_range_names_line),
        cmocka_unit_test(test_bad_marker_without_name_names_line),
        cmocka_unit_test(test_bad_marker_name_too_long_names_line),
        cmocka_unit_test(test_bad_line_too_long_names_line),
        cmocka_unit_test(test_bad_nul_byte_names_line),
        cmocka_unit_test(test_bad_header_names_line_one),
        cmocka_unit_test(test_bad_version_names_line_one),
        cmocka_unit_test(test_bad_empty_file_names_line_one),
        cmocka_unit_test(test_bad_rmm_unknown_action_names_line),
        cmocka_unit_test(test_bad_rmm_field_count_names_line),
        cmocka_unit_test(test_bad_rmm_free_of_unknown_pointer_names_line),
        cmocka_unit_test(test_bad_rmm_pointer_not_hex_names_line),
        cmocka_unit_test(test_an_id_of_2_to_the_64_or_its_reserved_last_is_out_of_range_not_malformed),
        cmocka_unit_test(test_a_gzip_of_a_gzip_is_named_compressed_twice),
        cmocka_unit_test(test_a_pickle_plain_or_compressed_is_named_a_pickle_not_a_trace),
        cmocka_unit_test(test_rmm_streams_besides_the_default_are_refused_past_the_count_the_message_names),
        cmocka_unit_test(test_error_is_sticky),
        cmocka_unit_test(test_missing_file_is_io_error_naming_it),
        cmocka_unit_test(test_directory_is_io_error),
        cmocka_unit_test(test_truncated_gzip_is_refused_at_its_last_good_line),
        cmocka_unit_test(test_the_longest_line_is_the_same_with_lf_and_crlf),
        cmocka_unit_test(test_gzip_errors_before_any_line_name_the_stream),
        cmocka_unit_test(test_gzip_members_in_a_row_read_as_one_trace),
        cmocka_unit_test(test_plain_bytes_after_gzip_are_refused_with_their_offset),
        cmocka_unit_test(test_a_fifo_is_read_once_through_its_spooled_copy),
        cmocka_unit_test(test_marker_names_that_are_not_utf8_text_are_refused),
        cmocka_unit_test(test_replay_peak_requested_on_cuda),
        cmocka_unit_test(test_replay_peak_reserved_on_cuda),
        cmocka_unit_test(test_replay_counts_events),
        cmocka_unit_test(test_replay_counts_live_at_end),
        cmocka_unit_test(test_replay_frees_what_trace_left_live),
        cmocka_unit_test(test_replay_timeline_has_start_marker_and_end_in_order),
        cmocka_unit_test(test_replay_timeline_has_peak_reserved_where_it_happened),
        cmocka_unit_test(test_replay_end_sample_holds_live_allocations),
        cmocka_unit_test(test_replay_out_of_memory_is_counted_and_trace_goes_on),
        cmocka_unit_test(test_replay_uses_several_streams),
        cmocka_unit_test(test_replay_of_rmm_log_counts_recorded_failures),
        cmocka_unit_test(test_replay_of_bad_trace_is_invalid_naming_file_and_line),
        cmocka_unit_test(test_replay_of_bad_trace_frees_what_it_allocated),
        cmocka_unit_test(test_replay_runs_under_the_runner_named_by_its_trace),
        cmocka_unit_test(test_replay_without_trace_is_invalid),
    };
    return cmocka_run_group_tests(tests, make_temp_dir, remove_temp_dir);
}
