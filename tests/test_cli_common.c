/* Tests of what the commands share (app/cli.h, base/closest.h,
 * app/output_path.h): one size parser for every size, "did you mean" by edit
 * distance, the option-table parser and the --help it prints, and result
 * names from templates that never replace an earlier file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include <cmocka.h>

#include "app/cli.h"
#include "app/output_path.h"
#include "base/closest.h"
#include "temp_dir.h"

/* ------------------------------------------------------------------------ */
/* Sizes                                                                     */
/* ------------------------------------------------------------------------ */

static void test_sizes_take_any_unit_spelling_in_powers_of_1024(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        uint64_t bytes;
    } good[] = {
        {"0", 0},
        {"4096", 4096},
        {"4096B", 4096},
        {"4096b", 4096},
        {"64K", 64ull << 10},
        {"64k", 64ull << 10},
        {"64KB", 64ull << 10},
        {"64KiB", 64ull << 10},
        {"64M", 64ull << 20},
        {"64m", 64ull << 20},
        {"64mb", 64ull << 20},
        {"64MiB", 64ull << 20},
        {"64mib", 64ull << 20},
        {"24G", 24ull << 30},
        {"24g", 24ull << 30},
        {"24GB", 24ull << 30}, /* GB counts as GiB, as nvidia-smi's and PyTorch's MB do */
        {"24GiB", 24ull << 30},
        {"2T", 2ull << 40},
        {"2tib", 2ull << 40},
        {"1.5G", 3ull << 29},
        {"1.5GiB", 3ull << 29},
        {"0.5K", 512},
        {"1.25M", 1310720},
        {"16777215T", 16777215ull << 40},
        {"18446744073709551615", UINT64_MAX},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        uint64_t bytes = 1;
        if (vb_cli_parse_bytes(good[i].text, &bytes) != 0) fail_msg("'%s' refused", good[i].text);
        if (bytes != good[i].bytes)
            fail_msg("'%s' read as %llu, not %llu", good[i].text, (unsigned long long)bytes,
                     (unsigned long long)good[i].bytes);
    }
}

static void test_malformed_sizes_are_refused(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",      "M",   "-5",   "+5",    " 5",     "5 ",       "64 M",   "1Q",   "64MM",   "64iB",         "64Bi",
        "1e30",  "0x10", "1.5", "1.",    ".5G",    "1.0001K",  "5GBB",   "5GiBs", "16777216T", "18446744073709551616",
        "1,5G",  "5kk", "nan",  "inf",   "64M\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t bytes = 7;
        if (vb_cli_parse_bytes(bad[i], &bytes) == 0) fail_msg("'%s' accepted as %llu", bad[i], (unsigned long long)bytes);
        assert_int_equal(bytes, 7); /* untouched */
    }
}

/* ------------------------------------------------------------------------ */
/* Did you mean                                                              */
/* ------------------------------------------------------------------------ */

/* A whole number is digits only, inside its range; anything else is refused
 * and leaves the output as it was. */
static void test_whole_numbers_are_digits_inside_their_range(void **state)
{
    (void)state;
    uint64_t out = 7;
    assert_int_equal(vb_cli_parse_whole("0", 0, 10, &out), 0);
    assert_int_equal(out, 0);
    assert_int_equal(vb_cli_parse_whole("18446744073709551615", 0, UINT64_MAX, &out), 0);
    assert_true(out == UINT64_MAX);
    assert_int_equal(vb_cli_parse_whole("256", 1, 256, &out), 0);
    assert_int_equal(out, 256);
    const char *const bad[] = {"", "-1", "+1", " 1", "1 ", "1e3", "0x1", "12x", "257", "18446744073709551616"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        out = 7;
        assert_int_equal(vb_cli_parse_whole(bad[i], 1, 256, &out), -1);
        assert_int_equal(out, 7);
    }
    assert_int_equal(vb_cli_parse_whole("0", 1, 256, &out), -1);
}

/* A decimal number is a sign, digits, a fraction and an exponent, and the
 * one suffix named, inside its range; hex, inf, nan, blanks and anything
 * else are refused and leave the output as it was. */
