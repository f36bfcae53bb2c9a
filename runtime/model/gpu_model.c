#include "gpu_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena_plan.h"
#include "attention_tc.h"
#include "gpu_mixers.h"
#include "graph_cache.h"
#include "tlm_ops.h"
#include "tlm_rt/ops.h"

void tlm_gpu_model_fail(tlm_model *m, const tlm_err *e) {
    tlm_gpu_model *g = m->gpu;
    if (g->failed) return;
    g->failed = true;
    g->err = *e;
}

/* The model's MLP kernels for the GPU's GEMM path: the per-width
 * activation and its gradient (and their bf16 twins in bf16), named after
 * the fwd entry's symbol (tlm_mlp_<kind>_d<D>_w<W>_fwd -> ..._act,
 * ..._act_grad, ..._act_bf16, ..._act_grad_bf16; codegen/cuda_source.c). */
static bool load_mlp_kernels(tlm_model *m, bool bf16, tlm_err *err) {
    tlm_gpu_model *g = m->gpu;
    const tlm_so *so = m->so;
    uint32_t n = so->header->nkernels;
    if (n == 0) return true;
    if (!so->cuda_source || !*so->cuda_source) return tlm_fail(err, "the model.so carries no CUDA source");
    g->act = calloc(n, sizeof *g->act);
    g->act_grad = calloc(n, sizeof *g->act_grad);
    g->act_bf16 = calloc(n, sizeof *g->act_bf16);
    g->act_grad_bf16 = calloc(n, sizeof *g->act_grad_bf16);
    if (!g->act || !g->act_grad || !g->act_bf16 || !g->act_grad_bf16) return tlm_fail(err, "out of memory");
    g->mlp = tlm_device_module_load(g->gpu.dev, "the model's MLP kernels", so->cuda_source, &g->mlp_report, err);
    if (!g->mlp) return false;
    /* the bf16 twins only in bf16 (a model.so without them is of an older
     * ABI, which tlm_so_open refuses) */
    const struct {
        const char *suffix;
        tlm_kernel **kernels;
        bool bf16_only;
    } entries[] = {{"_" TLM_ENTRY_ACT, g->act, false},
                   {"_" TLM_ENTRY_ACT_GRAD, g->act_grad, false},
                   {"_" TLM_ENTRY_ACT "_bf16", g->act_bf16, true},
                   {"_" TLM_ENTRY_ACT_GRAD "_bf16", g->act_grad_bf16, true}};
    for (uint32_t i = 0; i < n; i++) {
        int stem;
        const char *symbol = tlm_so_kernel_stem(so, i, &stem);
        for (size_t e = 0; e < sizeof entries / sizeof entries[0]; e++) {
            if (entries[e].bf16_only && !bf16) continue;
            char name[256];
            snprintf(name, sizeof name, "%.*s%s", stem, symbol, entries[e].suffix);
            if (!(entries[e].kernels[i] = tlm_device_kernel(g->gpu.dev, g->mlp, name, err))) return false;
        }
    }
    return true;
}

/* ---- --precision bf16: which activations are stored in bf16 ---- */

/* The op inputs the executor can read in bf16: x, the normalised rows, of
 * the linear maps (a GEMM operand, forward and dW in the backward), the
 * MLP's pre-activations in its backward (the bf16 variants of the
 * activation's kernels read them), attention's output (the output
 * projection's GEMMs, the attention backward's bf16 variant, and the
 * sigmoid gate's bf16 kernels, which also read the gate's pre-activation),
 * q, k, v (attention's bf16 kernels, forward, backward and decoding), the
 * logits (the cross-entropy's bf16 kernels) and their gradient (the head
 * backward's GEMM operand); Titans' qkv and activation (the memory
 * activation's bf16 kernels), its memory's q, k, v (the memory's bf16
 * kernels, forward, backward and decoding), its memory's read-out (the
 * per-head norm's bf16 kernels, forward and backward) and its SiLU gate's
 * x and gate_pre (the gate's bf16 kernels). */
