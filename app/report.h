/* vrambench — results JSON (docs/results-json.md) and the summary
 * table. The one place that writes result files: `run`, replay, microbench
 * and claims build their documents from these pieces.
 *
 * A document is {"context": ..., "benchmarks": [...]} in Google Benchmark's
 * schema (json_schema_version 1), written with jansson, to FILE.tmp first and
 * renamed over FILE, so a failure never leaves a half-written file.
 */
#ifndef VB_REPORT_H
#define VB_REPORT_H

#include <stdio.h>

#include <jansson.h>

#include "base/device.h"
#include "runner.h"

/* The "context" object: Google Benchmark's keys (date, host_name, executable,
 * num_cpus, mhz_per_cpu, cpu_scaling_enabled, caches, load_avg,
 * library_build_type, json_schema_version) plus vrambench's (version, device
 * kind/name/versions/total bytes, simulated, git_commit, allocator_configs
 * for `specs`, which may be NULL with `spec_count` 0). `executable` NULL
 * means this process's own path. NULL on host OOM. */
json_t *vb_report_context(vb_device *dev, const char *executable, const vb_allocator_spec *specs,
                          size_t spec_count);

/* {"context": context, "benchmarks": []}, taking the context's reference. */
json_t *vb_report_document(json_t *context);

/* Appends a case's entries to `benchmarks`: one per repetition (run_type
 * "iteration"), then, when there are 2 or more, the mean, median, stddev and
 * cv aggregates as Google Benchmark names them. `family_index` and
 * `instance_index` are Google Benchmark's family_index and
 * per_family_instance_index (scenario and allocator positions). */
vb_status vb_report_add_case(json_t *benchmarks, const vb_case_result *result, size_t family_index,
                             size_t instance_index);

/* The names `scenario` defines (scenarios/scenario.h), as results JSON's
 * "names" shows them (docs/results-json.md): {"steps": {KEY: TEXT},
 * "counters": [NAME], and when it has counter families "counter_families":
 * {"member_parameter", "members": [{"name", "parameter"}], "families":
 * {KEY: {MEMBER: COUNTER}}}}. The common steps ("start", "out of memory") and
 * the steps of shared code it runs are included; the common counters are
 * not (vrambench list names lists them once, under "common").
 * NULL on host OOM. */
json_t *vb_report_names(const vb_scenario *scenario);

/* Sets document["names"][label] to vb_report_names(scenario): `label` is
 * the "scenario" of its entries. 0 on success, -1 on host OOM. */
int vb_report_add_names(json_t *document, const char *label, const vb_scenario *scenario);

/* A JSON number for `value`: an integer when it is a whole number that a
 * double holds exactly, else a real. NULL for NaN or infinity. */
json_t *vb_json_number(double value);

/* Writes `root` to `path` through `path`.tmp and a rename. VB_ERR_IO with a
 * message naming the path on any failure, and then neither file is left. */
vb_status vb_report_write(json_t *root, const char *path);

/* Checks, before any work, that `path` can be written: its directory exists
 * and `path`.tmp can be created (it is removed again). VB_ERR_INVALID with a
 * message naming the path when not. */
vb_status vb_report_check_writable(const char *path);

/* The device as a file-name part: "sim" on the simulated device, else its
 * name in lower case with runs of other characters as one '-'
 * ("NVIDIA H100 80GB HBM3" -> "nvidia-h100-80gb-hbm3"). */
void vb_report_device_slug(const vb_device_info *info, char *out, size_t capacity);

/* Copies `pattern` to `out`, replacing "{device}" with the device slug and
 * "{date}" with today's local date as yyyymmdd. VB_ERR_INVALID if too long. */
vb_status vb_report_expand_path(const char *pattern, const vb_device_info *info, char *out, size_t capacity);

/* The output file of a command: `pattern` expanded (vb_report_expand_path)
 * and checked writable (vb_report_check_writable), before any work is done.
 * VB_ERR_INVALID with a message naming the path when it cannot be used. */
vb_status vb_report_output_path(const char *pattern, const vb_device_info *info, char *out, size_t capacity);

/* Prints the summary table in the manner of PyTorch's memory_summary: per
 * case, peak requested and reserved MiB, overhead ratio, driver alloc/free
 * calls and time per iteration (means over repetitions). */
void vb_report_print_summary(FILE *out, const vb_device_info *info, const vb_case_result *results, size_t count);

#endif