static void test_decimals_are_plain_decimal_notation_inside_their_range(void **state)
{
    (void)state;
    double out = 7;
    const struct {
        const char *text;
        double value;
    } good[] = {{"0", 0}, {"1.5", 1.5}, {".5", 0.5}, {"5.", 5}, {"1e2", 100}, {"2.5E-1", 0.25}, {"+3", 3}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        assert_int_equal(vb_cli_parse_decimal(good[i].text, NULL, 0, 3600, &out), 0);
        assert_true(out == good[i].value);
    }
    assert_int_equal(vb_cli_parse_decimal("-2.5%", "%", -100, 100, &out), 0);
    assert_true(out == -2.5);
    assert_int_equal(vb_cli_parse_decimal("5", "%", -100, 100, &out), 0); /* the suffix may be left out */
    assert_true(out == 5);
    const char *const bad[] = {"",     ".",    "-",  "e3",  "1e",    "1e+",  "0x10", "0x1p-4", "inf",   "nan",
                               " 1",   "1 ",   "1s", "1%",  "1..2",  "3601", "-1",   "1e400",  "--1",   "1e3.5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        out = 7;
        assert_int_equal(vb_cli_parse_decimal(bad[i], NULL, 0, 3600, &out), -1);
        assert_true(out == 7);
    }
    assert_int_equal(vb_cli_parse_decimal("5%%", "%", -100, 100, &out), -1);
}

static void test_edit_distance_counts_swaps_as_one_and_ignores_case(void **state)
{
    (void)state;
    assert_int_equal(vb_edit_distance("", ""), 0);
    assert_int_equal(vb_edit_distance("abc", ""), 3);
    assert_int_equal(vb_edit_distance("", "abc"), 3);
    assert_int_equal(vb_edit_distance("cachng", "caching"), 1);
    assert_int_equal(vb_edit_distance("cahcing", "caching"), 1);
    assert_int_equal(vb_edit_distance("CACHING", "caching"), 0);
    assert_int_equal(vb_edit_distance("kitten", "sitting"), 3);
}

static void test_the_nearest_name_is_offered_only_when_near(void **state)
{
    (void)state;
    static const char *const allocators[] = {"cuda", "caching", "async", "expandable", "bfc", "buddy", NULL};
    static const char *const kinds[] = {"allocators", "scenarios", "names", NULL};
    static const char *const options[] = {"--allocator", "--scenario", "--device", "--sim-capacity", NULL};
    static const char *const scenarios[] = {"views", "random_mix", "capped_training", NULL};
    static const struct {
        const char *typed;
        const char *const *known;
        const char *nearest; /* NULL: none offered */
    } cases[] = {
        {"cachng", allocators, "caching"},
        {"cahcing", allocators, "caching"},
        {"Caching", allocators, "caching"},
        {"asynk", allocators, "async"},
        {"caching", allocators, NULL}, /* known: nothing to offer */
        {"tpu", allocators, NULL},
        {"x", allocators, NULL},
        {"allocator", kinds, "allocators"},
        {"scenario", kinds, "scenarios"},
        {"--alocator", options, "--allocator"},
        {"--sim-capactiy", options, "--sim-capacity"},
        {"--bogus", options, NULL},
        {"view", scenarios, "views"},
        {"random", scenarios, "random_mix"}, /* a name it begins */
        {"capped", scenarios, "capped_training"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *nearest = vb_closest_name(cases[i].typed, cases[i].known);
        if ((nearest == NULL) != (cases[i].nearest == NULL) || (nearest && strcmp(nearest, cases[i].nearest) != 0))
            fail_msg("'%s': offered %s, not %s", cases[i].typed, nearest ? nearest : "nothing",
                     cases[i].nearest ? cases[i].nearest : "nothing");
    }
    char hint[64];
    assert_string_equal(vb_did_you_mean("cachng", allocators, hint, sizeof hint), "; did you mean caching?");
    assert_string_equal(vb_did_you_mean("zzzzzz", allocators, hint, sizeof hint), "");
}

/* ------------------------------------------------------------------------ */
/* The option table                                                          */
/* ------------------------------------------------------------------------ */

enum { OPT_SIZE, OPT_OUT, OPT_QUIET, OPT_ONLY_B, OPT_TAG, OPTION_COUNT };
static const vb_cli_option test_options[OPTION_COUNT + 1] = {
    [OPT_SIZE] = {"--size", NULL, "SIZE", "a size, e.g. --size 64MiB", 0},
    [OPT_OUT] = {"--out", "-o", "FILE", "where it goes", 0},
    [OPT_QUIET] = {"--quiet", NULL, NULL, "errors only", 0},
    [OPT_ONLY_B] = {"--only-b", NULL, "X", "variant B's", 2},
    [OPT_TAG] = {"--tag", NULL, "T", "a tag (repeatable)", VB_CLI_REPEATS},
    [OPTION_COUNT] = {NULL, NULL, NULL, NULL, 0},
};
static const vb_cli_usage usage_a = {"tool", "FILE", "A test command.", test_options, 1, "example:\n  tool x"};
static const vb_cli_usage usage_b = {"tool", NULL, "A test command.", test_options, 2, NULL};

/* Walks `argv` (NULL-terminated, argv[0] the command) and writes what the
 * parser returned as "INDEX=VALUE " pairs into `out`; returns the last code. */
static int walk(const vb_cli_usage *usage, char **argv, char *out, size_t capacity)
{
    int argc = 0;
    while (argv[argc]) argc++;
    vb_cli_parser parser;
    vb_cli_parser_init(&parser, usage, argc, argv);
    size_t used = 0;
    out[0] = '\0';
    const char *value;
    int code;
    /* stderr to /dev/null: the error lines are the CLI tests' to check */
    fflush(stderr);
    int saved = dup(STDERR_FILENO), null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, STDERR_FILENO);
    while ((code = vb_cli_next(&parser, &value)) >= 0 || code == VB_CLI_ARGUMENT)
        used += (size_t)snprintf(out + used, capacity - used, "%d=%s ", code, value ? value : "-");
    fflush(stderr);
    if (saved >= 0) dup2(saved, STDERR_FILENO), close(saved);
    if (null >= 0) close(null);
    return code == VB_CLI_STOP ? 100 + parser.exit_status : code;
}

