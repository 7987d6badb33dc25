/* vrambench — the registered scenarios, in the order users see them.
 * To add one: write scenarios/NAME.c defining `const vb_scenario
 * vb_NAME_scenario`, declare it here and put it in the table. */
#include "scenario.h"

const vb_scenario *const vb_scenario_registry[] = {
    NULL,
};
