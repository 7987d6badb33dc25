/* vrambench — PyTorch's measurements for `claims --pytorch` (see
 * pytorch_measurements.h). */
#include "pytorch_measurements.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/* Reads one measurement object into `item`; 0 on success, else an error
 * message in `why`. */
static int read_measurement(json_t *entry, vb_pytorch_measurement *item, char *why, size_t why_size)
{
    json_t *steps = json_object_get(entry, "timeline"), *values = json_object_get(entry, "counters");
    if (!json_is_array(steps) || !json_is_object(values)) {
        snprintf(why, why_size, "a measurement lacks its \"timeline\" array or \"counters\" object");
        return -1;
    }
    item->timeline = calloc(json_array_size(steps) + 1, sizeof *item->timeline);
    item->counters = calloc(json_object_size(values) + 1, sizeof *item->counters);
    if (!item->timeline || !item->counters) {
        snprintf(why, why_size, "out of host memory");
        return -1;
    }
    size_t index;
    json_t *step;
    json_array_foreach(steps, index, step) {
        static const char *const fields[] = {"requested", "allocated", "reserved", "driver_used"};
        vb_timeline_sample *s = &item->timeline[index];
        json_t *name = json_object_get(step, "step");
        if (!json_is_string(name)) {
            snprintf(why, why_size, "timeline entry %zu has no \"step\" string", index);
            return -1;
        }
        snprintf(s->step, sizeof s->step, "%s", json_string_value(name));
        uint64_t *slots[] = {&s->requested, &s->allocated, &s->reserved, &s->driver_used};
        for (size_t f = 0; f < 4; f++) {
            json_t *value = json_object_get(step, fields[f]);
            /* 2^64 as a double: a value at or above it has no uint64_t (the cast would be undefined). */
            if (!json_is_number(value) || !(json_number_value(value) >= 0) ||
                json_number_value(value) >= 18446744073709551616.0) {
                snprintf(why, why_size, "timeline entry %zu ('%s') has no \"%s\" in 0 .. 2^64-1 bytes", index, s->step,
                         fields[f]);
                return -1;
            }
            *slots[f] = (uint64_t)json_number_value(value);
        }
        item->timeline_count = index + 1;
    }
    const char *key;
    json_t *value;
    json_object_foreach(values, key, value) {
        if (!json_is_number(value)) {
            snprintf(why, why_size, "counter \"%s\" is not a number", key);
            return -1;
        }
        snprintf(item->counters[item->counter_count].name, sizeof item->counters[0].name, "%s", key);
        item->counters[item->counter_count].whole = 0;
        item->counters[item->counter_count++].value = json_number_value(value);
    }
    return 0;
}

vb_status vb_pytorch_measurements_parse(const char *path, const char *bytes, size_t length,
                                        vb_pytorch_measurements *out)
{
    memset(out, 0, sizeof *out);
    json_error_t error;
    json_t *root = json_loadb(bytes, length, 0, &error);
    if (!root) return vb_error(VB_ERR_INVALID, "%s: not JSON: %s (line %d)", path, error.text, error.line);
    vb_status status = VB_OK;
    json_t *context = json_object_get(root, "context"), *measurements = json_object_get(root, "measurements");
    json_t *device_name = json_object_get(context, "device_name");
    if (!json_is_object(context) || !json_is_array(measurements) || !json_is_string(device_name)) {
        json_decref(root);
        return vb_error(VB_ERR_INVALID, "%s is not a pytorch_claims.py measurements file "
                                        "(needs context.device_name and a measurements array)", path);
    }
    snprintf(out->device_name, sizeof out->device_name, "%s", json_string_value(device_name));
    out->items = calloc(json_array_size(measurements) + 1, sizeof *out->items);
    if (!out->items) status = vb_error(VB_ERR_HOST_OOM, "out of host memory");
    size_t index;
    json_t *entry;
    json_array_foreach(measurements, index, entry) {
        if (status != VB_OK) break;
        vb_pytorch_measurement *item = &out->items[out->count++];
        json_t *scenario = json_object_get(entry, "scenario");
        char why[256];
        if (!json_is_string(scenario)) {
            status = vb_error(VB_ERR_INVALID, "%s: measurement %zu has no \"scenario\"", path, index);
            break;
        }
        snprintf(item->scenario, sizeof item->scenario, "%s", json_string_value(scenario));
        if (read_measurement(entry, item, why, sizeof why) != 0)
            status = vb_error(strcmp(why, "out of host memory") == 0 ? VB_ERR_HOST_OOM : VB_ERR_INVALID, "%s: %s: %s",
                              path, json_string_value(scenario), why);
    }
    json_decref(root);
    return status;
}

void vb_pytorch_measurements_free(vb_pytorch_measurements *measurements)
{
    for (size_t i = 0; i < measurements->count; i++) {
        free(measurements->items[i].timeline);
        free(measurements->items[i].counters);
    }
    free(measurements->items);
    memset(measurements, 0, sizeof *measurements);
}

vb_measurement vb_pytorch_measurement_view(const vb_pytorch_measurement *item)
{
    return (vb_measurement){item->timeline, item->timeline_count, item->counters, item->counter_count, 0};
}
