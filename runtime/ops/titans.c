/* Titans neural memory (matrix memory, chunked), forward and backward.
 *
 * For one (batch b, head h), with q_t, k_t, v_t the head slices (size D)
 * and the activated scalars theta_t, eta_t, alpha_t, a D x D memory M and
 * momentum S, M_{-1} = S_{-1} = 0. Tokens are split into chunks of C
 * (the last may be shorter); M0 is the memory at the start of the chunk
 * holding t (the memory after the previous chunk's last token):
 *   e_t = M0 k_t - v_t                    (D)
 *   G_t = 2 e_t k_t^T                     grad of |M k_t - v_t|^2 at M0
 *   S_t = eta_t S_{t-1} - theta_t G_t
 *   M_t = (1 - alpha_t) M_{t-1} + S_t
 *   y_t = M_t q_t                         written to y [B,T,H*D]
 * C = 1 is the exact recurrence (M0 = M_{t-1}). Taking G at the chunk start
 * is what lets a chunk's e be computed at once; the token loop below still
 * updates (M, S) one token at a time, which costs O(D^2) per token either
 * way.
 *
 * Backward. Running gradients, held while walking t = T-1 .. 0:
 *   dM = dL/dM_t through everything after t, dS = dL/dS_t likewise, and
 *   dM0 = dL/dM0 summed over the tokens of the current chunk seen so far.
 * At token t (dM, dS on entry hold (1-alpha_{t+1}) dM_{t+1} and
 * eta_{t+1} dS_{t+1}, the paths through M_{t+1} and S_{t+1}):
 *   dM     += dy_t q_t^T                  (y_t = M_t q_t)
 *   dq_t    = M_t^T dy_t
 *   dS     += dM                          (M_t = ... + S_t)
 *   dalpha_t = -<dM, M_{t-1}>             (Frobenius products)
 *   deta_t   =  <dS, S_{t-1}>
 *   dG       = -theta_t dS,  so with u = dS k_t:
 *   dtheta_t = -<dS, G_t> = -2 e_t . u
 *   de_t     = 2 dG k_t = -2 theta_t u
 *   dk_t     = 2 dG^T e_t + M0^T de_t = -2 theta_t dS^T e_t + M0^T de_t
 *   dv_t     = -de_t
 *   dM0     += de_t k_t^T
 * then the paths back to t-1:
 *   dM *= (1 - alpha_t),  dS *= eta_t,
 * and when t is the first token of its chunk, M0 is M_{t-1}, so the chunk's
 * sum joins it: dM += dM0, dM0 = 0 (for C = 1 that is every token, i.e.
 * dM_{t-1} += de_t k_t^T directly). k_t appears only in e_t and G_t, and
 * q_t, v_t only at t, so dq_t, dk_t, dv_t are complete when written.
 *
 * Memory. The backward needs M_t, M_{t-1}, S_{t-1} and M0 at every token;
 * keeping them all would be B*H*T*2*D^2 floats. The forward instead saves
 * (M, S) at the end of every segment of K = C*ceil(16/C) tokens (a whole
 * number of chunks, so a chunk's M0 is always inside its segment), plus the
 * e_t of every token (B*H*T*D, as small as q). The backward walks segments
 * from the last; for each it recomputes the segment's states forward from
 * the previous checkpoint (with the saved e_t: no M0 k products again) into
 * a per-thread scratch of K+1 states, then walks it in reverse. That is one
 * extra forward's worth of O(D^2) updates, for a save of
 * ceil(T/K)*2*D^2 + T*D floats per (b, h).
 *   saved layout: [B,H, nseg, 2, D, D]  (M then S after each segment's last
 *                 token; the last slot is the final state)
 *                 then [B,H,T,D]        (e_t)
 * The scratch, (2K+5) D^2 + 2D floats per thread
 * (tlm_titans_scratch_floats), is the caller's, for `threads` threads
 * (tlm_model_create allocates it once): the op allocates nothing and cannot
 * fail. Keeping it per (b, h) in `saved` instead would more than double
 * `saved`.
 *
 * Work is split over (b, h) pairs: each owns its checkpoints, its slices of
 * y, dq, dk, dv and its scalars, and every update runs in a fixed order,
 * so the bits do not depend on the thread count. Forward and the backward's
 * recomputation step through the same function (the same operations in the
 * same order), so the backward sees the states the forward had.
 */
