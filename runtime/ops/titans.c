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
 * C = 1 is the exact recurrence (M0 = M_{t-1}).
 *
 * Chunk-parallel form (what the op computes). Taking G at the chunk start
 * makes everything inside a chunk linear in its e_u, k_u, q_t with scalar
 * decay products, so a block of n tokens (a chunk, or a piece of at most
 * BLK = 64 tokens of a longer one) is a few matrix products (OpenBLAS
 * sgemm) instead of n rank-1 updates of the D x D state. With local
 * t, u = 0 .. n-1, (Mc, Sc) the state at the block's start, g_u =
 * -2 theta_u, keep = 1 - alpha, and the products (u <= t; empty = 1)
 *   a_{t,u} = prod_{u+1..t} eta        b_{t,u} = prod_{u+1..t} keep
 *   A_t = prod_{0..t} eta   Bk_t = prod_{0..t} keep   Ab_t = sum_{tau<=t} b_{t,tau} A_tau
 *   W_{t,u} = sum_{tau=u..t} b_{t,tau} a_{tau,u}
 * unrolling the recurrence gives
 *   S_t = A_t Sc + sum_{u<=t} a_{t,u} g_u e_u k_u^T
 *   M_t = Bk_t Mc + Ab_t Sc + sum_{u<=t} W_{t,u} g_u e_u k_u^T
 *   y_t = Bk_t Mc q_t + Ab_t Sc q_t + sum_{u<=t} W_{t,u} g_u (k_u . q_t) e_u
 * i.e. Y = diag(Bk) Q Mc^T + diag(Ab) Q Sc^T + (W o Q K^T o g) E (lower
 * triangle), the end state with the last rows of a and W:
 * M' = Bk_{n-1} Mc + Ab_{n-1} Sc + E^T diag(W_{n-1,.} g) K, S' likewise,
 * and E = K M0^T - V once per chunk. The products are formed by running
 * products and sums (A_t = eta_t A_{t-1}, a_{t,u} = eta_t a_{t-1,u},
 * W_{t,u} = keep_t W_{t-1,u} + a_{t,u}, Ab_t = keep_t Ab_{t-1} + A_t) in
 * double: every term is a product of factors in (0, 1], nothing divides,
 * so nothing can overflow and an underflow only rounds a negligible term
 * to 0 (ratios A_t / A_u could divide by an underflowed 0 after a few
 * hundred tokens of small eta; they are never formed).
 *
 * Backward of a block, given dY and (Gm, Gs) = dL/dM', dL/dS' from the
 * blocks after it. The adjoints of the token form (below) unroll the same
 * way: dM_t = sum_{s>=t} b_{s,t} dy_s q_s^T + b_{n-1,t} Gm and
 * dS_t = sum_{s>=t} W_{s,t} dy_s q_s^T + W_{n-1,t} Gm + a_{n-1,t} Gs, so
 *   U_u = dS_u k_u = sum_{s>=u} W_{s,u} (q_s . k_u) dy_s + W_{n-1,u} Gm k_u
 *                    + a_{n-1,u} Gs k_u          ((W o QK^T)^T dY + ...)
 *   dtheta_u = -2 e_u . U_u,  de_u = g_u U_u,  dv_u = -de_u
 *   dk_u = g_u [sum_{s>=u} W_{s,u} (dy_s . e_u) q_s + W_{n-1,u} Gm^T e_u
 *          + a_{n-1,u} Gs^T e_u] + M0^T de_u
 *   dq_t = Bk_t Mc^T dy_t + Ab_t Sc^T dy_t + sum_{u<=t} W_{t,u} g_u (e_u . dy_t) k_u
 *   dMc = dY^T diag(Bk) Q + Bk_{n-1} Gm  (+ sum_u de_u k_u^T, held in dM0
 *         until the chunk's first block: the errors read M0)
 *   dSc = dY^T diag(Ab) Q + Ab_{n-1} Gm + A_{n-1} Gs.
 * The gates' gradients are Frobenius products of the token form,
 * dalpha_t = -<dM_t, M_{t-1}> and deta_t = <dS_t, S_{t-1}>: both states are
 * combinations of the basis {Mc, Sc, e_u k_u^T}, so each product is the
 * adjoint's inner products with the basis (fm[r] = <dM_t, r>, fs[r] =
 * <dS_t, r>, walked t = n-1 .. 0 by fm = L_t + keep_{t+1} fm, fs = fm +
 * eta_{t+1} fs, L_t[r] = <dy_t q_t^T, r>: dy_t . Mc q_t, dy_t . Sc q_t,
 * (dy_t . e_u)(q_t . k_u), plus Gm's and Gs's at t = n-1) against the
 * state's coefficients (Bk_{t-1}, Ab_{t-1}, W_{t-1,u} g_u for M_{t-1};
 * A_{t-1}, a_{t-1,u} g_u for S_{t-1}): O(n^2) per block. All the
 * O(n D^2) work of a block is in sgemm calls.
 *
 * Token form (the decoding step's, here and in runtime/gpu/titans_decode.cu,
 * and the reference in tests/runtime/titans_tokenwise.h; the device's
 * training kernel, runtime/gpu/titans.cu, is the chunk-parallel form).
 * Running gradients, held while walking t = T-1 .. 0:
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
 * Speed (bench/titans_bench.c, forward + backward, one thread, against the
 * token form in the same run; AMD EPYC with avx2 fma avx512f avx512bw
 * avx512vl avx512_bf16, OpenBLAS 0.3.21 with Haswell's AVX2 kernels, which
 * that machine's OPENBLAS_CORETYPE named; six runs on a shared 2-core
 * machine at load 5-9, so ranges, median in brackets): tiny_titans (B 8,
 * T 256, H 4, D 64, C 16) 1.8-2.7x [2.0x], titans_440m (T 2048, H 16, D 64,
 * C 64) 2.2-3.2x [2.5x], titans_760m's heads (H 12, D 128, C 64) 2.5-4.0x
 * [3.0x]. With OPENBLAS_CORETYPE=SkylakeX (its AVX-512 kernels), one run:
 * 3.7x, 3.6x, 4.3x; on a quiet Zen 5 with OpenBLAS's own pick (Cooperlake),
 * 3.75x, 4.12x, 4.85x. The token form's loops are the compiler's (-O2, no
 * -march).
 *
 * Memory. The backward needs the state at the start of every block; keeping
 * them all would be B*H*(T/n)*2*D^2 floats. The forward instead saves
 * (M, S) at the end of every segment of K = C*ceil(16/C) tokens (a whole
 * number of chunks, so a chunk's M0 is always inside its segment), plus the
 * e_t of every token (B*H*T*D, as small as q). The backward walks segments
 * from the last; for each it recomputes the block-start states forward
 * from the previous checkpoint (with the saved e_t: no M0 k products again;
 * for C >= 16 and C <= 64 a segment is one block and nothing is
 * recomputed) into a per-thread scratch, then walks the blocks in reverse.
 * Saved: ceil(T/K)*2*D^2 + T*D floats per (b, h), the layout the device
 * kernel shares (unchanged by the chunk-parallel form):
 *   saved layout: [B,H, nseg, 2, D, D]  (M then S after each segment's last
 *                 token; the last slot is the final state)
 *                 then [B,H,T,D]        (e_t)
 * The scratch (tlm_titans_scratch_floats per thread) starts with the token
 * form's layout, (2K+5) D^2 + 2D floats: K+1 slots of M and S (here the
 * block starts), dM, dS, dM0, 2D floats; then 5 n^2 + 5 nD floats of the
 * block products (n = min(C, 64); the device kernel's per-(b, h) scratch,
 * titans.cu, keeps the whole layout). It is the caller's, for `threads` threads
 * (tlm_model_create allocates it once): the op allocates nothing and cannot
 * fail; the forward's temporaries (two n x n blocks, 4096 floats of scaled
 * rows) are on the stack.
 *
 * Work is split over (b, h) pairs: each owns its checkpoints, its slices of
 * y, dq, dk, dv and its scalars, and every update runs in a fixed order
 * (each sgemm on its caller's thread: tlm_blas_single_begin), so the bits do
 * not depend on the thread count. The
 * forward and the backward's recomputation step blocks through the same
 * function, so the backward sees the states the forward had.
 * tlm_titans_decode (sampling) steps the token form: it agrees with the
 * forward to float rounding, not bit for bit (model.kv_cache's bound).
 */
#include "tlm_rt/ops.h"

#include <cblas.h>
#include <string.h>

#include "vec_inline.h"

/* Most tokens per block (a chunk, or a piece of one when chunk > BLK). */
#define BLK 64
/* Floats of the forward's stack buffer of scaled rows. */
#define ROWS_TMP 4096

/* Every sgemm of the op runs on the calling (b, h) thread
 * (tlm_blas_single_begin, for the op's duration): OpenBLAS would otherwise
 * split the larger ones (D = 128: past its single-thread threshold) over
 * its own pool, nested in ours, and how it splits them changes the bits
 * with the thread count. */

/* Segment length: whole chunks, at least 16 tokens. */
static int segment_len(int chunk) { return chunk * ((16 + chunk - 1) / chunk); }

/* Tokens per block for this chunk size (the n x n buffers' side). */
static int block_len(int chunk) { return chunk < BLK ? chunk : BLK; }

size_t tlm_titans_saved_floats(int B, int T, int H, int D, int chunk) {
    if (B <= 0 || T <= 0 || H <= 0 || D <= 0 || chunk <= 0) return 0;
    int K = segment_len(chunk);
    size_t nseg = (size_t)(T + K - 1) / K;
    size_t DD = (size_t)D * D;
    return (size_t)B * H * (nseg * 2 * DD + (size_t)T * D);
}

/* e_u = M k_u - v_u for the tokens u = t0 .. t1-1 of one chunk (the memory
 * at the chunk's start), written to e [t1-t0, D]. The decode's (one token). */
static void chunk_errors(float *e, const float *M, const float *k, const float *v, int stride, int t0, int t1, int D) {
    for (int u = t0; u < t1; u++) {
        const float *ku = k + (size_t)u * stride;
        const float *vu = v + (size_t)u * stride;
        float *eu = e + (size_t)(u - t0) * D;
        for (int i = 0; i < D; i++) eu[i] = dot(M + (size_t)i * D, ku, D) - vu[i];
    }
}

/* The same for a whole chunk as one product, the forward's:
 * E [n, D] = K M^T - V. */
static void chunk_errors_gemm(float *e, const float *M, const float *k, const float *v, int stride, int n, int D) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, D, D, 1.0f, k, stride, M, D, 0.0f, e, D);
    for (int u = 0; u < n; u++) {
        const float *vu = v + (size_t)u * stride;
        float *eu = e + (size_t)u * D;
#pragma omp simd
        for (int i = 0; i < D; i++) eu[i] -= vu[i];
    }
}

