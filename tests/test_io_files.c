/* vrambench — tests of files in and out (issue 26): an output that is one of
 * the command's inputs (app/output_file.h, vb_output_check_distinct), the
 * bounded spooling of a non-seekable input (app/input_file.h), scratch files
 * and the removal of temporary files on a signal (app/scratch.h), the
 * replay's own step names as markers (app/replay.h). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "app/input_file.h"
#include "app/output_file.h"
#include "app/replay.h"
#include "app/scratch.h"
#include "temp_dir.h"

static vb_temp_dir temp_dir;

static int make_temp_dir(void **state)
{
    (void)state;
    return vb_temp_dir_make(&temp_dir, "io");
}

static int remove_temp_dir(void **state)
{
    (void)state;
    return vb_temp_dir_remove(&temp_dir);
}

static const char *path_of(const char *name)
{
    return vb_temp_dir_file(&temp_dir, name);
}

static void write_text(const char *path, const char *text)
{
    FILE *file = fopen(path, "wb");
    assert_non_null(file);
    fputs(text, file);
    assert_int_equal(fclose(file), 0);
}

/* Temporary or scratch files left in the test directory (".vrambench-*",
 * "vrambench-*"). */
static int leftovers(void)
{
    DIR *directory = opendir(temp_dir.path);
    assert_non_null(directory);
    int count = 0;
    for (struct dirent *entry; (entry = readdir(directory));)
        count += strncmp(entry->d_name, ".vrambench-", 11) == 0 || strncmp(entry->d_name, "vrambench-", 10) == 0;
    closedir(directory);
    return count;
}

/* ------------------------------------------------------------------------ */
/* An output that is an input                                                */
/* ------------------------------------------------------------------------ */

