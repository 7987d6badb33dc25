/* vrambench — the summary table a run prints on the console. */
#ifndef VB_CONSOLE_REPORT_H
#define VB_CONSOLE_REPORT_H

#include <stdio.h>

#include "base/device.h"
#include "runner.h"

/* Prints the summary table in the manner of PyTorch's memory_summary: per
 * case, peak requested and reserved MiB, overhead ratio, driver alloc/free
 * calls and time per iteration (means over repetitions). */
void vb_report_print_summary(FILE *out, const vb_device_info *info, const vb_case_result *results, size_t count);

#endif
