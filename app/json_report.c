/* vrambench — results JSON: documents, entries, names (see json_report.h). */
#include "json_report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "base/measure.h"
#include "output_file.h"
#include "text.h"

/* ======================================================================== */
/* Values                                                                   */
/* ======================================================================== */

json_t *vb_json_number(double value)
{
    if (!isfinite(value)) return NULL;
    /* 2^53: beyond it a double no longer holds every whole number. */
    if (value == floor(value) && fabs(value) <= 9007199254740992.0) return json_integer((json_int_t)value);
    return json_real(value);
}

json_t *vb_json_whole(uint64_t value)
{
    if (value <= (uint64_t)INT64_MAX) return json_integer((json_int_t)value);
    /* Past 2^64 - 2^10 (a replay's first OOM asking 2^64-1 bytes) the double rounds up to 2^64. */
    return json_real(fmin((double)value, nextafter(18446744073709551616.0, 0)));
}

/* A counter's value: vb_json_whole's when it was kept whole, else
 * vb_json_number's. */
static json_t *counter_json(const vb_run_counter *counter)
{
    if (counter->whole) return vb_json_whole(counter->whole);
    return vb_json_number(counter->value);
}

json_t *vb_json_text(const char *value)
{
    if (vb_text_valid(value, strlen(value), 1)) return json_string(value);
    char *copy = strdup(value);
    if (!copy) return NULL;
    vb_text_sanitize(copy, 0);
    json_t *result = json_string(copy);
    free(copy);
    return result;
}

/* ======================================================================== */
/* Documents                                                                */
/* ======================================================================== */

json_t *vb_report_document(json_t *context)
{
    json_t *document = json_object();
    if (!context || !document || json_object_set_new(document, "context", context) != 0) {
        json_decref(document);
        return NULL;
    }
    if (json_object_set_new(document, "benchmarks", json_array()) != 0) {
        json_decref(document);
        return NULL;
    }
    return document;
}

/* Writes `length` bytes of `text` to `out` gzip-compressed (the gzip
 * format, level 6, as gen-trace writes a .gz trace), a chunk at a time. */
static vb_status write_gzip(vb_output *out, const char *path, const char *text, size_t length)
{
    z_stream stream;
    memset(&stream, 0, sizeof stream);
    if (deflateInit2(&stream, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) /* 15 + 16: a gzip header */
        return vb_error(VB_ERR_HOST_OOM, "cannot write '%s': out of host memory", path);
    unsigned char chunk[65536];
    vb_status status = VB_OK;
    int result = Z_OK;
    stream.next_in = (unsigned char *)text;
    while (status == VB_OK && result != Z_STREAM_END) {
        size_t step = length < 1u << 30 ? length : 1u << 30; /* avail_in is an unsigned int */
        if (stream.avail_in == 0) {
            stream.avail_in = (uInt)step;
            length -= step;
        }
        stream.next_out = chunk;
        stream.avail_out = sizeof chunk;
        result = deflate(&stream, length == 0 ? Z_FINISH : Z_NO_FLUSH);
        if (result == Z_STREAM_ERROR)
            status = vb_error(VB_ERR_IO, "cannot write '%s': gzip compression failed", path);
        else status = vb_output_write(out, chunk, sizeof chunk - stream.avail_out);
    }
    deflateEnd(&stream);
    return status;
}

vb_status vb_report_write(json_t *root, const char *path)
{
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    size_t length = text ? strlen(text) : 0;
    char *line = text ? realloc(text, length + 2) : NULL; /* the text and its newline, written as one */
    if (!line) {
        free(text);
        return vb_error(VB_ERR_HOST_OOM, "cannot write '%s': out of host memory", path);
    }
    line[length++] = '\n';
    line[length] = '\0';
    vb_output out;
    vb_status status = vb_output_open(&out, path);
    if (status == VB_OK && vb_output_is_gzip_name(path))
        status = write_gzip(&out, path, line, length);
    else if (status == VB_OK) status = vb_output_write(&out, line, length);
    free(line);
    if (status == VB_OK) return vb_output_commit(&out);
    vb_output_abandon(&out);
    return status;
}

/* ======================================================================== */
/* Names                                                                    */
/* ======================================================================== */

/* Adds the steps of `table` (NULL-ended) to the object `steps`; 0 on success. */
static int add_steps(json_t *steps, const vb_name *table)
{
    int failed = 0;
    for (const vb_name *step = table; step && step->key; step++)
        failed |= json_object_set_new(steps, step->key, json_string(step->text));
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
            failed |= json_object_set_new(counters, m->name, json_string(name));
        }
        failed |= json_object_set_new(families, f->key, counters);
    }
    failed |= json_object_set_new(object, "member_parameter",
                                  json_string(scenario->member_parameter ? scenario->member_parameter : ""));
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
        if (scenario->families) failed |= json_object_set_new(names, "counter_families", families_json(scenario));
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
    if (!all && json_object_set_new(document, "names", json_object()) != 0) return -1;
    all = json_object_get(document, "names");
    if (json_object_get(all, label)) return 0;
    return json_object_set_new(all, label, vb_report_names(scenario));
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
    failed |= json_object_set_new(entry, "name", vb_json_text(name));
    failed |= json_object_set_new(entry, "family_index", json_integer((json_int_t)family_index));
    failed |= json_object_set_new(entry, "per_family_instance_index", json_integer((json_int_t)instance_index));
    failed |= json_object_set_new(entry, "run_name", vb_json_text(result->name));
    failed |= json_object_set_new(entry, "run_type", vb_json_text(run_type));
    failed |= json_object_set_new(entry, "repetitions", json_integer((json_int_t)result->repetition_count));
    return failed;
}

