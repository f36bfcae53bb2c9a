#include "errmsg.h"

#include <stdarg.h>
#include <stdio.h>

bool tlm_fail(char *err, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return false;
}