static void test_a_name_or_all_named_twice_is_listed_once(void **state)
{
    (void)state;
    static const char *const claims[] = {"view_keeps_storage", "release_specific", "smaller_batch_uses_less", NULL};
    static const struct {
        const char *spec;
        size_t count;
        const char *first;
    } cases[] = {
        {"all,all", 3, "view_keeps_storage"},
        {"release_specific,release_specific", 1, "release_specific"},
        {"release_specific,all", 3, "release_specific"},
        {"all,release_specific", 3, "view_keeps_storage"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        vb_name_list list;
        assert_int_equal(vb_cli_names(cases[i].spec, "claim", claims, &list), 0);
        assert_int_equal(list.count, cases[i].count);
        assert_string_equal(list.names[0], cases[i].first);
        for (size_t a = 0; a < list.count; a++)
            for (size_t b = a + 1; b < list.count; b++) assert_string_not_equal(list.names[a], list.names[b]);
        vb_name_list_free(&list);
    }
}

static void test_the_parser_reads_options_from_the_table(void **state)
{
    (void)state;
    char seen[256];
    char *argv1[] = {"tool", "--size", "64M", "f.trace", "-o", "x.json", "--quiet", "--tag=y", NULL};
    assert_int_equal(walk(&usage_a, argv1, seen, sizeof seen), VB_CLI_END);
    assert_string_equal(seen, "0=64M -2=f.trace 1=x.json 2=- 4=y ");
    char *argv2[] = {"tool", "--only-b", "1", NULL};
    assert_int_equal(walk(&usage_b, argv2, seen, sizeof seen), VB_CLI_END);
    assert_string_equal(seen, "3=1 ");
}

static void test_the_parser_stops_with_exit_2_on_what_it_does_not_take(void **state)
{
    (void)state;
    char seen[256];
    char *unknown[] = {"tool", "--sise", "1", NULL};
    char *missing[] = {"tool", "--size", NULL};
    char *flag_value[] = {"tool", "--quiet=1", NULL};
    char *other_variant[] = {"tool", "--only-b", "1", NULL};
    char *no_arguments[] = {"tool", "file", NULL};
    assert_int_equal(walk(&usage_a, unknown, seen, sizeof seen), 100 + VB_EXIT_USAGE);
    assert_int_equal(walk(&usage_a, missing, seen, sizeof seen), 100 + VB_EXIT_USAGE);
    assert_int_equal(walk(&usage_a, flag_value, seen, sizeof seen), 100 + VB_EXIT_USAGE);
    assert_int_equal(walk(&usage_a, other_variant, seen, sizeof seen), 100 + VB_EXIT_USAGE);
    assert_int_equal(walk(&usage_b, no_arguments, seen, sizeof seen), 100 + VB_EXIT_USAGE);
}

static void test_a_second_value_for_a_single_value_option_is_refused(void **state)
{
    (void)state;
    char seen[256];
    char *twice[] = {"tool", "--out", "a.json", "--out", "b.json", NULL};
    char *alias_then_name[] = {"tool", "-o", "a.json", "--out=b.json", NULL};
    assert_int_equal(walk(&usage_a, twice, seen, sizeof seen), 100 + VB_EXIT_USAGE);
    assert_string_equal(seen, "1=a.json ");
    assert_int_equal(walk(&usage_a, alias_then_name, seen, sizeof seen), 100 + VB_EXIT_USAGE);
    /* A repeatable option adds each value; a flag given twice is still one flag. */
    char *repeatable[] = {"tool", "--tag", "a", "--quiet", "--tag=b", "--quiet", NULL};
    assert_int_equal(walk(&usage_a, repeatable, seen, sizeof seen), VB_CLI_END);
    assert_string_equal(seen, "4=a 2=- 4=b 2=- ");
}

static void test_after_a_double_dash_every_word_is_an_argument(void **state)
{
    (void)state;
    char seen[256];
    char *dashes[] = {"tool", "--quiet", "--", "-x", "--size", "--", "--help", NULL};
    assert_int_equal(walk(&usage_a, dashes, seen, sizeof seen), VB_CLI_END);
    assert_string_equal(seen, "2=- -2=-x -2=--size -2=-- -2=--help ");
    /* A command without arguments takes a lone "--", but no word after it. */
    char *lone[] = {"tool", "--", NULL};
    char *word_after[] = {"tool", "--", "x", NULL};
    assert_int_equal(walk(&usage_b, lone, seen, sizeof seen), VB_CLI_END);
    assert_int_equal(walk(&usage_b, word_after, seen, sizeof seen), 100 + VB_EXIT_USAGE);
}

static void test_help_lists_every_option_of_its_variant_and_nothing_else(void **state)
{
    (void)state;
    char *text = NULL;
    size_t length = 0;
    FILE *out = open_memstream(&text, &length);
    assert_non_null(out);
    vb_cli_print_help(out, &usage_a);
    fclose(out);
    assert_non_null(strstr(text, "usage: vrambench tool FILE [OPTIONS]"));
    for (const vb_cli_option *o = test_options; o->name; o++) {
        int listed = strstr(text, o->name) != NULL;
        unsigned variants = o->only & ~VB_CLI_REPEATS;
        if (listed != (variants == 0 || variants == 1)) fail_msg("%s %s in the help", o->name, listed ? "is" : "is not");
        if (variants == 0 || variants == 1) assert_non_null(strstr(text, o->help));
    }
    assert_non_null(strstr(text, "-o, --out FILE"));
    assert_non_null(strstr(text, "-h, --help"));
    assert_non_null(strstr(text, "example:\n  tool x"));
    free(text);
}

/* ------------------------------------------------------------------------ */
/* Result names                                                              */
/* ------------------------------------------------------------------------ */

/* Makes an empty file at `path`. */
static void make_empty_file(const char *path)
{
    FILE *file = fopen(path, "w");
    assert_non_null(file);
    fclose(file);
}

static void test_a_template_never_names_an_existing_file_unless_forced(void **state)
{
    (void)state;
    vb_temp_dir dir;
    assert_int_equal(vb_temp_dir_make(&dir, "names"), 0);
    vb_device_info info = {.simulated = 1};
    char pattern[256], path[4096], expected[4096];
    snprintf(pattern, sizeof pattern, "%s/{device}-run.json", dir.path);
    /* Free: the template's own name. */
    assert_int_equal(vb_report_output_path(pattern, &info, 0, path, sizeof path), VB_OK);
    assert_string_equal(path, vb_temp_dir_file(&dir, "sim-run.json"));
    /* Taken: -2, then -3. */
    make_empty_file(path);
    assert_int_equal(vb_report_output_path(pattern, &info, 0, path, sizeof path), VB_OK);
    snprintf(expected, sizeof expected, "%s", vb_temp_dir_file(&dir, "sim-run-2.json"));
    assert_string_equal(path, expected);
    make_empty_file(path);
    assert_int_equal(vb_report_output_path(pattern, &info, 0, path, sizeof path), VB_OK);
    assert_string_equal(path, vb_temp_dir_file(&dir, "sim-run-3.json"));
    /* --force: the template's own name again. */
    assert_int_equal(vb_report_output_path(pattern, &info, 1, path, sizeof path), VB_OK);
    assert_string_equal(path, vb_temp_dir_file(&dir, "sim-run.json"));
    /* A plain name is used as given (its file replaced when written). */
    snprintf(pattern, sizeof pattern, "%s/sim-run.json", dir.path);
    assert_int_equal(vb_report_output_path(pattern, &info, 0, path, sizeof path), VB_OK);
    assert_string_equal(path, vb_temp_dir_file(&dir, "sim-run.json"));
    vb_report_output_release(); /* the claims of -2 and -3 go: nothing of ours is left */
    assert_int_equal(vb_temp_dir_remove(&dir), 0);
}

static void test_a_template_name_chosen_is_held_until_released(void **state)
{
    (void)state;
    vb_temp_dir dir;
    assert_int_equal(vb_temp_dir_make(&dir, "claims"), 0);
    vb_device_info info = {.simulated = 1};
    char pattern[256], path[4096];
    snprintf(pattern, sizeof pattern, "%s/{device}.json", dir.path);
    /* No file is written yet, and a second run (here, the next call) still
     * gets a name of its own: two at once both chose sim.json before. */
    assert_int_equal(vb_report_output_path(pattern, &info, 0, path, sizeof path), VB_OK);
    assert_string_equal(path, vb_temp_dir_file(&dir, "sim.json"));
    assert_int_equal(vb_report_output_path(pattern, &info, 0, path, sizeof path), VB_OK);
    assert_string_equal(path, vb_temp_dir_file(&dir, "sim-2.json"));
    vb_report_output_release();
    assert_int_equal(vb_report_output_path(pattern, &info, 0, path, sizeof path), VB_OK);
    assert_string_equal(path, vb_temp_dir_file(&dir, "sim.json"));
    vb_report_output_release();
    assert_int_equal(vb_temp_dir_remove(&dir), 0);
}

static void test_a_taken_gzip_template_keeps_both_extensions(void **state)
{
    (void)state;
    vb_temp_dir dir;
    assert_int_equal(vb_temp_dir_make(&dir, "gznames"), 0);
    vb_device_info info = {.simulated = 1};
    char pattern[256], path[4096], expected[4096];
    /* It was "sim-run.json-2.gz": no longer a .json.gz. */
    snprintf(pattern, sizeof pattern, "%s/{device}-run.json.gz", dir.path);
    make_empty_file(vb_temp_dir_file(&dir, "sim-run.json.gz"));
    assert_int_equal(vb_report_output_path(pattern, &info, 0, path, sizeof path), VB_OK);
    snprintf(expected, sizeof expected, "%s", vb_temp_dir_file(&dir, "sim-run-2.json.gz"));
    assert_string_equal(path, expected);
    /* A name with one extension, .gz, keeps it as before. */
    snprintf(pattern, sizeof pattern, "%s/{device}.gz", dir.path);
    make_empty_file(vb_temp_dir_file(&dir, "sim.gz"));
    assert_int_equal(vb_report_output_path(pattern, &info, 0, path, sizeof path), VB_OK);
    assert_string_equal(path, vb_temp_dir_file(&dir, "sim-2.gz"));
    vb_report_output_release();
    assert_int_equal(vb_temp_dir_remove(&dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes_take_any_unit_spelling_in_powers_of_1024),
        cmocka_unit_test(test_malformed_sizes_are_refused),
        cmocka_unit_test(test_whole_numbers_are_digits_inside_their_range),
        cmocka_unit_test(test_decimals_are_plain_decimal_notation_inside_their_range),
        cmocka_unit_test(test_edit_distance_counts_swaps_as_one_and_ignores_case),
        cmocka_unit_test(test_the_nearest_name_is_offered_only_when_near),
        cmocka_unit_test(test_a_name_or_all_named_twice_is_listed_once),
        cmocka_unit_test(test_the_parser_reads_options_from_the_table),
        cmocka_unit_test(test_the_parser_stops_with_exit_2_on_what_it_does_not_take),
        cmocka_unit_test(test_a_second_value_for_a_single_value_option_is_refused),
        cmocka_unit_test(test_after_a_double_dash_every_word_is_an_argument),
        cmocka_unit_test(test_help_lists_every_option_of_its_variant_and_nothing_else),
        cmocka_unit_test(test_a_template_never_names_an_existing_file_unless_forced),
        cmocka_unit_test(test_a_taken_gzip_template_keeps_both_extensions),
        cmocka_unit_test(test_a_template_name_chosen_is_held_until_released),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
