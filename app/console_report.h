/* vrambench — the summary table a run prints on the console. */
#ifndef VB_CONSOLE_REPORT_H
#define VB_CONSOLE_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "base/device.h"
#include "runner.h"

/* Prints the summary table in the manner of PyTorch's memory_summary: per
 * case, peak requested and reserved MiB, overhead ratio, driver alloc/free
 * calls, OOMs and time per iteration (means over repetitions): wall and GPU
 * time on a GPU, on the simulated device the host's time only, named so.
 * Under it, each case that ran out of memory with its first failing request. */
void vb_report_print_summary(FILE *out, const vb_device_info *info, const vb_case_result *results, size_t count);

/* A case's out-of-memory, from its memory pass. */
typedef struct vb_case_oom {
    uint64_t ooms;          /* allocations that found no memory */
    uint64_t first_line;    /* a replay's: the trace line of the first; else 0 */
    uint64_t first_bytes;   /* the first one's size; 0 when not known */
    int expected;           /* the scenario runs under its own device cap: its OOMs are its measurement */
} vb_case_oom;

vb_case_oom vb_report_case_oom(const vb_case_result *result);

/* "3 OOMs, the first at trace line 12: 536870912 bytes, 512.0 MiB". */
void vb_report_describe_oom(const vb_case_oom *oom, char *out, size_t capacity);

/* One line on `out` when cases ran out of memory (those of a capped
 * scenario aside): how many, the first three with their first failing
 * request, and that --fail-on-oom makes it exit 3 (a warning), or, with
 * `fail_on_oom`, that it does (an error). Returns the count. */
size_t vb_report_oom_note(FILE *out, const vb_case_result *results, size_t count, int fail_on_oom);

#endif
