#include "grad_chain.h"

#include <limits.h>
#include <stdint.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile.h"

static void gather_losses(void *ctx, const double *mine, int a, double *all) {
    tlm_dist *d = ctx;
    (void)mine; /* already in place: all + rank * a */
    double t0 = tlm_profile_clock();
    MPI_Allgather(MPI_IN_PLACE, a, MPI_DOUBLE, all, a, MPI_DOUBLE, MPI_COMM_WORLD);
    d->wait_seconds += tlm_profile_clock() - t0;
}

/* sum += g over n floats: the host's addition, or the device's. */
typedef bool (*chain_add)(void *actx, float *sum, const float *g, size_t n, tlm_err *err);

/* The same element-wise float addition as the trainer's (trainer.c). */
static bool host_add(void *actx, float *restrict sum, const float *restrict g, size_t n, tlm_err *err) {
    (void)actx;
    (void)err;
    for (size_t i = 0; i < n; i++) sum[i] += g[i];
    return true;
}

/* Bucket b of n floats: [b·BUCKET, b·BUCKET + its length). */
static size_t bucket_len(size_t n, size_t b) {
    size_t lo = b * TLM_CHAIN_BUCKET_FLOATS;
    return n - lo < TLM_CHAIN_BUCKET_FLOATS ? n - lo : TLM_CHAIN_BUCKET_FLOATS;
}

/* The chain over memory MPI can read and write (the host's, or the
 * emulated device's, which is the host's). */
static bool chain(tlm_dist *d, float *sum, float *const *mine, int n_mine, size_t n, chain_add add, void *actx,
                  tlm_err *err) {
    int rank = d->rank, last = d->ranks - 1;
    size_t nb = (n + TLM_CHAIN_BUCKET_FLOATS - 1) / TLM_CHAIN_BUCKET_FLOATS;
    MPI_Request *req = malloc(2 * nb * sizeof *req);
    if (!req) return tlm_fail(err, "rank %d: out of memory for the gradient chain", rank);
    for (size_t b = 0; b < 2 * nb; b++) req[b] = MPI_REQUEST_NULL;
    bool ok = true;
    for (size_t b = 0; b < nb && ok; b++) {
        size_t lo = b * TLM_CHAIN_BUCKET_FLOATS, len = bucket_len(n, b);
        int tag = (int)(b % INT_MAX);
        if (rank > 0) {
            double t0 = tlm_profile_clock();
            MPI_Recv(sum + lo, (int)len, MPI_FLOAT, rank - 1, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            d->wait_seconds += tlm_profile_clock() - t0;
            for (int j = 0; j < n_mine && ok; j++) ok = add(actx, sum + lo, mine[j] + lo, len, err);
        }
        if (!ok) break;
        if (rank < last) MPI_Isend(sum + lo, (int)len, MPI_FLOAT, rank + 1, tag, MPI_COMM_WORLD, &req[b]);
        else MPI_Ibcast(sum + lo, (int)len, MPI_FLOAT, last, MPI_COMM_WORLD, &req[nb + b]);
    }
    if (!ok) { /* the others wait on this rank: the job cannot go on */
        fprintf(stderr, "rank %d: %s\n", rank, err->msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    double t0 = tlm_profile_clock();
    /* The broadcasts in the same bucket order on every rank, as MPI asks
     * of collectives; a rank before the last receives the total into the
     * buffer it sent from, so its sends must have finished. */
    MPI_Waitall((int)nb, req, MPI_STATUSES_IGNORE);
    if (rank < last)
        for (size_t b = 0; b < nb; b++)
            MPI_Ibcast(sum + b * TLM_CHAIN_BUCKET_FLOATS, (int)bucket_len(n, b), MPI_FLOAT, last, MPI_COMM_WORLD,
                       &req[nb + b]);
    MPI_Waitall((int)nb, req + nb, MPI_STATUSES_IGNORE);
    d->comm_seconds += tlm_profile_clock() - t0;
    free(req);
    return true;
}

static void reduce(void *ctx, float *sum, float *const *mine, int n_mine, size_t n) {
    tlm_err err;
    chain(ctx, sum, mine, n_mine, n, host_add, NULL, &err);
}

/* The emulated device's stand-in for NCCL: its memory is the host's, so
 * the same chain runs over MPI, the additions made by the device. */
typedef struct device_adder {
    tlm_chain_add add;
    void *actx;
} device_adder;

static bool emulated_add(void *actx, float *sum, const float *g, size_t n, tlm_err *err) {
    const device_adder *a = actx;
    return a->add(a->actx, (tlm_dptr)(uintptr_t)sum, (tlm_dptr)(uintptr_t)g, n, err);
}

static bool reduce_emulated(void *ctx, tlm_dptr sum, const tlm_dptr *mine, int n_mine, size_t n, tlm_chain_add add,
                            void *actx, tlm_err *err) {
    float **host = calloc((size_t)n_mine + 1, sizeof *host);
    if (!host) return tlm_fail(err, "out of memory for the gradient chain");
    for (int j = 0; j < n_mine; j++) host[j] = (float *)(uintptr_t)mine[j];
    device_adder a = {add, actx};
    bool ok = chain(ctx, (float *)(uintptr_t)sum, host, n_mine, n, emulated_add, &a, err);
    free(host);
    return ok;
}

void tlm_grad_chain_init(tlm_grad_chain *chain, tlm_dist *d) {
    *chain = (tlm_grad_chain){d->rank, d->ranks, d, gather_losses, reduce, NULL};
}

void tlm_grad_chain_emulated(tlm_grad_chain *chain) { chain->reduce_device = reduce_emulated; }
