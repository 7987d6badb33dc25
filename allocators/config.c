/* vrambench — key=value configuration parsed against an allocator's options. */
#include "allocator.h"

#include "base/closest.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parses "KEY=VALUE" in place. */
vb_status vb_config_entry_parse(char *text, vb_config_entry *out)
{
    char *equals = strchr(text, '=');
    if (!equals || equals == text)
        return vb_error(VB_ERR_INVALID, "config '%s' is not KEY=VALUE", text);
    *equals = '\0';
    out->key = text;
    out->value = equals + 1;
    return VB_OK;
}

/* Parses a whole unsigned number ("max" is UINT64_MAX); 0 on success. */
static int parse_u64(const char *text, uint64_t *out)
{
    if (strcmp(text, "max") == 0) {
        *out = UINT64_MAX;
        return 0;
    }
    /* Decimal, or hex after 0x: never octal, as strtoull's base 0 would
     * read "010". The digit checks keep out what strtoull would skip or
     * accept silently: blanks, signs, a bare "0x". */
    int base = 10;
    if (text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
        base = 16;
        text += 2;
        if (!isxdigit((unsigned char)text[0])) return -1;
    } else if (!isdigit((unsigned char)text[0])) {
        return -1;
    }
    char *end = NULL;
    errno = 0;
    unsigned long long value = strtoull(text, &end, base);
    if (errno != 0 || *end != '\0') return -1;
    *out = (uint64_t)value;
    return 0;
}

/* Parses a whole finite real number; 0 on success. */
static int parse_double(const char *text, double *out)
{
    if (text[0] == '\0' || isspace((unsigned char)text[0])) return -1;
    char *end = NULL;
    errno = 0;
    double value = strtod(text, &end);
    if (errno != 0 || *end != '\0' || !isfinite(value)) return -1;
    *out = value;
    return 0;
}

/* Reads a whole decimal number at *cursor, moving past it; -1 when there
 * is none or it overflows. */
static int read_whole(const char **cursor, uint64_t *out)
{
    const char *text = *cursor;
    if (*text < '0' || *text > '9') return -1;
    uint64_t value = 0;
    for (; *text >= '0' && *text <= '9'; text++) {
        if (value > (UINT64_MAX - (uint64_t)(*text - '0')) / 10) return -1;
        value = value * 10 + (uint64_t)(*text - '0');
    }
    *cursor = text;
    *out = value;
    return 0;
}

static int is_power_of_two(uint64_t value)
{
    return value && !(value & (value - 1));
}

/* The per-interval form "[B:D,...,>:D]" after its '[' (PyTorch's
 * parseRoundUpPower2Divisions): the first boundary B (MiB, a power of two)
 * also sets every interval below it; ">" sets those after the last one. */
static int parse_roundup_ranges(const char *text, uint64_t *table)
{
    size_t last_index = 0;
    int first = 1;
    while (*text != ']') {
        uint64_t boundary = 0, divisions;
        int rest = *text == '>';
        if (rest) text++;
        else if (read_whole(&text, &boundary) != 0 || !is_power_of_two(boundary)) return -1;
        if (*text++ != ':' || read_whole(&text, &divisions) != 0) return -1;
        if (divisions != 0 && !is_power_of_two(divisions)) return -1;
        if (rest) {
            for (size_t i = last_index + 1; i < VB_DIVISION_INTERVALS; i++) table[i] = divisions;
        } else {
            size_t index = (size_t)(63 - __builtin_clzll(boundary));
            if (index >= VB_DIVISION_INTERVALS) index = VB_DIVISION_INTERVALS - 1;
            if (first)
                for (size_t i = 0; i < index; i++) table[i] = divisions;
            first = 0;
            table[index] = divisions;
            last_index = index;
        }
        if (*text == ',') text++;
        else if (*text != ']') return -1;
    }
    return text[1] == '\0' ? 0 : -1;
}

