/* vrambench — allocator specs: "caching" or "caching[max_split_size_mb=256,...]"
 * (moved here from app/runner.c so that the PyTorch plug-in, which sits
 * below app/, parses VRAMBENCH_ALLOCATOR with the same code as the CLI). */
#include "spec.h"

#include "pytorch_conf.h"
#include "base/closest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Keeps a copy of `text` owned by the spec; NULL when out of room or memory. */
static const char *spec_own(vb_allocator_spec *spec, const char *text)
{
    if (spec->string_count == sizeof spec->strings / sizeof spec->strings[0]) return NULL;
    char *copy = strdup(text);
    if (copy) spec->strings[spec->string_count++] = copy;
    return copy;
}

/* Rebuilds "name" or "name[k=v,...]" from the entries. */
static vb_status spec_relabel(vb_allocator_spec *spec)
{
    size_t used = (size_t)snprintf(spec->label, sizeof spec->label, "%s", spec->name);
    for (size_t i = 0; i < spec->entry_count && used < sizeof spec->label; i++)
        used += (size_t)snprintf(spec->label + used, sizeof spec->label - used, "%c%s=%s", i ? ',' : '[',
                                 spec->entries[i].key, spec->entries[i].value);
    if (spec->entry_count && used < sizeof spec->label)
        used += (size_t)snprintf(spec->label + used, sizeof spec->label - used, "]");
    if (used >= sizeof spec->label)
        return vb_error(VB_ERR_INVALID, "allocator spec for '%s' is too long", spec->name);
    return VB_OK;
}

vb_status vb_allocator_spec_set(vb_allocator_spec *spec, const char *key, const char *value)
{
    if (key[0] == '\0') return vb_error(VB_ERR_INVALID, "%s: empty config key", spec->name);
    size_t index = spec->entry_count;
    for (size_t i = 0; i < spec->entry_count; i++)
        if (strcmp(spec->entries[i].key, key) == 0) index = i;
    if (index == VB_SPEC_MAX_ENTRIES)
        return vb_error(VB_ERR_INVALID, "%s: more than %d config options", spec->name, VB_SPEC_MAX_ENTRIES);
    const char *owned_value = spec_own(spec, value);
    const char *owned_key = index < spec->entry_count ? spec->entries[index].key : spec_own(spec, key);
    if (!owned_value || !owned_key)
        return vb_error(VB_ERR_INVALID, "%s: too many config options", spec->name);
    spec->entries[index] = (vb_config_entry){owned_key, owned_value};
    if (index == spec->entry_count) spec->entry_count++;
    return spec_relabel(spec);
}

/* Parses the inside of "[...]" (already cut out, modifiable) into `spec`:
 * KEY=VALUE items split at commas outside brackets (a value may be a
 * bracketed list, e.g. roundup_power2_divisions=[256:1,>:4]). */
static vb_status spec_parse_options(vb_allocator_spec *spec, char *inside, const char *text)
{
    if (inside[0] == '\0')
        return vb_error(VB_ERR_INVALID, "allocator spec '%.*s%s' has empty brackets", VB_SPEC_QUOTED(text));
    for (char *item = inside;;) {
        size_t length = vb_spec_list_item_length(item);
        int last = item[length] == '\0';
        item[length] = '\0';
        vb_config_entry entry;
        if (vb_config_entry_parse(item, &entry) != VB_OK || strpbrk(entry.key, "[]"))
            return vb_error(VB_ERR_INVALID, "allocator spec '%.*s%s': '%.*s%s' is not KEY=VALUE",
                            VB_SPEC_QUOTED(text), VB_SPEC_QUOTED(item));
        for (size_t i = 0; i < spec->entry_count; i++) /* one value each, as for the command's options */
            if (strcmp(spec->entries[i].key, entry.key) == 0)
                return vb_error(VB_ERR_INVALID, "allocator spec '%.*s%s': %s given twice", VB_SPEC_QUOTED(text),
                                entry.key);
        vb_status status = vb_allocator_spec_set(spec, entry.key, entry.value);
        if (status != VB_OK || last) return status;
        item += length + 1;
    }
}

/* "pytorch[CONF]" (or "pytorch", the defaults): PyTorch's own allocator
 * settings, read into the strategy and options they mean
 * (allocators/pytorch_conf.h); the label keeps the user's text. */
