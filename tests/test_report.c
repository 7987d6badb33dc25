/* Tests of results JSON and output files (app/json_report.c, context.c,
 * output_file.c, output_path.c): result documents validate against
 * docs/results-json.md (required keys, types, finite numbers), the
 * aggregates follow Google Benchmark, and a failure never leaves a partial
 * or temporary file behind. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "app/cli.h"
#include "app/context.h"
#include "app/json_report.h"
#include "app/output_file.h"
#include "app/output_path.h"
#include "cli_capture.h"
#include "temp_dir.h"


/* ======================================================================== */
/* A validator for result documents                                         */
/* ======================================================================== */

static char why[4096];

/* 0 with `why` set when `object[key]` is missing or fails `is_type`. */
static int has(const json_t *object, const char *key, int (*is_type)(const json_t *))
{
    const json_t *value = json_object_get(object, key);
    if (value && is_type(value)) return 1;
    snprintf(why, sizeof why, "key '%s' %s", key, value ? "has the wrong type" : "is missing");
    return 0;
}

static int is_string(const json_t *v) { return json_is_string(v); }
static int is_integer(const json_t *v) { return json_is_integer(v); }
static int is_boolean(const json_t *v) { return json_is_boolean(v); }
static int is_array(const json_t *v) { return json_is_array(v); }
static int is_object(const json_t *v) { return json_is_object(v); }
/* A number, and finite (jansson cannot hold others, but say it anyway). */
static int is_finite_number(const json_t *v) { return json_is_number(v) && isfinite(json_number_value(v)); }

static const char *const schema_counters[] = {
    "peak_requested_bytes", "peak_allocated_bytes", "peak_reserved_bytes", "overhead_ratio",
    "external_frag_at_peak", "driver_alloc_calls", "driver_free_calls", "alloc_retries", "ooms",
    "malloc_ns_p50", "malloc_ns_p99", "free_ns_p50", "free_ns_p99",
};

static int valid_context(const json_t *context)
{
    return has(context, "date", is_string) && has(context, "host_name", is_string) &&
           has(context, "executable", is_string) && has(context, "num_cpus", is_integer) &&
           has(context, "mhz_per_cpu", is_integer) && has(context, "cpu_scaling_enabled", is_boolean) &&
           has(context, "caches", is_array) && has(context, "load_avg", is_array) &&
           has(context, "library_build_type", is_string) && has(context, "json_schema_version", is_integer) &&
           json_integer_value(json_object_get(context, "json_schema_version")) == 1 &&
           has(context, "vrambench_version", is_string) && has(context, "device_kind", is_string) &&
           has(context, "simulated", is_boolean) && has(context, "device_name", is_string) &&
           has(context, "driver_version", is_integer) && has(context, "runtime_version", is_integer) &&
           has(context, "device_total_bytes", is_integer) && has(context, "git_commit", is_string) &&
           has(context, "allocator_configs", is_object);
}

static int valid_timeline(const json_t *timeline)
{
    size_t i;
    const json_t *point;
    json_array_foreach(timeline, i, point)
    if (!has(point, "step", is_string) || !has(point, "requested", is_integer) ||
        !has(point, "allocated", is_integer) || !has(point, "reserved", is_integer) ||
        !has(point, "driver_used", is_integer))
        return 0;
    return 1;
}

static int valid_segments(const json_t *segments)
{
    size_t i, j;
    const json_t *segment, *block;
    json_array_foreach(segments, i, segment)
    {
        if (!has(segment, "address", is_integer) || !has(segment, "size", is_integer) ||
            !has(segment, "stream", is_integer) || !has(segment, "blocks", is_array))
            return 0;
        json_array_foreach(json_object_get(segment, "blocks"), j, block)
        if (!has(block, "address", is_integer) || !has(block, "size", is_integer) ||
            !has(block, "allocated", is_boolean))
            return 0;
    }
    return 1;
}

