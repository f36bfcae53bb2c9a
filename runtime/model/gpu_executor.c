/* The device executor of the IR's op list: the twin of executor.c, one
 * function per op of abi/tlm_ops.h reading its operands by the same names,
 * with device addresses and the runtime's GPU kernels (runtime/gpu) in
 * place of the CPU ops. Same buffer offsets, same order, same semantics:
 * tests compare the two op by op on the emulated device. A missing
 * function is a build error (the dispatch table comes from the op table).
 *
 * Shapes as in executor.c: N = B·T tokens, D = d_model, A = heads·head_dim,
 * V = vocab, W = the layer's MLP width. */
#include <math.h>
#include <string.h>

#include "attention_tc.h"
#include "gpu_basic.h"
#include "gpu_decode.h"
#include "gpu_linear.h"
#include "gpu_mixers.h"
#include "gpu_model.h"
#include "graph_cache.h"
#include "profile.h"
#include "op_context.h"

typedef struct step {
    tlm_model *m;
    tlm_gpu_model *g;
    tlm_gpu *gpu;
    union { /* the sizes, also as fields of their own: s->N */
        tlm_op_sizes sizes;
        struct {
            TLM_OP_SIZES_FIELDS
        };
    };
    float dloss;
    tlm_err err;               /* the failing op's message */
} step;

/* A device address `floats` floats past p. */
static tlm_dptr at(tlm_dptr p, int64_t floats) { return p ? p + (tlm_dptr)floats * sizeof(float) : 0; }
/* The same for `n` elements of 2 bytes (bf16) or 4. */
static tlm_dptr at_elems(tlm_dptr p, int64_t n, bool bf16) { return p ? p + (tlm_dptr)n * (bf16 ? 2 : 4) : 0; }

static tlm_dptr buf(const step *s, int32_t b) {
    return b < 0 || s->m->offsets[b] < 0 ? 0 : s->g->arena + (tlm_dptr)s->m->offsets[b];
}
static tlm_dptr prm(const step *s, int32_t p) { return p < 0 ? 0 : at(s->g->params, s->m->so->params[p].offset); }
static tlm_dptr grd(const step *s, int32_t p) {
    return p < 0 || !s->g->grads ? 0 : at(s->g->grads, s->m->so->params[p].offset);
}

#define ERR (&s->err)
#define DEV (s->gpu->dev)

static size_t rows_bytes(const step *s, int64_t width) { return (size_t)s->N * (size_t)width * sizeof(float); }

/* --precision bf16 stores some activations in bf16 (gpu_model.h,
 * tlm_gpu_bf16_buffers): their writers use the kernels' bf16 variants, and
 * the GEMMs reading them describe them as the bf16 operands they are. */
static bool in_bf16(const step *s, int32_t b) { return b >= 0 && s->g->bf16_buffers && s->g->bf16_buffers[b]; }
static tlm_gemm_type stored_as(const step *s, int32_t b) { return in_bf16(s, b) ? TLM_GEMM_BF16 : TLM_GEMM_F32; }

/* The linear maps of gpu_linear.h with the activations x and y read and
 * written as stored (a bf16 y: the fp32 accumulation rounded once), and the
 * gradient dy read as stored (bf16 only for the head's dlogits, written in
 * place over bf16 logits): y = x W^T, and dx = dy W, dW += dy^T x (dx or dw
 * 0 to skip). */
static bool linear_forward(step *s, int32_t y, int32_t x, tlm_dptr w, int in, int out, bool accumulate) {
    tlm_gemm g = tlm_gpu_linear_forward_gemm(buf(s, y), buf(s, x), w, s->N, in, out, accumulate);
    g.b_type = stored_as(s, x);
    g.cd_type = stored_as(s, y);
    return tlm_gpu_gemm(s->gpu, &g, ERR);
}
static bool linear_backward(step *s, tlm_dptr dx, tlm_dptr dw, int32_t dy, int32_t x, tlm_dptr w, int in, int out,
                            bool accumulate_dx) {
    if (dx) {
        tlm_gemm g = tlm_gpu_linear_dx_gemm(dx, buf(s, dy), w, s->N, in, out, accumulate_dx);
        g.b_type = stored_as(s, dy);
        if (!tlm_gpu_gemm(s->gpu, &g, ERR)) return false;
    }
    if (!dw) return true;
    tlm_gemm g = tlm_gpu_linear_dw_gemm(dw, buf(s, dy), buf(s, x), s->N, in, out);
    g.a_type = stored_as(s, x);
    g.b_type = stored_as(s, dy);
    return tlm_gpu_gemm(s->gpu, &g, ERR);
}

/* Kernels that take their activations in one storage, fp32 or bf16: the
 * cross-entropy's logits and dlogits, the sigmoid and SiLU gates' inputs and
 * out, the memory activation's qkv, act and mem_qkv, Titans' memory's q, k,
 * v and read-out y, the per-head norm's x and y (the backwards write fp32
 * gradients only).
 * tlm_gpu_bf16_buffers makes them so; this guards the executor against a
 * plan that disagrees. Absent ids (< 0) are skipped. */
static bool one_storage_in_bf16(step *s, const char *what, const int32_t *ids, int n, bool *bf16) {
    *bf16 = in_bf16(s, ids[0]);
    for (int j = 1; j < n; j++)
        if (ids[j] >= 0 && in_bf16(s, ids[j]) != *bf16) return tlm_fail(ERR, "%s are not all in one storage", what);
    return true;
}
/* ---- embedding ---- */

