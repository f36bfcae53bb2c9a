/* Code point classes (binary search in the generated ranges, with a table
 * for the Basic Multilingual Plane built once) and UTF-8 decoding. */
#include "unicode.h"

#include <pthread.h>

static uint8_t bmp_class[0x10000];
static pthread_once_t bmp_once = PTHREAD_ONCE_INIT;

static int in_ranges(const tok_range *r, int n, uint32_t cp) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < r[mid].lo) hi = mid - 1;
        else if (cp > r[mid].hi) lo = mid + 1;
        else return 1;
    }
    return 0;
}

static int is_white_space(uint32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
           cp == 0x3000;
}

static int slow_class(uint32_t cp) {
    if (is_white_space(cp)) return TOK_SPACE;
    if (in_ranges(tok_letter_ranges, tok_letter_ranges_count, cp)) return TOK_LETTER;
    if (in_ranges(tok_number_ranges, tok_number_ranges_count, cp)) return TOK_NUMBER;
    return TOK_OTHER;
}

static void build_bmp(void) {
    for (uint32_t cp = 0; cp < 0x10000; cp++) bmp_class[cp] = (uint8_t)slow_class(cp);
}

int tok_class(uint32_t cp) {
    if (cp < 0x10000) {
        pthread_once(&bmp_once, build_bmp);
        return bmp_class[cp];
    }
    return cp <= 0x10FFFF ? slow_class(cp) : TOK_OTHER;
}

int tok_utf8_next(const uint8_t *s, size_t n, uint32_t *cp) {
    uint8_t b = s[0];
    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    int len;
    uint32_t v, min;
    if (b >= 0xC2 && b <= 0xDF) len = 2, v = b & 0x1F, min = 0x80;
    else if (b >= 0xE0 && b <= 0xEF) len = 3, v = b & 0x0F, min = 0x800;
    else if (b >= 0xF0 && b <= 0xF4) len = 4, v = b & 0x07, min = 0x10000;
    else {
        *cp = 0xFFFFFFFFu;
        return 1;
    }
    if ((size_t)len > n) {
        *cp = 0xFFFFFFFFu;
        return 1;
    }
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) {
            *cp = 0xFFFFFFFFu;
            return 1;
        }
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
        *cp = 0xFFFFFFFFu;
        return 1;
    }
    *cp = v;
    return len;
}