static int valid_entry(const json_t *entry)
{
    if (!has(entry, "name", is_string) || !has(entry, "family_index", is_integer) ||
        !has(entry, "per_family_instance_index", is_integer) || !has(entry, "run_name", is_string) ||
        !has(entry, "run_type", is_string) || !has(entry, "repetitions", is_integer) ||
        !has(entry, "threads", is_integer) || !has(entry, "iterations", is_integer) ||
        !has(entry, "real_time", is_finite_number) || !has(entry, "cpu_time", is_finite_number) ||
        !has(entry, "time_unit", is_string) || !has(entry, "scenario", is_string) ||
        !has(entry, "allocator", is_string))
        return 0;
    for (size_t i = 0; i < sizeof schema_counters / sizeof schema_counters[0]; i++)
        if (!has(entry, schema_counters[i], is_finite_number)) return 0;
    const char *run_type = json_string_value(json_object_get(entry, "run_type"));
    const char *name = json_string_value(json_object_get(entry, "name"));
    const char *run_name = json_string_value(json_object_get(entry, "run_name"));
    char expected[2048];
    if (strcmp(run_type, "iteration") == 0) {
        snprintf(expected, sizeof expected, "%s/%s", json_string_value(json_object_get(entry, "scenario")),
                 json_string_value(json_object_get(entry, "allocator")));
        if (strcmp(name, expected) != 0 || strcmp(run_name, name) != 0) {
            snprintf(why, sizeof why, "iteration entry named '%s', expected '%s'", name, expected);
            return 0;
        }
        if (!has(entry, "repetition_index", is_integer) || !has(entry, "timeline", is_array)) return 0;
        if (!valid_timeline(json_object_get(entry, "timeline"))) return 0;
        const json_t *segments = json_object_get(entry, "segments_at_peak");
        return !segments || (has(entry, "segments_at_peak", is_array) && valid_segments(segments));
    }
    if (strcmp(run_type, "aggregate") != 0) {
        snprintf(why, sizeof why, "run_type '%s'", run_type);
        return 0;
    }
    if (!has(entry, "aggregate_name", is_string) || !has(entry, "aggregate_unit", is_string)) return 0;
    snprintf(expected, sizeof expected, "%s_%s", run_name, json_string_value(json_object_get(entry, "aggregate_name")));
    if (strcmp(name, expected) != 0 || json_object_get(entry, "timeline") ||
        json_object_get(entry, "repetition_index")) {
        snprintf(why, sizeof why, "aggregate entry '%s' is not as Google Benchmark writes one", name);
        return 0;
    }
    return 1;
}

/* 1 when `document` is a valid results document; else 0 with `why` set. */
static int valid_document(const json_t *document)
{
    if (!has(document, "context", is_object) || !has(document, "benchmarks", is_array)) return 0;
    if (!valid_context(json_object_get(document, "context"))) return 0;
    size_t i;
    const json_t *entry;
    json_array_foreach(json_object_get(document, "benchmarks"), i, entry)
    if (!valid_entry(entry)) return 0;
    return 1;
}

/* ======================================================================== */
/* Fixtures                                                                 */
/* ======================================================================== */

typedef struct fixture {
    vb_device *device;
    vb_temp_dir dir;
    const char *path;             /* out.json in dir */
    const char *temp;             /* its ".tmp" sibling: a user's file, never touched */
    const char *missing;          /* out.json under a directory that does not exist */
} fixture;

static int setup(void **state)
{
    static fixture f;
    memset(&f, 0, sizeof f);
    if (vb_temp_dir_make(&f.dir, "report") != 0 || vb_sim_open(0, &f.device) != VB_OK) return -1;
    f.path = vb_temp_dir_file(&f.dir, "out.json");
    f.temp = vb_temp_dir_file(&f.dir, "out.json.tmp");
    f.missing = vb_temp_dir_file(&f.dir, "missing/out.json");
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    vb_temp_dir_remove(&f->dir);
    vb_device_close(f->device);
    return 0;
}

/* A hand-made case: three repetitions whose real times are 1, 2 and 6 ns and
 * whose counter "x" is `x_last` in the last repetition. */
typedef struct made_case {
    vb_case_result result;
    vb_repetition_result repetitions[3];
    vb_run_counter counters[3][2];
} made_case;

