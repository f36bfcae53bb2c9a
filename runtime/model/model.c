/* The model interpreter. Each IR op maps to one case below, forward and
 * backward kinds side by side with the tensors they touch; the ops' operands
 * (buffers, parameters, kernel) come from the compiled model, so the memory
 * plan and the execution cannot disagree. */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena_plan.h"
#include "errmsg.h"
#include "tlm_rt/ops.h"
#include "tlm_rt/rng.h"

#ifdef _OPENMP
#include <omp.h>
#endif


static void *alloc_aligned(size_t bytes) {
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0) return NULL;
    memset(p, 0, bytes);
    return p;
}

bool tlm_model_create(tlm_model *m, const tlm_so *so, int64_t B, int64_t T, bool training,
                      char *err, size_t n) {
    memset(m, 0, sizeof *m);
    const tlm_blob_header *h = so->header;
    const tlm_abi_config *am = so->config;
    if (B < 1 || T < 1) return tlm_fail(err, n, "batch and sequence length must be positive");
    if (T > am->context) return tlm_fail(err, n, "sequence length %lld is longer than the model's context %lld",
                                     (long long)T, (long long)am->context);
    m->so = so;
    m->B = B;
    m->T = T;
    m->training = training;
    m->nops = (int)h->nops;
    m->nforward = (int)so->plans[TLM_PLAN_INFER].nops;
    if (!training) m->nops = m->nforward;
    m->param_floats = am->param_floats;
    m->offsets = calloc(h->nbuffers + 1, sizeof *m->offsets);
    if (!m->offsets) return tlm_fail(err, n, "out of memory");
    /* The stored plan when the sizes match it, else the same planner now. */
    int kind = training ? TLM_PLAN_TRAIN : TLM_PLAN_INFER;
    const tlm_abi_plan *stored = &so->plans[kind];
    if (stored->batch == B && stored->seq == T) {
        memcpy(m->offsets, tlm_so_plan_offsets(so, kind), h->nbuffers * sizeof *m->offsets);
        m->arena_bytes = stored->arena_bytes;
    } else {
        m->arena_bytes = tlm_plan_arena(so->buffers, (int)h->nbuffers, so->ops, m->nops, B, T, m->offsets,
                                        NULL, NULL);
        if (m->arena_bytes < 0) {
            tlm_model_destroy(m);
            return tlm_fail(err, n, "the activations for batch %lld × %lld tokens do not fit in memory",
                        (long long)B, (long long)T);
        }
    }
    size_t param_bytes = (size_t)m->param_floats * sizeof(float);
    m->params = alloc_aligned(param_bytes);
    m->grads = training ? alloc_aligned(param_bytes) : NULL;
    m->arena = alloc_aligned((size_t)m->arena_bytes);
    int64_t half = am->head_dim / 2;
    m->rope_cos = alloc_aligned((size_t)(T * half) * sizeof(float));
    m->rope_sin = alloc_aligned((size_t)(T * half) * sizeof(float));
    m->tokens = alloc_aligned((size_t)(B * T) * sizeof(int32_t));
    m->targets = alloc_aligned((size_t)(B * T) * sizeof(int32_t));
    if (!m->params || (training && !m->grads) || !m->arena || !m->rope_cos || !m->rope_sin || !m->tokens ||
        !m->targets) {
        double mib = (double)(param_bytes * (training ? 2 : 1) + (size_t)m->arena_bytes) / 1048576.0;
        tlm_model_destroy(m);
        return tlm_fail(err, n, "out of memory: the model needs %.0f MiB for batch %lld × %lld tokens", mib,
                    (long long)B, (long long)T);
    }
    /* Ops that read several parameters as one matrix need them adjacent. */
    for (uint32_t i = 0; i < h->nops; i++) {
        const tlm_abi_op *op = &so->ops[i];
        for (int j = 1; j < 4 && op->param[j] >= 0; j++) {
            const tlm_abi_param *a = &so->params[op->param[j - 1]], *b = &so->params[op->param[j]];
            if ((op->kind == TLM_OP_QKV || op->kind == TLM_OP_QKV_BACKWARD || op->kind == TLM_OP_LINEAR ||
                 op->kind == TLM_OP_LINEAR_DW || op->kind == TLM_OP_LINEAR_DX) &&
                (b->offset != a->offset + a->count || a->shape[1] != b->shape[1])) {
                tlm_model_destroy(m);
                return tlm_fail(err, n, "the model's op %u reads parameters that are not one matrix", i);
            }
        }
    }
    tlm_rope_init(m->rope_cos, m->rope_sin, (int)T, (int)am->head_dim, am->rope_base);
    m->threads = tlm_get_num_threads();
    return true;
}

