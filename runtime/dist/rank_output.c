#include "rank_output.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int saved_stderr = -1; /* the real stderr while it is held back */
static FILE *held;            /* what was written to it meanwhile */

void rank_output_quiet(int rank) {
    if (rank == 0) return;
    fflush(stdout);
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null >= 0) {
        dup2(null, STDOUT_FILENO);
        close(null);
    }
    fflush(stderr);
    if (!(held = tmpfile())) return; /* nowhere to hold it: let it through */
    saved_stderr = dup(STDERR_FILENO);
    if (saved_stderr < 0 || dup2(fileno(held), STDERR_FILENO) < 0) {
        fclose(held);
        held = NULL;
    }
}

void rank_output_release(char *msg, size_t n) {
    msg[0] = '\0';
    if (!held) return;
    fflush(stderr);
    dup2(saved_stderr, STDERR_FILENO);
    close(saved_stderr);
    saved_stderr = -1;
    rewind(held);
    if (fgets(msg, (int)n, held)) msg[strcspn(msg, "\n")] = '\0';
    fclose(held);
    held = NULL;
}
