#include "ir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena_plan.h"
#include "codegen.h"
#include "xalloc.h"

static void *grow(void *p, int n, int *cap, size_t size) {
    if (n < *cap) return p;
    *cap = *cap ? 2 * *cap : 64;
    return tlm_xrealloc(p, (size_t)*cap * size);
}

static char *fmt(const char *f, int layer) {
    char buf[128];
    snprintf(buf, sizeof buf, f, layer);
    return tlm_xstrdup(buf);
}

/* ---- parameters ---- */

static int add_param(ir_model *ir, char *name, uint32_t role, int layer, int64_t rows, int64_t cols, uint32_t init,
                     double std, bool decay) {
    ir->params = grow(ir->params, ir->nparams, &ir->caps[0], sizeof *ir->params);
    ir->param_names = tlm_xrealloc(ir->param_names, (size_t)ir->caps[0] * sizeof *ir->param_names);
    tlm_abi_param *p = &ir->params[ir->nparams];
    memset(p, 0, sizeof *p);
    p->role = role;
    p->layer = layer;
    p->ndim = cols ? 2 : 1;
    p->shape[0] = rows;
    p->shape[1] = cols;
    p->count = cols ? rows * cols : rows;
    /* 16 floats: tensors start on 64-byte boundaries, except that k_proj
     * and v_proj follow q_proj directly so that the three form one
     * [3A, D] matrix and q, k, v take a single GEMM (likewise titans'
     * theta, eta and alpha projections). */
    bool packed = role == TLM_P_K || role == TLM_P_V || role == TLM_P_ETA || role == TLM_P_ALPHA;
    if (!packed) ir->param_floats = (ir->param_floats + 15) / 16 * 16;
    p->offset = ir->param_floats;
    ir->param_floats += p->count;
    p->init = init;
    p->init_std = std;
    p->decay = decay;
    p->period = 1;
    ir->param_names[ir->nparams] = name;
    return ir->nparams++;
}

/* ---- buffers ---- */

static int add_buffer(ir_model *ir, char *name, uint32_t role, int layer, int64_t per_token, int64_t per_token_t) {
    ir->buffers = grow(ir->buffers, ir->nbuffers, &ir->caps[1], sizeof *ir->buffers);
    ir->buffer_names = tlm_xrealloc(ir->buffer_names, (size_t)ir->caps[1] * sizeof *ir->buffer_names);
    tlm_abi_buffer *b = &ir->buffers[ir->nbuffers];
    memset(b, 0, sizeof *b);
    b->role = role;
    b->layer = layer;
    b->per_token = per_token;
    b->per_token_t = per_token_t;
    ir->buffer_names[ir->nbuffers] = name;
    return ir->nbuffers++;
}

/* ---- ops ---- */

static void add_op(ir_model *ir, const tlm_abi_op *op) {
    ir->ops = grow(ir->ops, ir->nops, &ir->caps[2], sizeof *ir->ops);
    ir->ops[ir->nops++] = *op;
}

/* EMIT(attention_backward, layer, .in_dy = ..., .out_dqkv = ...): an op by
 * its operand names (abi/tlm_ops.h), the names the executor reads. Every
 * slot starts at -1 (absent) and the named ones override it, so a forgotten
 * operand is absent (and refused by the validator), never buffer 0. The
 * override is the point, hence the pragma. */
#if defined(__clang__)
#pragma clang diagnostic ignored "-Winitializer-overrides"
#else
#pragma GCC diagnostic ignored "-Woverride-init"
#endif
#define ABSENT12 -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1
#define EMIT_OP(op_, layer_, kernel_, flags_, ...)          \
    add_op(lw->ir, &(tlm_abi_op){.kind = tlm_op_kind_##op_, \
                                 .flags = (flags_),         \
                                 .layer = (layer_),         \
                                 .kernel = (kernel_),       \
                                 .op_ = {ABSENT12, __VA_ARGS__}})
#define EMIT(op_, layer_, ...) EMIT_OP(op_, layer_, -1, 0, __VA_ARGS__)
/* the same, adding into its first output instead of writing it */
#define EMIT_ACC(op_, layer_, ...) EMIT_OP(op_, layer_, -1, TLM_OP_FLAG_ACCUMULATE, __VA_ARGS__)

/* ---- kernels: one per distinct (kind, d_model, width) ---- */

