/* vrambench — `vrambench list allocators|scenarios|names [--json]`. */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "allocators/allocator.h"
#include "base/closest.h"
#include "scenarios/scenario.h"
#include "claims.h"
#include "cli.h"
#include "replay.h"
#include "json_report.h"

/* Prints each allocator with its description and options. */
static void list_allocators(void)
{
    for (size_t i = 0;; i++) {
        /* The registry, then external:PATH.so (not in it: "all" cannot name a path). */
        const vb_allocator_ops *ops = vb_allocator_registry[i] ? vb_allocator_registry[i] : &vb_external_allocator;
        printf("%-12s %s\n", ops->name, ops->description);
        for (size_t j = 0; j < ops->option_count; j++)
            printf("%-12s   %s: %s\n", "", ops->options[j].key, ops->options[j].help);
        if (!vb_allocator_registry[i]) break;
    }
}

/* Prints each scenario with the documents it follows and its description. */
static void list_scenarios(void)
{
    for (size_t i = 0; vb_scenario_registry[i]; i++) {
        const vb_scenario *scenario = vb_scenario_registry[i];
        printf("%-20s %s\n%-20s   (follows: %s)\n", scenario->name, scenario->description, "", scenario->documents);
        if (scenario->parameter) printf("%-20s   --param %s\n", "", scenario->parameter);
    }
}

/* The names every scenario (the replay too) and the claims catalogue
 * define, as one JSON document (docs/results-json.md, "names"): what the
 * Python tools read instead of re-spelling them. NULL on host OOM. */
static json_t *names_json(void)
{
    json_t *root = json_object(), *scenarios = json_object(), *claims = json_array();
    int failed = !root || !scenarios || !claims;
    for (size_t i = 0; !failed && vb_scenario_registry[i]; i++) {
        json_t *names = vb_report_names(vb_scenario_registry[i]);
        failed |= !names || json_object_set_new(scenarios, vb_scenario_registry[i]->name, names);
    }
    json_t *replay = failed ? NULL : vb_report_names(&vb_replay_scenario);
    failed |= !replay || json_object_set_new(scenarios, vb_replay_scenario.name, replay);
    for (size_t i = 0; !failed && vb_claim_catalogue[i]; i++) {
        const vb_claim *claim = vb_claim_catalogue[i];
        json_t *entry = json_pack("{s:s, s:s, s:s}", "id", claim->id, "documents", claim->documents, "scenario",
                                  claim->scenario);
        failed |= !entry || json_array_append_new(claims, entry);
    }
    json_t *common = json_object(), *common_steps = json_object(), *common_counters = json_array();
    failed |= !common || !common_steps || !common_counters;
    for (const vb_name *step = vb_scenario_common_steps; !failed && step->key; step++)
        failed |= json_object_set_new(common_steps, step->key, json_string(step->text));
    for (const char *const *name = vb_scenario_common_counters; !failed && *name; name++)
        failed |= json_array_append_new(common_counters, json_string(*name));
    failed |= json_object_set_new(common, "steps", common_steps) || json_object_set_new(common, "counters", common_counters);
    failed |= json_object_set_new(root, "common", common);
    failed |= json_object_set(root, "scenarios", scenarios) || json_object_set(root, "claims", claims);
    json_decref(scenarios);
    json_decref(claims);
    if (failed) {
        json_decref(root);
        return NULL;
    }
    return root;
}

/* Prints the names: JSON, or one line per scenario step and claim. */
static int list_names(int as_json)
{
    json_t *root = names_json();
    if (!root) return vb_cli_error(VB_EXIT_FAILURE, "list: out of host memory");
    int failed = 0;
    if (as_json) {
        failed = json_dumpf(root, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) != 0 || fputc('\n', stdout) == EOF;
    } else {
        const char *scenario, *key;
        json_t *names, *text;
        json_object_foreach(json_object_get(root, "scenarios"), scenario, names)
            json_object_foreach(json_object_get(names, "steps"), key, text)
                printf("%-20s step %-24s %s\n", scenario, key, json_string_value(text));
        for (size_t i = 0; vb_claim_catalogue[i]; i++)
            printf("%-20s claim %s\n", vb_claim_catalogue[i]->scenario, vb_claim_catalogue[i]->id);
    }
    json_decref(root);
    vb_cli_flush_stdout(); /* a failed write is main's to report, with its reason */
    if (failed && !ferror(stdout)) return vb_cli_error(VB_EXIT_FAILURE, "list: cannot write the names");
    return VB_EXIT_OK;
}

enum { OPT_JSON, OPTION_COUNT };
static const vb_cli_option options[OPTION_COUNT + 1] = {
    [OPT_JSON] = {"--json", NULL, NULL,
                  "names only: the tables as one JSON document (docs/results-json.md, \"names\"), e.g.\n"
                  "vrambench list names --json",
                  0},
    [OPTION_COUNT] = {NULL, NULL, NULL, NULL, 0},
};

static const vb_cli_usage usage = {
    "list", "allocators|scenarios|names",
    "Lists what can be run and the names results use:\n"
    "  allocators  each strategy with its description and its options (the KEYs of NAME[KEY=VALUE])\n"
    "  scenarios   each scenario, what it does and which documents it follows\n"
    "  names       every scenario's steps and every claim id (the names results and tools use)",
    options, 0, "example:\n  vrambench list allocators"};

int vb_cmd_list(int argc, char **argv)
{
    static const char *const kinds[] = {"allocators", "scenarios", "names", NULL};
    const char *kind = NULL;
    int as_json = 0;
    vb_cli_parser parser;
    vb_cli_parser_init(&parser, &usage, argc, argv);
    const char *value;
    for (int option; (option = vb_cli_next(&parser, &value)) != VB_CLI_END;) {
        if (option == VB_CLI_STOP) return parser.exit_status;
        if (option == OPT_JSON) as_json = 1;
        if (option != VB_CLI_ARGUMENT) continue;
        if (kind) return vb_cli_error(VB_EXIT_USAGE, "list: one kind only ('%s', then '%s')", kind, value);
        kind = value;
    }
    if (!kind) return vb_cli_error(VB_EXIT_USAGE, "list: which? allocators, scenarios or names (vrambench list --help)");
    if (strcmp(kind, "names") == 0) return list_names(as_json);
    if (as_json) return vb_cli_error(VB_EXIT_USAGE, "list: --json applies to names only");
    if (strcmp(kind, "allocators") == 0) {
        list_allocators();
        return VB_EXIT_OK;
    }
    if (strcmp(kind, "scenarios") == 0) {
        list_scenarios();
        return VB_EXIT_OK;
    }
    char hint[160];
    return vb_cli_error(VB_EXIT_USAGE, "list: unknown kind '%s'%s (known: allocators, scenarios, names)", kind,
                        vb_did_you_mean(kind, kinds, hint, sizeof hint));
}
