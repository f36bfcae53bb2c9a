/* The sequence mixers on the device: causal softmax attention and the
 * Titans memory with its activations (runtime/gpu/attention.cu, titans.cu,
 * titans_act.cu). Each call has the semantics, argument order, layouts and
 * preconditions of the CPU op of the same name (tlm_rt/ops.h; packed qkv
 * strides included), with the device first, device addresses for the
 * buffers and err last; false only when a launch fails.
 *
 * The tensors the backwards read (attention's log-sum-exp [B,T,H], the
 * memory's `saved`, rnorm) are laid out exactly as the CPU's, so a
 * checkpoint or an op table does not depend on the device. Every kernel is
 * deterministic (no atomics, fixed reduction orders), so the bits do not
 * depend on the grid. */
#ifndef TLM_GPU_MIXERS_H
#define TLM_GPU_MIXERS_H

#include "gpu.h"

/* The block sizes the calls launch with: the kernels' sums run over the
 * block in an order that depends on its size (never on the grid). */
enum {
    TLM_GPU_ATTENTION_BLOCK = 128,  /* a block per (b, h, tile of rows) */
    TLM_GPU_ATTENTION_TILE = 32,    /* rows per tile: attention.cu's attention_TQ and attention_TK */
    TLM_GPU_TITANS_BLOCK = 256,     /* a block per (batch, head) over its D x D state */
    TLM_GPU_TITANS_ACT_BLOCK = 256, /* a thread per head row or per gate */
};

/* tlm_attention_forward / tlm_attention_backward */
bool tlm_gpu_attention_forward(tlm_gpu *g, tlm_dptr y, tlm_dptr lse, tlm_dptr q, tlm_dptr k, tlm_dptr v, int B, int T,
                               int H, int D, int stride, tlm_err *err);
bool tlm_gpu_attention_backward(tlm_gpu *g, tlm_dptr dq, tlm_dptr dk, tlm_dptr dv, tlm_dptr dy, tlm_dptr y,
                                tlm_dptr lse, tlm_dptr q, tlm_dptr k, tlm_dptr v, int B, int T, int H, int D,
                                int stride, tlm_err *err);
/* --precision bf16: q, k and v are bf16 ([B,T,H,D] slices with tokens
 * `stride` elements apart, as in fp32: 3 H D in the packed qkv), and so is
 * y: the forward accumulates y in acc (fp32, y's shape [B,T,H,D]) and
 * stores y_bf16 rounded once; lse stays fp32. The backward reads the bf16
 * q, k, v and y_bf16 (for D_t = dy_t . y_t) and writes fp32 dq, dk, dv
 * (stride as q's). Each gives, bit for bit, what the fp32 call gives on the
 * same values widened to fp32 (the forward's y then rounded once): fp32
 * arithmetic in the same order. */
bool tlm_gpu_attention_forward_bf16(tlm_gpu *g, tlm_dptr y_bf16, tlm_dptr acc, tlm_dptr lse, tlm_dptr q, tlm_dptr k,
                                    tlm_dptr v, int B, int T, int H, int D, int stride, tlm_err *err);
bool tlm_gpu_attention_backward_bf16(tlm_gpu *g, tlm_dptr dq, tlm_dptr dk, tlm_dptr dv, tlm_dptr dy, tlm_dptr y_bf16,
                                     tlm_dptr lse, tlm_dptr q, tlm_dptr k, tlm_dptr v, int B, int T, int H, int D,
                                     int stride, tlm_err *err);
/* The same with y fp32 (where a reader of y has no bf16 form: no model
 * of the four mixers since the sigmoid gate has one): only q, k and v are
 * bf16. */
bool tlm_gpu_attention_forward_qkv_bf16(tlm_gpu *g, tlm_dptr y, tlm_dptr lse, tlm_dptr q, tlm_dptr k, tlm_dptr v, int B,
                                        int T, int H, int D, int stride, tlm_err *err);
bool tlm_gpu_attention_backward_qkv_bf16(tlm_gpu *g, tlm_dptr dq, tlm_dptr dk, tlm_dptr dv, tlm_dptr dy, tlm_dptr y,
                                         tlm_dptr lse, tlm_dptr q, tlm_dptr k, tlm_dptr v, int B, int T, int H, int D,
                                         int stride, tlm_err *err);

/* tlm_titans_forward: saved holds tlm_titans_saved_floats(B, T, H, D, chunk)
 * floats (the CPU's layout). */
bool tlm_gpu_titans_forward(tlm_gpu *g, tlm_dptr y, tlm_dptr saved, tlm_dptr q, tlm_dptr k, tlm_dptr v, int stride,
                            tlm_dptr theta, tlm_dptr eta, tlm_dptr alpha, int B, int T, int H, int D, int chunk,
                            tlm_err *err);
