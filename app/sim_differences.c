/* vrambench — the documented GPU-vs-sim differences (sim_differences.h). */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json_input.h"
#include "sim_differences.h"

/* Parents of the binary's directory searched for the file (build/address/vrambench: 2). */
#define SEARCH_LEVELS 3

vb_status vb_sim_differences_locate(const char *given, char *path, size_t capacity)
{
    const char *environment = getenv(VB_SIM_DIFFERENCES_ENV);
    const char *named = given ? given : environment && environment[0] ? environment : NULL;
    if (named) {
        if ((size_t)snprintf(path, capacity, "%s", named) >= capacity)
            return vb_error(VB_ERR_INVALID, "check-sim: the differences file's name is too long");
        return VB_OK;
    }
    char directory[4096];
    ssize_t length = readlink("/proc/self/exe", directory, sizeof directory - 1);
    if (length <= 0)
        return vb_error(VB_ERR_INVALID,
                        "check-sim: cannot tell where this binary is, to find %s; name the file with "
                        "--differences FILE or " VB_SIM_DIFFERENCES_ENV,
                        VB_SIM_DIFFERENCES_PATH);
    directory[length] = '\0';
    char *slash = strrchr(directory, '/');
    if (slash) *slash = '\0'; /* the binary's directory */
    char start[sizeof directory];
    memcpy(start, directory, sizeof start);
    /* make install puts it in PREFIX/share/vrambench, beside the Python package */
    if ((size_t)snprintf(path, capacity, "%s/../share/vrambench/%s", directory, VB_SIM_DIFFERENCES_PATH) < capacity &&
        access(path, F_OK) == 0)
        return VB_OK;
    for (int level = 0; level <= SEARCH_LEVELS; level++) {
        if ((size_t)snprintf(path, capacity, "%s/%s", directory, VB_SIM_DIFFERENCES_PATH) < capacity &&
            access(path, F_OK) == 0)
            return VB_OK;
        slash = strrchr(directory, '/');
        if (!slash || slash == directory) break;
        *slash = '\0';
    }
    return vb_error(VB_ERR_INVALID,
                    "check-sim: no %s in %s, the %d folders above it (the binary's) or ../share/vrambench; name the file with "
                    "--differences FILE or " VB_SIM_DIFFERENCES_ENV,
                    VB_SIM_DIFFERENCES_PATH, start, SEARCH_LEVELS);
}

/* The string `key` of `object`, non-empty; NULL (and an error naming
 * `where`) when it is not one. */
static const char *text_of(json_t *object, const char *key, const char *path, const char *where)
{
    const char *text = json_string_value(json_object_get(object, key));
    if (!text || !text[0]) vb_error(VB_ERR_INVALID, "%s: %s.%s: missing or not a non-empty string", path, where, key);
    return text && text[0] ? text : NULL;
}

/* VB_OK if `object` is an object with exactly the keys `keys` (NULL-ended). */
static vb_status keys_are(json_t *object, const char *const *keys, const char *path, const char *where)
{
    if (!json_is_object(object)) return vb_error(VB_ERR_INVALID, "%s: %s: not an object", path, where);
    const char *key;
    json_t *value;
    json_object_foreach(object, key, value) {
        size_t i = 0;
        while (keys[i] && strcmp(keys[i], key) != 0) i++;
        if (!keys[i]) return vb_error(VB_ERR_INVALID, "%s: %s: unknown key \"%s\"", path, where, key);
    }
    return VB_OK;
}

