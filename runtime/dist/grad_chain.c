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

/* One step's chain between its start and finish. Buckets go from the last
 * (the head's end of the block, final first in the backward) down to 0;
 * each is added and passed on in that order on every rank, so the last
 * rank's broadcasts, which are collectives, come in the same order
 * everywhere. */
typedef struct tlm_chain_run {
    tlm_dist *d;
    float *sum;
    float *const *mine;
    int n_mine;
    size_t n, nb;
    size_t final_from; /* buckets [final_from, nb) final in every mine[] */
    size_t todo;       /* buckets [0, todo) not yet added and passed on */
    bool in_backward;  /* in ready() before the whole block is final: ops of the backward remain */
    MPI_Request *recv, *send, *bcast; /* nb each */
    chain_add add;
    void *actx;
    tlm_err *err;
    bool ok;
} tlm_chain_run;

/* Adds and passes on the final buckets in order, as far as the previous
 * rank's partial sums have arrived (block: waiting for them). */
static void advance(tlm_chain_run *c, bool block) {
    tlm_dist *d = c->d;
    int rank = d->rank, last = d->ranks - 1;
    while (c->ok && c->todo > c->final_from) {
        size_t b = c->todo - 1, lo = b * TLM_CHAIN_BUCKET_FLOATS, len = tlm_chain_bucket_len(c->n, b);
        float *sum = c->sum + lo;
        if (rank > 0) {
            double t0 = tlm_profile_clock();
            int arrived = 1;
            if (block) MPI_Wait(&c->recv[b], MPI_STATUS_IGNORE);
            else MPI_Test(&c->recv[b], &arrived, MPI_STATUS_IGNORE);
            d->wait_seconds += tlm_profile_clock() - t0;
            if (!arrived) return;
        } else if (c->mine[0] != c->sum) memcpy(sum, c->mine[0] + lo, len * sizeof *sum);
        for (int j = rank > 0 ? 0 : 1; j < c->n_mine && c->ok; j++)
            c->ok = c->add(c->actx, sum, c->mine[j] + lo, len, c->err);
        if (!c->ok) return;
        double t0 = tlm_profile_clock();
        int tag = (int)(b % INT_MAX);
        if (rank < last) MPI_Isend(sum, (int)len, MPI_FLOAT, rank + 1, tag, MPI_COMM_WORLD, &c->send[b]);
        else MPI_Ibcast(sum, (int)len, MPI_FLOAT, last, MPI_COMM_WORLD, &c->bcast[b]);
        d->comm_seconds += tlm_profile_clock() - t0;
        d->buckets++;
        d->early_buckets += c->in_backward;
        c->todo--;
    }
}

