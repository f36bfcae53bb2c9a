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
     * [3A, D] matrix and q, k, v take a single GEMM. */
    bool packed = role == TLM_P_K || role == TLM_P_V;
    if (!packed) ir->param_floats = (ir->param_floats + 15) / 16 * 16;
    p->offset = ir->param_floats;
    ir->param_floats += p->count;
    p->init = init;
    p->init_std = std;
    p->decay = decay;
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
    uint32_t kind = m->mlp == MLP_SWIGLU ? TLM_ABI_MLP_SWIGLU : TLM_ABI_MLP_GELU;
    for (int k = 0; k < ir->nkernels; k++)
        if (ir->kernels[k].mlp == kind && ir->kernels[k].width == width) return k;
    ir->kernels = grow(ir->kernels, ir->nkernels, &ir->caps[3], sizeof *ir->kernels);
    ir->kernel_symbols = realloc(ir->kernel_symbols, (size_t)ir->caps[3] * sizeof *ir->kernel_symbols);
    tlm_abi_kernel *k = &ir->kernels[ir->nkernels];
    memset(k, 0, sizeof *k);
    k->mlp = kind;
    k->d_model = m->d_model;
    k->width = width;
    tlm_kernel_spec spec = {kind == TLM_ABI_MLP_SWIGLU ? TLM_MLP_SWIGLU : TLM_MLP_GELU, (int)m->d_model,
                            (int)width};
    char symbol[128];
    tlm_kernel_symbol(&spec, TLM_ENTRY_FWD, symbol, sizeof symbol);
    ir->kernel_symbols[ir->nkernels] = strdup(symbol);
    return ir->nkernels++;
}