static int kernel_for(ir_model *ir, const checked_model *m, int64_t width) {
    tlm_mlp kind = m->mlp;
    for (int k = 0; k < ir->nkernels; k++)
        if (ir->kernels[k].mlp == kind && ir->kernels[k].width == width) return k;
    ir->kernels = grow(ir->kernels, ir->nkernels, &ir->caps[3], sizeof *ir->kernels);
    ir->kernel_symbols = tlm_xrealloc(ir->kernel_symbols, (size_t)ir->caps[3] * sizeof *ir->kernel_symbols);
    ir->kernel_impl_whys = tlm_xrealloc(ir->kernel_impl_whys, (size_t)ir->caps[3] * sizeof *ir->kernel_impl_whys);
    tlm_abi_kernel *k = &ir->kernels[ir->nkernels];
    memset(k, 0, sizeof *k);
    k->mlp = kind;
    k->d_model = m->d_model;
    k->width = width;
    tlm_kernel_spec spec = {kind, (int)m->d_model, (int)width};
    char symbol[128];
    tlm_kernel_symbol(&spec, TLM_ENTRY_FWD, symbol, sizeof symbol);
    ir->kernel_symbols[ir->nkernels] = tlm_xstrdup(symbol);
    k->cpu_impl = (uint32_t)tlm_cpu_mlp_choice(&spec, ir->cpu_mlp, &ir->kernel_impl_whys[ir->nkernels]);
    return ir->nkernels++;
}

/* The lowering builds three lists at once, layer by layer: parameters,
 * buffers and ops. A block's forward ops are emitted in order; its backward
 * ops are emitted later in reverse, so each block remembers its ids. */
typedef struct block {
    int layer;
    /* parameters */
    int attn_norm, q, k, v, o, out_gate, gates, mem_norm;
    int mlp_norm[TLM_MAX_CMS_LEVELS], gate[TLM_MAX_CMS_LEVELS], up[TLM_MAX_CMS_LEVELS], down[TLM_MAX_CMS_LEVELS];
    /* buffers kept from forward to backward */
    int resid, mid, norm1, rstd1, qkv, lse, attn_y, gate_pre, attn_gated;
    int mem_act, mem_qkv, mem_rnorm, mem_gates_pre, mem_gates, mem_y, mem_saved, mem_yn, mem_rstd;
    int level_in[TLM_MAX_CMS_LEVELS], norm2[TLM_MAX_CMS_LEVELS], rstd2[TLM_MAX_CMS_LEVELS];
    int pre_gate[TLM_MAX_CMS_LEVELS], pre_up[TLM_MAX_CMS_LEVELS];
    /* backward temporaries */
    int d_pre_gate[TLM_MAX_CMS_LEVELS], d_pre_up[TLM_MAX_CMS_LEVELS];
    int d_attn_gated, d_gate_pre, d_attn_y, d_qkv;
    int d_mem_yn, d_mem_y, d_mem_qkv, d_mem_gates, d_mem_gates_pre;
} block;

typedef struct lowering {
    ir_model *ir;
    const checked_model *m;
    int64_t D, A, H, hd, V;
    int levels;                    /* MLPs per block: CMS levels, or 1 */
    double std, out_std;
    bool swiglu;
    int d_resid, d_norm;           /* shared by every block's backward */
} lowering;

#define P(...) add_param(lw->ir, __VA_ARGS__)
#define BUF(...) add_buffer(lw->ir, __VA_ARGS__)

static char *fmt2(const char *f, int a, int b) {
    char buf[128];
    snprintf(buf, sizeof buf, f, a, b);
    return tlm_xstrdup(buf);
}

/* The parameter names of one MLP: Llama's for a plain block; for
 * hope_attention every CMS level gets model.layers.L.cms.I.* */
