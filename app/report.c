/* vrambench — results JSON and the summary table (see report.h). */
#include "report.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
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

/* A JSON string of `text`, which need not be UTF-8 (a file or marker name
 * from the user): bytes that are not valid UTF-8 become '?', so building a
 * document never fails on a name. NULL on host OOM. */
static json_t *text(const char *value)
{
    if (vb_text_valid(value, strlen(value), 1)) return json_string(value);
    char *copy = strdup(value);
    if (!copy) return NULL;
    vb_text_sanitize(copy, 0);
    json_t *result = json_string(copy);
    free(copy);
    return result;
}

void vb_text_sanitize(char *text, int controls_too)
{
    size_t length = strlen(text);
    for (size_t at = 0; at < length;) {
        unsigned char c = (unsigned char)text[at];
        size_t good = vb_utf8_sequence(text + at, length - at);
        if (good == 0 || (controls_too && (c < 0x20 || c == 0x7F))) text[at++] = '?';
        else at += good;
    }
}

size_t vb_utf8_sequence(const char *bytes, size_t available)
{
    const unsigned char *b = (const unsigned char *)bytes;
    if (available == 0) return 0;
    if (b[0] < 0x80) return 1;
    size_t length;
    unsigned min;
    unsigned code;
    if (b[0] >= 0xC2 && b[0] <= 0xDF) length = 2, code = b[0] & 0x1F, min = 0x80;
    else if (b[0] >= 0xE0 && b[0] <= 0xEF) length = 3, code = b[0] & 0x0F, min = 0x800;
    else if (b[0] >= 0xF0 && b[0] <= 0xF4) length = 4, code = b[0] & 0x07, min = 0x10000;
    else return 0;
    if (length > available) return 0;
    for (size_t i = 1; i < length; i++) {
        if ((b[i] & 0xC0) != 0x80) return 0;
        code = code << 6 | (b[i] & 0x3F);
    }
    /* overlong forms, UTF-16 surrogates and code points past U+10FFFF are not UTF-8 */
    if (code < min || (code >= 0xD800 && code <= 0xDFFF) || code > 0x10FFFF) return 0;
    return length;
}

