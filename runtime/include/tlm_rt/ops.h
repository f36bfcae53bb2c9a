/* The numeric ops of the runtime: each is a forward/backward pair of free
 * functions living side by side in runtime/ops/<name>.c.
 *
 * Conventions (all ops):
 *   - float32 storage, row-major, no hidden allocation: every buffer is a
 *     pointer into the caller's parameter block or activation arena.
 *   - B batch, T time, C channels, N = B*T rows, V vocabulary, H heads,
 *     D head size, F MLP width. Weights use the PyTorch nn.Linear layout
 *     [out, in], so y = x W^T.
 *   - Parameter gradients (dw, dtable, ...) are always ACCUMULATED (+=), so
 *     a tied or shared parameter can collect from several places and the
 *     driver zeroes the gradient block once per step.
 *   - Input gradients are WRITTEN (=) unless the doc of the op says "+=".
 *     They are accumulated where the input typically fans out in a
 *     pre-norm block (the residual stream into rmsnorm, the normalised
 *     input into several projections) so the caller can sum branches
 *     without a temporary.
 *   - Outputs may alias inputs only where the doc says "in place ok".
 *   - Deterministic: every reduction has a fixed order that does not depend
 *     on the number of OpenMP threads; the GEMMs are OpenBLAS's.
 *   - Sizes are int. The ops form every product of sizes (an element index,
 *     N*C) in size_t; a caller that forms a row count itself (N = B*T, N*H)
 *     keeps it, and every size, at most TLM_OPS_MAX_INDEX. The model's
 *     executor forms N, N*H and N*A: tlm_model_create refuses a batch and
 *     context whose N times the widest per-token tensor is past the bound.
 */
#ifndef TLM_RT_OPS_H
#define TLM_RT_OPS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The largest size or row count an op takes (its size arguments are int). */
#define TLM_OPS_MAX_INDEX INT_MAX

/* ---- threads.c ---------------------------------------------------------- */

/* Sets the thread count of the OpenMP loops and of OpenBLAS together
 * (n <= 0: unchanged). Results are reproducible for a fixed count; the
 * library's own loops give the same bits for any count. */
void tlm_set_num_threads(int n);
/* The OpenMP thread count (1 when built without OpenMP). */
int tlm_get_num_threads(void);
/* The calling thread's index in its OpenMP team (0 outside one). */
int tlm_thread_index(void);
/* Whether OpenMP's idle threads sleep at once (OMP_WAIT_POLICY=passive,
 * GOMP_SPINCOUNT=0, KMP_BLOCKTIME=0) rather than spin a while first,
 * OpenMP's default, which keeps them on a CPU as if at work. */
bool tlm_threads_wait_passively(void);
/* OpenBLAS on one thread until tlm_blas_single_end(the value returned):
 * its thread count is a global, restored after. OpenMP's count stays as
 * it was (OpenBLAS's OpenMP build would set it to one with its own). */
int tlm_blas_single_begin(void);
void tlm_blas_single_end(int saved);
/* Both pools (OpenMP's and OpenBLAS's) on one thread until
 * tlm_threads_single_end(the counts returned), which restores each its own. */
typedef struct tlm_thread_counts {
    int omp, blas;
} tlm_thread_counts;
tlm_thread_counts tlm_threads_single_begin(void);
void tlm_threads_single_end(tlm_thread_counts saved);

/* ---- blas_kernels.c ----------------------------------------------------- */

/* The OpenBLAS kernel set the GEMMs run ("Haswell", "SkylakeX", ...). */
const char *tlm_blas_kernels(void);
/* The same, and OPENBLAS_CORETYPE where it is set (and whether OpenBLAS
 * runs the set it names), in a line. */
void tlm_blas_kernels_describe(char *buf, size_t n);

/* The least work from which an op splits its loop over threads (below it
 * a parallel region costs more than it saves); the results do not depend
 * on it. Attention's and Titans' training ops split at any size. */
/* the activations (n), the sigmoid gate (R*D), cross-entropy (N*V), the
 * optimizers and the gradient norm (n) */
