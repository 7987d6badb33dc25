/* vrambench — `vrambench list allocators|scenarios|names [--json]`. */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "allocators/allocator.h"
#include "scenarios/scenario.h"
#include "claims.h"
#include "cli.h"
#include "replay.h"
#include "report.h"

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
    if (failed || fflush(stdout) != 0) return vb_cli_error(VB_EXIT_FAILURE, "list: cannot write the names");
    return VB_EXIT_OK;
}

int vb_cmd_list(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "names") == 0 && strcmp(argv[2], "--json") == 0) return list_names(1);
    if (argc == 2 && strcmp(argv[1], "names") == 0) return list_names(0);
    if (argc != 2) return vb_cli_error(VB_EXIT_USAGE, "usage: vrambench list allocators|scenarios|names [--json]");
    if (strcmp(argv[1], "allocators") == 0) {
        list_allocators();
        return VB_EXIT_OK;
    }
    if (strcmp(argv[1], "scenarios") == 0) {
        list_scenarios();
        return VB_EXIT_OK;
    }
    return vb_cli_error(VB_EXIT_USAGE, "list: unknown kind '%s' (known: allocators, scenarios, names)", argv[1]);
}
