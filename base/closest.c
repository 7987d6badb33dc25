/* vrambench — "did you mean" (see closest.h). */
#include "closest.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Names longer than this are compared on their first NAME_LIMIT letters. */
#define NAME_LIMIT 64

size_t vb_edit_distance(const char *a, const char *b)
{
    size_t n = strnlen(a, NAME_LIMIT), m = strnlen(b, NAME_LIMIT);
    /* Three rows of the (n + 1) x (m + 1) table: two back, one back, this one. */
    size_t rows[3][NAME_LIMIT + 1];
    for (size_t j = 0; j <= m; j++) rows[1][j] = j;
    for (size_t i = 1; i <= n; i++) {
        size_t *row = rows[(i + 1) % 3], *previous = rows[i % 3], *before = rows[(i + 2) % 3];
        row[0] = i;
        for (size_t j = 1; j <= m; j++) {
            int ca = tolower((unsigned char)a[i - 1]), cb = tolower((unsigned char)b[j - 1]);
            size_t best = previous[j - 1] + (ca != cb);
            if (previous[j] + 1 < best) best = previous[j] + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) && tolower((unsigned char)a[i - 2]) == cb &&
                before[j - 2] + 1 < best)
                best = before[j - 2] + 1;
            row[j] = best;
        }
    }
    return rows[(n + 1) % 3][m];
}

const char *vb_closest_name(const char *name, const char *const *known)
{
    size_t length = strlen(name);
    size_t limit = length / 3;
    if (limit < 1) limit = 1;
    if (limit > 3) limit = 3;
    const char *best = NULL;
    size_t best_distance = limit + 1;
    for (size_t i = 0; known[i]; i++) {
        if (strcmp(known[i], name) == 0) return NULL;
        size_t distance = vb_edit_distance(name, known[i]);
        if (length >= 3 && strncasecmp(known[i], name, length) == 0 && distance > 1) distance = limit;
        if (distance < best_distance) {
            best = known[i];
            best_distance = distance;
        }
    }
    return best;
}

int vb_name_known(const char *name, const char *const *known)
{
    for (size_t i = 0; known[i]; i++)
        if (strcmp(known[i], name) == 0) return 1;
    return 0;
}

const char *vb_did_you_mean(const char *name, const char *const *known, char *out, size_t capacity)
{
    const char *nearest = vb_closest_name(name, known);
    snprintf(out, capacity, "%s%s%s", nearest ? "; did you mean " : "", nearest ? nearest : "", nearest ? "?" : "");
    return out;
}