#include "tlm_rt/ops.h"

#include <string.h>

#include "vec_inline.h"

/* Segment length: whole chunks, at least 16 tokens. */
static int segment_len(int chunk) { return chunk * ((16 + chunk - 1) / chunk); }

size_t tlm_titans_saved_floats(int B, int T, int H, int D, int chunk) {
    if (B <= 0 || T <= 0 || H <= 0 || D <= 0 || chunk <= 0) return 0;
    int K = segment_len(chunk);
    size_t nseg = (size_t)(T + K - 1) / K;
    size_t DD = (size_t)D * D;
    return (size_t)B * H * (nseg * 2 * DD + (size_t)T * D);
}

/* e_u = M k_u - v_u for the tokens u = t0 .. t1-1 of one chunk (the memory
 * at the chunk's start), written to e [t1-t0, D]. */
static void chunk_errors(float *e, const float *M, const float *k, const float *v, int stride, int t0, int t1, int D) {
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
static void memory_step(float *M, float *S, const float *M_in, const float *S_in, const float *e, const float *k,
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

void tlm_titans_forward(float *y, float *saved, const float *q, const float *k, const float *v, int stride,
                        const float *theta, const float *eta, const float *alpha, int B, int T, int H, int D,
                        int chunk) {
    if (B <= 0 || T <= 0 || H <= 0 || D <= 0 || chunk <= 0) return;
    const int K = segment_len(chunk);
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
                        chunk_errors(eb + (size_t)t * D, M, kb, vb, stride, t, c1, D);
                    }
                    size_t ts = (size_t)t * stride;
                    size_t th = ((size_t)b * T + t) * H + h;
                    float *yt = y + ((size_t)b * T + t) * H * D + (size_t)h * D;
                    memory_step(M, S, M, S, eb + (size_t)t * D, kb + ts, qb + ts, yt, theta[th], eta[th], alpha[th], D);
                }
            }
        }
    }
}

void tlm_titans_decode(float *y, float *state, const float *q, const float *k, const float *v, const float *theta,
                       const float *eta, const float *alpha, int H, int D, bool chunk_start, float *e) {
    const size_t DD = (size_t)D * D;
    for (int h = 0; h < H; h++) {
        float *M = state + (size_t)h * 3 * DD, *S = M + DD, *M0 = S + DD;
        const float *qh = q + (size_t)h * D, *kh = k + (size_t)h * D, *vh = v + (size_t)h * D;
        if (chunk_start) memcpy(M0, M, DD * sizeof(float));
        chunk_errors(e, M0, kh, vh, 0, 0, 1, D);
        memory_step(M, S, M, S, e, kh, qh, y ? y + (size_t)h * D : NULL, theta[h], eta[h], alpha[h], D);
    }
}

size_t tlm_titans_scratch_floats(int D, int chunk) {
    const size_t DD = (size_t)D * D;
    return (2 * (size_t)segment_len(chunk) + 5) * DD + 2 * (size_t)D;
}

void tlm_titans_backward(float *dq, float *dk, float *dv, float *dtheta, float *deta, float *dalpha, const float *dy,
                         const float *saved, const float *q, const float *k, const float *v, int stride,
                         const float *theta, const float *eta, const float *alpha, int B, int T, int H, int D,
                         int chunk, float *scratch, int threads) {
    (void)v; /* enters only through the saved e_t */
    if (B <= 0 || T <= 0 || H <= 0 || D <= 0 || chunk <= 0) return;
    const int K = segment_len(chunk);
    const int nseg = (T + K - 1) / K;
    const size_t DD = (size_t)D * D;
    const float *e_all = saved + (size_t)B * H * nseg * 2 * DD;
    const size_t per_thread = tlm_titans_scratch_floats(D, chunk);
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
                        memory_step(Ms + i * DD, Ss + i * DD, Ms + (i - 1) * DD, Ss + (i - 1) * DD, eb + (size_t)t * D,
                                    kb + (size_t)t * stride, NULL, NULL, theta[th], eta[th], alpha[th], D);
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