/* One token, row by row (rows of M and S evolve independently given e):
 *   S = eta S_in - 2 theta e k^T,  M = (1 - alpha) M_in + S,
 * and y = M q when y is not NULL. In place ok (M == M_in, S == S_in).
 * The decode's step. */
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

/* The decay products of one block of n tokens (local t = 0 .. n-1), each a
 * running product or sum of products of factors in (0, 1] (no ratios, so
 * nothing divides by a small number; the running values are double):
 *   A[t]  = prod_{0..t} eta        Bk[t] = prod_{0..t} keep
 *   Ab[t] = sum_{tau<=t} b_{t,tau} A[tau]        (b_{t,tau} = prod_{tau+1..t} keep)
 *   a[t,u] = prod_{u+1..t} eta,  W[t,u] = sum_{tau=u..t} b_{t,tau} a_{tau,u}
 *   (u <= t; zero above the diagonal), by W[t,u] = keep_t W[t-1,u] + a[t,u].
 * a may be NULL; al, wl get a's and W's last rows either way. */
static void decays(float *A, float *Bk, float *Ab, float *W, float *a, float *al, float *wl, const float *eta,
                   const float *keep, int n) {
    double Ar = 1.0, Br = 1.0, Abr = 0.0;
    double arow[BLK], wrow[BLK];
    for (int t = 0; t < n; t++) {
        Ar *= eta[t];
        Br *= keep[t];
        Abr = keep[t] * Abr + Ar;
        A[t] = (float)Ar, Bk[t] = (float)Br, Ab[t] = (float)Abr;
        for (int u = 0; u < t; u++) {
            arow[u] *= eta[t];
            wrow[u] = keep[t] * wrow[u] + arow[u];
        }
        arow[t] = 1.0, wrow[t] = 1.0;
        float *Wt = W + (size_t)t * n, *at = a ? a + (size_t)t * n : NULL;
        for (int u = 0; u < n; u++) {
            Wt[u] = u <= t ? (float)wrow[u] : 0.0f;
            if (at) at[u] = u <= t ? (float)arow[u] : 0.0f;
        }
    }
    for (int u = 0; u < n; u++) al[u] = (float)arow[u], wl[u] = (float)wrow[u];
}

