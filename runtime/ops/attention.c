/* Causal multi-head softmax attention.
 *
 * For one (batch b, head h), with q_t, k_u, v_u the head slices (size D):
 *   s_tu = q_t . k_u / sqrt(D)          for u <= t (causal)
 *   P_t  = softmax_u(s_t)               saved in att [B,H,T,T]
 *   y_t  = sum_u P_tu v_u               written to y [B,T,H*D]
 *
 * Backward, with dy_t given:
 *   dP_tu = dy_t . v_u
 *   dS_tu = P_tu (dP_tu - sum_u' P_tu' dP_tu')   and that sum is dy_t . y_t
 *   dq_t  = sum_u dS_tu k_u / sqrt(D)
 *   dk_u  = sum_t dS_tu q_t / sqrt(D)
 *   dv_u  = sum_t P_tu dy_t
 *
 * Work is split over (b, h) pairs: each owns its rows of att, its slice of y
 * and its slices of dq, dk, dv, so threads never share an output and every
 * sum runs in a fixed order (deterministic for any thread count).
 * Cost is O(T^2 D) per pair, small next to the projections for the
 * contexts this runtime trains; the probabilities are kept rather than
 * recomputed (B*H*T*T floats), trading memory for a simpler backward.
 */
#include "tlm_rt/ops.h"

#include <math.h>
#include <string.h>

#include "vec_inline.h"

void tlm_attention_forward(float *y, float *att, const float *q, const float *k, const float *v, int B, int T, int H,
                           int D, int stride) {
    const float scale = 1.0f / sqrtf((float)D);
    const int C = H * D;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            const float *qb = q + (size_t)b * T * stride + (size_t)h * D;
            const float *kb = k + (size_t)b * T * stride + (size_t)h * D;
            const float *vb = v + (size_t)b * T * stride + (size_t)h * D;
            for (int t = 0; t < T; t++) {
                const float *qt = qb + (size_t)t * stride;
                float *p = att + (((size_t)b * H + h) * T + t) * T;
                /* scores and their max, for a stable softmax */
                float mx = -INFINITY;
                for (int u = 0; u <= t; u++) {
                    float s = dot(qt, kb + (size_t)u * stride, D) * scale;
                    p[u] = s;
                    if (s > mx) mx = s;
                }
                float sum = 0.0f;
                for (int u = 0; u <= t; u++) {
                    p[u] = expf(p[u] - mx);
                    sum += p[u];
                }
                float inv = 1.0f / sum;
                for (int u = 0; u <= t; u++) p[u] *= inv;
                for (int u = t + 1; u < T; u++) p[u] = 0.0f;
                /* y_t = sum_u P_tu v_u */
                float *yt = y + ((size_t)b * T + t) * C + (size_t)h * D;
                memset(yt, 0, (size_t)D * sizeof(float));
                for (int u = 0; u <= t; u++) { axpy(yt, p[u], vb + (size_t)u * stride, D); }
            }
        }
    }
}

void tlm_attention_backward(float *dq, float *dk, float *dv, const float *dy, const float *y, const float *att,
                            const float *q, const float *k, const float *v, int B, int T, int H, int D, int stride) {
    const float scale = 1.0f / sqrtf((float)D);
    const int C = H * D;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            size_t base = (size_t)b * T * stride + (size_t)h * D;
            const float *qb = q + base, *kb = k + base, *vb = v + base;
            float *dqb = dq + base, *dkb = dk + base, *dvb = dv + base;
            /* the outputs are written: clear this pair's slices first, then
             * accumulate into them below */
            for (int t = 0; t < T; t++) {
                size_t at = (size_t)t * stride;
                memset(dqb + at, 0, (size_t)D * sizeof(float));
                memset(dkb + at, 0, (size_t)D * sizeof(float));
                memset(dvb + at, 0, (size_t)D * sizeof(float));
            }
            for (int t = 0; t < T; t++) {
                const float *p = att + (((size_t)b * H + h) * T + t) * T;
                size_t yo = ((size_t)b * T + t) * C + (size_t)h * D;
                const float *dyt = dy + yo;
                const float *qt = qb + (size_t)t * stride;
                float *dqt = dqb + (size_t)t * stride;
                /* sum_u P_tu dP_tu = dy_t . sum_u P_tu v_u = dy_t . y_t */
                float rowdot = dot(dyt, y + yo, D);
                for (int u = 0; u <= t; u++) {
                    size_t uo = (size_t)u * stride;
                    float dp = dot(dyt, vb + uo, D);
                    float ds = p[u] * (dp - rowdot) * scale;
                    axpy(dqt, ds, kb + uo, D);
                    axpy(dkb + uo, ds, qt, D);
                    axpy(dvb + uo, p[u], dyt, D);
                }
            }
        }
    }
}
