/* Causal multi-head softmax attention, flash style: blocked, with one
 * log-sum-exp per (token, head) saved instead of the probabilities.
 *
 * For one (batch b, head h), with q_t, k_u, v_u the head slices (size D):
 *   s_tu = q_t . k_u / sqrt(D)          for u <= t (causal)
 *   lse_t = log sum_u exp(s_tu)         saved in lse [B,T,H]
 *   P_tu = exp(s_tu - lse_t)
 *   y_t  = sum_u P_tu v_u               written to y [B,T,H*D]
 *
 * Forward: query blocks of ATT_BQ rows, each walking the key blocks of
 * ATT_BK rows up to its diagonal with an online softmax (a running max m_t
 * and sum l_t per row; y_t, accumulated in place, is rescaled by
 * exp(m_old - m_new) when the max grows), then y_t /= l_t and
 * lse_t = m_t + log l_t.
 *
 * Backward, with dy_t given, recomputing P block by block from lse:
 *   D_t   = dy_t . y_t                  (= sum_u P_tu dP_tu)
 *   dP_tu = dy_t . v_u
 *   dS_tu = P_tu (dP_tu - D_t)
 *   dq_t  = sum_u dS_tu k_u / sqrt(D)
 *   dk_u  = sum_t dS_tu q_t / sqrt(D)
 *   dv_u  = sum_t P_tu dy_t
 *
 * Every block product is one kernel (accumulate): a row of the output held
 * in vector registers while the terms stream through, each term a scalar
 * times a contiguous row. The scores S = Q K^T and dP = dY V^T run it over
 * a transposed key block (rows of ATT_BK floats); P V, dS K, P^T dY and
 * dS^T Q run it over rows of D. No T x T matrix exists: the scratch is a
 * few ATT_BQ x ATT_BK blocks and a transposed key chunk on each thread's
 * stack (48 KiB).
 *
 * Work is split over (b, h, query block) in the forward and (b, h) pairs in
 * the backward: each task owns its rows of y and lse, or its pair's slices
 * of dq, dk, dv, and walks its blocks in a fixed order, so every sum runs in
 * the same order for any thread count (deterministic). */
#include "tlm_rt/ops.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "vec_inline.h"

enum {
    ATT_BQ = 64, /* query rows per block */
    ATT_BK = 64, /* key rows per block */
    ATT_DC = 64, /* head channels per transposed chunk of a key block */
};

/* Eight floats as one vector (GCC's and Clang's vector extension): two
 * SSE registers on x86-64's baseline, one AVX register in the x86-64-v3
 * clone below. Vectors never cross a call (the psABI of 32-byte vectors
 * depends on the target): loads and stores are memcpys in the body. */
typedef float att_v8 __attribute__((vector_size(32)));
#define ATT_LOAD(v, p) memcpy(&(v), (p), sizeof(v))
#define ATT_STORE(p, v) memcpy((p), &(v), sizeof(v))

/* The kernel below is compiled twice on x86-64, for the baseline and for
 * x86-64-v3 (AVX2, FMA), and the loader picks one for the CPU (an ifunc).
 * Results then depend on the CPU (a fused multiply-add rounds once) as the
 * generated MLP kernels' do, never on the thread count. */
#if defined(__x86_64__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define ATT_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#endif
#endif
#ifndef ATT_CLONES
#define ATT_CLONES
#endif

/* dst[d] (= 0 if fresh) += sum_i coef[i * cstride] src_i[d] for i < n in order, d < D,
 * src_i = src + i*sstride: chunks of 64 channels of dst held in eight
 * vectors across the n terms, then of 32, then of 8, then single channels. Every
 * element's sum runs in the order of n axpys (a product and an add per
 * term, or one fused), whatever the chunk. The GEMM-shaped kernel of every
 * block product below: P V, dS K, P^T dY, dS^T Q, and the scores over a
 * transposed key block. */
