/* vrambench fuzz target (libFuzzer): allocator specs and config values
 * (app/runner.c's spec parser, allocators/config.c and each allocator's
 * option checks). The input is a spec list as --allocator takes it
 * ("caching[max_split_size_mb=256],bfc"); every spec that parses is created
 * on the simulated device (which checks its keys and values), given one
 * allocation and destroyed. A parse must end in VB_OK or an error message,
 * without a crash, a leak or undefined behaviour. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "app/runner.h"
#include "base/device.h"

/* A small simulated device, opened once. */
static vb_device *device(void)
{
    static vb_device *dev;
    if (!dev && vb_sim_open(64ull << 20, &dev) != VB_OK) abort();
    return dev;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096) return 0;
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    /* "external:PATH" dlopens a library: not something to do with random
     * paths (its constructors would run); the spec parser is still fuzzed
     * on everything else. */
    if (strstr(text, "external")) {
        free(text);
        return 0;
    }
    vb_allocator_spec *specs = NULL;
    size_t count = 0;
    if (vb_allocator_spec_list_parse(text, &specs, &count) == VB_OK) {
        for (size_t i = 0; i < count; i++) {
            if (strlen(specs[i].label) >= sizeof specs[i].label) abort();
            vb_config config = vb_allocator_spec_config(&specs[i]);
            vb_allocator *allocator = NULL;
            if (vb_allocator_create(specs[i].name, device(), &config, &allocator) != VB_OK) continue;
            vb_addr addr = 0;
            if (vb_malloc(allocator, 4096, NULL, &addr) == VB_OK) vb_free(allocator, addr);
            vb_allocator_destroy(allocator);
        }
        vb_allocator_spec_list_free(specs, count);
    }
    free(text);
    return 0;
}
