/* The trainer's gradient chain over MPI (trainer.h: tlm_grad_chain): the
 * losses gathered in rank order, and the gradients summed in a fixed order
 * by passing the partial sum from rank to rank, bucket by bucket so that
 * rank r adds one bucket while rank r-1 sends the next, then broadcast
 * from the last rank. On the CPU the buckets start during the last
 * micro-batch's backward, as the executor tells them final (model.h:
 * grads_final), from the block's end down; on a device likewise, queued
 * on its comm stream (the emulated device's stand-in here, NCCL in
 * nccl_chain.c). */
#ifndef TLM_DIST_GRAD_CHAIN_H
#define TLM_DIST_GRAD_CHAIN_H

#include <stddef.h>

#include "dist.h"

/* Floats per bucket: 1 MiB, large enough that a message's latency is small
 * beside its transfer, small enough that a 100M-parameter model's chain
 * has hundreds of buckets in flight. */
#define TLM_CHAIN_BUCKET_FLOATS (1 << 18)

/* The buckets that hold floats [lo, n): from tlm_chain_buckets(lo) on (all
 * of a block of n floats: tlm_chain_buckets(n)); bucket b holds
 * [b·BUCKET, b·BUCKET + tlm_chain_bucket_len(n, b)). Shared by the MPI and
 * NCCL chains, which must agree on them. */
static inline size_t tlm_chain_buckets(size_t floats) {
    return (floats + TLM_CHAIN_BUCKET_FLOATS - 1) / TLM_CHAIN_BUCKET_FLOATS;
}
static inline size_t tlm_chain_bucket_len(size_t n, size_t b) {
    size_t lo = b * TLM_CHAIN_BUCKET_FLOATS;
    return n - lo < TLM_CHAIN_BUCKET_FLOATS ? n - lo : TLM_CHAIN_BUCKET_FLOATS;
}

/* chain's callbacks, with d (MPI initialised) as their context. */
void tlm_grad_chain_init(tlm_grad_chain *chain, tlm_dist *d);
/* ... and over the emulated device's memory (host memory), the stand-in
 * for NCCL that runs the device path's chain in the tests. */
void tlm_grad_chain_emulated(tlm_grad_chain *chain);

#endif