#define TLM_PAR_MIN_ELEMENTS 32768
#define TLM_PAR_MIN_NORM 16384 /* rmsnorm, l2norm (R*D), rope (B*T*H*D) */
#define TLM_PAR_MIN_ROWS 256 /* the embedding's forward (N) */
#define TLM_PAR_MIN_MATVEC 131072 /* one token's linear maps (rows*cols) */
#define TLM_PAR_MIN_DECODE 65536 /* one token's attention over the cache (n*H*D) */

/* Whether a parallel region would have more than one thread: more than one
 * is set, and the caller is not in a parallel region already. */
bool tlm_threads_can_split(void);

/* A loop split over OpenMP's threads, statically, only when cond holds and
 * there are threads to split it; else the loop as it is. Not an `if`
 * clause: a parallel construct whose clause is false (or on one thread)
 * still runs as a team of one, and libgomp ends every team with a barrier
 * that wakes its waiters by a system call (futex), even when there are
 * none: a decoded token's sixty-odd small ops made sixty-odd system calls
 * on one thread (strace), a few microseconds each on a VM. The loop is
 * compiled twice, once in each branch. */
/* clang-format off */
#define TLM_PARALLEL_FOR_IF(cond, ...)                  \
    do {                                                \
        if ((cond) && tlm_threads_can_split()) {        \
            _Pragma("omp parallel for schedule(static)") \
            __VA_ARGS__                                 \
        } else {                                        \
            __VA_ARGS__                                 \
        }                                               \
    } while (0)
/* clang-format on */

/* ---- embedding.c ------------------------------------------------------ */

/* out[N,C] = table[ids[n], :].  ids: [N] in [0, V); table: [V,C]. */
void tlm_embedding_forward(float *out, const int32_t *ids, const float *table, int N, int C);
/* dtable[ids[n], :] += dout[n, :]  (scatter-add, in row order). */
void tlm_embedding_backward(float *dtable, const float *dout, const int32_t *ids, int N, int C);

/* ---- rmsnorm.c -------------------------------------------------------- */

/* out[N,C] = x * rstd[n] * w,  rstd[n] = 1/sqrt(mean_c(x^2) + eps)  (torch /
 * Llama RMSNorm). rstd: [N], saved for backward. w: [C]. */
void tlm_rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int N, int C, float eps);
/* dx[N,C] += ..., dw[C] += ...  (dx ACCUMULATES: x is the residual stream,
 * which also flows past the block). dw may be NULL. */
void tlm_rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x, const float *w, const float *rstd,
                          int N, int C);

/* RMSNorm over each head: x viewed as [N,H,D], each (n,h) row of D
 * normalised on its own. w: [H*D] (per head and channel) or NULL (no
 * scale). rstd: [N*H]. */
void tlm_rmsnorm_heads_forward(float *out, float *rstd, const float *x, const float *w, int N, int H, int D, float eps);
/* dx[N,H*D] written; dw[H*D] += (skipped when w or dw is NULL). */
void tlm_rmsnorm_heads_backward(float *dx, float *dw, const float *dout, const float *x, const float *w,
                                const float *rstd, int N, int H, int D);

/* ---- l2norm.c --------------------------------------------------------- */

/* out[R,D] = x * rnorm[r],  rnorm[r] = 1/sqrt(sum_d x^2 + eps).
 * For per-head use R = N*H, D = head size (the Titans q and k). */
void tlm_l2norm_forward(float *out, float *rnorm, const float *x, int R, int D, float eps);
/* dx[R,D] written. */
void tlm_l2norm_backward(float *dx, const float *dout, const float *x, const float *rnorm, int R, int D);

/* ---- matmul.c --------------------------------------------------------- */

/* y[N,out] = x[N,in] W[out,in]^T, or y += ... when accumulate (e.g. the
 * attention output projection added into the residual stream). */