static bool bf16_input(uint32_t kind, int slot) {
    const char *name = tlm_op_table[kind].in[slot];
    switch (kind) {
    case TLM_OP_MLP_BACKWARD:
        return strcmp(name, "x") == 0 || strcmp(name, "pre_gate") == 0 || strcmp(name, "pre_up") == 0;
    case TLM_OP_OUT_PROJ:
    case TLM_OP_OUT_PROJ_BACKWARD: return strcmp(name, "y") == 0;
    case TLM_OP_ATTENTION: return strcmp(name, "qkv") == 0;
    case TLM_OP_ATTENTION_BACKWARD: return strcmp(name, "y") == 0 || strcmp(name, "qkv") == 0;
    case TLM_OP_LOSS:
    case TLM_OP_LOSS_BACKWARD: return strcmp(name, "logits") == 0;
    case TLM_OP_HEAD_BACKWARD: return strcmp(name, "dlogits") == 0 || strcmp(name, "x") == 0;
    case TLM_OP_SIGMOID_GATE:
    case TLM_OP_SIGMOID_GATE_BACKWARD: return strcmp(name, "y") == 0 || strcmp(name, "gate_pre") == 0;
    case TLM_OP_SILU_GATE:
    case TLM_OP_SILU_GATE_BACKWARD: return strcmp(name, "x") == 0 || strcmp(name, "gate_pre") == 0;
    case TLM_OP_MEM_ACT: return strcmp(name, "qkv") == 0;
    case TLM_OP_MEM_ACT_BACKWARD: return strcmp(name, "qkv") == 0 || strcmp(name, "act") == 0;
    case TLM_OP_TITANS:
    case TLM_OP_TITANS_BACKWARD: return strcmp(name, "mem_qkv") == 0;
    case TLM_OP_RMSNORM_HEADS:
    case TLM_OP_RMSNORM_HEADS_BACKWARD: return strcmp(name, "x") == 0;
    case TLM_OP_QKV:
    case TLM_OP_QKV_BACKWARD:
    case TLM_OP_MLP:
    case TLM_OP_HEAD:
    case TLM_OP_LINEAR:
    case TLM_OP_LINEAR_DW: return strcmp(name, "x") == 0;
    default: return false;
    }
}

/* The op outputs the executor can write in bf16: the model norm's and the
 * per-head norm's y, attention's y, Titans' memory's y, the sigmoid and
 * SiLU gates' out and the memory activation's act and mem_qkv (their
 * kernels' bf16 variants), the MLP's pre-activations' gradients (the
 * activation gradient's bf16 twin, read by the backward's GEMMs alone), the
 * MLP's pre-activations, qkv, the logits and a linear map's y (GEMMs with
 * bf16 D: the gates' gate_pre; Titans' memory gates' pre-activations stay
 * fp32, their reader has no bf16 form). */
static bool bf16_output(uint32_t kind, int slot) {
    const char *name = tlm_op_table[kind].out[slot];
    if (kind == TLM_OP_MLP_BACKWARD) return strcmp(name, "d_pre_gate") == 0 || strcmp(name, "d_pre_up") == 0;
    if (kind == TLM_OP_RMSNORM || kind == TLM_OP_RMSNORM_HEADS) return strcmp(name, "y") == 0;
    if (kind == TLM_OP_SILU_GATE) return strcmp(name, "out") == 0;
    if (kind == TLM_OP_MEM_ACT) return strcmp(name, "act") == 0 || strcmp(name, "mem_qkv") == 0;
    if (kind == TLM_OP_TITANS) return strcmp(name, "y") == 0;
    if (kind == TLM_OP_MLP) return strcmp(name, "pre_gate") == 0 || strcmp(name, "pre_up") == 0;
    if (kind == TLM_OP_ATTENTION) return strcmp(name, "y") == 0;
    if (kind == TLM_OP_SIGMOID_GATE) return strcmp(name, "out") == 0;
    if (kind == TLM_OP_QKV) return strcmp(name, "qkv") == 0;
    if (kind == TLM_OP_HEAD) return strcmp(name, "logits") == 0;
    if (kind == TLM_OP_LINEAR) return strcmp(name, "y") == 0;
    return false;
}

/* An output an op rewrites in place, reading it as it is stored: RoPE's
 * rotation of q and k inside qkv (tlm_gpu_rope_forward_bf16 for a bf16
 * one), and the cross-entropy's gradient written over the logits
 * (tlm_gpu_crossentropy_backward_bf16: the gradient of bf16
 * logits is bf16). It stays bf16 where its writer made it bf16. */
static bool bf16_in_place(uint32_t kind, int slot) {
    const char *name = tlm_op_table[kind].out[slot];
    return (kind == TLM_OP_ROPE && strcmp(name, "qkv") == 0) ||
           (kind == TLM_OP_LOSS_BACKWARD && strcmp(name, "dlogits") == 0);
}

/* Buffers one kernel takes in one storage: the present ones (an absent
 * operand, < 0, is skipped) all stay bf16, or all become fp32. Returns
 * whether it turned one to fp32. */