static bool op_embed(step *s, const tlm_abi_op *op) {
    OPERANDS(embed);
    return tlm_gpu_embedding_forward(s->gpu, OUT(resid), s->g->tokens, PARAM(embed), s->N, s->D, ERR);
}
static bool op_embed_backward(step *s, const tlm_abi_op *op) {
    OPERANDS(embed_backward);
    return tlm_gpu_embedding_backward(s->gpu, GRAD(embed), IN(dresid), s->g->tokens, s->N, s->D, ERR);
}

/* ---- RMSNorm ---- */

static bool op_rmsnorm(step *s, const tlm_abi_op *op) {
    OPERANDS(rmsnorm);
    if (in_bf16(s, o->out_y))
        return tlm_gpu_rmsnorm_forward_bf16(s->gpu, OUT(y), OUT(rstd), IN(x), PARAM(weight), s->N, s->D, s->eps, ERR);
    return tlm_gpu_rmsnorm_forward(s->gpu, OUT(y), OUT(rstd), IN(x), PARAM(weight), s->N, s->D, s->eps, ERR);
}
static bool op_rmsnorm_backward(step *s, const tlm_abi_op *op) {
    OPERANDS(rmsnorm_backward);
    tlm_dptr dx = OUT(dx);
    if (!ACCUMULATE && !tlm_device_zero(DEV, dx, rows_bytes(s, s->D), ERR)) return false;
    return tlm_gpu_rmsnorm_backward(s->gpu, dx, GRAD(weight), IN(dy), IN(x), PARAM(weight), IN(rstd), s->N, s->D, ERR);
}
/* Titans' memory read-out x and its normalised y, which the SiLU gate
 * reads: in bf16 both, or fp32 both (one kernel takes them: gpu_model.c) */
static const char rmsnorm_heads_what[] = "the per-head norm's x and y";
static bool op_rmsnorm_heads(step *s, const tlm_abi_op *op) {
    OPERANDS(rmsnorm_heads);
    bool bf16;
    if (!one_storage_in_bf16(s, rmsnorm_heads_what, (int32_t[]){o->in_x, o->out_y}, 2, &bf16)) return false;
    return (bf16 ? tlm_gpu_rmsnorm_heads_forward_bf16 : tlm_gpu_rmsnorm_heads_forward)(
        s->gpu, OUT(y), OUT(rstd), IN(x), PARAM(weight), s->N, s->H, s->hd, s->eps, ERR);
}
static bool op_rmsnorm_heads_backward(step *s, const tlm_abi_op *op) {
    OPERANDS(rmsnorm_heads_backward);
    return (in_bf16(s, o->in_x) ? tlm_gpu_rmsnorm_heads_backward_bf16 : tlm_gpu_rmsnorm_heads_backward)(
        s->gpu, OUT(dx), GRAD(weight), IN(dy), IN(x), PARAM(weight), IN(rstd), s->N, s->H, s->hd, ERR);
}

/* ---- q, k, v in one GEMM ---- */

static bool op_qkv(step *s, const tlm_abi_op *op) {
    OPERANDS(qkv);
    return linear_forward(s, o->out_qkv, o->in_x, PARAM(wq), s->D, 3 * s->A, false);
}
static bool op_qkv_backward(step *s, const tlm_abi_op *op) {
    OPERANDS(qkv_backward);
    return linear_backward(s, OUT(dx), GRAD(wq), o->in_dqkv, o->in_x, PARAM(wq), s->D, 3 * s->A, false);
}

/* ---- rotary embeddings on q and k, in place inside the packed qkv ----
 * q's and k's heads are 2H consecutive heads of a token's [q | k | v] row,
 * turned by the same angles: one launch (executor.c's way), where two
 * launched a grid each. */

static bool op_rope(step *s, const tlm_abi_op *op) {
    OPERANDS(rope);
    const bool bf16 = in_bf16(s, o->out_qkv);
    const tlm_dptr qk = OUT(qkv);
    const int64_t from = tlm_kv_rope_offset(s->m, &s->sizes);
    const tlm_dptr c = at(s->g->rope_cos, from), sn = at(s->g->rope_sin, from);
    bool (*rope)(tlm_gpu *, tlm_dptr, tlm_dptr, tlm_dptr, tlm_dptr, int, int, int, int, int, tlm_err *) =
        bf16 ? tlm_gpu_rope_forward_bf16 : tlm_gpu_rope_forward;
    return rope(s->gpu, qk, qk, c, sn, s->B, s->T, 2 * s->H, s->hd, 3 * s->A, ERR);
}
static bool op_rope_backward(step *s, const tlm_abi_op *op) {
    OPERANDS(rope_backward);
    const tlm_dptr dqk = OUT(dqkv);
    return tlm_gpu_rope_backward(s->gpu, dqk, dqk, s->g->rope_cos, s->g->rope_sin, s->B, s->T, 2 * s->H, s->hd,
                                 3 * s->A, ERR);
}

/* ---- causal softmax attention over the packed qkv ---- */

/* Sampling's KV cache: the layer's rows [T, 3A] of qkv (executor.c's
 * twin), in qkv's storage (bf16 where the plan stores qkv so: kv_bf16). */
static tlm_dptr kv_rows(const step *s, const tlm_abi_op *op) {
    return at_elems(s->g->kv_cache, tlm_kv_rows_offset(s->m, &s->sizes, op->layer), s->g->kv_bf16);
}
static size_t qkv_bytes(const step *s, int64_t rows) {
    return (size_t)rows * 3 * (size_t)s->A * (s->g->kv_bf16 ? 2 : sizeof(float));
}
/* The cache's storage must be qkv's (one rule, tlm_gpu_bf16_buffers, made
 * both; this guards the executor against a plan that disagrees). */
