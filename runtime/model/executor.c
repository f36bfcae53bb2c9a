/* The CPU executor of the IR's op list: one function per op of the table in
 * abi/tlm_ops.h, forward and backward side by side, reading its operands by
 * the names the compiler's EMIT wrote them with (llm.c's gpt2_forward). A
 * missing function is a build error: the dispatch table is generated from
 * the op table. The shapes in the comments are per micro-batch: N = B·T
 * tokens, D = d_model, A = heads·head_dim, V = vocab, W = the layer's MLP
 * width. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "arena_plan.h"
#include "gpu_model.h"
#include "model.h"
#include "profile.h"
#include "op_context.h"
#include "tlm_rt/ops.h"

/* What every op reads: the model and the sizes of this forward
 * (op_context.h). */
typedef struct step {
    tlm_model *m;
    union { /* the sizes, also as fields of their own: s->N */
        tlm_op_sizes sizes;
        struct {
            TLM_OP_SIZES_FIELDS
        };
    };
    float dloss;               /* backward: the weight of the loss */
    double loss;               /* forward: what the loss op computed */
} step;

static float *buf(const step *s, int32_t b) {
    return b < 0 || s->m->offsets[b] < 0 ? NULL : (float *)(s->m->arena + s->m->offsets[b]);
}
static float *prm(const step *s, int32_t p) { return p < 0 ? NULL : s->m->params + s->m->so->params[p].offset; }
static float *grd(const step *s, int32_t p) {
    return p < 0 || !s->m->grads ? NULL : s->m->grads + s->m->so->params[p].offset;
}

/* Generated kernels take row (or width) ranges; split them into one chunk
 * per thread, of at least 32 rows (or widths): below that a parallel region
 * costs more than it saves. Chunks are disjoint, so the results do not
 * depend on the split. Fewer chunks than threads still take the whole
 * team, some threads idle: a smaller team of two or more makes libgomp end
 * the threads past its size and start new ones for the next full team.
 * (Unformatted: the pragma keeps a line of its own.) */
/* clang-format off */
#define SPLIT(count, lo, hi, body)                                                                                   \
    do {                                                                                                             \
        int64_t count_ = (count), team_ = s->m->threads < 1 ? 1 : s->m->threads, chunks_ = team_;                    \
        if (chunks_ > count_ / 32) chunks_ = count_ / 32 > 0 ? count_ / 32 : 1;                                      \
        if (chunks_ == 1) { /* no parallel construct: TLM_PARALLEL_FOR_IF (ops.h) says why */                     \
            int64_t lo = 0, hi = count_;                                                                             \
            body;                                                                                                    \
        } else {                                                                                                     \
            _Pragma("omp parallel for schedule(static) num_threads(team_)")                                          \
            for (int64_t c_ = 0; c_ < chunks_; c_++) {                                                               \
                int64_t lo = count_ * c_ / chunks_, hi = count_ * (c_ + 1) / chunks_;                                \
                body;                                                                                                \
            }                                                                                                        \
        }                                                                                                            \
    } while (0)
/* clang-format on */

/* ---- embedding ---- */

/* resid [N, D] = embed[tokens] */
static void op_embed(step *s, const tlm_abi_op *op) {
    OPERANDS(embed);
    tlm_embedding_forward(OUT(resid), s->m->tokens, PARAM(embed), s->N, s->D);
}
/* dembed[tokens] += dresid */
static void op_embed_backward(step *s, const tlm_abi_op *op) {
    OPERANDS(embed_backward);
    tlm_embedding_backward(GRAD(embed), IN(dresid), s->m->tokens, s->N, s->D);
}

/* ---- RMSNorm; its backward adds into the residual stream's gradient ---- */

