/* The ops of a training step: one line each (QBE's ops.h, Lua's
 * lopcodes.h). From this table come the op kinds, their printed names, the
 * names of their operands, the record each op stores in model.so (through
 * tlm_abi_op's union), the IR emission (compiler/ir.c's EMIT) and the
 * executor's one function per op (runtime/model/executor.c), so the three
 * read the same operand names.
 *
 *   X(ENUM, name, (inputs), (outputs), (params), semantics)
 *
 * Inputs and outputs are activation buffers, params are parameters; up to
 * four of each, in slot order. Tokens, targets and RoPE tables are the
 * model's, not operands. An operand may be absent (-1), e.g. the gate of a
 * GELU MLP. ORDER OP: the kind is stored in model.so; append new ops at the
 * end and bump TLM_ABI_VERSION when an op's operands change.
 *
 * Adding an op: one line here, its EMIT in compiler/ir.c, its function in
 * the executor (the build fails until it exists) and its math in
 * runtime/ops/. docs/architecture.md lists the files. */
#ifndef TLM_OPS_H
#define TLM_OPS_H

#include <stdint.h>

/* clang-format off */
#define TLM_OPS(X)                                                                                            \
    X(EMBED, embed, (), (resid), (embed), "resid = embed[tokens]")                                          \
    X(RMSNORM, rmsnorm, (x), (y, rstd), (weight), "y = x rstd weight, rstd = 1/sqrt(mean(x^2) + eps)")      \
    X(QKV, qkv, (x), (qkv), (wq, wk, wv), "qkv = x [wq; wk; wv]^T (one [3A, D] matrix)")                 \
    X(ROPE, rope, (), (qkv), (), "rotate q and k of qkv in place")                                          \
    X(ATTENTION, attention, (qkv), (lse, y), (), "causal softmax attention: lse, y = attn(q, k, v)")        \
    X(OUT_PROJ, out_proj, (y, resid), (out), (wo), "out = resid + y wo^T")                                  \
    X(MLP, mlp, (x, resid), (pre_gate, pre_up, out), (w_gate, w_up, w_down),                                \
      "out = resid + MLP(x) through the layer's kernel; keeps the pre-activations")                         \
    X(HEAD, head, (x), (logits), (w), "logits = x w^T (the head, or the embedding when tied)")             \
    X(LOSS, loss, (logits), (lse), (), "mean cross-entropy of logits against the targets; lse per token") \
    X(LOSS_BACKWARD, loss_backward, (logits, lse), (dlogits), (), "dlogits = dloss (softmax - onehot) / N") \
    X(HEAD_BACKWARD, head_backward, (dlogits, x), (dx), (w), "dx = dlogits w; dw += dlogits^T x")           \
    X(RMSNORM_BACKWARD, rmsnorm_backward, (dy, x, rstd), (dx), (weight),                                    \
      "dx (= or += per the flag) from dy; dweight +=")                                                       \
    X(MLP_BACKWARD, mlp_backward, (dout, x, pre_gate, pre_up), (d_pre_gate, d_pre_up, dx),                  \
      (w_gate, w_up, w_down), "dx = MLP'(x)^T dout (written); dweights +=; pre_up may be left as h")         \
    X(OUT_PROJ_BACKWARD, out_proj_backward, (dout, y), (dy), (wo), "dy = dout wo; dwo += dout^T y")         \
    X(ATTENTION_BACKWARD, attention_backward, (dy, qkv, lse, y), (dqkv), (), "dqkv from dy, P from lse")    \
    X(ROPE_BACKWARD, rope_backward, (), (dqkv), (), "rotate back dq and dk of dqkv in place")               \
    X(QKV_BACKWARD, qkv_backward, (dqkv, x), (dx), (wq, wk, wv), "dx = dqkv [wq; wk; wv]; dw += dqkv^T x")  \
    X(EMBED_BACKWARD, embed_backward, (dresid), (), (embed), "dembed[tokens] += dresid")                    \
    X(LINEAR, linear, (x), (y), (w0, w1, w2), "y = x W^T, W: the params' rows as one matrix")               \
    X(LINEAR_DW, linear_dw, (dy, x), (), (w0, w1, w2), "dW += dy^T x")                                      \
    X(LINEAR_DX, linear_dx, (dy), (dx), (w0, w1, w2), "dx (= or += per the flag) dy W")                     \
    X(SIGMOID_GATE, sigmoid_gate, (gate_pre, y), (out), (), "out = y sigmoid(gate_pre), per channel or head") \
    X(SIGMOID_GATE_BACKWARD, sigmoid_gate_backward, (dout, y, gate_pre), (dy, dgate_pre), (),               \
      "dy, dgate_pre from dout")                                                                             \
    X(SILU_GATE, silu_gate, (x, gate_pre), (out), (), "out = x silu(gate_pre)")                             \
    X(SILU_GATE_BACKWARD, silu_gate_backward, (dout, x, gate_pre), (dx, dgate_pre), (),                     \
      "dx, dgate_pre from dout")                                                                             \
    X(MEM_ACT, memory_act, (qkv), (act, mem_qkv, rnorm), (),                                                \
      "act = silu(qkv); mem_qkv = l2-normalised q, k (v as is); rnorm = their 1/norms")                     \
    X(MEM_ACT_BACKWARD, memory_act_backward, (d_mem_qkv, qkv, act, rnorm), (dqkv), (), "dqkv from d_mem_qkv") \
    X(MEM_GATES, memory_gates, (pre), (gates), (), "gates = (inner_lr sigmoid, sigmoid, sigmoid)(pre)")     \
    X(MEM_GATES_BACKWARD, memory_gates_backward, (dgates, gates), (dpre), (), "dpre from dgates")           \
    X(TITANS, titans, (mem_qkv, gates), (y, saved), (),                                                      \
      "y = M_t q_t of the memory updated chunk by chunk; saved = its checkpoints")                           \
    X(TITANS_BACKWARD, titans_backward, (dy, mem_qkv, gates, saved), (d_mem_qkv, dgates), (),               \
      "d_mem_qkv, dgates from dy, recomputing the memory from saved")                                        \
    X(RMSNORM_HEADS, rmsnorm_heads, (x), (y, rstd), (weight), "y = rmsnorm per head (x) weight")           \
    X(RMSNORM_HEADS_BACKWARD, rmsnorm_heads_backward, (dy, x, rstd), (dx), (weight), "dx from dy; dweight +=")
