/* vrambench — results JSON and the summary table (see report.h). */
#include "report.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/measure.h"

#define VB_VERSION "0.1"

/* ======================================================================== */
/* Numbers                                                                  */
/* ======================================================================== */

json_t *vb_json_number(double value)
{
    if (!isfinite(value)) return NULL;
    /* 2^53: beyond it a double no longer holds every whole number. */
    if (value == floor(value) && fabs(value) <= 9007199254740992.0) return json_integer((json_int_t)value);
    return json_real(value);
}

/* Sets `key` on `object` to a new value, reporting host OOM as -1. */
static int set_new(json_t *object, const char *key, json_t *value)
{
    return value ? json_object_set_new(object, key, value) : -1;
}

/* ======================================================================== */
/* Context                                                                  */
/* ======================================================================== */

/* Local time as ISO 8601 with a +HH:MM offset, as Google Benchmark writes it. */
static void iso_date(char *out, size_t capacity)
{
    time_t now = time(NULL);
    struct tm local;
    localtime_r(&now, &local);
    char zone[8];
    strftime(out, capacity, "%Y-%m-%dT%H:%M:%S", &local);
    strftime(zone, sizeof zone, "%z", &local); /* "+0100" */
    size_t used = strlen(out);
    if (strlen(zone) == 5) snprintf(out + used, capacity - used, "%.3s:%s", zone, zone + 3);
}

/* The first "cpu MHz" of /proc/cpuinfo, 0 when unknown. */
static long cpu_mhz(void)
{
    FILE *file = fopen("/proc/cpuinfo", "r");
    if (!file) return 0;
    char line[256];
    double mhz = 0;
    while (fgets(line, sizeof line, file))
        if (strncmp(line, "cpu MHz", 7) == 0) {
            const char *colon = strchr(line, ':');
            if (colon) mhz = atof(colon + 1);
            break;
        }
    fclose(file);
    return (long)mhz;
}

/* Google Benchmark's test: frequency scaling is on when cpu0 has a governor
 * other than "performance". */
