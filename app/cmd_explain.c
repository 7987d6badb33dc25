/* vrambench — `vrambench explain TRACE --capacity SIZE`: where and why a
 * trace runs out of memory under a capacity (app/explain.h). TRACE is
 * anything `replay` reads, or a PyTorch memory snapshot pickle, its own
 * OOM included (app/cli_trace_input.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "explain.h"
#include "fit.h"
#include "input_file.h"
#include "json_report.h"
#include "output_file.h"

enum { OPT_CAPACITY, OPT_ALLOCATOR, OPT_CONF, OPT_OUT, OPT_SNAPSHOT, OPT_NO_WHAT_IF, OPT_QUIET, OPTION_COUNT };
static const vb_cli_option options[OPTION_COUNT + 1] = {
    [OPT_CAPACITY] = {"--capacity", NULL, "SIZE",
                      "required: PyTorch's limit (set_per_process_memory_fraction) for its caching allocator, a\n"
                      "device's memory for the others (up to " VB_FIT_MAX_CAPACITY_TEXT "), e.g. --capacity 24GiB. " VB_CLI_SIZE_RULE,
                      0},
    [OPT_ALLOCATOR] = {"--allocator", NULL, "SPEC",
                       "the allocator, one spec as replay takes it (default pytorch[]: PyTorch's defaults),\n"
                       "e.g. --allocator 'caching[max_split_size_mb=256]'",
                       0},
    [OPT_CONF] = {"--pytorch-alloc-conf", NULL, "CONF",
                  "PYTORCH_ALLOC_CONF's value instead of --allocator, e.g. --pytorch-alloc-conf expandable_segments:True",
                  0},
    [OPT_OUT] = {"--out", NULL, "FILE.json", "the explanation as JSON (docs/results-json.md), e.g. --out oom.json", 0},
    [OPT_SNAPSHOT] = {"--snapshot", NULL, "OOM.pickle",
                      "the replay up to that moment as a PyTorch memory snapshot (pytorch.org/memory_viz),\n"
                      "e.g. --snapshot oom.pickle",
                      0},
    [OPT_NO_WHAT_IF] = {"--no-what-if", NULL, NULL, "leave out the other settings under the same capacity", 0},
    [OPT_QUIET] = {"--quiet", NULL, NULL, "errors only: no report or 'wrote FILE' (the JSON of --out is written all the same)", 0},
    [OPTION_COUNT] = {NULL, NULL, NULL, NULL, 0},
};

static const vb_cli_usage usage = {
    "explain", "TRACE",
    "Replays a trace to its first out-of-memory under a capacity and says why: the request (trace line,\n"
    "bytes, stream), the memory when it came and when the allocator gave up (what PyTorch's message\n"
    "reports), reserved-but-unallocated bytes by cause (adding up exactly), and every tune candidate under\n"
    "the same capacity: fits or not, and by how much. A PyTorch snapshot dumped after an OOM is replayed to\n"
    "the request that failed.\n"
    "TRACE: a vbtrace, an RMM log (.gz too) or a PyTorch memory snapshot pickle\n"
    "(torch.cuda.memory._dump_snapshot; converted by python/vrambench/torch2trace.py).",
    options, 0,
    "example:\n  vrambench explain tests/fixtures/traces/gpt2.trace.gz --capacity 10GiB --snapshot out/oom.pickle"};

int vb_cmd_explain(int argc, char **argv)
{
    vb_explain_options explain = {.spec = "pytorch[]", .what_if = 1};
    const char *trace_path = NULL, *out = NULL, *allocator = NULL, *conf = NULL;
    int quiet = 0;
    vb_cli_parser parser;
    vb_cli_parser_init(&parser, &usage, argc, argv);
    const char *value;
    for (int option; (option = vb_cli_next(&parser, &value)) != VB_CLI_END;) {
        switch (option) {
        case VB_CLI_STOP: return parser.exit_status;
        case VB_CLI_ARGUMENT:
            if (trace_path)
                return vb_cli_error(VB_EXIT_USAGE, "explain: one TRACE only ('%s', then '%s')", trace_path, value);
            trace_path = value;
            break;
        case OPT_CAPACITY:
            if (vb_cli_size_option("explain", "--capacity", value, &explain.capacity) != VB_EXIT_OK)
                return VB_EXIT_USAGE;
            /* As tune and replay: under the driver's smallest allocation nothing fits (docs/cli.md, "Out of memory") */
            if (explain.capacity < VB_FIT_STEP)
                return vb_cli_error(VB_EXIT_USAGE,
                                    "explain: --capacity %s is below 2 MiB, the driver's smallest allocation", value);
            if (explain.capacity > VB_FIT_MAX_CAPACITY)
                return vb_cli_error(VB_EXIT_USAGE, "explain: --capacity '%s' is not from 2 MiB to " VB_FIT_MAX_CAPACITY_TEXT, value);
            break;
        case OPT_ALLOCATOR: allocator = value; break;
        case OPT_CONF: conf = value; break;
        case OPT_OUT: out = value; break;
        case OPT_SNAPSHOT: explain.snapshot_path = value; break;
        case OPT_NO_WHAT_IF: explain.what_if = 0; break;
        case OPT_QUIET: quiet = 1; break;
        }
    }
    if (!trace_path) return vb_cli_error(VB_EXIT_USAGE, "explain: which TRACE? (vrambench explain --help)");
    if (!explain.capacity) return vb_cli_error(VB_EXIT_USAGE, "explain: --capacity SIZE is required, e.g. 24GiB");
    if (allocator && conf)
        return vb_cli_error(VB_EXIT_USAGE, "explain: give --allocator or --pytorch-alloc-conf, not both");
    char conf_spec[1200];
    if (conf) {
        int exit_status = vb_cli_check_pytorch_conf("explain", conf);
        if (exit_status != VB_EXIT_OK) return exit_status;
        if ((size_t)snprintf(conf_spec, sizeof conf_spec, "pytorch[%s]", conf) >= sizeof conf_spec)
            return vb_cli_error(VB_EXIT_USAGE, "explain: --pytorch-alloc-conf is too long");
        explain.spec = conf_spec;
    } else if (allocator) {
        explain.spec = allocator;
    }
    int depth = 0, several = strcmp(explain.spec, "all") == 0;
    for (const char *c = explain.spec; *c && !several; c++) {
        depth += (*c == '[') - (*c == ']');
        several = *c == ',' && depth == 0;
    }
    if (several)
        return vb_cli_error(VB_EXIT_USAGE, "explain: --allocator '%s' names several allocators: explain replays one "
                                           "(vrambench replay compares several)", explain.spec);
    vb_allocator_spec check;
    if (vb_allocator_spec_parse(explain.spec, &check) != VB_OK) return vb_cli_status_error(VB_ERR_INVALID);
    vb_allocator_spec_free(&check);
    if ((out && vb_output_check(out) != VB_OK) ||
        (explain.snapshot_path && (vb_output_check(explain.snapshot_path) != VB_OK ||
                                   vb_output_check_uncompressed(explain.snapshot_path, "a snapshot pickle") != VB_OK)))
        return vb_cli_status_error(VB_ERR_INVALID);
    vb_named_file files[] = {{"the trace", trace_path, 0}, {"--out", out, 1}, {"--snapshot", explain.snapshot_path, 1}};
    if (vb_output_check_distinct(files, sizeof files / sizeof files[0]) != VB_OK)
        return vb_cli_status_error(VB_ERR_INVALID);

    char converted[4200] = "";
    explain.input_label = trace_path;
    int exit_status = vb_cli_trace_input("explain", trace_path, quiet, converted, &explain.trace_path);
    json_t *document = NULL;
    if (exit_status == VB_EXIT_OK) {
        vb_output_defer(); /* --snapshot's file and --out's: both or neither (app/output_file.h) */
        vb_status status = vb_explain_run(&explain, quiet ? NULL : stdout, &document);
        vb_cli_flush_stdout();
        if (status == VB_OK && out) status = vb_report_write(document, out);
        vb_status released = vb_output_release(status == VB_OK);
        if (status == VB_OK) status = released;
        if (status != VB_OK) exit_status = vb_cli_status_error(status);
        else if (out && !quiet) vb_cli_line(stderr, "vrambench: wrote %s", out);
    }
    json_decref(document);
    vb_input_release();
    return exit_status;
}
