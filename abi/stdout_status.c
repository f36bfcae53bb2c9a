#include "stdout_status.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int tlm_stdout_status(const char *prog, int rc) {
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout)) return rc;
    /* errno is the flush's; a failure stdio met earlier left only the
     * stream's error flag */
    int e = errno;
    fprintf(stderr, "%s: cannot write to standard output: %s\n", prog, e ? strerror(e) : "an earlier write failed");
    return rc ? rc : 1;
}
