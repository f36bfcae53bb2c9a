/* Error reporting for the runtime: functions that can fail on user input
 * (files, data, formats) return 0 on success and -1 on failure, and write a
 * human-readable message into a caller-owned tlm_err. They never abort.
 * The numeric ops do not fail: their preconditions are documented instead. */
#ifndef TLM_RT_ERROR_H
#define TLM_RT_ERROR_H

#include <stddef.h>

typedef struct tlm_err {
    char msg[512];
} tlm_err;

/* Formats a message into err (err may be NULL: the message is dropped). */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void tlm_err_set(tlm_err *err, const char *fmt, ...);

#endif