ATT_CLONES
static void accumulate(float *dst, bool fresh, const float *coef, int cstride, int n, const float *src, size_t sstride,
                       int D) {
    const att_v8 zero = {0};
    int d0 = 0;
    for (; d0 + 64 <= D; d0 += 64) { /* eight named vectors: registers, not an array in memory */
        float *o = dst + d0;
        att_v8 a0, a1, a2, a3, a4, a5, a6, a7, t;
        if (fresh) {
            a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = zero;
        } else {
            ATT_LOAD(a0, o), ATT_LOAD(a1, o + 8), ATT_LOAD(a2, o + 16), ATT_LOAD(a3, o + 24);
            ATT_LOAD(a4, o + 32), ATT_LOAD(a5, o + 40), ATT_LOAD(a6, o + 48), ATT_LOAD(a7, o + 56);
        }
        for (int i = 0; i < n; i++) {
            const float x = coef[(size_t)i * cstride];
            const att_v8 xv = {x, x, x, x, x, x, x, x};
            const float *si = src + (size_t)i * sstride + d0;
            ATT_LOAD(t, si), a0 += xv * t;
            ATT_LOAD(t, si + 8), a1 += xv * t;
            ATT_LOAD(t, si + 16), a2 += xv * t;
            ATT_LOAD(t, si + 24), a3 += xv * t;
            ATT_LOAD(t, si + 32), a4 += xv * t;
            ATT_LOAD(t, si + 40), a5 += xv * t;
            ATT_LOAD(t, si + 48), a6 += xv * t;
            ATT_LOAD(t, si + 56), a7 += xv * t;
        }
        ATT_STORE(o, a0), ATT_STORE(o + 8, a1), ATT_STORE(o + 16, a2), ATT_STORE(o + 24, a3);
        ATT_STORE(o + 32, a4), ATT_STORE(o + 40, a5), ATT_STORE(o + 48, a6), ATT_STORE(o + 56, a7);
    }
    for (; d0 + 32 <= D; d0 += 32) { /* four chains: a part row, or D = 32 */
        float *o = dst + d0;
        att_v8 a0 = zero, a1 = zero, a2 = zero, a3 = zero, t;
        if (!fresh) ATT_LOAD(a0, o), ATT_LOAD(a1, o + 8), ATT_LOAD(a2, o + 16), ATT_LOAD(a3, o + 24);
        for (int i = 0; i < n; i++) {
            const float x = coef[(size_t)i * cstride];
            const att_v8 xv = {x, x, x, x, x, x, x, x};
            const float *si = src + (size_t)i * sstride + d0;
            ATT_LOAD(t, si), a0 += xv * t;
            ATT_LOAD(t, si + 8), a1 += xv * t;
            ATT_LOAD(t, si + 16), a2 += xv * t;
            ATT_LOAD(t, si + 24), a3 += xv * t;
        }
        ATT_STORE(o, a0), ATT_STORE(o + 8, a1), ATT_STORE(o + 16, a2), ATT_STORE(o + 24, a3);
    }
    for (; d0 + 8 <= D; d0 += 8) {
        att_v8 a = zero, t;
        if (!fresh) ATT_LOAD(a, dst + d0);
        for (int i = 0; i < n; i++) {
            const float x = coef[(size_t)i * cstride];
            const att_v8 xv = {x, x, x, x, x, x, x, x};
            ATT_LOAD(t, src + (size_t)i * sstride + d0);
            a += xv * t;
        }
        ATT_STORE(dst + d0, a);
    }
    for (; d0 < D; d0++) {
        float a = fresh ? 0.0f : dst[d0];
        for (int i = 0; i < n; i++) a += coef[(size_t)i * cstride] * src[(size_t)i * sstride + d0];
        dst[d0] = a;
    }
}

/* out[r][c] = scale * (a_r . b_c) for r < rn, c < kn and c <= r + ahead
 * (the causal mask: ahead = the query block's first row less the key
 * block's), a_r = a + r*astride, b_c = b + c*bstride, D channels each; the
 * rest of out[r] may hold anything. The key block is transposed a chunk of
 * channels at a time, so a row of scores is an accumulate over the chunk's
 * channels, as wide as the row sees (in steps of 8: the diagonal block's
 * masked half is not computed). */
/* The columns of row r a block product computes: those it sees, c < kn
 * and c <= r + ahead, rounded up to a multiple of 8 (within ATT_BK). */
