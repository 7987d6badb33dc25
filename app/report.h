/* vrambench — results JSON (docs/results-json.md) and the summary
 * table. The one place that writes result files: `run`, replay, microbench
 * and claims build their documents from these pieces.
 *
 * A document is {"context": ..., "benchmarks": [...]} in Google Benchmark's
 * schema (json_schema_version 1), written with jansson through a vb_output
 * (below), so a failure never leaves a half-written file or a changed one.
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

/* Output files. Every file vrambench writes (results JSON, gen-trace's
 * trace) is written to a new, uniquely named temporary file in the target's
 * directory (never an existing file), each write checked, fsync'ed and
 * closed, then renamed over the target. Only a regular file or a missing
 * path is replaced: a symbolic link, device, directory, FIFO or socket is
 * refused. On any failure the temporary file is removed and the target is
 * left as it was; nothing we did not create is ever removed. */
typedef struct vb_output {
    char path[4096]; /* the target */
    char temp[4096]; /* the temporary file ("" when there is none) */
    int fd;          /* the temporary file, open for writing (-1 when closed) */
} vb_output;

/* Checks, before any work, that `path` can be written: a regular file or a
 * missing one (not a symlink, device, directory, FIFO), a name that fits,
 * and a directory where a temporary file can be created (it is removed
 * again). VB_ERR_INVALID with a message naming the path when not. */
vb_status vb_output_check(const char *path);

/* Creates the temporary file for `path` in *out. VB_ERR_IO on failure
 * (nothing is left behind). */
vb_status vb_output_open(vb_output *out, const char *path);

/* Writes all `length` bytes to the temporary file; VB_ERR_IO on a failed
 * or short write (a full disk). The caller then abandons the output. */
vb_status vb_output_write(vb_output *out, const void *bytes, size_t length);

/* fsyncs and closes the temporary file and renames it over the target (if
 * that is still a regular file or missing). On failure VB_ERR_IO with a
 * message naming the target; the temporary file is removed and the target
 * is untouched. */
vb_status vb_output_commit(vb_output *out);

/* Closes and removes the temporary file (a no-op once committed). */
void vb_output_abandon(vb_output *out);

/* Writes `root` to `path` as a vb_output. VB_ERR_IO with a message naming
 * the path on any failure, and then the target is as it was. */
vb_status vb_report_write(json_t *root, const char *path);

/* vb_output_check (VB_ERR_INVALID with a message naming the path). */
vb_status vb_report_check_writable(const char *path);

/* The length of the UTF-8 sequence at `bytes` (1 to 4), or 0 when it is
 * not a valid one (overlong, surrogate, cut short by `available`). */
size_t vb_utf8_sequence(const char *bytes, size_t available);

/* 1 if `length` bytes are valid UTF-8 (and, unless `controls_allowed`,
 * hold no control character: C0, DEL). */
int vb_text_valid(const char *bytes, size_t length, int controls_allowed);

/* Replaces, in place, every byte of `text` that is not part of a valid
 * UTF-8 sequence (and, with `controls_too`, every control character) with
 * '?': a name from the user made safe for JSON and a terminal. */
void vb_text_sanitize(char *text, int controls_too);

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