static bool one_storage(bool *bf16_buffers, int nb, const int32_t *ids, int n) {
    bool all = true, changed = false;
    for (int j = 0; j < n; j++) all = all && (ids[j] < 0 || ids[j] >= nb || bf16_buffers[ids[j]]);
    for (int j = 0; j < n && !all; j++)
        if (ids[j] >= 0 && ids[j] < nb) {
            changed |= bf16_buffers[ids[j]];
            bf16_buffers[ids[j]] = false;
        }
    return changed;
}

void tlm_gpu_bf16_buffers(const tlm_so *so, int nops, bool *bf16_buffers) {
    const int nb = (int)so->header->nbuffers;
    /* 1: written in bf16 so far, -1: some op needs it in fp32 */
    signed char *state = calloc((size_t)nb + 1, 1);
    for (int i = 0; i < nb; i++) bf16_buffers[i] = false;
    if (!state) return; /* all fp32: correct, only larger */
    for (int k = 0; k < nops; k++) {
        const tlm_abi_op *op = &so->ops[k];
        for (int j = 0; j < 4; j++) {
            int32_t in = op->in[j], out = op->out[j];
            if (in >= 0 && in < nb && !bf16_input(op->kind, j)) state[in] = -1;
            if (out < 0 || out >= nb) continue;
            if (bf16_in_place(op->kind, j)) state[out] = state[out] == 1 ? 1 : -1;
            else state[out] = bf16_output(op->kind, j) && state[out] == 0 ? 1 : -1;
        }
    }
    for (int i = 0; i < nb; i++)
        bf16_buffers[i] = state[i] == 1 && so->buffers[i].per_token_t == 0 && so->buffers[i].per_seq == 0;
    free(state);
    /* Pairs the kernels take in one storage only. An MLP's gate and up are
     * one GEMM's two halves and one kernel's two inputs: both bf16 or both
     * fp32; its backward's activation gradient reads them and writes their
     * gradients in one storage (the kernel and its bf16 twin). The cross-entropy's backward reads the logits and writes dlogits
     * in one storage (in place in the IR; a dlogits of its own, which no
     * bf16 op writes, keeps the logits fp32). Attention's kernels read q,
     * k, v in bf16 whenever they write y in bf16 (a bf16 y from fp32 q, k, v has no kernel), and sampling's KV
     * cache holds every layer's rows in one storage: q, k, v of every
     * attention are bf16, or none. The sigmoid gate's kernels take y,
     * gate_pre and out in one storage: all three bf16, or all fp32 (last,
     * since the rule before may leave attention's y in fp32); so do
     * Titans' SiLU gate (x, gate_pre, out), its memory activation (qkv,
     * act, mem_qkv), its memory (mem_qkv and the read-out y) and the
     * per-head norm (that y and the normalised one, the gate's x). These
     * last four share buffers along Titans' chain, so they are applied
     * until none changes: a gate left in fp32 takes the norm, the memory's
     * y and q, k, v, and the activation with it, and the reverse. */
    bool every_qkv = true;
    for (int k = 0; k < nops; k++) {
        const tlm_abi_op *op = &so->ops[k];
        if (op->kind == TLM_OP_MLP)
            one_storage(bf16_buffers, nb, (int32_t[]){op->mlp.out_pre_gate, op->mlp.out_pre_up}, 2);
        if (op->kind == TLM_OP_MLP_BACKWARD)
            one_storage(bf16_buffers, nb,
                        (int32_t[]){op->mlp_backward.in_pre_gate, op->mlp_backward.in_pre_up,
                                    op->mlp_backward.out_d_pre_gate, op->mlp_backward.out_d_pre_up},
                        4);
        if (op->kind == TLM_OP_LOSS_BACKWARD)
            one_storage(bf16_buffers, nb, (int32_t[]){op->loss_backward.in_logits, op->loss_backward.out_dlogits}, 2);
        int32_t qkv = op->attention.in_qkv;
        if (op->kind == TLM_OP_ATTENTION && (qkv < 0 || qkv >= nb || !bf16_buffers[qkv])) every_qkv = false;
    }
    for (int k = 0; k < nops && !every_qkv; k++) {
        const tlm_abi_op *op = &so->ops[k];
        int32_t qkv = op->attention.in_qkv, y = op->attention.out_y;
        if (op->kind != TLM_OP_ATTENTION) continue;
        if (qkv >= 0 && qkv < nb) bf16_buffers[qkv] = false;
        if (y >= 0 && y < nb) bf16_buffers[y] = false;
    }
    for (int k = 0; k < nops; k++) {
        const tlm_abi_op *op = &so->ops[k];
        if (op->kind == TLM_OP_SIGMOID_GATE)
            one_storage(bf16_buffers, nb,
                        (int32_t[]){op->sigmoid_gate.in_y, op->sigmoid_gate.in_gate_pre, op->sigmoid_gate.out_out}, 3);
    }
    for (bool changed = true; changed;) {
        changed = false;
        for (int k = 0; k < nops; k++) {
            const tlm_abi_op *op = &so->ops[k];
            if (op->kind == TLM_OP_SILU_GATE)
                changed |=
                    one_storage(bf16_buffers, nb,
                                (int32_t[]){op->silu_gate.in_x, op->silu_gate.in_gate_pre, op->silu_gate.out_out}, 3);
            if (op->kind == TLM_OP_MEM_ACT)
                changed |= one_storage(
                    bf16_buffers, nb,
                    (int32_t[]){op->memory_act.in_qkv, op->memory_act.out_act, op->memory_act.out_mem_qkv}, 3);
            if (op->kind == TLM_OP_TITANS)
                changed |= one_storage(bf16_buffers, nb, (int32_t[]){op->titans.in_mem_qkv, op->titans.out_y}, 2);
            if (op->kind == TLM_OP_RMSNORM_HEADS)
                changed |=
                    one_storage(bf16_buffers, nb, (int32_t[]){op->rmsnorm_heads.in_x, op->rmsnorm_heads.out_y}, 2);
        }
    }
}