void tlm_linear_forward(float *y, const float *x, const float *w, int N, int in, int out, bool accumulate);
/* dx[N,in] = dy W (or += when accumulate_dx); dw[out,in] += dy^T x.
 * dx or dw may be NULL to skip that half. */
void tlm_linear_backward(float *dx, float *dw, const float *dy, const float *x, const float *w, int N, int in, int out,
                         bool accumulate_dx);

/* ---- matvec.c --------------------------------------------------------- */

/* y[rows] = W x, or y += W x when accumulate: one token's linear map
 * (sampling with a KV cache), W [rows, cols] with leading dimension ldw.
 * Each row's sum is the same on any number of threads. */
void tlm_matvec(float *y, const float *w, const float *x, int rows, int cols, int ldw, bool accumulate);
/* y0 = W0 x and y1 = W1 x, both [rows, cols] dense, in one parallel region
 * (the MLP's gate and up projections). */
void tlm_matvec_pair(float *y0, const float *w0, float *y1, const float *w1, const float *x, int rows, int cols);

/* ---- rope.c ----------------------------------------------------------- */

/* Tables for rotary embeddings: cos_t, sin_t [T, D/2] with
 * angle(t, i) = t * base^(-2i/D) (computed in double, stored as float).
 * D must be even. To start at position p0 (e.g. a KV cache), pass
 * cos_t + p0*D/2 and sin_t + p0*D/2 to the ops below. */
void tlm_rope_init(float *cos_t, float *sin_t, int T, int D, double base);
/* Llama/HF "rotate_half": within each head, pairs (i, i + D/2) rotate by
 * angle(t, i):  out_i = x_i cos - x_{i+D/2} sin,
 *               out_{i+D/2} = x_{i+D/2} cos + x_i sin.
 * x, out: [B,T,H,D] with consecutive tokens `stride` floats apart
 * (stride = H*D for a plain tensor, 3*H*D inside a packed qkv).
 * In place ok (out == x). */
void tlm_rope_forward(float *out, const float *x, const float *cos_t, const float *sin_t, int B, int T, int H, int D,
                      int stride);
/* dx = rotation by -angle of dout. Same layout; written; in place ok. */
void tlm_rope_backward(float *dx, const float *dout, const float *cos_t, const float *sin_t, int B, int T, int H, int D,
                       int stride);

/* ---- attention.c ------------------------------------------------------ */

/* Causal multi-head softmax attention, scale 1/sqrt(D), flash style
 * (blocked, no T x T matrix; the probabilities are recomputed in backward).
 * q, k, v: [B,T,H,D] with consecutive tokens `stride` floats apart: stride =
 *   H*D for separate tensors; for a packed qkv [B,T,3,H,D] pass q = qkv,
 *   k = qkv + H*D, v = qkv + 2*H*D and stride = 3*H*D.
 * lse: [B,T,H], per token and head the log-sum-exp of its scaled scores
 *   (log sum_u exp(q_t . k_u / sqrt(D)), u <= t), saved for backward.
 * y: [B,T,H*D] (heads concatenated, ready for the output projection). */
void tlm_attention_forward(float *y, float *lse, const float *q, const float *k, const float *v, int B, int T, int H,
                           int D, int stride);
/* dq, dk, dv: same layout/stride as q, k, v; WRITTEN (only their head
 * slices: in a packed dqkv the three parts are disjoint). Uses the forward's
 * y and lse: P = exp(S - lse) is recomputed block by block, and the softmax
 * backward's row term sum_u P_tu dP_tu equals dy_t . y_t. No scratch beyond
 * each thread's stack. */
void tlm_attention_backward(float *dq, float *dk, float *dv, const float *dy, const float *y, const float *lse,
                            const float *q, const float *k, const float *v, int B, int T, int H, int D, int stride);

/* ---- activations.c (elementwise, n elements; in place ok unless noted) */

/* out = x * sigmoid(x) */
void tlm_silu_forward(float *out, const float *x, size_t n);
/* dx = dout * silu'(x) */
void tlm_silu_backward(float *dx, const float *dout, const float *x, size_t n);

