/* vrambench — "did you mean": the known name nearest a mistyped one. */
#ifndef VB_CLOSEST_H
#define VB_CLOSEST_H

#include <stddef.h>

/* The edit distance of `a` and `b` (optimal string alignment: insertions,
 * deletions, substitutions and swaps of two neighbours each count 1; letters
 * compared without case). */
size_t vb_edit_distance(const char *a, const char *b);

/* The entry of `known` (NULL-terminated) nearest `name` when it is near
 * enough to be a slip of the keyboard: at most a third of `name`'s length
 * away (at least 1, at most 3 edits), or a name that `name` begins (at least
 * 3 letters: "view" for "views"). The first of equally near ones; NULL when
 * none is near, or `name` is itself known. */
const char *vb_closest_name(const char *name, const char *const *known);

/* "; did you mean NEAREST?" in `out` (vb_closest_name), or "" when no
 * known name is near: the tail of an "unknown NAME" message. Returns `out`. */
const char *vb_did_you_mean(const char *name, const char *const *known, char *out, size_t capacity);

/* 1 when `name` is one of `known` (NULL-terminated), else 0. */
int vb_name_known(const char *name, const char *const *known);

#endif