static void make_case(made_case *made, double x_last)
{
    memset(made, 0, sizeof *made);
    static const double real[] = {1, 2, 6};
    for (size_t i = 0; i < 3; i++) {
        snprintf(made->counters[i][0].name, sizeof made->counters[i][0].name, "peak_reserved_bytes");
        made->counters[i][0].value = 2097152;
        snprintf(made->counters[i][1].name, sizeof made->counters[i][1].name, "x");
        made->counters[i][1].value = i == 2 ? x_last : 1;
        made->repetitions[i] = (vb_repetition_result){10, real[i], real[i], 0, made->counters[i], 2, NULL, 0};
    }
    snprintf(made->result.scenario, sizeof made->result.scenario, "s");
    snprintf(made->result.allocator, sizeof made->result.allocator, "a");
    snprintf(made->result.name, sizeof made->result.name, "s/a");
    made->result.repetitions = made->repetitions;
    made->result.repetition_count = 3;
}

/* The benchmarks array of `made` alone, which must be written. */
static json_t *benchmarks_of(made_case *made)
{
    json_t *benchmarks = json_array();
    assert_int_equal(vb_report_add_case(benchmarks, &made->result, 0, 0), VB_OK);
    return benchmarks;
}

/* A results document with the sim's context and no benchmarks. */
static json_t *document_without_cases(fixture *f)
{
    return vb_report_document(vb_report_context(f->device, "x", NULL, 0));
}

/* Runs random_mix with `params` on `cuda` through the runner, `repetitions`
 * times; the caller frees `result` and `spec`. */
static void run_random_mix_on_cuda(fixture *f, int repetitions, const char *params, vb_allocator_spec *spec,
                                   vb_case_result *result)
{
    assert_int_equal(vb_allocator_spec_parse("cuda", spec), VB_OK);
    vb_runner_options options = {repetitions, 0.0, 1, 0};
    vb_case c = {vb_scenario_find("random_mix"), params, spec, NULL};
    assert_int_equal(vb_runner_run_case(f->device, &c, &options, result), VB_OK);
}

/* The entry named `name` in `benchmarks`, or NULL. */
static json_t *entry_named(json_t *benchmarks, const char *name)
{
    size_t i;
    json_t *entry;
    json_array_foreach(benchmarks, i, entry)
    if (strcmp(json_string_value(json_object_get(entry, "name")), name) == 0) return entry;
    return NULL;
}

/* Runs `vrambench run ARGS...` in-process with stdout silenced. */
static int run_command(const char *const *args, int count)
{
    char *argv[32];
    for (int i = 0; i < count; i++) argv[i] = (char *)args[i];
    return vb_run_quietly(vb_cmd_run, count, argv, NULL);
}

/* ======================================================================== */
/* Tests                                                                    */
/* ======================================================================== */

static void test_document_of_a_run_validates(void **state)
{
    fixture *f = *state;
    vb_allocator_spec spec;
    vb_case_result result;
    run_random_mix_on_cuda(f, 3, "allocations=100", &spec, &result);
    json_t *document = vb_report_document(vb_report_context(f->device, NULL, &spec, 1));
    assert_non_null(document);
    assert_int_equal(vb_report_add_case(json_object_get(document, "benchmarks"), &result, 0, 0), VB_OK);
    int valid = valid_document(document);
    if (!valid) fail_msg("invalid document: %s", why);
    json_decref(document);
    vb_case_result_free(&result);
    vb_allocator_spec_free(&spec);
}

static void test_file_written_by_run_validates(void **state)
{
    fixture *f = *state;
    const char *args[] = {"run", "--device", "sim", "--scenario", "random_mix", "--allocator", "cuda",
                          "--repetitions", "2", "--min-time", "0", "--param", "allocations=100", "--quiet",
                          "--out", f->path};
    assert_int_equal(run_command(args, sizeof args / sizeof args[0]), VB_EXIT_OK);
    json_error_t error;
    json_t *document = json_load_file(f->path, 0, &error);
    assert_non_null(document);
    int valid = valid_document(document);
    if (!valid) fail_msg("invalid file: %s", why);
    json_decref(document);
}

/* The validator itself: a document missing one counter must fail it, or
 * the tests above could not fail. */