static void mlp_params(lowering *lw, block *y, int i) {
    int l = y->layer;
    int64_t W = lw->m->widths[l], D = lw->D;
    bool cms = lw->m->mixer == TLM_MIXER_HOPE_ATTENTION;
    y->mlp_norm[i] = P(cms ? fmt2("model.layers.%d.cms.%d.norm.weight", l, i)
                           : fmt("model.layers.%d.post_attention_layernorm.weight", l),
                       TLM_P_MLP_NORM, l, D, 0, TLM_INIT_ONES, 0, false);
    y->gate[i] = lw->swiglu ? P(cms ? fmt2("model.layers.%d.cms.%d.gate_proj.weight", l, i)
                                    : fmt("model.layers.%d.mlp.gate_proj.weight", l),
                                TLM_P_GATE, l, W, D, TLM_INIT_NORMAL, lw->std, true)
                            : -1;
    y->up[i] =
        P(cms ? fmt2("model.layers.%d.cms.%d.up_proj.weight", l, i) : fmt("model.layers.%d.mlp.up_proj.weight", l),
          TLM_P_UP, l, W, D, TLM_INIT_NORMAL, lw->std, true);
    y->down[i] =
        P(cms ? fmt2("model.layers.%d.cms.%d.down_proj.weight", l, i) : fmt("model.layers.%d.mlp.down_proj.weight", l),
          TLM_P_DOWN, l, D, W, TLM_INIT_NORMAL, lw->out_std, true);
    if (cms) {
        int first = y->mlp_norm[i], last = y->down[i];
        for (int p = first; p <= last; p++) {
            lw->ir->params[p].level = (uint32_t)i;
            lw->ir->params[p].period = (uint32_t)lw->m->cms[i];
        }
    }
}

static void block_params(lowering *lw, block *y) {
    const checked_model *m = lw->m;
    int l = y->layer;
    int64_t D = lw->D, A = lw->A, H = lw->H;
    y->out_gate = y->gates = y->mem_norm = -1;
    y->attn_norm =
        P(fmt("model.layers.%d.input_layernorm.weight", l), TLM_P_ATTN_NORM, l, D, 0, TLM_INIT_ONES, 0, false);
    y->q = P(fmt("model.layers.%d.self_attn.q_proj.weight", l), TLM_P_Q, l, A, D, TLM_INIT_NORMAL, lw->std, true);
    y->k = P(fmt("model.layers.%d.self_attn.k_proj.weight", l), TLM_P_K, l, A, D, TLM_INIT_NORMAL, lw->std, true);
    y->v = P(fmt("model.layers.%d.self_attn.v_proj.weight", l), TLM_P_V, l, A, D, TLM_INIT_NORMAL, lw->std, true);
    if (m->mixer == TLM_MIXER_GATED_ATTENTION)
        y->out_gate = P(fmt("model.layers.%d.self_attn.g_proj.weight", l), TLM_P_OUT_GATE, l,
                        m->gate == TLM_GATE_HEADWISE ? H : A, D, TLM_INIT_NORMAL, lw->std, true);
    if (m->mixer == TLM_MIXER_TITANS) {
        y->gates = P(fmt("model.layers.%d.self_attn.theta_proj.weight", l), TLM_P_THETA, l, H, D, TLM_INIT_NORMAL,
                     lw->std, true);
        P(fmt("model.layers.%d.self_attn.eta_proj.weight", l), TLM_P_ETA, l, H, D, TLM_INIT_NORMAL, lw->std, true);
        P(fmt("model.layers.%d.self_attn.alpha_proj.weight", l), TLM_P_ALPHA, l, H, D, TLM_INIT_NORMAL, lw->std, true);
        y->mem_norm =
            P(fmt("model.layers.%d.self_attn.out_norm.weight", l), TLM_P_MEM_NORM, l, A, 0, TLM_INIT_ONES, 0, false);
        y->out_gate = P(fmt("model.layers.%d.self_attn.g_proj.weight", l), TLM_P_OUT_GATE, l, A, D, TLM_INIT_NORMAL,
                        lw->std, true);
    }
    y->o = P(fmt("model.layers.%d.self_attn.o_proj.weight", l), TLM_P_O, l, D, A, TLM_INIT_NORMAL, lw->out_std, true);
    for (int i = 0; i < lw->levels; i++) mlp_params(lw, y, i);
}

/* Titans keeps (M, S) of every head after each segment of K >= 16 tokens
 * (K a multiple of the chunk; ceil(T / K) <= T / 16 + 1 segments) and each
 * token's error M0 k - v (H × head_dim floats): an upper bound on
 * tlm_titans_saved_floats for any B and T. */
static void titans_saved_size(lowering *lw, int64_t *per_token, int64_t *per_seq) {
    int64_t state = 2 * lw->H * lw->hd * lw->hd;     /* M and S of every head */
    *per_token = (state + 15) / 16 + lw->H * lw->hd;
    *per_seq = state;
}

