#include "gpu_linear.h"

static tlm_gemm f32_gemm(void) {
    return (tlm_gemm){
        .a_type = TLM_GEMM_F32, .b_type = TLM_GEMM_F32, .cd_type = TLM_GEMM_F32, .batch = 1, .alpha = 1.0f};
}

tlm_gemm tlm_gpu_linear_forward_gemm(tlm_dptr y, tlm_dptr x, tlm_dptr w, int N, int in, int out, bool accumulate) {
    tlm_gemm g = f32_gemm();
    g.trans_a = true; /* W seen as in×out, used as out×in */
    g.m = out, g.n = N, g.k = in;
    g.a = w, g.lda = in;
    g.b = x, g.ldb = in;
    g.d = y, g.ldd = out;
    g.c = accumulate ? y : 0, g.ldc = out;
    g.beta = accumulate ? 1.0f : 0.0f;
    return g;
}

tlm_gemm tlm_gpu_linear_dx_gemm(tlm_dptr dx, tlm_dptr dy, tlm_dptr w, int N, int in, int out, bool accumulate) {
    tlm_gemm g = f32_gemm(); /* dx^T (in×N) = W^T (in×out, as stored) dy^T (out×N) */
    g.m = in, g.n = N, g.k = out;
    g.a = w, g.lda = in;
    g.b = dy, g.ldb = out;
    g.d = dx, g.ldd = in;
    g.c = accumulate ? dx : 0, g.ldc = in;
    g.beta = accumulate ? 1.0f : 0.0f;
    return g;
}

tlm_gemm tlm_gpu_linear_dw_gemm(tlm_dptr dw, tlm_dptr dy, tlm_dptr x, int N, int in, int out) {
    tlm_gemm g = f32_gemm(); /* dW^T (in×out) += x^T (in×N) dy (N×out: dy^T stored out×N, transposed) */
    g.trans_b = true;
    g.m = in, g.n = out, g.k = N;
    g.a = x, g.lda = in;
    g.b = dy, g.ldb = out;
    g.c = dw, g.ldc = in;
    g.d = dw, g.ldd = in;
    g.beta = 1.0f;
    return g;
}

bool tlm_gpu_linear_forward(tlm_gpu *g, tlm_dptr y, tlm_dptr x, tlm_dptr w, int N, int in, int out, bool accumulate,
                            tlm_err *err) {
    tlm_gemm d = tlm_gpu_linear_forward_gemm(y, x, w, N, in, out, accumulate);
    return tlm_gpu_gemm(g, &d, err);
}

bool tlm_gpu_linear_backward(tlm_gpu *g, tlm_dptr dx, tlm_dptr dw, tlm_dptr dy, tlm_dptr x, tlm_dptr w, int N, int in,
                             int out, bool accumulate_dx, tlm_err *err) {
    if (dx) {
        tlm_gemm d = tlm_gpu_linear_dx_gemm(dx, dy, w, N, in, out, accumulate_dx);
        if (!tlm_gpu_gemm(g, &d, err)) return false;
    }
    if (dw) {
        tlm_gemm d = tlm_gpu_linear_dw_gemm(dw, dy, x, N, in, out);
        if (!tlm_gpu_gemm(g, &d, err)) return false;
    }
    return true;
}
