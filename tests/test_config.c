/* vrambench — unit tests of allocators/config.c: key=value options parsed
 * against an allocator's option table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "allocators/allocator.h"

/* Settings of a made-up allocator "demo", with its defaults. */
typedef struct demo_settings {
    uint64_t max_split_size;   /* bytes, 0 .. UINT64_MAX */
    uint64_t divisions;        /* 1 .. 16 */
    double threshold;          /* 0.0 .. 1.0 */
} demo_settings;

static const vb_option demo_options[] = {
    {"max_split_size", VB_OPTION_U64, offsetof(demo_settings, max_split_size), 0, (double)UINT64_MAX,
     "bytes; default max"},
    {"divisions", VB_OPTION_U64, offsetof(demo_settings, divisions), 1, 16, "1 to 16; default 4"},
    {"threshold", VB_OPTION_DOUBLE, offsetof(demo_settings, threshold), 0.0, 1.0, "fraction; default 0.5"},
};
#define DEMO_OPTION_COUNT (sizeof demo_options / sizeof *demo_options)

static const demo_settings demo_defaults = {UINT64_MAX, 4, 0.5};

/* Applies one key=value to fresh defaults; the status, settings in *out. */
static vb_status apply_one(const char *key, const char *value, demo_settings *out)
{
    vb_config_entry entry = {key, value};
    vb_config config = {&entry, 1};
    *out = demo_defaults;
    vb_clear_error();
    return vb_config_apply(&config, demo_options, DEMO_OPTION_COUNT, out, "demo");
}

/* Fails unless applying key=value is VB_ERR_INVALID, leaves the settings at
 * their defaults, and says what was wrong naming the allocator and key. */
static void expect_rejected(const char *key, const char *value)
{
    demo_settings settings;
    vb_status status = apply_one(key, value, &settings);
    if (status != VB_ERR_INVALID) fail_msg("%s=%s was accepted", key, value);
    assert_memory_equal(&settings, &demo_defaults, sizeof settings);
    assert_non_null(strstr(vb_last_error(), "demo"));
    assert_non_null(strstr(vb_last_error(), key));
}

/* An unknown key is rejected with a message listing the known keys. */
static void unknown_key_is_rejected_with_known_keys(void **state)
{
    (void)state;
    expect_rejected("max_split_size_mb", "256");
    assert_non_null(strstr(vb_last_error(), "unknown"));
    assert_non_null(strstr(vb_last_error(), "divisions"));
}

/* Values that are not a whole number are rejected: empty, trailing text,
 * a sign, leading blanks, a fraction, a bare "0x". */