bool tlm_gpu_kv_cache_bf16(const tlm_so *so, int nops, const bool *bf16_buffers) {
    bool any = false;
    for (int k = 0; bf16_buffers && k < nops; k++) {
        const tlm_abi_op *op = &so->ops[k];
        if (op->kind != TLM_OP_ATTENTION) continue;
        if (op->attention.in_qkv < 0 || !bf16_buffers[op->attention.in_qkv]) return false;
        any = true;
    }
    return any;
}

int64_t tlm_gpu_plan_arena(const tlm_so *so, int nops, const bool *bf16_buffers, int64_t B, int64_t T,
                           int64_t *offsets) {
    const int nb = (int)so->header->nbuffers;
    tlm_abi_buffer *sized = malloc(((size_t)nb + 1) * sizeof *sized);
    if (!sized) return -1;
    memcpy(sized, so->buffers, (size_t)nb * sizeof *sized);
    /* the planner counts floats: a bf16 row of P elements takes ceil(P/2) */
    for (int i = 0; i < nb; i++)
        if (bf16_buffers && bf16_buffers[i]) sized[i].per_token = (sized[i].per_token + 1) / 2;
    int64_t bytes = tlm_plan_arena(sized, nb, so->ops, nops, B, T, offsets, NULL, NULL);
    free(sized);
    return bytes;
}

/* The widest MLP of the model (0: none). */
static int64_t widest_mlp(const tlm_so *so) {
    int64_t w = 0;
    for (uint32_t i = 0; i < so->header->nkernels; i++)
        if (so->kernels[i].width > w) w = so->kernels[i].width;
    return w;
}

/* Whether every MLP op's x (its input: stored in bf16, never rounded), or
 * its pre_up (and with it the pre-activations, h and their gradients), is
 * stored in bf16. */
typedef enum { MLP_X, MLP_PRE_UP } mlp_operand;
static bool every_mlp_in_bf16(const tlm_so *so, int nops, const bool *bf16_buffers, mlp_operand which) {
    for (int k = 0; k < nops; k++) {
        const tlm_abi_op *op = &so->ops[k];
        int32_t b = -1;
        if (op->kind == TLM_OP_MLP) b = which == MLP_X ? op->mlp.in_x : op->mlp.out_pre_up;
        if (op->kind == TLM_OP_MLP_BACKWARD) b = which == MLP_X ? op->mlp_backward.in_x : op->mlp_backward.in_pre_up;
        if (b >= 0 && !bf16_buffers[b]) return false;
    }
    return true;
}

/* The op inputs the executor's GEMMs take as operands, the weights aside:
 * x of every linear map (forward and dW), attention's y (the output
 * projection's), and the gradients the backward's GEMMs read (dqkv, the
 * output projection's and the MLP's dout, dlogits, a linear map's dy). The
 * other inputs of these ops are not (resid is copied; the MLP's
 * pre-activations are read by its activation kernels), nor is any input of
 * the other ops (Titans' saved state, the widest buffer of its model, is
 * read by its memory's kernels alone). The MLP's own operands, h and the
 * pre-activations' gradients, are its width (widest_mlp). */
