/* vrambench — the documented differences between a GPU's memory figures and
 * the simulated device's: docs/data/sim-differences.json, which check-sim
 * reads and python/vrambench/sim_differences_page.py renders as
 * docs/sim-differences.md.
 *
 * The file: {"about": TEXT, "version": 1, "differences": [{"id", "title",
 * "matches": [{"case": PATTERN, "figure": PATTERN}, ...], "measured",
 * "reason", "evidence": [TEXT, ...]}, ...]}. A case is "SCENARIO/ALLOCATOR",
 * "replay:TRACE/ALLOCATOR" or "claims:ID/ALLOCATOR"; a figure a counter
 * (peak_reserved_bytes), "timeline.FIELD[INDEX 'STEP']" or a claim's number;
 * patterns are fnmatch's. A difference is documented by the first match, in
 * file order, whose patterns match both. */
#ifndef VB_SIM_DIFFERENCES_H
#define VB_SIM_DIFFERENCES_H

#include <stddef.h>

#include <jansson.h>

#include "base/status.h"

/* Where the file lives in the repository. */
#define VB_SIM_DIFFERENCES_PATH "docs/data/sim-differences.json"
/* The environment variable that names another file. */
#define VB_SIM_DIFFERENCES_ENV "VRAMBENCH_SIM_DIFFERENCES"

/* One (case, figure) pair of a difference. */
typedef struct vb_sim_match {
    const char *case_pattern, *figure_pattern;
    const char *id, *reason;  /* its difference's */
    size_t uses;              /* differences it documented so far */
} vb_sim_match;

typedef struct vb_sim_differences {
    json_t *document;         /* owns the strings */
    vb_sim_match *matches;    /* every difference's, in file order */
    size_t match_count;
} vb_sim_differences;

/* The file to read into `path`: `given` (an option) if not NULL, else
 * $VRAMBENCH_SIM_DIFFERENCES if set, else VB_SIM_DIFFERENCES_PATH under the
 * nearest of the running binary's directory's parents that has it
 * (build/vrambench, build/address/vrambench). VB_ERR_INVALID with one line
 * naming where it looked when there is none. */
vb_status vb_sim_differences_locate(const char *given, char *path, size_t capacity);

/* Reads and checks the file (every key above, of its type; no other keys).
 * VB_ERR_INVALID with one line naming the file and what is wrong. */
vb_status vb_sim_differences_load(const char *path, vb_sim_differences *out);

/* The first match for (case, figure), its use counted; NULL when none. */
const vb_sim_match *vb_sim_differences_find(vb_sim_differences *differences, const char *name, const char *figure);

void vb_sim_differences_free(vb_sim_differences *differences);

#endif
