/* The Titans memory op token by token, as runtime/ops/titans.c had it before
 * its chunk-parallel form (0404f58, code unchanged but for the names): the
 * reference test_titans checks the op against, and the "old" side of
 * bench/titans_bench.c. Static functions: include it in one file per
 * program (compiled with OpenMP, as the runtime is). */
#ifndef TLM_TITANS_TOKENWISE_H
#define TLM_TITANS_TOKENWISE_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "tlm_rt/ops.h"
#include "vec_inline.h" /* runtime/ops: the dot and axpy the op had */

/* Segment length: whole chunks, at least 16 tokens. */
static int tok_segment_len(int chunk) { return chunk * ((16 + chunk - 1) / chunk); }

static size_t tok_saved_floats(int B, int T, int H, int D, int chunk) {
    if (B <= 0 || T <= 0 || H <= 0 || D <= 0 || chunk <= 0) return 0;
    int K = tok_segment_len(chunk);
    size_t nseg = (size_t)(T + K - 1) / K;
    size_t DD = (size_t)D * D;
    return (size_t)B * H * (nseg * 2 * DD + (size_t)T * D);
}

/* e_u = M k_u - v_u for the tokens u = t0 .. t1-1 of one chunk (the memory
 * at the chunk's start), written to e [t1-t0, D]. */
static void tok_chunk_errors(float *e, const float *M, const float *k, const float *v, int stride, int t0, int t1,
                             int D) {
    for (int u = t0; u < t1; u++) {
        const float *ku = k + (size_t)u * stride;
        const float *vu = v + (size_t)u * stride;
        float *eu = e + (size_t)(u - t0) * D;
        for (int i = 0; i < D; i++) eu[i] = dot(M + (size_t)i * D, ku, D) - vu[i];
    }
}

/* One token, row by row (rows of M and S evolve independently given e):
 *   S = eta S_in - 2 theta e k^T,  M = (1 - alpha) M_in + S,
 * and y = M q when y is not NULL. In place ok (M == M_in, S == S_in). */
static void tok_memory_step(float *M, float *S, const float *M_in, const float *S_in, const float *e, const float *k,
                            const float *q, float *y, float theta, float eta, float alpha, int D) {
    const float keep = 1.0f - alpha;
    for (int i = 0; i < D; i++) {
        size_t r = (size_t)i * D;
        float c = 2.0f * theta * e[i];
#pragma omp simd
        for (int j = 0; j < D; j++) {
            float s = eta * S_in[r + j] - c * k[j];
            S[r + j] = s;
            M[r + j] = keep * M_in[r + j] + s;
        }
        if (y) y[i] = dot(M + r, q, D);
    }
}

static void tok_forward(float *y, float *saved, const float *q, const float *k, const float *v, int stride,
                        const float *theta, const float *eta, const float *alpha, int B, int T, int H, int D,
                        int chunk) {
    if (B <= 0 || T <= 0 || H <= 0 || D <= 0 || chunk <= 0) return;
    const int K = tok_segment_len(chunk);
    const int nseg = (T + K - 1) / K;
    const size_t DD = (size_t)D * D;
    float *e_all = saved + (size_t)B * H * nseg * 2 * DD;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            size_t base = (size_t)b * T * stride + (size_t)h * D;
            const float *qb = q + base, *kb = k + base, *vb = v + base;
            float *ck = saved + ((size_t)b * H + h) * nseg * 2 * DD;
            float *eb = e_all + ((size_t)b * H + h) * T * D;
            for (int j = 0; j < nseg; j++) {
                /* the running state lives in this segment's checkpoint slot:
                 * start from the previous one, update in place */
                float *M = ck + (size_t)j * 2 * DD, *S = M + DD;
                if (j == 0) {
                    memset(M, 0, 2 * DD * sizeof(float));
                } else {
                    memcpy(M, M - 2 * DD, 2 * DD * sizeof(float));
                }
                int s1 = (j + 1) * K < T ? (j + 1) * K : T;
                for (int t = j * K; t < s1; t++) {
                    if (t % chunk == 0) {
                        int c1 = t + chunk < T ? t + chunk : T;
                        tok_chunk_errors(eb + (size_t)t * D, M, kb, vb, stride, t, c1, D);
                    }
                    size_t ts = (size_t)t * stride;
                    size_t th = ((size_t)b * T + t) * H + h;
                    float *yt = y + ((size_t)b * T + t) * H * D + (size_t)h * D;
                    tok_memory_step(M, S, M, S, eb + (size_t)t * D, kb + ts, qb + ts, yt, theta[th], eta[th], alpha[th],
                                    D);
                }
            }
        }
    }
}

static size_t tok_scratch_floats(int D, int chunk) {
    const size_t DD = (size_t)D * D;
    return (2 * (size_t)tok_segment_len(chunk) + 5) * DD + 2 * (size_t)D;
}

