/* The launches of the sequence mixers' kernels (gpu_mixers.h): a grid that
 * covers the work (the kernels stride over any rest) and the fixed block
 * sizes of gpu_mixers.h. */
#include "gpu_mixers.h"

#include <stdio.h>

#include "tlm_rt/ops.h"

/* A block per (b, h, tile of TLM_GPU_ATTENTION_TILE rows). */
static unsigned attention_grid(int B, int T, int H) {
    return tlm_gpu_blocks((int64_t)B * H * ((T + TLM_GPU_ATTENTION_TILE - 1) / TLM_GPU_ATTENTION_TILE), 1);
}

/* The forwards: y fp32 (acc 0: y accumulates in place) or bf16 (in acc). */
static bool attention_forward(tlm_gpu *g, const char *kernel, tlm_dptr y, tlm_dptr acc, tlm_dptr lse, tlm_dptr q,
                              tlm_dptr k, tlm_dptr v, int B, int T, int H, int D, int stride, tlm_err *err) {
    if (B <= 0 || T <= 0 || H <= 0 || D <= 0) return true;
    void *with_acc[] = {&y, &acc, &lse, &q, &k, &v, &B, &T, &H, &D, &stride};
    void *in_place[] = {&y, &lse, &q, &k, &v, &B, &T, &H, &D, &stride};
    return tlm_gpu_launch(g, kernel, attention_grid(B, T, H), TLM_GPU_ATTENTION_BLOCK, acc ? with_acc : in_place, err);
}

bool tlm_gpu_attention_forward(tlm_gpu *g, tlm_dptr y, tlm_dptr lse, tlm_dptr q, tlm_dptr k, tlm_dptr v, int B, int T,
                               int H, int D, int stride, tlm_err *err) {
    return attention_forward(g, "tlm_attention_fwd", y, 0, lse, q, k, v, B, T, H, D, stride, err);
}

bool tlm_gpu_attention_forward_bf16(tlm_gpu *g, tlm_dptr y_bf16, tlm_dptr acc, tlm_dptr lse, tlm_dptr q, tlm_dptr k,
                                    tlm_dptr v, int B, int T, int H, int D, int stride, tlm_err *err) {
    if (!acc) return tlm_fail(err, "attention's bf16 forward needs its fp32 accumulator");
    return attention_forward(g, "tlm_attention_fwd_bf16", y_bf16, acc, lse, q, k, v, B, T, H, D, stride, err);
}

bool tlm_gpu_attention_forward_qkv_bf16(tlm_gpu *g, tlm_dptr y, tlm_dptr lse, tlm_dptr q, tlm_dptr k, tlm_dptr v, int B,
                                        int T, int H, int D, int stride, tlm_err *err) {
    return attention_forward(g, "tlm_attention_fwd_qkv_bf16", y, 0, lse, q, k, v, B, T, H, D, stride, err);
}

/* The backward's two kernels: "tlm_attention_bwd_dq<suffix>" and
 * "tlm_attention_bwd_dkv<suffix>" (suffix "", "_bf16" or "_qkv_bf16"). */
static bool attention_backward(tlm_gpu *g, const char *suffix, tlm_dptr dq, tlm_dptr dk, tlm_dptr dv, tlm_dptr dy,
                               tlm_dptr y, tlm_dptr lse, tlm_dptr q, tlm_dptr k, tlm_dptr v, int B, int T, int H, int D,
                               int stride, tlm_err *err) {
    if (B <= 0 || T <= 0 || H <= 0 || D <= 0) return true;
    unsigned grid = attention_grid(B, T, H);
    char dq_kernel[48], dkv_kernel[48];
    snprintf(dq_kernel, sizeof dq_kernel, "tlm_attention_bwd_dq%s", suffix);
    snprintf(dkv_kernel, sizeof dkv_kernel, "tlm_attention_bwd_dkv%s", suffix);
    void *dq_args[] = {&dq, &dy, &y, &lse, &q, &k, &v, &B, &T, &H, &D, &stride};
    if (!tlm_gpu_launch(g, dq_kernel, grid, TLM_GPU_ATTENTION_BLOCK, dq_args, err)) return false;
    void *dkv_args[] = {&dk, &dv, &dy, &y, &lse, &q, &k, &v, &B, &T, &H, &D, &stride};
    return tlm_gpu_launch(g, dkv_kernel, grid, TLM_GPU_ATTENTION_BLOCK, dkv_args, err);
}

