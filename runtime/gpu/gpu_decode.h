/* Sampling with a KV cache on the device (runtime/gpu/attention_decode.cu,
 * titans_decode.cu): one token's attention over the cached keys and values,
 * and one token of Titans' memory, the device twins of tlm_attention_decode
 * and tlm_titans_decode (tlm_rt/ops.h), same arguments. */
#ifndef TLM_GPU_DECODE_H
#define TLM_GPU_DECODE_H

#include "gpu.h"

/* head_dim D at most 1024. */
bool tlm_gpu_attention_decode(tlm_gpu *g, tlm_dptr y, tlm_dptr q, tlm_dptr k, tlm_dptr v, int n, int H, int D,
                              int stride, tlm_err *err);
/* --precision bf16: q [H*D] and the cache's k and v rows (stride in
 * elements) in bf16, and y_bf16 [H*D] in bf16 too (rounded once): the fp32
 * kernel's y on the same values widened, rounded. */
bool tlm_gpu_attention_decode_bf16(tlm_gpu *g, tlm_dptr y_bf16, tlm_dptr q, tlm_dptr k, tlm_dptr v, int n, int H, int D,
                                   int stride, tlm_err *err);
/* The same with y fp32 (where a reader of y has no bf16 form: no model
 * of the four mixers since the sigmoid gate has one). */
bool tlm_gpu_attention_decode_qkv_bf16(tlm_gpu *g, tlm_dptr y, tlm_dptr q, tlm_dptr k, tlm_dptr v, int n, int H, int D,
                                       int stride, tlm_err *err);

/* One token of Titans' memory (tlm_titans_decode, tlm_rt/ops.h): state
 * [H][3][D][D] on the device, q, k, v [H*D] and the gates [H] of the token;
 * y may be 0 (the state only). D at most 1024. */
bool tlm_gpu_titans_decode(tlm_gpu *g, tlm_dptr y, tlm_dptr state, tlm_dptr q, tlm_dptr k, tlm_dptr v, tlm_dptr theta,
                           tlm_dptr eta, tlm_dptr alpha, int H, int D, bool chunk_start, tlm_err *err);
/* The same with q, k, v and y in bf16 (--precision bf16's mem_qkv and
 * mem_y): q, k, v read widened, y rounded once; on the same rounded q, k,
 * v, the fp32 kernel's state bit for bit and its y rounded. */
bool tlm_gpu_titans_decode_bf16(tlm_gpu *g, tlm_dptr y_bf16, tlm_dptr state, tlm_dptr q, tlm_dptr k, tlm_dptr v,
                                tlm_dptr theta, tlm_dptr eta, tlm_dptr alpha, int H, int D, bool chunk_start,
                                tlm_err *err);

#endif