static bool kv_matches(step *s, int32_t qkv) {
    if (in_bf16(s, qkv) == s->g->kv_bf16) return true;
    return tlm_fail(ERR, "the KV cache is %s but qkv is %s", s->g->kv_bf16 ? "bf16" : "fp32",
                    in_bf16(s, qkv) ? "bf16" : "fp32");
}
static bool kv_fill(step *s, const tlm_abi_op *op, int32_t qkv) {
    return s->m->kv_mode != TLM_KV_FILL ||
           (kv_matches(s, qkv) && tlm_device_copy(DEV, kv_rows(s, op), buf(s, qkv), qkv_bytes(s, s->N), ERR));
}

/* The attention kernels for the storage of q, k, v and y (gpu_mixers.h,
 * gpu_decode.h): fp32, all bf16, or q, k, v alone (y in fp32 where some
 * reader of y has no bf16 form; since the sigmoid gate has one, no model
 * of the four mixers, but the rule of tlm_gpu_bf16_buffers allows it). */
typedef enum { ATT_FP32, ATT_BF16, ATT_QKV_BF16 } attention_storage;
static attention_storage attention_stored(const step *s, int32_t qkv, int32_t y) {
    if (!in_bf16(s, qkv)) return ATT_FP32; /* a bf16 y comes with a bf16 qkv (gpu_model.h) */
    return in_bf16(s, y) ? ATT_BF16 : ATT_QKV_BF16;
}

static bool attention_decode(step *s, const tlm_abi_op *op) {
    OPERANDS(attention);
    tlm_dptr cache = kv_rows(s, op);
    const bool bf16 = s->g->kv_bf16;
    typedef bool (*decode_fn)(tlm_gpu *, tlm_dptr, tlm_dptr, tlm_dptr, tlm_dptr, int, int, int, int, tlm_err *);
    static const decode_fn decode[] = {[ATT_FP32] = tlm_gpu_attention_decode,
                                       [ATT_BF16] = tlm_gpu_attention_decode_bf16,
                                       [ATT_QKV_BF16] = tlm_gpu_attention_decode_qkv_bf16};
    return kv_matches(s, o->in_qkv) &&
           tlm_device_copy(DEV, at_elems(cache, s->m->kv_pos * 3 * s->A, bf16), IN(qkv), qkv_bytes(s, s->N), ERR) &&
           decode[attention_stored(s, o->in_qkv, o->out_y)](s->gpu, OUT(y), IN(qkv), at_elems(cache, s->A, bf16),
                                                            at_elems(cache, 2 * s->A, bf16), (int)s->m->kv_pos + 1,
                                                            s->H, s->hd, 3 * s->A, ERR);
}

static bool op_attention(step *s, const tlm_abi_op *op) {
    if (s->m->kv_mode == TLM_KV_DECODE) return attention_decode(s, op);
    OPERANDS(attention);
    const attention_storage st = attention_stored(s, o->in_qkv, o->out_y);
    tlm_dptr q = IN(qkv), k = at_elems(q, s->A, st != ATT_FP32), v = at_elems(q, 2 * s->A, st != ATT_FP32);
    typedef bool (*forward_fn)(tlm_gpu *, tlm_dptr, tlm_dptr, tlm_dptr, tlm_dptr, tlm_dptr, int, int, int, int, int,
                               tlm_err *);
    /* all bf16: the tensor cores' forward, or the scalar one, which alone
     * takes an accumulator for y */
    static const forward_fn forward[] = {[ATT_FP32] = tlm_gpu_attention_forward,
                                         [ATT_BF16] = tlm_gpu_attention_tc_forward,
                                         [ATT_QKV_BF16] = tlm_gpu_attention_forward_qkv_bf16};
    bool ok = st == ATT_BF16 && !s->g->attention_tc
                  ? tlm_gpu_attention_forward_bf16(s->gpu, OUT(y), s->g->attention_scratch, OUT(lse), q, k, v, s->B,
                                                   s->T, s->H, s->hd, 3 * s->A, ERR)
                  : forward[st](s->gpu, OUT(y), OUT(lse), q, k, v, s->B, s->T, s->H, s->hd, 3 * s->A, ERR);
    return ok && kv_fill(s, op, o->in_qkv);
}
static bool op_attention_backward(step *s, const tlm_abi_op *op) {
    OPERANDS(attention_backward);
    const attention_storage st = attention_stored(s, o->in_qkv, o->in_y);
    tlm_dptr dq = OUT(dqkv), dk = at(dq, s->A), dv = at(dq, 2 * s->A);
    tlm_dptr q = IN(qkv), k = at_elems(q, s->A, st != ATT_FP32), v = at_elems(q, 2 * s->A, st != ATT_FP32);
    typedef bool (*backward_fn)(tlm_gpu *, tlm_dptr, tlm_dptr, tlm_dptr, tlm_dptr, tlm_dptr, tlm_dptr, tlm_dptr,
                                tlm_dptr, tlm_dptr, int, int, int, int, int, tlm_err *);
    static const backward_fn backward[] = {[ATT_FP32] = tlm_gpu_attention_backward,
                                           [ATT_BF16] = tlm_gpu_attention_backward_bf16,
                                           [ATT_QKV_BF16] = tlm_gpu_attention_backward_qkv_bf16};
    if (st == ATT_BF16 && s->g->attention_tc)
        return tlm_gpu_attention_tc_backward(s->gpu, dq, dk, dv, IN(dy), IN(y), IN(lse), q, k, v, s->B, s->T, s->H,
                                             s->hd, 3 * s->A, s->g->attention_scratch, ERR);
    return backward[st](s->gpu, dq, dk, dv, IN(dy), IN(y), IN(lse), q, k, v, s->B, s->T, s->H, s->hd, 3 * s->A, ERR);
}