/* The gates of one block: eta, keep = 1 - alpha, g = -2 theta. */
static void block_gates(float *et, float *kp, float *g, const float *theta, const float *eta, const float *alpha,
                        size_t th0, int H, int n) {
    for (int t = 0; t < n; t++) {
        size_t th = th0 + (size_t)t * H;
        et[t] = eta[th], kp[t] = 1.0f - alpha[th], g[t] = -2.0f * theta[th];
    }
}

/* out[r] = c[r] x[r] for rows r of n, x with leading dimension ldx. */
static void scale_rows(float *out, const float *x, int ldx, const float *c, int n, int D) {
    for (int r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * ldx;
        float *o = out + (size_t)r * D;
#pragma omp simd
        for (int i = 0; i < D; i++) o[i] = c[r] * xr[i];
    }
}

/* One block [t0, t0 + n) of one (b, h), state (Mc, Sc) at its start, e its
 * errors [n, D] (from its chunk's M0), q, k its first rows:
 *   y_t = Bk_t Mc q_t + Ab_t Sc q_t + sum_{u<=t} W_{t,u} g_u (k_u . q_t) e_u
 *   M' = Bk_{n-1} Mc + Ab_{n-1} Sc + E^T diag(wl g) K
 *   S' = A_{n-1} Sc + E^T diag(al g) K
 * y (rows ldy apart) when not NULL; the end state written to (M, S), which
 * may be (Mc, Sc) (in place: elementwise, M before S). The forward
 * and the backward's recomputation both step through here. */
