#include "nccl_chain.h"

#include <dlfcn.h>
#include <mpi.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "grad_chain.h"
#include "profile.h"

static struct nccl_api {
    ncclResult_t (*GetUniqueId)(ncclUniqueId *id);
    ncclResult_t (*CommInitRank)(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank);
    ncclResult_t (*CommDestroy)(ncclComm_t comm);
    ncclResult_t (*Send)(const void *buf, size_t n, ncclDataType_t type, int peer, ncclComm_t comm,
                         cudaStream_t stream);
    ncclResult_t (*Recv)(void *buf, size_t n, ncclDataType_t type, int peer, ncclComm_t comm, cudaStream_t stream);
    ncclResult_t (*Broadcast)(const void *send, void *recv, size_t n, ncclDataType_t type, int root, ncclComm_t comm,
                              cudaStream_t stream);
    const char *(*GetErrorString)(ncclResult_t result);
} api;
static ncclComm_t comm;

static bool nccl_ok(ncclResult_t r, const char *call, tlm_err *err) {
    if (r == ncclSuccess) return true;
    return tlm_fail(err, "%s: %s", call, api.GetErrorString ? api.GetErrorString(r) : "failed");
}

static void *open_nccl(tlm_err *err) {
    void *lib = NULL;
#ifdef TLM_NCCL_LIB_DIR
    lib = dlopen(TLM_NCCL_LIB_DIR "/libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
#endif
    if (!lib) lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        tlm_fail(err, "cannot load libnccl.so.2 (%s): several ranks on GPUs need NCCL", why ? why : "not found");
    }
    return lib;
}

/* One step's chain on the GPU between device_start and device_finish:
 * buckets [0, todo) not yet queued, from the last down, as on the CPU. */
typedef struct nccl_step {
    cudaStream_t stream; /* the device's comm stream */
    tlm_dptr sum;
    tlm_dptr *mine;
    int n_mine;
    size_t n, todo;
    tlm_chain_add add;
    void *actx;
} nccl_step;

/* Queues buckets [first, todo) on the comm stream, the last first: on rank
 * r > 0 the previous rank's partial sum received into sum, then this
 * rank's gradients added in order (rank 0's sum is its mine[0]), then sent
 * on to the next rank. early: the backward still has ops to queue. */
static bool queue_buckets(tlm_dist *d, nccl_step *st, size_t first, bool early, tlm_err *err) {
    int rank = d->rank, last = d->ranks - 1;
    double t0 = tlm_profile_clock();
    for (; st->todo > first; st->todo--) {
        size_t lo = (st->todo - 1) * TLM_CHAIN_BUCKET_FLOATS;
        size_t len = tlm_chain_bucket_len(st->n, st->todo - 1);
        tlm_dptr at = st->sum + lo * sizeof(float);
        void *buf = (void *)(uintptr_t)at;
        if (rank > 0 && !nccl_ok(api.Recv(buf, len, ncclFloat32, rank - 1, comm, st->stream), "ncclRecv", err))
            return false;
        for (int j = rank > 0 ? 0 : 1; j < st->n_mine; j++)
            if (!st->add(st->actx, at, st->mine[j] + lo * sizeof(float), len, err)) return false;
        if (rank < last && !nccl_ok(api.Send(buf, len, ncclFloat32, rank + 1, comm, st->stream), "ncclSend", err))
            return false;
        d->buckets++;
        d->early_buckets += early;
    }
    /* Queued, not finished: the compute stream waits for the chain's
     * event; --profile counts the queueing here, the rest as compute. */
    d->comm_seconds += tlm_profile_clock() - t0;
    return true;
}