static void block_buffers(lowering *lw, block *y) {
    const checked_model *m = lw->m;
    int l = y->layer;
    int64_t D = lw->D, A = lw->A, H = lw->H, W = m->widths[l];
    y->resid = BUF(fmt("resid.%d", l), TLM_B_RESID, l, D, 0);
    y->norm1 = BUF(fmt("norm1.%d", l), TLM_B_NORM1, l, D, 0);
    y->rstd1 = BUF(fmt("rstd1.%d", l), TLM_B_RSTD1, l, 1, 0);
    y->qkv = BUF(fmt("qkv.%d", l), TLM_B_QKV, l, 3 * A, 0);
    y->gate_pre = y->attn_gated = y->lse = y->attn_y = -1;
    if (m->mixer == TLM_MIXER_TITANS) {
        int64_t per_token, per_seq;
        titans_saved_size(lw, &per_token, &per_seq);
        y->mem_act = BUF(fmt("mem_act.%d", l), TLM_B_MEM_ACT, l, 3 * A, 0);
        y->mem_qkv = BUF(fmt("mem_qkv.%d", l), TLM_B_MEM_QKV, l, 3 * A, 0);
        y->mem_rnorm = BUF(fmt("mem_rnorm.%d", l), TLM_B_MEM_RNORM, l, 2 * H, 0);
        y->mem_gates_pre = BUF(fmt("mem_gates_pre.%d", l), TLM_B_MEM_GATES_PRE, l, 3 * H, 0);
        y->mem_gates = BUF(fmt("mem_gates.%d", l), TLM_B_MEM_GATES, l, 3 * H, 0);
        y->mem_y = BUF(fmt("mem_y.%d", l), TLM_B_MEM_Y, l, A, 0);
        y->mem_saved = BUF(fmt("mem_saved.%d", l), TLM_B_MEM_SAVED, l, per_token, 0);
        lw->ir->buffers[y->mem_saved].per_seq = per_seq;
        y->mem_yn = BUF(fmt("mem_yn.%d", l), TLM_B_MEM_YN, l, A, 0);
        y->mem_rstd = BUF(fmt("mem_rstd.%d", l), TLM_B_MEM_RSTD, l, H, 0);
    } else {
        y->lse = BUF(fmt("attn_lse.%d", l), TLM_B_ATTN_LSE, l, H, 0);
        y->attn_y = BUF(fmt("attn_y.%d", l), TLM_B_ATTN_Y, l, A, 0);
    }
    if (y->out_gate >= 0) {
        y->gate_pre = BUF(fmt("gate_pre.%d", l), TLM_B_GATE_PRE, l, lw->ir->params[y->out_gate].shape[0], 0);
        y->attn_gated = BUF(fmt("attn_gated.%d", l), TLM_B_ATTN_GATED, l, A, 0);
    }
    y->mid = BUF(fmt("mid.%d", l), TLM_B_MID, l, D, 0);
    for (int i = 0; i < lw->levels; i++) {
        bool cms = m->mixer == TLM_MIXER_HOPE_ATTENTION;
        /* level i reads u_i: the block's mid for i = 0, else the stream
         * after level i - 1 */
        y->level_in[i] = i == 0 ? y->mid : BUF(fmt2("cms_u.%d.%d", l, i), TLM_B_CMS_U, l, D, 0);
        y->norm2[i] = BUF(cms ? fmt2("norm2.%d.%d", l, i) : fmt("norm2.%d", l), TLM_B_NORM2, l, D, 0);
        y->rstd2[i] = BUF(cms ? fmt2("rstd2.%d.%d", l, i) : fmt("rstd2.%d", l), TLM_B_RSTD2, l, 1, 0);
        y->pre_gate[i] =
            lw->swiglu ? BUF(cms ? fmt2("pre_gate.%d.%d", l, i) : fmt("pre_gate.%d", l), TLM_B_PRE_GATE, l, W, 0) : -1;
        y->pre_up[i] = BUF(cms ? fmt2("pre_up.%d.%d", l, i) : fmt("pre_up.%d", l), TLM_B_PRE_UP, l, W, 0);
    }
}