static bool gemm_operand(uint32_t kind, int slot) {
    const char *name = tlm_op_table[kind].in[slot];
    switch (kind) {
    case TLM_OP_QKV:
    case TLM_OP_MLP:
    case TLM_OP_HEAD:
    case TLM_OP_LINEAR: return strcmp(name, "x") == 0;
    case TLM_OP_OUT_PROJ: return strcmp(name, "y") == 0;
    case TLM_OP_QKV_BACKWARD: return strcmp(name, "dqkv") == 0 || strcmp(name, "x") == 0;
    case TLM_OP_OUT_PROJ_BACKWARD: return strcmp(name, "dout") == 0 || strcmp(name, "y") == 0;
    case TLM_OP_MLP_BACKWARD: return strcmp(name, "dout") == 0 || strcmp(name, "x") == 0;
    case TLM_OP_HEAD_BACKWARD: return strcmp(name, "dlogits") == 0 || strcmp(name, "x") == 0;
    case TLM_OP_LINEAR_DW: return strcmp(name, "dy") == 0 || strcmp(name, "x") == 0;
    case TLM_OP_LINEAR_DX: return strcmp(name, "dy") == 0;
    default: return false;
    }
}

/* The executor's GEMMs round at most two fp32 activation operands, each
 * within one buffer (at most the widest fp32 GEMM operand's rows), or an
 * fp32 x and the pair of MLP gradients (gate and up): 2 of the widest, and
 * one more of the MLP's unless every MLP's x is stored in bf16. A buffer
 * stored in bf16 is read as it is, never rounded, and a buffer no GEMM
 * reads is never rounded either, so only the fp32 GEMM operands count (in
 * bf16 the logits, V a token, are no longer among them; nor are h and the
 * MLP's gradients, unless some MLP is in fp32). */
int64_t tlm_gpu_bf16_scratch_elems(const tlm_so *so, int nops, const bool *bf16_buffers, int64_t rows) {
    const int nb = (int)so->header->nbuffers;
    const bool mlp_fp32 = !every_mlp_in_bf16(so, nops, bf16_buffers, MLP_PRE_UP);
    int64_t widest = mlp_fp32 ? widest_mlp(so) : 0;
    for (int k = 0; k < nops; k++) {
        const tlm_abi_op *op = &so->ops[k];
        for (int j = 0; j < 4; j++) {
            const int32_t b = op->in[j];
            if (b >= 0 && b < nb && !bf16_buffers[b] && gemm_operand(op->kind, j) && so->buffers[b].per_token > widest)
                widest = so->buffers[b].per_token;
        }
    }
    return tlm_bf16_gemm_scratch_elems(rows * widest, 2) +
           (!mlp_fp32 || every_mlp_in_bf16(so, nops, bf16_buffers, MLP_X)
                ? 0
                : tlm_bf16_gemm_scratch_elems(rows * widest_mlp(so), 1));
}

/* The MLP scratch: h, and in the backward dh (fp32). Without a backward
 * it holds h alone, 2 bytes an element where every MLP writes h in bf16
 * (its pre-activations are bf16: gpu_executor.c). */
static size_t mlp_scratch_bytes(const tlm_model *m) {
    size_t elem = sizeof(float);
    if (!m->training && m->gpu->bf16_buffers) {
        elem = 2;
        for (int k = 0; k < m->nops; k++)
            if (m->so->ops[k].kind == TLM_OP_MLP && !m->gpu->bf16_buffers[m->so->ops[k].mlp.out_pre_up])
                elem = sizeof(float);
    }
    return (size_t)(m->B * m->T) * (size_t)widest_mlp(m->so) * elem;
}

/* Whether some attention op's y is stored in bf16 (bf16_buffers from
 * tlm_gpu_bf16_buffers): its forward then needs the tensor cores or the
 * scalar kernel's fp32 accumulator. */
static bool attention_y_in_bf16(const tlm_so *so, const bool *bf16_buffers) {
    for (uint32_t k = 0; k < so->header->nops; k++)
        if (so->ops[k].kind == TLM_OP_ATTENTION && bf16_buffers[so->ops[k].attention.out_y]) return true;
    return false;
}

/* The tensor-core choice for a model whose attention y is bf16 or not on a
 * device like info (TLM_GPU_ATTENTION honoured), and why not in a few
 * words: what choose_attention decides and the run's header says. */