/* ---- output projection with the residual added ---- */

static bool op_out_proj(step *s, const tlm_abi_op *op) {
    OPERANDS(out_proj);
    return tlm_device_copy(DEV, OUT(out), IN(resid), rows_bytes(s, s->D), ERR) &&
           linear_forward(s, o->out_out, o->in_y, PARAM(wo), s->A, s->D, true);
}
static bool op_out_proj_backward(step *s, const tlm_abi_op *op) {
    OPERANDS(out_proj_backward);
    return linear_backward(s, OUT(dy), GRAD(wo), o->in_dout, o->in_y, PARAM(wo), s->A, s->D, false);
}

/* ---- the MLP: GEMMs, and the model's generated per-width activation ----
 * The GEMMs are the device's (cuBLASLt on a GPU); the activation and its
 * gradient are the kernels tlmc generated for the layer's width (codegen/
 * cuda_source.c: act, act_grad). h (and dh in the backward) live in the
 * device model's scratch, not in the op table: the op keeps pre_gate and
 * pre_up, as on the CPU, and h is recomputed where it is needed. */

enum { ACT_THREADS = 256 };

static bool act_launch(step *s, tlm_kernel *k, void **args, int64_t W) {
    const int64_t threads = ((int64_t)s->N * W + TLM_ACT_VECTOR - 1) / TLM_ACT_VECTOR;
    tlm_launch dims = {.grid = {tlm_gpu_blocks(threads, ACT_THREADS), 1, 1}, .block = {ACT_THREADS, 1, 1}};
    return tlm_device_launch(DEV, k, dims, args, ERR);
}

/* Two products of the same shape, as one strided-batched GEMM where the
 * operands' distances allow it (gate and up: adjacent parameters,
 * buffers the plan placed), else as two. g0 and g1 differ only in a or b
 * (the weight, or the activations' gradient) and in c/d. */
static bool gemm_pair(step *s, tlm_gemm g0, const tlm_gemm *g1) {
    bool a_differs = g1->a != g0.a;
    tlm_dptr v0 = a_differs ? g0.a : g0.b, v1 = a_differs ? g1->a : g1->b;
    const tlm_dptr v_elem = (a_differs ? g0.a_type : g0.b_type) == TLM_GEMM_BF16 ? 2 : sizeof(float);
    const tlm_dptr d_elem = g0.cd_type == TLM_GEMM_BF16 ? 2 : sizeof(float);
    if (v1 > v0 && g1->d > g0.d && (v1 - v0) % v_elem == 0 && (g1->d - g0.d) % d_elem == 0) {
        int64_t step_v = (int64_t)((v1 - v0) / v_elem), step_d = (int64_t)((g1->d - g0.d) / d_elem);
        g0.batch = 2;
        g0.stride_a = a_differs ? step_v : 0;
        g0.stride_b = a_differs ? 0 : step_v;
        g0.stride_d = step_d;
        g0.stride_c = g0.c ? step_d : 0;
        if (!tlm_gemm_problem(&g0)) return tlm_gpu_gemm(s->gpu, &g0, ERR);
        g0.batch = 1, g0.stride_a = g0.stride_b = g0.stride_c = g0.stride_d = 0;
    }
    return tlm_gpu_gemm(s->gpu, &g0, ERR) && tlm_gpu_gemm(s->gpu, g1, ERR);
}

/* Whether the MLP's pre-activations are stored in bf16 (gpu_model.h; gate
 * and up alike). Then its activation kernels are the bf16 twins, and h (in
 * the MLP scratch, read by the down GEMM and dW_down's only) is bf16 too. */
static bool mlp_in_bf16(const step *s, int32_t pre_gate, int32_t pre_up) {
    return in_bf16(s, pre_up) && (pre_gate < 0 || in_bf16(s, pre_gate));
}
static bool act_h(step *s, const tlm_abi_op *op, bool bf16, tlm_dptr pre_gate, tlm_dptr pre_up, int64_t W) {
    long long rows = s->N;
    tlm_dptr h = s->g->mlp_scratch;
    void *args[] = {&rows, &pre_gate, &pre_up, &h};
    return act_launch(s, (bf16 ? s->g->act_bf16 : s->g->act)[op->kernel], args, W);
}

static bool op_mlp(step *s, const tlm_abi_op *op) {
    OPERANDS(mlp);
    const int64_t W = s->m->so->kernels[op->kernel].width;
    const bool swiglu = o->param_w_gate >= 0;
    tlm_dptr x = IN(x), pre_gate = OUT(pre_gate), pre_up = OUT(pre_up), out = OUT(out);
    const bool bf16 = mlp_in_bf16(s, o->out_pre_gate, o->out_pre_up);
    tlm_gemm up = tlm_gpu_linear_forward_gemm(pre_up, x, PARAM(w_up), s->N, s->D, (int)W, false);
    up.b_type = stored_as(s, o->in_x);
    up.cd_type = bf16 ? TLM_GEMM_BF16 : TLM_GEMM_F32;
    tlm_gemm down = tlm_gpu_linear_forward_gemm(out, s->g->mlp_scratch, PARAM(w_down), s->N, (int)W, s->D, true);
    down.b_type = up.cd_type;
    bool ok = tlm_device_copy(DEV, out, IN(resid), rows_bytes(s, s->D), ERR);
    if (ok && swiglu) {
        tlm_gemm gate = tlm_gpu_linear_forward_gemm(pre_gate, x, PARAM(w_gate), s->N, s->D, (int)W, false);
        gate.b_type = up.b_type, gate.cd_type = up.cd_type;
        ok = gemm_pair(s, gate, &up);
    } else if (ok) ok = tlm_gpu_gemm(s->gpu, &up, ERR);
    return ok && act_h(s, op, bf16, pre_gate, pre_up, W) && tlm_gpu_gemm(s->gpu, &down, ERR);
}

