/* codegen's one way to fail. A function that can fail takes `char **err`
 * and returns false after codegen_fail has set *err to a malloc'd message
 * (the caller frees it). err may be NULL when the caller wants no message.
 * If the message itself cannot be allocated, *err is left NULL: callers
 * print a generic line then (codegen.h). */
#ifndef TLM_CODEGEN_ERROR_H
#define TLM_CODEGEN_ERROR_H

#include <stdbool.h>

/* Always returns false, so that `return codegen_fail(err, ...);` reads as
 * the failure it is. */
__attribute__((format(printf, 2, 3))) bool codegen_fail(char **err, const char *fmt, ...);

#endif