static void test_an_output_that_is_an_input_or_another_output_is_refused(void **state)
{
    (void)state;
    const char *trace = path_of("t.trace");
    write_text(trace, "vbtrace 1\n");
    char dotted[4200], via_parent[4200], linked[4200], hard[4200], other[4200], other_dotted[4200];
    snprintf(dotted, sizeof dotted, "%s/./t.trace", temp_dir.path);
    snprintf(via_parent, sizeof via_parent, "%s/../%s/t.trace", temp_dir.path, strrchr(temp_dir.path, '/') + 1);
    snprintf(linked, sizeof linked, "%s", path_of("link.trace"));
    snprintf(hard, sizeof hard, "%s", path_of("hard.trace"));
    snprintf(other, sizeof other, "%s", path_of("new.json"));
    snprintf(other_dotted, sizeof other_dotted, "%s/./new.json", temp_dir.path);
    assert_int_equal(symlink(trace, linked), 0);
    assert_int_equal(link(trace, hard), 0);
    /* (input, output, output 2, refused) */
    struct {
        const char *input, *out, *snapshot;
        int refused;
    } cases[] = {
        {trace, trace, NULL, 1},          {trace, dotted, NULL, 1},        {trace, via_parent, NULL, 1},
        {linked, trace, NULL, 1},         {trace, hard, NULL, 1},          {trace, other, other_dotted, 1},
        {trace, other, other, 1},         {trace, NULL, trace, 1},         {trace, other, NULL, 0},
        {NULL, other, NULL, 0},           {trace, NULL, NULL, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        vb_named_file files[] = {{"the trace", cases[i].input, 0}, {"--out", cases[i].out, 1},
                                 {"--snapshot", cases[i].snapshot, 1}};
        vb_status status = vb_output_check_distinct(files, 3);
        if (!cases[i].refused) {
            assert_int_equal(status, VB_OK);
            continue;
        }
        assert_int_equal(status, VB_ERR_INVALID);
        assert_non_null(strstr(vb_last_error(), "is the same file as"));
    }
    /* One message naming both. */
    vb_named_file pair[] = {{"the trace", trace, 0}, {"--out", dotted, 1}};
    assert_int_equal(vb_output_check_distinct(pair, 2), VB_ERR_INVALID);
    assert_non_null(strstr(vb_last_error(), dotted));
    assert_non_null(strstr(vb_last_error(), "the trace"));
    assert_null(strchr(vb_last_error(), '\n'));
}

static void test_an_output_name_like_an_option_is_refused(void **state)
{
    (void)state;
    static const char *const names[] = {"--quiet", "-o", "-", "--out=x"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        assert_int_equal(vb_output_check(names[i]), VB_ERR_INVALID);
        assert_non_null(strstr(vb_last_error(), "looks like an option"));
    }
    char spelled[4200];
    snprintf(spelled, sizeof spelled, "%s/--quiet", temp_dir.path); /* a path to it is fine */
    assert_int_equal(vb_output_check(spelled), VB_OK);
}

/* ------------------------------------------------------------------------ */
/* Spooling, bounded                                                         */
/* ------------------------------------------------------------------------ */

/* A child writing `bytes` bytes of 'x' into a new pipe; its read end. */
static int pipe_of(size_t bytes, pid_t *writer)
{
    int ends[2];
    assert_int_equal(pipe(ends), 0);
    *writer = fork();
    assert_true(*writer >= 0);
    if (*writer == 0) {
        close(ends[0]);
        signal(SIGPIPE, SIG_DFL);
        char chunk[4096];
        memset(chunk, 'x', sizeof chunk);
        for (size_t done = 0; done < bytes;) {
            size_t count = bytes - done < sizeof chunk ? bytes - done : sizeof chunk;
            if (write(ends[1], chunk, count) != (ssize_t)count) _exit(1);
            done += count;
        }
        _exit(0);
    }
    close(ends[1]);
    return ends[0];
}

static void test_a_spooled_copy_is_bounded_by_the_limit(void **state)
{
    (void)state;
    setenv("TMPDIR", temp_dir.path, 1);
    setenv(VB_INPUT_SPOOL_LIMIT_ENV, "64K", 1);
    /* (bytes the pipe gives, fits) */
    struct {
        size_t bytes;
        int fits;
    } cases[] = {{0, 1}, {1000, 1}, {64 << 10, 1}, {(64 << 10) + 1, 0}, {1 << 20, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pid_t writer;
        int fd = pipe_of(cases[i].bytes, &writer);
        char name[32];
        snprintf(name, sizeof name, "pipe-%zu", i);
        vb_status status = vb_input_spool_fd(name, fd);
        close(fd);
        waitpid(writer, NULL, 0);
        if (!cases[i].fits) {
            assert_int_equal(status, VB_ERR_INVALID);
            assert_non_null(strstr(vb_last_error(), "VB_SPOOL_LIMIT=64 KiB"));
            assert_false(vb_input_is_spooled(name));
            continue;
        }
        assert_int_equal(status, VB_OK);
        char *data;
        size_t length;
        assert_int_equal(vb_input_read_all(name, 1 << 20, &data, &length), VB_OK);
        assert_int_equal(length, cases[i].bytes);
        free(data);
    }
    vb_input_release();
    setenv(VB_INPUT_SPOOL_LIMIT_ENV, "lots", 1);
    pid_t writer;
    int fd = pipe_of(10, &writer);
    assert_int_equal(vb_input_spool_fd("bad-limit", fd), VB_ERR_INVALID);
    assert_non_null(strstr(vb_last_error(), "is not a byte count"));
    close(fd);
    waitpid(writer, NULL, 0);
    unsetenv(VB_INPUT_SPOOL_LIMIT_ENV);
    /* Scratch copies are unlinked: nothing is left in $TMPDIR. */
    assert_int_equal(leftovers(), 0);
    unsetenv("TMPDIR");
}

static void test_reading_a_whole_file_is_bounded(void **state)
{
    (void)state;
    const char *path = path_of("m.json");
    write_text(path, "{\"context\": {}}");
    char *data;
    size_t length;
    assert_int_equal(vb_input_read_all(path, 100, &data, &length), VB_OK);
    assert_int_equal(length, 15);
    assert_string_equal(data, "{\"context\": {}}");
    free(data);
    assert_int_equal(vb_input_read_all(path, 10, &data, &length), VB_ERR_INVALID);
    assert_non_null(strstr(vb_last_error(), "larger than"));
    assert_int_equal(vb_input_read_all("/dev/zero", 1 << 16, &data, &length), VB_ERR_INVALID);
    assert_int_equal(vb_input_read_all(temp_dir.path, 100, &data, &length), VB_ERR_IO);
    assert_int_equal(vb_input_read_all(path_of("missing"), 100, &data, &length), VB_ERR_IO);
}

/* ------------------------------------------------------------------------ */
/* Scratch and temporary files                                               */
/* ------------------------------------------------------------------------ */

static void test_scratch_files_live_unlinked_in_tmpdir(void **state)
{
    (void)state;
    setenv("TMPDIR", temp_dir.path, 1);
    assert_string_equal(vb_scratch_directory(), temp_dir.path);
    int fd = vb_scratch_file();
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "abc", 3), 3);
    assert_int_equal(leftovers(), 0);
    close(fd);
    setenv("TMPDIR", "", 1);
    assert_string_equal(vb_scratch_directory(), "/tmp");
    unsetenv("TMPDIR");
    assert_string_equal(vb_scratch_directory(), "/tmp");
}

/* A child that creates a registered temporary file, forks a grandchild that
 * dies of `signal_number` (it must not remove its parent's file), then dies
 * of it itself; the child's wait status. */
