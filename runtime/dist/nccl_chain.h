/* The device path's gradient chain over NCCL (trainer.h: tlm_grad_chain's
 * reduce_device): the same fixed order as over MPI, with ncclRecv and
 * ncclSend between neighbouring ranks bucket by bucket and an ncclBroadcast
 * from the last rank, on the device's stream (the legacy default stream,
 * device_cuda.c) so that they are ordered with its kernels. MPI only
 * bootstraps the communicator (rank 0's ncclGetUniqueId, broadcast).
 * libnccl.so.2 is opened with dlopen at the first use, like cuBLASLt
 * (runtime/device/cuda_toolkit.c), so tlm-run runs where there is none.
 * Built where configure finds the CUDA toolkit's nccl.h; not yet run on a
 * GPU (docs/scaling.md says what was run). */
#ifndef TLM_DIST_NCCL_CHAIN_H
#define TLM_DIST_NCCL_CHAIN_H

#include "dist.h"

/* Loads NCCL, makes the job's communicator and sets chain->reduce_device;
 * false with a message. */
bool tlm_nccl_chain_open(tlm_grad_chain *chain, tlm_dist *d, tlm_err *err);
void tlm_nccl_chain_close(void);

#endif