static void block_forward(float *y, int ldy, float *M, float *S, const float *Mc, const float *Sc, const float *q,
                          const float *k, int stride, const float *e, const float *et, const float *kp, const float *g,
                          int n, int D) {
    float A[BLK], Bk[BLK], Ab[BLK], al[BLK], wl[BLK], c[BLK];
    float W[BLK * BLK], P[BLK * BLK], tmp[ROWS_TMP];
    const size_t DD = (size_t)D * D;
    const int R = ROWS_TMP / D; /* scaled rows per product (0: D > ROWS_TMP) */
    decays(A, Bk, Ab, W, NULL, al, wl, et, kp, n);
    if (y) {
        for (int r0 = 0; r0 < n; r0 += R > 0 ? R : n) {
            if (R == 0) { /* very wide heads: row by row */
                for (int t = 0; t < n; t++) {
                    const float *qt = q + (size_t)t * stride;
                    float *yt = y + (size_t)t * ldy;
                    cblas_sgemv(CblasRowMajor, CblasNoTrans, D, D, Bk[t], Mc, D, qt, 1, 0.0f, yt, 1);
                    cblas_sgemv(CblasRowMajor, CblasNoTrans, D, D, Ab[t], Sc, D, qt, 1, 1.0f, yt, 1);
                }
                break;
            }
            int nr = n - r0 < R ? n - r0 : R;
            const float *qr = q + (size_t)r0 * stride;
            float *yr = y + (size_t)r0 * ldy;
            scale_rows(tmp, qr, stride, Bk + r0, nr, D);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, D, D, 1.0f, tmp, D, Mc, D, 0.0f, yr, ldy);
            scale_rows(tmp, qr, stride, Ab + r0, nr, D);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, D, D, 1.0f, tmp, D, Sc, D, 1.0f, yr, ldy);
        }
        /* P = (W o Q K^T) g over u, lower triangle; y += P E */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, D, 1.0f, q, stride, k, stride, 0.0f, P, n);
        for (int t = 0; t < n; t++)
            for (int u = 0; u < n; u++) P[t * n + u] = u <= t ? W[t * n + u] * g[u] * P[t * n + u] : 0.0f;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, D, n, 1.0f, P, n, e, D, 1.0f, y, ldy);
    }
    const float Bn = Bk[n - 1], Abn = Ab[n - 1], An = A[n - 1];
#pragma omp simd
    for (size_t i = 0; i < DD; i++) {
        M[i] = Bn * Mc[i] + Abn * Sc[i];
        S[i] = An * Sc[i];
    }
    for (int pass = 0; pass < 2; pass++) {
        float *X = pass == 0 ? M : S;
        const float *cw = pass == 0 ? wl : al;
        for (int u = 0; u < n; u++) c[u] = cw[u] * g[u];
        const int Rs = R > 0 ? R : 1;
        for (int u0 = 0; u0 < n; u0 += Rs) {
            int nr = n - u0 < Rs ? n - u0 : Rs;
            if (R == 0) {
                cblas_sger(CblasRowMajor, D, D, c[u0], e + (size_t)u0 * D, 1, k + (size_t)u0 * stride, 1, X, D);
                continue;
            }
            scale_rows(tmp, k + (size_t)u0 * stride, stride, c + u0, nr, D);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, D, D, nr, 1.0f, e + (size_t)u0 * D, D, tmp, D, 1.0f, X,
                        D);
        }
    }
}