void tlm_model_destroy(tlm_model *m) {
    free(m->offsets);
    free(m->params);
    free(m->grads);
    free(m->arena);
    free(m->rope_cos);
    free(m->rope_sin);
    free(m->tokens);
    free(m->targets);
    memset(m, 0, sizeof *m);
}

void tlm_model_init_params(tlm_model *m, uint64_t seed) {
    tlm_rng rng;
    tlm_rng_seed(&rng, seed);
    memset(m->params, 0, (size_t)m->param_floats * sizeof(float));
    for (uint32_t i = 0; i < m->so->header->nparams; i++) {
        const tlm_abi_param *p = &m->so->params[i];
        float *w = m->params + p->offset;
        if (p->init == TLM_INIT_NORMAL) tlm_rng_fill_normal(&rng, w, (size_t)p->count, 0.0f, (float)p->init_std);
        else if (p->init == TLM_INIT_ONES)
            for (int64_t k = 0; k < p->count; k++) w[k] = 1.0f;
    }
}

void tlm_model_zero_grads(tlm_model *m) {
    if (m->grads) memset(m->grads, 0, (size_t)m->param_floats * sizeof(float));
}

float *tlm_model_param(const tlm_model *m, int i) { return m->params + m->so->params[i].offset; }
float *tlm_model_grad(const tlm_model *m, int i) { return m->grads ? m->grads + m->so->params[i].offset : NULL; }

static float *buf(const tlm_model *m, int32_t b) {
    return b < 0 || m->offsets[b] < 0 ? NULL : (float *)(m->arena + m->offsets[b]);
}
static float *prm(const tlm_model *m, int32_t p) { return p < 0 ? NULL : m->params + m->so->params[p].offset; }
static float *grd(const tlm_model *m, int32_t p) {
    return p < 0 || !m->grads ? NULL : m->grads + m->so->params[p].offset;
}

float *tlm_model_buffer(const tlm_model *m, uint32_t role, int layer) {
    for (uint32_t i = 0; i < m->so->header->nbuffers; i++)
        if (m->so->buffers[i].role == role && m->so->buffers[i].layer == layer) return buf(m, (int32_t)i);
    return NULL;
}

const float *tlm_model_logits(const tlm_model *m) { return tlm_model_buffer(m, TLM_B_LOGITS, -1); }

/* Generated kernels take row (or width) ranges; split them into one chunk
 * per thread. Chunks are disjoint, so the results do not depend on the
 * split. */
#define SPLIT(count, lo, hi, body)                                               \
    do {                                                                         \
        int64_t count_ = (count), chunks_ = m->threads < 1 ? 1 : m->threads;     \
        /* at least 32 rows (or widths) a thread: below that a parallel region \
         * costs more than it saves */                                          \
        if (chunks_ > count_ / 32) chunks_ = count_ / 32 > 0 ? count_ / 32 : 1;  \
        _Pragma("omp parallel for schedule(static) num_threads(chunks_)")        \
        for (int64_t c_ = 0; c_ < chunks_; c_++) {                               \
            int64_t lo = count_ * c_ / chunks_, hi = count_ * (c_ + 1) / chunks_; \
            body;                                                                \
        }                                                                        \
    } while (0)

/* Rows of a linear op's weight: its parameters are contiguous rows of one
 * matrix (checked when the model is created). */
static int linear_rows(const tlm_model *m, const tlm_abi_op *op) {
    int rows = 0;
    for (int j = 0; j < 4 && op->param[j] >= 0; j++) rows += (int)m->so->params[op->param[j]].shape[0];
    return rows;
}

#include "titans_ops.h"

