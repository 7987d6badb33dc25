/* vrambench — `vrambench compare A.json B.json [...]`: results files side
 * by side, case by case, on the figures that matter for an allocator.
 *
 * Cases pair across files when their group (scenario, trace, microbench
 * size, claim id) and allocator are the same, or, with --pair X=Y, X's case
 * of a group in A with Y's case of the same group in B (B may be A itself:
 * caching against expandable in one run). Every further file is compared
 * with the first. Memory figures compare exactly (bytes as integers); times
 * only when both files come from the same GPU model: a simulated time is
 * never compared with a GPU time, and the output says why the column is
 * missing. For every metric higher is worse; --fail-on METRIC:+X% makes a
 * rise above X% a regression (exit 1). Files of different kinds are refused
 * (exit 2); files of different devices pair on their memory figures. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocators/spec.h"
#include "base/closest.h"
#include "cli.h"
#include "results_file.h"

#define COMPARE_USAGE                                                                                              \
    "usage: vrambench compare A.json B.json [C.json ...] [--pair X=Y]... [--fail-on METRIC:+P%]... [--json]\n"  \
    "       vrambench compare A.json --pair X=Y [--fail-on METRIC:+P%]... [--json]\n"                          \
    "  Each case of B (C, ...) against A's: same scenario, trace, size or claim and same allocator\n"           \
    "  (run, replay, tune, microbench or claims files of one kind; .json.gz too). Examples:\n"                  \
    "    vrambench compare results/h100.json out/results/sim.json\n"                                           \
    "  --pair X=Y: X's case in A against Y's of the same scenario in B (or in A when it is the only\n"         \
    "        file); several allowed, e.g. --pair caching=expandable --pair caching=stitch\n"                    \
    "  --fail-on METRIC:+P%: exit 1 when METRIC rose by more than P% in any pair, when one side of a pair\n"   \
    "        lacks it, or when B lacks a case of A (several allowed), e.g. --fail-on reserved:+0%\n"            \
    "        --fail-on time:+10%; claims: --fail-on verdict (any change).\n"                                  \
    "        Metrics (higher is worse for every one): reserved, allocated, requested (peak bytes),\n"           \
    "        overhead (peak reserved / peak requested), ooms, driver_calls (allocs + frees), retries,\n"        \
    "        time (real time per iteration); tune: also min_capacity, ooms_at_capacity;\n"                     \
    "        microbench: pair_p50, pair_p99, driver_calls (driver allocs per pair); claims: verdict\n"         \
    "  --json: the comparison as JSON on stdout, e.g. vrambench compare a.json b.json --json > diff.json\n"    \
    "  --: every word after it is a file (e.g. a file named -x)\n"                                            \
    "  Exit status: 0 no regression, 1 a regression (--fail-on), 2 bad input or nothing to pair\n"

#define MAX_FILES 64
#define MAX_PAIR_SPECS 32
#define MAX_FAIL_ON 32
#define UNPAIRED_SHOWN 12 /* unpaired cases named in the text output */

typedef enum { U_BYTES, U_RATIO, U_COUNT, U_TIME, U_VERDICT } unit;

#define K(kind) (1u << (kind))
#define BENCH (K(VB_RESULTS_RUN) | K(VB_RESULTS_REPLAY) | K(VB_RESULTS_TUNE))

typedef struct metric {
    const char *name;        /* as --fail-on names it */
    const char *key, *key2;  /* the counter(s), summed; NULL key: the mean real time */
    unit unit;
    const char *title;
    unsigned kinds;          /* the kinds of file it applies to */
} metric;

static const metric metrics[] = {
    {"reserved", "peak_reserved_bytes", NULL, U_BYTES, "peak reserved MiB", BENCH},
    {"allocated", "peak_allocated_bytes", NULL, U_BYTES, "peak allocated MiB", BENCH},
    {"requested", "peak_requested_bytes", NULL, U_BYTES, "peak requested MiB", BENCH},
    {"overhead", "overhead_ratio", NULL, U_RATIO, "overhead", BENCH},
    {"ooms", "ooms", NULL, U_COUNT, "OOMs", BENCH},
    {"driver_calls", "driver_alloc_calls", "driver_free_calls", U_COUNT, "driver calls", BENCH},
    {"retries", "alloc_retries", NULL, U_COUNT, "retries", BENCH},
    {"min_capacity", "min_capacity_bytes", NULL, U_BYTES, "min capacity MiB", K(VB_RESULTS_TUNE)},
    {"ooms_at_capacity", "ooms_at_capacity", NULL, U_COUNT, "OOMs at capacity", K(VB_RESULTS_TUNE)},
    {"time", NULL, NULL, U_TIME, "time/iter", BENCH},
    {"pair_p50", "pair_ns_p50", NULL, U_TIME, "pair p50", K(VB_RESULTS_MICROBENCH)},
    {"pair_p99", "pair_ns_p99", NULL, U_TIME, "pair p99", K(VB_RESULTS_MICROBENCH)},
    {"driver_calls", "driver_allocs_per_pair", NULL, U_RATIO, "driver allocs/pair", K(VB_RESULTS_MICROBENCH)},
    {"verdict", "verdict", NULL, U_VERDICT, "verdict", K(VB_RESULTS_CLAIMS)},
};
#define METRIC_COUNT (sizeof metrics / sizeof metrics[0])