/* y [N, D] = x rstd weight; rstd [N] */
static void op_rmsnorm(step *s, const tlm_abi_op *op) {
    OPERANDS(rmsnorm);
    tlm_rmsnorm_forward(OUT(y), OUT(rstd), IN(x), PARAM(weight), s->N, s->D, s->eps);
}
static void op_rmsnorm_backward(step *s, const tlm_abi_op *op) {
    OPERANDS(rmsnorm_backward);
    float *dx = OUT(dx);
    if (!ACCUMULATE) memset(dx, 0, (size_t)s->N * (size_t)s->D * sizeof(float));
    tlm_rmsnorm_backward(dx, GRAD(weight), IN(dy), IN(x), PARAM(weight), IN(rstd), s->N, s->D);
}

/* a norm per head (titans' read-out): y [N, A], rstd [N, H] */
static void op_rmsnorm_heads(step *s, const tlm_abi_op *op) {
    OPERANDS(rmsnorm_heads);
    tlm_rmsnorm_heads_forward(OUT(y), OUT(rstd), IN(x), PARAM(weight), s->N, s->H, s->hd, s->eps);
}
static void op_rmsnorm_heads_backward(step *s, const tlm_abi_op *op) {
    OPERANDS(rmsnorm_heads_backward);
    tlm_rmsnorm_heads_backward(OUT(dx), GRAD(weight), IN(dy), IN(x), PARAM(weight), IN(rstd), s->N, s->H, s->hd);
}

/* ---- q, k, v in one GEMM: wq, wk, wv are one [3A, D] matrix ---- */

/* qkv [N, 3A] = x [N, D] [wq; wk; wv]^T */
static void op_qkv(step *s, const tlm_abi_op *op) {
    OPERANDS(qkv);
    tlm_linear_forward(OUT(qkv), IN(x), PARAM(wq), s->N, s->D, 3 * s->A, false);
}
static void op_qkv_backward(step *s, const tlm_abi_op *op) {
    OPERANDS(qkv_backward);
    tlm_linear_backward(OUT(dx), GRAD(wq), IN(dqkv), IN(x), PARAM(wq), s->N, s->D, 3 * s->A, false);
}

/* ---- rotary embeddings on q and k, in place inside the packed qkv ----
 * A token's row is [q | k | v], A = H head_dim floats each, so q's and k's
 * heads are 2H consecutive heads turned by the same angles: one call, one
 * parallel region (two left the threads asleep between them: RoPE was 75%
 * busy at two threads with passive waits). */

static void op_rope(step *s, const tlm_abi_op *op) {
    OPERANDS(rope);
    float *qk = OUT(qkv);
    const int64_t from = tlm_kv_rope_offset(s->m, &s->sizes);
    const float *cos_t = s->m->rope_cos + from, *sin_t = s->m->rope_sin + from;
    tlm_rope_forward(qk, qk, cos_t, sin_t, s->B, s->T, 2 * s->H, s->hd, 3 * s->A);
}
static void op_rope_backward(step *s, const tlm_abi_op *op) {
    OPERANDS(rope_backward);
    float *dqk = OUT(dqkv);
    tlm_rope_backward(dqk, dqk, s->m->rope_cos, s->m->rope_sin, s->B, s->T, 2 * s->H, s->hd, 3 * s->A);
}

/* ---- causal softmax attention over the packed qkv ---- */

/* Sampling's KV cache: the layer's rows [T, 3A] of qkv. Filling copies
 * the forward's rows; decoding adds the token's row at its position, then
 * attends over rows [0, pos]. */
static float *kv_rows(const step *s, const tlm_abi_op *op) {
    return s->m->kv_cache + tlm_kv_rows_offset(s->m, &s->sizes, op->layer);
}
static void kv_fill(step *s, const tlm_abi_op *op, const float *qkv) {
    if (s->m->kv_mode == TLM_KV_FILL) memcpy(kv_rows(s, op), qkv, (size_t)s->N * 3 * (size_t)s->A * sizeof(float));
}
static void attention_decode(step *s, const tlm_abi_op *op) {
    OPERANDS(attention);
    const size_t row = 3 * (size_t)s->A;
    float *cache = kv_rows(s, op);
    memcpy(cache + (size_t)s->m->kv_pos * row, IN(qkv), row * sizeof(float));
    tlm_attention_decode(OUT(y), IN(qkv), cache + s->A, cache + 2 * s->A, (int)s->m->kv_pos + 1, s->H, s->hd, (int)row,
                         s->m->kv_scratch);
}