static void chain_start(void *ctx, float *sum, float *const *mine, int n_mine, size_t n) {
    tlm_dist *d = ctx;
    size_t nb = tlm_chain_buckets(n);
    tlm_chain_run *c = calloc(1, sizeof *c);
    MPI_Request *req = malloc((3 * nb + 1) * sizeof *req);
    if (!c || !req) { /* the others wait on this rank: the job cannot go on */
        fprintf(stderr, "rank %d: out of memory for the gradient chain\n", d->rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t b = 0; b < 3 * nb; b++) req[b] = MPI_REQUEST_NULL;
    *c = (tlm_chain_run){d,     sum, mine,     n_mine,       n,        nb,   nb,   nb,
                         false, req, req + nb, req + 2 * nb, host_add, NULL, NULL, true};
    /* The previous rank's partial sums may come as soon as it has them. */
    if (d->rank > 0)
        for (size_t b = nb; b-- > 0;)
            MPI_Irecv(sum + b * TLM_CHAIN_BUCKET_FLOATS, (int)tlm_chain_bucket_len(n, b), MPI_FLOAT, d->rank - 1,
                      (int)(b % INT_MAX), MPI_COMM_WORLD, &c->recv[b]);
    d->run = c;
}

static void chain_ready(void *ctx, size_t lo) {
    tlm_dist *d = ctx;
    tlm_chain_run *c = d->run;
    size_t first = tlm_chain_buckets(lo);
    if (first < c->final_from) c->final_from = first;
    /* lo 0: the last gradients are final, nothing of the backward is left
     * to overlap with (the embedding's, last, make it so). */
    c->in_backward = lo > 0;
    advance(c, false);
    c->in_backward = false;
    /* Nonblocking transfers move when MPI is called: let the sends and
     * broadcasts already started go on while the backward computes. */
    int done;
    MPI_Testall((int)c->nb, c->send, &done, MPI_STATUSES_IGNORE);
    MPI_Testall((int)c->nb, c->bcast, &done, MPI_STATUSES_IGNORE);
}

/* The rest of the chain, then the total on every rank; false with the
 * device's failure (an addition), after which the job cannot go on. */
static bool chain_finish_run(tlm_dist *d) {
    tlm_chain_run *c = d->run;
    int rank = d->rank, last = d->ranks - 1;
    c->final_from = 0;
    advance(c, true);
    bool ok = c->ok;
    if (!ok) { /* the others wait on this rank: the job cannot go on */
        fprintf(stderr, "rank %d: %s\n", rank, c->err->msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    double t0 = tlm_profile_clock();
    /* A rank before the last receives the total into the buffer it sent
     * from, so its sends must have finished; its broadcasts come in the
     * last rank's order. */
    MPI_Waitall((int)c->nb, c->send, MPI_STATUSES_IGNORE);
    if (rank < last)
        for (size_t b = c->nb; b-- > 0;)
            MPI_Ibcast(c->sum + b * TLM_CHAIN_BUCKET_FLOATS, (int)tlm_chain_bucket_len(c->n, b), MPI_FLOAT, last,
                       MPI_COMM_WORLD, &c->bcast[b]);
    MPI_Waitall((int)c->nb, c->bcast, MPI_STATUSES_IGNORE);
    d->comm_seconds += tlm_profile_clock() - t0;
    free(c->recv);
    free(c);
    d->run = NULL;
    return ok;
}

static void chain_finish(void *ctx) { chain_finish_run(ctx); }

/* The emulated device's stand-in for NCCL: its memory is the host's, so
 * the same chain runs over MPI, the additions made by the device. Each of
 * its three calls is queued on the device's comm stream as a host call
 * (device.h), where NCCL's operations would go on a GPU: the emulated
 * device defers them until the compute stream waits for the chain, so the
 * trainer's events are what makes the result right (docs/gpu.md). */
typedef struct device_adder {
    tlm_chain_add add;
    void *actx;
} device_adder;

static bool emulated_add(void *actx, float *sum, const float *g, size_t n, tlm_err *err) {
    const device_adder *a = actx;
    return a->add(a->actx, (tlm_dptr)(uintptr_t)sum, (tlm_dptr)(uintptr_t)g, n, err);
}

/* One step's chain on the emulated device, from its start to its finish. */
typedef struct emulated_step {
    tlm_dist *d;
    float *sum;
    float **mine;
    int n_mine;
    size_t n;
    device_adder adder;
    tlm_err err; /* the host calls' failure, which chain_finish_run reports */
} emulated_step;

/* A ready(lo) waiting on the comm stream. */
typedef struct emulated_ready {
    tlm_dist *d;
    size_t lo;
} emulated_ready;

static void emulated_start_call(void *ctx) {
    emulated_step *st = ctx;
    chain_start(st->d, st->sum, st->mine, st->n_mine, st->n);
    st->d->run->add = emulated_add;
    st->d->run->actx = &st->adder;
    st->d->run->err = &st->err;
}

static void emulated_ready_call(void *ctx) {
    emulated_ready *r = ctx;
    chain_ready(r->d, r->lo);
    free(r);
}

static void emulated_finish_call(void *ctx) {
    emulated_step *st = ctx;
    chain_finish_run(st->d);
    free(st->mine);
    free(st);
}

static bool emulated_device_start(void *ctx, tlm_device *dev, tlm_dptr sum, const tlm_dptr *mine, int n_mine, size_t n,
                                  tlm_chain_add add, void *actx, tlm_err *err) {
    tlm_dist *d = ctx;
    emulated_step *st = calloc(1, sizeof *st);
    float **host = calloc((size_t)n_mine + 1, sizeof *host);
    if (!st || !host) {
        free(st);
        free(host);
        return tlm_fail(err, "out of memory for the gradient chain");
    }
    for (int j = 0; j < n_mine; j++) host[j] = (float *)(uintptr_t)mine[j];
    *st = (emulated_step){d, (float *)(uintptr_t)sum, host, n_mine, n, {add, actx}, {{0}}};
    if (!tlm_device_comm_host_call(dev, emulated_start_call, st, err)) {
        free(host);
        free(st);
        return false;
    }
    d->device_dev = dev;
    d->device_run = st;
    return true;
}

static bool emulated_device_ready(void *ctx, size_t lo, tlm_err *err) {
    tlm_dist *d = ctx;
    emulated_ready *r = malloc(sizeof *r);
    if (!r) return tlm_fail(err, "out of memory for the gradient chain");
    *r = (emulated_ready){d, lo};
    if (tlm_device_comm_host_call(d->device_dev, emulated_ready_call, r, err)) return true;
    free(r);
    return false;
}

static bool emulated_device_finish(void *ctx, tlm_err *err) {
    tlm_dist *d = ctx;
    bool ok = tlm_device_comm_host_call(d->device_dev, emulated_finish_call, d->device_run, err);
    d->device_run = NULL;
    return ok;
}

void tlm_grad_chain_init(tlm_grad_chain *chain, tlm_dist *d) {
    *chain =
        (tlm_grad_chain){d->rank, d->ranks, d, gather_losses, chain_start, chain_ready, chain_finish, NULL, NULL, NULL};
}

void tlm_grad_chain_emulated(tlm_grad_chain *chain) {
    chain->device_start = emulated_device_start;
    chain->device_ready = emulated_device_ready;
    chain->device_finish = emulated_device_finish;
}