bool tlm_gpu_attention_backward(tlm_gpu *g, tlm_dptr dq, tlm_dptr dk, tlm_dptr dv, tlm_dptr dy, tlm_dptr y,
                                tlm_dptr lse, tlm_dptr q, tlm_dptr k, tlm_dptr v, int B, int T, int H, int D,
                                int stride, tlm_err *err) {
    return attention_backward(g, "", dq, dk, dv, dy, y, lse, q, k, v, B, T, H, D, stride, err);
}

bool tlm_gpu_attention_backward_bf16(tlm_gpu *g, tlm_dptr dq, tlm_dptr dk, tlm_dptr dv, tlm_dptr dy, tlm_dptr y_bf16,
                                     tlm_dptr lse, tlm_dptr q, tlm_dptr k, tlm_dptr v, int B, int T, int H, int D,
                                     int stride, tlm_err *err) {
    return attention_backward(g, "_bf16", dq, dk, dv, dy, y_bf16, lse, q, k, v, B, T, H, D, stride, err);
}

bool tlm_gpu_attention_backward_qkv_bf16(tlm_gpu *g, tlm_dptr dq, tlm_dptr dk, tlm_dptr dv, tlm_dptr dy, tlm_dptr y,
                                         tlm_dptr lse, tlm_dptr q, tlm_dptr k, tlm_dptr v, int B, int T, int H, int D,
                                         int stride, tlm_err *err) {
    return attention_backward(g, "_qkv_bf16", dq, dk, dv, dy, y, lse, q, k, v, B, T, H, D, stride, err);
}

static bool titans_forward(tlm_gpu *g, const char *kernel, tlm_dptr y, tlm_dptr saved, tlm_dptr q, tlm_dptr k,
                           tlm_dptr v, int stride, tlm_dptr theta, tlm_dptr eta, tlm_dptr alpha, int B, int T, int H,
                           int D, int chunk, tlm_err *err) {
    if (B <= 0 || T <= 0 || H <= 0 || D <= 0 || chunk <= 0) return true;
    void *args[] = {&y, &saved, &q, &k, &v, &stride, &theta, &eta, &alpha, &B, &T, &H, &D, &chunk};
    return tlm_gpu_launch(g, kernel, tlm_gpu_blocks((int64_t)B * H, 1), TLM_GPU_TITANS_BLOCK, args, err);
}

bool tlm_gpu_titans_forward(tlm_gpu *g, tlm_dptr y, tlm_dptr saved, tlm_dptr q, tlm_dptr k, tlm_dptr v, int stride,
                            tlm_dptr theta, tlm_dptr eta, tlm_dptr alpha, int B, int T, int H, int D, int chunk,
                            tlm_err *err) {
    return titans_forward(g, "tlm_titans_fwd", y, saved, q, k, v, stride, theta, eta, alpha, B, T, H, D, chunk, err);
}

bool tlm_gpu_titans_forward_bf16(tlm_gpu *g, tlm_dptr y_bf16, tlm_dptr saved, tlm_dptr q, tlm_dptr k, tlm_dptr v,
                                 int stride, tlm_dptr theta, tlm_dptr eta, tlm_dptr alpha, int B, int T, int H, int D,
                                 int chunk, tlm_err *err) {
    return titans_forward(g, "tlm_titans_fwd_bf16", y_bf16, saved, q, k, v, stride, theta, eta, alpha, B, T, H, D,
                          chunk, err);
}

