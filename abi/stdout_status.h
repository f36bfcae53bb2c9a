/* The last word on a program's standard output. A write to stdout can fail
 * (a full disk, /dev/full, a reader that went away), and stdio keeps the
 * failure to itself until the stream is flushed: a report redirected to a
 * full disk was lost while the program said it succeeded (exit 0). Both
 * programs' main ends here. */
#ifndef TLM_STDOUT_STATUS_H
#define TLM_STDOUT_STATUS_H

#include <stdbool.h>

/* Flushes stdout: false once a write has failed, whose reason (errno) the
 * first failure records for tlm_stdout_status. A command that writes as it
 * goes (sample) stops at the first false. */
bool tlm_stdout_flush(void);

/* A write to stdout just failed (fwrite wrote short): records its errno
 * as the first failure's reason, which a later flush may no longer know
 * (stdio drops what it could not write). */
void tlm_stdout_failed(void);

/* Flushes stdout. rc as it was when everything reached it; else a line on
 * stderr ("PROG: cannot write to standard output: REASON", unless the
 * command said it: tlm_stdout_said) and rc, or 1 where rc was 0. */
int tlm_stdout_status(const char *prog, int rc);

/* The command has said on stderr, in its own words, that stdout failed
 * (train names the checkpoint it stopped with): no second line. */
void tlm_stdout_said(void);

#endif