static void block_grad_buffers(lowering *lw, block *y) {
    const checked_model *m = lw->m;
    int l = y->layer;
    int64_t A = lw->A, H = lw->H, W = m->widths[l];
    bool cms = m->mixer == TLM_MIXER_HOPE_ATTENTION;
    for (int i = 0; i < lw->levels; i++) {
        y->d_pre_gate[i] =
            lw->swiglu ? BUF(cms ? fmt2("d_pre_gate.%d.%d", l, i) : fmt("d_pre_gate.%d", l), TLM_B_D_PRE_GATE, l, W, 0)
                       : -1;
        y->d_pre_up[i] = BUF(cms ? fmt2("d_pre_up.%d.%d", l, i) : fmt("d_pre_up.%d", l), TLM_B_D_PRE_UP, l, W, 0);
    }
    y->d_attn_gated = y->d_gate_pre = -1;
    if (y->out_gate >= 0) {
        y->d_attn_gated = BUF(fmt("d_attn_gated.%d", l), TLM_B_D_ATTN_GATED, l, A, 0);
        y->d_gate_pre = BUF(fmt("d_gate_pre.%d", l), TLM_B_D_GATE_PRE, l, lw->ir->params[y->out_gate].shape[0], 0);
    }
    if (m->mixer == TLM_MIXER_TITANS) {
        y->d_mem_yn = BUF(fmt("d_mem_yn.%d", l), TLM_B_D_MEM_YN, l, A, 0);
        y->d_mem_y = BUF(fmt("d_mem_y.%d", l), TLM_B_D_MEM_Y, l, A, 0);
        y->d_mem_qkv = BUF(fmt("d_mem_qkv.%d", l), TLM_B_D_MEM_QKV, l, 3 * A, 0);
        y->d_mem_gates = BUF(fmt("d_mem_gates.%d", l), TLM_B_D_MEM_GATES, l, 3 * H, 0);
        y->d_mem_gates_pre = BUF(fmt("d_mem_gates_pre.%d", l), TLM_B_D_MEM_GATES_PRE, l, 3 * H, 0);
    } else {
        y->d_attn_y = BUF(fmt("d_attn_y.%d", l), TLM_B_D_ATTN_Y, l, A, 0);
    }
    y->d_qkv = BUF(fmt("d_qkv.%d", l), TLM_B_D_QKV, l, 3 * A, 0);
}

/* The token mixer's forward: mid = resid + mixer(norm1). */
static void mixer_forward(lowering *lw, block *y) {
    const checked_model *m = lw->m;
    int l = y->layer;
    EMIT(rmsnorm, l, .in_x = y->resid, .out_y = y->norm1, .out_rstd = y->rstd1, .param_weight = y->attn_norm);
    EMIT(qkv, l, .in_x = y->norm1, .out_qkv = y->qkv, .param_wq = y->q, .param_wk = y->k, .param_wv = y->v);
    int mixed;                                 /* what o_proj reads */
    if (m->mixer == TLM_MIXER_TITANS) {
        EMIT(memory_act, l, .in_qkv = y->qkv, .out_act = y->mem_act, .out_mem_qkv = y->mem_qkv,
             .out_rnorm = y->mem_rnorm);
        EMIT(linear, l, .in_x = y->norm1, .out_y = y->mem_gates_pre, .param_w0 = y->gates, .param_w1 = y->gates + 1,
             .param_w2 = y->gates + 2);
        EMIT(memory_gates, l, .in_pre = y->mem_gates_pre, .out_gates = y->mem_gates);
        EMIT(titans, l, .in_mem_qkv = y->mem_qkv, .in_gates = y->mem_gates, .out_y = y->mem_y,
             .out_saved = y->mem_saved);
        EMIT(rmsnorm_heads, l, .in_x = y->mem_y, .out_y = y->mem_yn, .out_rstd = y->mem_rstd,
             .param_weight = y->mem_norm);
        EMIT(linear, l, .in_x = y->norm1, .out_y = y->gate_pre, .param_w0 = y->out_gate);
        EMIT(silu_gate, l, .in_x = y->mem_yn, .in_gate_pre = y->gate_pre, .out_out = y->attn_gated);
        mixed = y->attn_gated;
    } else {
        EMIT(rope, l, .out_qkv = y->qkv);
        EMIT(attention, l, .in_qkv = y->qkv, .out_lse = y->lse, .out_y = y->attn_y);
        mixed = y->attn_y;
        if (y->out_gate >= 0) {
            EMIT(linear, l, .in_x = y->norm1, .out_y = y->gate_pre, .param_w0 = y->out_gate);
            EMIT(sigmoid_gate, l, .in_gate_pre = y->gate_pre, .in_y = y->attn_y, .out_out = y->attn_gated);
            mixed = y->attn_gated;
        }
    }
    EMIT(out_proj, l, .in_y = mixed, .in_resid = y->resid, .out_out = y->mid, .param_wo = y->o);
}

