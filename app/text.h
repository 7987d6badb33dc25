/* vrambench — text from outside (trace marker names, file names, specs):
 * is it UTF-8, and making it so. A name that reaches results JSON or a
 * terminal goes through here first. */
#ifndef VB_TEXT_H
#define VB_TEXT_H

#include <stddef.h>

/* The length of the UTF-8 sequence at `bytes` (1 to 4), or 0 when it is
 * not a valid one (overlong, surrogate, cut short by `available`). */
size_t vb_utf8_sequence(const char *bytes, size_t available);

/* 1 if `length` bytes are valid UTF-8 (and, unless `controls_allowed`,
 * hold no control character: C0, DEL, C1). */
int vb_text_valid(const char *bytes, size_t length, int controls_allowed);

/* Replaces, in place, every byte of `text` that is not part of a valid
 * UTF-8 sequence (and, with `controls_too`, every control character) with
 * '?': a name from the user made safe for JSON and a terminal. */
void vb_text_sanitize(char *text, int controls_too);

#endif