/* The backward's scratch per (b, h), in floats: the CPU op's per-thread
 * scratch (the same layout), rounded up to an even count so that the two
 * n x n doubles of the gates' walk after it (n = min(chunk, 64)) are
 * 8-byte aligned (titans.cu). */
static long long titans_scratch_per_head(int D, int chunk) {
    long long n = chunk < 64 ? chunk : 64;
    return (long long)((tlm_titans_scratch_floats(D, chunk) + 1) / 2 * 2) + 4 * n * n;
}

size_t tlm_gpu_titans_scratch_bytes(int B, int H, int D, int chunk) {
    if (B <= 0 || H <= 0 || D <= 0 || chunk <= 0) return 0;
    return (size_t)B * (size_t)H * (size_t)titans_scratch_per_head(D, chunk) * sizeof(float);
}

static bool titans_backward(tlm_gpu *g, const char *kernel, tlm_dptr dq, tlm_dptr dk, tlm_dptr dv, tlm_dptr dtheta,
                            tlm_dptr deta, tlm_dptr dalpha, tlm_dptr dy, tlm_dptr saved, tlm_dptr q, tlm_dptr k,
                            int stride, tlm_dptr theta, tlm_dptr eta, tlm_dptr alpha, int B, int T, int H, int D,
                            int chunk, tlm_dptr scratch, tlm_err *err) {
    if (B <= 0 || T <= 0 || H <= 0 || D <= 0 || chunk <= 0) return true;
    long long per_head = titans_scratch_per_head(D, chunk);
    void *args[] = {&dq,    &dk,  &dv,    &dtheta, &deta, &dalpha, &dy, &saved, &q,       &k,       &stride,
                    &theta, &eta, &alpha, &B,      &T,    &H,      &D,  &chunk, &scratch, &per_head};
    return tlm_gpu_launch(g, kernel, tlm_gpu_blocks((int64_t)B * H, 1), TLM_GPU_TITANS_BLOCK, args, err);
}

bool tlm_gpu_titans_backward(tlm_gpu *g, tlm_dptr dq, tlm_dptr dk, tlm_dptr dv, tlm_dptr dtheta, tlm_dptr deta,
                             tlm_dptr dalpha, tlm_dptr dy, tlm_dptr saved, tlm_dptr q, tlm_dptr k, tlm_dptr v,
                             int stride, tlm_dptr theta, tlm_dptr eta, tlm_dptr alpha, int B, int T, int H, int D,
                             int chunk, tlm_dptr scratch, tlm_err *err) {
    (void)v; /* enters only through the saved errors, as on the CPU */
    return titans_backward(g, "tlm_titans_bwd", dq, dk, dv, dtheta, deta, dalpha, dy, saved, q, k, stride, theta, eta,
                           alpha, B, T, H, D, chunk, scratch, err);
}

bool tlm_gpu_titans_backward_bf16(tlm_gpu *g, tlm_dptr dq, tlm_dptr dk, tlm_dptr dv, tlm_dptr dtheta, tlm_dptr deta,
                                  tlm_dptr dalpha, tlm_dptr dy, tlm_dptr saved, tlm_dptr q, tlm_dptr k, tlm_dptr v,
                                  int stride, tlm_dptr theta, tlm_dptr eta, tlm_dptr alpha, int B, int T, int H, int D,
                                  int chunk, tlm_dptr scratch, tlm_err *err) {
    (void)v;
    return titans_backward(g, "tlm_titans_bwd_bf16", dq, dk, dv, dtheta, deta, dalpha, dy, saved, q, k, stride, theta,
                           eta, alpha, B, T, H, D, chunk, scratch, err);
}

static bool titans_qkv_forward(tlm_gpu *g, const char *kernel, tlm_dptr act, tlm_dptr mem_qkv, tlm_dptr rnorm,
                               tlm_dptr qkv, int N, int H, int D, tlm_err *err) {
    if (N <= 0 || H <= 0 || D <= 0) return true;
    void *args[] = {&act, &mem_qkv, &rnorm, &qkv, &N, &H, &D};
    unsigned grid = tlm_gpu_blocks((int64_t)N * 3 * H, TLM_GPU_TITANS_ACT_BLOCK);
    return tlm_gpu_launch(g, kernel, grid, TLM_GPU_TITANS_ACT_BLOCK, args, err);
}

