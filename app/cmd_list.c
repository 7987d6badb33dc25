/* vrambench — `vrambench list allocators|scenarios`. */
#include <stdio.h>
#include <string.h>

#include "allocators/allocator.h"
#include "scenarios/scenario.h"
#include "cli.h"

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
    }
}

int vb_cmd_list(int argc, char **argv)
{
    if (argc != 2) return vb_cli_error(VB_EXIT_USAGE, "usage: vrambench list allocators|scenarios");
    if (strcmp(argv[1], "allocators") == 0) {
        list_allocators();
        return VB_EXIT_OK;
    }
    if (strcmp(argv[1], "scenarios") == 0) {
        list_scenarios();
        return VB_EXIT_OK;
    }
    return vb_cli_error(VB_EXIT_USAGE, "list: unknown kind '%s' (known: allocators, scenarios)", argv[1]);
}
