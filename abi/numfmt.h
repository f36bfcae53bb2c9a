/* Numbers for people: 4,227,072 and +1,056,768. */
#ifndef TLM_NUMFMT_H
#define TLM_NUMFMT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Writes v with thousands separators; sign: also print + for positive. */
static inline const char *fmt_int(char *buf, size_t n, int64_t v, int sign) {
    char digits[32];
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    int k = 0;
    do {
        if (k % 4 == 3) digits[k++] = ',';
        digits[k++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    size_t j = 0;
    if (v < 0 && j + 1 < n) buf[j++] = '-';
    else if (sign && v > 0 && j + 1 < n) buf[j++] = '+';
    while (k > 0 && j + 1 < n) buf[j++] = digits[--k];
    buf[j] = '\0';
    return buf;
}

/* The shortest decimal that reads back as the same double (for JSON). */
static inline const char *fmt_real(char *buf, size_t n, double v) {
    for (int digits = 6; digits <= 17; digits++) {
        snprintf(buf, n, "%.*g", digits, v);
        if (strtod(buf, NULL) == v) break;
    }
    return buf;
}

/* The shortest decimal that reads back as the same float (1.4e-45, the
 * least float above 0, where fmt_real gives its double's 17 digits). */
static inline const char *fmt_float(char *buf, size_t n, float v) {
    for (int digits = 1; digits <= 9; digits++) {
        snprintf(buf, n, "%.*g", digits, (double)v);
        if (strtof(buf, NULL) == v) break;
    }
    return buf;
}

#endif
