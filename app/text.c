/* vrambench — UTF-8 checks and sanitizing (see text.h). */
#include "text.h"

#include <string.h>

size_t vb_utf8_sequence(const char *bytes, size_t available)
{
    const unsigned char *b = (const unsigned char *)bytes;
    if (available == 0) return 0;
    if (b[0] < 0x80) return 1;
    size_t length;
    unsigned min;
    unsigned code;
    if (b[0] >= 0xC2 && b[0] <= 0xDF) length = 2, code = b[0] & 0x1F, min = 0x80;
    else if (b[0] >= 0xE0 && b[0] <= 0xEF) length = 3, code = b[0] & 0x0F, min = 0x800;
    else if (b[0] >= 0xF0 && b[0] <= 0xF4) length = 4, code = b[0] & 0x07, min = 0x10000;
    else return 0;
    if (length > available) return 0;
    for (size_t i = 1; i < length; i++) {
        if ((b[i] & 0xC0) != 0x80) return 0;
        code = code << 6 | (b[i] & 0x3F);
    }
    /* overlong forms, UTF-16 surrogates and code points past U+10FFFF are not UTF-8 */
    if (code < min || (code >= 0xD800 && code <= 0xDFFF) || code > 0x10FFFF) return 0;
    return length;
}

/* 1 if the valid UTF-8 sequence of `good` bytes at `bytes` is a control
 * character: C0, DEL, or C1 (U+0080..U+009F, which terminals read as
 * escape sequences too: U+009B is CSI). */
static int is_control(const char *bytes, size_t good)
{
    unsigned char c = (unsigned char)bytes[0];
    if (good == 1) return c < 0x20 || c == 0x7F;
    return good == 2 && c == 0xC2 && (unsigned char)bytes[1] <= 0x9F;
}

int vb_text_valid(const char *bytes, size_t length, int controls_allowed)
{
    for (size_t at = 0; at < length;) {
        size_t good = vb_utf8_sequence(bytes + at, length - at);
        if (good == 0) return 0;
        if (!controls_allowed && is_control(bytes + at, good)) return 0;
        at += good;
    }
    return 1;
}

void vb_text_sanitize(char *text, int controls_too)
{
    size_t length = strlen(text);
    for (size_t at = 0; at < length;) {
        size_t good = vb_utf8_sequence(text + at, length - at);
        if (good == 0) text[at++] = '?';
        else if (controls_too && is_control(text + at, good)) memset(text + at, '?', good), at += good;
        else at += good;
    }
}