/* The time keys and vrambench's scenario/allocator keys. */
static int entry_times(json_t *entry, const vb_case_result *result, double iterations, double real_ns,
                       double cpu_ns)
{
    int failed = 0;
    failed |= json_object_set_new(entry, "threads", json_integer(1));
    failed |= json_object_set_new(entry, "iterations", vb_json_number(iterations));
    failed |= json_object_set_new(entry, "real_time", vb_json_number(real_ns));
    failed |= json_object_set_new(entry, "cpu_time", vb_json_number(cpu_ns));
    failed |= json_object_set_new(entry, "time_unit", json_string("ns"));
    failed |= json_object_set_new(entry, "scenario", vb_json_text(result->scenario));
    failed |= json_object_set_new(entry, "allocator", vb_json_text(result->allocator));
    /* An external library's reserved bytes are the driver's figure (allocators/external.c). */
    if (strncmp(result->allocator, VB_EXTERNAL_PREFIX, strlen(VB_EXTERNAL_PREFIX)) == 0)
        failed |= json_object_set_new(entry, "reserved_bytes_source", json_string(VB_EXTERNAL_RESERVED_SOURCE));
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
            failed |= json_object_set_new(point, "step", vb_json_text(sample->step));
            failed |= json_object_set_new(point, "requested", json_integer((json_int_t)sample->requested));
            failed |= json_object_set_new(point, "allocated", json_integer((json_int_t)sample->allocated));
            failed |= json_object_set_new(point, "reserved", json_integer((json_int_t)sample->reserved));
            failed |= json_object_set_new(point, "driver_used", json_integer((json_int_t)sample->driver_used));
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
                failed |= json_object_set_new(segment, "address", json_integer((json_int_t)block->segment));
                failed |= json_object_set_new(segment, "size", json_integer((json_int_t)block->segment_size));
                failed |= json_object_set_new(segment, "stream", json_integer(block->stream));
                failed |= json_object_set(segment, "blocks", blocks);
                failed |= json_array_append(segments, segment);
            }
            json_decref(segment);
            json_decref(blocks); /* the segment holds it now */
        }
        json_t *entry = json_object();
        failed |= !entry;
        if (!failed) {
            failed |= json_object_set_new(entry, "address", json_integer((json_int_t)block->block));
            failed |= json_object_set_new(entry, "size", json_integer((json_int_t)block->block_size));
            failed |= json_object_set_new(entry, "allocated", json_boolean(block->allocated));
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
        failed |= json_object_set_new(entry, "repetition_index", json_integer((json_int_t)index));
        failed |= entry_times(entry, result, (double)rep->iterations, rep->real_time_ns, rep->cpu_time_ns);
        for (size_t i = 0; i < rep->counter_count; i++)
            failed |= json_object_set_new(entry, rep->counters[i].name, counter_json(&rep->counters[i]));
        failed |= json_object_set_new(entry, "timeline", timeline_json(rep));
        if (index == 0 && result->has_segments)
            failed |= json_object_set_new(entry, "segments_at_peak", segments_json(result));
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
        failed |= json_object_set_new(entry, "aggregate_name", vb_json_text(stat->name));
        failed |= json_object_set_new(entry, "aggregate_unit", vb_json_text(stat->unit));
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
            failed |= json_object_set_new(entry, first->counters[c].name, vb_json_number(stat->compute(values, have)));
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