/* lse [N, H], y [N, A] */
static void op_attention(step *s, const tlm_abi_op *op) {
    if (s->m->kv_mode == TLM_KV_DECODE) {
        attention_decode(s, op);
        return;
    }
    OPERANDS(attention);
    const float *q = IN(qkv), *k = q + s->A, *v = q + 2 * s->A;
    tlm_attention_forward(OUT(y), OUT(lse), q, k, v, s->B, s->T, s->H, s->hd, 3 * s->A);
    kv_fill(s, op, q);
}
static void op_attention_backward(step *s, const tlm_abi_op *op) {
    OPERANDS(attention_backward);
    float *dq = OUT(dqkv), *dk = dq + s->A, *dv = dq + 2 * s->A;
    const float *q = IN(qkv), *k = q + s->A, *v = q + 2 * s->A;
    tlm_attention_backward(dq, dk, dv, IN(dy), IN(y), IN(lse), q, k, v, s->B, s->T, s->H, s->hd, 3 * s->A);
}

/* ---- output projection with the residual added ---- */

/* out [N, D] = resid + y [N, A] wo^T */
static void op_out_proj(step *s, const tlm_abi_op *op) {
    OPERANDS(out_proj);
    float *out = OUT(out);
    memcpy(out, IN(resid), (size_t)s->N * (size_t)s->D * sizeof(float));
    tlm_linear_forward(out, IN(y), PARAM(wo), s->N, s->A, s->D, true);
}
static void op_out_proj_backward(step *s, const tlm_abi_op *op) {
    OPERANDS(out_proj_backward);
    tlm_linear_backward(OUT(dy), GRAD(wo), IN(dout), IN(y), PARAM(wo), s->N, s->A, s->D, false);
}

/* ---- the MLP: a generated kernel per width, or its BLAS twin ---- */

/* The BLAS twin (runtime/ops/mlp.c) runs a width whose model.so says so
 * (tlmc's compile-time choice, tlm_abi_kernel.cpu_impl), and every width
 * while decoding: one token a sequence reads the weights once for a row or
 * a few, where the generated kernel's packed panels and register tiles of
 * several rows would cost more than the products, while the twin reads
 * each weight once for all the rows (for one row, matrix-vector products:
 * runtime/ops/matvec.c). The twin is called once for all the rows; its
 * GEMMs and products split their own work between the threads. */
static bool mlp_on_blas(const step *s, const tlm_abi_kernel *k) {
    return s->m->kv_mode == TLM_KV_DECODE || k->cpu_impl == TLM_MLP_IMPL_BLAS;
}

/* out [N, D] = resid + MLP(x); pre_gate, pre_up [N, W] kept for the backward */
static void op_mlp(step *s, const tlm_abi_op *op) {
    OPERANDS(mlp);
    const tlm_abi_kernel *k = &s->m->so->kernels[op->kernel];
    const float *x = IN(x), *w_gate = PARAM(w_gate), *w_up = PARAM(w_up), *w_down = PARAM(w_down);
    float *pre_gate = OUT(pre_gate), *pre_up = OUT(pre_up), *out = OUT(out);
    memcpy(out, IN(resid), (size_t)s->N * (size_t)s->D * sizeof(float));
    if (mlp_on_blas(s, k)) {
        const int C = (int)s->D, F = (int)k->width, N = (int)s->N;
        if (k->mlp == TLM_MLP_GELU) tlm_mlp_gelu_forward(C, F, 0, N, x, w_up, w_down, pre_up, out);
        else tlm_mlp_swiglu_forward(C, F, 0, N, x, w_gate, w_up, w_down, pre_gate, pre_up, out);
        return;
    }
    const tlm_kernel_fns *kernel = &s->m->so->kernel_fns[op->kernel];
    SPLIT(s->N, r0, r1, kernel->fwd(r0, r1, x, w_gate, w_up, w_down, pre_gate, pre_up, out));
}
/* dx [N, D] written from dout; the weights' gradients accumulate. The
 * generated kernels leave h in pre_up (bwd_data's rows, read by all of
 * bwd_weight's columns: SPLIT's barrier between them): nothing reads the
 * pre-activations after their backward. */
