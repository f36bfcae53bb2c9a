/* Row-major linear maps on the device, as GEMM descriptions (tlm_gemm):
 * the same semantics as tlm_linear_forward / tlm_linear_backward
 * (tlm_rt/ops.h), weights in the nn.Linear layout [out, in].
 *
 * cuBLAS is column-major: a row-major [r, c] matrix is, to it, the c×r
 * matrix with leading dimension c. So y = x W^T (row-major) is
 * y^T = W x^T in its terms: D (out×N, ld out) = op(A) B with A the
 * weight seen as in×out (transposed: out×in) and B = x seen as in×N. */
#ifndef TLM_GPU_LINEAR_H
#define TLM_GPU_LINEAR_H

#include "gpu.h"

/* The descriptions, for tests and for whoever wants to batch them. */
tlm_gemm tlm_gpu_linear_forward_gemm(tlm_dptr y, tlm_dptr x, tlm_dptr w, int N, int in, int out, bool accumulate);
tlm_gemm tlm_gpu_linear_dx_gemm(tlm_dptr dx, tlm_dptr dy, tlm_dptr w, int N, int in, int out, bool accumulate);
tlm_gemm tlm_gpu_linear_dw_gemm(tlm_dptr dw, tlm_dptr dy, tlm_dptr x, int N, int in, int out);

/* y[N,out] = x[N,in] W[out,in]^T (y += when accumulate). */
bool tlm_gpu_linear_forward(tlm_gpu *g, tlm_dptr y, tlm_dptr x, tlm_dptr w, int N, int in, int out, bool accumulate,
                            tlm_err *err);
/* dx[N,in] = dy W (+= when accumulate_dx), dw[out,in] += dy^T x; dx or dw
 * may be 0 to skip that half. */
bool tlm_gpu_linear_backward(tlm_gpu *g, tlm_dptr dx, tlm_dptr dw, tlm_dptr dy, tlm_dptr x, tlm_dptr w, int N, int in,
                             int out, bool accumulate_dx, tlm_err *err);

#endif
