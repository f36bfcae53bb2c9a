/* One display unit of source text: a well-formed UTF-8 sequence, or a single
 * byte that is not part of one. Columns in diagnostics count these units, so
 * carets line up under any text, valid or not. */
#ifndef TLM_UTF8_H
#define TLM_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes in the unit at p (1..4, never past end); *cp gets the code point, or
 * -1 for a stray byte. */
static inline size_t utf8_unit(const char *p, const char *end, int32_t *cp) {
    const unsigned char *s = (const unsigned char *)p;
    size_t avail = (size_t)(end - p);
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = (int32_t)c;
        return 1;
    }
    size_t n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
    if (n == 0 || c > 0xF4 || avail < n) {
        *cp = -1;
        return 1;
    }
    uint32_t v = c & (0xFF >> (n + 1));
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) {
            *cp = -1;
            return 1;
        }
        v = (v << 6) | (s[i] & 0x3F);
    }
    /* Reject overlong forms, surrogates and values past U+10FFFF. */
    if ((n == 3 && v < 0x800) || (n == 4 && (v < 0x10000 || v > 0x10FFFF)) || (v >= 0xD800 && v <= 0xDFFF)) {
        *cp = -1;
        return 1;
    }
    *cp = (int32_t)v;
    return n;
}

/* The bidirectional embedding, override and isolate controls (U+202A..U+202E,
 * U+2066..U+2069): inside a comment or a string they can make a line display
 * in another order than it compiles ("Trojan Source", CVE-2021-42574). */
static inline bool utf8_is_bidi_control(int32_t cp) {
    return (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

/* Code points (cp >= 0) that a diagnostic must not write to a terminal as
 * they are: C0 and C1 controls move the cursor or start escape sequences, and
 * the invisible format characters (the Arabic letter mark, zero-width
 * characters and direction marks, line and paragraph separators, bidi
 * controls, word joiners and the byte-order mark) hide themselves or reorder
 * what follows. */
static inline bool utf8_is_unprintable(int32_t cp) {
    return cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F) || cp == 0x061C || (cp >= 0x200B && cp <= 0x200F) ||
           (cp >= 0x2028 && cp <= 0x202E) || (cp >= 0x2060 && cp <= 0x2069) || cp == 0xFEFF;
}

#endif
