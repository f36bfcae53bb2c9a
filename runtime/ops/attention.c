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
 * and sum l_t per row; y_t, written by the first key block's product and
 * accumulated in place after, is rescaled by exp(m_old - m_new) when the
 * max grows), then y_t /= l_t and lse_t = m_t + log l_t.
 *
 * Backward, with dy_t given, recomputing P block by block from lse:
 *   D_t   = dy_t . y_t                  (= sum_u P_tu dP_tu; summed as dP is)
 *   dP_tu = dy_t . v_u
 *   dS_tu = P_tu (dP_tu - D_t)        (exactly 0 where P is one key's: row_dots)
 *   dq_t  = sum_u dS_tu k_u / sqrt(D)
 *   dk_u  = sum_t dS_tu q_t / sqrt(D)
 *   dv_u  = sum_t P_tu dy_t
 *
 * Every block product is one register-blocked kernel (block_gemm.h:
 * GEMM_MR rows x 16 columns of the output in registers, 32 on AVX-512
 * CPUs, the reduction index in ascending order for every element, the
 * same bits whatever the tile). The scores S = Q K^T and
 * dP = dY V^T run it over a transposed key block (rows of ATT_BK floats,
 * transposed eight by eight in registers); P V, dS K, P^T dY and dS^T Q
 * over rows of D. Near the diagonal it skips the tiles the causal mask
 * hides entirely. The exponentials and a row's max run eight lanes at a
 * time over whole rows (vec8.h's v8_exp: within 2 ulp of expf; the kernels
 * are compiled for x86-64's baseline and an AVX2 + FMA clone). The outputs
 * are written by their first block product, never cleared first (dq at
 * key block 0, dk and dv at the diagonal block). No T x T matrix exists: the
 * scratch is a few ATT_BQ x ATT_BK blocks and a transposed key chunk on
 * each thread's stack (64 KiB at most: the backward's two blocks and
 * row_dots' two transposed chunks).
 *
 * Work is split over (b, h, query block) in the forward (the last query
 * blocks, the longest tasks, handed out first) and (b, h) pairs in the
 * backward: each task owns its rows of y and lse, or its pair's slices
 * of dq, dk, dv, and walks its blocks in a fixed order, so every sum runs in
 * the same order for any thread count (deterministic). */
#include "tlm_rt/ops.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "block_gemm.h"
#include "vec8.h"

enum {
    ATT_BQ = 64, /* query rows per block */
    ATT_BK = 64, /* key rows per block */
    ATT_DC = 64, /* head channels per transposed chunk of a key block */
};
/* the diagonal block of a query block is one key block (the backward's
 * fresh outputs rely on it) */
_Static_assert(ATT_BQ == ATT_BK, "query and key blocks of one size");

/* Keys of block j0 that query row t sees: u <= t, at most kn. */
static int visible(int t, int j0, int kn) {
    int n = t - j0 + 1;
    return n < 0 ? 0 : n < kn ? n : kn;
}

static int min_int(int a, int b) { return a < b ? a : b; }

/* bt[d][c] = b[c*bstride + d] for d < dc, c < kn: eight key rows by eight
 * channels at a time through registers (three rounds of shuffles), the
 * edges one float at a time. */
V8_KERNEL(transpose_keys, (float bt[ATT_DC][ATT_BK], const float *b, size_t bstride, int kn, int dc),
          (bt, b, bstride, kn, dc)) {
    int c0 = 0;
    for (; c0 + 8 <= kn; c0 += 8) {
        const float *bc = b + (size_t)c0 * bstride;
        int d = 0;
        for (; d + 8 <= dc; d += 8) {
            v8f r0, r1, r2, r3, r4, r5, r6, r7;
            V8_LOAD(r0, bc + d), V8_LOAD(r1, bc + bstride + d), V8_LOAD(r2, bc + 2 * bstride + d);
            V8_LOAD(r3, bc + 3 * bstride + d), V8_LOAD(r4, bc + 4 * bstride + d), V8_LOAD(r5, bc + 5 * bstride + d);
            V8_LOAD(r6, bc + 6 * bstride + d), V8_LOAD(r7, bc + 7 * bstride + d);
            /* pairs of rows interleaved, then pairs of pairs, then halves */
            v8f t0 = __builtin_shufflevector(r0, r1, 0, 8, 1, 9, 4, 12, 5, 13);
            v8f t1 = __builtin_shufflevector(r0, r1, 2, 10, 3, 11, 6, 14, 7, 15);
            v8f t2 = __builtin_shufflevector(r2, r3, 0, 8, 1, 9, 4, 12, 5, 13);
            v8f t3 = __builtin_shufflevector(r2, r3, 2, 10, 3, 11, 6, 14, 7, 15);
            v8f t4 = __builtin_shufflevector(r4, r5, 0, 8, 1, 9, 4, 12, 5, 13);
            v8f t5 = __builtin_shufflevector(r4, r5, 2, 10, 3, 11, 6, 14, 7, 15);
            v8f t6 = __builtin_shufflevector(r6, r7, 0, 8, 1, 9, 4, 12, 5, 13);
            v8f t7 = __builtin_shufflevector(r6, r7, 2, 10, 3, 11, 6, 14, 7, 15);
            v8f u0 = __builtin_shufflevector(t0, t2, 0, 1, 8, 9, 4, 5, 12, 13);
            v8f u1 = __builtin_shufflevector(t0, t2, 2, 3, 10, 11, 6, 7, 14, 15);
            v8f u2 = __builtin_shufflevector(t1, t3, 0, 1, 8, 9, 4, 5, 12, 13);
            v8f u3 = __builtin_shufflevector(t1, t3, 2, 3, 10, 11, 6, 7, 14, 15);
            v8f u4 = __builtin_shufflevector(t4, t6, 0, 1, 8, 9, 4, 5, 12, 13);
            v8f u5 = __builtin_shufflevector(t4, t6, 2, 3, 10, 11, 6, 7, 14, 15);
            v8f u6 = __builtin_shufflevector(t5, t7, 0, 1, 8, 9, 4, 5, 12, 13);
            v8f u7 = __builtin_shufflevector(t5, t7, 2, 3, 10, 11, 6, 7, 14, 15);
            r0 = __builtin_shufflevector(u0, u4, 0, 1, 2, 3, 8, 9, 10, 11);
            r1 = __builtin_shufflevector(u1, u5, 0, 1, 2, 3, 8, 9, 10, 11);
            r2 = __builtin_shufflevector(u2, u6, 0, 1, 2, 3, 8, 9, 10, 11);
            r3 = __builtin_shufflevector(u3, u7, 0, 1, 2, 3, 8, 9, 10, 11);
            r4 = __builtin_shufflevector(u0, u4, 4, 5, 6, 7, 12, 13, 14, 15);
            r5 = __builtin_shufflevector(u1, u5, 4, 5, 6, 7, 12, 13, 14, 15);
            r6 = __builtin_shufflevector(u2, u6, 4, 5, 6, 7, 12, 13, 14, 15);
            r7 = __builtin_shufflevector(u3, u7, 4, 5, 6, 7, 12, 13, 14, 15);
            V8_STORE(&bt[d][c0], r0), V8_STORE(&bt[d + 1][c0], r1), V8_STORE(&bt[d + 2][c0], r2);
            V8_STORE(&bt[d + 3][c0], r3), V8_STORE(&bt[d + 4][c0], r4), V8_STORE(&bt[d + 5][c0], r5);
            V8_STORE(&bt[d + 6][c0], r6), V8_STORE(&bt[d + 7][c0], r7);
        }
        for (; d < dc; d++)
            for (int c = 0; c < 8; c++) bt[d][c0 + c] = bc[(size_t)c * bstride + d];
    }
    for (; c0 < kn; c0++)
        for (int d = 0; d < dc; d++) bt[d][c0] = b[(size_t)c0 * bstride + d];
}

/* out[r][c] = scale * (a_r . b_c) for r < rn, c < kn and c <= r + ahead
 * (the causal mask: ahead = the query block's first row less the key
 * block's), a_r = a + r*astride, b_c = b + c*bstride, D channels each; the
 * rest of out[r] may hold anything. The key block is transposed a chunk of
 * channels at a time (then a row of scores is a row of the kernel's
 * output); a tile of rows computes the columns its last row sees, rounded
 * up to a whole vector. */
static void block_products(float out[ATT_BQ][ATT_BK], const float *a, size_t astride, int rn, const float *b,
                           size_t bstride, int kn, int ahead, int D, float scale) {
    float bt[ATT_DC][ATT_BK];
    for (int d0 = 0; d0 < D; d0 += ATT_DC) {
        const int dc = min_int(D - d0, ATT_DC);
        transpose_keys(bt, b + d0, bstride, kn, dc);
        const bool last = d0 + dc >= D;
        for (int r0 = 0; r0 < rn; r0 += GEMM_MR) {
            /* the columns the tile's last row sees, up to a whole vector
             * (the kernel's single columns are slow) */
            const int mr = min_int(GEMM_MR, rn - r0),
                      w = min_int((visible(r0 + mr - 1 + ahead, 0, kn) + 7) / 8 * 8, kn);
            gemm_rows(out[r0], ATT_BK, mr, w, a + (size_t)r0 * astride + d0, astride, 1, bt[0], ATT_BK, 0, dc, d0 == 0,
                      last ? scale : 1.0f);
        }
    }
}

/* dst_t (= 0 if fresh) += sum_{u < seen} p_tu src_u for the block's rows
 * t < rn, a tile of rows at a time over the keys its last row sees (p is 0
 * past a row's own): y += P V in the forward, dq += dS K in the backward. */
static void rows_times_keys(float *dst, size_t dstride, const float p[ATT_BQ][ATT_BK], int rn, const float *src,
                            size_t sstride, int kn, int ahead, int D, bool fresh) {
    for (int r0 = 0; r0 < rn; r0 += GEMM_MR) {
        const int mr = min_int(GEMM_MR, rn - r0), seen = visible(r0 + mr - 1 + ahead, 0, kn);
        gemm_rows(dst + (size_t)r0 * dstride, dstride, mr, D, p[r0], ATT_BK, 1, src, sstride, 0, seen, fresh, 1.0f);
    }
}

/* dst_u (= 0 if fresh) += sum_t p_tu src_t for the block's keys u < kn,
 * over the rows t < rn that see the tile's first key (p is 0 where a row
 * does not see a key): dv += P^T dY and dk += dS^T Q in the backward. A
 * fresh call must reach every key: the diagonal block (ahead = 0). */
static void keys_times_rows(float *dst, size_t dstride, const float p[ATT_BQ][ATT_BK], int rn, const float *src,
                            size_t sstride, int kn, int ahead, int D, bool fresh) {
    for (int c0 = 0; c0 < kn; c0 += GEMM_MR) {
        const int mr = min_int(GEMM_MR, kn - c0), first = c0 - ahead > 0 ? c0 - ahead : 0;
        if (first >= rn) break;
        gemm_rows(dst + (size_t)c0 * dstride, dstride, mr, D, &p[0][c0], 1, ATT_BK, src, sstride, first, rn, fresh,
                  1.0f);
    }
}

/* One key block's step of the online softmax for the query block's rows
 * r < rn (row r sees the block's keys c <= r + ahead, c < kn): s holds
 * the scores and becomes e^(s - m_new), 0 past the keys a row sees; the
 * running max m and sum l move on, and the row's output y_r (at y +
 * r*ystride, D floats) is rescaled by e^(m_old - m_new) for the product
 * with the block's values that follows. */
V8_KERNEL(softmax_step,
          (float s[ATT_BQ][ATT_BK], float *m, float *l, float *y, size_t ystride, int rn, int ahead, int kn, int D),
          (s, m, l, y, ystride, rn, ahead, kn, D)) {
    for (int r = 0; r < rn; r++) {
        const int n = visible(r + ahead, 0, kn);
        float *p = s[r];
        if (n > 0) {
            const float mx = v8_max_row(p, n, m[r]), m_old = m[r],
                        alpha = expf(m_old - mx); /* 0 on the first block: m = -inf */
            v8_exp_row(p, n, mx);
            float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
            for (int c = 0; c < n; c++) sum += p[c];
            l[r] = l[r] * alpha + sum;
            m[r] = mx;
            if (alpha != 1.0f && m_old != -INFINITY) { /* on the first block, y is not yet written */
                float *yr = y + (size_t)r * ystride;
#pragma omp simd
                for (int d = 0; d < D; d++) yr[d] *= alpha;
            }
        }
        for (int c = n; c < kn; c++) p[c] = 0.0f;
    }
}

/* The backward's recomputed block, rows r < rn (visibility as above): p
 * holds the scores and becomes P = e^(s - lse_r); ds holds dP = dy . v and
 * becomes dS = P (dP - D_r) / sqrt(D) (scale); both 0 past the keys a row
 * sees. */
V8_KERNEL(probs_and_score_grads,
          (float p[ATT_BQ][ATT_BK], float ds[ATT_BQ][ATT_BK], const float *lse, const float *rowdot, int rn, int ahead,
           int kn, float scale),
          (p, ds, lse, rowdot, rn, ahead, kn, scale)) {
    for (int r = 0; r < rn; r++) {
        const int n = visible(r + ahead, 0, kn);
        float *pr = p[r], *dsr = ds[r];
        const float dot_r = rowdot[r];
        v8_exp_row(pr, n, lse[r]);
#pragma omp simd
        for (int c = 0; c < n; c++) dsr[c] = pr[c] * (dsr[c] - dot_r) * scale;
        for (int c = n; c < kn; c++) pr[c] = dsr[c] = 0.0f;
    }
}

/* out[r] += at[d][r] bt[d][r] for d < dc in order, r < rn: a vector of
 * rows at a time, each row's terms in channel order (row_dots). */
V8_KERNEL(row_dots_chunk, (float *out, float at[ATT_DC][ATT_BK], float bt[ATT_DC][ATT_BK], int rn, int dc),
          (out, at, bt, rn, dc)) {
    for (int d = 0; d < dc; d++)
#pragma omp simd
        for (int r = 0; r < rn; r++) out[r] += at[d][r] * bt[d][r];
}

/* out[r] = a_r . b_r (a_r = a + r*stride, D floats; the same for b) for r
 * < rn <= ATT_BQ, each summed as the block kernel sums an element of dP =
 * dY V^T: from 0, the channels in ascending order, a multiply-add each
 * (fused where the kernel's are, in the AVX2 clone; apart in the baseline
 * one, as the baseline tile's). So D_t = dy_t . y_t is exactly dP_tu
 * wherever y_t is exactly v_u: a row whose softmax is one key, P = 1 there
 * and 0 elsewhere (a sequence's first token; saturated scores), gets dS
 * exactly 0, as softmax's gradient is. Summed in another order (a vector
 * dot product), D_t and dP_tu differed in their last bits, and that
 * residue times huge saturated keys made dq and dk 1e8 where PyTorch's are
 * 0. The rows are transposed as the keys are, so that a vector holds
 * eight rows and each row's chain runs down the channels. */
static void row_dots(float *out, const float *a, const float *b, size_t stride, int rn, int D) {
    float at[ATT_DC][ATT_BK], bt[ATT_DC][ATT_BK];
    for (int r = 0; r < rn; r++) out[r] = 0.0f;
    for (int d0 = 0; d0 < D; d0 += ATT_DC) {
        const int dc = min_int(D - d0, ATT_DC);
        transpose_keys(at, a + d0, stride, rn, dc);
        transpose_keys(bt, b + d0, stride, rn, dc);
        row_dots_chunk(out, at, bt, rn, dc);
    }
}

/* Query block qi of batch b, head h: its rows of y, and their lse. */
static void forward_task(float *y, float *lse, const float *q, const float *k, const float *v, int T, int H, int D,
                         int stride, int b, int h, int qi) {
    const float scale = 1.0f / sqrtf((float)D);
    const int C = H * D;
    const float *qb = q + (size_t)b * T * stride + (size_t)h * D;
    const float *kb = k + (size_t)b * T * stride + (size_t)h * D;
    const float *vb = v + (size_t)b * T * stride + (size_t)h * D;
    float *yb = y + (size_t)b * T * C + (size_t)h * D;
    const int i0 = qi * ATT_BQ, rn = T - i0 < ATT_BQ ? T - i0 : ATT_BQ;
    float s[ATT_BQ][ATT_BK], m[ATT_BQ], l[ATT_BQ];
    for (int r = 0; r < rn; r++) m[r] = -INFINITY, l[r] = 0.0f;
    for (int j0 = 0; j0 < i0 + rn; j0 += ATT_BK) {
        const int kn = i0 + rn - j0 < ATT_BK ? i0 + rn - j0 : ATT_BK;
        block_products(s, qb + (size_t)i0 * stride, stride, rn, kb + (size_t)j0 * stride, stride, kn, i0 - j0, D,
                       scale);
        softmax_step(s, m, l, yb + (size_t)i0 * C, (size_t)C, rn, i0 - j0, kn, D);
        rows_times_keys(yb + (size_t)i0 * C, (size_t)C, s, rn, vb + (size_t)j0 * stride, (size_t)stride, kn, i0 - j0, D,
                        j0 == 0);
    }
    for (int r = 0; r < rn; r++) {
        const int t = i0 + r;
        float *yt = yb + (size_t)t * C, inv = 1.0f / l[r];
#pragma omp simd
        for (int d = 0; d < D; d++) yt[d] *= inv;
        lse[((size_t)b * T + t) * H + h] = m[r] + logf(l[r]);
    }
}

void tlm_attention_forward(float *y, float *lse, const float *q, const float *k, const float *v, int B, int T, int H,
                           int D, int stride) {
    const int nq = (T + ATT_BQ - 1) / ATT_BQ;
    if ((B * H) % tlm_get_num_threads() == 0) {
        /* Whole (b, h) pairs a thread, in order, all equal work: each thread
         * reads the rows of q, k and v that the same thread's share of the
         * QKV product most likely wrote, and writes the rows of y the output
         * projection's share reads. Interleaved by a dynamic schedule, the
         * tasks at two threads ran 14% longer in a training step (tiny,
         * `tlm-run bench --profile`) than these. */
#pragma omp parallel for collapse(2) schedule(static)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                for (int qi = 0; qi < nq; qi++) forward_task(y, lse, q, k, v, T, H, D, stride, b, h, qi);
        return;
    }
    /* The pairs do not divide evenly: the longest tasks (the last query
     * blocks, which see the most keys) first, so the threads run out of
     * work together. */
#pragma omp parallel for collapse(3) schedule(dynamic, 1)
    for (int from_last = 0; from_last < nq; from_last++)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++) forward_task(y, lse, q, k, v, T, H, D, stride, b, h, nq - 1 - from_last);
}

void tlm_attention_backward(float *dq, float *dk, float *dv, const float *dy, const float *y, const float *lse,
                            const float *q, const float *k, const float *v, int B, int T, int H, int D, int stride) {
    const float scale = 1.0f / sqrtf((float)D);
    const int C = H * D;
    /* (b, h) pairs of equal work, whole ones a thread in order (as the
     * forward's; a dynamic schedule interleaved them across threads) */
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            size_t base = (size_t)b * T * stride + (size_t)h * D, ybase = (size_t)b * T * C + (size_t)h * D;
            const float *qb = q + base, *kb = k + base, *vb = v + base, *dyb = dy + ybase, *yb = y + ybase;
            float *dqb = dq + base, *dkb = dk + base, *dvb = dv + base;
            /* the outputs are written, not added to: a row of dq is fresh
             * at its first key block (j0 = 0), a row of dk and dv at its
             * first query block, the diagonal one (i0 = j0) */
            float p[ATT_BQ][ATT_BK], ds[ATT_BQ][ATT_BK], rowdot[ATT_BQ], rowlse[ATT_BQ];
            for (int i0 = 0; i0 < T; i0 += ATT_BQ) {
                const int rn = T - i0 < ATT_BQ ? T - i0 : ATT_BQ;
                row_dots(rowdot, dyb + (size_t)i0 * C, yb + (size_t)i0 * C, (size_t)C, rn, D);
                for (int r = 0; r < rn; r++) rowlse[r] = lse[((size_t)b * T + i0 + r) * H + h];
                for (int j0 = 0; j0 < i0 + rn; j0 += ATT_BK) {
                    const int kn = i0 + rn - j0 < ATT_BK ? i0 + rn - j0 : ATT_BK;
                    block_products(p, qb + (size_t)i0 * stride, stride, rn, kb + (size_t)j0 * stride, stride, kn,
                                   i0 - j0, D, scale);
                    block_products(ds, dyb + (size_t)i0 * C, C, rn, vb + (size_t)j0 * stride, stride, kn, i0 - j0, D,
                                   1.0f);
                    probs_and_score_grads(p, ds, rowlse, rowdot, rn, i0 - j0, kn, scale);
                    /* dv_u += P_tu dy_t, dk_u += dS_tu q_t over this block's t in order */
                    keys_times_rows(dvb + (size_t)j0 * stride, (size_t)stride, p, rn, dyb + (size_t)i0 * C, (size_t)C,
                                    kn, i0 - j0, D, i0 == j0);
                    keys_times_rows(dkb + (size_t)j0 * stride, (size_t)stride, ds, rn, qb + (size_t)i0 * stride,
                                    (size_t)stride, kn, i0 - j0, D, i0 == j0);
                    /* dq_t += dS_tu k_u over this block's u in order */
                    rows_times_keys(dqb + (size_t)i0 * stride, (size_t)stride, ds, rn, kb + (size_t)j0 * stride,
                                    (size_t)stride, kn, i0 - j0, D, j0 == 0);
                }
            }
        }
    }
}
