/* The activations around the Titans memory: what turns the block's q, k, v
 * projections and gate projections into the memory's inputs.
 *
 *   q, k = l2norm(silu(x Wq)), l2norm(silu(x Wk)); v = silu(x Wv)
 *   theta = inner_lr sigmoid(x Wθ); eta = sigmoid(x Wη); alpha = sigmoid(x Wα)
 *
 * The gates are stored as three [N, H] blocks (theta, eta, alpha), the
 * layout tlm_titans_forward reads. Rows are independent, so the loops split
 * over threads without changing a result (past a threshold: a decoded
 * token's one row takes no parallel region, TLM_PARALLEL_FOR_IF). */
#include <string.h>

#include "tlm_rt/ops.h"
#include "vec_inline.h"

#define TLM_L2NORM_EPS 1e-6f

void tlm_titans_qkv_forward(float *act, float *mem_qkv, float *rnorm, const float *qkv, int N, int H, int D) {
    const int A = H * D;
    tlm_silu_forward(act, qkv, (size_t)N * 3 * (size_t)A);
    TLM_PARALLEL_FOR_IF((size_t)N * 3 * (size_t)A >= TLM_PAR_MIN_NORM, for (int n = 0; n < N; n++) {
        const float *a = act + (size_t)n * 3 * A;
        float *m = mem_qkv + (size_t)n * 3 * A, *r = rnorm + (size_t)n * 2 * H;
        tlm_l2norm_forward(m, r, a, H, D, TLM_L2NORM_EPS);
        tlm_l2norm_forward(m + A, r + H, a + A, H, D, TLM_L2NORM_EPS);
        memcpy(m + 2 * A, a + 2 * A, (size_t)A * sizeof(float));
    });
}

void tlm_titans_qkv_backward(float *dqkv, const float *d_mem_qkv, const float *qkv, const float *act,
                             const float *rnorm, int N, int H, int D) {
    const int A = H * D;
    TLM_PARALLEL_FOR_IF((size_t)N * 3 * (size_t)A >= TLM_PAR_MIN_NORM, for (int n = 0; n < N; n++) {
        size_t at = (size_t)n * 3 * A;
        const float *r = rnorm + (size_t)n * 2 * H;
        tlm_l2norm_backward(dqkv + at, d_mem_qkv + at, act + at, r, H, D);
        tlm_l2norm_backward(dqkv + at + A, d_mem_qkv + at + A, act + at + A, r + H, H, D);
        memcpy(dqkv + at + 2 * A, d_mem_qkv + at + 2 * A, (size_t)A * sizeof(float));
    });
    tlm_silu_backward(dqkv, dqkv, qkv, (size_t)N * 3 * (size_t)A);
}

void tlm_titans_gates_forward(float *gates, const float *pre, int N, int H, float inner_lr) {
    const size_t NH = (size_t)N * (size_t)H;
    TLM_PARALLEL_FOR_IF(
        3 * NH >= TLM_PAR_MIN_ELEMENTS, for (int n = 0; n < N; n++) {
            for (int h = 0; h < H; h++) {
                const float *p = pre + (size_t)n * 3 * H;
                size_t i = (size_t)n * H + h;
                gates[i] = inner_lr * sigmoidf(p[h]);
                gates[NH + i] = sigmoidf(p[H + h]);
                gates[2 * NH + i] = sigmoidf(p[2 * H + h]);
            }
        });
}

void tlm_titans_gates_backward(float *dpre, const float *dgates, const float *gates, int N, int H, float inner_lr) {
    const size_t NH = (size_t)N * (size_t)H;
    TLM_PARALLEL_FOR_IF(
        3 * NH >= TLM_PAR_MIN_ELEMENTS, for (int n = 0; n < N; n++) {
            for (int h = 0; h < H; h++) {
                float *d = dpre + (size_t)n * 3 * H;
                size_t i = (size_t)n * H + h;
            /* theta = inner_lr s: its sigmoid s is theta / inner_lr */
                float s = gates[i] / inner_lr, e = gates[NH + i], a = gates[2 * NH + i];
                d[h] = dgates[i] * inner_lr * s * (1 - s);
                d[H + h] = dgates[NH + i] * e * (1 - e);
                d[2 * H + h] = dgates[2 * NH + i] * a * (1 - a);
            }
        });
}