static bool op_mlp_backward(step *s, const tlm_abi_op *op) {
    OPERANDS(mlp_backward);
    const int64_t W = s->m->so->kernels[op->kernel].width;
    const bool swiglu = o->param_w_gate >= 0;
    long long rows = s->N;
    tlm_dptr dout = IN(dout), x = IN(x), pre_gate = IN(pre_gate), pre_up = IN(pre_up), scratch = s->g->mlp_scratch;
    tlm_dptr d_pre_gate = OUT(d_pre_gate), d_pre_up = OUT(d_pre_up), dx = OUT(dx);
    const int D = s->D, w = (int)W;
    /* the pre-activations and their gradients in one storage (gpu_model.c) */
    const bool bf16 = mlp_in_bf16(s, o->in_pre_gate, o->in_pre_up);
    /* dh = dout Wd, then the activation's gradient */
    tlm_gemm dh = tlm_gpu_linear_dx_gemm(scratch, dout, PARAM(w_down), s->N, w, D, false);
    void *grad_args[] = {&rows, &pre_gate, &pre_up, &scratch, &d_pre_gate, &d_pre_up};
    tlm_kernel *act_grad = (bf16 ? s->g->act_grad_bf16 : s->g->act_grad)[op->kernel];
    if (!tlm_gpu_gemm(s->gpu, &dh, ERR) || !act_launch(s, act_grad, grad_args, W)) return false;
    /* dx = d_pre_up Wu (+ d_pre_gate Wg); dWu, dWg += d_pre^T x. The bf16
     * twin wrote the gradients in bf16: the GEMMs' operands as they are
     * (gemm_pair batches the two dW products over them). */
    const tlm_gemm_type mlp_type = bf16 ? TLM_GEMM_BF16 : TLM_GEMM_F32; /* h and the gradients */
    tlm_gemm dx_up = tlm_gpu_linear_dx_gemm(dx, d_pre_up, PARAM(w_up), s->N, D, w, false);
    tlm_gemm dw_up = tlm_gpu_linear_dw_gemm(GRAD(w_up), d_pre_up, x, s->N, D, w);
    dx_up.b_type = dw_up.b_type = mlp_type;
    dw_up.a_type = stored_as(s, o->in_x);
    bool ok = tlm_gpu_gemm(s->gpu, &dx_up, ERR);
    if (ok && swiglu) {
        tlm_gemm dx_gate = tlm_gpu_linear_dx_gemm(dx, d_pre_gate, PARAM(w_gate), s->N, D, w, true);
        tlm_gemm dw_gate = tlm_gpu_linear_dw_gemm(GRAD(w_gate), d_pre_gate, x, s->N, D, w);
        dx_gate.b_type = dw_gate.b_type = mlp_type;
        dw_gate.a_type = dw_up.a_type;
        ok = tlm_gpu_gemm(s->gpu, &dx_gate, ERR) && gemm_pair(s, dw_gate, &dw_up);
    } else if (ok) ok = tlm_gpu_gemm(s->gpu, &dw_up, ERR);
    if (!ok) return false;
    /* dWd += dout^T h, h recomputed into the scratch dh no longer needs */
    tlm_gemm dw_down = tlm_gpu_linear_dw_gemm(GRAD(w_down), dout, scratch, s->N, w, D);
    dw_down.a_type = mlp_type;
    return act_h(s, op, bf16, pre_gate, pre_up, W) && tlm_gpu_gemm(s->gpu, &dw_down, ERR);
}

/* ---- LM head and the loss ---- */

static bool op_head(step *s, const tlm_abi_op *op) {
    OPERANDS(head);
    return linear_forward(s, o->out_logits, o->in_x, PARAM(w), s->D, s->V, false);
}
static bool op_head_backward(step *s, const tlm_abi_op *op) {
    OPERANDS(head_backward);
    return linear_backward(s, OUT(dx), GRAD(w), o->in_dlogits, o->in_x, PARAM(w), s->D, s->V, false);
}
/* The logits as the head's GEMM stored them (bf16: the gradient too, in
 * one storage with them: gpu_model.c). */
static bool op_loss(step *s, const tlm_abi_op *op) {
    OPERANDS(loss);
    return (in_bf16(s, o->in_logits) ? tlm_gpu_crossentropy_forward_bf16 : tlm_gpu_crossentropy_forward)(
        s->gpu, 0, OUT(lse), IN(logits), s->g->targets, s->N, s->V, s->g->loss, ERR);
}
static bool op_loss_backward(step *s, const tlm_abi_op *op) {
    OPERANDS(loss_backward);
    bool bf16; /* one kernel reads the one and writes the other */
    if (!one_storage_in_bf16(s, "the logits and dlogits", (int32_t[]){o->in_logits, o->out_dlogits}, 2, &bf16))
        return false;
    return (bf16 ? tlm_gpu_crossentropy_backward_bf16 : tlm_gpu_crossentropy_backward)(
        s->gpu, OUT(dlogits), IN(logits), IN(lse), s->g->targets, s->N, s->V, s->dloss, ERR);
}

/* ---- a linear map whose weight is one or more adjacent parameters ---- */

static int linear_rows(const step *s, const int32_t w[3]) {
    int rows = 0;
    for (int j = 0; j < 3 && w[j] >= 0; j++) rows += (int)s->m->so->params[w[j]].shape[0];
    return rows;
}
static int linear_cols(const step *s, int32_t w0) { return (int)s->m->so->params[w0].shape[1]; }

