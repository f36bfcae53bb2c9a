/* dist.h without MPI (configure found none, or -DTLM_MPI=OFF): one rank.
 * Started by a launcher as one of several processes, it refuses: P copies
 * training the same model alone would each overwrite the others'
 * checkpoint. */
#include "dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher.h"

bool tlm_dist_start(tlm_dist *d, tlm_err *err) {
    memset(d, 0, sizeof *d);
    d->ranks = d->local_ranks = 1;
    const char *name = NULL;
    int size = tlm_launcher_size(&name);
    if (size > 1 || size == 0) {
        char count[16] = "several";
        if (size > 1) snprintf(count, sizeof count, "%d", size);
        return tlm_fail(err,
                        "started as one of %s processes (%s) but this tlm-run was built without MPI: install an MPI "
                        "(libopenmpi-dev) and rebuild, or run a single process",
                        count, name);
    }
    return true;
}

void tlm_dist_finish(tlm_dist *d) { (void)d; }

bool tlm_dist_use_device(tlm_dist *d, tlm_device *dev, tlm_err *err) {
    (void)d;
    (void)dev;
    (void)err;
    return true;
}

int tlm_dist_max(tlm_dist *d, int value) {
    (void)d;
    return value;
}

void tlm_dist_gather(tlm_dist *d, const double *mine, int n, double *all) {
    (void)d;
    if (all) memcpy(all, mine, (size_t)n * sizeof *all);
}

int tlm_dist_first_mismatch(tlm_dist *d, const uint64_t *mine, int n, int *item) {
    (void)d;
    (void)mine;
    (void)n;
    (void)item;
    return -1;
}

int tlm_dist_agree_status(tlm_dist *d, int status, const char *message) {
    (void)d;
    (void)message;
    return status;
}

_Noreturn void tlm_dist_abort(tlm_dist *d, int status) {
    (void)d;
    exit(status);
}