static bool attention_tc_chosen(const tlm_so *so, const tlm_device_info *info, bool bf16_y, char *why, size_t n) {
    const tlm_abi_config *c = so->config;
    const char *want = getenv("TLM_GPU_ATTENTION");
    tlm_err e;
    if (!bf16_y) snprintf(why, n, "its y stays fp32");
    else if (want && !strcmp(want, "scalar")) snprintf(why, n, "TLM_GPU_ATTENTION=scalar");
    else if (c->head_dim != 64 && c->head_dim != 128)
        snprintf(why, n, "head size %d; tensor cores: 64 or 128", (int)c->head_dim);
    else if (info->cc_major < 8) snprintf(why, n, "%s; tensor cores: sm_80+", info->arch);
    else if (!tlm_gpu_attention_tc_applies(info, (int)c->heads, (int)c->head_dim, (int)(3 * c->heads * c->head_dim),
                                           &e))
        snprintf(why, n, "%s", e.msg);
    else return true;
    return false;
}

/* Attention with a bf16 y (so bf16 q, k and v) goes to the tensor cores
 * where their kernels take the shape and the device (attention_tc.h: head
 * size 64 or 128, sm_80+), else to the scalar kernels.
 * TLM_GPU_ATTENTION=scalar keeps the scalar kernels, to compare the two;
 * false with err for another value. */
bool tlm_gpu_settings_ok(tlm_err *err) {
    const char *want = getenv("TLM_GPU_ATTENTION");
    if (want && *want && strcmp(want, "scalar") && strcmp(want, "auto"))
        return tlm_fail(err, "TLM_GPU_ATTENTION=%s: expected auto or scalar", want);
    const char *rows = getenv("TLM_GPU_ATTENTION_ROWS");
    if (rows && *rows && strcmp(rows, "16") && strcmp(rows, "auto"))
        return tlm_fail(err, "TLM_GPU_ATTENTION_ROWS=%s: expected auto or 16", rows);
    return tlm_graphs_setting_ok(err);
}

bool tlm_gpu_attention_rows16(const tlm_so *so, const tlm_device_info *info) {
    const char *rows = getenv("TLM_GPU_ATTENTION_ROWS");
    return rows && !strcmp(rows, "16") && tlm_gpu_attention_tc_two_groups((int)so->config->head_dim, info->cc_major);
}

static bool choose_attention(tlm_model *m, tlm_device *dev, bool bf16_y, tlm_err *err) {
    if (!tlm_gpu_settings_ok(err)) return false;
    char why[160];
    m->gpu->attention_tc = attention_tc_chosen(m->so, tlm_device_get_info(dev), bf16_y, why, sizeof why);
    return true;
}

bool tlm_gpu_attention_on_tensor_cores(const tlm_so *so, const tlm_device_info *info, tlm_precision p, char *why,
                                       size_t n) {
    bool *bf16_buffers = NULL, has_attention = false;
    for (uint32_t k = 0; k < so->header->nops; k++) has_attention |= so->ops[k].kind == TLM_OP_ATTENTION;
    if (!has_attention) {
        snprintf(why, n, "no attention");
        return false;
    }
    if (p != TLM_PRECISION_BF16) {
        snprintf(why, n, "fp32");
        return false;
    }
    if (!(bf16_buffers = calloc(so->header->nbuffers + 1, sizeof *bf16_buffers))) {
        snprintf(why, n, "out of memory");
        return false;
    }
    tlm_gpu_bf16_buffers(so, (int)so->header->nops, bf16_buffers);
    const bool bf16_y = attention_y_in_bf16(so, bf16_buffers);
    free(bf16_buffers);
    return attention_tc_chosen(so, info, bf16_y, why, n);
}

const char *tlm_gpu_graphs_off_reason(const tlm_model *m) {
    if (m->profile) return "--profile";
    if (m->kv_mode != TLM_KV_OFF) return "sampling";
    if (m->grads_final) return "data-parallel";
    if (!tlm_graphs_enabled()) return "TLM_CUDA_GRAPHS=0";
    if (m->gpu && m->gpu->graphs && tlm_graph_cache_stats(m->gpu->graphs).disabled) return "the driver refused a graph";
    return NULL;
}

/* bf16, when some y is bf16: attention's scratch, one for every layer (the
 * ops run one at a time): the scalar forward's fp32 accumulator of y
 * ([B·T, A]), or on the tensor cores the backward's dy in bf16 and D_t. */
static size_t attention_scratch_bytes(const tlm_model *m) {
    if (!attention_y_in_bf16(m->so, m->gpu->bf16_buffers)) return 0;
    const tlm_abi_config *c = m->so->config;
    if (m->gpu->attention_tc)
        return m->training ? tlm_gpu_attention_tc_scratch_bytes((int)m->B, (int)m->T, (int)c->heads, (int)c->head_dim)
                           : 0;
    return (size_t)(m->B * m->T) * (size_t)(c->heads * c->head_dim) * sizeof(float);
}

