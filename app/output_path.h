/* vrambench — where a command's output goes: a path template ("{device}",
 * "{date}") expanded and checked writable before any work is done. */
#ifndef VB_OUTPUT_PATH_H
#define VB_OUTPUT_PATH_H

#include <stddef.h>

#include "base/device.h"

/* The device as a file-name part: "sim" on the simulated device, else its
 * name in lower case with runs of other characters as one '-'
 * ("NVIDIA H100 80GB HBM3" -> "nvidia-h100-80gb-hbm3"). */
void vb_report_device_slug(const vb_device_info *info, char *out, size_t capacity);

/* Copies `pattern` to `out`, replacing "{device}" with the device slug and
 * "{date}" with today's local date as yyyymmdd. VB_ERR_INVALID if too long. */
vb_status vb_report_expand_path(const char *pattern, const vb_device_info *info, char *out, size_t capacity);

/* 1 if `pattern` holds "{device}" or "{date}". */
int vb_report_is_template(const char *pattern);

/* The output file of a command: `pattern` expanded (vb_report_expand_path)
 * and checked writable (vb_output_check), before any work is done. A
 * template's file never replaces an earlier one unless `force`: when the
 * name is taken (by a file, or held by another run: vb_report_output_release),
 * "-2", "-3", ... goes before its extension
 * (out/results/sim-20261126-2.json). A plain path is used as it is (its file
 * replaced). VB_ERR_INVALID with a message naming the path when it cannot be
 * used. */
vb_status vb_report_output_path(const char *pattern, const vb_device_info *info, int force, char *out,
                                size_t capacity);

/* A template's name is held from vb_report_output_path on (a hidden
 * ".vrambench-claim-NAME" beside it), so that runs sharing the template
 * at once never choose one name; the claim goes when the process exits or
 * is killed, or here, once the file is written (or given up). */
void vb_report_output_release(void);

#endif