static double run_op(tlm_model *m, const tlm_abi_op *op, float dloss) {
    const tlm_abi_config *am = m->so->config;
    const int N = (int)(m->run_B * m->run_T), B = (int)m->run_B, T = (int)m->run_T;
    const int D = (int)am->d_model, H = (int)am->heads, hd = (int)am->head_dim, A = H * hd, V = (int)am->vocab;
    const float eps = (float)am->norm_eps;
    float *in0 = buf(m, op->in[0]), *in1 = buf(m, op->in[1]), *in2 = buf(m, op->in[2]), *in3 = buf(m, op->in[3]);
    float *out0 = buf(m, op->out[0]), *out1 = buf(m, op->out[1]), *out2 = buf(m, op->out[2]);
    float *p0 = prm(m, op->param[0]), *p1 = prm(m, op->param[1]), *p2 = prm(m, op->param[2]);
    float *g0 = grd(m, op->param[0]), *g1 = grd(m, op->param[1]), *g2 = grd(m, op->param[2]);
    const tlm_kernel_fns *k = op->kernel >= 0 ? &m->so->kernel_fns[op->kernel] : NULL;
    int64_t W = op->kernel >= 0 ? m->so->kernels[op->kernel].width : 0;

    switch ((enum tlm_op_kind)op->kind) {
    /* token embedding: resid.0 = embed[tokens] */
    case TLM_OP_EMBED:
        tlm_embedding_forward(out0, m->tokens, p0, N, D);
        break;
    case TLM_OP_EMBED_BACKWARD:
        tlm_embedding_backward(g0, in0, m->tokens, N, D);
        break;

    /* RMSNorm; its backward adds into the residual stream's gradient */
    case TLM_OP_RMSNORM:
        tlm_rmsnorm_forward(out0, out1, in0, p0, N, D, eps);
        break;
    case TLM_OP_RMSNORM_BACKWARD:
        if (!(op->flags & TLM_OP_FLAG_ACCUMULATE)) memset(out0, 0, (size_t)N * (size_t)D * sizeof(float));
        tlm_rmsnorm_backward(out0, g0, in0, in1, p0, in2, N, D);
        break;

    /* q, k, v in one GEMM: the three weights are one [3A, D] matrix */
    case TLM_OP_QKV:
        tlm_linear_forward(out0, in0, p0, N, D, 3 * A, false);
        break;
    case TLM_OP_QKV_BACKWARD:
        tlm_linear_backward(out0, g0, in0, in1, p0, N, D, 3 * A, false);
        (void)p1, (void)p2, (void)g1, (void)g2;
        break;

    /* rotary embeddings on q and k, in place inside the packed qkv */
    case TLM_OP_ROPE:
        tlm_rope_forward(out0, out0, m->rope_cos, m->rope_sin, B, T, H, hd, 3 * A);
        tlm_rope_forward(out0 + A, out0 + A, m->rope_cos, m->rope_sin, B, T, H, hd, 3 * A);
        break;
    case TLM_OP_ROPE_BACKWARD:
        tlm_rope_backward(out0, out0, m->rope_cos, m->rope_sin, B, T, H, hd, 3 * A);
        tlm_rope_backward(out0 + A, out0 + A, m->rope_cos, m->rope_sin, B, T, H, hd, 3 * A);
        break;

    /* causal softmax attention over the packed qkv */
    case TLM_OP_ATTENTION:
        tlm_attention_forward(out1, out0, in0, in0 + A, in0 + 2 * A, B, T, H, hd, 3 * A);
        break;
    case TLM_OP_ATTENTION_BACKWARD:
        tlm_attention_backward(out0, out0 + A, out0 + 2 * A, in0, in3, in2, in1, in1 + A, in1 + 2 * A, B, T, H,
                               hd, 3 * A);
        break;

    /* output projection with the residual added: mid = resid + y Wo^T */
    case TLM_OP_OUT_PROJ:
        memcpy(out0, in1, (size_t)N * (size_t)D * sizeof(float));
        tlm_linear_forward(out0, in0, p0, N, A, D, true);
        break;
    case TLM_OP_OUT_PROJ_BACKWARD:
        tlm_linear_backward(out0, g0, in0, in1, p0, N, A, D, false);
        break;

    /* the MLP, a generated kernel per width: resid.l+1 = mid + MLP(norm2) */
    case TLM_OP_MLP:
        memcpy(out2, in1, (size_t)N * (size_t)D * sizeof(float));
        SPLIT(N, r0, r1, k->fwd(r0, r1, in0, p0, p1, p2, out0, out1, out2));
        break;
    case TLM_OP_MLP_BACKWARD:
        SPLIT(N, r0, r1, k->bwd_data(r0, r1, in1, p0, p1, p2, in2, in3, in0, out0, out1, out2));
        SPLIT(W, j0, j1, k->bwd_weight(N, j0, j1, in1, in2, in3, in0, out0, out1, g0, g1, g2));
        break;

    /* LM head (the embedding when tied) and the loss */
    case TLM_OP_HEAD:
        tlm_linear_forward(out0, in0, p0, N, D, V, false);
        break;
    case TLM_OP_HEAD_BACKWARD:
        tlm_linear_backward(out0, g0, in0, in1, p0, N, D, V, false);
        break;
    case TLM_OP_LOSS:
        return tlm_crossentropy_forward(NULL, out0, in0, m->targets, N, V);
    case TLM_OP_LOSS_BACKWARD:
        tlm_crossentropy_backward(out0, in0, in1, m->targets, N, V, dloss);
        break;
    /* a linear map whose weight is one or more contiguous parameters */
    case TLM_OP_LINEAR:
        tlm_linear_forward(out0, in0, p0, N, (int)m->so->params[op->param[0]].shape[1], linear_rows(m, op), false);
        break;
    case TLM_OP_LINEAR_DW:
        tlm_linear_backward(NULL, g0, in0, in1, p0, N, (int)m->so->params[op->param[0]].shape[1], linear_rows(m, op),
                            false);
        break;
    case TLM_OP_LINEAR_DX:
        tlm_linear_backward(out0, NULL, in0, NULL, p0, N, (int)m->so->params[op->param[0]].shape[1],
                            linear_rows(m, op), (op->flags & TLM_OP_FLAG_ACCUMULATE) != 0);
        break;

    /* gated attention: y * sigmoid(gate), one gate per channel or per head */
    case TLM_OP_SIGMOID_GATE:
        if (am->gate) tlm_sigmoid_gate_forward(out0, in1, in0, N * H, hd);
        else tlm_sigmoid_gate_forward(out0, in1, in0, N * A, 1);
        break;
    case TLM_OP_SIGMOID_GATE_BACKWARD:
        if (am->gate) tlm_sigmoid_gate_backward(out0, out1, in0, in1, in2, N * H, hd);
        else tlm_sigmoid_gate_backward(out0, out1, in0, in1, in2, N * A, 1);
        break;

    /* titans' output gate: out = x * silu(gate), which is SwiGLU's product */
    case TLM_OP_SILU_GATE:
        tlm_swiglu_forward(out0, in1, in0, (size_t)N * (size_t)A);
        break;
    case TLM_OP_SILU_GATE_BACKWARD:
        tlm_swiglu_backward(out1, out0, in0, in2, in1, (size_t)N * (size_t)A);
        break;

    /* a norm per head (titans' read-out) */
    case TLM_OP_RMSNORM_HEADS:
        tlm_rmsnorm_heads_forward(out0, out1, in0, p0, N, H, hd, eps);
        break;
    case TLM_OP_RMSNORM_HEADS_BACKWARD:
        tlm_rmsnorm_heads_backward(out0, g0, in0, in1, p0, in2, N, H, hd);
        break;

    case TLM_OP_MEM_ACT:
    case TLM_OP_MEM_ACT_BACKWARD:
    case TLM_OP_MEM_GATES:
    case TLM_OP_MEM_GATES_BACKWARD:
    case TLM_OP_TITANS:
    case TLM_OP_TITANS_BACKWARD:
        titans_op(m, op, in0, in1, in2, in3, out0, out1, out2);
        break;
    }
    return 0;
}

double tlm_model_forward(tlm_model *m, const int32_t *tokens, const int32_t *targets, int64_t B, int64_t T) {
    if (B < 1 || T < 1 || B > m->B || T > m->T) return NAN;     /* the arena was planned for less */
    m->run_B = B;
    m->run_T = T;
    memcpy(m->tokens, tokens, (size_t)(B * T) * sizeof(int32_t));
    if (targets) memcpy(m->targets, targets, (size_t)(B * T) * sizeof(int32_t));
    double loss = 0;
    for (int i = 0; i < m->nforward; i++) {
        const tlm_abi_op *op = &m->so->ops[i];
        if (op->kind == TLM_OP_LOSS && !targets) continue;
        double v = run_op(m, op, 0);
        if (op->kind == TLM_OP_LOSS) loss = v;
    }
    return loss;
}

void tlm_model_backward(tlm_model *m, float dloss) {
    for (int i = m->nforward; i < m->nops; i++) run_op(m, &m->so->ops[i], dloss);
}