static void tok_backward(float *dq, float *dk, float *dv, float *dtheta, float *deta, float *dalpha, const float *dy,
                         const float *saved, const float *q, const float *k, const float *v, int stride,
                         const float *theta, const float *eta, const float *alpha, int B, int T, int H, int D,
                         int chunk, float *scratch, int threads) {
    (void)v; /* enters only through the saved e_t */
    if (B <= 0 || T <= 0 || H <= 0 || D <= 0 || chunk <= 0) return;
    const int K = tok_segment_len(chunk);
    const int nseg = (T + K - 1) / K;
    const size_t DD = (size_t)D * D;
    const float *e_all = saved + (size_t)B * H * nseg * 2 * DD;
    const size_t per_thread = tok_scratch_floats(D, chunk);
    if (threads < 1) threads = 1;
#pragma omp parallel num_threads(threads)
    {
        float *scr = scratch + (size_t)tlm_thread_index() * per_thread;
        /* Ms[i], Ss[i]: the state after token s0 + i - 1 (i = 0: the
         * segment's starting checkpoint) */
        float *Ms = scr, *Ss = Ms + (size_t)(K + 1) * DD;
        float *dM = Ss + (size_t)(K + 1) * DD, *dS = dM + DD, *dM0 = dS + DD;
        float *u = dM0 + DD, *de = u + D;
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < H; h++) {
                size_t base = (size_t)b * T * stride + (size_t)h * D;
                const float *qb = q + base, *kb = k + base;
                float *dqb = dq + base, *dkb = dk + base, *dvb = dv + base;
                const float *ck = saved + ((size_t)b * H + h) * nseg * 2 * DD;
                const float *eb = e_all + ((size_t)b * H + h) * T * D;
                memset(dM, 0, 3 * DD * sizeof(float)); /* dM, dS, dM0 */
                for (int j = nseg - 1; j >= 0; j--) {
                    const int s0 = j * K, n = T - s0 < K ? T - s0 : K;
                    if (j == 0) {
                        memset(Ms, 0, DD * sizeof(float));
                        memset(Ss, 0, DD * sizeof(float));
                    } else {
                        memcpy(Ms, ck + (size_t)(j - 1) * 2 * DD, DD * sizeof(float));
                        memcpy(Ss, ck + (size_t)(j - 1) * 2 * DD + DD, DD * sizeof(float));
                    }
                    for (int i = 1; i <= n; i++) {
                        int t = s0 + i - 1;
                        size_t th = ((size_t)b * T + t) * H + h;
                        tok_memory_step(Ms + i * DD, Ss + i * DD, Ms + (i - 1) * DD, Ss + (i - 1) * DD,
                                        eb + (size_t)t * D, kb + (size_t)t * stride, NULL, NULL, theta[th], eta[th],
                                        alpha[th], D);
                    }
                    for (int t = s0 + n - 1; t >= s0; t--) {
                        const int i = t - s0 + 1, c0 = t - t % chunk;
                        const float *Mt = Ms + i * DD, *Mp = Ms + (i - 1) * DD;
                        const float *Sp = Ss + (i - 1) * DD;
                        const float *M0 = Ms + (size_t)(c0 - s0) * DD; /* M_{c0-1} */
                        size_t ts = (size_t)t * stride;
                        size_t th = ((size_t)b * T + t) * H + h;
                        const float *qt = qb + ts, *kt = kb + ts;
                        const float *et = eb + (size_t)t * D;
                        const float *dyt = dy + ((size_t)b * T + t) * H * D + (size_t)h * D;
                        float *dqt = dqb + ts, *dkt = dkb + ts, *dvt = dvb + ts;
                        const float th_t = theta[th], m2th = -2.0f * th_t;
                        memset(dqt, 0, (size_t)D * sizeof(float));
                        memset(dkt, 0, (size_t)D * sizeof(float));
                        /* pass 1: the totals dM, dS at t and everything that
                         * reads them; scalar sums in double (D^2 terms) */
                        double da = 0.0, dn = 0.0, dth = 0.0;
                        for (int r = 0; r < D; r++) {
                            float *dMr = dM + (size_t)r * D, *dSr = dS + (size_t)r * D;
                            const float g = dyt[r];
#pragma omp simd
                            for (int c = 0; c < D; c++) {
                                dMr[c] += g * qt[c];
                                dSr[c] += dMr[c];
                            }
                            axpy(dqt, g, Mt + (size_t)r * D, D);
                            da -= dot(dMr, Mp + (size_t)r * D, D);
                            dn += dot(dSr, Sp + (size_t)r * D, D);
                            u[r] = dot(dSr, kt, D);
                            dth += (double)et[r] * u[r];
                            axpy(dkt, m2th * et[r], dSr, D); /* 2 dG^T e */
                        }
                        dalpha[th] = (float)da;
                        deta[th] = (float)dn;
                        dtheta[th] = (float)(-2.0 * dth);
                        for (int r = 0; r < D; r++) {
                            de[r] = m2th * u[r];
                            dvt[r] = -de[r];
                        }
                        /* pass 2: through e_t = M0 k_t - v_t, then the paths
                         * back to t-1 (and M0 = M_{t-1} at a chunk start) */
                        const float keep = 1.0f - alpha[th], et_ = eta[th];
                        const bool start = t == c0;
                        for (int r = 0; r < D; r++) {
                            float *dMr = dM + (size_t)r * D, *dSr = dS + (size_t)r * D;
                            float *dM0r = dM0 + (size_t)r * D;
                            axpy(dkt, de[r], M0 + (size_t)r * D, D);
                            axpy(dM0r, de[r], kt, D);
#pragma omp simd
                            for (int c = 0; c < D; c++) {
                                dMr[c] *= keep;
                                dSr[c] *= et_;
                            }
                            if (start) {
#pragma omp simd
                                for (int c = 0; c < D; c++) {
                                    dMr[c] += dM0r[c];
                                    dM0r[c] = 0.0f;
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

#endif
