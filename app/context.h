/* vrambench — the "context" object of results JSON: the machine, build,
 * device and allocator configs a result file was made with. */
#ifndef VB_CONTEXT_H
#define VB_CONTEXT_H

#include <stddef.h>

#include <jansson.h>

#include "allocators/spec.h"
#include "base/device.h"

/* vrambench's version: `vrambench --version` and results' context.vrambench_version. */
#define VB_VERSION "0.1"

/* The "context" object: Google Benchmark's keys (date, host_name, executable,
 * num_cpus, mhz_per_cpu, cpu_scaling_enabled, caches, load_avg,
 * library_build_type, json_schema_version) plus vrambench's (version, device
 * kind/name/versions/total bytes, simulated, git_commit, allocator_configs
 * for `specs`, which may be NULL with `spec_count` 0). `executable` NULL
 * means this process's own path. NULL on host OOM. */
json_t *vb_report_context(vb_device *dev, const char *executable, const vb_allocator_spec *specs,
                          size_t spec_count);

#endif