static bool op_linear(step *s, const tlm_abi_op *op) {
    OPERANDS(linear);
    const int32_t w[3] = {o->param_w0, o->param_w1, o->param_w2};
    return linear_forward(s, o->out_y, o->in_x, PARAM(w0), linear_cols(s, o->param_w0), linear_rows(s, w), false);
}
static bool op_linear_dw(step *s, const tlm_abi_op *op) {
    OPERANDS(linear_dw);
    const int32_t w[3] = {o->param_w0, o->param_w1, o->param_w2};
    return linear_backward(s, 0, GRAD(w0), o->in_dy, o->in_x, PARAM(w0), linear_cols(s, o->param_w0), linear_rows(s, w),
                           false);
}
static bool op_linear_dx(step *s, const tlm_abi_op *op) {
    OPERANDS(linear_dx);
    const int32_t w[3] = {o->param_w0, o->param_w1, o->param_w2};
    return tlm_gpu_linear_backward(s->gpu, OUT(dx), 0, IN(dy), 0, PARAM(w0), s->N, linear_cols(s, o->param_w0),
                                   linear_rows(s, w), ACCUMULATE, ERR);
}

/* ---- gated attention ---- */

static const char sigmoid_gate_what[] = "the sigmoid gate's y, gate_pre and out";
static bool op_sigmoid_gate(step *s, const tlm_abi_op *op) {
    OPERANDS(sigmoid_gate);
    int rows = s->headwise_gate ? s->N * s->H : s->N * s->A, per_gate = s->headwise_gate ? s->hd : 1;
    bool bf16;
    if (!one_storage_in_bf16(s, sigmoid_gate_what, (int32_t[]){o->in_y, o->in_gate_pre, o->out_out}, 3, &bf16))
        return false;
    return (bf16 ? tlm_gpu_sigmoid_gate_forward_bf16 : tlm_gpu_sigmoid_gate_forward)(s->gpu, OUT(out), IN(y),
                                                                                     IN(gate_pre), rows, per_gate, ERR);
}
static bool op_sigmoid_gate_backward(step *s, const tlm_abi_op *op) {
    OPERANDS(sigmoid_gate_backward);
    int rows = s->headwise_gate ? s->N * s->H : s->N * s->A, per_gate = s->headwise_gate ? s->hd : 1;
    bool bf16;
    if (!one_storage_in_bf16(s, sigmoid_gate_what, (int32_t[]){o->in_y, o->in_gate_pre}, 2, &bf16)) return false;
    return (bf16 ? tlm_gpu_sigmoid_gate_backward_bf16 : tlm_gpu_sigmoid_gate_backward)(
        s->gpu, OUT(dy), OUT(dgate_pre), IN(dout), IN(y), IN(gate_pre), rows, per_gate, ERR);
}

/* ---- titans ---- */

static const char silu_gate_what[] = "the SiLU gate's x, gate_pre and out";
static bool op_silu_gate(step *s, const tlm_abi_op *op) {
    OPERANDS(silu_gate);
    bool bf16;
    if (!one_storage_in_bf16(s, silu_gate_what, (int32_t[]){o->in_x, o->in_gate_pre, o->out_out}, 3, &bf16))
        return false;
    return (bf16 ? tlm_gpu_swiglu_forward_bf16 : tlm_gpu_swiglu_forward)(s->gpu, OUT(out), IN(gate_pre), IN(x),
                                                                         (size_t)s->N * (size_t)s->A, ERR);
}
static bool op_silu_gate_backward(step *s, const tlm_abi_op *op) {
    OPERANDS(silu_gate_backward);
    bool bf16;
    if (!one_storage_in_bf16(s, silu_gate_what, (int32_t[]){o->in_x, o->in_gate_pre}, 2, &bf16)) return false;
    return (bf16 ? tlm_gpu_swiglu_backward_bf16 : tlm_gpu_swiglu_backward)(
        s->gpu, OUT(dgate_pre), OUT(dx), IN(dout), IN(gate_pre), IN(x), (size_t)s->N * (size_t)s->A, ERR);
}
static const char memory_act_what[] = "the memory activation's qkv, act and mem_qkv";
static bool op_memory_act(step *s, const tlm_abi_op *op) {
    OPERANDS(memory_act);
    bool bf16;
    if (!one_storage_in_bf16(s, memory_act_what, (int32_t[]){o->in_qkv, o->out_act, o->out_mem_qkv}, 3, &bf16))
        return false;
    return (bf16 ? tlm_gpu_titans_qkv_forward_bf16 : tlm_gpu_titans_qkv_forward)(
        s->gpu, OUT(act), OUT(mem_qkv), OUT(rnorm), IN(qkv), s->N, s->H, s->hd, ERR);
}
static bool op_memory_act_backward(step *s, const tlm_abi_op *op) {
    OPERANDS(memory_act_backward);
    bool bf16;
    if (!one_storage_in_bf16(s, memory_act_what, (int32_t[]){o->in_qkv, o->in_act}, 2, &bf16)) return false;
    return (bf16 ? tlm_gpu_titans_qkv_backward_bf16 : tlm_gpu_titans_qkv_backward)(
        s->gpu, OUT(dqkv), IN(d_mem_qkv), IN(qkv), IN(act), IN(rnorm), s->N, s->H, s->hd, ERR);
}
static bool op_memory_gates(step *s, const tlm_abi_op *op) {
    OPERANDS(memory_gates);
    return tlm_gpu_titans_gates_forward(s->gpu, OUT(gates), IN(pre), s->N, s->H, s->inner_lr, ERR);
}
static bool op_memory_gates_backward(step *s, const tlm_abi_op *op) {
    OPERANDS(memory_gates_backward);
    return tlm_gpu_titans_gates_backward(s->gpu, OUT(dpre), IN(dgates), IN(gates), s->N, s->H, s->inner_lr, ERR);
}
/* Sampling: the layer's memory state (executor.c's twin), fp32 in either
 * precision; q, k, v of mem_qkv and the read-out y as stored (bf16: the
 * decode kernel's bf16 twin reads q, k, v widened and rounds y). */