static vb_status spec_parse_pytorch(const char *text, vb_allocator_spec *out)
{
    size_t length = strlen(text);
    if (text[7] != '\0' && (text[7] != '[' || text[length - 1] != ']'))
        return vb_error(VB_ERR_INVALID, "allocator spec '%.*s%s' is not pytorch[PYTORCH_ALLOC_CONF]",
                        VB_SPEC_QUOTED(text));
    char *conf = text[7] ? strndup(text + 8, length - 9) : strdup("");
    if (!conf) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    vb_pytorch_conf parsed;
    vb_status status = vb_pytorch_conf_parse(conf, &parsed);
    free(conf);
    if (status != VB_OK) return status;
    snprintf(out->name, sizeof out->name, "%s", parsed.allocator);
    for (size_t i = 0; i < parsed.count && status == VB_OK; i++)
        status = vb_allocator_spec_set(out, parsed.entries[i].key, parsed.entries[i].value);
    if (status == VB_OK && (size_t)snprintf(out->label, sizeof out->label, "%s", text) >= sizeof out->label)
        status = vb_error(VB_ERR_INVALID, "allocator spec '%.*s%s' is too long", VB_SPEC_QUOTED(text));
    if (status != VB_OK) vb_allocator_spec_free(out);
    return status;
}

vb_status vb_allocator_spec_parse(const char *text, vb_allocator_spec *out)
{
    memset(out, 0, sizeof *out);
    size_t name_length = strcspn(text, "[");
    if (name_length == 0) return vb_error(VB_ERR_INVALID, "allocator spec '%.*s%s' has no allocator name",
                                           VB_SPEC_QUOTED(text));
    if (name_length >= sizeof out->name)
        return vb_error(VB_ERR_INVALID, "allocator name in '%.*s%s' is too long", VB_SPEC_QUOTED(text));
    if (name_length == 7 && strncmp(text, "pytorch", 7) == 0) return spec_parse_pytorch(text, out);
    memcpy(out->name, text, name_length);
    if (!vb_allocator_find(out->name)) {
        char names[512];
        vb_allocator_names(names, sizeof names);
        const char *known[64] = {"pytorch"};
        for (size_t i = 0; vb_allocator_registry[i] && i + 2 < sizeof known / sizeof *known; i++)
            known[i + 1] = vb_allocator_registry[i]->name;
        char hint[96];
        return vb_error(VB_ERR_INVALID,
                        "unknown allocator '%s'%s (known: %s, pytorch[CONF], " VB_EXTERNAL_PREFIX "PATH.so, or all)",
                        out->name, vb_did_you_mean(out->name, known, hint, sizeof hint), names);
    }
    vb_status status = spec_relabel(out);
    if (status != VB_OK || text[name_length] == '\0') return status;
    size_t length = strlen(text);
    int depth = 0, balanced = text[length - 1] == ']';
    for (size_t i = name_length; i < length && balanced; i++) {
        depth += (text[i] == '[') - (text[i] == ']');
        balanced = depth > 0 || i == length - 1;
    }
    if (!balanced || depth != 0)
        return vb_error(VB_ERR_INVALID, "allocator spec '%.*s%s' is not NAME[KEY=VALUE,...]", VB_SPEC_QUOTED(text));
    char *inside = strndup(text + name_length + 1, length - name_length - 2);
    if (!inside) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    status = spec_parse_options(out, inside, text);
    free(inside);
    if (status != VB_OK) vb_allocator_spec_free(out);
    return status;
}

vb_config vb_allocator_spec_config(const vb_allocator_spec *spec)
{
    return (vb_config){spec->entries, spec->entry_count};
}

void vb_allocator_spec_free(vb_allocator_spec *spec)
{
    for (size_t i = 0; i < spec->string_count; i++) free(spec->strings[i]);
    spec->string_count = 0;
    spec->entry_count = 0;
}

void vb_allocator_spec_list_free(vb_allocator_spec *specs, size_t count)
{
    for (size_t i = 0; specs && i < count; i++) vb_allocator_spec_free(&specs[i]);
    free(specs);
}

