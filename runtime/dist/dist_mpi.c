/* dist.h over MPI: initialised only under a launcher with several
 * processes; MPI's default error handler (errors are fatal) ends the whole
 * job on a failed transfer, and mpirun ends it when a rank dies. */
#include "dist.h"

#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grad_chain.h"
#include "launcher.h"
#include "profile.h"
#ifdef TLM_HAVE_NCCL
#include "nccl_chain.h"
#endif

bool tlm_dist_start(tlm_dist *d, tlm_err *err) {
    memset(d, 0, sizeof *d);
    d->ranks = d->local_ranks = 1;
    if (tlm_launcher_size(NULL) == -1) return true;
    /* The OpenMP threads of the ops never call MPI: FUNNELED is enough. */
    int provided;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return tlm_fail(err, "MPI_Init_thread failed");
    d->mpi = true;
    MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d->ranks);
    /* A launcher that says several processes where MPI sees one (another
     * MPI's mpiexec, variables left from a job) would have each process
     * train the whole batch alone, unaware of the others. */
    const char *name = NULL;
    int said = tlm_launcher_size(&name);
    if (said > 1 && d->ranks == 1) {
        MPI_Finalize();
        d->mpi = false;
        char names[200];
        tlm_launcher_names(names, sizeof names);
        return tlm_fail(err,
                        "started as one of %d processes (%s) but MPI sees this one alone: launch with the mpirun of "
                        "the MPI this tlm-run was built with, or unset %s to run one process",
                        said, name, names);
    }
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &d->local_ranks);
    MPI_Comm_free(&node);
    tlm_grad_chain_init(&d->chain, d);
    return true;
}

bool tlm_dist_use_device(tlm_dist *d, tlm_device *dev, tlm_err *err) {
    if (!d->mpi) return true;
    if (tlm_device_get_info(dev)->emulated) {
        tlm_grad_chain_emulated(&d->chain);
        return true;
    }
#ifdef TLM_HAVE_NCCL
    return tlm_nccl_chain_open(&d->chain, d, err);
#else
    (void)err;
    return true;
#endif
}

void tlm_dist_finish(tlm_dist *d) {
#ifdef TLM_HAVE_NCCL
    tlm_nccl_chain_close();
#endif
    if (d->mpi) MPI_Finalize();
    d->mpi = false;
}

int tlm_dist_max(tlm_dist *d, int value) {
    if (d->ranks < 2) return value;
    double t0 = tlm_profile_clock();
    int all;
    MPI_Allreduce(&value, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    d->wait_seconds += tlm_profile_clock() - t0;
    return all;
}

void tlm_dist_gather(tlm_dist *d, const double *mine, int n, double *all) {
    if (d->ranks < 2) {
        if (all) memcpy(all, mine, (size_t)n * sizeof *all);
    } else MPI_Gather(mine, n, MPI_DOUBLE, all, n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
}

int tlm_dist_first_mismatch(tlm_dist *d, const uint64_t *mine, int n, int *item) {
    if (d->ranks < 2) return -1;
    uint64_t root[TLM_DIST_COMPARE_MAX];
    memcpy(root, mine, (size_t)n * sizeof *root);
    MPI_Bcast(root, n, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    /* rank × n + item of this rank's first difference; the smallest wins */
    int differs = INT_MAX, first;
    for (int i = 0; i < n && differs == INT_MAX; i++)
        if (mine[i] != root[i]) differs = d->rank * n + i;
    MPI_Allreduce(&differs, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first == INT_MAX) return -1;
    *item = first % n;
    return first / n;
}

#define MESSAGE_BYTES TLM_DIST_MESSAGE_BYTES

int tlm_dist_agree_status(tlm_dist *d, int status, const char *message) {
    if (d->ranks < 2) return status;
    int worst = tlm_dist_max(d, status);
    if (!worst) return 0;
    /* Rank 0 told its own failure already; otherwise it tells the first
     * failed rank's, which that rank held back. */
    char mine[MESSAGE_BYTES];
    snprintf(mine, sizeof mine, "%s", status ? message : "");
    int *statuses = d->rank == 0 ? calloc((size_t)d->ranks, sizeof *statuses) : NULL;
    char *messages = d->rank == 0 ? calloc((size_t)d->ranks, MESSAGE_BYTES) : NULL;
    MPI_Gather(&status, 1, MPI_INT, statuses, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Gather(mine, MESSAGE_BYTES, MPI_CHAR, messages, MESSAGE_BYTES, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (d->rank == 0 && statuses && messages && !status)
        for (int r = 1; r < d->ranks; r++) {
            if (!statuses[r]) continue;
            const char *m = messages + (size_t)r * MESSAGE_BYTES;
            fprintf(stderr, "rank %d of %d: %s\n", r, d->ranks, *m ? m : "failed to start");
            break;
        }
    free(statuses);
    free(messages);
    return status ? status : worst;
}

_Noreturn void tlm_dist_abort(tlm_dist *d, int status) {
    fflush(stdout);
    fflush(stderr);
    if (d->mpi) MPI_Abort(MPI_COMM_WORLD, status);
    exit(status);
}