static void test_validator_catches_a_missing_counter(void **state)
{
    fixture *f = *state;
    json_t *document = vb_report_document(vb_report_context(f->device, NULL, NULL, 0));
    vb_allocator_spec spec;
    vb_case_result result;
    run_random_mix_on_cuda(f, 1, "allocations=10", &spec, &result);
    json_t *benchmarks = json_object_get(document, "benchmarks");
    assert_int_equal(vb_report_add_case(benchmarks, &result, 0, 0), VB_OK);
    assert_true(valid_document(document));
    json_object_del(json_array_get(benchmarks, 0), "ooms");
    assert_false(valid_document(document));
    json_decref(document);
    vb_case_result_free(&result);
    vb_allocator_spec_free(&spec);
}

static void test_context_marks_the_sim_as_simulated(void **state)
{
    fixture *f = *state;
    json_t *context = vb_report_context(f->device, NULL, NULL, 0);
    assert_true(json_is_true(json_object_get(context, "simulated")));
    assert_string_equal(json_string_value(json_object_get(context, "device_kind")), "sim");
    json_decref(context);
}

static void test_allocator_configs_map_labels_to_their_options(void **state)
{
    fixture *f = *state;
    vb_allocator_spec spec;
    assert_int_equal(vb_allocator_spec_parse("cuda[k=v]", &spec), VB_OK);
    json_t *context = vb_report_context(f->device, NULL, &spec, 1);
    json_t *config = json_object_get(json_object_get(context, "allocator_configs"), "cuda[k=v]");
    assert_non_null(config);
    assert_string_equal(json_string_value(json_object_get(config, "k")), "v");
    json_decref(context);
    vb_allocator_spec_free(&spec);
}

static void test_aggregates_are_google_benchmark_statistics(void **state)
{
    (void)state;
    made_case made;
    make_case(&made, 1);
    json_t *benchmarks = benchmarks_of(&made);
    assert_int_equal(json_array_size(benchmarks), 3 + 4);
    /* real times 1, 2, 6: mean 3, median 2, stddev sqrt((4 + 1 + 9) / 2) =
     * sqrt(7), cv sqrt(7) / 3 */
    assert_true(json_number_value(json_object_get(entry_named(benchmarks, "s/a_mean"), "real_time")) == 3.0);
    assert_true(json_number_value(json_object_get(entry_named(benchmarks, "s/a_median"), "real_time")) == 2.0);
    assert_true(fabs(json_number_value(json_object_get(entry_named(benchmarks, "s/a_stddev"), "real_time")) -
                     sqrt(7.0)) < 1e-12);
    json_t *cv = entry_named(benchmarks, "s/a_cv");
    assert_true(fabs(json_number_value(json_object_get(cv, "real_time")) - sqrt(7.0) / 3.0) < 1e-12);
    assert_string_equal(json_string_value(json_object_get(cv, "aggregate_unit")), "percentage");
    /* GB: an aggregate's iterations are the count of repetitions. */
    assert_int_equal(json_integer_value(json_object_get(cv, "iterations")), 3);
    json_decref(benchmarks);
}

static void test_aggregates_aggregate_the_counters(void **state)
{
    (void)state;
    made_case made;
    make_case(&made, 4); /* x = 1, 1, 4: mean 2 */
    json_t *benchmarks = benchmarks_of(&made);
    assert_true(json_number_value(json_object_get(entry_named(benchmarks, "s/a_mean"), "x")) == 2.0);
    assert_true(json_number_value(json_object_get(entry_named(benchmarks, "s/a_stddev"), "peak_reserved_bytes")) ==
                0.0);
    json_decref(benchmarks);
}

static void test_one_repetition_has_no_aggregates(void **state)
{
    (void)state;
    made_case made;
    make_case(&made, 1);
    made.result.repetition_count = 1;
    json_t *benchmarks = benchmarks_of(&made);
    assert_int_equal(json_array_size(benchmarks), 1);
    json_decref(benchmarks);
}

static void test_a_non_finite_counter_fails_the_case(void **state)
{
    (void)state;
    made_case made;
    make_case(&made, NAN);
    json_t *benchmarks = json_array();
    assert_int_not_equal(vb_report_add_case(benchmarks, &made.result, 0, 0), VB_OK);
    json_decref(benchmarks);
}

