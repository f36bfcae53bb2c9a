#include "stdout_status.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static int first_failure; /* errno of the first failed flush, 0 if none */
static bool said;         /* tlm_stdout_said */

bool tlm_stdout_flush(void) {
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout)) return true;
    /* errno is the flush's; a failure stdio met earlier (a write past its
     * buffer) left only the stream's error flag */
    if (!first_failure) first_failure = errno;
    return false;
}

void tlm_stdout_failed(void) {
    if (!first_failure) first_failure = errno;
}

int tlm_stdout_status(const char *prog, int rc) {
    if (tlm_stdout_flush()) return rc;
    int e = first_failure;
    if (!said)
        fprintf(stderr, "%s: cannot write to standard output: %s\n", prog, e ? strerror(e) : "an earlier write failed");
    return rc ? rc : 1;
}

void tlm_stdout_said(void) { said = true; }
