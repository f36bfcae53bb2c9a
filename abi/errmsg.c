#include "errmsg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tlm_vformat_fit(char *out, size_t size, const char *fmt, va_list ap) {
    if (size == 0) return;
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(out, size, fmt, ap);
    static const char gap[] = " ... ";
    const size_t ngap = sizeof gap - 1;
    if (n >= 0 && (size_t)n >= size && size > 3 * ngap) {
        char *whole = malloc((size_t)n + 1);
        if (whole) {
            vsnprintf(whole, (size_t)n + 1, fmt, again);
            /* A third of the room for the end: the reason and what it is about. */
            size_t tail = (size - 1 - ngap) / 3, head = size - 1 - ngap - tail;
            /* Cut between UTF-8 characters, not inside one. */
            while (head > 0 && ((unsigned char)whole[head] & 0xC0) == 0x80) head--;
            while (tail > 0 && ((unsigned char)whole[(size_t)n - tail] & 0xC0) == 0x80) tail--;
            memcpy(out, whole, head);
            memcpy(out + head, gap, ngap);
            memcpy(out + head + ngap, whole + (size_t)n - tail, tail + 1);
            free(whole);
        }
    }
    va_end(again);
}

bool tlm_fail(tlm_err *err, const char *fmt, ...) {
    if (!err) return false;
    va_list ap;
    va_start(ap, fmt);
    tlm_vformat_fit(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return false;
}