typedef struct fail_on {
    const char *name;
    double percent;  /* a rise above this is a regression (verdict: any change) */
} fail_on;

typedef struct compare_args {
    const char *files[MAX_FILES];
    size_t file_count;
    const char *pair_text[MAX_PAIR_SPECS];
    char pair_a[MAX_PAIR_SPECS][256], pair_b[MAX_PAIR_SPECS][256];
    size_t pair_count;
    fail_on fails[MAX_FAIL_ON];
    size_t fail_count;
    int json;
} compare_args;

/* The distinct metric names (for hints), NULL-terminated. */
static size_t metric_names(const char **names, unsigned kinds)
{
    size_t count = 0;
    for (size_t i = 0; i < METRIC_COUNT; i++) {
        if (!(metrics[i].kinds & kinds)) continue;
        int seen = 0;
        for (size_t j = 0; j < count; j++) seen |= strcmp(names[j], metrics[i].name) == 0;
        if (!seen) names[count++] = metrics[i].name;
    }
    names[count] = NULL;
    return count;
}

/* One error line for an unknown metric, with the closest name. */
static int unknown_metric(const char *name, unsigned kinds, const char *what)
{
    const char *names[METRIC_COUNT + 1];
    size_t count = metric_names(names, kinds);
    char list[512] = "";
    for (size_t i = 0, used = 0; i < count && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", names[i]);
    const char *close = vb_closest_name(name, names);
    if (close)
        return vb_cli_error(VB_EXIT_USAGE, "compare: --fail-on: unknown metric '%s'%s; did you mean '%s'? (%s)", name,
                            what, close, list);
    return vb_cli_error(VB_EXIT_USAGE, "compare: --fail-on: unknown metric '%s'%s (known: %s)", name, what, list);
}

/* "METRIC:+P%" (or "verdict", "verdict:changed"). */
static int parse_fail_on(const char *text, fail_on *out)
{
    static char names[MAX_FAIL_ON][64];
    static size_t used;
    const char *colon = strchr(text, ':');
    size_t length = colon ? (size_t)(colon - text) : strlen(text);
    if (length == 0 || length >= sizeof names[0] || used == MAX_FAIL_ON)
        return vb_cli_error(VB_EXIT_USAGE, "compare: bad --fail-on '%s' (METRIC:+P%%, e.g. reserved:+0%%)", text);
    char *name = names[used++];
    memcpy(name, text, length);
    name[length] = '\0';
    const char *known[METRIC_COUNT + 1];
    size_t count = metric_names(known, ~0u);
    int found = 0;
    for (size_t i = 0; i < count; i++) found |= strcmp(known[i], name) == 0;
    if (!found) return unknown_metric(name, ~0u, "");
    out->name = name;
    out->percent = 0;
    if (strcmp(name, "verdict") == 0) {
        if (colon && strcmp(colon + 1, "changed") != 0)
            return vb_cli_error(VB_EXIT_USAGE, "compare: bad --fail-on '%s' (verdict or verdict:changed)", text);
        return VB_EXIT_OK;
    }
    double percent = 0;
    if (!colon || vb_cli_parse_decimal(colon + 1, "%", -HUGE_VAL, HUGE_VAL, &percent) != 0)
        return vb_cli_error(VB_EXIT_USAGE, "compare: bad --fail-on '%s' (METRIC:+P%%, e.g. %s:+5%%)", text, name);
    out->percent = percent;
    return VB_EXIT_OK;
}

static int parse_args(int argc, char **argv, compare_args *args)
{
    memset(args, 0, sizeof *args);
    for (int i = 1, only_files = 0; i < argc; i++) {
        const char *option = argv[i];
        if (!only_files && strcmp(option, "--") == 0) { /* every word after it is a file */
            only_files = 1;
            continue;
        }
        if (!only_files && (strcmp(option, "--help") == 0 || strcmp(option, "-h") == 0)) {
            fputs(COMPARE_USAGE, stdout);
            return VB_EXIT_HELP;
        }
        if (only_files || strncmp(option, "-", 1) != 0) {
            if (args->file_count == MAX_FILES)
                return vb_cli_error(VB_EXIT_USAGE, "compare: more than %d files", MAX_FILES);
            args->files[args->file_count++] = option;
            continue;
        }
        if (strcmp(option, "--json") == 0) {
            args->json = 1;
            continue;
        }
        if (i + 1 >= argc || (strcmp(option, "--pair") != 0 && strcmp(option, "--fail-on") != 0)) {
            static const char *const known[] = {"--pair", "--fail-on", "--json", "--help", NULL};
            char hint[96];
            return vb_cli_error(VB_EXIT_USAGE, "compare: unknown option or missing value: '%s'%s (see vrambench "
                                               "compare --help)", option,
                                vb_did_you_mean(option, known, hint, sizeof hint));
        }
        const char *value = argv[++i];
        if (strcmp(option, "--fail-on") == 0) {
            if (args->fail_count == MAX_FAIL_ON)
                return vb_cli_error(VB_EXIT_USAGE, "compare: more than %d --fail-on", MAX_FAIL_ON);
            int status = parse_fail_on(value, &args->fails[args->fail_count++]);
            if (status != VB_EXIT_OK) return status;
            /* One threshold a metric: of two, one would be dropped without a word. */
            for (size_t k = 0; k + 1 < args->fail_count; k++)
                if (strcmp(args->fails[k].name, args->fails[args->fail_count - 1].name) == 0)
                    return vb_cli_error(VB_EXIT_USAGE, "compare: --fail-on %s given twice ('%s' is the second)",
                                        args->fails[k].name, value);
            continue;
        }
        /* the '=' outside brackets: a configured spec holds one inside ("caching[max_split_size_mb=256]=caching") */
        const char *equals = value + vb_spec_span(value, '=');
        if (!*equals) equals = NULL;
        size_t n = args->pair_count;
        if (n == MAX_PAIR_SPECS) return vb_cli_error(VB_EXIT_USAGE, "compare: more than %d --pair", MAX_PAIR_SPECS);
        if (!equals || equals == value || !equals[1] || (size_t)(equals - value) >= sizeof args->pair_a[0] ||
            strlen(equals + 1) >= sizeof args->pair_b[0])
            return vb_cli_error(VB_EXIT_USAGE, "compare: bad --pair '%s' (X=Y, two allocators, e.g. caching=expandable)",
                                value);
        snprintf(args->pair_a[n], sizeof args->pair_a[n], "%.*s", (int)(equals - value), value);
        snprintf(args->pair_b[n], sizeof args->pair_b[n], "%s", equals + 1);
        args->pair_text[args->pair_count++] = value;
    }
    if (args->file_count == 0 || (args->file_count == 1 && args->pair_count == 0))
        return vb_cli_error(VB_EXIT_USAGE, "compare: name two files, or one with --pair X=Y (see vrambench compare "
                                           "--help)");
    return VB_EXIT_OK;
}

/* ======================================================================== */
/* Figures                                                                  */
/* ======================================================================== */

/* A metric's value in a case: 1 present, 0 absent (null or no such field).
 * Its type and range were checked when the file was read (results_file.c). */
static int metric_value(const vb_results_case *c, const metric *m, double *out)
{
    if (!m->key) {
        if (c->time_count == 0) return 0;
        *out = c->time_sum_ns / (double)c->time_count;
        return 1;
    }
    *out = 0;
    const char *keys[2] = {m->key, m->key2};
    int present = 0;
    for (size_t k = 0; k < 2 && keys[k]; k++) {
        json_t *value = json_object_get(c->entry, keys[k]);
        if (!json_is_number(value)) continue;
        *out += json_number_value(value);
        present = 1;
    }
    return present;
}

/* The change from a to b in percent; +inf when a is 0 and b is not. */
static double change_percent(double a, double b)
{
    if (a == b) return 0;
    if (a == 0) return b > 0 ? INFINITY : -INFINITY;
    return (b - a) / fabs(a) * 100.0;
}

static void format_value(unit u, double v, char *out, size_t capacity)
{
    switch (u) {
    case U_BYTES: snprintf(out, capacity, "%.1f", v / 1048576.0); break;
    case U_RATIO: snprintf(out, capacity, "%.3f", v); break;
    case U_COUNT: snprintf(out, capacity, "%.0f", v); break;
    case U_TIME:
        if (v < 1e3) snprintf(out, capacity, "%.0f ns", v);
        else if (v < 1e6) snprintf(out, capacity, "%.2f us", v / 1e3);
        else if (v < 1e9) snprintf(out, capacity, "%.2f ms", v / 1e6);
        else snprintf(out, capacity, "%.2f s", v / 1e9);
        break;
    case U_VERDICT: out[0] = '\0'; break;
    }
}

/* ======================================================================== */
/* One comparison: A against B                                              */
/* ======================================================================== */

typedef struct comparison {
    const vb_results_file *a, *b;
    const vb_results_case **pair_a, **pair_b; /* the pairs, in A's order */
    size_t pair_count;
    unsigned char *in_pair_a, *in_pair_b;     /* per case of A (of B): 1 when it is in a pair */
    int times_compared;
    char times_note[512];
    size_t regressions;    /* under --fail-on: the pairs' figures, and the cases gone from B */
} comparison;

/* Why times are not compared, or "" when they are. */
static void times_note(comparison *c)
{
    const vb_results_file *a = c->a, *b = c->b;
    c->times_compared = 0;
    if (a->simulated && b->simulated)
        snprintf(c->times_note, sizeof c->times_note,
                 "times not compared: both sides are from the simulated device, whose times are host-side, not GPU "
                 "times");
    else if (a->simulated || b->simulated)
        snprintf(c->times_note, sizeof c->times_note,
                 "times not compared: %s is from the simulated device and %s from %s: a simulated time is never "
                 "compared with a GPU time", a->simulated ? "A" : "B", a->simulated ? "B" : "A",
                 a->simulated ? b->device_name : a->device_name);
    else if (strcmp(a->device_name, b->device_name) != 0)
        snprintf(c->times_note, sizeof c->times_note,
                 "times not compared: A is from %s, B from %s (times compare only on the same GPU model)",
                 a->device_name, b->device_name);
    else {
        c->times_compared = 1;
        c->times_note[0] = '\0';
    }
}

/* The allocators of a file, for hints (at most `capacity`). */
static size_t allocators_of(const vb_results_file *file, const char **out, size_t capacity)
{
    size_t count = 0;
    for (size_t i = 0; i < file->case_count && count < capacity; i++) {
        int seen = 0;
        for (size_t j = 0; j < count && !seen; j++) seen = strcmp(out[j], file->cases[i].allocator) == 0;
        if (!seen) out[count++] = file->cases[i].allocator;
    }
    return count;
}

/* Exit 2 unless `allocator` has a case in `file`. */
static int check_allocator(const vb_results_file *file, const char *allocator, const char *pair)
{
    const char *known[257];
    size_t count = allocators_of(file, known, 256);
    known[count] = NULL;
    for (size_t i = 0; i < count; i++)
        if (strcmp(known[i], allocator) == 0) return VB_EXIT_OK;
    char list[1024] = "";
    for (size_t i = 0, used = 0; i < count && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", known[i]);
    const char *close = vb_closest_name(allocator, known);
    return vb_cli_error(VB_EXIT_USAGE, "compare: --pair %s: no case of allocator '%s' in %s%s%s%s (its allocators: %s)",
                        pair, allocator, file->path, close ? "; did you mean '" : "", close ? close : "",
                        close ? "'?" : "", list);
}

/* Adds the pair of `left` (a case of A) and `right` (of B). */
static void add_pair(comparison *c, const vb_results_case *left, const vb_results_case *right)
{
    c->pair_a[c->pair_count] = left;
    c->pair_b[c->pair_count++] = right;
    c->in_pair_a[left - c->a->cases] = 1;
    c->in_pair_b[right - c->b->cases] = 1;
}

/* Pairs the cases of A and B (see the top of the file). */
static int pair_cases(const compare_args *args, comparison *c)
{
    size_t capacity = c->a->case_count + 1;
    c->pair_a = calloc(capacity, sizeof *c->pair_a);
    c->pair_b = calloc(capacity, sizeof *c->pair_b);
    c->in_pair_a = calloc(capacity, 1);
    c->in_pair_b = calloc(c->b->case_count + 1, 1);
    if (!c->pair_a || !c->pair_b || !c->in_pair_a || !c->in_pair_b)
        return vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
    if (args->pair_count == 0) {
        for (size_t i = 0; i < c->a->case_count; i++) {
            const vb_results_case *match = vb_results_find(c->b, c->a->cases[i].group, c->a->cases[i].allocator);
            if (!match) continue;
            add_pair(c, &c->a->cases[i], match);
        }
        return VB_EXIT_OK;
    }
    for (size_t p = 0; p < args->pair_count; p++) {
        int status = check_allocator(c->a, args->pair_a[p], args->pair_text[p]);
        if (status == VB_EXIT_OK) status = check_allocator(c->b, args->pair_b[p], args->pair_text[p]);
        if (status != VB_EXIT_OK) return status;
    }
    for (size_t i = 0; i < c->a->case_count; i++)
        for (size_t p = 0; p < args->pair_count; p++) {
            const vb_results_case *left = &c->a->cases[i];
            if (strcmp(left->allocator, args->pair_a[p]) != 0) continue;
            const vb_results_case *match = vb_results_find(c->b, left->group, args->pair_b[p]);
            if (!match || c->pair_count == capacity) continue;
            add_pair(c, left, match);
        }
    return VB_EXIT_OK;
}

/* 1 if `side`'s case is in a pair (as A when `as_a`). */
static int paired(const comparison *c, const vb_results_case *side, int as_a)
{
    return as_a ? c->in_pair_a[side - c->a->cases] : c->in_pair_b[side - c->b->cases];
}

/* 1 if a case of `file` takes part in the comparison's --pair specs at all. */
static int in_pair_specs(const compare_args *args, const char *allocator, int as_a)
{
    if (args->pair_count == 0) return 1;
    for (size_t p = 0; p < args->pair_count; p++)
        if (strcmp(as_a ? args->pair_a[p] : args->pair_b[p], allocator) == 0) return 1;
    return 0;
}

/* The threshold --fail-on sets for `m`, or NULL. */
static const fail_on *threshold(const compare_args *args, const metric *m)
{
    for (size_t i = 0; i < args->fail_count; i++)
        if (strcmp(args->fails[i].name, m->name) == 0) return &args->fails[i];
    return NULL;
}

/* What one metric of one pair says. */
typedef struct cell {
    int a_present, b_present;
    double a, b, change;
    const char *a_text, *b_text; /* verdicts */
    int differs, regression;
    char shown[160];
} cell;

static int evaluate(const compare_args *args, const comparison *c, size_t pair, const metric *m, cell *out)
{
    memset(out, 0, sizeof *out);
    const vb_results_case *left = c->pair_a[pair], *right = c->pair_b[pair];
    const fail_on *limit = threshold(args, m);
    if (m->unit == U_VERDICT) {
        out->a_text = json_string_value(json_object_get(left->entry, "verdict"));
        out->b_text = json_string_value(json_object_get(right->entry, "verdict"));
        out->a_present = out->b_present = 1;
        out->differs = strcmp(out->a_text, out->b_text) != 0;
        out->regression = out->differs && limit;
        snprintf(out->shown, sizeof out->shown, out->differs ? "%s -> %s" : "%s", out->a_text, out->b_text);
        return VB_EXIT_OK;
    }
    out->a_present = metric_value(left, m, &out->a);
    out->b_present = metric_value(right, m, &out->b);
    char a_text[48] = "-", b_text[48] = "-";
    if (out->a_present) format_value(m->unit, out->a, a_text, sizeof a_text);
    if (out->b_present) format_value(m->unit, out->b, b_text, sizeof b_text);
    if (!out->a_present || !out->b_present) {
        out->differs = out->a_present != out->b_present;
        /* A gate that cannot compare does not pass: a figure one side
         * lacks (a case that failed, a file cut short) counts as a
         * regression of a metric --fail-on names. */
        out->regression = out->differs && limit;
        snprintf(out->shown, sizeof out->shown, out->differs ? "%s -> %s%s" : "-", a_text, b_text,
                 out->regression ? " (not compared) !" : "");
        return VB_EXIT_OK;
    }
    out->differs = out->a != out->b; /* exact: bytes and counts are integers */
    out->change = change_percent(out->a, out->b);
    out->regression = out->differs && limit && out->change > limit->percent;
    if (!out->differs) {
        snprintf(out->shown, sizeof out->shown, "%s", a_text);
    } else {
        char change[48];
        if (isinf(out->change)) snprintf(change, sizeof change, "%s", out->change > 0 ? "from 0" : "to 0");
        else if (m->unit == U_BYTES && strcmp(a_text, b_text) == 0)
            snprintf(change, sizeof change, "%+.0f B", out->b - out->a); /* below the MiB shown: the exact bytes */
        else if (fabs(out->change) < 0.05) snprintf(change, sizeof change, "%+.2g%%", out->change);
        else snprintf(change, sizeof change, "%+.1f%%", out->change);
        snprintf(out->shown, sizeof out->shown, "%s -> %s (%s)%s", a_text, b_text, change, out->regression ? " !" : "");
    }
    return VB_EXIT_OK;
}

/* The metrics shown for the comparison's kind (time only when compared). */
static size_t shown_metrics(const comparison *c, const metric **out)
{
    size_t count = 0;
    vb_results_kind kind = c->a->kind != VB_RESULTS_EMPTY ? c->a->kind : c->b->kind;
    for (size_t i = 0; i < METRIC_COUNT; i++) {
        if (!(metrics[i].kinds & K(kind))) continue;
        if (metrics[i].unit == U_TIME && !c->times_compared) continue;
        out[count++] = &metrics[i];
    }
    return count;
}

/* The case's label in the table. */
static void case_label(const comparison *c, size_t i, char *out, size_t capacity)
{
    const vb_results_case *left = c->pair_a[i], *right = c->pair_b[i];
    if (strcmp(left->allocator, right->allocator) == 0) snprintf(out, capacity, "%s/%s", left->group, left->allocator);
    else snprintf(out, capacity, "%s/%s vs %s", left->group, left->allocator, right->allocator);
}

static int print_table(const compare_args *args, comparison *c)
{
    const metric *shown[METRIC_COUNT];
    size_t columns = shown_metrics(c, shown);
    size_t rows = c->pair_count;
    char (*cells)[160] = calloc((rows + 1) * (columns + 1), sizeof *cells);
    size_t width[METRIC_COUNT + 1] = {0};
    if (!cells) return vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
    snprintf(cells[0], sizeof cells[0], "case");
    for (size_t m = 0; m < columns; m++) snprintf(cells[m + 1], sizeof cells[0], "%s", shown[m]->title);
    for (size_t r = 0; r < rows; r++) {
        char (*row)[160] = cells + (r + 1) * (columns + 1);
        case_label(c, r, row[0], sizeof row[0]);
        for (size_t m = 0; m < columns; m++) {
            cell value;
            if (evaluate(args, c, r, shown[m], &value) != VB_EXIT_OK) {
                free(cells);
                return VB_EXIT_USAGE;
            }
            c->regressions += value.regression;
            snprintf(row[m + 1], sizeof row[0], "%s", value.shown);
        }
    }
    for (size_t r = 0; r <= rows; r++)
        for (size_t m = 0; m <= columns; m++) {
            size_t length = strlen(cells[r * (columns + 1) + m]);
            if (length > width[m]) width[m] = length;
        }
    for (size_t r = 0; r <= rows; r++) {
        for (size_t m = 0; m <= columns; m++)
            printf(m == 0 ? "%-*s" : "  %-*s", (int)(m == columns ? 0 : width[m]), cells[r * (columns + 1) + m]);
        putchar('\n');
    }
    free(cells);
    return VB_EXIT_OK;
}

static void print_unpaired(const compare_args *args, const comparison *c)
{
    for (int side = 0; side < 2; side++) {
        const vb_results_file *file = side == 0 ? c->a : c->b;
        size_t count = 0;
        for (size_t i = 0; i < file->case_count; i++) {
            const vb_results_case *one = &file->cases[i];
            if (!in_pair_specs(args, one->allocator, side == 0) || paired(c, one, side == 0)) continue;
            if (count == 0) printf("unpaired, only in %s:", side == 0 ? "A" : "B");
            if (count++ < UNPAIRED_SHOWN) printf(" %s", one->name);
        }
        if (count > UNPAIRED_SHOWN) printf(" ... and %zu more (--json lists them all)", count - UNPAIRED_SHOWN);
        if (count && side == 0 && args->fail_count) printf(" (not compared: a regression under --fail-on)");
        if (count) putchar('\n');
    }
}

/* Under --fail-on, a case of A that B lacks counts as a regression: a gate
 * that cannot compare does not pass (a run that lost a case, a file cut
 * short). */
static size_t gone_from_b(const compare_args *args, const comparison *c)
{
    size_t count = 0;
    if (!args->fail_count) return 0;
    for (size_t i = 0; i < c->a->case_count; i++)
        count += in_pair_specs(args, c->a->cases[i].allocator, 1) && !paired(c, &c->a->cases[i], 1);
    return count;
}

static void print_comparison(const compare_args *args, comparison *c, int *failed)
{
    vb_cli_line(stdout, "vrambench compare: A = %s (%s, %s), B = %s (%s, %s)", c->a->path,
                vb_results_kind_name(c->a->kind), c->a->simulated ? "simulated device" : c->a->device_name, c->b->path,
                vb_results_kind_name(c->b->kind), c->b->simulated ? "simulated device" : c->b->device_name);
    for (size_t p = 0; p < args->pair_count; p++) printf("  pairs %s in A with %s in B\n", args->pair_a[p], args->pair_b[p]);
    printf("  cells: A -> B (change) where they differ, one value where equal; memory figures compare exactly (to the "
           "byte); higher is worse for every metric%s\n", args->fail_count ? "; ! marks a regression (--fail-on)" : "");
    if (c->times_note[0]) printf("  %s\n", c->times_note);
    if (print_table(args, c) != VB_EXIT_OK) {
        *failed = VB_EXIT_USAGE;
        return;
    }
    print_unpaired(args, c);
    c->regressions += gone_from_b(args, c);
    printf("%zu case%s paired%s\n\n", c->pair_count, c->pair_count == 1 ? "" : "s",
           args->fail_count ? (c->regressions ? "; REGRESSION (--fail-on)" : "; no regression") : "");
}

/* ======================================================================== */
/* --json                                                                   */
/* ======================================================================== */

static json_t *file_json(const vb_results_file *file)
{
    return json_pack("{s:s,s:s,s:s,s:b}", "path", file->path, "kind", vb_results_kind_name(file->kind), "device_name",
                     file->device_name, "simulated", file->simulated);
}

static json_t *comparison_json(const compare_args *args, comparison *c, int *failed)
{
    const metric *shown[METRIC_COUNT];
    size_t columns = shown_metrics(c, shown);
    json_t *pairs = json_array(), *unpaired = json_pack("{s:[],s:[]}", "a", "b");
    json_t *metric_list = json_array();
    for (size_t m = 0; m < columns; m++)
        json_array_append_new(metric_list, json_pack("{s:s,s:s,s:s}", "name", shown[m]->name, "title", shown[m]->title,
                                                     "worse", shown[m]->unit == U_VERDICT ? "changed" : "higher"));
    for (size_t r = 0; r < c->pair_count; r++) {
        json_t *figures = json_object();
        for (size_t m = 0; m < columns; m++) {
            cell value;
            if (evaluate(args, c, r, shown[m], &value) != VB_EXIT_OK) {
                *failed = VB_EXIT_USAGE;
                break;
            }
            c->regressions += value.regression;
            json_t *one = shown[m]->unit == U_VERDICT
                              ? json_pack("{s:s,s:s}", "a", value.a_text, "b", value.b_text)
                              : json_pack("{s:o,s:o}", "a", value.a_present ? json_real(value.a) : json_null(), "b",
                                          value.b_present ? json_real(value.b) : json_null());
            if (shown[m]->unit == U_BYTES || shown[m]->unit == U_COUNT) {
                if (value.a_present) json_object_set_new(one, "a", json_integer((json_int_t)value.a));
                if (value.b_present) json_object_set_new(one, "b", json_integer((json_int_t)value.b));
            }
            json_object_set_new(one, "differs", json_boolean(value.differs));
            if (value.a_present && value.b_present && shown[m]->unit != U_VERDICT)
                json_object_set_new(one, "change_percent", isfinite(value.change) ? json_real(value.change) : json_null());
            json_object_set_new(one, "regression", json_boolean(value.regression));
            json_object_set_new(figures, shown[m]->name, one);
        }
        json_array_append_new(pairs, json_pack("{s:s,s:s,s:s,s:s,s:o}", "group", c->pair_a[r]->group, "a",
                                               c->pair_a[r]->name, "b", c->pair_b[r]->name, "allocator",
                                               c->pair_a[r]->allocator, "metrics", figures));
    }
    for (int side = 0; side < 2; side++) {
        const vb_results_file *file = side == 0 ? c->a : c->b;
        for (size_t i = 0; i < file->case_count; i++)
            if (in_pair_specs(args, file->cases[i].allocator, side == 0) && !paired(c, &file->cases[i], side == 0))
                json_array_append_new(json_object_get(unpaired, side ? "b" : "a"), json_string(file->cases[i].name));
    }
    c->regressions += gone_from_b(args, c);
    return json_pack("{s:o,s:o,s:b,s:s?,s:o,s:o,s:o,s:I}", "a", file_json(c->a), "b", file_json(c->b), "times_compared",
                     c->times_compared, "times_note", c->times_note[0] ? c->times_note : NULL, "metrics", metric_list,
                     "pairs", pairs, "unpaired", unpaired, "regressions", (json_int_t)c->regressions);
}

/* ======================================================================== */
/* The command                                                              */
/* ======================================================================== */

int vb_cmd_compare(int argc, char **argv)
{
    compare_args args;
    int exit_status = parse_args(argc, argv, &args);
    if (exit_status != VB_EXIT_OK) return exit_status == VB_EXIT_HELP ? VB_EXIT_OK : exit_status;
    vb_results_file *files = calloc(args.file_count, sizeof *files);
    comparison *comparisons = calloc(args.file_count, sizeof *comparisons);
    size_t loaded = 0, comparison_count = 0;
    if (!files || !comparisons) {
        exit_status = vb_cli_error(VB_EXIT_FAILURE, "out of host memory");
        goto done;
    }
    for (; loaded < args.file_count; loaded++) {
        vb_status status = vb_results_load(args.files[loaded], &files[loaded]);
        if (status != VB_OK) {
            exit_status = vb_cli_status_error(status);
            goto done;
        }
    }
    const vb_results_file *a = &files[0];
    for (size_t f = 1; f < args.file_count; f++)
        if (files[f].kind != a->kind && files[f].kind != VB_RESULTS_EMPTY && a->kind != VB_RESULTS_EMPTY) {
            exit_status = vb_cli_error(VB_EXIT_USAGE, "compare: %s is a %s file and %s a %s file: compare files of one "
                                                      "kind", a->path, vb_results_kind_name(a->kind), files[f].path,
                                       vb_results_kind_name(files[f].kind));
            goto done;
        }
    for (size_t i = 0; i < args.fail_count; i++) {
        int applies = 0;
        for (size_t m = 0; m < METRIC_COUNT; m++)
            applies |= strcmp(metrics[m].name, args.fails[i].name) == 0 && (metrics[m].kinds & K(a->kind));
        if (!applies && a->kind != VB_RESULTS_EMPTY) {
            char what[64];
            snprintf(what, sizeof what, " for %s files", vb_results_kind_name(a->kind));
            exit_status = unknown_metric(args.fails[i].name, K(a->kind), what);
            goto done;
        }
    }
    /* One comparison per further file (or A with itself under --pair). */
    for (size_t f = args.file_count == 1 ? 0 : 1; f < args.file_count; f++) {
        comparison *c = &comparisons[comparison_count++];
        c->a = a;
        c->b = &files[f];
        times_note(c);
        exit_status = pair_cases(&args, c);
        if (exit_status != VB_EXIT_OK) goto done;
        if (c->pair_count == 0) {
            exit_status = vb_cli_error(VB_EXIT_USAGE, "compare: no case of %s pairs with one of %s (%zu and %zu cases; "
                                                      "pair allocators of one file with --pair X=Y)", a->path,
                                       c->b->path, a->case_count, c->b->case_count);
            goto done;
        }
        for (size_t i = 0; i < args.fail_count; i++)
            if (strcmp(args.fails[i].name, "time") == 0 && !c->times_compared)
                vb_cli_line(stderr, "vrambench: note: --fail-on time does not apply to %s: %s", c->b->path,
                            c->times_note);
    }
    /* Every figure checked before any output: bad input is one line, no half table. */
    for (size_t i = 0; i < comparison_count; i++) {
        const metric *shown[METRIC_COUNT];
        size_t columns = shown_metrics(&comparisons[i], shown);
        for (size_t r = 0; r < comparisons[i].pair_count; r++)
            for (size_t m = 0; m < columns; m++) {
                cell value;
                exit_status = evaluate(&args, &comparisons[i], r, shown[m], &value);
                if (exit_status != VB_EXIT_OK) goto done;
            }
    }
    int failed = 0;
    if (args.json) {
        json_t *list = json_array();
        for (size_t i = 0; i < comparison_count && !failed; i++)
            json_array_append_new(list, comparison_json(&args, &comparisons[i], &failed));
        if (!failed) {
            json_dumpf(list, stdout, JSON_INDENT(2));
            putchar('\n');
        }
        json_decref(list);
    } else {
        for (size_t i = 0; i < comparison_count && !failed; i++) print_comparison(&args, &comparisons[i], &failed);
    }
    /* Flushed here, so that the table comes before a regression line; a
     * write that failed is said here, with its reason, as main would. */
    if (fflush(stdout) != 0 && !failed)
        failed = vb_cli_error(VB_EXIT_FAILURE, "cannot write to standard output: %s", strerror(errno));
    size_t regressions = 0;
    for (size_t i = 0; i < comparison_count; i++) regressions += comparisons[i].regressions;
    exit_status = failed ? failed : regressions ? VB_EXIT_FAILURE : VB_EXIT_OK;
    if (regressions && !failed) fprintf(stderr, "vrambench: compare: %zu regression%s (--fail-on)\n", regressions,
                                        regressions == 1 ? "" : "s");
done:
    for (size_t i = 0; i < comparison_count; i++) {
        free(comparisons[i].pair_a);
        free(comparisons[i].pair_b);
        free(comparisons[i].in_pair_a);
        free(comparisons[i].in_pair_b);
    }
    for (size_t i = 0; i < loaded; i++) vb_results_free(&files[i]);
    free(files);
    free(comparisons);
    return exit_status;
}