static int child_killed_with_a_temporary_file(int signal_number, char *made, size_t capacity)
{
    snprintf(made, capacity, "%s/.vrambench-XXXXXX", temp_dir.path);
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        close(ready[0]);
        int handle;
        int fd = vb_temp_create(made, &handle);
        if (fd < 0 || handle < 0) _exit(3);
        pid_t grandchild = fork();
        if (grandchild == 0) {
            raise(signal_number); /* inherits the table: must leave the file */
            _exit(6);             /* the signal did not end it: the parent's checks fail, nothing waits */
        }
        int status;
        waitpid(grandchild, &status, 0);
        if (!WIFSIGNALED(status) || access(made, F_OK) != 0) _exit(4);
        if (write(ready[1], made, strlen(made) + 1) < 0) _exit(5);
        for (;;) pause(); /* until the signal */
    }
    close(ready[1]);
    ssize_t got = read(ready[0], made, capacity);
    close(ready[0]);
    assert_true(got > 0);
    assert_int_equal(access(made, F_OK), 0);
    kill(child, signal_number);
    int status;
    waitpid(child, &status, 0);
    return status;
}

static void test_a_signal_removes_registered_temporary_files(void **state)
{
    (void)state;
    static const int signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE};
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++) {
        char made[4200];
        int status = child_killed_with_a_temporary_file(signals[i], made, sizeof made);
        /* The signal is raised again: the process ends by it, as without us. */
        assert_true(WIFSIGNALED(status));
        assert_int_equal(WTERMSIG(status), signals[i]);
        assert_int_not_equal(access(made, F_OK), 0);
    }
    assert_int_equal(leftovers(), 0);
}

static void test_an_output_abandoned_or_committed_is_forgotten(void **state)
{
    (void)state;
    vb_output out;
    const char *target = path_of("out.json");
    assert_int_equal(vb_output_open(&out, target), VB_OK);
    assert_true(out.handle >= 0);
    assert_int_equal(vb_output_write(&out, "{}\n", 3), VB_OK);
    assert_int_equal(vb_output_commit(&out), VB_OK);
    assert_int_equal(out.handle, -1);
    assert_int_equal(vb_output_open(&out, target), VB_OK);
    vb_output_abandon(&out);
    assert_int_equal(out.handle, -1);
    assert_int_equal(leftovers(), 0);
    assert_int_equal(access(target, F_OK), 0);
    unlink(target);
}

/* ------------------------------------------------------------------------ */
/* Marker names                                                              */
/* ------------------------------------------------------------------------ */

static void test_the_replays_own_step_names_are_taken(void **state)
{
    (void)state;
    static const char *const taken[] = {"start of trace", "peak reserved", "end of trace", "event 0", "event 123"};
    static const char *const free_names[] = {"start", "end", "peak", "event", "event ", "event x", "event 1x",
                                             "Event 1", "end of trace 2", "forward"};
    for (size_t i = 0; i < sizeof taken / sizeof taken[0]; i++) assert_true(vb_replay_step_name_taken(taken[i]));
    for (size_t i = 0; i < sizeof free_names / sizeof free_names[0]; i++)
        assert_false(vb_replay_step_name_taken(free_names[i]));
    const char *trace = path_of("m.trace");
    write_text(trace, "vbtrace 1\na 1 5\nm forward\nm peak reserved\nf 1\n");
    assert_int_equal(vb_replay_check_trace(trace, NULL), VB_ERR_INVALID);
    assert_non_null(strstr(vb_last_error(), "m.trace:4:"));
    assert_non_null(strstr(vb_last_error(), "'peak reserved'"));
    write_text(trace, "vbtrace 1\na 1 5\nm forward\nf 1\n");
    assert_int_equal(vb_replay_check_trace(trace, NULL), VB_OK);
}

int main(void)
{
    /* The signal test needs its signals at their defaults, as a program
     * starts with them: a run under nohup ignores SIGHUP (the handlers then
     * leave it alone, and the child the test signals would never end), and
     * a caller may block them. */
    static const int tested[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE};
    sigset_t unblock;
    sigemptyset(&unblock);
    for (size_t i = 0; i < sizeof tested / sizeof tested[0]; i++) {
        signal(tested[i], SIG_DFL);
        sigaddset(&unblock, tested[i]);
    }
    sigprocmask(SIG_UNBLOCK, &unblock, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_an_output_that_is_an_input_or_another_output_is_refused),
        cmocka_unit_test(test_an_output_name_like_an_option_is_refused),
        cmocka_unit_test(test_a_spooled_copy_is_bounded_by_the_limit),
        cmocka_unit_test(test_reading_a_whole_file_is_bounded),
        cmocka_unit_test(test_scratch_files_live_unlinked_in_tmpdir),
        cmocka_unit_test(test_a_signal_removes_registered_temporary_files),
        cmocka_unit_test(test_an_output_abandoned_or_committed_is_forgotten),
        cmocka_unit_test(test_the_replays_own_step_names_are_taken),
    };
    return cmocka_run_group_tests(tests, make_temp_dir, remove_temp_dir);
}