/* out = 1 / (1 + exp(-x)) */
void tlm_sigmoid_forward(float *out, const float *x, size_t n);
/* dx = dout * s (1 - s), from the saved output s (in place ok). */
void tlm_sigmoid_backward(float *dx, const float *dout, const float *s, size_t n);

/* Sigmoid gate (gated attention): y [R,D], g [R] broadcast over D:
 *   out[r,d] = y[r,d] * sigmoid(g[r]).
 * Elementwise gate: R = N*H*D, D = 1. Head-wise gate: R = N*H, D = head
 * size. out may alias y in forward only if the caller keeps y elsewhere,
 * since backward needs it. */
void tlm_sigmoid_gate_forward(float *out, const float *y, const float *g, int R, int D);
/* dy [R,D] and dg [R] written (either may be NULL). */
void tlm_sigmoid_gate_backward(float *dy, float *dg, const float *dout, const float *y, const float *g, int R, int D);

/* h = silu(g) * u */
void tlm_swiglu_forward(float *h, const float *g, const float *u, size_t n);
/* dg = dh * u * silu'(g), du = dh * silu(g); written. dh may alias dg or du
 * (each element of dh is read before either output is written). */
void tlm_swiglu_backward(float *dg, float *du, const float *dh, const float *g, const float *u, size_t n);

/* out = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))  (GELU, tanh form,
 * = torch gelu(approximate="tanh")) */
void tlm_gelu_forward(float *out, const float *x, size_t n);
/* dx = dout * gelu'(x); written; in place ok (dx == dout). */
void tlm_gelu_backward(float *dx, const float *dout, const float *x, size_t n);

/* ---- mlp.c: the reference MLPs ------------------------------------------
 * Plain C/BLAS twins of the kernels the code generator emits per width
 * (codegen/codegen.h): the same three entries, the same argument order and
 * semantics, with the sizes C = d_model and F = width passed first instead
 * of being compiled in, but for one thing: the generated bwd_data leaves h
 * over pre_up and the generated bwd_weight reads it there, where these
 * keep pre_up and recompute h. So a layer's backward runs all twins or all
 * generated kernels, never one of each. Used by tests and as a fallback. Like the generated
 * kernels they allocate nothing (h = act(...) is recomputed in small tiles
 * on the stack) and every buffer is the whole tensor:
 *   x, out, dout, dx [N,C];  pre_gate, pre_up, d_pre_gate, d_pre_up [N,F];
 *   w_gate, w_up [F,C];  w_down [C,F]  (nn.Linear layout).
 * forward and backward_data work on rows [r0, r1); backward_weight on width
 * indices [j0, j1) summed over rows [0, rows). Disjoint ranges never write
 * the same memory, so a driver may split work between threads that way,
 * exactly as with the generated kernels.
 *
 * SwiGLU: g = x Wg^T, u = x Wu^T, h = silu(g) * u, out += h Wd^T.
 * GELU:   u = x Wu^T, h = gelu_tanh(u), out += h Wd^T  (no gate). */

/* pre_gate = x Wg^T, pre_up = x Wu^T (saved); out += h Wd^T (residual
 * add fused: out holds the residual stream on entry). */
void tlm_mlp_swiglu_forward(int C, int F, int r0, int r1, const float *x, const float *w_gate, const float *w_up,
                            const float *w_down, float *pre_gate, float *pre_up, float *out);
/* dh = dout Wd; d_pre_gate = dh u silu'(g); d_pre_up = dh silu(g)
 * (written); dx = d_pre_gate Wg + d_pre_up Wu (WRITTEN). x is unused (the
 * three entries share one argument vocabulary). */
void tlm_mlp_swiglu_backward_data(int C, int F, int r0, int r1, const float *x, const float *w_gate, const float *w_up,
                                  const float *w_down, const float *pre_gate, const float *pre_up, const float *dout,
                                  float *d_pre_gate, float *d_pre_up, float *dx);
/* For j in [j0, j1): dWg[j,:] += d_pre_gate[:,j]^T x,
 * dWu[j,:] += d_pre_up[:,j]^T x, dWd[:,j] += dout^T h[:,j] (ACCUMULATE). */