/* Parses a VB_OPTION_DIVISIONS value into `field`; -1 when malformed. */
static int parse_divisions(const char *value, void *field)
{
    uint64_t table[VB_DIVISION_INTERVALS] = {0}, single = 0;
    const char *cursor = value;
    int bad = value[0] == '[' ? parse_roundup_ranges(value + 1, table)
                              : read_whole(&cursor, &single) != 0 || *cursor != '\0' ||
                                    (single != 0 && !is_power_of_two(single));
    if (bad) return -1;
    if (value[0] != '[')
        for (size_t i = 0; i < VB_DIVISION_INTERVALS; i++) table[i] = single;
    memcpy(field, table, sizeof table);
    return 0;
}

/* Lists the keys of `options` into `out`, comma-separated. */
static void list_keys(const vb_option *options, size_t count, char *out, size_t capacity)
{
    size_t used = 0;
    out[0] = '\0';
    if (count == 0) snprintf(out, capacity, "none");
    for (size_t i = 0; i < count && used < capacity; i++)
        used += (size_t)snprintf(out + used, capacity - used, "%s%s", i ? ", " : "", options[i].key);
}

/* Applies one entry to the settings struct. */
static vb_status apply_entry(const vb_config_entry *entry, const vb_option *option, void *settings,
                             const char *allocator_name)
{
    char *field = (char *)settings + option->offset;
    if (option->type == VB_OPTION_STRING) {
        const char *value = entry->value;
        memcpy(field, &value, sizeof value);
        return VB_OK;
    }
    if (option->type == VB_OPTION_DIVISIONS) {
        if (parse_divisions(entry->value, field) != 0)
            return vb_error(VB_ERR_INVALID,
                            "%s: bad value '%s' for %s (0 or a power of two, or per size interval as "
                            "[256:1,512:2,>:4]: powers of two in MiB, each value 0 or a power of two)",
                            allocator_name, entry->value, option->key);
        return VB_OK;
    }
    if (option->type == VB_OPTION_U64) {
        uint64_t value;
        if (parse_u64(entry->value, &value) != 0 || (double)value < option->min ||
            (double)value > option->max) {
            /* A maximum of UINT64_MAX (as a double, 2^64) is "max", never a number past it. */
            char range[96];
            if (option->max >= 18446744073709551615.0)
                snprintf(range, sizeof range, "a whole number of at least %.0f, or max", option->min);
            else snprintf(range, sizeof range, "a whole number from %.0f to %.0f", option->min, option->max);
            return vb_error(VB_ERR_INVALID, "%s: bad value '%s' for %s (%s; %s)", allocator_name, entry->value,
                            option->key, range, option->help);
        }
        memcpy(field, &value, sizeof value);
    } else {
        double value;
        if (parse_double(entry->value, &value) != 0 || value < option->min || value > option->max)
            return vb_error(VB_ERR_INVALID, "%s: bad value '%s' for %s (a number from %g to %g; %s)",
                            allocator_name, entry->value, option->key, option->min, option->max,
                            option->help);
        memcpy(field, &value, sizeof value);
    }
    return VB_OK;
}

/* Applies every entry of `config`, or fails on the first bad one. */
vb_status vb_config_apply(const vb_config *config, const vb_option *options, size_t option_count,
                          void *settings, const char *allocator_name)
{
    for (size_t i = 0; i < config->count; i++) {
        const vb_config_entry *entry = &config->entries[i];
        const vb_option *option = NULL;
        for (size_t j = 0; j < option_count; j++)
            if (strcmp(options[j].key, entry->key) == 0) option = &options[j];
        if (!option) {
            char keys[512];
            list_keys(options, option_count, keys, sizeof keys);
            const char *known[64] = {NULL};
            for (size_t j = 0; j < option_count && j + 1 < sizeof known / sizeof *known; j++) known[j] = options[j].key;
            char hint[96];
            return vb_error(VB_ERR_INVALID, "%s: unknown config key '%s'%s (known: %s)", allocator_name, entry->key,
                            vb_did_you_mean(entry->key, known, hint, sizeof hint), keys);
        }
        vb_status status = apply_entry(entry, option, settings, allocator_name);
        if (status != VB_OK) return status;
    }
    return VB_OK;
}