static void op_mlp_backward(step *s, const tlm_abi_op *op) {
    OPERANDS(mlp_backward);
    const tlm_kernel_fns *kernel = &s->m->so->kernel_fns[op->kernel];
    const tlm_abi_kernel *k = &s->m->so->kernels[op->kernel];
    const int64_t W = k->width;
    const float *dout = IN(dout), *x = IN(x), *pre_gate = IN(pre_gate);
    float *pre_up = IN(pre_up);
    const float *w_gate = PARAM(w_gate), *w_up = PARAM(w_up), *w_down = PARAM(w_down);
    float *d_pre_gate = OUT(d_pre_gate), *d_pre_up = OUT(d_pre_up), *dx = OUT(dx);
    float *dw_gate = GRAD(w_gate), *dw_up = GRAD(w_up), *dw_down = GRAD(w_down);
    if (mlp_on_blas(s, k)) {
        const int C = (int)s->D, F = (int)W, N = (int)s->N;
        if (k->mlp == TLM_MLP_GELU)
            tlm_mlp_gelu_backward(C, F, N, x, w_up, w_down, pre_up, dout, d_pre_up, dx, dw_up, dw_down);
        else
            tlm_mlp_swiglu_backward(C, F, N, x, w_gate, w_up, w_down, pre_gate, pre_up, dout, d_pre_gate, d_pre_up, dx,
                                    dw_gate, dw_up, dw_down);
        return;
    }
    SPLIT(s->N, r0, r1,
          kernel->bwd_data(r0, r1, x, w_gate, w_up, w_down, pre_gate, pre_up, dout, d_pre_gate, d_pre_up, dx));
    SPLIT(W, j0, j1,
          kernel->bwd_weight(s->N, j0, j1, x, pre_gate, pre_up, dout, d_pre_gate, d_pre_up, dw_gate, dw_up, dw_down));
}

/* ---- LM head (the embedding when tied) and the loss ---- */

/* logits [N, V] = x [N, D] w^T */
static void op_head(step *s, const tlm_abi_op *op) {
    OPERANDS(head);
    tlm_linear_forward(OUT(logits), IN(x), PARAM(w), s->N, s->D, s->V, false);
}
static void op_head_backward(step *s, const tlm_abi_op *op) {
    OPERANDS(head_backward);
    tlm_linear_backward(OUT(dx), GRAD(w), IN(dlogits), IN(x), PARAM(w), s->N, s->D, s->V, false);
}
/* the mean cross-entropy against the targets; lse [N] */
static void op_loss(step *s, const tlm_abi_op *op) {
    OPERANDS(loss);
    s->loss = tlm_crossentropy_forward(NULL, OUT(lse), IN(logits), s->m->targets, s->N, s->V);
}
static void op_loss_backward(step *s, const tlm_abi_op *op) {
    OPERANDS(loss_backward);
    tlm_crossentropy_backward(OUT(dlogits), IN(logits), IN(lse), s->m->targets, s->N, s->V, s->dloss);
}

/* ---- a linear map whose weight is one or more adjacent parameters ----
 * (the validator checks that w0, w1, w2 are rows of one matrix) */

static int linear_rows(const step *s, const int32_t w[3]) {
    int rows = 0;
    for (int j = 0; j < 3 && w[j] >= 0; j++) rows += (int)s->m->so->params[w[j]].shape[0];
    return rows;
}
static int linear_cols(const step *s, int32_t w0) { return (int)s->m->so->params[w0].shape[1]; }