static tlm_dptr titans_state(const step *s, const tlm_abi_op *op) {
    return at(s->g->kv_cache, tlm_kv_state_offset(&s->sizes, op->layer));
}
static bool titans_state_walk(step *s, const tlm_abi_op *op, tlm_dptr y, tlm_dptr q, bool bf16, tlm_dptr gates,
                              int64_t t0, int64_t t1) {
    const int64_t NH = (int64_t)s->N * s->H;
    bool (*decode)(tlm_gpu *, tlm_dptr, tlm_dptr, tlm_dptr, tlm_dptr, tlm_dptr, tlm_dptr, tlm_dptr, tlm_dptr, int, int,
                   bool, tlm_err *) = bf16 ? tlm_gpu_titans_decode_bf16 : tlm_gpu_titans_decode;
    for (int64_t t = t0; t < t1; t++) {
        tlm_dptr qt = at_elems(q, (t - t0) * 3 * s->A, bf16), gt = at(gates, (t - t0) * s->H);
        if (!decode(s->gpu, y, titans_state(s, op), qt, at_elems(qt, s->A, bf16), at_elems(qt, 2 * s->A, bf16), gt,
                    at(gt, NH), at(gt, 2 * NH), s->H, s->hd, t % s->chunk == 0, ERR))
            return false;
    }
    return true;
}

/* q, k, v (mem_qkv) and the read-out y in one storage: the bf16 kernels
 * read the one widened and write the other rounded, forward and decoding */
static bool op_titans(step *s, const tlm_abi_op *op) {
    OPERANDS(titans);
    const int64_t NH = (int64_t)s->N * s->H;
    bool bf16;
    if (!one_storage_in_bf16(s, "the memory's q, k, v and y", (int32_t[]){o->in_mem_qkv, o->out_y}, 2, &bf16))
        return false;
    tlm_dptr q = IN(mem_qkv), k = at_elems(q, s->A, bf16), v = at_elems(q, 2 * s->A, bf16);
    tlm_dptr theta = IN(gates), eta = at(theta, NH), alpha = at(theta, 2 * NH);
    if (s->m->kv_mode == TLM_KV_DECODE)
        return titans_state_walk(s, op, OUT(y), q, bf16, theta, s->m->kv_pos, s->m->kv_pos + 1);
    const size_t state_bytes = (size_t)s->H * 3 * (size_t)s->hd * (size_t)s->hd * sizeof(float);
    return (bf16 ? tlm_gpu_titans_forward_bf16 : tlm_gpu_titans_forward)(s->gpu, OUT(y), OUT(saved), q, k, v, 3 * s->A,
                                                                         theta, eta, alpha, s->B, s->T, s->H, s->hd,
                                                                         s->chunk, ERR) &&
           (s->m->kv_mode != TLM_KV_FILL || (tlm_device_zero(DEV, titans_state(s, op), state_bytes, ERR) &&
                                             titans_state_walk(s, op, 0, q, bf16, theta, 0, s->N)));
}
static bool op_titans_backward(step *s, const tlm_abi_op *op) {
    OPERANDS(titans_backward);
    const int64_t NH = (int64_t)s->N * s->H;
    const bool bf16 = in_bf16(s, o->in_mem_qkv);
    tlm_dptr dq = OUT(d_mem_qkv), dk = at(dq, s->A), dv = at(dq, 2 * s->A);
    tlm_dptr dtheta = OUT(dgates), deta = at(dtheta, NH), dalpha = at(dtheta, 2 * NH);
    tlm_dptr q = IN(mem_qkv), k = at_elems(q, s->A, bf16), v = at_elems(q, 2 * s->A, bf16);
    tlm_dptr theta = IN(gates), eta = at(theta, NH), alpha = at(theta, 2 * NH);
    return (bf16 ? tlm_gpu_titans_backward_bf16 : tlm_gpu_titans_backward)(
        s->gpu, dq, dk, dv, dtheta, deta, dalpha, IN(dy), IN(saved), q, k, v, 3 * s->A, theta, eta, alpha, s->B, s->T,
        s->H, s->hd, s->chunk, s->g->titans_scratch, ERR);
}

/* ---- dispatch ---- */

typedef bool (*op_fn)(step *, const tlm_abi_op *);
#define OP_ENTRY_(E, name, in, out, param, doc) [TLM_OP_##E] = op_##name,
static const op_fn op_functions[TLM_OP_COUNT] = {TLM_OPS(OP_ENTRY_)};

static step step_for(tlm_model *m, float dloss) {
    step s = {.m = m, .g = m->gpu, .gpu = &m->gpu->gpu, .dloss = dloss};
    s.sizes = tlm_op_sizes_of(m);
    return s;
}

