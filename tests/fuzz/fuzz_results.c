/* vrambench fuzz target (libFuzzer): the C reader of a results document,
 * `vrambench claims --pytorch FILE`'s measurements file
 * (app/pytorch_measurements.h: JSON through jansson, every type and range
 * checked), on any bytes; every measurement that parses is then decided by
 * every claim of the catalogue whose scenario it names (app/claims.h), as
 * the command does. Parsing must end in VB_OK or one error message, and
 * deciding must finish, without a crash, a leak or undefined behaviour.
 *
 *   make fuzz            builds and runs each target for FUZZ_SECONDS */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "app/claims.h"
#include "app/pytorch_measurements.h"
#include "base/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    vb_pytorch_measurements measurements;
    vb_status status = vb_pytorch_measurements_parse("fuzz.json", (const char *)data, size, &measurements);
    if (status != VB_OK && vb_last_error()[0] == '\0') abort(); /* an error always says what is wrong */
    for (size_t i = 0; status == VB_OK && i < measurements.count; i++) {
        vb_measurement m = vb_pytorch_measurement_view(&measurements.items[i]);
        for (size_t c = 0; vb_claim_catalogue[c]; c++) {
            if (strcmp(vb_claim_catalogue[c]->scenario, measurements.items[i].scenario) != 0) continue;
            vb_decision decision;
            memset(&decision, 0, sizeof decision);
            vb_claim_decide(vb_claim_catalogue[c], &m, &decision);
            if (decision.number_count > VB_CLAIM_MAX_NUMBERS || !memchr(decision.reason, '\0', sizeof decision.reason))
                abort();
        }
    }
    vb_pytorch_measurements_free(&measurements);
    return 0;
}