/* Checks one difference and appends its matches to `out`. */
static vb_status load_difference(json_t *difference, size_t index, const char *path, vb_sim_differences *out)
{
    static const char *const keys[] = {"id", "title", "matches", "measured", "reason", "evidence", NULL};
    static const char *const match_keys[] = {"case", "figure", NULL};
    char where[64];
    snprintf(where, sizeof where, "differences[%zu]", index);
    VB_TRY(keys_are(difference, keys, path, where));
    const char *id = text_of(difference, "id", path, where), *reason = text_of(difference, "reason", path, where);
    if (!id || !reason || !text_of(difference, "title", path, where) || !text_of(difference, "measured", path, where))
        return VB_ERR_INVALID;
    json_t *evidence = json_object_get(difference, "evidence"), *matches = json_object_get(difference, "matches");
    size_t i;
    json_t *item;
    if (!json_is_array(evidence) || json_array_size(evidence) == 0)
        return vb_error(VB_ERR_INVALID, "%s: %s.evidence: not a non-empty array of strings", path, where);
    json_array_foreach(evidence, i, item) if (!json_string_value(item) || !json_string_value(item)[0])
        return vb_error(VB_ERR_INVALID, "%s: %s.evidence[%zu]: not a non-empty string", path, where, i);
    if (!json_is_array(matches) || json_array_size(matches) == 0)
        return vb_error(VB_ERR_INVALID, "%s: %s.matches: not a non-empty array", path, where);
    vb_sim_match *grown = realloc(out->matches, (out->match_count + json_array_size(matches)) * sizeof *grown);
    if (!grown) return vb_error(VB_ERR_HOST_OOM, "out of host memory");
    out->matches = grown;
    json_array_foreach(matches, i, item) {
        char match_where[96];
        snprintf(match_where, sizeof match_where, "%s.matches[%zu]", where, i);
        VB_TRY(keys_are(item, match_keys, path, match_where));
        const char *case_pattern = text_of(item, "case", path, match_where);
        const char *figure_pattern = text_of(item, "figure", path, match_where);
        if (!case_pattern || !figure_pattern) return VB_ERR_INVALID;
        out->matches[out->match_count++] = (vb_sim_match){case_pattern, figure_pattern, id, reason, 0};
    }
    return VB_OK;
}

/* Frees what `out` holds and says, before the message, which file it is. */
static vb_status prefixed(vb_status status, vb_sim_differences *out)
{
    vb_sim_differences_free(out);
    if (status == VB_ERR_HOST_OOM) return status;
    char message[1024];
    snprintf(message, sizeof message, "%s", vb_last_error());
    return vb_error(status, "check-sim: documented differences: %s", message);
}

vb_status vb_sim_differences_load(const char *path, vb_sim_differences *out)
{
    static const char *const keys[] = {"about", "version", "differences", NULL};
    memset(out, 0, sizeof *out);
    int regular;
    vb_status status = vb_json_input_load(path, VB_JSON_INPUT_MAX_BYTES, &out->document, &regular);
    if (status != VB_OK) return prefixed(status, out);
    json_t *differences = json_object_get(out->document, "differences");
    status = keys_are(out->document, keys, path, "the file");
    if (status == VB_OK && !json_is_integer(json_object_get(out->document, "version")))
        status = vb_error(VB_ERR_INVALID, "%s: \"version\" is missing or not an integer", path);
    else if (status == VB_OK && json_integer_value(json_object_get(out->document, "version")) != 1)
        status = vb_error(VB_ERR_INVALID, "%s: version %lld is not supported (this vrambench reads version 1)", path,
                          (long long)json_integer_value(json_object_get(out->document, "version")));
    if (status == VB_OK && !json_is_array(differences))
        status = vb_error(VB_ERR_INVALID, "%s: \"differences\" is missing or not an array", path);
    for (size_t i = 0; status == VB_OK && i < json_array_size(differences); i++) {
        status = load_difference(json_array_get(differences, i), i, path, out);
        const char *id = json_string_value(json_object_get(json_array_get(differences, i), "id"));
        for (size_t j = 0; status == VB_OK && j < i; j++)
            if (strcmp(json_string_value(json_object_get(json_array_get(differences, j), "id")), id) == 0)
                status = vb_error(VB_ERR_INVALID, "%s: differences[%zu]: id \"%s\" is used twice", path, i, id);
    }
    return status == VB_OK ? VB_OK : prefixed(status, out);
}

const vb_sim_match *vb_sim_differences_find(vb_sim_differences *differences, const char *name, const char *figure)
{
    for (size_t i = 0; i < differences->match_count; i++) {
        vb_sim_match *match = &differences->matches[i];
        if (fnmatch(match->case_pattern, name, 0) == 0 && fnmatch(match->figure_pattern, figure, 0) == 0) {
            match->uses++;
            return match;
        }
    }
    return NULL;
}

void vb_sim_differences_free(vb_sim_differences *differences)
{
    free(differences->matches);
    json_decref(differences->document);
    memset(differences, 0, sizeof *differences);
}
