/* Tests of `vrambench run`'s command line: every bad invocation is one error
 * line and exit 2, checked before anything runs, and leaves no file. The
 * command runs in-process (vb_cmd_run is what main() dispatches to) with
 * stderr captured in a file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "app/cli.h"
#include "cli_capture.h"
#include "temp_dir.h"

typedef struct fixture {
    vb_temp_dir dir;
    const char *out;              /* out.json in dir */
    const char *temp;             /* its ".tmp" sibling, which the report writes first */
    const char *errors;           /* captured stderr */
    char error_text[4096];
} fixture;

static int setup(void **state)
{
    static fixture f;
    memset(&f, 0, sizeof f);
    if (vb_temp_dir_make(&f.dir, "cli") != 0) return -1;
    f.out = vb_temp_dir_file(&f.dir, "out.json");
    f.temp = vb_temp_dir_file(&f.dir, "out.json.tmp");
    f.errors = vb_temp_dir_file(&f.dir, "stderr.txt");
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    vb_temp_dir_remove(&f->dir);
    return 0;
}

/* Runs `vrambench run` with `extra` options (NULL-terminated) after a fast
 * valid base (its --device sim left out when `extra` names a device: a
 * second --device is refused), stdout silenced and stderr captured into
 * f->error_text. */
static int run_with(fixture *f, const char *const *extra)
{
    const char *base[] = {"run", "--min-time", "0", "--quiet", "--param", "allocations=10"};
    char *argv[40];
    int argc = 0, device_given = 0;
    for (size_t i = 0; i < sizeof base / sizeof base[0]; i++) argv[argc++] = (char *)base[i];
    for (size_t i = 0; extra[i]; i++) device_given |= strcmp(extra[i], "--device") == 0;
    if (!device_given) {
        argv[argc++] = (char *)"--device";
        argv[argc++] = (char *)"sim";
    }
    for (size_t i = 0; extra[i]; i++) argv[argc++] = (char *)extra[i];
    int status = vb_run_quietly(vb_cmd_run, argc, argv, f->errors);
    FILE *text = fopen(f->errors, "r");
    size_t length = fread(f->error_text, 1, sizeof f->error_text - 1, text);
    f->error_text[length] = '\0';
    fclose(text);
    return status;
}

/* Lines in the captured stderr. */
static int error_lines(const fixture *f)
{
    int lines = 0;
    for (const char *c = f->error_text; *c; c++) lines += *c == '\n';
    return lines;
}

/* Neither the output nor its temp file exists. */
static int no_output(const fixture *f)
{
    return !vb_path_exists(f->out) && !vb_path_exists(f->temp);
}

/* Asserts the usage-error contract for `extra`: exit 2, one line naming
 * `mention`, no file. */
static void expect_usage_error(fixture *f, const char *const *extra, const char *mention)
{
    assert_int_equal(run_with(f, extra), VB_EXIT_USAGE);
    assert_int_equal(error_lines(f), 1);
    assert_non_null(strstr(f->error_text, "vrambench: error: "));
    assert_non_null(strstr(f->error_text, mention));
    assert_true(no_output(f));
}

static void test_valid_run_exits_zero_and_writes_the_file(void **state)
{
    fixture *f = *state;
    const char *extra[] = {"--scenario", "random_mix", "--allocator", "cuda", "--out", f->out, NULL};
    assert_int_equal(run_with(f, extra), VB_EXIT_OK);
    assert_false(no_output(f));
}

static void test_unknown_scenario_is_a_usage_error(void **state)
{
    fixture *f = *state;
    const char *extra[] = {"--scenario", "nope", "--out", f->out, NULL};
    expect_usage_error(f, extra, "unknown scenario 'nope'");
}

static void test_unknown_allocator_is_a_usage_error(void **state)
{
    fixture *f = *state;
    const char *extra[] = {"--scenario", "random_mix", "--allocator", "cuda,nope", "--out", f->out, NULL};
    expect_usage_error(f, extra, "unknown allocator 'nope'");
}

static void test_unknown_allocator_config_key_is_a_usage_error(void **state)
{
    fixture *f = *state;
    const char *extra[] = {"--scenario", "random_mix", "--allocator", "cuda", "--config", "cuda.size=1",
                           "--out", f->out, NULL};
    expect_usage_error(f, extra, "unknown config key 'size'");
}

static void test_config_for_an_allocator_not_run_is_a_usage_error(void **state)
{
    fixture *f = *state;
    const char *extra[] = {"--scenario", "random_mix", "--allocator", "cuda", "--config", "other.k=1",
                           "--out", f->out, NULL};
    expect_usage_error(f, extra, "other");
}

static void test_bad_repetitions_is_a_usage_error(void **state)
{
    fixture *f = *state;
    const char *extra[] = {"--scenario", "random_mix", "--repetitions", "0", "--out", f->out, NULL};
    expect_usage_error(f, extra, "--repetitions");
}

static void test_bad_min_time_is_a_usage_error(void **state)
{
    fixture *f = *state;
    const char *extra[] = {"--scenario", "random_mix", "--min-time", "soon", "--out", f->out, NULL};
    expect_usage_error(f, extra, "--min-time");
}

static void test_unwritable_out_is_a_usage_error(void **state)
{
    fixture *f = *state;
    const char *missing = vb_temp_dir_file(&f->dir, "missing/out.json");
    const char *extra[] = {"--scenario", "random_mix", "--out", missing, NULL};
    expect_usage_error(f, extra, "cannot write");
    assert_false(vb_path_exists(missing));
}

static void test_unknown_option_is_a_usage_error(void **state)
{
    fixture *f = *state;
    const char *extra[] = {"--scenario", "random_mix", "--frobnicate", "1", "--out", f->out, NULL};
    expect_usage_error(f, extra, "--frobnicate");
}

static void test_option_without_value_is_a_usage_error(void **state)
{
    fixture *f = *state;
    const char *extra[] = {"--scenario", "random_mix", "--out", f->out, "--repetitions", NULL};
    expect_usage_error(f, extra, "--repetitions");
}

static void test_unknown_device_is_a_usage_error(void **state)
{
    fixture *f = *state;
    const char *extra[] = {"--scenario", "random_mix", "--device", "tpu", "--out", f->out, NULL};
    expect_usage_error(f, extra, "unknown device 'tpu'");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_valid_run_exits_zero_and_writes_the_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_scenario_is_a_usage_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_allocator_is_a_usage_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_allocator_config_key_is_a_usage_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_for_an_allocator_not_run_is_a_usage_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_repetitions_is_a_usage_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_min_time_is_a_usage_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unwritable_out_is_a_usage_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_option_is_a_usage_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_option_without_value_is_a_usage_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_device_is_a_usage_error, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