vb_status vb_allocator_spec_list_check(vb_device *dev, const vb_allocator_spec *specs, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        vb_config config = vb_allocator_spec_config(&specs[i]);
        vb_allocator *allocator = NULL;
        vb_status status = vb_allocator_create(specs[i].name, dev, &config, &allocator);
        if (status != VB_OK) return status;
        vb_allocator_destroy(allocator);
    }
    return VB_OK;
}

int vb_allocator_spec_same(const vb_allocator_spec *a, const vb_allocator_spec *b)
{
    if (strcmp(a->label, b->label) == 0) return 1;
    /* pytorch[] and caching run alike but are asked for as different rows: the name as written must match too */
    if (strcspn(a->label, "[") != strcspn(b->label, "[") || strncmp(a->label, b->label, strcspn(a->label, "[")) != 0 ||
        strcmp(a->name, b->name) != 0 || a->entry_count != b->entry_count)
        return 0;
    for (size_t i = 0; i < a->entry_count; i++) {
        size_t j = 0;
        while (j < b->entry_count && strcmp(a->entries[i].key, b->entries[j].key) != 0) j++;
        if (j == b->entry_count || strcmp(a->entries[i].value, b->entries[j].value) != 0) return 0;
    }
    return 1;
}

/* Appends a parsed spec unless the same one is there already. */
static vb_status spec_list_add(vb_allocator_spec **specs, size_t *count, size_t *capacity, const char *text)
{
    vb_allocator_spec spec;
    vb_status status = vb_allocator_spec_parse(text, &spec);
    if (status != VB_OK) return status;
    for (size_t i = 0; i < *count; i++)
        if (vb_allocator_spec_same(&(*specs)[i], &spec)) {
            vb_allocator_spec_free(&spec);
            return VB_OK;
        }
    if (*count == *capacity) {
        size_t grown = *capacity ? *capacity * 2 : 16;
        vb_allocator_spec *more = realloc(*specs, grown * sizeof *more);
        if (!more) {
            vb_allocator_spec_free(&spec);
            return vb_error(VB_ERR_HOST_OOM, "out of host memory");
        }
        *specs = more;
        *capacity = grown;
    }
    (*specs)[(*count)++] = spec;
    return VB_OK;
}

/* Adds one item of a list: "all" or a spec. */
static vb_status spec_list_item(vb_allocator_spec **specs, size_t *count, size_t *capacity, const char *item,
                                const char *text)
{
    if (item[0] == '\0') return vb_error(VB_ERR_INVALID, "empty allocator name in '%.*s%s'", VB_SPEC_QUOTED(text));
    if (strcmp(item, "all") != 0) return spec_list_add(specs, count, capacity, item);
    for (size_t i = 0; vb_allocator_registry[i]; i++) {
        vb_status status = spec_list_add(specs, count, capacity, vb_allocator_registry[i]->name);
        if (status != VB_OK) return status;
    }
    return VB_OK;
}

size_t vb_spec_span(const char *text, char stop)
{
    const char *end = text;
    for (int depth = 0; *end && (*end != stop || depth); end++) depth += (*end == '[') - (*end == ']');
    return (size_t)(end - text);
}

size_t vb_spec_list_item_length(const char *item)
{
    return vb_spec_span(item, ',');
}

vb_status vb_allocator_spec_list_parse(const char *text, vb_allocator_spec **out, size_t *count)
{
    vb_allocator_spec *specs = NULL;
    size_t spec_count = 0, capacity = 0;
    char *copy = strdup(text);
    if (!copy) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    vb_status status = VB_OK;
    int depth = 0;
    char *item = copy;
    for (char *cursor = copy;; cursor++) {
        if (*cursor == '[') depth++;
        if (*cursor == ']' && --depth < 0) break;
        if ((*cursor == ',' && depth == 0) || *cursor == '\0') {
            if (*cursor == '\0' && depth != 0) break;
            int last = *cursor == '\0';
            *cursor = '\0';
            status = spec_list_item(&specs, &spec_count, &capacity, item, text);
            if (status != VB_OK || last) break;
            item = cursor + 1;
        }
    }
    if (status == VB_OK && depth != 0)
        status = vb_error(VB_ERR_INVALID, "unbalanced brackets in allocator list '%.*s%s'", VB_SPEC_QUOTED(text));
    free(copy);
    if (status != VB_OK) {
        vb_allocator_spec_list_free(specs, spec_count);
        return status;
    }
    *out = specs;
    *count = spec_count;
    return VB_OK;
}