/* clang-format on */

#define TLM_OP_KIND_(E, name, in, out, param, doc) TLM_OP_##E,
#define TLM_OP_ONE_(E, name, in, out, param, doc) +1
typedef enum tlm_op_kind { TLM_OPS(TLM_OP_KIND_) } tlm_op_kind;
enum { TLM_OP_COUNT = 0 TLM_OPS(TLM_OP_ONE_) };   /* outside the enum: see tlm_enums.h */
#undef TLM_OP_KIND_
#undef TLM_OP_ONE_

/* tlm_op_by_name_<name>: the kind of an op named by its lowercase name, so
 * that EMIT(attention_backward, ...) needs no second spelling. */
#define TLM_OP_ALIAS_(E, name, in, out, param, doc) tlm_op_kind_##name = TLM_OP_##E,
enum tlm_op_kind_by_name { TLM_OPS(TLM_OP_ALIAS_) };
#undef TLM_OP_ALIAS_

#define TLM_OP_FLAG_ACCUMULATE 1u   /* the op adds into its first output instead of writing it */

/* ---- each op's operands as named slots ----
 * An op's record holds int32 in[4], out[4], param[4]; for each op a struct
 * of twelve int32 fields overlays them with its names: in_<name>,
 * out_<name>, param_<name>, padded with unused fields. */
#define TLM_FIRST4_(a, b, c, d, ...) a, b, c, d
#define TLM_PAD4_(...) TLM_FIRST4_(__VA_ARGS__, pad1, pad2, pad3, pad4)
#define TLM_FIELDS4_(prefix, a, b, c, d) int32_t prefix##a, prefix##b, prefix##c, prefix##d;
#define TLM_FIELDS_(prefix, ...) TLM_FIELDS_X_(prefix, TLM_PAD4_(__VA_ARGS__))
#define TLM_FIELDS_X_(prefix, ...) TLM_FIELDS4_(prefix, __VA_ARGS__)
#define TLM_UNPAREN_(...) __VA_ARGS__
#define TLM_OP_STRUCT_(E, name, in, out, param, doc)                                                                  \
    typedef struct tlm_operands_##name {                                                                              \
        TLM_FIELDS_(in_, TLM_UNPAREN_ in) TLM_FIELDS_(out_, TLM_UNPAREN_ out) TLM_FIELDS_(param_, TLM_UNPAREN_ param) \
    } tlm_operands_##name;
TLM_OPS(TLM_OP_STRUCT_)
#undef TLM_OP_STRUCT_

/* The members of tlm_abi_op's operand union: slots, and each op's names. */
#define TLM_OP_MEMBER_(E, name, in, out, param, doc) tlm_operands_##name name;
#define TLM_OP_OPERAND_UNION                 \
    union {                                  \
        struct {                             \
            int32_t in[4], out[4], param[4]; \
        };                                   \
        TLM_OPS(TLM_OP_MEMBER_)              \
    }

/* ---- what the printer and the validator read (the semantics column
 * documents the op for whoever reads the table) ---- */
typedef struct tlm_op_info {
    const char *name;
    const char *in[4], *out[4], *param[4]; /* "" where a slot is unused */
} tlm_op_info;

#define TLM_STR4_(a, b, c, d) #a, #b, #c, #d
#define TLM_STR4_X_(...) TLM_STR4_(__VA_ARGS__)
#define TLM_NAMES_(...) {TLM_STR4_X_(TLM_FIRST4_(__VA_ARGS__, , , , ))}
#define TLM_OP_INFO_(E, name, in, out, param, doc) \
    [TLM_OP_##E] = {#name, TLM_NAMES_ in, TLM_NAMES_ out, TLM_NAMES_ param},
static const tlm_op_info tlm_op_table[TLM_OP_COUNT] = {TLM_OPS(TLM_OP_INFO_)};
#undef TLM_OP_INFO_

/* An op kind's name as printed ("mlp_backward"), or "?" out of range. */
static inline const char *tlm_op_name(uint32_t kind) { return kind < TLM_OP_COUNT ? tlm_op_table[kind].name : "?"; }

#endif