/* The backward's scratch: every (b, h) is recomputed at once, so it is the
 * CPU's per-thread scratch (tlm_titans_scratch_floats: (2K+5) D^2 + 2D +
 * 5n^2 + 5nD floats, K = chunk*ceil(16/chunk) the segment between saved
 * states, n = min(chunk, 64) the tokens of a block) for each of the B*H
 * pairs, each rounded up to an even count and followed by 2n^2 doubles
 * (the gates' walk, titans.cu). The caller allocates it; its contents
 * need not be kept between calls. */
size_t tlm_gpu_titans_scratch_bytes(int B, int H, int D, int chunk);
/* tlm_titans_backward, with scratch (tlm_gpu_titans_scratch_bytes) in place
 * of the CPU's per-thread scratch and thread count; v is not read and may
 * be 0. */
bool tlm_gpu_titans_backward(tlm_gpu *g, tlm_dptr dq, tlm_dptr dk, tlm_dptr dv, tlm_dptr dtheta, tlm_dptr deta,
                             tlm_dptr dalpha, tlm_dptr dy, tlm_dptr saved, tlm_dptr q, tlm_dptr k, tlm_dptr v,
                             int stride, tlm_dptr theta, tlm_dptr eta, tlm_dptr alpha, int B, int T, int H, int D,
                             int chunk, tlm_dptr scratch, tlm_err *err);
/* The same two with q, k and v (mem_qkv) in bf16, read widened, and the
 * forward's read-out y in bf16, rounded once (--precision bf16): on the
 * same rounded q, k, v, the fp32 kernels' saved and gradients bit for bit
 * and their y rounded; dy and everything else fp32 as above. */
bool tlm_gpu_titans_forward_bf16(tlm_gpu *g, tlm_dptr y_bf16, tlm_dptr saved, tlm_dptr q, tlm_dptr k, tlm_dptr v,
                                 int stride, tlm_dptr theta, tlm_dptr eta, tlm_dptr alpha, int B, int T, int H, int D,
                                 int chunk, tlm_err *err);
bool tlm_gpu_titans_backward_bf16(tlm_gpu *g, tlm_dptr dq, tlm_dptr dk, tlm_dptr dv, tlm_dptr dtheta, tlm_dptr deta,
                                  tlm_dptr dalpha, tlm_dptr dy, tlm_dptr saved, tlm_dptr q, tlm_dptr k, tlm_dptr v,
                                  int stride, tlm_dptr theta, tlm_dptr eta, tlm_dptr alpha, int B, int T, int H, int D,
                                  int chunk, tlm_dptr scratch, tlm_err *err);

/* tlm_titans_qkv_forward / backward (the executor's memory_act) */
bool tlm_gpu_titans_qkv_forward(tlm_gpu *g, tlm_dptr act, tlm_dptr mem_qkv, tlm_dptr rnorm, tlm_dptr qkv, int N, int H,
                                int D, tlm_err *err);
bool tlm_gpu_titans_qkv_backward(tlm_gpu *g, tlm_dptr dqkv, tlm_dptr d_mem_qkv, tlm_dptr qkv, tlm_dptr act,
                                 tlm_dptr rnorm, int N, int H, int D, tlm_err *err);
/* The same with qkv, act and mem_qkv in bf16 (--precision bf16): read
 * widened, written rounded once; on the same rounded qkv (and act), the
 * fp32 kernels' results bit for bit (act and mem_qkv rounded), rnorm and
 * dqkv fp32. */
bool tlm_gpu_titans_qkv_forward_bf16(tlm_gpu *g, tlm_dptr act, tlm_dptr mem_qkv, tlm_dptr rnorm, tlm_dptr qkv, int N,
                                     int H, int D, tlm_err *err);
bool tlm_gpu_titans_qkv_backward_bf16(tlm_gpu *g, tlm_dptr dqkv, tlm_dptr d_mem_qkv, tlm_dptr qkv, tlm_dptr act,
                                      tlm_dptr rnorm, int N, int H, int D, tlm_err *err);

/* tlm_titans_gates_forward / backward (the executor's memory_gates) */
bool tlm_gpu_titans_gates_forward(tlm_gpu *g, tlm_dptr gates, tlm_dptr pre, int N, int H, float inner_lr, tlm_err *err);
bool tlm_gpu_titans_gates_backward(tlm_gpu *g, tlm_dptr dpre, tlm_dptr dgates, tlm_dptr gates, int N, int H,
                                   float inner_lr, tlm_err *err);

#endif