void tlm_mlp_swiglu_backward_weight(int C, int F, int rows, int j0, int j1, const float *x, const float *pre_gate,
                                    const float *pre_up, const float *dout, const float *d_pre_gate,
                                    const float *d_pre_up, float *dw_gate, float *dw_up, float *dw_down);
/* Both halves over all N rows and the whole width. */
void tlm_mlp_swiglu_backward(int C, int F, int N, const float *x, const float *w_gate, const float *w_up,
                             const float *w_down, const float *pre_gate, const float *pre_up, const float *dout,
                             float *d_pre_gate, float *d_pre_up, float *dx, float *dw_gate, float *dw_up,
                             float *dw_down);

/* GELU: pre_up = x Wu^T (saved); out += gelu(pre_up) Wd^T. */
void tlm_mlp_gelu_forward(int C, int F, int r0, int r1, const float *x, const float *w_up, const float *w_down,
                          float *pre_up, float *out);
/* d_pre_up = (dout Wd) gelu'(u) (written); dx = d_pre_up Wu (WRITTEN). */
void tlm_mlp_gelu_backward_data(int C, int F, int r0, int r1, const float *x, const float *w_up, const float *w_down,
                                const float *pre_up, const float *dout, float *d_pre_up, float *dx);
/* For j in [j0, j1): dWu[j,:] += d_pre_up[:,j]^T x,
 * dWd[:,j] += dout^T h[:,j] (ACCUMULATE). */
void tlm_mlp_gelu_backward_weight(int C, int F, int rows, int j0, int j1, const float *x, const float *pre_up,
                                  const float *dout, const float *d_pre_up, float *dw_up, float *dw_down);
void tlm_mlp_gelu_backward(int C, int F, int N, const float *x, const float *w_up, const float *w_down,
                           const float *pre_up, const float *dout, float *d_pre_up, float *dx, float *dw_up,
                           float *dw_down);

/* ---- crossentropy.c --------------------------------------------------- */

/* Softmax cross-entropy over the vocabulary, numerically stable.
 * logits [N,V]; targets [N] in [0,V), or < 0 to ignore that row (padding).
 * lse [N] = logsumexp of each row (saved for backward).
 * losses [N] = lse - logit[target] (0 for ignored rows; may be NULL).
 * Returns the mean loss over the rows that are not ignored (0 if none),
 * summed in double in row order (= torch F.cross_entropy, ignore_index<0). */
double tlm_crossentropy_forward(float *losses, float *lse, const float *logits, const int32_t *targets, int N, int V);
/* dlogits [N,V] = dloss / n_valid * (softmax(logits) - onehot(target))
 * (zero rows for ignored targets). Written; may alias logits (in place). */
void tlm_crossentropy_backward(float *dlogits, const float *logits, const float *lse, const int32_t *targets, int N,
                               int V, float dloss);

/* ---- titans.c: Titans neural memory (matrix memory, chunked) ----------
 * Per (batch, head), a D x D memory M and momentum S, both 0 at t = 0, are
 * written by gradient steps on |M k_t - v_t|^2 taken at the memory M0 of the
 * start of t's chunk of `chunk` tokens (chunk = 1: the exact recurrence; the
 * last chunk may be shorter):
 *   S_t = eta_t S_{t-1} - theta_t 2 (M0 k_t - v_t) k_t^T
 *   M_t = (1 - alpha_t) M_{t-1} + S_t,   y_t = M_t q_t.
 * Computed chunk-parallel: per block of at most 64 tokens of a chunk, y and
 * the state at its end as matrix products (titans.c derives them), forward
 * and backward; the same values as the token loop to float rounding.
 * q, k, v: [B,T,H,D] with consecutive tokens `stride` floats apart (packed
 *   qkv [B,T,3,H,D]: q = qkv, k = qkv + H*D, v = qkv + 2*H*D, stride =
 *   3*H*D). q and k are expected l2-normalised (not required).
 * theta, eta, alpha: [B,T,H], already activated (theta in (0, lr_max),
 *   eta and alpha in (0, 1)).
 * y: [B,T,H*D] (heads concatenated), written.
 * saved: tlm_titans_saved_floats(...) floats, written by the forward and read
 *   by the backward: (M, S) after every K = chunk*ceil(16/chunk) tokens and
 *   the chunk errors M0 k_t - v_t (layout in titans.c). */