/* End of the block starting at t (within the segment ending at s1): the
 * chunk's end, at most BLK tokens on. */
static int block_end(int t, int s1, int chunk) {
    int c1 = (t / chunk + 1) * chunk;
    int t1 = t + BLK < c1 ? t + BLK : c1;
    return t1 < s1 ? t1 : s1;
}

void tlm_titans_forward(float *y, float *saved, const float *q, const float *k, const float *v, int stride,
                        const float *theta, const float *eta, const float *alpha, int B, int T, int H, int D,
                        int chunk) {
    if (B <= 0 || T <= 0 || H <= 0 || D <= 0 || chunk <= 0) return;
    const int K = segment_len(chunk);
    const int nseg = (T + K - 1) / K;
    const size_t DD = (size_t)D * D;
    float *e_all = saved + (size_t)B * H * nseg * 2 * DD;
    const int blas_threads = tlm_blas_single_begin();
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            size_t base = (size_t)b * T * stride + (size_t)h * D;
            const float *qb = q + base, *kb = k + base, *vb = v + base;
            float *ck = saved + ((size_t)b * H + h) * nseg * 2 * DD;
            float *eb = e_all + ((size_t)b * H + h) * T * D;
            float et[BLK], kp[BLK], g[BLK];
            for (int j = 0; j < nseg; j++) {
                /* the running state lives in this segment's checkpoint slot:
                 * the first block reads the previous one (or zeros), the
                 * others update it in place */
                float *M = ck + (size_t)j * 2 * DD, *S = M + DD;
                if (j == 0) memset(M, 0, 2 * DD * sizeof(float));
                const float *Mi = j == 0 ? M : ck + (size_t)(j - 1) * 2 * DD; /* the state so far */
                const float *Si = Mi + DD;
                int s1 = (j + 1) * K < T ? (j + 1) * K : T;
                for (int t = j * K; t < s1;) {
                    if (t % chunk == 0) {
                        int c1 = t + chunk < T ? t + chunk : T;
                        size_t ts = (size_t)t * stride;
                        chunk_errors_gemm(eb + (size_t)t * D, Mi, kb + ts, vb + ts, stride, c1 - t, D);
                    }
                    int t1 = block_end(t, s1, chunk), n = t1 - t;
                    size_t ts = (size_t)t * stride;
                    block_gates(et, kp, g, theta, eta, alpha, ((size_t)b * T + t) * H + h, H, n);
                    block_forward(y + ((size_t)b * T + t) * H * D + (size_t)h * D, H * D, M, S, Mi, Si, qb + ts,
                                  kb + ts, stride, eb + (size_t)t * D, et, kp, g, n, D);
                    Mi = M, Si = S;
                    t = t1;
                }
            }
        }
    }
    tlm_blas_single_end(blas_threads);
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

/* The backward's per-thread scratch, whose layout the device kernel keeps
 * per (b, h) (titans.cu): the states at the segment's block starts (K + 1
 * slots each of M and S), dM, dS, dM0, and 2D floats; then five n x n and
 * five n x D buffers of the block products (n = min(chunk, BLK)). */
size_t tlm_titans_scratch_floats(int D, int chunk) {
    const size_t DD = (size_t)D * D, n = (size_t)block_len(chunk);
    return (2 * (size_t)segment_len(chunk) + 5) * DD + 2 * (size_t)D + 5 * n * n + 5 * n * (size_t)D;
}

typedef struct {
    float *QK, *dYE, *W, *a, *P;      /* n x n */
    float *T1, *T2, *U, *KGm, *KGs; /* n x D */
} bwork;

static double frob(const float *x, const float *y, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * y[i];
    return s;
}

/* The backward of block_forward for one block (see the header comment):
 * Gm, Gs hold dL/dM, dL/dS at the block's end on entry and at its start on
 * return; dM0 accumulates dL/dM0 through the errors until the chunk's first
 * block (chunk_start) adds it to Gm. Writes the block's rows of dq, dk, dv
 * (ld stride) and its scalars (H apart). */