static bool nccl_device_start(void *ctx, tlm_device *dev, tlm_dptr sum, const tlm_dptr *mine, int n_mine, size_t n,
                              tlm_chain_add add, void *actx, tlm_err *err) {
    tlm_dist *d = ctx;
    void *stream = NULL;
    if (!tlm_device_comm_stream(dev, &stream, err)) return false;
    nccl_step *st = calloc(1, sizeof *st);
    tlm_dptr *copy = calloc((size_t)n_mine + 1, sizeof *copy);
    if (!st || !copy) {
        free(st);
        free(copy);
        return tlm_fail(err, "out of memory for the gradient chain");
    }
    for (int j = 0; j < n_mine; j++) copy[j] = mine[j];
    *st = (nccl_step){(cudaStream_t)stream, sum, copy, n_mine, n, tlm_chain_buckets(n), add, actx};
    d->device_dev = dev;
    d->device_run = st;
    return true;
}

static bool nccl_device_ready(void *ctx, size_t lo, tlm_err *err) {
    tlm_dist *d = ctx;
    /* lo 0: the last gradients are final, nothing of the backward is left
     * to overlap with. */
    return queue_buckets(d, d->device_run, tlm_chain_buckets(lo), lo > 0, err);
}

/* The rest, then the last rank's total to every rank (on a rank before
 * the last, into the buffer it sent from: the stream's order puts the
 * broadcast after its sends). */
static bool nccl_device_finish(void *ctx, tlm_err *err) {
    tlm_dist *d = ctx;
    nccl_step *st = d->device_run;
    void *all = (void *)(uintptr_t)st->sum;
    bool ok = queue_buckets(d, st, 0, false, err);
    double t0 = tlm_profile_clock();
    ok = ok &&
         nccl_ok(api.Broadcast(all, all, st->n, ncclFloat32, d->ranks - 1, comm, st->stream), "ncclBroadcast", err);
    d->comm_seconds += tlm_profile_clock() - t0;
    free(st->mine);
    free(st);
    d->device_run = NULL;
    return ok;
}

bool tlm_nccl_chain_open(tlm_grad_chain *chain, tlm_dist *d, tlm_err *err) {
    void *lib = open_nccl(err);
    bool loaded = lib != NULL;
    struct {
        const char *name;
        void **fn;
    } syms[] = {
        {"ncclGetUniqueId", (void **)&api.GetUniqueId},
        {"ncclCommInitRank", (void **)&api.CommInitRank},
        {"ncclCommDestroy", (void **)&api.CommDestroy},
        {"ncclSend", (void **)&api.Send},
        {"ncclRecv", (void **)&api.Recv},
        {"ncclBroadcast", (void **)&api.Broadcast},
        {"ncclGetErrorString", (void **)&api.GetErrorString},
    };
    for (size_t i = 0; i < sizeof syms / sizeof *syms && loaded; i++)
        if (!(*syms[i].fn = dlsym(lib, syms[i].name))) loaded = tlm_fail(err, "libnccl.so.2 has no %s", syms[i].name);
    /* Every rank has NCCL before rank 0's id goes out: one that has not
     * (no libnccl on its machine) would leave the others waiting in the
     * broadcast. Those that have it stop with no message of their own
     * (err ""): the job's is the failed rank's (tlm_dist_agree_status). */
    if (tlm_dist_max(d, !loaded)) {
        if (loaded) err->msg[0] = '\0';
        return false;
    }
    /* Rank 0's id (or its failure) to every rank, which all wait for it. */
    struct {
        int status;
        ncclUniqueId id;
    } boot = {ncclSuccess, {{0}}};
    if (d->rank == 0) boot.status = api.GetUniqueId(&boot.id);
    MPI_Bcast(&boot, (int)sizeof boot, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (!nccl_ok((ncclResult_t)boot.status, "ncclGetUniqueId (rank 0)", err)) return false;
    ncclUniqueId id = boot.id;
    if (!nccl_ok(api.CommInitRank(&comm, d->ranks, id, d->rank), "ncclCommInitRank", err)) return false;
    chain->device_start = nccl_device_start;
    chain->device_ready = nccl_device_ready;
    chain->device_finish = nccl_device_finish;
    return true;
}

void tlm_nccl_chain_close(void) {
    if (comm) api.CommDestroy(comm);
    comm = NULL;
}
