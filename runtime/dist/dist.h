/* Data-parallel training across processes (`mpirun -np P tlm-run train`):
 * who this process is among the job's ranks, and the few collectives the
 * training loop needs. Built over MPI when configure finds one
 * (dist_mpi.c, grad_chain.c; on GPUs nccl_chain.c; only tlm-run links
 * MPI); without MPI
 * (dist_single.c) a process is always the only rank, and one started by a
 * launcher as one of several refuses to run.
 *
 * MPI is initialised only under a launcher that says there are several
 * processes (launcher.h), so a plain run never pays its start-up.
 *
 * The gradients are never reduced with MPI_Allreduce, whose order of
 * summation MPI does not fix: the trainer's chain (trainer.h) adds them in
 * the order one process would, so every rank count gives the same bits. */
#ifndef TLM_DIST_H
#define TLM_DIST_H

#include <stdbool.h>
#include <stdint.h>

#include "errmsg.h"
#include "trainer.h"

typedef struct tlm_dist {
    int rank, ranks;           /* 0 and 1 for a single process */
    int local_ranks;           /* the job's processes on this machine (1 alone) */
    bool mpi;                  /* MPI was initialised: tlm_dist_finish ends it */
    tlm_grad_chain chain;      /* for tlm_trainer_join when ranks > 1 */
    /* Since the start, in seconds: moving gradients (sends, the broadcast)
     * and waiting on other ranks (for the previous rank's partial sum, the
     * losses, the step's agreement to stop). */
    double comm_seconds, wait_seconds;
    /* Since the start: the gradient buckets this rank added and passed on,
     * and how many of them during the backward (while some gradients were
     * not yet final). */
    long buckets, early_buckets;
    struct tlm_chain_run *run; /* the step's chain between its start and finish */
    /* On a device: the step's chain as queued (grad_chain.c's emulated
     * stand-in, nccl_chain.c) between device_start and device_finish. */
    tlm_device *device_dev;
    void *device_run;
} tlm_dist;

/* Under a launcher, initialises MPI and fills in this rank (mpirun -np 1
 * too: one rank that runs the chain); otherwise one rank. false with a message when the job cannot
 * run (several processes and a build without MPI). */
bool tlm_dist_start(tlm_dist *d, tlm_err *err);
void tlm_dist_finish(tlm_dist *d);

/* On a device: the chain over its memory (NCCL on a GPU; on the emulated
 * device, whose memory is the host's, MPI as the stand-in). Without NCCL
 * the chain has no device_start and tlm_trainer_join refuses. */
bool tlm_dist_use_device(tlm_dist *d, tlm_device *dev, tlm_err *err);

/* The largest of every rank's value (each rank calls it at the same
 * point): the ranks agree to stop on a signal any of them received. */
int tlm_dist_max(tlm_dist *d, int value);

/* all[ranks × n] on rank 0 = every rank's n values, in rank order (a
 * collective: every rank calls it at the same point). */
void tlm_dist_gather(tlm_dist *d, const double *mine, int n, double *all);

/* Compares n values (n at most TLM_DIST_COMPARE_MAX; each rank calls it
 * at the same point) with rank 0's: the first rank whose values differ,
 * and in *item the first of them that does, or -1 when every rank's equal
 * rank 0's. Every rank gets the same answer. */
#define TLM_DIST_COMPARE_MAX 64
int tlm_dist_first_mismatch(tlm_dist *d, const uint64_t *mine, int n, int *item);

/* Every rank's status and first message line, to rank 0, which picks the
 * job's: its own failure, else the first failed rank's message with the
 * rank named ("rank 2: ..."), printed once. Returns the status every rank
 * exits with (0 when none failed). A message line is at most
 * TLM_DIST_MESSAGE_BYTES with its NUL: a command's error line, which holds
 * an err.msg and the words around it. */
enum { TLM_DIST_MESSAGE_BYTES = TLM_ERR_MSG_BYTES + 1024 };
int tlm_dist_agree_status(tlm_dist *d, int status, const char *message);

/* Stops every rank of the job at once (a failure only this rank saw, after
 * its message): MPI_Abort, or exit without MPI. */
_Noreturn void tlm_dist_abort(tlm_dist *d, int status);

#endif