static void block_backward(float *dq, float *dk, float *dv, int stride, float *dth, float *deta, float *dalpha, int H,
                           const float *dy, int ldy, const float *Mc, const float *Sc, const float *M0, float *Gm,
                           float *Gs, float *dM0, bool chunk_start, const float *q, const float *k, const float *e,
                           const float *et, const float *kp, const float *g, int n, int D, const bwork *w) {
    float A[BLK], Bk[BLK], Ab[BLK], al[BLK], wl[BLK], xm[BLK], xs[BLK], gm[BLK], gs[BLK];
    double fm[BLK + 2] = {0}, fs[BLK + 2] = {0};
    const size_t DD = (size_t)D * D;
    float *QK = w->QK, *dYE = w->dYE, *W = w->W, *a = w->a, *P = w->P;
    float *T1 = w->T1, *T2 = w->T2, *U = w->U, *KGm = w->KGm, *KGs = w->KGs;
    decays(A, Bk, Ab, W, a, al, wl, et, kp, n);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, D, 1.0f, q, stride, k, stride, 0.0f, QK, n);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, D, 1.0f, dy, ldy, e, D, 0.0f, dYE, n);
    /* U_u = dS_u k_u = sum_{s>=u} W_{s,u} (q_s . k_u) dy_s + wl_u Gm k_u + al_u Gs k_u */
    for (int s = 0; s < n; s++)
        for (int u = 0; u < n; u++) P[s * n + u] = u <= s ? W[s * n + u] * QK[s * n + u] : 0.0f;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, D, n, 1.0f, P, n, dy, ldy, 0.0f, U, D);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, D, D, 1.0f, k, stride, Gm, D, 0.0f, KGm, D);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, D, D, 1.0f, k, stride, Gs, D, 0.0f, KGs, D);
    for (int u = 0; u < n; u++) {
        float *Uu = U + (size_t)u * D, *dvu = dv + (size_t)u * stride;
        const float *eu = e + (size_t)u * D, *gmu = KGm + (size_t)u * D, *gsu = KGs + (size_t)u * D;
#pragma omp simd
        for (int i = 0; i < D; i++) Uu[i] += wl[u] * gmu[i] + al[u] * gsu[i];
        gm[u] = dot(eu, gmu, D);
        gs[u] = dot(eu, gsu, D);
        dth[(size_t)u * H] = -2.0f * dot(eu, Uu, D);
        /* U becomes de_u = g_u U_u */
#pragma omp simd
        for (int i = 0; i < D; i++) {
            Uu[i] *= g[u];
            dvu[i] = -Uu[i];
        }
    }
    /* dk_u = g_u [sum_{s>=u} W_{s,u} (dy_s . e_u) q_s + wl_u Gm^T e_u + al_u Gs^T e_u] + M0^T de_u */
    for (int s = 0; s < n; s++)
        for (int u = 0; u < n; u++) P[s * n + u] = u <= s ? W[s * n + u] * dYE[s * n + u] : 0.0f;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, D, n, 1.0f, P, n, q, stride, 0.0f, T1, D);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, D, D, 1.0f, e, D, Gm, D, 0.0f, T2, D);
    for (int u = 0; u < n; u++) axpy(T1 + (size_t)u * D, wl[u], T2 + (size_t)u * D, D);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, D, D, 1.0f, e, D, Gs, D, 0.0f, T2, D);
    for (int u = 0; u < n; u++) {
        axpy(T1 + (size_t)u * D, al[u], T2 + (size_t)u * D, D);
        float *dku = dk + (size_t)u * stride;
        const float *t1 = T1 + (size_t)u * D;
#pragma omp simd
        for (int i = 0; i < D; i++) dku[i] = g[u] * t1[i];
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, D, D, 1.0f, U, D, M0, D, 1.0f, dk, stride);
    /* dq_t = Bk_t Mc^T dy_t + Ab_t Sc^T dy_t + sum_{u<=t} W_{t,u} g_u (e_u . dy_t) k_u */
    scale_rows(T1, dy, ldy, Bk, n, D);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, D, D, 1.0f, T1, D, Mc, D, 0.0f, dq, stride);
    scale_rows(T1, dy, ldy, Ab, n, D);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, D, D, 1.0f, T1, D, Sc, D, 1.0f, dq, stride);
    for (int s = 0; s < n; s++)
        for (int u = 0; u < n; u++) P[s * n + u] *= g[u];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, D, n, 1.0f, P, n, k, stride, 1.0f, dq, stride);
    /* the gates: deta_t = <dS_t, S_{t-1}>, dalpha_t = -<dM_t, M_{t-1}>, with
     * dM_t, dS_t walked back in the coordinates of the basis
     * {Mc, Sc, e_u k_u^T} the states are written in: fm[r] = <dM_t, r>,
     * fs[r] = <dS_t, r> (r = 0: Mc, 1: Sc, 2 + u: e_u k_u^T) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, D, D, 1.0f, q, stride, Mc, D, 0.0f, T1, D);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, D, D, 1.0f, q, stride, Sc, D, 0.0f, T2, D);
    for (int s = 0; s < n; s++) {
        xm[s] = dot(dy + (size_t)s * ldy, T1 + (size_t)s * D, D);
        xs[s] = dot(dy + (size_t)s * ldy, T2 + (size_t)s * D, D);
    }
    const double GmM = frob(Gm, Mc, DD), GmS = frob(Gm, Sc, DD), GsS = frob(Gs, Sc, DD);
    for (int t = n - 1; t >= 0; t--) {
        const float *Lt = dYE + (size_t)t * n, *Qt = QK + (size_t)t * n;
        if (t == n - 1) {
            fm[0] = xm[t] + GmM;
            fm[1] = xs[t] + GmS;
            fs[1] = fm[1] + GsS;
            for (int u = 0; u < t; u++) {
                fm[2 + u] = (double)Lt[u] * Qt[u] + gm[u];
                fs[2 + u] = fm[2 + u] + gs[u];
            }
        } else {
            const double kq = kp[t + 1], eq = et[t + 1];
            fm[0] = xm[t] + kq * fm[0];
            fm[1] = xs[t] + kq * fm[1];
            fs[1] = fm[1] + eq * fs[1];
            for (int u = 0; u < t; u++) {
                fm[2 + u] = (double)Lt[u] * Qt[u] + kq * fm[2 + u];
                fs[2 + u] = fm[2 + u] + eq * fs[2 + u];
            }
        }
        double da, dn;
        if (t == 0) {
            da = fm[0]; /* M_{-1} = Mc, S_{-1} = Sc */
            dn = fs[1];
        } else {
            const float *Wp = W + (size_t)(t - 1) * n, *ap = a + (size_t)(t - 1) * n;
            da = (double)Bk[t - 1] * fm[0] + (double)Ab[t - 1] * fm[1];
            dn = (double)A[t - 1] * fs[1];
            for (int u = 0; u < t; u++) {
                da += (double)Wp[u] * g[u] * fm[2 + u];
                dn += (double)ap[u] * g[u] * fs[2 + u];
            }
        }
        dalpha[(size_t)t * H] = (float)-da;
        deta[(size_t)t * H] = (float)dn;
    }
    /* to the block's start: dSc = A dS' + Ab dM' + dY^T diag(Ab) Q,
     * dMc = Bk dM' + dY^T diag(Bk) Q (+ the chunk's dM0 at its start) */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, D, D, n, 1.0f, U, D, k, stride, 1.0f, dM0, D);
    const float Bn = Bk[n - 1], Abn = Ab[n - 1], An = A[n - 1];
