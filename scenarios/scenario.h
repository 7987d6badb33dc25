/* vrambench — the scenarios.
 *
 * A scenario is one file in scenarios/, following one code example of the
 * source documents (docs/sources.md; it cites which by number). It runs in a
 * vb_run (runtime/run.h): it allocates through the run, marks named steps,
 * and knows nothing of which allocator or device it runs on beyond what the
 * run tells it.
 */
#ifndef VB_SCENARIO_H
#define VB_SCENARIO_H

#include "runtime/run.h"

/* A name defined once, in its scenario's table (docs/results-json.md,
 * "names"): `key` is what code refers to it by (app/claims.c, and the Python
 * tools, which read the tables from the results JSON or from `vrambench
 * list names --json`); `text` is what the results show. A step's text may be
 * a pattern with one %d or %s (a numbered step, "unreferenced %d"): C's
 * printf and Python's % operator read it alike. */
typedef struct vb_name {
    const char *key;
    const char *text;
} vb_name;

/* One member of a scenario's counter families: an empty_cache variant
 * ("every10", 10), a batch size ("256", 256). */
typedef struct vb_family_member {
    const char *name;
    long long parameter;
} vb_family_member;

/* A family of counters, one per member: the counter of member M is
 * `pattern` (one %s) formatted with M's name ("%s_iter_ns" -> every10_iter_ns). */
typedef struct vb_counter_family {
    const char *key;     /* what each member's counter measures: "iter_ns" */
    const char *pattern;
} vb_counter_family;

typedef struct vb_scenario {
    const char *name;
    const char *documents;   /* which source documents it follows (docs/sources.md), e.g. "000, 004" */
    const char *description; /* one line for `vrambench list scenarios` */
    /* Runs the scenario once. Returns VB_OK, or the first error (with a
     * message); an out-of-memory the scenario expects is not an error. */
    vb_status (*run)(vb_run *run);
    /* 0, or the capacity the scenario runs under: the runner gives it a
     * device capped at this many bytes (vb_device_cap_open), the same on
     * every GPU and on sim. */
    uint64_t device_cap_bytes;
    /* 0, or the iterations of its memory pass when not the runner's
     * VB_MEMORY_PASS_ITERATIONS (a trace replay is one recorded run: 1). */
    unsigned memory_pass_iterations;
    /* 0 for a scenario of one device; else it runs across all the devices
     * of the run's machine (runtime/run.h, vb_run_peer) and needs at least
     * this many: on a machine with fewer, `vrambench run` skips it with a
     * note (the run's figures are its own device's; the others' are
     * counters). */
    int min_devices;
    /* The names it defines, each table ended by an entry whose first field
     * is NULL (a NULL table: none). Its code marks steps and sets counters
     * through these entries, never by re-spelling them. */
    const vb_name *steps;                /* the steps it marks */
    const vb_name *shared_steps;         /* steps shared code marks for it (vb_mlp_training_steps) */
    const char *const *counters;         /* its own counters (the runner adds its own) */
    const vb_counter_family *families;   /* counter families, one counter per member */
    const vb_family_member *members;     /* the families' members */
    const char *member_parameter;        /* what a member's parameter is ("batch size") */
    /* What its parameter (`run --param`) says, e.g. "allocations=N,seed=S";
     * NULL when it takes none, and `run` refuses a --param for it. */
    const char *parameter;
    /* NULL, or checks a --param before anything runs: VB_OK, or
     * VB_ERR_INVALID with one message (the nearest known key for an
     * unknown one), so a bad parameter is a usage error, not a failed case. */
    vb_status (*check_parameter)(const char *parameter);
} vb_scenario;

/* The steps any scenario may mark (scenarios/common.c): "start", the
 * baseline every later step is read against, and "out of memory", where a
 * device too small stopped it. vb_scenario_step finds them too. */
enum { VB_STEP_START, VB_STEP_OUT_OF_MEMORY };
extern const vb_name vb_scenario_common_steps[];

/* The counter every scenario sets: 1 when it stopped at an out-of-memory. */
#define VB_COUNTER_OUT_OF_MEMORY "out_of_memory"
/* The counters the scenarios that start with vb_scenario_begin set
 * (VB_COUNTER_OUT_OF_MEMORY), NULL-ended. */
extern const char *const vb_scenario_common_counters[];

/* The registered scenarios (scenarios/registry.c), NULL-terminated. */
extern const vb_scenario *const vb_scenario_registry[];

/* The scenario named `name`, or NULL. */
const vb_scenario *vb_scenario_find(const char *name);

/* The text of scenario's step `key` (its own or a common one); NULL when
 * it defines none. */
const char *vb_scenario_step(const vb_scenario *scenario, const char *key);

/* Writes the counter of family `family` for `member` into out (capacity
 * bytes). */
void vb_scenario_family_counter(const vb_counter_family *family, const vb_family_member *member, char *out,
                                size_t capacity);

#endif