static int cpu_scaling_enabled(void)
{
    FILE *file = fopen("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "r");
    if (!file) return 0;
    char governor[64] = "";
    int enabled = fgets(governor, sizeof governor, file) && strncmp(governor, "performance", 11) != 0;
    fclose(file);
    return enabled;
}

/* The checked-out commit: $VB_GIT_COMMIT when set (a copy of the tree
 * without .git, as on a lent GPU machine, is told it), else `git rev-parse
 * HEAD`, else "unknown". */
static void git_commit(char *out, size_t capacity)
{
    const char *given = getenv("VB_GIT_COMMIT");
    snprintf(out, capacity, "%s", given && given[0] ? given : "unknown");
    if (given && given[0]) return;
    FILE *pipe = popen("git rev-parse HEAD 2>/dev/null", "r");
    if (!pipe) return;
    char line[128] = "";
    int ok = fgets(line, sizeof line, pipe) != NULL;
    pclose(pipe);
    size_t length = strspn(line, "0123456789abcdef");
    if (ok && length >= 40 && capacity > length) {
        memcpy(out, line, length);
        out[length] = '\0';
    }
}

/* {"label": {"key": "value", ...}, ...} for the specs. */
static json_t *allocator_configs(const vb_allocator_spec *specs, size_t count)
{
    json_t *configs = json_object();
    for (size_t i = 0; configs && i < count; i++) {
        json_t *config = json_object();
        for (size_t j = 0; config && j < specs[i].entry_count; j++)
            if (set_new(config, specs[i].entries[j].key, json_string(specs[i].entries[j].value)) != 0) {
                json_decref(config);
                config = NULL;
            }
        if (set_new(configs, specs[i].label, config) != 0) {
            json_decref(configs);
            return NULL;
        }
    }
    return configs;
}

json_t *vb_report_context(vb_device *dev, const char *executable, const vb_allocator_spec *specs,
                          size_t spec_count)
{
    vb_device_info info;
    dev->ops->info(dev, &info);
    char date[64] = "", host[256] = "", commit[64];
    iso_date(date, sizeof date);
    if (gethostname(host, sizeof host - 1) != 0) snprintf(host, sizeof host, "unknown");
    git_commit(commit, sizeof commit);
    json_t *load = json_array();
    double loads[3];
    int load_count = getloadavg(loads, 3);
    for (int i = 0; load && i < load_count; i++) json_array_append_new(load, json_real(loads[i]));
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    char self[1024] = "vrambench";
    if (!executable) {
        ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
        if (length > 0) self[length] = '\0';
        executable = self;
    }

    json_t *context = json_object();
    int failed = !context;
    if (!failed) {
        failed |= set_new(context, "date", json_string(date));
        failed |= set_new(context, "host_name", json_string(host));
        failed |= set_new(context, "executable", json_string(executable));
        failed |= set_new(context, "num_cpus", json_integer(cpus > 0 ? cpus : 1));
        failed |= set_new(context, "mhz_per_cpu", json_integer(cpu_mhz()));
        failed |= set_new(context, "cpu_scaling_enabled", json_boolean(cpu_scaling_enabled()));
        failed |= set_new(context, "caches", json_array());
        failed |= set_new(context, "load_avg", load);
        load = NULL;
#ifdef __OPTIMIZE__
        failed |= set_new(context, "library_build_type", json_string("release"));
#else
        failed |= set_new(context, "library_build_type", json_string("debug"));
#endif
        failed |= set_new(context, "json_schema_version", json_integer(1));
        failed |= set_new(context, "vrambench_version", json_string(VB_VERSION));
        failed |= set_new(context, "device_kind", json_string(info.kind == VB_DEVICE_CUDA ? "cuda" : "sim"));
        failed |= set_new(context, "simulated", json_boolean(info.simulated));
        failed |= set_new(context, "device_name", json_string(info.name));
        failed |= set_new(context, "driver_version", json_integer(info.driver_version));
        failed |= set_new(context, "runtime_version", json_integer(info.runtime_version));
        failed |= set_new(context, "device_total_bytes", json_integer((json_int_t)info.total_bytes));
        failed |= set_new(context, "git_commit", json_string(commit));
        failed |= set_new(context, "allocator_configs", allocator_configs(specs, spec_count));
        /* Memory figures come from the runner's memory pass (runner.h); the
         * field tells check-sim a file's figures do not depend on timing. */
        failed |= set_new(context, "memory_pass", json_pack("{s:i}", "iterations", VB_MEMORY_PASS_ITERATIONS));
    }
    json_decref(load);
    if (failed) {
        json_decref(context);
        return NULL;
    }
    return context;
}

json_t *vb_report_document(json_t *context)
{
    json_t *document = json_object();
    if (!context || !document || json_object_set_new(document, "context", context) != 0) {
        json_decref(document);
        return NULL;
    }
    if (set_new(document, "benchmarks", json_array()) != 0) {
        json_decref(document);
        return NULL;
    }
    return document;
}

/* ======================================================================== */
/* Names                                                                    */
/* ======================================================================== */

/* Adds the steps of `table` (NULL-ended) to the object `steps`; 0 on success. */
static int add_steps(json_t *steps, const vb_name *table)
{
    int failed = 0;
    for (const vb_name *step = table; step && step->key; step++) failed |= set_new(steps, step->key, json_string(step->text));
    return failed;
}

/* Appends the counter names of `table` (NULL-ended) to the array `counters`. */
static int add_counters(json_t *counters, const char *const *table)
{
    int failed = 0;
    for (const char *const *name = table; name && *name; name++)
        failed |= json_array_append_new(counters, json_string(*name));
    return failed;
}

/* The "counter_families" object of a scenario that has families. */
static json_t *families_json(const vb_scenario *scenario)
{
    json_t *object = json_object(), *members = json_array(), *families = json_object();
    int failed = !object || !members || !families;
    for (const vb_family_member *m = scenario->members; !failed && m->name; m++)
        failed |= json_array_append_new(members, json_pack("{s:s, s:I}", "name", m->name, "parameter",
                                                           (json_int_t)m->parameter));
    for (const vb_counter_family *f = scenario->families; !failed && f->key; f++) {
        json_t *counters = json_object();
        failed |= !counters;
        for (const vb_family_member *m = scenario->members; !failed && m->name; m++) {
            char name[64];
            vb_scenario_family_counter(f, m, name, sizeof name);
            failed |= set_new(counters, m->name, json_string(name));
        }
        failed |= set_new(families, f->key, counters);
    }
    failed |= set_new(object, "member_parameter", json_string(scenario->member_parameter ? scenario->member_parameter : ""));
    failed |= json_object_set(object, "members", members);
    failed |= json_object_set(object, "families", families);
    json_decref(members);
    json_decref(families);
    if (failed) {
        json_decref(object);
        return NULL;
    }
    return object;
}

json_t *vb_report_names(const vb_scenario *scenario)
{
    json_t *names = json_object(), *steps = json_object(), *counters = json_array();
    int failed = !names || !steps || !counters;
    if (!failed) {
        failed |= add_steps(steps, vb_scenario_common_steps);
        failed |= add_steps(steps, scenario->steps);
        failed |= add_steps(steps, scenario->shared_steps);
        failed |= add_counters(counters, scenario->counters);
        failed |= json_object_set(names, "steps", steps);
        failed |= json_object_set(names, "counters", counters);
        if (scenario->families) failed |= set_new(names, "counter_families", families_json(scenario));
    }
    json_decref(steps);
    json_decref(counters);
    if (failed) {
        json_decref(names);
        return NULL;
    }
    return names;
}

int vb_report_add_names(json_t *document, const char *label, const vb_scenario *scenario)
{
    json_t *all = json_object_get(document, "names");
    if (!all && set_new(document, "names", json_object()) != 0) return -1;
    all = json_object_get(document, "names");
    if (json_object_get(all, label)) return 0;
    return set_new(all, label, vb_report_names(scenario));
}

/* ======================================================================== */
/* Entries                                                                  */
/* ======================================================================== */

/* The keys every entry starts with, in Google Benchmark's order, up to and
 * including run_type. */
static int entry_head(json_t *entry, const char *name, const vb_case_result *result, size_t family_index,
                      size_t instance_index, const char *run_type)
{
    int failed = 0;
    failed |= set_new(entry, "name", json_string(name));
    failed |= set_new(entry, "family_index", json_integer((json_int_t)family_index));
    failed |= set_new(entry, "per_family_instance_index", json_integer((json_int_t)instance_index));
    failed |= set_new(entry, "run_name", json_string(result->name));
    failed |= set_new(entry, "run_type", json_string(run_type));
    failed |= set_new(entry, "repetitions", json_integer((json_int_t)result->repetition_count));
    return failed;
}

/* The time keys and vrambench's scenario/allocator keys. */
static int entry_times(json_t *entry, const vb_case_result *result, double iterations, double real_ns,
                       double cpu_ns)
{
    int failed = 0;
    failed |= set_new(entry, "threads", json_integer(1));
    failed |= set_new(entry, "iterations", vb_json_number(iterations));
    failed |= set_new(entry, "real_time", vb_json_number(real_ns));
    failed |= set_new(entry, "cpu_time", vb_json_number(cpu_ns));
    failed |= set_new(entry, "time_unit", json_string("ns"));
    failed |= set_new(entry, "scenario", json_string(result->scenario));
    failed |= set_new(entry, "allocator", json_string(result->allocator));
    /* An external library's reserved bytes are the driver's figure (allocators/external.c). */
    if (strncmp(result->allocator, VB_EXTERNAL_PREFIX, strlen(VB_EXTERNAL_PREFIX)) == 0)
        failed |= set_new(entry, "reserved_bytes_source", json_string(VB_EXTERNAL_RESERVED_SOURCE));
    return failed;
}

/* The timeline array of one repetition. */
static json_t *timeline_json(const vb_repetition_result *rep)
{
    json_t *timeline = json_array();
    for (size_t i = 0; timeline && i < rep->timeline_count; i++) {
        const vb_timeline_sample *sample = &rep->timeline[i];
        json_t *point = json_object();
        int failed = !point;
        if (!failed) {
            failed |= set_new(point, "step", json_string(sample->step));
            failed |= set_new(point, "requested", json_integer((json_int_t)sample->requested));
            failed |= set_new(point, "allocated", json_integer((json_int_t)sample->allocated));
            failed |= set_new(point, "reserved", json_integer((json_int_t)sample->reserved));
            failed |= set_new(point, "driver_used", json_integer((json_int_t)sample->driver_used));
        }
        if (failed || json_array_append_new(timeline, point) != 0) {
            json_decref(timeline);
            return NULL;
        }
    }
    return timeline;
}

/* The segments_at_peak array: blocks grouped by their segment (the walk
 * lists a segment's blocks together, in address order). */
static json_t *segments_json(const vb_case_result *result)
{
    json_t *segments = json_array(), *blocks = NULL;
    for (size_t i = 0; segments && i < result->segment_block_count; i++) {
        const vb_peak_block *block = &result->segments_at_peak[i];
        int failed = 0;
        if (i == 0 || block->segment != result->segments_at_peak[i - 1].segment) {
            json_t *segment = json_object();
            blocks = json_array();
            failed = !segment || !blocks;
            if (!failed) {
                failed |= set_new(segment, "address", json_integer((json_int_t)block->segment));
                failed |= set_new(segment, "size", json_integer((json_int_t)block->segment_size));
                failed |= set_new(segment, "stream", json_integer(block->stream));
                failed |= json_object_set(segment, "blocks", blocks);
                failed |= json_array_append(segments, segment);
            }
            json_decref(segment);
            json_decref(blocks); /* the segment holds it now */
        }
        json_t *entry = json_object();
        failed |= !entry;
        if (!failed) {
            failed |= set_new(entry, "address", json_integer((json_int_t)block->block));
            failed |= set_new(entry, "size", json_integer((json_int_t)block->block_size));
            failed |= set_new(entry, "allocated", json_boolean(block->allocated));
            failed |= json_array_append(blocks, entry);
        }
        json_decref(entry);
        if (failed) {
            json_decref(segments);
            return NULL;
        }
    }
    return segments;
}

/* Appends one repetition's entry. */
static vb_status add_iteration_entry(json_t *benchmarks, const vb_case_result *result, size_t index,
                                     size_t family_index, size_t instance_index)
{
    const vb_repetition_result *rep = &result->repetitions[index];
    json_t *entry = json_object();
    int failed = !entry;
    if (!failed) {
        failed |= entry_head(entry, result->name, result, family_index, instance_index, "iteration");
        failed |= set_new(entry, "repetition_index", json_integer((json_int_t)index));
        failed |= entry_times(entry, result, (double)rep->iterations, rep->real_time_ns, rep->cpu_time_ns);
        for (size_t i = 0; i < rep->counter_count; i++)
            failed |= set_new(entry, rep->counters[i].name, vb_json_number(rep->counters[i].value));
        failed |= set_new(entry, "timeline", timeline_json(rep));
        if (index == 0 && result->has_segments) failed |= set_new(entry, "segments_at_peak", segments_json(result));
    }
    if (failed || json_array_append_new(benchmarks, entry) != 0) {
        if (failed) json_decref(entry);
        return vb_error(VB_ERR_HOST_OOM, "%s: could not build its JSON entry (host memory, or a non-finite number)",
                        result->name);
    }
    return VB_OK;
}

/* One of Google Benchmark's statistics over the repetitions' values. */
typedef struct statistic {
    const char *name;
    const char *unit;  /* aggregate_unit */
    double (*compute)(const double *values, size_t count);
} statistic;

static const statistic statistics[] = {
    {"mean", "time", vb_mean},
    {"median", "time", vb_stat_median},
    {"stddev", "time", vb_stddev},
    {"cv", "percentage", vb_stat_cv},
};

/* Appends one aggregate entry, its counters the statistic of each counter of
 * the first repetition over the repetitions that have it. */
static vb_status add_aggregate_entry(json_t *benchmarks, const vb_case_result *result, const statistic *stat,
                                     double *values, size_t family_index, size_t instance_index)
{
    size_t count = result->repetition_count;
    char name[sizeof result->name + 16];
    snprintf(name, sizeof name, "%s_%s", result->name, stat->name);
    json_t *entry = json_object();
    int failed = !entry;
    if (!failed) {
        failed |= entry_head(entry, name, result, family_index, instance_index, "aggregate");
        failed |= set_new(entry, "aggregate_name", json_string(stat->name));
        failed |= set_new(entry, "aggregate_unit", json_string(stat->unit));
        for (size_t i = 0; i < count; i++) values[i] = result->repetitions[i].real_time_ns;
        double real = stat->compute(values, count);
        for (size_t i = 0; i < count; i++) values[i] = result->repetitions[i].cpu_time_ns;
        double cpu = stat->compute(values, count);
        /* GB: an aggregate's iterations are the number of repetitions. */
        failed |= entry_times(entry, result, (double)count, real, cpu);
        const vb_repetition_result *first = &result->repetitions[0];
        for (size_t c = 0; c < first->counter_count; c++) {
            size_t have = 0;
            for (size_t i = 0; i < count; i++) {
                double value = vb_repetition_counter(&result->repetitions[i], first->counters[c].name, NAN);
                if (!isnan(value)) values[have++] = value;
            }
            failed |= set_new(entry, first->counters[c].name, vb_json_number(stat->compute(values, have)));
        }
    }
    if (failed || json_array_append_new(benchmarks, entry) != 0) {
        if (failed) json_decref(entry);
        return vb_error(VB_ERR_HOST_OOM, "%s: could not build its JSON entry (host memory, or a non-finite number)",
                        name);
    }
    return VB_OK;
}

vb_status vb_report_add_case(json_t *benchmarks, const vb_case_result *result, size_t family_index,
                             size_t instance_index)
{
    vb_status status = VB_OK;
    for (size_t i = 0; i < result->repetition_count && status == VB_OK; i++)
        status = add_iteration_entry(benchmarks, result, i, family_index, instance_index);
    if (status != VB_OK || result->repetition_count < 2) return status;
    double *values = malloc(result->repetition_count * sizeof *values);
    if (!values) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    for (size_t s = 0; s < sizeof statistics / sizeof statistics[0] && status == VB_OK; s++)
        status = add_aggregate_entry(benchmarks, result, &statistics[s], values, family_index, instance_index);
    free(values);
    return status;
}

/* ======================================================================== */
/* Files                                                                    */
/* ======================================================================== */

/* "PATH.tmp" into `out`; -1 when it does not fit. */
static int temp_path(const char *path, char *out, size_t capacity)
{
    return (size_t)snprintf(out, capacity, "%s.tmp", path) < capacity ? 0 : -1;
}

vb_status vb_report_write(json_t *root, const char *path)
{
    char temp[4096];
    if (temp_path(path, temp, sizeof temp) != 0) return vb_error(VB_ERR_IO, "output path '%s' is too long", path);
    FILE *file = fopen(temp, "w");
    if (!file) return vb_error(VB_ERR_IO, "cannot write '%s': %s", temp, strerror(errno));
    int failed = json_dumpf(root, file, JSON_INDENT(2) | JSON_REAL_PRECISION(17)) != 0;
    failed |= fputc('\n', file) == EOF;
    failed |= fflush(file) != 0;
    failed |= fsync(fileno(file)) != 0 && errno != EINVAL;
    int saved_errno = errno;
    failed |= fclose(file) != 0;
    if (!failed && rename(temp, path) == 0) return VB_OK;
    if (!failed) saved_errno = errno;
    remove(temp);
    return vb_error(VB_ERR_IO, "cannot write '%s': %s", path, strerror(saved_errno));
}

vb_status vb_report_check_writable(const char *path)
{
    char temp[4096];
    struct stat info;
    if (path[0] == '\0') return vb_error(VB_ERR_INVALID, "--out: empty file name");
    if (temp_path(path, temp, sizeof temp) != 0) return vb_error(VB_ERR_INVALID, "output path '%s' is too long", path);
    if (stat(path, &info) == 0 && S_ISDIR(info.st_mode))
        return vb_error(VB_ERR_INVALID, "cannot write '%s': it is a directory", path);
    FILE *file = fopen(temp, "w");
    if (!file) return vb_error(VB_ERR_INVALID, "cannot write '%s': %s", path, strerror(errno));
    fclose(file);
    remove(temp);
    return VB_OK;
}

void vb_report_device_slug(const vb_device_info *info, char *out, size_t capacity)
{
    if (capacity == 0) return;
    if (info->simulated) {
        snprintf(out, capacity, "sim");
        return;
    }
    size_t used = 0;
    int dash = 0;
    for (const char *c = info->name; *c && used + 1 < capacity; c++) {
        if (isalnum((unsigned char)*c)) {
            if (dash && used > 0 && used + 2 < capacity) out[used++] = '-';
            dash = 0;
            out[used++] = (char)tolower((unsigned char)*c);
        } else {
            dash = 1;
        }
    }
    out[used] = '\0';
    if (used == 0) snprintf(out, capacity, "gpu");
}

vb_status vb_report_expand_path(const char *pattern, const vb_device_info *info, char *out, size_t capacity)
{
    char slug[128], date[16];
    vb_report_device_slug(info, slug, sizeof slug);
    time_t now = time(NULL);
    struct tm local;
    localtime_r(&now, &local);
    strftime(date, sizeof date, "%Y%m%d", &local);
    size_t used = 0;
    for (const char *c = pattern; *c; c++) {
        const char *insert = NULL;
        if (strncmp(c, "{device}", 8) == 0) insert = slug, c += 7;
        else if (strncmp(c, "{date}", 6) == 0) insert = date, c += 5;
        size_t length = insert ? strlen(insert) : 1;
        if (used + length >= capacity) return vb_error(VB_ERR_INVALID, "output path '%s' is too long", pattern);
        memcpy(out + used, insert ? insert : c, length);
        used += length;
    }
    out[used] = '\0';
    return VB_OK;
}

/* ======================================================================== */
/* Summary table                                                            */
/* ======================================================================== */

/* The mean over repetitions of a counter. */
static double counter_mean(const vb_case_result *result, const char *name)
{
    double sum = 0;
    for (size_t i = 0; i < result->repetition_count; i++)
        sum += vb_repetition_counter(&result->repetitions[i], name, 0.0);
    return result->repetition_count ? sum / (double)result->repetition_count : 0.0;
}

/* A duration with a readable unit ("812 ns", "1.25 ms"). */
static void format_time(double ns, char *out, size_t capacity)
{
    if (ns < 1e3) snprintf(out, capacity, "%.0f ns", ns);
    else if (ns < 1e6) snprintf(out, capacity, "%.2f us", ns / 1e3);
    else if (ns < 1e9) snprintf(out, capacity, "%.2f ms", ns / 1e6);
    else snprintf(out, capacity, "%.2f s", ns / 1e9);
}

/* A full-width rule: "|====...====|". */
static void rule(FILE *out, char fill, int width)
{
    fputc('|', out);
    for (int i = 0; i < width - 2; i++) fputc(fill, out);
    fputs("|\n", out);
}

void vb_report_print_summary(FILE *out, const vb_device_info *info, const vb_case_result *results, size_t count)
{
    int name_width = 18;
    for (size_t i = 0; i < count; i++)
        if ((int)strlen(results[i].name) > name_width) name_width = (int)strlen(results[i].name);
    static const char header_format[] = "| %-*s | %6s | %12s | %12s | %8s | %10s | %10s | %10s | %10s |\n";
    int width = snprintf(NULL, 0, header_format, name_width, "", "", "", "", "", "", "", "", "") - 1;
    char title[256];
    snprintf(title, sizeof title, "vrambench summary: %s (%s)", info->name,
             info->simulated ? "SIMULATED: memory exact, times not GPU times" : "real GPU");
    rule(out, '=', width);
    int padding = width - 4 - (int)strlen(title);
    fprintf(out, "| %*s%s%*s |\n", padding > 0 ? padding / 2 : 0, "", title,
            padding > 0 ? padding - padding / 2 : 0, "");
    rule(out, '-', width);
    fprintf(out, header_format, name_width, "scenario/allocator", "iters", "peak req MiB", "peak rsv MiB", "overhead",
            "drv allocs", "drv frees", "time/iter", "GPU/iter");
    rule(out, '-', width);
    for (size_t i = 0; i < count; i++) {
        const vb_case_result *result = &results[i];
        double real = 0, gpu = 0;
        for (size_t r = 0; r < result->repetition_count; r++) {
            real += result->repetitions[r].real_time_ns / (double)result->repetition_count;
            gpu += result->repetitions[r].gpu_time_ns / (double)result->repetition_count;
        }
        char real_text[32], gpu_text[32];
        format_time(real, real_text, sizeof real_text);
        format_time(gpu, gpu_text, sizeof gpu_text);
        fprintf(out, "| %-*s | %6llu | %12.1f | %12.1f | %8.3f | %10.0f | %10.0f | %10s | %10s |\n", name_width,
                result->name,
                (unsigned long long)(result->repetition_count ? result->repetitions[0].iterations : 0),
                counter_mean(result, "peak_requested_bytes") / (double)VB_MiB,
                counter_mean(result, "peak_reserved_bytes") / (double)VB_MiB, counter_mean(result, "overhead_ratio"),
                counter_mean(result, "driver_alloc_calls"), counter_mean(result, "driver_free_calls"), real_text,
                gpu_text);
    }
    rule(out, '=', width);
    fprintf(out, "  memory figures from the memory pass (%d iterations on a fresh allocator, whatever the timing);\n"
                 "  driver calls summed over its iterations;\n",
            VB_MEMORY_PASS_ITERATIONS);
    fprintf(out, "  overhead = peak reserved / peak requested (1.0 ideal); means over repetitions.\n");
}

/* Expands and checks an output path before any work. */
vb_status vb_report_output_path(const char *pattern, const vb_device_info *info, char *out, size_t capacity)
{
    vb_status status = vb_report_expand_path(pattern, info, out, capacity);
    return status == VB_OK ? vb_report_check_writable(out) : status;
}
