#include "errmsg.h"

#include <stdarg.h>
#include <stdio.h>

bool tlm_fail(tlm_err *err, const char *fmt, ...) {
    if (!err) return false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return false;
}