/* y [N, rows] = x [N, cols] W^T */
static void op_linear(step *s, const tlm_abi_op *op) {
    OPERANDS(linear);
    const int32_t w[3] = {o->param_w0, o->param_w1, o->param_w2};
    tlm_linear_forward(OUT(y), IN(x), PARAM(w0), s->N, linear_cols(s, o->param_w0), linear_rows(s, w), false);
}
/* dW += dy^T x */
static void op_linear_dw(step *s, const tlm_abi_op *op) {
    OPERANDS(linear_dw);
    const int32_t w[3] = {o->param_w0, o->param_w1, o->param_w2};
    tlm_linear_backward(NULL, GRAD(w0), IN(dy), IN(x), PARAM(w0), s->N, linear_cols(s, o->param_w0), linear_rows(s, w),
                        false);
}
/* dx (= or +=) dy W */
static void op_linear_dx(step *s, const tlm_abi_op *op) {
    OPERANDS(linear_dx);
    const int32_t w[3] = {o->param_w0, o->param_w1, o->param_w2};
    tlm_linear_backward(OUT(dx), NULL, IN(dy), NULL, PARAM(w0), s->N, linear_cols(s, o->param_w0), linear_rows(s, w),
                        ACCUMULATE);
}

/* ---- gated attention: y sigmoid(gate), one gate per channel or per head ---- */

static void op_sigmoid_gate(step *s, const tlm_abi_op *op) {
    OPERANDS(sigmoid_gate);
    int rows = s->headwise_gate ? s->N * s->H : s->N * s->A, per_gate = s->headwise_gate ? s->hd : 1;
    tlm_sigmoid_gate_forward(OUT(out), IN(y), IN(gate_pre), rows, per_gate);
}
static void op_sigmoid_gate_backward(step *s, const tlm_abi_op *op) {
    OPERANDS(sigmoid_gate_backward);
    int rows = s->headwise_gate ? s->N * s->H : s->N * s->A, per_gate = s->headwise_gate ? s->hd : 1;
    tlm_sigmoid_gate_backward(OUT(dy), OUT(dgate_pre), IN(dout), IN(y), IN(gate_pre), rows, per_gate);
}

/* ---- titans: the output gate x silu(gate_pre), which is SwiGLU's product ---- */

static void op_silu_gate(step *s, const tlm_abi_op *op) {
    OPERANDS(silu_gate);
    tlm_swiglu_forward(OUT(out), IN(gate_pre), IN(x), (size_t)s->N * (size_t)s->A);
}
static void op_silu_gate_backward(step *s, const tlm_abi_op *op) {
    OPERANDS(silu_gate_backward);
    tlm_swiglu_backward(OUT(dgate_pre), OUT(dx), IN(dout), IN(gate_pre), IN(x), (size_t)s->N * (size_t)s->A);
}

/* ---- titans: the activations around the memory, and the memory ---- */

/* act = silu(qkv); mem_qkv = l2norm(q), l2norm(k), v of act; rnorm [N, 2H] */
static void op_memory_act(step *s, const tlm_abi_op *op) {
    OPERANDS(memory_act);
    tlm_titans_qkv_forward(OUT(act), OUT(mem_qkv), OUT(rnorm), IN(qkv), s->N, s->H, s->hd);
}
static void op_memory_act_backward(step *s, const tlm_abi_op *op) {
    OPERANDS(memory_act_backward);
    tlm_titans_qkv_backward(OUT(dqkv), IN(d_mem_qkv), IN(qkv), IN(act), IN(rnorm), s->N, s->H, s->hd);
}
/* gates: theta, eta, alpha as three [N, H] blocks, from pre [N, 3H] */
static void op_memory_gates(step *s, const tlm_abi_op *op) {
    OPERANDS(memory_gates);
    tlm_titans_gates_forward(OUT(gates), IN(pre), s->N, s->H, s->inner_lr);
}
static void op_memory_gates_backward(step *s, const tlm_abi_op *op) {
    OPERANDS(memory_gates_backward);
    tlm_titans_gates_backward(OUT(dpre), IN(dgates), IN(gates), s->N, s->H, s->inner_lr);
}