#pragma omp simd
    for (size_t i = 0; i < DD; i++) {
        Gs[i] = An * Gs[i] + Abn * Gm[i];
        Gm[i] = Bn * Gm[i];
    }
    scale_rows(T1, q, stride, Ab, n, D);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, D, D, n, 1.0f, dy, ldy, T1, D, 1.0f, Gs, D);
    scale_rows(T1, q, stride, Bk, n, D);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, D, D, n, 1.0f, dy, ldy, T1, D, 1.0f, Gm, D);
    if (chunk_start) {
#pragma omp simd
        for (size_t i = 0; i < DD; i++) {
            Gm[i] += dM0[i];
            dM0[i] = 0.0f;
        }
    }
}

void tlm_titans_backward(float *dq, float *dk, float *dv, float *dtheta, float *deta, float *dalpha, const float *dy,
                         const float *saved, const float *q, const float *k, const float *v, int stride,
                         const float *theta, const float *eta, const float *alpha, int B, int T, int H, int D,
                         int chunk, float *scratch, int threads) {
    (void)v; /* enters only through the saved e_t */
    if (B <= 0 || T <= 0 || H <= 0 || D <= 0 || chunk <= 0) return;
    const int K = segment_len(chunk);
    const int nseg = (T + K - 1) / K;
    const size_t DD = (size_t)D * D, nb = (size_t)block_len(chunk);
    const float *e_all = saved + (size_t)B * H * nseg * 2 * DD;
    const size_t per_thread = tlm_titans_scratch_floats(D, chunk);
    if (threads < 1) threads = 1;
    const int blas_threads = tlm_blas_single_begin();
#pragma omp parallel num_threads(threads)
    {
        float *scr = scratch + (size_t)tlm_thread_index() * per_thread;
        /* Ms[i], Ss[i]: the state at the start of the segment's block i */
        float *Ms = scr, *Ss = Ms + (size_t)(K + 1) * DD;
        float *Gm = Ss + (size_t)(K + 1) * DD, *Gs = Gm + DD, *dM0 = Gs + DD;
        float *x = dM0 + DD + 2 * (size_t)D;
        bwork w;
        w.QK = x, w.dYE = x + nb * nb, w.W = x + 2 * nb * nb, w.a = x + 3 * nb * nb, w.P = x + 4 * nb * nb;
        x += 5 * nb * nb;
        w.T1 = x, w.T2 = x + nb * D, w.U = x + 2 * nb * D, w.KGm = x + 3 * nb * D, w.KGs = x + 4 * nb * D;
        float et[BLK], kp[BLK], g[BLK];
        const int per = (chunk + BLK - 1) / BLK; /* blocks per (whole) chunk */
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++) {
            for (int h = 0; h < H; h++) {
                size_t base = (size_t)b * T * stride + (size_t)h * D;
                const float *qb = q + base, *kb = k + base;
                float *dqb = dq + base, *dkb = dk + base, *dvb = dv + base;
                const float *ck = saved + ((size_t)b * H + h) * nseg * 2 * DD;
                const float *eb = e_all + ((size_t)b * H + h) * T * D;
                memset(Gm, 0, 3 * DD * sizeof(float)); /* Gm, Gs, dM0 */
                for (int j = nseg - 1; j >= 0; j--) {
                    const int s0 = j * K, s1 = T < s0 + K ? T : s0 + K;
                    if (j == 0) {
                        memset(Ms, 0, DD * sizeof(float));
                        memset(Ss, 0, DD * sizeof(float));
                    } else {
                        memcpy(Ms, ck + (size_t)(j - 1) * 2 * DD, DD * sizeof(float));
                        memcpy(Ss, ck + (size_t)(j - 1) * 2 * DD + DD, DD * sizeof(float));
                    }
                    /* the states at the block starts, as the forward had them */
                    int nblk = 0;
                    for (int t = s0; t < s1; nblk++) {
                        int t1 = block_end(t, s1, chunk), n = t1 - t;
                        size_t ts = (size_t)t * stride;
                        if (t1 < s1) {
                            float *Mn = Ms + (size_t)(nblk + 1) * DD, *Sn = Ss + (size_t)(nblk + 1) * DD;
                            block_gates(et, kp, g, theta, eta, alpha, ((size_t)b * T + t) * H + h, H, n);
                            block_forward(NULL, 0, Mn, Sn, Ms + (size_t)nblk * DD, Ss + (size_t)nblk * DD, qb + ts,
                                          kb + ts, stride, eb + (size_t)t * D, et, kp, g, n, D);
                        }
                        t = t1;
                    }
                    /* walk the blocks back: block i is piece i % per of chunk i / per */
                    for (int i = nblk - 1; i >= 0; i--) {
                        const int t = s0 + (i / per) * chunk + (i % per) * BLK, i0 = i - i % per;
                        const int t1 = block_end(t, s1, chunk), n = t1 - t;
                        size_t ts = (size_t)t * stride, th0 = ((size_t)b * T + t) * H + h;
                        block_gates(et, kp, g, theta, eta, alpha, th0, H, n);
                        block_backward(dqb + ts, dkb + ts, dvb + ts, stride, dtheta + th0, deta + th0, dalpha + th0, H,
                                       dy + ((size_t)b * T + t) * H * D + (size_t)h * D, H * D, Ms + (size_t)i * DD,
                                       Ss + (size_t)i * DD, Ms + (size_t)i0 * DD, Gm, Gs, dM0, i == i0, qb + ts,
                                       kb + ts, eb + (size_t)t * D, et, kp, g, n, D, &w);
                    }
                }
            }
        }
    }
    tlm_blas_single_end(blas_threads);
}
