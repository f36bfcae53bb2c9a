/* The device path's gradient chain over NCCL (trainer.h: tlm_grad_chain's
 * device_start, device_ready, device_finish): the same fixed order as over
 * MPI, with ncclRecv, the device's additions and ncclSend between
 * neighbouring ranks bucket by bucket, and an ncclBroadcast from the last
 * rank, all on the device's comm stream (device.h), so that a bucket's
 * transfer starts during the backward, behind the event the trainer
 * records when the executor tells its gradients final. MPI only
 * bootstraps the communicator (rank 0's ncclGetUniqueId, broadcast).
 * libnccl.so.2 is opened with dlopen at the first use, like cuBLASLt
 * (runtime/device/cuda_toolkit.c), so tlm-run runs where there is none.
 * Built where configure finds the CUDA toolkit's nccl.h; not yet run on a
 * GPU (docs/scaling.md says what was run). */
#ifndef TLM_DIST_NCCL_CHAIN_H
#define TLM_DIST_NCCL_CHAIN_H

#include "dist.h"

/* Loads NCCL, makes the job's communicator and sets chain's device
 * calls; false with a message, or with none (err "") on a rank that stops
 * because another could not load NCCL. Collective: every rank calls it,
 * after all have set up. */
bool tlm_nccl_chain_open(tlm_grad_chain *chain, tlm_dist *d, tlm_err *err);
void tlm_nccl_chain_close(void);

#endif
