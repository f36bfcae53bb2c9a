/* What both executors (executor.c on the CPU, gpu_executor.c on a device)
 * read of an op: the sizes of the forward being run, and the op's operands
 * by the names of abi/tlm_ops.h. One home, so the two cannot drift. The
 * shapes: N = B·T tokens, D = d_model, A = heads·head_dim, V = vocab.
 *
 * They are int, as the ops take them: tlm_model_create refused a B and T
 * whose N = B·T, or N times the widest per-token tensor (so N·H, N·A and
 * N·3A), would pass TLM_OPS_MAX_INDEX, and a forward never runs more than
 * the B and T it was created for. */
#ifndef TLM_OP_CONTEXT_H
#define TLM_OP_CONTEXT_H

#include "model.h"

/* The fields, for an executor's step to hold as its own (anonymous)
 * members beside its `sizes` (model_so.h's TLM_SO_TABLES_FIELDS idiom). */
#define TLM_OP_SIZES_FIELDS                                      \
    int B, T, N, D, H, hd, A, V;                                 \
    bool headwise_gate; /* gated attention: one gate per head */ \
    float eps, inner_lr;                                         \
    int chunk;          /* titans */
typedef struct tlm_op_sizes {
    TLM_OP_SIZES_FIELDS
} tlm_op_sizes;

/* The sizes of m's last forward (run_B, run_T) and of its model. */
static inline tlm_op_sizes tlm_op_sizes_of(const tlm_model *m) {
    const tlm_abi_config *c = m->so->config;
    return (tlm_op_sizes){.B = (int)m->run_B,
                          .T = (int)m->run_T,
                          .N = (int)(m->run_B * m->run_T),
                          .D = (int)c->d_model,
                          .H = (int)c->heads,
                          .hd = (int)c->head_dim,
                          .A = (int)(c->heads * c->head_dim),
                          .V = (int)c->vocab,
                          .headwise_gate = c->gate == TLM_GATE_HEADWISE,
                          .eps = (float)c->norm_eps,
                          .inner_lr = (float)c->inner_lr,
                          .chunk = (int)c->chunk};
}

/* Sampling's cache (model.h, tlm_kv_mode), where both executors find
 * things, in floats: the first RoPE row of this forward (a decoded token's
 * position, else 0), a layer's [T, 3A] rows of qkv, and a layer's Titans
 * state [H][3][hd][hd]. */
static inline int64_t tlm_kv_rope_offset(const tlm_model *m, const tlm_op_sizes *z) {
    return m->kv_mode == TLM_KV_DECODE ? m->kv_pos * (z->hd / 2) : 0;
}
static inline int64_t tlm_kv_rows_offset(const tlm_model *m, const tlm_op_sizes *z, int layer) {
    return (int64_t)layer * m->T * 3 * z->A;
}
static inline int64_t tlm_kv_state_offset(const tlm_op_sizes *z, int layer) {
    return (int64_t)layer * z->H * 3 * (int64_t)z->hd * z->hd;
}

/* Operands by name: OPERANDS(rmsnorm) names o the op's slots, then
 * IN(x), OUT(y), PARAM(weight) and GRAD(weight) read them through the
 * executor's own buf, prm and grd (host pointers or device addresses). */
#define OPERANDS(name) const tlm_operands_##name *o = &op->name
#define IN(n) buf(s, o->in_##n)
#define OUT(n) buf(s, o->out_##n)
#define PARAM(n) prm(s, o->param_##n)
#define GRAD(n) grd(s, o->param_##n)
#define ACCUMULATE ((op->flags & TLM_OP_FLAG_ACCUMULATE) != 0)

#endif