int vb_text_valid(const char *bytes, size_t length, int controls_allowed)
{
    for (size_t at = 0; at < length;) {
        unsigned char c = (unsigned char)bytes[at];
        if (!controls_allowed && (c < 0x20 || c == 0x7F)) return 0;
        size_t good = vb_utf8_sequence(bytes + at, length - at);
        if (good == 0) return 0;
        at += good;
    }
    return 1;
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
            if (set_new(config, specs[i].entries[j].key, text(specs[i].entries[j].value)) != 0) {
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
        failed |= set_new(context, "date", text(date));
        failed |= set_new(context, "host_name", text(host));
        failed |= set_new(context, "executable", text(executable));
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
        failed |= set_new(context, "vrambench_version", text(VB_VERSION));
        failed |= set_new(context, "device_kind", text(info.kind == VB_DEVICE_CUDA ? "cuda" : "sim"));
        failed |= set_new(context, "simulated", json_boolean(info.simulated));
        failed |= set_new(context, "device_name", text(info.name));
        failed |= set_new(context, "driver_version", json_integer(info.driver_version));
        failed |= set_new(context, "runtime_version", json_integer(info.runtime_version));
        failed |= set_new(context, "device_total_bytes", json_integer((json_int_t)info.total_bytes));
        failed |= set_new(context, "git_commit", text(commit));
        failed |= set_new(context, "allocator_configs", allocator_configs(specs, spec_count));
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
    failed |= set_new(entry, "name", text(name));
    failed |= set_new(entry, "family_index", json_integer((json_int_t)family_index));
    failed |= set_new(entry, "per_family_instance_index", json_integer((json_int_t)instance_index));
    failed |= set_new(entry, "run_name", text(result->name));
    failed |= set_new(entry, "run_type", text(run_type));
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
    failed |= set_new(entry, "scenario", text(result->scenario));
    failed |= set_new(entry, "allocator", text(result->allocator));
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
            failed |= set_new(point, "step", text(sample->step));
            failed |= set_new(point, "requested", json_integer((json_int_t)sample->requested));
            failed |= set_new(point, "allocated", json_integer((json_int_t)sample->allocated));
            failed |= set_new(point, "reserved", json_integer((json_int_t)sample->reserved));
            failed |= set_new(point, "driver_used", json_integer((json_int_t)sample->driver_used));
        }
        if (failed) json_decref(point); /* append_new takes it only when it is called */
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
        failed |= set_new(entry, "aggregate_name", text(stat->name));
        failed |= set_new(entry, "aggregate_unit", text(stat->unit));
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

/* The directory part of `path` ("." for a bare name, "/" for "/NAME") into
 * `out`, and where the file name starts; -1 when it does not fit. */
static int split_directory(const char *path, char *out, size_t capacity, const char **name)
{
    const char *slash = strrchr(path, '/');
    *name = slash ? slash + 1 : path;
    if (!slash) return (size_t)snprintf(out, capacity, ".") < capacity ? 0 : -1;
    size_t length = slash == path ? 1 : (size_t)(slash - path);
    if (length >= capacity) return -1;
    memcpy(out, path, length);
    out[length] = '\0';
    return 0;
}

/* What an existing non-regular `mode` is, for an error message. */
static const char *file_kind(mode_t mode)
{
    if (S_ISLNK(mode)) return "a symbolic link";
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

/* The process's umask (read by setting it and setting it back). */
static mode_t current_umask(void)
{
    mode_t mask = umask(022);
    umask(mask);
    return mask;
}

/* Creates a new, uniquely named temporary file in `directory` (mkstemp:
 * never an existing file), its name in `temp`; the descriptor, or -1 with
 * errno set. The name is short and fixed in length, so it fits wherever
 * the target's name fits. */
static int create_temp(const char *directory, char *temp, size_t capacity)
{
    if ((size_t)snprintf(temp, capacity, "%s/.vrambench-XXXXXX", directory) >= capacity) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = mkstemp(temp);
    /* mkstemp makes it 0600; a result file is as readable as any new file. */
    if (fd >= 0) fchmod(fd, 0666 & ~current_umask());
    return fd;
}

vb_status vb_output_check(const char *path)
{
    char directory[4096], temp[4096];
    const char *name;
    struct stat info;
    if (path[0] == '\0') return vb_error(VB_ERR_INVALID, "--out: empty file name");
    if (split_directory(path, directory, sizeof directory, &name) != 0)
        return vb_error(VB_ERR_INVALID, "output path '%s' is too long", path);
    if (*name == '\0' || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return vb_error(VB_ERR_INVALID, "cannot write '%s': it names a directory, not a file", path);
    if (strlen(name) > NAME_MAX)
        return vb_error(VB_ERR_INVALID, "cannot write '%s': file name longer than %d bytes", path, NAME_MAX);
    if (lstat(path, &info) == 0 && !S_ISREG(info.st_mode))
        return vb_error(VB_ERR_INVALID, "cannot write '%s': it is %s (an output replaces only a regular file)", path,
                        file_kind(info.st_mode));
    int fd = create_temp(directory, temp, sizeof temp);
    if (fd < 0) return vb_error(VB_ERR_INVALID, "cannot write '%s': %s", path, strerror(errno));
    close(fd);
    unlink(temp);
    return VB_OK;
}

vb_status vb_output_open(vb_output *out, const char *path)
{
    char directory[4096];
    const char *name;
    out->fd = -1;
    out->temp[0] = '\0';
    if ((size_t)snprintf(out->path, sizeof out->path, "%s", path) >= sizeof out->path ||
        split_directory(path, directory, sizeof directory, &name) != 0)
        return vb_error(VB_ERR_IO, "output path '%s' is too long", path);
    out->fd = create_temp(directory, out->temp, sizeof out->temp);
    if (out->fd < 0) {
        out->temp[0] = '\0';
        return vb_error(VB_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    }
    return VB_OK;
}

vb_status vb_output_write(vb_output *out, const void *bytes, size_t length)
{
    const char *at = bytes;
    while (length > 0) {
        ssize_t written = write(out->fd, at, length);
        if (written < 0 && errno == EINTR) continue;
        if (written <= 0) return vb_error(VB_ERR_IO, "cannot write '%s': %s", out->path, written < 0 ? strerror(errno) : "no progress");
        at += written;
        length -= (size_t)written;
    }
    return VB_OK;
}

void vb_output_abandon(vb_output *out)
{
    if (out->fd >= 0) close(out->fd);
    out->fd = -1;
    if (out->temp[0]) unlink(out->temp); /* ours: mkstemp created it */
    out->temp[0] = '\0';
}

vb_status vb_output_commit(vb_output *out)
{
    struct stat info;
    int error = 0;
    if (fsync(out->fd) != 0) error = errno;
    if (close(out->fd) != 0 && !error) error = errno;
    out->fd = -1;
    if (!error && lstat(out->path, &info) == 0 && !S_ISREG(info.st_mode)) {
        vb_error(VB_ERR_IO, "cannot write '%s': it is now %s (an output replaces only a regular file)", out->path,
                 file_kind(info.st_mode));
        vb_output_abandon(out);
        return VB_ERR_IO;
    }
    if (!error && rename(out->temp, out->path) != 0) error = errno;
    if (!error) {
        out->temp[0] = '\0';
        return VB_OK;
    }
    vb_output_abandon(out);
    return vb_error(VB_ERR_IO, "cannot write '%s': %s", out->path, strerror(error));
}

vb_status vb_report_write(json_t *root, const char *path)
{
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    if (!text) return vb_error(VB_ERR_HOST_OOM, "cannot write '%s': out of host memory", path);
    vb_output out;
    vb_status status = vb_output_open(&out, path);
    if (status == VB_OK) status = vb_output_write(&out, text, strlen(text));
    if (status == VB_OK) status = vb_output_write(&out, "\n", 1);
    free(text);
    if (status == VB_OK) return vb_output_commit(&out);
    vb_output_abandon(&out);
    return status;
}

vb_status vb_report_check_writable(const char *path)
{
    return vb_output_check(path);
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
    fprintf(out, "  peaks over a repetition (from a fresh allocator); driver calls summed over its iterations;\n"
                 "  overhead = peak reserved / peak requested (1.0 ideal); means over repetitions.\n");
}

/* Expands and checks an output path before any work. */
vb_status vb_report_output_path(const char *pattern, const vb_device_info *info, char *out, size_t capacity)
{
    vb_status status = vb_report_expand_path(pattern, info, out, capacity);
    return status == VB_OK ? vb_report_check_writable(out) : status;
}