/* The MLP (or the CMS levels): next = mid + MLP(norm(mid)), level by level. */
static void mlp_forward(lowering *lw, block *y, int next) {
    int l = y->layer, kernel = lw->ir->layer_kernel[l];
    for (int i = 0; i < lw->levels; i++) {
        int out = i + 1 < lw->levels ? y->level_in[i + 1] : next;
        EMIT(rmsnorm, l, .in_x = y->level_in[i], .out_y = y->norm2[i], .out_rstd = y->rstd2[i],
             .param_weight = y->mlp_norm[i]);
        EMIT_OP(mlp, l, kernel, 0, .in_x = y->norm2[i], .in_resid = y->level_in[i], .out_pre_gate = y->pre_gate[i],
                .out_pre_up = y->pre_up[i], .out_out = out, .param_w_gate = y->gate[i], .param_w_up = y->up[i],
                .param_w_down = y->down[i]);
    }
}

/* Backward of the MLP levels: d_resid is the gradient at the block's output
 * and becomes the gradient at mid. */
static void mlp_backward(lowering *lw, block *y) {
    int l = y->layer, kernel = lw->ir->layer_kernel[l];
    for (int i = lw->levels - 1; i >= 0; i--) {
        EMIT_OP(mlp_backward, l, kernel, 0, .in_dout = lw->d_resid, .in_x = y->norm2[i], .in_pre_gate = y->pre_gate[i],
                .in_pre_up = y->pre_up[i], .out_d_pre_gate = y->d_pre_gate[i], .out_d_pre_up = y->d_pre_up[i],
                .out_dx = lw->d_norm, .param_w_gate = y->gate[i], .param_w_up = y->up[i], .param_w_down = y->down[i]);
        EMIT_ACC(rmsnorm_backward, l, .in_dy = lw->d_norm, .in_x = y->level_in[i], .in_rstd = y->rstd2[i],
                 .out_dx = lw->d_resid, .param_weight = y->mlp_norm[i]);
    }
}

/* Backward of the mixer: d_resid (at mid) gains the mixer's share and
 * becomes the gradient at the block's input. Gradients of norm1 come from
 * several projections: the first writes d_norm, the others add to it. */
