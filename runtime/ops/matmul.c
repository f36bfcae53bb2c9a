/* Linear layers on OpenBLAS. Weights are [out, in] (nn.Linear), rows of x
 * are tokens:
 *
 *   forward   y[N,out]  = x[N,in] W^T
 *   backward  dx[N,in]  = dy[N,out] W
 *             dW[out,in] += dy^T x
 *
 * OpenBLAS splits a GEMM over output tiles, not over the inner dimension,
 * so for a fixed thread count its results are reproducible run to run. */
#include "tlm_rt/ops.h"

#include <cblas.h>

void tlm_linear_forward(float *y, const float *x, const float *w, int N, int in, int out, bool accumulate) {
    /* One token (sampling with a KV cache): a matrix-vector product,
     * without packing the weight as a GEMM would (matvec.c). */
    if (N == 1) {
        tlm_matvec(y, w, x, out, in, in, accumulate);
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, out, in, 1.0f, x, in, w, in, accumulate ? 1.0f : 0.0f, y,
                out);
}

void tlm_linear_backward(float *dx, float *dw, const float *dy, const float *x, const float *w, int N, int in, int out,
                         bool accumulate_dx) {
    if (dx) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, in, out, 1.0f, dy, out, w, in,
                    accumulate_dx ? 1.0f : 0.0f, dx, in);
    }
    if (dw) { cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, N, 1.0f, dy, out, x, in, 1.0f, dw, in); }
}