/* y [N, A] = M_t q_t; saved: the memory's checkpoints for the backward (the
 * compiler sized the buffer for any B and T; tlm_model_create checked it) */
/* Sampling: the layer's memory state (model.h, tlm_kv_state_floats). A
 * decoded token takes one step of it; the prefill runs the forward, then
 * walks the state over its tokens from zero. */
static float *titans_state(const step *s, const tlm_abi_op *op) {
    return s->m->kv_cache + tlm_kv_state_offset(&s->sizes, op->layer);
}
static void titans_state_walk(step *s, const tlm_abi_op *op, float *y, const float *q, const float *gates, int64_t t0,
                              int64_t t1) {
    const size_t NH = (size_t)s->N * (size_t)s->H, row = 3 * (size_t)s->A;
    for (int64_t t = t0; t < t1; t++) {
        const float *qt = q + (size_t)(t - t0) * row, *gt = gates + (size_t)(t - t0) * s->H;
        tlm_titans_decode(y, titans_state(s, op), qt, qt + s->A, qt + 2 * s->A, gt, gt + NH, gt + 2 * NH, s->H, s->hd,
                          t % s->chunk == 0, s->m->kv_scratch);
    }
}

static void op_titans(step *s, const tlm_abi_op *op) {
    OPERANDS(titans);
    const size_t NH = (size_t)s->N * (size_t)s->H;
    const float *q = IN(mem_qkv), *k = q + s->A, *v = q + 2 * s->A;
    const float *theta = IN(gates), *eta = theta + NH, *alpha = theta + 2 * NH;
    if (s->m->kv_mode == TLM_KV_DECODE) {
        titans_state_walk(s, op, OUT(y), q, theta, s->m->kv_pos, s->m->kv_pos + 1);
        return;
    }
    tlm_titans_forward(OUT(y), OUT(saved), q, k, v, 3 * s->A, theta, eta, alpha, s->B, s->T, s->H, s->hd, s->chunk);
    if (s->m->kv_mode == TLM_KV_FILL) {
        memset(titans_state(s, op), 0, (size_t)s->H * 3 * (size_t)s->hd * (size_t)s->hd * sizeof(float));
        titans_state_walk(s, op, NULL, q, theta, 0, s->N);
    }
}
static void op_titans_backward(step *s, const tlm_abi_op *op) {
    OPERANDS(titans_backward);
    const size_t NH = (size_t)s->N * (size_t)s->H;
    float *dq = OUT(d_mem_qkv), *dk = dq + s->A, *dv = dq + 2 * s->A;
    float *dtheta = OUT(dgates), *deta = dtheta + NH, *dalpha = dtheta + 2 * NH;
    const float *q = IN(mem_qkv), *k = q + s->A, *v = q + 2 * s->A;
    const float *theta = IN(gates), *eta = theta + NH, *alpha = theta + 2 * NH;
    tlm_titans_backward(dq, dk, dv, dtheta, deta, dalpha, IN(dy), IN(saved), q, k, v, 3 * s->A, theta, eta, alpha, s->B,
                        s->T, s->H, s->hd, s->chunk, s->m->titans_scratch, s->m->threads);
}

/* ---- dispatch: one entry per op of the table, or the build fails ---- */

typedef void (*op_fn)(step *, const tlm_abi_op *);
#define OP_ENTRY_(E, name, in, out, param, doc) [TLM_OP_##E] = op_##name,
static const op_fn op_functions[TLM_OP_COUNT] = {TLM_OPS(OP_ENTRY_)};

static step step_for(tlm_model *m, float dloss) {
    step s = {.m = m, .dloss = dloss};
    s.sizes = tlm_op_sizes_of(m);
    return s;
}