bool tlm_gpu_titans_qkv_forward(tlm_gpu *g, tlm_dptr act, tlm_dptr mem_qkv, tlm_dptr rnorm, tlm_dptr qkv, int N, int H,
                                int D, tlm_err *err) {
    return titans_qkv_forward(g, "tlm_titans_act_qkv_fwd", act, mem_qkv, rnorm, qkv, N, H, D, err);
}

bool tlm_gpu_titans_qkv_forward_bf16(tlm_gpu *g, tlm_dptr act, tlm_dptr mem_qkv, tlm_dptr rnorm, tlm_dptr qkv, int N,
                                     int H, int D, tlm_err *err) {
    return titans_qkv_forward(g, "tlm_titans_act_qkv_fwd_bf16", act, mem_qkv, rnorm, qkv, N, H, D, err);
}

static bool titans_qkv_backward(tlm_gpu *g, const char *kernel, tlm_dptr dqkv, tlm_dptr d_mem_qkv, tlm_dptr qkv,
                                tlm_dptr act, tlm_dptr rnorm, int N, int H, int D, tlm_err *err) {
    if (N <= 0 || H <= 0 || D <= 0) return true;
    void *args[] = {&dqkv, &d_mem_qkv, &qkv, &act, &rnorm, &N, &H, &D};
    unsigned grid = tlm_gpu_blocks((int64_t)N * 3 * H, TLM_GPU_TITANS_ACT_BLOCK);
    return tlm_gpu_launch(g, kernel, grid, TLM_GPU_TITANS_ACT_BLOCK, args, err);
}

bool tlm_gpu_titans_qkv_backward(tlm_gpu *g, tlm_dptr dqkv, tlm_dptr d_mem_qkv, tlm_dptr qkv, tlm_dptr act,
                                 tlm_dptr rnorm, int N, int H, int D, tlm_err *err) {
    return titans_qkv_backward(g, "tlm_titans_act_qkv_bwd", dqkv, d_mem_qkv, qkv, act, rnorm, N, H, D, err);
}

bool tlm_gpu_titans_qkv_backward_bf16(tlm_gpu *g, tlm_dptr dqkv, tlm_dptr d_mem_qkv, tlm_dptr qkv, tlm_dptr act,
                                      tlm_dptr rnorm, int N, int H, int D, tlm_err *err) {
    return titans_qkv_backward(g, "tlm_titans_act_qkv_bwd_bf16", dqkv, d_mem_qkv, qkv, act, rnorm, N, H, D, err);
}

bool tlm_gpu_titans_gates_forward(tlm_gpu *g, tlm_dptr gates, tlm_dptr pre, int N, int H, float inner_lr,
                                  tlm_err *err) {
    if (N <= 0 || H <= 0) return true;
    void *args[] = {&gates, &pre, &N, &H, &inner_lr};
    unsigned grid = tlm_gpu_blocks((int64_t)N * H, TLM_GPU_TITANS_ACT_BLOCK);
    return tlm_gpu_launch(g, "tlm_titans_act_gates_fwd", grid, TLM_GPU_TITANS_ACT_BLOCK, args, err);
}

bool tlm_gpu_titans_gates_backward(tlm_gpu *g, tlm_dptr dpre, tlm_dptr dgates, tlm_dptr gates, int N, int H,
                                   float inner_lr, tlm_err *err) {
    if (N <= 0 || H <= 0) return true;
    void *args[] = {&dpre, &dgates, &gates, &N, &H, &inner_lr};
    unsigned grid = tlm_gpu_blocks((int64_t)N * H, TLM_GPU_TITANS_ACT_BLOCK);
    return tlm_gpu_launch(g, "tlm_titans_act_gates_bwd", grid, TLM_GPU_TITANS_ACT_BLOCK, args, err);
}
