/* The runtime's one way to fail (and the ABI layer's): a function that can
 * fail on user input (a file, a flag, memory) returns false (or -1, or
 * NULL) and writes a one-line, human-readable message into a caller-owned
 * tlm_err. Nothing below the command line prints, exits or aborts; the
 * command prints err.msg and picks the exit status. The numeric ops do not
 * fail: their preconditions are documented instead. */
#ifndef TLM_ERRMSG_H
#define TLM_ERRMSG_H

#include <stdbool.h>
#include <stddef.h>

typedef struct tlm_err {
    char msg[512];
} tlm_err;

/* Formats into err (NULL: the message is dropped) and returns false, so
 * callers can write `return tlm_fail(err, "...", ...);`. */
bool tlm_fail(tlm_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
