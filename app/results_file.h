/* vrambench — results files read back: the files `run`, `replay`, `tune`,
 * `microbench` and `claims` write (docs/results-json.md), plain or gzip, for
 * the commands that read them (`compare`, `merge`).
 *
 * A file is read whole as every JSON input is (app/json_input.h: a pipe or
 * FIFO read once, a FIFO waited on for its writer; at most 256 MiB once
 * decompressed), parsed, and checked enough for its readers to trust its
 * shape: a "context" object, "benchmarks" entries (or "claims") that are
 * objects with a string name.
 * Any failure is VB_ERR_INVALID (bad input) with one message naming the
 * file; VB_ERR_HOST_OOM when host memory runs out. */
#ifndef VB_RESULTS_FILE_H
#define VB_RESULTS_FILE_H

#include <stddef.h>

#include <jansson.h>

#include "base/status.h"

typedef enum vb_results_kind {
    VB_RESULTS_EMPTY,      /* benchmarks without an entry (a shard with no case): of any kind */
    VB_RESULTS_RUN,        /* `run`: SCENARIO/ALLOCATOR entries */
    VB_RESULTS_REPLAY,     /* `replay`: replay:TRACE/ALLOCATOR */
    VB_RESULTS_TUNE,       /* `tune`: tune:TRACE/SPEC, and a recommendation unless a shard's */
    VB_RESULTS_MICROBENCH, /* `microbench`: microbench/ALLOCATOR/BYTES[/threads:N] */
    VB_RESULTS_CLAIMS,     /* `claims`: "claims": [{id, allocator, verdict, ...}] */
} vb_results_kind;

/* "run", "replay", ... */
const char *vb_results_kind_name(vb_results_kind kind);

/* One case of a file: the entries of one group and allocator. A group is
 * what the allocators are compared on: the scenario ("views",
 * "replay:gpt2.trace.gz", "tune:x.trace"), "microbench/BYTES[/threads:N]",
 * or a claim's id. */
typedef struct vb_results_case {
    const char *group;
    const char *allocator;
    const char *name;        /* the entry's name ("views/caching"; a claim: "ID/ALLOCATOR") */
    json_t *entry;           /* the first iteration entry (memory figures), or the claim */
    double time_sum_ns;      /* real_time over its iteration entries, in ns */
    size_t time_count;       /* iteration entries with a real_time */
    char *storage;           /* group and allocator when split from the name (malloc'd, or NULL) */
} vb_results_case;

typedef struct vb_results_file {
    char path[4096];
    json_t *root;
    json_t *context;         /* root["context"] */
    vb_results_kind kind;
    const char *device_name; /* context device_name ("?" when absent) */
    int simulated;           /* context simulated */
    vb_results_case *cases;  /* in the file's order; aggregates are left out */
    size_t case_count;
    json_t *index;           /* a case's key (results_file.c, case_key) -> its place in `cases` */
} vb_results_file;

/* Reads `path` (see above) into *out; on failure *out holds nothing to free. */
vb_status vb_results_load(const char *path, vb_results_file *out);

/* VB_OK when the results file `path`'s `context` object has a string
 * device_name without control characters and a boolean simulated where it
 * has them, else VB_ERR_INVALID with one line naming the file: every command
 * that reads results (check-sim with its own loader too) tells a GPU file from
 * a sim one by these. */
vb_status vb_results_check_context(const char *path, json_t *context);

/* VB_OK when no two entries of the results file `path`'s `benchmarks`
 * array are one case: the same name, run_type and aggregate_name, and
 * repetition_index. Else VB_ERR_INVALID with one line naming the file, both
 * entries and the case: a case measured twice has no one value to compare,
 * merge or check (vb_results_load checks it; check-sim, with its own
 * loader, too). Entries that are not objects with a name are left to the
 * reader. */
vb_status vb_results_check_unique(const char *path, json_t *benchmarks);

void vb_results_free(vb_results_file *file);

/* The case of `group` and `allocator`, or NULL. */
const vb_results_case *vb_results_find(const vb_results_file *file, const char *group, const char *allocator);

/* A file's name without its directories, for messages. */
const char *vb_results_base_name(const vb_results_file *file);

#endif