static void mixer_backward(lowering *lw, block *y) {
    const checked_model *m = lw->m;
    int l = y->layer, d_norm = lw->d_norm;
    int d_mixed = y->out_gate >= 0 ? y->d_attn_gated : y->d_attn_y;
    int mixed = y->out_gate >= 0 ? y->attn_gated : y->attn_y;
    EMIT(out_proj_backward, l, .in_dout = lw->d_resid, .in_y = mixed, .out_dy = d_mixed, .param_wo = y->o);
    if (m->mixer == TLM_MIXER_TITANS) {
        EMIT(silu_gate_backward, l, .in_dout = y->d_attn_gated, .in_x = y->mem_yn, .in_gate_pre = y->gate_pre,
             .out_dx = y->d_mem_yn, .out_dgate_pre = y->d_gate_pre);
        EMIT(linear_dw, l, .in_dy = y->d_gate_pre, .in_x = y->norm1, .param_w0 = y->out_gate);
        EMIT(rmsnorm_heads_backward, l, .in_dy = y->d_mem_yn, .in_x = y->mem_y, .in_rstd = y->mem_rstd,
             .out_dx = y->d_mem_y, .param_weight = y->mem_norm);
        EMIT(titans_backward, l, .in_dy = y->d_mem_y, .in_mem_qkv = y->mem_qkv, .in_gates = y->mem_gates,
             .in_saved = y->mem_saved, .out_d_mem_qkv = y->d_mem_qkv, .out_dgates = y->d_mem_gates);
        EMIT(memory_gates_backward, l, .in_dgates = y->d_mem_gates, .in_gates = y->mem_gates,
             .out_dpre = y->d_mem_gates_pre);
        EMIT(linear_dw, l, .in_dy = y->d_mem_gates_pre, .in_x = y->norm1, .param_w0 = y->gates,
             .param_w1 = y->gates + 1, .param_w2 = y->gates + 2);
        EMIT(memory_act_backward, l, .in_d_mem_qkv = y->d_mem_qkv, .in_qkv = y->qkv, .in_act = y->mem_act,
             .in_rnorm = y->mem_rnorm, .out_dqkv = y->d_qkv);
        EMIT(qkv_backward, l, .in_dqkv = y->d_qkv, .in_x = y->norm1, .out_dx = d_norm, .param_wq = y->q,
             .param_wk = y->k, .param_wv = y->v);
        EMIT_ACC(linear_dx, l, .in_dy = y->d_mem_gates_pre, .out_dx = d_norm, .param_w0 = y->gates,
                 .param_w1 = y->gates + 1, .param_w2 = y->gates + 2);
        EMIT_ACC(linear_dx, l, .in_dy = y->d_gate_pre, .out_dx = d_norm, .param_w0 = y->out_gate);
    } else {
        if (y->out_gate >= 0) {
            EMIT(sigmoid_gate_backward, l, .in_dout = y->d_attn_gated, .in_y = y->attn_y, .in_gate_pre = y->gate_pre,
                 .out_dy = y->d_attn_y, .out_dgate_pre = y->d_gate_pre);
            EMIT(linear_dw, l, .in_dy = y->d_gate_pre, .in_x = y->norm1, .param_w0 = y->out_gate);
        }
        EMIT(attention_backward, l, .in_dy = y->d_attn_y, .in_qkv = y->qkv, .in_lse = y->lse, .in_y = y->attn_y,
             .out_dqkv = y->d_qkv);
        EMIT(rope_backward, l, .out_dqkv = y->d_qkv);
        EMIT(qkv_backward, l, .in_dqkv = y->d_qkv, .in_x = y->norm1, .out_dx = d_norm, .param_wq = y->q,
             .param_wk = y->k, .param_wv = y->v);
        if (y->out_gate >= 0) EMIT_ACC(linear_dx, l, .in_dy = y->d_gate_pre, .out_dx = d_norm, .param_w0 = y->out_gate);
    }
    EMIT_ACC(rmsnorm_backward, l, .in_dy = d_norm, .in_x = y->resid, .in_rstd = y->rstd1, .out_dx = lw->d_resid,
             .param_weight = y->attn_norm);
}

static void plan(ir_model *ir, ir_plan *p, uint32_t kind, int nops, int64_t B, int64_t T, bool *ok) {
    p->head.kind = kind;
    p->head.nops = (uint32_t)nops;
    p->head.batch = B;
    p->head.seq = T;
    p->offsets = tlm_xcalloc((size_t)ir->nbuffers + 1, sizeof *p->offsets);
    p->first = tlm_xcalloc((size_t)ir->nbuffers + 1, sizeof *p->first);
    p->last = tlm_xcalloc((size_t)ir->nbuffers + 1, sizeof *p->last);
    p->head.arena_bytes = tlm_plan_arena(ir->buffers, ir->nbuffers, ir->ops, nops, B, T, p->offsets, p->first, p->last);
    if (p->head.arena_bytes < 0) *ok = false;
}