size_t tlm_titans_saved_floats(int B, int T, int H, int D, int chunk);
void tlm_titans_forward(float *y, float *saved, const float *q, const float *k, const float *v, int stride,
                        const float *theta, const float *eta, const float *alpha, int B, int T, int H, int D,
                        int chunk);
/* dq, dk, dv: same layout/stride as q, k, v, WRITTEN (only their head
 * slices: in a packed dqkv the three parts are disjoint). dtheta, deta,
 * dalpha: [B,T,H], WRITTEN. dy: [B,T,H*D]. Recomputes each segment's states
 * from `saved` in `scratch`: tlm_titans_scratch_floats(D, chunk) floats for
 * each of `threads` threads (the caller allocates it, so the op itself
 * cannot fail). v is not read (it enters through the saved errors), so it
 * may be NULL. */
size_t tlm_titans_scratch_floats(int D, int chunk);
void tlm_titans_backward(float *dq, float *dk, float *dv, float *dtheta, float *deta, float *dalpha, const float *dy,
                         const float *saved, const float *q, const float *k, const float *v, int stride,
                         const float *theta, const float *eta, const float *alpha, int B, int T, int H, int D,
                         int chunk, float *scratch, int threads);

/* One token of the memory, for sampling: state holds per head M, S and
 * M0 (the memory at the start of the token's chunk), [H][3][D][D], after
 * the tokens before it (zeros before the first); q, k, v [H*D] and the
 * gates [H] of the token; chunk_start: the token opens a chunk (t % chunk
 * == 0), so M0 becomes M first. The recurrence's own token step (the
 * token form tlm_titans_forward computes chunk-parallel), so a state walked
 * token by token is the forward's to float rounding (not bit for bit).
 * y [H*D] (NULL: only the state). e: D floats of scratch. */
void tlm_titans_decode(float *y, float *state, const float *q, const float *k, const float *v, const float *theta,
                       const float *eta, const float *alpha, int H, int D, bool chunk_start, float *e);

/* The activations around the memory (titans_gates.c), per token n of N:
 *   act = silu(qkv)                         qkv, act: [N, 3, H, D] packed
 *   mem_qkv = l2norm(q), l2norm(k), v of act (per head); rnorm [N, 2H]
 *   the 1/norms of q and k, saved for the backward
 * and the memory's gates from pre [N, 3H] (theta, eta, alpha per head):
 *   gates = three [N, H] blocks: inner_lr sigmoid, sigmoid, sigmoid
 * (the layout tlm_titans_forward reads). Backwards write their outputs. */
void tlm_titans_qkv_forward(float *act, float *mem_qkv, float *rnorm, const float *qkv, int N, int H, int D);
void tlm_titans_qkv_backward(float *dqkv, const float *d_mem_qkv, const float *qkv, const float *act,
                             const float *rnorm, int N, int H, int D);
void tlm_titans_gates_forward(float *gates, const float *pre, int N, int H, float inner_lr);
void tlm_titans_gates_backward(float *dpre, const float *dgates, const float *gates, int N, int H, float inner_lr);

/* ---- attention_decode.c ------------------------------------------------ */

/* One token's causal attention over a KV cache (sampling): q [H*D] of the
 * token at position n - 1; k and v: the keys and values of positions
 * [0, n), row u at u * stride (the token's own row included); y [H*D].
 * The row n - 1 of tlm_attention_forward. scratch: H * n floats. */
void tlm_attention_decode(float *y, const float *q, const float *k, const float *v, int n, int H, int D, int stride,
                          float *scratch);

#endif
