/* vrambench — "did you mean": the known name closest to a mistyped one. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Levenshtein distance of a and b (ASCII), at most 64 characters each. */
static size_t distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64) return (size_t)-1;
    size_t row[65];
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diagonal = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t above = row[j];
            size_t best = diagonal + (a[i - 1] != b[j - 1]);
            if (above + 1 < best) best = above + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diagonal = above;
        }
    }
    return row[lb];
}

const char *vb_cli_closest(const char *name, const char *const *known, size_t known_count)
{
    const char *best = NULL;
    size_t best_distance = (size_t)-1, length = strlen(name);
    for (size_t i = 0; i < known_count; i++) {
        size_t d = distance(name, known[i]);
        if (d < best_distance) best_distance = d, best = known[i];
    }
    /* Close: a third of the name's letters or fewer changed (at least 1, at most 3). */
    size_t allowed = length / 3 < 1 ? 1 : length / 3 > 3 ? 3 : length / 3;
    return best && best_distance <= allowed ? best : NULL;
}
