#include "nccl_chain.h"

#include <dlfcn.h>
#include <mpi.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>

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

/* The device's stream: the legacy default stream, as device_cuda.c uses. */
#define DEVICE_STREAM ((cudaStream_t)0)

static bool reduce_nccl(void *ctx, tlm_dptr sum, const tlm_dptr *mine, int n_mine, size_t n, tlm_chain_add add,
                        void *actx, tlm_err *err) {
    tlm_dist *d = ctx;
    int rank = d->rank, last = d->ranks - 1;
    double t0 = tlm_profile_clock();
    for (size_t lo = 0; lo < n; lo += TLM_CHAIN_BUCKET_FLOATS) {
        size_t len = n - lo < TLM_CHAIN_BUCKET_FLOATS ? n - lo : TLM_CHAIN_BUCKET_FLOATS;
        tlm_dptr at = sum + lo * sizeof(float);
        void *buf = (void *)(uintptr_t)at;
        if (rank > 0) {
            if (!nccl_ok(api.Recv(buf, len, ncclFloat32, rank - 1, comm, DEVICE_STREAM), "ncclRecv", err)) return false;
            for (int j = 0; j < n_mine; j++)
                if (!add(actx, at, mine[j] + lo * sizeof(float), len, err)) return false;
        }
        if (rank < last && !nccl_ok(api.Send(buf, len, ncclFloat32, rank + 1, comm, DEVICE_STREAM), "ncclSend", err))
            return false;
    }
    void *all = (void *)(uintptr_t)sum;
    bool ok = nccl_ok(api.Broadcast(all, all, n, ncclFloat32, last, comm, DEVICE_STREAM), "ncclBroadcast", err);
    /* Enqueued, not finished: the step's next kernel waits on the stream;
     * --profile counts the enqueueing here, the rest as compute. */
    d->comm_seconds += tlm_profile_clock() - t0;
    return ok;
}

bool tlm_nccl_chain_open(tlm_grad_chain *chain, tlm_dist *d, tlm_err *err) {
    void *lib = open_nccl(err);
    if (!lib) return false;
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
    for (size_t i = 0; i < sizeof syms / sizeof *syms; i++)
        if (!(*syms[i].fn = dlsym(lib, syms[i].name))) return tlm_fail(err, "libnccl.so.2 has no %s", syms[i].name);
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
    chain->reduce_device = reduce_nccl;
    return true;
}

void tlm_nccl_chain_close(void) {
    if (comm) api.CommDestroy(comm);
    comm = NULL;
}
