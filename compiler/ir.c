#include "ir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena_plan.h"
#include "codegen.h"

static void *grow(void *p, int n, int *cap, size_t size) {
    if (n < *cap) return p;
    *cap = *cap ? 2 * *cap : 64;
    p = realloc(p, (size_t)*cap * size);
    if (!p) { fputs("out of memory\n", stderr); exit(3); }
    return p;
}

static char *fmt(const char *f, int layer) {
    char buf[128];
    snprintf(buf, sizeof buf, f, layer);
    return strdup(buf);
}

/* ---- parameters ---- */

static int add_param(ir_model *ir, char *name, uint32_t role, int layer, int64_t rows, int64_t cols,
                     uint32_t init, double std, bool decay) {
    ir->params = grow(ir->params, ir->nparams, &ir->caps[0], sizeof *ir->params);
    ir->param_names = realloc(ir->param_names, (size_t)ir->caps[0] * sizeof *ir->param_names);
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

static int add_buffer(ir_model *ir, char *name, uint32_t role, int layer, int64_t per_token,
                      int64_t per_token_t) {
    ir->buffers = grow(ir->buffers, ir->nbuffers, &ir->caps[1], sizeof *ir->buffers);
    ir->buffer_names = realloc(ir->buffer_names, (size_t)ir->caps[1] * sizeof *ir->buffer_names);
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

typedef struct operands { int in[4], out[4], param[4]; } operands;
#define NONE {-1, -1, -1, -1}

static void add_op(ir_model *ir, uint32_t kind, int layer, int kernel, uint32_t flags, operands o) {
    ir->ops = grow(ir->ops, ir->nops, &ir->caps[2], sizeof *ir->ops);
    tlm_abi_op *op = &ir->ops[ir->nops++];
    op->kind = kind;
    op->flags = flags;
    op->layer = layer;
    op->kernel = kernel;
    memcpy(op->in, o.in, sizeof o.in);
    memcpy(op->out, o.out, sizeof o.out);
    memcpy(op->param, o.param, sizeof o.param);
}

#define OPS(...) ((operands){__VA_ARGS__})

/* ---- kernels: one per distinct (kind, d_model, width) ---- */

static int kernel_for(ir_model *ir, const checked_model *m, int64_t width) {
    uint32_t kind = m->mlp == TLM_MLP_SWIGLU ? TLM_MLP_SWIGLU : TLM_MLP_GELU;
    for (int k = 0; k < ir->nkernels; k++)
        if (ir->kernels[k].mlp == kind && ir->kernels[k].width == width) return k;
    ir->kernels = grow(ir->kernels, ir->nkernels, &ir->caps[3], sizeof *ir->kernels);
    ir->kernel_symbols = realloc(ir->kernel_symbols, (size_t)ir->caps[3] * sizeof *ir->kernel_symbols);
    tlm_abi_kernel *k = &ir->kernels[ir->nkernels];
    memset(k, 0, sizeof *k);
    k->mlp = kind;
    k->d_model = m->d_model;
    k->width = width;
    tlm_kernel_spec spec = {kind == TLM_MLP_SWIGLU ? TLM_MLP_SWIGLU : TLM_MLP_GELU, (int)m->d_model,
                            (int)width};
    char symbol[128];
    tlm_kernel_symbol(&spec, TLM_ENTRY_FWD, symbol, sizeof symbol);
    ir->kernel_symbols[ir->nkernels] = strdup(symbol);
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
    int resid, mid, norm1, rstd1, qkv, probs, attn_y, gate_pre, attn_gated;
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
    return strdup(buf);
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
    y->up[i] = P(cms ? fmt2("model.layers.%d.cms.%d.up_proj.weight", l, i) : fmt("model.layers.%d.mlp.up_proj.weight", l),
                 TLM_P_UP, l, W, D, TLM_INIT_NORMAL, lw->std, true);
    y->down[i] = P(cms ? fmt2("model.layers.%d.cms.%d.down_proj.weight", l, i)
                       : fmt("model.layers.%d.mlp.down_proj.weight", l),
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
    y->attn_norm = P(fmt("model.layers.%d.input_layernorm.weight", l), TLM_P_ATTN_NORM, l, D, 0, TLM_INIT_ONES, 0,
                     false);
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
        y->mem_norm = P(fmt("model.layers.%d.self_attn.out_norm.weight", l), TLM_P_MEM_NORM, l, A, 0, TLM_INIT_ONES,
                        0, false);
        y->out_gate = P(fmt("model.layers.%d.self_attn.g_proj.weight", l), TLM_P_OUT_GATE, l, A, D,
                        TLM_INIT_NORMAL, lw->std, true);
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
    y->gate_pre = y->attn_gated = y->probs = y->attn_y = -1;
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
        y->probs = BUF(fmt("probs.%d", l), TLM_B_PROBS, l, 0, H);
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
        y->pre_gate[i] = lw->swiglu ? BUF(cms ? fmt2("pre_gate.%d.%d", l, i) : fmt("pre_gate.%d", l), TLM_B_PRE_GATE, l, W, 0)
                                    : -1;
        y->pre_up[i] = BUF(cms ? fmt2("pre_up.%d.%d", l, i) : fmt("pre_up.%d", l), TLM_B_PRE_UP, l, W, 0);
    }
}

static void block_grad_buffers(lowering *lw, block *y) {
    const checked_model *m = lw->m;
    int l = y->layer;
    int64_t A = lw->A, H = lw->H, W = m->widths[l];
    bool cms = m->mixer == TLM_MIXER_HOPE_ATTENTION;
    for (int i = 0; i < lw->levels; i++) {
        y->d_pre_gate[i] = lw->swiglu ? BUF(cms ? fmt2("d_pre_gate.%d.%d", l, i) : fmt("d_pre_gate.%d", l),
                                            TLM_B_D_PRE_GATE, l, W, 0)
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

#define IN(...) .in = {__VA_ARGS__}
#define OUT(...) .out = {__VA_ARGS__}
#define PARAMS(...) .param = {__VA_ARGS__}
#define OP(kind, layer, ...) add_op(lw->ir, kind, layer, -1, 0, OPS(__VA_ARGS__))
#define OPF(kind, layer, flags, ...) add_op(lw->ir, kind, layer, -1, flags, OPS(__VA_ARGS__))

/* The token mixer's forward: mid = resid + mixer(norm1). */
static void mixer_forward(lowering *lw, block *y) {
    const checked_model *m = lw->m;
    int l = y->layer;
    OP(TLM_OP_RMSNORM, l, IN(y->resid, -1, -1, -1), OUT(y->norm1, y->rstd1, -1, -1), PARAMS(y->attn_norm, -1, -1, -1));
    OP(TLM_OP_QKV, l, IN(y->norm1, -1, -1, -1), OUT(y->qkv, -1, -1, -1), PARAMS(y->q, y->k, y->v, -1));
    int mixed;                                 /* what o_proj reads */
    if (m->mixer == TLM_MIXER_TITANS) {
        OP(TLM_OP_MEM_ACT, l, IN(y->qkv, -1, -1, -1), OUT(y->mem_act, y->mem_qkv, y->mem_rnorm, -1), PARAMS(-1, -1, -1, -1));
        OP(TLM_OP_LINEAR, l, IN(y->norm1, -1, -1, -1), OUT(y->mem_gates_pre, -1, -1, -1), PARAMS(y->gates, y->gates + 1, y->gates + 2, -1));
        OP(TLM_OP_MEM_GATES, l, IN(y->mem_gates_pre, -1, -1, -1), OUT(y->mem_gates, -1, -1, -1), PARAMS(-1, -1, -1, -1));
        OP(TLM_OP_TITANS, l, IN(y->mem_qkv, y->mem_gates, -1, -1), OUT(y->mem_y, y->mem_saved, -1, -1), PARAMS(-1, -1, -1, -1));
        OP(TLM_OP_RMSNORM_HEADS, l, IN(y->mem_y, -1, -1, -1), OUT(y->mem_yn, y->mem_rstd, -1, -1), PARAMS(y->mem_norm, -1, -1, -1));
        OP(TLM_OP_LINEAR, l, IN(y->norm1, -1, -1, -1), OUT(y->gate_pre, -1, -1, -1), PARAMS(y->out_gate, -1, -1, -1));
        OP(TLM_OP_SILU_GATE, l, IN(y->mem_yn, y->gate_pre, -1, -1), OUT(y->attn_gated, -1, -1, -1), PARAMS(-1, -1, -1, -1));
        mixed = y->attn_gated;
    } else {
        OP(TLM_OP_ROPE, l, IN(-1, -1, -1, -1), OUT(y->qkv, -1, -1, -1), PARAMS(-1, -1, -1, -1));
        OP(TLM_OP_ATTENTION, l, IN(y->qkv, -1, -1, -1), OUT(y->probs, y->attn_y, -1, -1), PARAMS(-1, -1, -1, -1));
        mixed = y->attn_y;
        if (y->out_gate >= 0) {
            OP(TLM_OP_LINEAR, l, IN(y->norm1, -1, -1, -1), OUT(y->gate_pre, -1, -1, -1), PARAMS(y->out_gate, -1, -1, -1));
            OP(TLM_OP_SIGMOID_GATE, l, IN(y->gate_pre, y->attn_y, -1, -1), OUT(y->attn_gated, -1, -1, -1), PARAMS(-1, -1, -1, -1));
            mixed = y->attn_gated;
        }
    }
    OP(TLM_OP_OUT_PROJ, l, IN(mixed, y->resid, -1, -1), OUT(y->mid, -1, -1, -1), PARAMS(y->o, -1, -1, -1));
}

/* The MLP (or the CMS levels): next = mid + MLP(norm(mid)), level by level. */
static void mlp_forward(lowering *lw, block *y, int next) {
    int l = y->layer, kernel = lw->ir->layer_kernel[l];
    for (int i = 0; i < lw->levels; i++) {
        int out = i + 1 < lw->levels ? y->level_in[i + 1] : next;
        OP(TLM_OP_RMSNORM, l, IN(y->level_in[i], -1, -1, -1), OUT(y->norm2[i], y->rstd2[i], -1, -1), PARAMS(y->mlp_norm[i], -1, -1, -1));
        add_op(lw->ir, TLM_OP_MLP, l, kernel, 0,
               OPS(IN(y->norm2[i], y->level_in[i], -1, -1), OUT(y->pre_gate[i], y->pre_up[i], out, -1),
                   PARAMS(y->gate[i], y->up[i], y->down[i], -1)));
    }
}

/* Backward of the MLP levels: d_resid is the gradient at the block's output
 * and becomes the gradient at mid. */
static void mlp_backward(lowering *lw, block *y) {
    int l = y->layer, kernel = lw->ir->layer_kernel[l];
    for (int i = lw->levels - 1; i >= 0; i--) {
        add_op(lw->ir, TLM_OP_MLP_BACKWARD, l, kernel, 0,
               OPS(IN(lw->d_resid, y->norm2[i], y->pre_gate[i], y->pre_up[i]), OUT(y->d_pre_gate[i], y->d_pre_up[i], lw->d_norm, -1),
                   PARAMS(y->gate[i], y->up[i], y->down[i], -1)));
        OPF(TLM_OP_RMSNORM_BACKWARD, l, TLM_OP_FLAG_ACCUMULATE, IN(lw->d_norm, y->level_in[i], y->rstd2[i], -1),
            OUT(lw->d_resid, -1, -1, -1), PARAMS(y->mlp_norm[i], -1, -1, -1));
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
    OP(TLM_OP_OUT_PROJ_BACKWARD, l, IN(lw->d_resid, mixed, -1, -1), OUT(d_mixed, -1, -1, -1), PARAMS(y->o, -1, -1, -1));
    if (m->mixer == TLM_MIXER_TITANS) {
        OP(TLM_OP_SILU_GATE_BACKWARD, l, IN(y->d_attn_gated, y->mem_yn, y->gate_pre, -1), OUT(y->d_mem_yn, y->d_gate_pre, -1, -1), PARAMS(-1, -1, -1, -1));
        OP(TLM_OP_LINEAR_DW, l, IN(y->d_gate_pre, y->norm1, -1, -1), OUT(-1, -1, -1, -1), PARAMS(y->out_gate, -1, -1, -1));
        OP(TLM_OP_RMSNORM_HEADS_BACKWARD, l, IN(y->d_mem_yn, y->mem_y, y->mem_rstd, -1), OUT(y->d_mem_y, -1, -1, -1), PARAMS(y->mem_norm, -1, -1, -1));
        OP(TLM_OP_TITANS_BACKWARD, l, IN(y->d_mem_y, y->mem_qkv, y->mem_gates, y->mem_saved), OUT(y->d_mem_qkv, y->d_mem_gates, -1, -1), PARAMS(-1, -1, -1, -1));
        OP(TLM_OP_MEM_GATES_BACKWARD, l, IN(y->d_mem_gates, y->mem_gates, -1, -1), OUT(y->d_mem_gates_pre, -1, -1, -1), PARAMS(-1, -1, -1, -1));
        OP(TLM_OP_LINEAR_DW, l, IN(y->d_mem_gates_pre, y->norm1, -1, -1), OUT(-1, -1, -1, -1), PARAMS(y->gates, y->gates + 1, y->gates + 2, -1));
        OP(TLM_OP_MEM_ACT_BACKWARD, l, IN(y->d_mem_qkv, y->qkv, y->mem_act, y->mem_rnorm), OUT(y->d_qkv, -1, -1, -1), PARAMS(-1, -1, -1, -1));
        OP(TLM_OP_QKV_BACKWARD, l, IN(y->d_qkv, y->norm1, -1, -1), OUT(d_norm, -1, -1, -1), PARAMS(y->q, y->k, y->v, -1));
        OPF(TLM_OP_LINEAR_DX, l, TLM_OP_FLAG_ACCUMULATE, IN(y->d_mem_gates_pre, -1, -1, -1), OUT(d_norm, -1, -1, -1), PARAMS(y->gates, y->gates + 1, y->gates + 2, -1));
        OPF(TLM_OP_LINEAR_DX, l, TLM_OP_FLAG_ACCUMULATE, IN(y->d_gate_pre, -1, -1, -1), OUT(d_norm, -1, -1, -1), PARAMS(y->out_gate, -1, -1, -1));
    } else {
        if (y->out_gate >= 0) {
            OP(TLM_OP_SIGMOID_GATE_BACKWARD, l, IN(y->d_attn_gated, y->attn_y, y->gate_pre, -1), OUT(y->d_attn_y, y->d_gate_pre, -1, -1), PARAMS(-1, -1, -1, -1));
            OP(TLM_OP_LINEAR_DW, l, IN(y->d_gate_pre, y->norm1, -1, -1), OUT(-1, -1, -1, -1), PARAMS(y->out_gate, -1, -1, -1));
        }
        OP(TLM_OP_ATTENTION_BACKWARD, l, IN(y->d_attn_y, y->qkv, y->probs, y->attn_y), OUT(y->d_qkv, -1, -1, -1), PARAMS(-1, -1, -1, -1));
        OP(TLM_OP_ROPE_BACKWARD, l, IN(-1, -1, -1, -1), OUT(y->d_qkv, -1, -1, -1), PARAMS(-1, -1, -1, -1));
        OP(TLM_OP_QKV_BACKWARD, l, IN(y->d_qkv, y->norm1, -1, -1), OUT(d_norm, -1, -1, -1), PARAMS(y->q, y->k, y->v, -1));
        if (y->out_gate >= 0)
            OPF(TLM_OP_LINEAR_DX, l, TLM_OP_FLAG_ACCUMULATE, IN(y->d_gate_pre, -1, -1, -1), OUT(d_norm, -1, -1, -1), PARAMS(y->out_gate, -1, -1, -1));
    }
    OPF(TLM_OP_RMSNORM_BACKWARD, l, TLM_OP_FLAG_ACCUMULATE, IN(d_norm, y->resid, y->rstd1, -1), OUT(lw->d_resid, -1, -1, -1),
        PARAMS(y->attn_norm, -1, -1, -1));
}

static void plan(ir_model *ir, ir_plan *p, uint32_t kind, int nops, int64_t B, int64_t T, bool *ok) {
    p->head.kind = kind;
    p->head.nops = (uint32_t)nops;
    p->head.batch = B;
    p->head.seq = T;
    p->offsets = calloc((size_t)ir->nbuffers + 1, sizeof *p->offsets);
    p->first = calloc((size_t)ir->nbuffers + 1, sizeof *p->first);
    p->last = calloc((size_t)ir->nbuffers + 1, sizeof *p->last);
    p->head.arena_bytes = tlm_plan_arena(ir->buffers, ir->nbuffers, ir->ops, nops, B, T, p->offsets,
                                         p->first, p->last);
    if (p->head.arena_bytes < 0) *ok = false;
}

bool ir_lower(const checked_model *m, ir_model *ir) {
    memset(ir, 0, sizeof *ir);
    ir->m = m;
    int L = (int)m->layers;
    lowering lw_ = {ir, m, m->d_model, m->heads * m->head_dim, m->heads, m->head_dim, m->vocab,
                    m->mixer == TLM_MIXER_HOPE_ATTENTION ? m->ncms : 1,
                    0.02, 0.02 / sqrt(2.0 * (double)L), m->mlp == TLM_MLP_SWIGLU, -1, -1};
    lowering *lw = &lw_;
    block *blocks = calloc((size_t)L, sizeof *blocks);
    ir->layer_kernel = calloc((size_t)L, sizeof *ir->layer_kernel);

    int embed = P(strdup("model.embed_tokens.weight"), TLM_P_EMBED, -1, lw->V, lw->D, TLM_INIT_NORMAL, lw->std, false);
    for (int l = 0; l < L; l++) {
        blocks[l].layer = l;
        block_params(lw, &blocks[l]);
        ir->layer_kernel[l] = kernel_for(ir, m, m->widths[l]);
    }
    int final_norm = P(strdup("model.norm.weight"), TLM_P_FINAL_NORM, -1, lw->D, 0, TLM_INIT_ONES, 0, false);
    int head = m->tie_embeddings ? embed
                                 : P(strdup("lm_head.weight"), TLM_P_HEAD, -1, lw->V, lw->D, TLM_INIT_NORMAL, lw->std, true);
    ir->param_floats = (ir->param_floats + 15) / 16 * 16;

    for (int l = 0; l < L; l++) block_buffers(lw, &blocks[l]);
    int resid_last = BUF(fmt("resid.%d", L), TLM_B_RESID, L, lw->D, 0);
    int normf = BUF(strdup("normf"), TLM_B_NORMF, -1, lw->D, 0);
    int rstdf = BUF(strdup("rstdf"), TLM_B_RSTDF, -1, 1, 0);
    int logits = BUF(strdup("logits"), TLM_B_LOGITS, -1, lw->V, 0);
    int lse = BUF(strdup("lse"), TLM_B_LSE, -1, 1, 0);
    lw->d_resid = BUF(strdup("d_resid"), TLM_B_D_RESID, -1, lw->D, 0);
    lw->d_norm = BUF(strdup("d_norm"), TLM_B_D_NORM, -1, lw->D, 0);
    for (int l = 0; l < L; l++) block_grad_buffers(lw, &blocks[l]);

    /* Forward. */
    OP(TLM_OP_EMBED, -1, IN(-1, -1, -1, -1), OUT(blocks[0].resid, -1, -1, -1), PARAMS(embed, -1, -1, -1));
    for (int l = 0; l < L; l++) {
        mixer_forward(lw, &blocks[l]);
        mlp_forward(lw, &blocks[l], l + 1 < L ? blocks[l + 1].resid : resid_last);
    }
    OP(TLM_OP_RMSNORM, -1, IN(resid_last, -1, -1, -1), OUT(normf, rstdf, -1, -1), PARAMS(final_norm, -1, -1, -1));
    OP(TLM_OP_HEAD, -1, IN(normf, -1, -1, -1), OUT(logits, -1, -1, -1), PARAMS(head, -1, -1, -1));
    OP(TLM_OP_LOSS, -1, IN(logits, -1, -1, -1), OUT(lse, -1, -1, -1), PARAMS(-1, -1, -1, -1));
    ir->nforward = ir->nops;

    /* Backward, in reverse. The residual stream's gradient d_resid passes
     * through every block; each norm's backward adds its share to it. */
    OP(TLM_OP_LOSS_BACKWARD, -1, IN(logits, lse, -1, -1), OUT(logits, -1, -1, -1), PARAMS(-1, -1, -1, -1));
    OP(TLM_OP_HEAD_BACKWARD, -1, IN(logits, normf, -1, -1), OUT(lw->d_norm, -1, -1, -1), PARAMS(head, -1, -1, -1));
    OP(TLM_OP_RMSNORM_BACKWARD, -1, IN(lw->d_norm, resid_last, rstdf, -1), OUT(lw->d_resid, -1, -1, -1), PARAMS(final_norm, -1, -1, -1));
    for (int l = L - 1; l >= 0; l--) {
        mlp_backward(lw, &blocks[l]);
        mixer_backward(lw, &blocks[l]);
    }
    OP(TLM_OP_EMBED_BACKWARD, -1, IN(lw->d_resid, -1, -1, -1), OUT(-1, -1, -1, -1), PARAMS(embed, -1, -1, -1));
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
    free(ir->layer_kernel);
    ir_plan *plans[2] = {&ir->train, &ir->infer};
    for (int i = 0; i < 2; i++) {
        free(plans[i]->offsets);
        free(plans[i]->first);
        free(plans[i]->last);
    }
    memset(ir, 0, sizeof *ir);
}