static void malformed_number_is_rejected(void **state)
{
    (void)state;
    static const char *const bad[] = {"", "12x", "abc", "-1", "+1", " 5", "\t5", "1.5", "0x", "1e3", "max1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) expect_rejected("max_split_size", bad[i]);
}

/* Numbers outside the option's range are rejected: below its minimum,
 * above its maximum, and too large for 64 bits (2^64). */
static void out_of_range_is_rejected(void **state)
{
    (void)state;
    expect_rejected("divisions", "0");
    expect_rejected("divisions", "17");
    expect_rejected("divisions", "max");
    expect_rejected("max_split_size", "18446744073709551616");
    expect_rejected("threshold", "1.5");
    expect_rejected("threshold", "-0.1");
}

/* A real option rejects non-finite values. */
static void non_finite_real_is_rejected(void **state)
{
    (void)state;
    expect_rejected("threshold", "nan");
    expect_rejected("threshold", "inf");
    expect_rejected("threshold", "");
    expect_rejected("threshold", "0.5x");
    expect_rejected("threshold", "\t0.5");
}

/* "max" means UINT64_MAX where the range allows it. */
static void max_means_uint64_max(void **state)
{
    (void)state;
    demo_settings settings;
    assert_int_equal(apply_one("max_split_size", "max", &settings), VB_OK);
    assert_true(settings.max_split_size == UINT64_MAX);
    assert_int_equal(apply_one("max_split_size", "18446744073709551615", &settings), VB_OK);
    assert_true(settings.max_split_size == UINT64_MAX);
}

/* 0x introduces hex: 0x10 is 16, 0X200000 is 2 MiB. */
static void hex_is_accepted(void **state)
{
    (void)state;
    demo_settings settings;
    assert_int_equal(apply_one("max_split_size", "0x10", &settings), VB_OK);
    assert_int_equal(settings.max_split_size, 16);
    assert_int_equal(apply_one("max_split_size", "0X200000", &settings), VB_OK);
    assert_int_equal(settings.max_split_size, 2 * 1024 * 1024);
}

/* Without 0x a number is decimal, leading zeros included (allocator.h:
 * "decimal, or 0x hex"): 010 is ten, not octal eight, and 08 is eight. */
static void leading_zero_is_decimal(void **state)
{
    (void)state;
    demo_settings settings;
    assert_int_equal(apply_one("max_split_size", "010", &settings), VB_OK);
    assert_int_equal(settings.max_split_size, 10);
    assert_int_equal(apply_one("max_split_size", "08", &settings), VB_OK);
    assert_int_equal(settings.max_split_size, 8);
}

/* Values at the ends of a range are accepted and stored. */
static void range_ends_are_accepted(void **state)
{
    (void)state;
    demo_settings settings;
    assert_int_equal(apply_one("divisions", "1", &settings), VB_OK);
    assert_int_equal(settings.divisions, 1);
    assert_int_equal(apply_one("divisions", "16", &settings), VB_OK);
    assert_int_equal(settings.divisions, 16);
    assert_int_equal(apply_one("threshold", "1", &settings), VB_OK);
    assert_true(settings.threshold == 1.0);
    assert_int_equal(apply_one("threshold", "0.25", &settings), VB_OK);
    assert_true(settings.threshold == 0.25);
}

/* Several entries apply in order; a later one for the same key wins, and
 * options not mentioned keep their defaults. */
static void several_entries_apply_in_order(void **state)
{
    (void)state;
    vb_config_entry entries[] = {{"divisions", "2"}, {"threshold", "0.75"}, {"divisions", "8"}};
    vb_config config = {entries, 3};
    demo_settings settings = demo_defaults;
    assert_int_equal(vb_config_apply(&config, demo_options, DEMO_OPTION_COUNT, &settings, "demo"), VB_OK);
    assert_int_equal(settings.divisions, 8);
    assert_true(settings.threshold == 0.75);
    assert_true(settings.max_split_size == UINT64_MAX);
}

/* An allocator without options rejects any key, and says it has none. */
static void allocator_without_options_rejects_any_key(void **state)
{
    (void)state;
    vb_config_entry entry = {"release_threshold", "0"};
    vb_config config = {&entry, 1};
    vb_clear_error();
    assert_int_equal(vb_config_apply(&config, NULL, 0, NULL, "plain"), VB_ERR_INVALID);
    assert_non_null(strstr(vb_last_error(), "none"));
}

/* "KEY=VALUE" splits at the first '='; no '=' or an empty key is an error,
 * an empty value parses (and is then rejected as a number). */
static void entry_parse_splits_at_first_equals(void **state)
{
    (void)state;
    vb_config_entry entry;
    char text[] = "max_split_size_mb=256=x";
    assert_int_equal(vb_config_entry_parse(text, &entry), VB_OK);
    assert_string_equal(entry.key, "max_split_size_mb");
    assert_string_equal(entry.value, "256=x");
    char no_equals[] = "max_split_size_mb";
    assert_int_equal(vb_config_entry_parse(no_equals, &entry), VB_ERR_INVALID);
    char no_key[] = "=256";
    assert_int_equal(vb_config_entry_parse(no_key, &entry), VB_ERR_INVALID);
    char no_value[] = "divisions=";
    assert_int_equal(vb_config_entry_parse(no_value, &entry), VB_OK);
    assert_string_equal(entry.value, "");
}

/* Runs every config test. */
/* A range up to UINT64_MAX is said as "or max": never as a number past
 * it (the double 2^64 printed whole is 18446744073709551616). */
static void open_ended_ranges_say_or_max(void **state)
{
    (void)state;
    demo_settings settings;
    assert_int_equal(apply_one("max_split_size", "-1", &settings), VB_ERR_INVALID);
    assert_null(strstr(vb_last_error(), "18446744073709551616"));
    assert_non_null(strstr(vb_last_error(), "at least 0, or max"));
    assert_int_equal(apply_one("divisions", "17", &settings), VB_ERR_INVALID);
    assert_non_null(strstr(vb_last_error(), "from 1 to 16"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(unknown_key_is_rejected_with_known_keys),
        cmocka_unit_test(malformed_number_is_rejected),
        cmocka_unit_test(out_of_range_is_rejected),
        cmocka_unit_test(non_finite_real_is_rejected),
        cmocka_unit_test(max_means_uint64_max),
        cmocka_unit_test(hex_is_accepted),
        cmocka_unit_test(leading_zero_is_decimal),
        cmocka_unit_test(range_ends_are_accepted),
        cmocka_unit_test(several_entries_apply_in_order),
        cmocka_unit_test(allocator_without_options_rejects_any_key),
        cmocka_unit_test(entry_parse_splits_at_first_equals),
        cmocka_unit_test(open_ended_ranges_say_or_max),
    };
    return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