static void test_json_numbers_are_integers_when_whole(void **state)
{
    (void)state;
    json_t *whole = vb_json_number(17179869184.0), *fraction = vb_json_number(1.5);
    assert_true(json_is_integer(whole));
    assert_true(json_is_real(fraction));
    assert_null(vb_json_number(INFINITY));
    json_decref(whole);
    json_decref(fraction);
}

/* Entries in directory `path` besides "." and "..": 0 means nothing was left behind. */
static int entries_in(const char *path)
{
    DIR *directory = opendir(path);
    assert_non_null(directory);
    int count = 0;
    for (struct dirent *entry; (entry = readdir(directory));)
        count += strcmp(entry->d_name, ".") != 0 && strcmp(entry->d_name, "..") != 0;
    closedir(directory);
    return count;
}

/* The first bytes of file `path` (NUL-terminated) into `out`. */
static void read_text(const char *path, char *out, size_t capacity)
{
    FILE *file = fopen(path, "r");
    assert_non_null(file);
    size_t got = fread(out, 1, capacity - 1, file);
    out[got] = '\0';
    fclose(file);
}

static void test_a_users_tmp_file_is_never_touched(void **state)
{
    fixture *f = *state;
    FILE *mine = fopen(f->temp, "w");
    assert_non_null(mine);
    fputs("mine", mine);
    assert_int_equal(fclose(mine), 0);
    json_t *document = document_without_cases(f);
    assert_int_equal(vb_report_write(document, f->path), VB_OK);
    char text[16];
    read_text(f->temp, text, sizeof text);
    assert_string_equal(text, "mine");
    assert_int_equal(entries_in(f->dir.path), 2); /* out.json and the user's out.json.tmp */
    json_decref(document);
}

static void test_only_regular_files_are_replaced(void **state)
{
    fixture *f = *state;
    FILE *old = fopen(f->temp, "w");
    assert_non_null(old);
    fputs("old", old);
    assert_int_equal(fclose(old), 0);
    assert_int_equal(symlink(f->temp, f->path), 0);
    assert_int_equal(vb_output_check(f->path), VB_ERR_INVALID);
    assert_non_null(strstr(vb_last_error(), "symbolic link"));
    /* Refused even when the check was skipped: the link and its file stay. */
    json_t *document = document_without_cases(f);
    assert_int_equal(vb_report_write(document, f->path), VB_ERR_IO);
    char text[16];
    read_text(f->path, text, sizeof text);
    assert_string_equal(text, "old");
    assert_int_equal(entries_in(f->dir.path), 2);
    unlink(f->path);
    assert_int_equal(mkfifo(f->path, 0600), 0);
    assert_int_equal(vb_output_check(f->path), VB_ERR_INVALID);
    assert_non_null(strstr(vb_last_error(), "FIFO"));
    unlink(f->path);
    assert_int_equal(vb_output_check("/dev/null"), VB_ERR_INVALID);
    assert_non_null(strstr(vb_last_error(), "device"));
    json_decref(document);
}

static void test_a_253_byte_file_name_works(void **state)
{
    fixture *f = *state;
    char name[254];
    memset(name, 'n', 253);
    name[253] = '\0';
    const char *path = vb_temp_dir_file(&f->dir, name);
    assert_int_equal(vb_output_check(path), VB_OK);
    json_t *document = document_without_cases(f);
    assert_int_equal(vb_report_write(document, path), VB_OK);
    assert_true(vb_path_exists(path));
    assert_int_equal(entries_in(f->dir.path), 1);
    json_decref(document);
}

static void test_write_then_read_gives_the_document_back(void **state)
{
    fixture *f = *state;
    json_t *document = document_without_cases(f);
    assert_int_equal(vb_report_write(document, f->path), VB_OK);
    json_t *read = json_load_file(f->path, 0, NULL);
    assert_true(json_equal(document, read));
    json_decref(read);
    json_decref(document);
}

static void test_a_failed_write_leaves_neither_file_nor_temp(void **state)
{
    fixture *f = *state;
    /* The target is a directory: the temp file is written, the rename fails. */
    assert_int_equal(mkdir(f->path, 0755), 0);
    json_t *document = document_without_cases(f);
    assert_int_equal(vb_report_write(document, f->path), VB_ERR_IO);
    assert_int_equal(entries_in(f->dir.path), 1); /* the directory; no temporary file */
    json_decref(document);
    rmdir(f->path);
}