static int row_width(int r, int kn, int ahead) {
    int n = r + ahead + 1 < kn ? r + ahead + 1 : kn;
    if (n <= 0) return 0;
    n = (n + 7) / 8 * 8;
    return n < ATT_BK ? n : ATT_BK;
}

static void block_products(float out[ATT_BQ][ATT_BK], const float *a, int astride, int rn, const float *b, int bstride,
                           int kn, int ahead, int D, float scale) {
    float bt[ATT_DC][ATT_BK];
    for (int d0 = 0; d0 < D; d0 += ATT_DC) {
        const int dc = D - d0 < ATT_DC ? D - d0 : ATT_DC;
        for (int d = 0; d < dc; d++) {
            for (int c = 0; c < kn; c++) bt[d][c] = b[(size_t)c * bstride + d0 + d];
            for (int c = kn; c < ATT_BK; c++) bt[d][c] = 0.0f;
        }
        for (int r = 0; r < rn; r++)
            accumulate(out[r], d0 == 0, a + (size_t)r * astride + d0, 1, dc, bt[0], ATT_BK, row_width(r, kn, ahead));
    }
    for (int r = 0; r < rn; r++) {
        const int w = row_width(r, kn, ahead);
#pragma omp simd
        for (int c = 0; c < w; c++) out[r][c] *= scale;
    }
}

/* Keys of block j0 that query row t sees: u <= t, at most kn. */
static int visible(int t, int j0, int kn) {
    int n = t - j0 + 1;
    return n < 0 ? 0 : n < kn ? n : kn;
}

void tlm_attention_forward(float *y, float *lse, const float *q, const float *k, const float *v, int B, int T, int H,
                           int D, int stride) {
    const float scale = 1.0f / sqrtf((float)D);
    const int C = H * D, nq = (T + ATT_BQ - 1) / ATT_BQ;
#pragma omp parallel for collapse(3) schedule(dynamic, 1)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            for (int qi = 0; qi < nq; qi++) {
                const float *qb = q + (size_t)b * T * stride + (size_t)h * D;
                const float *kb = k + (size_t)b * T * stride + (size_t)h * D;
                const float *vb = v + (size_t)b * T * stride + (size_t)h * D;
                float *yb = y + (size_t)b * T * C + (size_t)h * D;
                const int i0 = qi * ATT_BQ, rn = T - i0 < ATT_BQ ? T - i0 : ATT_BQ;
                float s[ATT_BQ][ATT_BK], m[ATT_BQ], l[ATT_BQ];
                for (int r = 0; r < rn; r++) {
                    m[r] = -INFINITY, l[r] = 0.0f;
                    memset(yb + (size_t)(i0 + r) * C, 0, (size_t)D * sizeof(float));
                }
                for (int j0 = 0; j0 < i0 + rn; j0 += ATT_BK) {
                    const int kn = i0 + rn - j0 < ATT_BK ? i0 + rn - j0 : ATT_BK;
                    block_products(s, qb + (size_t)i0 * stride, stride, rn, kb + (size_t)j0 * stride, stride, kn,
                                   i0 - j0, D, scale);
                    for (int r = 0; r < rn; r++) {
                        const int t = i0 + r, n = visible(t, j0, kn);
                        if (n == 0) continue;
                        float *p = s[r], mx = m[r];
                        for (int c = 0; c < n; c++) mx = p[c] > mx ? p[c] : mx;
                        const float alpha = expf(m[r] - mx); /* 0 on the first block: m = -inf */
                        float sum = 0.0f;
                        for (int c = 0; c < n; c++) {
                            p[c] = expf(p[c] - mx);
                            sum += p[c];
                        }
                        l[r] = l[r] * alpha + sum;
                        m[r] = mx;
                        float *yt = yb + (size_t)t * C;
                        if (alpha != 1.0f) {
#pragma omp simd
                            for (int d = 0; d < D; d++) yt[d] *= alpha;
                        }
                        accumulate(yt, false, p, 1, n, vb + (size_t)j0 * stride, (size_t)stride, D);
                    }
                }
                for (int r = 0; r < rn; r++) {
                    const int t = i0 + r;
                    float *yt = yb + (size_t)t * C, inv = 1.0f / l[r];
#pragma omp simd
                    for (int d = 0; d < D; d++) yt[d] *= inv;
                    lse[((size_t)b * T + t) * H + h] = m[r] + logf(l[r]);
                }
            }
        }
    }
}

