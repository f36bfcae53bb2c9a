/* One-line error messages into a caller's buffer, for the functions of the
 * ABI and runtime layers that report failure by returning false. */
#ifndef TLM_ERRMSG_H
#define TLM_ERRMSG_H

#include <stdbool.h>
#include <stddef.h>

/* Formats into err (n bytes) and returns false, so callers can write
 * `return tlm_fail(err, n, "...", ...);`. */
bool tlm_fail(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