/* bf16: the buffers stored in bf16, and the arena planned again for them
 * (the host plan's offsets give way to the device's). */
static bool plan_bf16_arena(tlm_model *m, tlm_err *err) {
    tlm_gpu_model *g = m->gpu;
    if (!(g->bf16_buffers = calloc(m->so->header->nbuffers + 1, sizeof *g->bf16_buffers)))
        return tlm_fail(err, "out of memory");
    tlm_gpu_bf16_buffers(m->so, m->nops, g->bf16_buffers);
    int64_t bytes = tlm_gpu_plan_arena(m->so, m->nops, g->bf16_buffers, m->B, m->T, m->offsets);
    if (bytes < 0) return tlm_fail(err, "out of memory planning the bf16 activations");
    m->arena_bytes = bytes;
    return true;
}

static tlm_dptr alloc(tlm_model *m, size_t bytes, tlm_err *err) {
    return tlm_device_alloc(m->gpu->gpu.dev, bytes ? bytes : 4, err);
}

/* What the model takes on the device, beside `extra` (the optimizer's
 * state), against the device's memory: refused before anything is
 * allocated, with the sizes, rather than by a failing allocation halfway. */
static bool fits(const tlm_model *m, tlm_device *dev, size_t rope_bytes, size_t titans_bytes, size_t bf16_bytes,
                 int64_t extra, tlm_err *err) {
    const size_t rows = (size_t)(m->B * m->T), param_bytes = (size_t)m->param_floats * sizeof(float);
    double need = (double)param_bytes * (m->training ? 2 : 1) + (double)m->arena_bytes + 2.0 * (double)rope_bytes +
                  (double)rows * 2 * sizeof(int32_t) + (double)mlp_scratch_bytes(m) + (double)titans_bytes +
                  (double)bf16_bytes + (double)(extra > 0 ? extra : 0);
    const tlm_device_info *i = tlm_device_get_info(dev);
    /* What the device still has (on a GPU the driver's count: the CUDA
     * context and other processes already taken off), less a GiB on a GPU
     * for what is loaded later: cuBLASLt's kernels and its workspace. */
    double reserve = i->emulated ? 0 : 1073741824.0;
    double have = (double)tlm_device_memory_free(dev) - reserve;
    if (need <= have) return true;
    return tlm_fail(err,
                    "out of device memory: batch %lld × %lld tokens needs %.2f GiB on cuda:%d, which has %.2f GiB; "
                    "lower the batch (--accumulate keeps the step's tokens) or the context",
                    (long long)m->B, (long long)m->T, need / 1073741824.0, i->ordinal, have / 1073741824.0);
}