bool ir_lower(const checked_model *m, int cpu_mlp, ir_model *ir) {
    memset(ir, 0, sizeof *ir);
    ir->m = m;
    ir->cpu_mlp = cpu_mlp;
    int L = (int)m->layers;
    lowering lw_ = {ir,
                    m,
                    m->d_model,
                    m->heads * m->head_dim,
                    m->heads,
                    m->head_dim,
                    m->vocab,
                    m->mixer == TLM_MIXER_HOPE_ATTENTION ? m->ncms : 1,
                    0.02,
                    0.02 / sqrt(2.0 * (double)L),
                    m->mlp == TLM_MLP_SWIGLU,
                    -1,
                    -1};
    lowering *lw = &lw_;
    block *blocks = tlm_xcalloc((size_t)L, sizeof *blocks);
    ir->layer_kernel = tlm_xcalloc((size_t)L, sizeof *ir->layer_kernel);

    int embed =
        P(tlm_xstrdup("model.embed_tokens.weight"), TLM_P_EMBED, -1, lw->V, lw->D, TLM_INIT_NORMAL, lw->std, false);
    for (int l = 0; l < L; l++) {
        blocks[l].layer = l;
        block_params(lw, &blocks[l]);
        ir->layer_kernel[l] = kernel_for(ir, m, m->widths[l]);
    }
    int final_norm = P(tlm_xstrdup("model.norm.weight"), TLM_P_FINAL_NORM, -1, lw->D, 0, TLM_INIT_ONES, 0, false);
    int head = m->tie_embeddings
                   ? embed
                   : P(tlm_xstrdup("lm_head.weight"), TLM_P_HEAD, -1, lw->V, lw->D, TLM_INIT_NORMAL, lw->std, true);
    ir->param_floats = (ir->param_floats + 15) / 16 * 16;

    for (int l = 0; l < L; l++) block_buffers(lw, &blocks[l]);
    int resid_last = BUF(fmt("resid.%d", L), TLM_B_RESID, L, lw->D, 0);
    int normf = BUF(tlm_xstrdup("normf"), TLM_B_NORMF, -1, lw->D, 0);
    int rstdf = BUF(tlm_xstrdup("rstdf"), TLM_B_RSTDF, -1, 1, 0);
    int logits = BUF(tlm_xstrdup("logits"), TLM_B_LOGITS, -1, lw->V, 0);
    int lse = BUF(tlm_xstrdup("lse"), TLM_B_LSE, -1, 1, 0);
    lw->d_resid = BUF(tlm_xstrdup("d_resid"), TLM_B_D_RESID, -1, lw->D, 0);
    lw->d_norm = BUF(tlm_xstrdup("d_norm"), TLM_B_D_NORM, -1, lw->D, 0);
    for (int l = 0; l < L; l++) block_grad_buffers(lw, &blocks[l]);

    /* Forward. */
    EMIT(embed, -1, .out_resid = blocks[0].resid, .param_embed = embed);
    for (int l = 0; l < L; l++) {
        mixer_forward(lw, &blocks[l]);
        mlp_forward(lw, &blocks[l], l + 1 < L ? blocks[l + 1].resid : resid_last);
    }
    EMIT(rmsnorm, -1, .in_x = resid_last, .out_y = normf, .out_rstd = rstdf, .param_weight = final_norm);
    EMIT(head, -1, .in_x = normf, .out_logits = logits, .param_w = head);
    EMIT(loss, -1, .in_logits = logits, .out_lse = lse);
    ir->nforward = ir->nops;

    /* Backward, in reverse. The residual stream's gradient d_resid passes
     * through every block; each norm's backward adds its share to it. The
     * loss's backward turns the logits into their gradient in place. */
    EMIT(loss_backward, -1, .in_logits = logits, .in_lse = lse, .out_dlogits = logits);
    EMIT(head_backward, -1, .in_dlogits = logits, .in_x = normf, .out_dx = lw->d_norm, .param_w = head);
    EMIT(rmsnorm_backward, -1, .in_dy = lw->d_norm, .in_x = resid_last, .in_rstd = rstdf, .out_dx = lw->d_resid,
         .param_weight = final_norm);
    for (int l = L - 1; l >= 0; l--) {
        mlp_backward(lw, &blocks[l]);
        mixer_backward(lw, &blocks[l]);
    }
    EMIT(embed_backward, -1, .in_dresid = lw->d_resid, .param_embed = embed);
    free(blocks);

    /* Plans for the default sizes: a training micro-batch, and one
     * sequence of the full context for inference. */
    bool ok = true;
    int64_t micro = m->train.batch / m->train.accumulate;
    if (micro < 1) micro = 1;
    plan(ir, &ir->train, TLM_PLAN_TRAIN, ir->nops, micro, m->train.context, &ok);
    plan(ir, &ir->infer, TLM_PLAN_INFER, ir->nforward, 1, m->context, &ok);
    return ok;
}

void ir_free(ir_model *ir) {
    for (int i = 0; i < ir->nparams; i++) free((char *)ir->param_names[i]);
    for (int i = 0; i < ir->nbuffers; i++) free((char *)ir->buffer_names[i]);
    for (int i = 0; i < ir->nkernels; i++) free(ir->kernel_symbols[i]);
    free(ir->params);
    free(ir->param_names);
    free(ir->buffers);
    free(ir->buffer_names);
    free(ir->ops);
    free(ir->kernels);
    free(ir->kernel_symbols);
    free(ir->kernel_impl_whys);
    free(ir->layer_kernel);
    ir_plan *plans[2] = {&ir->train, &ir->infer};
    for (int i = 0; i < 2; i++) {
        free(plans[i]->offsets);
        free(plans[i]->first);
        free(plans[i]->last);
    }
    memset(ir, 0, sizeof *ir);
}