double tlm_model_forward(tlm_model *m, const int32_t *tokens, const int32_t *targets, int64_t B, int64_t T) {
    if (m->gpu) return tlm_gpu_model_forward(m, tokens, targets, B, T);
    if (B < 1 || T < 1 || B > m->B || T > m->T) return NAN;     /* the arena was planned for less */
    m->run_B = B;
    m->run_T = T;
    memcpy(m->tokens, tokens, (size_t)(B * T) * sizeof(int32_t));
    if (targets) memcpy(m->targets, targets, (size_t)(B * T) * sizeof(int32_t));
    step s = step_for(m, 0);
    for (int i = 0; i < m->nforward; i++) {
        const tlm_abi_op *op = &m->so->ops[i];
        if (op->kind == TLM_OP_LOSS && !targets) continue;
        tlm_profile_mark t0 = m->profile ? tlm_profile_now(m->profile) : (tlm_profile_mark){0};
        op_functions[op->kind](&s, op);
        if (m->profile) tlm_profile_op(m->profile, m, op, t0);
    }
    return targets ? s.loss : 0;
}

/* A parameter's offset and the last backward op that names it (-1: none):
 * its gradient is final once that op has run. Any parameter slot counts
 * (linear_dx only reads its weight): telling late is safe, early is not. */
typedef struct tlm_param_final {
    int64_t offset;
    int last_op;
} param_final;

static int by_offset_down(const void *a, const void *b) {
    int64_t x = ((const param_final *)a)->offset, y = ((const param_final *)b)->offset;
    return (x < y) - (x > y);
}

/* The parameters from the highest offset down; NULL without memory (then
 * the whole block is told final at the end). */
static param_final *final_order(const tlm_model *m) {
    uint32_t np = m->so->header->nparams;
    param_final *f = malloc((np + 1) * sizeof *f);
    if (!f) return NULL;
    for (uint32_t p = 0; p < np; p++) f[p] = (param_final){m->so->params[p].offset, -1};
    for (int i = m->nforward; i < m->nops; i++)
        for (int j = 0; j < 4; j++)
            if (m->so->ops[i].param[j] >= 0) f[m->so->ops[i].param[j]].last_op = i;
    qsort(f, np, sizeof *f, by_offset_down);
    return f;
}

void tlm_final_walk_begin(tlm_final_walk *w, const tlm_model *m) {
    *w = (tlm_final_walk){m->grads_final ? final_order(m) : NULL, 0, m->param_floats};
}

void tlm_final_walk_after_op(tlm_final_walk *w, tlm_model *m, int i) {
    if (!w->order) return; /* no grads_final, or no memory for the order: all told at the end */
    int64_t lo = w->frontier;
    uint32_t np = m->so->header->nparams;
    while (w->next < np && w->order[w->next].last_op <= i) lo = w->order[w->next++].offset;
    if (lo < w->frontier) m->grads_final(m->grads_final_ctx, lo, w->frontier);
    w->frontier = lo;
}

void tlm_final_walk_end(tlm_final_walk *w, tlm_model *m) {
    if (m->grads_final && w->frontier > 0) m->grads_final(m->grads_final_ctx, 0, w->frontier);
    w->frontier = 0;
    free(w->order);
    w->order = NULL;
}

void tlm_model_backward(tlm_model *m, float dloss) {
    if (m->gpu) {
        tlm_gpu_model_backward(m, dloss);
        return;
    }
    step s = step_for(m, dloss);
    tlm_final_walk walk;
    tlm_final_walk_begin(&walk, m);
    for (int i = m->nforward; i < m->nops; i++) {
        tlm_profile_mark t0 = m->profile ? tlm_profile_now(m->profile) : (tlm_profile_mark){0};
        op_functions[m->so->ops[i].kind](&s, &m->so->ops[i]);
        if (m->profile) tlm_profile_op(m->profile, m, &m->so->ops[i], t0);
        tlm_final_walk_after_op(&walk, m, i);
    }
    tlm_final_walk_end(&walk, m);
}