static void test_writing_into_a_missing_directory_fails(void **state)
{
    fixture *f = *state;
    json_t *document = document_without_cases(f);
    assert_int_equal(vb_report_write(document, f->missing), VB_ERR_IO);
    assert_false(vb_path_exists(f->missing));
    json_decref(document);
}

static void test_writability_check_leaves_nothing_behind(void **state)
{
    fixture *f = *state;
    assert_int_equal(vb_output_check(f->path), VB_OK);
    assert_int_equal(entries_in(f->dir.path), 0);
}

static void test_writability_check_rejects_directories_and_missing_ones(void **state)
{
    fixture *f = *state;
    assert_int_equal(vb_output_check(f->dir.path), VB_ERR_INVALID);
    assert_int_equal(vb_output_check(f->missing), VB_ERR_INVALID);
}

static void test_a_refused_run_writes_no_result_file(void **state)
{
    fixture *f = *state;
    /* A bad --param is refused before any case runs (a usage error). */
    const char *args[] = {"run", "--device", "sim", "--scenario", "random_mix", "--allocator", "cuda",
                          "--min-time", "0", "--param", "nonsense=1", "--quiet", "--out", f->path};
    fflush(stderr);
    assert_int_equal(run_command(args, sizeof args / sizeof args[0]), VB_EXIT_USAGE);
    assert_false(vb_path_exists(f->path));
    assert_false(vb_path_exists(f->temp));
}

static void test_device_slug_of_a_gpu_name(void **state)
{
    (void)state;
    vb_device_info info = {.kind = VB_DEVICE_CUDA, .name = "NVIDIA H100 80GB HBM3"};
    char slug[64];
    vb_report_device_slug(&info, slug, sizeof slug);
    assert_string_equal(slug, "nvidia-h100-80gb-hbm3");
}

static void test_device_slug_of_the_sim_is_sim(void **state)
{
    fixture *f = *state;
    vb_device_info info;
    f->device->ops->info(f->device, &info);
    char slug[64];
    vb_report_device_slug(&info, slug, sizeof slug);
    assert_string_equal(slug, "sim");
}

static void test_output_pattern_expands_device_and_date(void **state)
{
    fixture *f = *state;
    vb_device_info info;
    f->device->ops->info(f->device, &info);
    char path[64];
    assert_int_equal(vb_report_expand_path("r/{device}-{date}.json", &info, path, sizeof path), VB_OK);
    assert_int_equal(strlen(path), strlen("r/sim-yyyymmdd.json"));
    assert_memory_equal(path, "r/sim-", 6);
    for (int i = 6; i < 14; i++) assert_true(path[i] >= '0' && path[i] <= '9');
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_document_of_a_run_validates),
        T(test_file_written_by_run_validates),
        T(test_validator_catches_a_missing_counter),
        T(test_context_marks_the_sim_as_simulated),
        T(test_allocator_configs_map_labels_to_their_options),
        cmocka_unit_test(test_aggregates_are_google_benchmark_statistics),
        cmocka_unit_test(test_aggregates_aggregate_the_counters),
        cmocka_unit_test(test_one_repetition_has_no_aggregates),
        cmocka_unit_test(test_a_non_finite_counter_fails_the_case),
        cmocka_unit_test(test_json_numbers_are_integers_when_whole),
        T(test_write_then_read_gives_the_document_back),
        T(test_a_users_tmp_file_is_never_touched),
        T(test_only_regular_files_are_replaced),
        T(test_a_253_byte_file_name_works),
        T(test_a_failed_write_leaves_neither_file_nor_temp),
        T(test_writing_into_a_missing_directory_fails),
        T(test_writability_check_leaves_nothing_behind),
        T(test_writability_check_rejects_directories_and_missing_ones),
        T(test_a_refused_run_writes_no_result_file),
        cmocka_unit_test(test_device_slug_of_a_gpu_name),
        T(test_device_slug_of_the_sim_is_sim),
        T(test_output_pattern_expands_device_and_date),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
