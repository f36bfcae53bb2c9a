/* The runtime's basic ops on the device: the token embedding, RMSNorm (model
 * and per head), rotary embeddings, softmax cross-entropy, the sigmoid gate
 * and SwiGLU. Each call has the arguments, semantics and preconditions of the
 * CPU op of the same name in tlm_rt/ops.h (read it for the shapes and for
 * which outputs accumulate), with the GPU context first, device addresses for
 * every buffer (0 where the CPU op takes NULL) and err last. The kernels are
 * runtime/gpu/{embedding,rmsnorm,rope,crossentropy,gates}.cu; they are
 * deterministic (no atomics, fixed reduction orders) and compared with the
 * CPU ops by tests/gpu/test_gpu_basic.c.
 *
 * Launches are asynchronous: false means the launch failed (err says why);
 * a kernel's own failure shows at the next tlm_device_sync. */
#ifndef TLM_GPU_BASIC_H
#define TLM_GPU_BASIC_H

#include <stddef.h>

#include "gpu.h"

/* The block sizes the calls launch with: the kernels' block-wide sums run in
 * an order that depends on them (never on the grid). RMSNorm's weight
 * gradient takes the largest block, its warps splitting the rows of 32
 * weight entries (a block per 32 entries: the more warps, the more of the
 * GPU it fills). */
enum { TLM_GPU_BASIC_BLOCK = 256, TLM_GPU_RMSNORM_WEIGHT_BLOCK = 1024 };

/* out[N,C] = table[ids[n], :];  dtable[ids[n], :] += dout[n, :] (each table
 * element gets its rows' adds in row order: the CPU op's bits). */
bool tlm_gpu_embedding_forward(tlm_gpu *g, tlm_dptr out, tlm_dptr ids, tlm_dptr table, int N, int C, tlm_err *err);
bool tlm_gpu_embedding_backward(tlm_gpu *g, tlm_dptr dtable, tlm_dptr dout, tlm_dptr ids, int N, int C, tlm_err *err);

/* dx ACCUMULATES, dw += (dw may be 0). */
bool tlm_gpu_rmsnorm_forward(tlm_gpu *g, tlm_dptr out, tlm_dptr rstd, tlm_dptr x, tlm_dptr w, int N, int C, float eps,
                             tlm_err *err);
/* The same, out_bf16 [N,C] in bf16 (round to nearest even of the fp32
 * result): --precision bf16's GEMM inputs (docs/gpu.md, "Precision"). */
bool tlm_gpu_rmsnorm_forward_bf16(tlm_gpu *g, tlm_dptr out_bf16, tlm_dptr rstd, tlm_dptr x, tlm_dptr w, int N, int C,
                                  float eps, tlm_err *err);
bool tlm_gpu_rmsnorm_backward(tlm_gpu *g, tlm_dptr dx, tlm_dptr dw, tlm_dptr dout, tlm_dptr x, tlm_dptr w,
                              tlm_dptr rstd, int N, int C, tlm_err *err);
/* Per head: w [H*D] or 0; dx written; dw += (skipped when w or dw is 0). */
bool tlm_gpu_rmsnorm_heads_forward(tlm_gpu *g, tlm_dptr out, tlm_dptr rstd, tlm_dptr x, tlm_dptr w, int N, int H, int D,
                                   float eps, tlm_err *err);
bool tlm_gpu_rmsnorm_heads_backward(tlm_gpu *g, tlm_dptr dx, tlm_dptr dw, tlm_dptr dout, tlm_dptr x, tlm_dptr w,
                                    tlm_dptr rstd, int N, int H, int D, tlm_err *err);
/* The same with x and out in bf16 (--precision bf16's Titans: the memory
 * writes its read-out x in bf16, the SiLU gate reads the normalised out in
 * bf16): x read widened, out rounded once; on the same rounded x, the fp32
 * kernels' rstd, dx and dw bit for bit (out rounded). dout, dx, dw fp32. */
bool tlm_gpu_rmsnorm_heads_forward_bf16(tlm_gpu *g, tlm_dptr out_bf16, tlm_dptr rstd, tlm_dptr x_bf16, tlm_dptr w,
                                        int N, int H, int D, float eps, tlm_err *err);
bool tlm_gpu_rmsnorm_heads_backward_bf16(tlm_gpu *g, tlm_dptr dx, tlm_dptr dw, tlm_dptr dout, tlm_dptr x_bf16,
                                         tlm_dptr w, tlm_dptr rstd, int N, int H, int D, tlm_err *err);

/* Tokens `stride` floats apart (3*H*D in a packed qkv); in place ok. */
bool tlm_gpu_rope_forward(tlm_gpu *g, tlm_dptr out, tlm_dptr x, tlm_dptr cos_t, tlm_dptr sin_t, int B, int T, int H,
                          int D, int stride, tlm_err *err);
