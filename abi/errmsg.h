/* The runtime's one way to fail (and the ABI layer's): a function that can
 * fail on user input (a file, a flag, memory) returns false (or -1, or
 * NULL) and writes a one-line, human-readable message into a caller-owned
 * tlm_err. Nothing below the command line prints, exits or aborts; the
 * command prints err.msg and picks the exit status. The numeric ops do not
 * fail: their preconditions are documented instead. */
#ifndef TLM_ERRMSG_H
#define TLM_ERRMSG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

/* Room for a path of PATH_MAX bytes and the words around it; a longer
 * message loses its middle, not its end (see tlm_vformat_fit). */
enum { TLM_ERR_MSG_BYTES = 4096 + 512 };

typedef struct tlm_err {
    char msg[TLM_ERR_MSG_BYTES];
} tlm_err;

/* Formats into err (NULL: the message is dropped) and returns false, so
 * callers can write `return tlm_fail(err, "...", ...);`. */
bool tlm_fail(tlm_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* vsnprintf into out[size], except that a message too long for it keeps
 * its beginning and its end with " ... " between: the end is where the
 * reason is ("...: No such file or directory"), which plain truncation
 * cut off behind a long path. */
void tlm_vformat_fit(char *out, size_t size, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));

#endif
