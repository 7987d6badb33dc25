/* vrambench — the measurements lab/harnesses/pytorch_claims.py records with
 * PyTorch's own allocator on a GPU, as `vrambench claims --pytorch FILE`
 * reads them (docs/results-json.md):
 *   {"context": {"device_name": ...},
 *    "measurements": [{"scenario", "allocator", "timeline": [{step, requested,
 *                      allocated, reserved, driver_used}], "counters": {NAME: number}}]}
 * Parsed from the file's bytes (read once, app/input_file.h), every type and
 * range checked: a byte count is a number from 0 to 2^64-1, a counter a
 * number. tests/fuzz/fuzz_results.c feeds it any bytes. */
#ifndef VB_PYTORCH_MEASUREMENTS_H
#define VB_PYTORCH_MEASUREMENTS_H

#include <stddef.h>

#include "base/status.h"
#include "claims.h"

typedef struct vb_pytorch_measurement {
    char scenario[128];
    vb_timeline_sample *timeline;
    size_t timeline_count;
    vb_run_counter *counters;
    size_t counter_count;
} vb_pytorch_measurement;

typedef struct vb_pytorch_measurements {
    char device_name[128];
    vb_pytorch_measurement *items;
    size_t count;
} vb_pytorch_measurements;

/* Parses `length` bytes of the file `path` (named in messages) into *out
 * (free with vb_pytorch_measurements_free, also after a failure).
 * VB_ERR_INVALID with one message "PATH: ..." for anything malformed,
 * VB_ERR_HOST_OOM when host memory runs out. */
vb_status vb_pytorch_measurements_parse(const char *path, const char *bytes, size_t length,
                                        vb_pytorch_measurements *out);

void vb_pytorch_measurements_free(vb_pytorch_measurements *measurements);

/* The measurement as a claim reads it (a view of *item). */
vb_measurement vb_pytorch_measurement_view(const vb_pytorch_measurement *item);

#endif