typedef struct layer_ids {
    int attn_norm, q, k, v, o, mlp_norm, gate, up, down;          /* params */
    int resid, mid, norm1, rstd1, qkv, probs, attn_y, norm2, rstd2, pre_gate, pre_up;
    int d_pre_gate, d_pre_up, d_attn_y, d_qkv;                     /* backward temporaries */
} layer_ids;

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
    int64_t D = m->d_model, A = m->heads * m->head_dim, V = m->vocab, H = m->heads;
    double std = 0.02, out_std = 0.02 / sqrt(2.0 * (double)L);   /* GPT-2's scaled residual init */
    bool swiglu = m->mlp == MLP_SWIGLU;
    layer_ids *ly = calloc((size_t)L, sizeof *ly);
    ir->layer_kernel = calloc((size_t)L, sizeof *ir->layer_kernel);

    int embed = add_param(ir, strdup("model.embed_tokens.weight"), TLM_P_EMBED, -1, V, D, TLM_INIT_NORMAL,
                          std, false);
    for (int l = 0; l < L; l++) {
        int64_t W = m->widths[l];
        layer_ids *y = &ly[l];
        y->attn_norm = add_param(ir, fmt("model.layers.%d.input_layernorm.weight", l), TLM_P_ATTN_NORM, l,
                                 D, 0, TLM_INIT_ONES, 0, false);
        y->q = add_param(ir, fmt("model.layers.%d.self_attn.q_proj.weight", l), TLM_P_Q, l, A, D,
                         TLM_INIT_NORMAL, std, true);
        y->k = add_param(ir, fmt("model.layers.%d.self_attn.k_proj.weight", l), TLM_P_K, l, A, D,
                         TLM_INIT_NORMAL, std, true);
        y->v = add_param(ir, fmt("model.layers.%d.self_attn.v_proj.weight", l), TLM_P_V, l, A, D,
                         TLM_INIT_NORMAL, std, true);
        y->o = add_param(ir, fmt("model.layers.%d.self_attn.o_proj.weight", l), TLM_P_O, l, D, A,
                         TLM_INIT_NORMAL, out_std, true);
        y->mlp_norm = add_param(ir, fmt("model.layers.%d.post_attention_layernorm.weight", l),
                                TLM_P_MLP_NORM, l, D, 0, TLM_INIT_ONES, 0, false);
        y->gate = swiglu ? add_param(ir, fmt("model.layers.%d.mlp.gate_proj.weight", l), TLM_P_GATE, l, W,
                                     D, TLM_INIT_NORMAL, std, true)
                         : -1;
        y->up = add_param(ir, fmt("model.layers.%d.mlp.up_proj.weight", l), TLM_P_UP, l, W, D,
                          TLM_INIT_NORMAL, std, true);
        y->down = add_param(ir, fmt("model.layers.%d.mlp.down_proj.weight", l), TLM_P_DOWN, l, D, W,
                            TLM_INIT_NORMAL, out_std, true);
        ir->layer_kernel[l] = kernel_for(ir, m, W);
    }
    int final_norm = add_param(ir, strdup("model.norm.weight"), TLM_P_FINAL_NORM, -1, D, 0,
                               TLM_INIT_ONES, 0, false);
    int head = m->tie_embeddings ? embed
                                 : add_param(ir, strdup("lm_head.weight"), TLM_P_HEAD, -1, V, D,
                                             TLM_INIT_NORMAL, std, true);

    /* Buffers: what the forward pass keeps for the backward pass, per layer. */
    for (int l = 0; l < L; l++) {
        int64_t W = m->widths[l];
        layer_ids *y = &ly[l];
        y->resid = add_buffer(ir, fmt("resid.%d", l), TLM_B_RESID, l, D, 0);
        y->norm1 = add_buffer(ir, fmt("norm1.%d", l), TLM_B_NORM1, l, D, 0);
        y->rstd1 = add_buffer(ir, fmt("rstd1.%d", l), TLM_B_RSTD1, l, 1, 0);
        y->qkv = add_buffer(ir, fmt("qkv.%d", l), TLM_B_QKV, l, 3 * A, 0);
        y->probs = add_buffer(ir, fmt("probs.%d", l), TLM_B_PROBS, l, 0, H);
        y->attn_y = add_buffer(ir, fmt("attn_y.%d", l), TLM_B_ATTN_Y, l, A, 0);
        y->mid = add_buffer(ir, fmt("mid.%d", l), TLM_B_MID, l, D, 0);
        y->norm2 = add_buffer(ir, fmt("norm2.%d", l), TLM_B_NORM2, l, D, 0);
        y->rstd2 = add_buffer(ir, fmt("rstd2.%d", l), TLM_B_RSTD2, l, 1, 0);
        y->pre_gate = swiglu ? add_buffer(ir, fmt("pre_gate.%d", l), TLM_B_PRE_GATE, l, W, 0) : -1;
        y->pre_up = add_buffer(ir, fmt("pre_up.%d", l), TLM_B_PRE_UP, l, W, 0);
    }
    int resid_last = add_buffer(ir, fmt("resid.%d", L), TLM_B_RESID, L, D, 0);
    int normf = add_buffer(ir, strdup("normf"), TLM_B_NORMF, -1, D, 0);
    int rstdf = add_buffer(ir, strdup("rstdf"), TLM_B_RSTDF, -1, 1, 0);
    int logits = add_buffer(ir, strdup("logits"), TLM_B_LOGITS, -1, V, 0);
    int lse = add_buffer(ir, strdup("lse"), TLM_B_LSE, -1, 1, 0);
    int d_resid = add_buffer(ir, strdup("d_resid"), TLM_B_D_RESID, -1, D, 0);
    int d_norm = add_buffer(ir, strdup("d_norm"), TLM_B_D_NORM, -1, D, 0);
    for (int l = 0; l < L; l++) {
        int64_t W = m->widths[l];
        layer_ids *y = &ly[l];
        y->d_pre_gate = swiglu ? add_buffer(ir, fmt("d_pre_gate.%d", l), TLM_B_D_PRE_GATE, l, W, 0) : -1;
        y->d_pre_up = add_buffer(ir, fmt("d_pre_up.%d", l), TLM_B_D_PRE_UP, l, W, 0);
        y->d_attn_y = add_buffer(ir, fmt("d_attn_y.%d", l), TLM_B_D_ATTN_Y, l, A, 0);
        y->d_qkv = add_buffer(ir, fmt("d_qkv.%d", l), TLM_B_D_QKV, l, 3 * A, 0);
    }

    /* Forward. */
    add_op(ir, TLM_OP_EMBED, -1, -1, 0, OPS(.in = NONE, .out = {ly[0].resid, -1, -1, -1}, .param = {embed, -1, -1, -1}));
    for (int l = 0; l < L; l++) {
        layer_ids *y = &ly[l];
        int next = l + 1 < L ? ly[l + 1].resid : resid_last;
        add_op(ir, TLM_OP_RMSNORM, l, -1, 0, OPS(.in = {y->resid, -1, -1, -1}, .out = {y->norm1, y->rstd1, -1, -1},
                                                 .param = {y->attn_norm, -1, -1, -1}));
        add_op(ir, TLM_OP_QKV, l, -1, 0, OPS(.in = {y->norm1, -1, -1, -1}, .out = {y->qkv, -1, -1, -1},
                                             .param = {y->q, y->k, y->v, -1}));
        add_op(ir, TLM_OP_ROPE, l, -1, 0, OPS(.in = NONE, .out = {y->qkv, -1, -1, -1}, .param = NONE));
        add_op(ir, TLM_OP_ATTENTION, l, -1, 0, OPS(.in = {y->qkv, -1, -1, -1}, .out = {y->probs, y->attn_y, -1, -1},
                                                   .param = NONE));
        add_op(ir, TLM_OP_OUT_PROJ, l, -1, 0, OPS(.in = {y->attn_y, y->resid, -1, -1}, .out = {y->mid, -1, -1, -1},
                                                  .param = {y->o, -1, -1, -1}));
        add_op(ir, TLM_OP_RMSNORM, l, -1, 0, OPS(.in = {y->mid, -1, -1, -1}, .out = {y->norm2, y->rstd2, -1, -1},
                                                 .param = {y->mlp_norm, -1, -1, -1}));
        add_op(ir, TLM_OP_MLP, l, ir->layer_kernel[l], 0,
               OPS(.in = {y->norm2, y->mid, -1, -1}, .out = {y->pre_gate, y->pre_up, next, -1},
                   .param = {y->gate, y->up, y->down, -1}));
    }
    add_op(ir, TLM_OP_RMSNORM, -1, -1, 0, OPS(.in = {resid_last, -1, -1, -1}, .out = {normf, rstdf, -1, -1},
                                              .param = {final_norm, -1, -1, -1}));
    add_op(ir, TLM_OP_HEAD, -1, -1, 0, OPS(.in = {normf, -1, -1, -1}, .out = {logits, -1, -1, -1},
                                           .param = {head, -1, -1, -1}));
    add_op(ir, TLM_OP_LOSS, -1, -1, 0, OPS(.in = {logits, -1, -1, -1}, .out = {lse, -1, -1, -1}, .param = NONE));
    ir->nforward = ir->nops;

    /* Backward, in reverse. The residual stream's gradient d_resid passes
     * through every block; each norm's backward adds its share to it. */
    add_op(ir, TLM_OP_LOSS_BACKWARD, -1, -1, 0, OPS(.in = {logits, lse, -1, -1}, .out = {logits, -1, -1, -1},
                                                    .param = NONE));
    add_op(ir, TLM_OP_HEAD_BACKWARD, -1, -1, 0, OPS(.in = {logits, normf, -1, -1}, .out = {d_norm, -1, -1, -1},
                                                    .param = {head, -1, -1, -1}));
    add_op(ir, TLM_OP_RMSNORM_BACKWARD, -1, -1, 0,
           OPS(.in = {d_norm, resid_last, rstdf, -1}, .out = {d_resid, -1, -1, -1}, .param = {final_norm, -1, -1, -1}));
    for (int l = L - 1; l >= 0; l--) {
        layer_ids *y = &ly[l];
        add_op(ir, TLM_OP_MLP_BACKWARD, l, ir->layer_kernel[l], 0,
               OPS(.in = {d_resid, y->norm2, y->pre_gate, y->pre_up}, .out = {y->d_pre_gate, y->d_pre_up, d_norm, -1},
                   .param = {y->gate, y->up, y->down, -1}));
        add_op(ir, TLM_OP_RMSNORM_BACKWARD, l, -1, TLM_OP_FLAG_ACCUMULATE,
               OPS(.in = {d_norm, y->mid, y->rstd2, -1}, .out = {d_resid, -1, -1, -1}, .param = {y->mlp_norm, -1, -1, -1}));
        add_op(ir, TLM_OP_OUT_PROJ_BACKWARD, l, -1, 0,
               OPS(.in = {d_resid, y->attn_y, -1, -1}, .out = {y->d_attn_y, -1, -1, -1}, .param = {y->o, -1, -1, -1}));
        add_op(ir, TLM_OP_ATTENTION_BACKWARD, l, -1, 0,
               OPS(.in = {y->d_attn_y, y->qkv, y->probs, y->attn_y}, .out = {y->d_qkv, -1, -1, -1}, .param = NONE));
        add_op(ir, TLM_OP_ROPE_BACKWARD, l, -1, 0, OPS(.in = NONE, .out = {y->d_qkv, -1, -1, -1}, .param = NONE));
        add_op(ir, TLM_OP_QKV_BACKWARD, l, -1, 0,
               OPS(.in = {y->d_qkv, y->norm1, -1, -1}, .out = {d_norm, -1, -1, -1}, .param = {y->q, y->k, y->v, -1}));
        add_op(ir, TLM_OP_RMSNORM_BACKWARD, l, -1, TLM_OP_FLAG_ACCUMULATE,
               OPS(.in = {d_norm, y->resid, y->rstd1, -1}, .out = {d_resid, -1, -1, -1},
                   .param = {y->attn_norm, -1, -1, -1}));
    }
    add_op(ir, TLM_OP_EMBED_BACKWARD, -1, -1, 0, OPS(.in = {d_resid, -1, -1, -1}, .out = NONE, .param = {embed, -1, -1, -1}));
    free(ly);

    /* Plans for the default sizes: a training micro-batch, and one
     * sequence of the full context for inference. */
    ir->param_floats = (ir->param_floats + 15) / 16 * 16;
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