bool tlm_gpu_rope_backward(tlm_gpu *g, tlm_dptr dx, tlm_dptr dout, tlm_dptr cos_t, tlm_dptr sin_t, int B, int T, int H,
                           int D, int stride, tlm_err *err);
/* The forward with x and out in bf16 (--precision bf16's q and k; stride
 * in elements): the fp32 rotation of the widened x, rounded once. */
bool tlm_gpu_rope_forward_bf16(tlm_gpu *g, tlm_dptr out, tlm_dptr x, tlm_dptr cos_t, tlm_dptr sin_t, int B, int T,
                               int H, int D, int stride, tlm_err *err);

/* lse [N] and losses [N] (losses may be 0) as the CPU op; the mean loss over
 * the rows that are not ignored (0 if none) goes to the device double at
 * loss_out (the caller downloads it), summed in double in a fixed order: the
 * rows in 256 consecutive runs, each in row order, then the runs in order.
 *
 * The _bf16 twins: the logits are bf16, and so is dlogits (the gradient of
 * bf16 logits, which the executor writes in place over them): --precision
 * bf16 (docs/gpu.md, "Precision"). Each logit is widened exactly and the
 * arithmetic is the fp32 kernels', so on the same rounded logits lse, the
 * losses and the mean are the fp32 calls' bits, and each dlogit is the fp32
 * call's rounded to nearest even. */
bool tlm_gpu_crossentropy_forward(tlm_gpu *g, tlm_dptr losses, tlm_dptr lse, tlm_dptr logits, tlm_dptr targets, int N,
                                  int V, tlm_dptr loss_out, tlm_err *err);
bool tlm_gpu_crossentropy_forward_bf16(tlm_gpu *g, tlm_dptr losses, tlm_dptr lse, tlm_dptr logits, tlm_dptr targets,
                                       int N, int V, tlm_dptr loss_out, tlm_err *err);
/* dlogits written (zero rows for ignored targets); may be logits itself. */
bool tlm_gpu_crossentropy_backward(tlm_gpu *g, tlm_dptr dlogits, tlm_dptr logits, tlm_dptr lse, tlm_dptr targets, int N,
                                   int V, float dloss, tlm_err *err);
bool tlm_gpu_crossentropy_backward_bf16(tlm_gpu *g, tlm_dptr dlogits, tlm_dptr logits, tlm_dptr lse, tlm_dptr targets,
                                        int N, int V, float dloss, tlm_err *err);

/* out[r,d] = y[r,d] sigmoid(gate[r]);  dy and dgate written (either may be 0). */
bool tlm_gpu_sigmoid_gate_forward(tlm_gpu *g, tlm_dptr out, tlm_dptr y, tlm_dptr gate, int R, int D, tlm_err *err);
bool tlm_gpu_sigmoid_gate_backward(tlm_gpu *g, tlm_dptr dy, tlm_dptr dgate, tlm_dptr dout, tlm_dptr y, tlm_dptr gate,
                                   int R, int D, tlm_err *err);
/* The same with y, gate and out in bf16 (--precision bf16's gated
 * attention): the fp32 kernels' arithmetic on the widened values, out
 * rounded once; dout, dy and dgate are gradients, fp32. */
bool tlm_gpu_sigmoid_gate_forward_bf16(tlm_gpu *g, tlm_dptr out, tlm_dptr y, tlm_dptr gate, int R, int D, tlm_err *err);
bool tlm_gpu_sigmoid_gate_backward_bf16(tlm_gpu *g, tlm_dptr dy, tlm_dptr dgate, tlm_dptr dout, tlm_dptr y,
                                        tlm_dptr gate, int R, int D, tlm_err *err);

/* h = silu(gate) u;  dgate, du written (dh may be dgate or du). n elements. */
bool tlm_gpu_swiglu_forward(tlm_gpu *g, tlm_dptr h, tlm_dptr gate, tlm_dptr u, size_t n, tlm_err *err);
bool tlm_gpu_swiglu_backward(tlm_gpu *g, tlm_dptr dgate, tlm_dptr du, tlm_dptr dh, tlm_dptr gate, tlm_dptr u, size_t n,
                             tlm_err *err);
/* The same with h, gate and u in bf16 (--precision bf16's Titans SiLU
 * gate): the fp32 kernels' arithmetic on the widened values, h rounded
 * once; dh, dgate and du are gradients, fp32. */
bool tlm_gpu_swiglu_forward_bf16(tlm_gpu *g, tlm_dptr h, tlm_dptr gate, tlm_dptr u, size_t n, tlm_err *err);
bool tlm_gpu_swiglu_backward_bf16(tlm_gpu *g, tlm_dptr dgate, tlm_dptr du, tlm_dptr dh, tlm_dptr gate, tlm_dptr u,
                                  size_t n, tlm_err *err);

#endif