void tlm_attention_backward(float *dq, float *dk, float *dv, const float *dy, const float *y, const float *lse,
                            const float *q, const float *k, const float *v, int B, int T, int H, int D, int stride) {
    const float scale = 1.0f / sqrtf((float)D);
    const int C = H * D;
#pragma omp parallel for collapse(2) schedule(dynamic, 1)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            size_t base = (size_t)b * T * stride + (size_t)h * D, ybase = (size_t)b * T * C + (size_t)h * D;
            const float *qb = q + base, *kb = k + base, *vb = v + base, *dyb = dy + ybase, *yb = y + ybase;
            float *dqb = dq + base, *dkb = dk + base, *dvb = dv + base;
            /* the outputs are written: clear this pair's slices first, then
             * accumulate into them below */
            for (int t = 0; t < T; t++) {
                size_t at = (size_t)t * stride;
                memset(dqb + at, 0, (size_t)D * sizeof(float));
                memset(dkb + at, 0, (size_t)D * sizeof(float));
                memset(dvb + at, 0, (size_t)D * sizeof(float));
            }
            float p[ATT_BQ][ATT_BK], ds[ATT_BQ][ATT_BK], rowdot[ATT_BQ], rowlse[ATT_BQ];
            for (int i0 = 0; i0 < T; i0 += ATT_BQ) {
                const int rn = T - i0 < ATT_BQ ? T - i0 : ATT_BQ;
                for (int r = 0; r < rn; r++) {
                    size_t yo = (size_t)(i0 + r) * C;
                    rowdot[r] = dot(dyb + yo, yb + yo, D);
                    rowlse[r] = lse[((size_t)b * T + i0 + r) * H + h];
                }
                for (int j0 = 0; j0 < i0 + rn; j0 += ATT_BK) {
                    const int kn = i0 + rn - j0 < ATT_BK ? i0 + rn - j0 : ATT_BK;
                    block_products(p, qb + (size_t)i0 * stride, stride, rn, kb + (size_t)j0 * stride, stride, kn,
                                   i0 - j0, D, scale);
                    block_products(ds, dyb + (size_t)i0 * C, C, rn, vb + (size_t)j0 * stride, stride, kn, i0 - j0, D,
                                   1.0f);
                    for (int r = 0; r < rn; r++) {
                        const int n = visible(i0 + r, j0, kn);
                        for (int c = 0; c < n; c++) {
                            p[r][c] = expf(p[r][c] - rowlse[r]);
                            ds[r][c] = p[r][c] * (ds[r][c] - rowdot[r]) * scale;
                        }
                        for (int c = n; c < ATT_BK; c++) p[r][c] = ds[r][c] = 0.0f;
                    }
                    /* dv_u += P_tu dy_t, dk_u += dS_tu q_t over this block's t in order */
                    for (int c = 0; c < kn; c++) {
                        const int r0 = j0 + c > i0 ? j0 + c - i0 : 0; /* the first row that sees key u */
                        if (r0 >= rn) continue;
                        accumulate(dvb + (size_t)(j0 + c) * stride, false, &p[r0][c], ATT_BK, rn - r0,
                                   dyb + (size_t)(i0 + r0) * C, (size_t)C, D);
                        accumulate(dkb + (size_t)(j0 + c) * stride, false, &ds[r0][c], ATT_BK, rn - r0,
                                   qb + (size_t)(i0 + r0) * stride, (size_t)stride, D);
                    }
                    /* dq_t += dS_tu k_u over this block's u in order */
                    for (int r = 0; r < rn; r++) {
                        float *dqt = dqb + (size_t)(i0 + r) * stride;
                        const int n = visible(i0 + r, j0, kn);
                        accumulate(dqt, false, ds[r], 1, n, kb + (size_t)j0 * stride, (size_t)stride, D);
                    }
                }
            }
        }
    }
}
