/* Sampling with a KV cache on the device (runtime/gpu/attention_decode.cu):
 * one token's attention over the cached keys and values, the device twin of
 * tlm_attention_decode (tlm_rt/ops.h), same arguments. */
#ifndef TLM_GPU_DECODE_H
#define TLM_GPU_DECODE_H

#include "gpu.h"

/* head_dim D at most 1024. */
bool tlm_gpu_attention_decode(tlm_gpu *g, tlm_dptr y, tlm_dptr q, tlm_dptr k, tlm_dptr v, int n, int H, int D,
                              int stride, tlm_err *err);

#endif