bool tlm_gpu_model_create(tlm_model *m, tlm_device *dev, tlm_precision precision, int64_t extra_bytes, tlm_err *err) {
    tlm_gpu_model *g = calloc(1, sizeof *g);
    if (!g) return tlm_fail(err, "out of memory");
    m->gpu = g;
    const tlm_abi_config *c = m->so->config;
    size_t param_bytes = (size_t)m->param_floats * sizeof(float), rows = (size_t)(m->B * m->T);
    size_t rope_bytes = (size_t)m->T * (size_t)(c->head_dim / 2) * sizeof(float);
    size_t titans_bytes = c->mixer == TLM_MIXER_TITANS && m->training
                              ? tlm_gpu_titans_scratch_bytes((int)m->B, (int)c->heads, (int)c->head_dim, (int)c->chunk)
                              : 0;
    g->precision = precision;
    const bool bf16 = precision == TLM_PRECISION_BF16;
    if (bf16 && !plan_bf16_arena(m, err)) {
        tlm_gpu_model_destroy(m);
        return false;
    }
    const int64_t scratch_elems = bf16 ? tlm_gpu_bf16_scratch_elems(m->so, m->nops, g->bf16_buffers, m->B * m->T) : 0;
    if (!choose_attention(m, dev, bf16 && attention_y_in_bf16(m->so, g->bf16_buffers), err)) {
        tlm_gpu_model_destroy(m);
        return false;
    }
    const size_t attention_bytes = bf16 ? attention_scratch_bytes(m) : 0;
    size_t bf16_bytes = bf16 ? (size_t)(m->param_floats + scratch_elems) * 2 + attention_bytes : 0;
    if (!fits(m, dev, rope_bytes, titans_bytes, bf16_bytes, extra_bytes, err)) {
        tlm_gpu_model_destroy(m);
        return false;
    }
    /* the tensor-core kernels only where they run: a module of their own */
    bool ok = tlm_gpu_open(&g->gpu, dev, err) &&
              (!g->attention_tc || tlm_gpu_load_module(&g->gpu, TLM_GPU_MODULE_ATTENTION_TC, err)) &&
              load_mlp_kernels(m, bf16, err) && (g->params = alloc(m, param_bytes, err)) &&
              (!m->training || (g->grads = alloc(m, param_bytes, err))) &&
              (g->arena = alloc(m, (size_t)m->arena_bytes, err)) && (g->rope_cos = alloc(m, rope_bytes, err)) &&
              (g->rope_sin = alloc(m, rope_bytes, err)) && (g->tokens = alloc(m, rows * sizeof(int32_t), err)) &&
              (g->targets = alloc(m, rows * sizeof(int32_t), err)) && (g->loss = alloc(m, sizeof(double), err)) &&
              (g->mlp_scratch = alloc(m, mlp_scratch_bytes(m), err));
    g->gpu.attention_rows16 = g->attention_tc && tlm_gpu_attention_rows16(m->so, tlm_device_get_info(dev));
    if (ok && titans_bytes) ok = (g->titans_scratch = alloc(m, titans_bytes, err)) != 0;
    if (ok && attention_bytes) ok = (g->attention_scratch = alloc(m, attention_bytes, err)) != 0;
    if (ok && bf16) {
        g->bf16 =
            (tlm_bf16_gemm){.weights = g->params, .weight_floats = m->param_floats, .scratch_elems = scratch_elems};
        ok = (g->bf16.weights_bf16 = alloc(m, (size_t)m->param_floats * 2, err)) &&
             (g->bf16.scratch = alloc(m, (size_t)scratch_elems * 2, err));
        g->gpu.bf16 = &g->bf16;
        g->weights_stale = true;
    }
    /* The RoPE tables: the host computed them in double (tlm_rope_init). */
    ok = ok && (g->host_copies = calloc(m->so->header->nbuffers + 1, sizeof *g->host_copies));
    if (ok) {
        float *cs = malloc(rope_bytes ? rope_bytes : 4), *sn = malloc(rope_bytes ? rope_bytes : 4);
        ok = cs && sn;
        if (ok) {
            tlm_rope_init(cs, sn, (int)m->T, (int)c->head_dim, c->rope_base);
            ok = tlm_device_upload(dev, g->rope_cos, cs, rope_bytes, err) &&
                 tlm_device_upload(dev, g->rope_sin, sn, rope_bytes, err);
        } else tlm_fail(err, "out of memory");
        free(cs);
        free(sn);
    }
    if (!ok) tlm_gpu_model_destroy(m);
    return ok;
}

bool tlm_gpu_model_cache_open(tlm_model *m, size_t floats, tlm_err *err) {
    tlm_gpu_model *g = m->gpu;
    g->kv_bf16 = tlm_gpu_kv_cache_bf16(m->so, m->nops, g->bf16_buffers);
    const size_t bytes = floats * (g->kv_bf16 ? 2 : sizeof(float));
    /* zeros: titans' memory starts from M = S = 0 */
    g->kv_cache = alloc(m, bytes, err);
    return g->kv_cache != 0 && tlm_device_zero(g->gpu.dev, g->kv_cache, bytes, err);
}

void tlm_gpu_model_params_changed(tlm_model *m) {
    if (m->gpu) m->gpu->weights_stale = true;
}

void tlm_gpu_model_destroy(tlm_model *m) {
    tlm_gpu_model *g = m->gpu;
    if (!g) return;
    tlm_device *dev = g->gpu.dev;
    tlm_graph_cache_free(g->graphs); /* first: the graphs use the memory and kernels below */
    if (dev) {
        tlm_dptr all[] = {g->params,
                          g->grads,
                          g->arena,
                          g->rope_cos,
                          g->rope_sin,
                          g->tokens,
                          g->targets,
                          g->loss,
                          g->titans_scratch,
                          g->mlp_scratch,
                          g->bf16.weights_bf16,
                          g->bf16.scratch,
                          g->attention_scratch,
                          g->kv_cache};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++)
            if (all[i]) tlm_device_free(dev, all[i]);
        if (g->mlp) tlm_device_module_unload(dev, g->mlp);
        tlm_gpu_close(&g->gpu);
    }
    if (g->host_copies)
        for (uint32_t i = 0; i < m->so->header->nbuffers; i++) free(g->host_copies[i]);
    free(g->host_copies);
    free(g->act);
    free(g->act_grad);
    free(g->act_bf16);
    free(g->act_grad_bf16);
    free(g->bf16_buffers);
    free(g);
    m->gpu = NULL;
}
