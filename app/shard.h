/* vrambench — shards: `run`, `replay` and `tune` take --shard I/N and do
 * only their share of the cases (or candidates), so that N machines can do
 * one run between them; `vrambench merge` joins the N files (docs/fleet.md).
 *
 * The partition is round-robin over the cases in the order the whole run
 * would take them: case k (from 0) belongs to shard (k mod N) + 1. It
 * depends only on the case list, so every shard of one command line agrees:
 * the shards are disjoint and together cover every case. A shard may have no
 * case (N larger than the case count); it still writes its file, so that
 * merge sees every shard. */
#ifndef VB_SHARD_H
#define VB_SHARD_H

#include <stddef.h>

#include <jansson.h>

#include "cli.h"

#define VB_SHARD_MAX 100000

typedef struct vb_shard {
    size_t index; /* 1..count */
    size_t count; /* 1: no sharding */
} vb_shard;

/* The whole run: shard 1 of 1. */
#define VB_SHARD_ALL ((vb_shard){1, 1})

/* Parses "I/N" (1 <= I <= N <= VB_SHARD_MAX); 0 on success, -1 when
 * malformed (the caller names the option and the value). */
int vb_shard_parse(const char *text, vb_shard *out);

/* 1 if case `k` (from 0) belongs to the shard. */
int vb_shard_has(vb_shard shard, size_t k);

/* The cases of `total` the shard holds. */
size_t vb_shard_size(vb_shard shard, size_t total);

/* Sets context["shard"] = {"index": I, "count": N, "cases": total} when the
 * shard is not the whole run; 0 on success, -1 on host OOM. */
int vb_shard_describe(json_t *context, vb_shard shard, size_t total);

/* Sets context["shard_command"] when the shard is not the whole run: the
 * command line that made it, so that merge can refuse shards of different
 * command lines (a shard's file holds its own cases only: nothing else says
 * which scenarios, --param or trace the others ran). An array: the
 * command's name (argv[0]), its positional arguments as given, then its
 * options in their table's order (an option given twice in the order given),
 * each as "--name=value" ("--name" for a flag) under its full name however it
 * was spelt, less the options whose indexes in usage->options are in
 * `ignored` (ended by -1): those that change no result (--shard itself,
 * --out, --quiet, ...). argv is the command's, already parsed without error.
 * 0 on success, -1 on host OOM. */
int vb_shard_command(json_t *context, vb_shard shard, const vb_cli_usage *usage, int argc, char **argv,
                     const int *ignored);

/* Sets context["shard_input"] = {"bytes", "fnv1a64"} of the input file
 * `path` (a trace or snapshot, as read: a pipe's spooled copy) when the
 * shard is not the whole run, so that merge refuses shards of different
 * inputs under one name (the command lines alone are equal). VB_OK, or the
 * status of a read that failed or of host memory running out. */
vb_status vb_shard_describe_input(json_t *context, vb_shard shard, const char *path);

#endif