/* Runs ops [from, to); false with the failing op named in the model's error. */
static bool run_ops(step *s, int from, int to, bool skip_loss) {
    for (int i = from; i < to; i++) {
        const tlm_abi_op *op = &s->m->so->ops[i];
        if (skip_loss && op->kind == TLM_OP_LOSS) continue;
        tlm_profile_mark t0 = s->m->profile ? tlm_profile_now(s->m->profile) : (tlm_profile_mark){0};
        /* profiled: the op's own time, so wait for it to finish; its
         * kernels' rows in the device table under its name */
        tlm_kernel_times *kt = s->m->profile ? s->m->profile->kernels : NULL;
        if (kt) kt->op = tlm_op_name(op->kind);
        bool ok = op_functions[op->kind](s, op) && (!s->m->profile || tlm_device_sync(DEV, ERR));
        if (kt) kt->op = NULL;
        if (ok && s->m->profile) tlm_profile_op(s->m->profile, s->m, op, t0);
        if (!ok) {
            tlm_err e;
            tlm_fail(&e, "on the device, op %d (%s): %s", i, tlm_op_name(op->kind), s->err.msg);
            tlm_gpu_model_fail(s->m, &e);
            return false;
        }
    }
    return true;
}

/* CUDA graphs (graph_cache.h, docs/gpu.md "CUDA graphs"): the ops of a
 * step replayed from a graph per (ops, B, T). Off for --profile (per-op
 * times), sampling (kv_pos moves every token) and data-parallel runs
 * (grads_final starts transfers between ops); NULL then. */
static tlm_graph_cache *graphs_for(tlm_model *m) {
    tlm_gpu_model *g = m->gpu;
    if (tlm_gpu_graphs_off_reason(m)) return NULL; /* the banner's reason (gpu_model.h) */
    if (!g->graphs) g->graphs = tlm_graph_cache_new(g->gpu.dev);
    return g->graphs;
}

typedef struct ops_range {
    step *s;
    int from, to;
    bool skip_loss;
} ops_range;

static bool ops_work(void *ctx, tlm_err *err) {
    ops_range *r = ctx;
    if (run_ops(r->s, r->from, r->to, r->skip_loss)) return true;
    return tlm_fail(err, "%s", r->s->m->gpu->err.msg);
}

/* run_ops through the model's graphs, or op by op without them. Every
 * argument the ops pass is fixed by (from, to, skip_loss, B, T) and the
 * model's buffers, except loss_backward's dloss: callers keep that op
 * out of the range. */
static bool run_ops_graphed(step *s, int from, int to, bool skip_loss) {
    tlm_graph_cache *graphs = graphs_for(s->m);
    if (!graphs) return run_ops(s, from, to, skip_loss);
    ops_range r = {s, from, to, skip_loss};
    tlm_graph_key key = {{from, to, skip_loss, s->m->run_B, s->m->run_T}};
    tlm_err e;
    if (tlm_graph_cache_run(graphs, &key, ops_work, &r, &e)) return true;
    tlm_gpu_model_fail(s->m, &e);
    return false;
}

/* bf16: the parameters' bf16 copy, remade when they changed. */
static bool refresh_bf16_weights(step *s) {
    tlm_gpu_model *g = s->g;
    if (g->precision != TLM_PRECISION_BF16 || !g->weights_stale) return true;
    if (!tlm_gpu_to_bf16(s->gpu, g->bf16.weights_bf16, g->params, s->m->param_floats, &s->err)) {
        tlm_gpu_model_fail(s->m, &s->err);
        return false;
    }
    g->weights_stale = false;
    return true;
}

double tlm_gpu_model_forward(tlm_model *m, const int32_t *tokens, const int32_t *targets, int64_t B, int64_t T) {
    if (B < 1 || T < 1 || B > m->B || T > m->T || m->gpu->failed) return NAN;
    m->run_B = B;
    m->run_T = T;
    size_t n = (size_t)(B * T);
    memcpy(m->tokens, tokens, n * sizeof(int32_t));
    if (targets) memcpy(m->targets, targets, n * sizeof(int32_t));
    step s = step_for(m, 0);
    tlm_device *dev = s.gpu->dev;
    double loss = 0;
    bool ok = tlm_device_upload(dev, m->gpu->tokens, tokens, n * sizeof(int32_t), &s.err) &&
              (!targets || tlm_device_upload(dev, m->gpu->targets, targets, n * sizeof(int32_t), &s.err));
    if (!ok) {
        tlm_gpu_model_fail(m, &s.err);
        return NAN;
    }
    if (!refresh_bf16_weights(&s)) return NAN;
    if (!run_ops_graphed(&s, 0, m->nforward, !targets)) return NAN;
    if (targets && !tlm_device_download(dev, &loss, m->gpu->loss, sizeof loss, &s.err)) {
        tlm_gpu_model_fail(m, &s.err);
        return NAN;
    }
    return loss;
}

void tlm_gpu_model_backward(tlm_model *m, float dloss) {
    if (m->gpu->failed) return;
    step s = step_for(m, dloss);
    if (graphs_for(m)) {
        /* loss_backward op by op (dloss is its argument), the ops between
         * from graphs */
        for (int i = m->nforward; i < m->nops;) {
            int j = i + 1;
            if (m->so->ops[i].kind != TLM_OP_LOSS_BACKWARD)
                while (j < m->nops && m->so->ops[j].kind != TLM_OP_LOSS_BACKWARD) j++;
            bool ok = m->so->ops[i].kind == TLM_OP_LOSS_BACKWARD ? run_ops(&s, i, j, false)
                                                                 : run_ops_graphed(&s, i, j, false);
            if (!ok) return;
            i = j;
        }
        return;
    }
    /* grads_final (model.h) as on the CPU, op by op as they are queued: the
     * data-parallel chain starts a bucket's all-reduce behind them. */
    tlm_final_walk walk;
    tlm_final_walk_begin(&walk, m);
    for (int i = m->nforward; i < m->nops && run_ops(&s, i, i + 1, false); i++) tlm_final_walk_after_op(&walk, m, i);
    tlm_final_walk_end(&walk, m);
}
