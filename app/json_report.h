/* vrambench — results JSON (docs/results-json.md): the document, its
 * entries and the names of the steps and counters they use. `run`, replay,
 * microbench, tune and claims build their documents from these pieces.
 *
 * A document is {"context": ..., "benchmarks": [...]} in Google Benchmark's
 * schema (json_schema_version 1; the context is context.h's), written with
 * jansson through an output file (output_file.h), so a failure never leaves
 * a half-written file or a changed one.
 */
#ifndef VB_JSON_REPORT_H
#define VB_JSON_REPORT_H

#include <stddef.h>

#include <jansson.h>

#include "runner.h"

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

/* Values for documents. Like jansson's constructors they return NULL on
 * failure, and json_object_set_new refuses a NULL value with -1, so
 * `failed |= json_object_set_new(object, key, vb_json_text(name))` catches
 * both. */

/* A JSON number for `value`: an integer when it is a whole number that a
 * double holds exactly, else a real. NULL for NaN or infinity. */
json_t *vb_json_number(double value);

/* A JSON number for the whole count `value`: an integer where jansson's
 * (signed 64-bit) integers hold it, else the real nearest below 2^64 that
 * it rounds to. Never 2^64, which no reader takes as a count (0 to 2^64-1). */
json_t *vb_json_whole(uint64_t value);

/* A JSON string of `value`, which need not be UTF-8 (a file or marker name
 * from the user): bytes that are not valid UTF-8 become '?', so building a
 * document never fails on a name. NULL on host OOM. */
json_t *vb_json_text(const char *value);

/* Writes `root` to `path` as an output file (output_file.h), gzip-compressed
 * when the name ends in .gz (every reader of results takes either). VB_ERR_IO
 * with a message naming the path on any failure, and then the target is as
 * it was. */
vb_status vb_report_write(json_t *root, const char *path);

#endif
