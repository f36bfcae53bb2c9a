/* The ABI between tlmc and the runtime: what a compiled model.so exports.
 *
 * A model.so holds generated code and one descriptor. It exports:
 *
 *   const uint32_t       tlm_abi_magic;        TLM_ABI_MAGIC
 *   const uint32_t       tlm_abi_version;      TLM_ABI_VERSION
 *   const uint8_t        tlm_model_blob[];     the descriptor (below), 16-aligned
 *   const uint64_t       tlm_model_blob_size;
 *   const tlm_kernel_fns tlm_kernel_table[];   one entry per kernel of the blob
 *   const char           tlm_cuda_source[];    CUDA C for NVRTC, NUL-terminated
 *
 * The descriptor is a flat little-endian blob: a header, then tables that
 * refer to each other by index and to text by offset into a string table.
 * It holds no pointers, so a reader can check every offset and count against
 * the blob's size before trusting it, and a checksum catches damage. The
 * only pointers are the kernels' entry points, which the dynamic loader
 * relocates.
 *
 * Versioning: any change to a struct below or to the meaning of a field bumps
 * TLM_ABI_VERSION; the runtime refuses other versions with a message that
 * says to recompile the model.
 */
#ifndef TLM_ABI_H
#define TLM_ABI_H

#include <stdint.h>

#include "tlm_enums.h"
#include "tlm_ops.h"

#define TLM_ABI_MAGIC 0x314D4C54u          /* "TLM1" */
/* 3: attention saves lse, not probs; 4: the model's tokenizer; 5: each
 * kernel's CPU implementation (tlm_abi_kernel.cpu_impl), and the CUDA
 * source's bf16 activation entries (_act_bf16, _act_grad_bf16); 6: the
 * training record's min_lr may be -1 (a tenth of lr, resolved by the
 * reader after its flags); 7: _act_grad_bf16 writes the gradients in bf16
 * (the cuBLASLt GEMMs' operands, as they are stored), not fp32 */
#define TLM_ABI_VERSION 7u
/* The oldest model ABI whose checkpoints this one reads: 7 changed a CUDA
 * kernel, not what a checkpoint holds, so a run trained before it resumes
 * with its model compiled again. */
#define TLM_CKPT_OLDEST_ABI 6u

#define TLM_SYM_MAGIC "tlm_abi_magic"
#define TLM_SYM_VERSION "tlm_abi_version"
#define TLM_SYM_BLOB "tlm_model_blob"
#define TLM_SYM_BLOB_SIZE "tlm_model_blob_size"
#define TLM_SYM_KERNELS "tlm_kernel_table"
#define TLM_SYM_CUDA "tlm_cuda_source"

/* ---- generated MLP kernels (semantics: codegen/codegen.h) ---- */

/* The three CPU entry points, in the order the runtime calls them; a
 * spec's symbols are STEM "_" ENTRY (codegen/kernel_symbol.c), and the
 * blob's kernel table names the fwd one. */
#define TLM_ENTRY_FWD "fwd"
#define TLM_ENTRY_BWD_DATA "bwd_data"
#define TLM_ENTRY_BWD_WEIGHT "bwd_weight"
/* The CUDA source's two more entries per spec, for the GPU's GEMM path
 * (the GEMMs go to cuBLASLt, these do what it cannot):
 *   act(rows, pre_gate, pre_up, h):  h = act(pre_gate, pre_up), [rows, W]
 *   act_grad(rows, pre_gate, pre_up, dh, d_pre_gate, d_pre_up)
 * elementwise over rows × W, any grid (blocks stride), 256 threads; each
 * also as a "_bf16" twin whose arrays are bf16, dh aside (fp32). A
 * thread takes TLM_ACT_VECTOR elements a step where its arrays are 16-byte
 * aligned (a warp 32 × TLM_ACT_VECTOR consecutive ones): a grid of rows ×
 * W / TLM_ACT_VECTOR threads covers them in one step (a larger one leaves
 * threads idle; a source from before the vectors, one element a thread,
 * still strides over all of them). */
#define TLM_ENTRY_ACT "act"
#define TLM_ENTRY_ACT_GRAD "act_grad"
#define TLM_ACT_VECTOR 8

typedef void (*tlm_mlp_fwd_fn)(int64_t r0, int64_t r1, const float *x, const float *w_gate, const float *w_up,
                               const float *w_down, float *pre_gate, float *pre_up, float *out);
/* bwd_data leaves h = act(pre_gate, pre_up) in pre_up, which bwd_weight
 * reads (codegen/codegen.h). */
typedef void (*tlm_mlp_bwd_data_fn)(int64_t r0, int64_t r1, const float *x, const float *w_gate, const float *w_up,
                                    const float *w_down, const float *pre_gate, float *pre_up, const float *dout,
                                    float *d_pre_gate, float *d_pre_up, float *dx);
typedef void (*tlm_mlp_bwd_weight_fn)(int64_t rows, int64_t j0, int64_t j1, const float *x, const float *pre_gate,
                                      const float *pre_up, const float *dout, const float *d_pre_gate,
                                      const float *d_pre_up, float *dw_gate, float *dw_up, float *dw_down);

typedef struct tlm_kernel_fns {
    tlm_mlp_fwd_fn fwd;
    tlm_mlp_bwd_data_fn bwd_data;
    tlm_mlp_bwd_weight_fn bwd_weight;
} tlm_kernel_fns;

/* ---- enumerations stored in the blob: tlm_enums.h (mixers, MLP kinds,
 * gates, optimizers, LR schedules, inits) and tlm_ops.h (op kinds) ---- */

/* What a parameter is; with its layer this says where it is used. */
enum tlm_abi_param_role {
    TLM_P_EMBED,     /* [V, D] */
    TLM_P_ATTN_NORM, /* [D]    input_layernorm */
    TLM_P_Q,         /* [A, D]; k_proj and v_proj follow q_proj directly, */
    TLM_P_K,         /* so the three are one [3A, D] matrix */
    TLM_P_V,
    TLM_P_O,          /* [D, A] */
    TLM_P_MLP_NORM,   /* [D]    post_attention_layernorm */
    TLM_P_GATE,       /* [W, D] */
    TLM_P_UP,         /* [W, D] */
    TLM_P_DOWN,       /* [D, W] */
    TLM_P_FINAL_NORM, /* [D] */
    TLM_P_HEAD,       /* [V, D] (absent when tied) */
    TLM_P_OUT_GATE,   /* gated attention: [A, D] (elementwise) or [H, D] (head-wise);
                         titans: the output gate [A, D] */
    TLM_P_THETA,      /* titans: [H, D] each, adjacent: one matrix [3H, D] */
    TLM_P_ETA,
    TLM_P_ALPHA,
    TLM_P_MEM_NORM, /* titans: the output norm's weight [A] (per head and channel) */
    TLM_P_COUNT
};

/* What an activation buffer holds. Sizes are per_token × B·T floats plus
 * per_token_t × B·T·T (no buffer of tlmc's needs it since attention saves a
 * log-sum-exp rather than its probabilities; kept in the format, checked)
 * plus per_seq × B (titans' memory checkpoints). */
enum tlm_abi_buffer_role {
    TLM_B_RESID,      /* h_l, the residual stream entering layer l [BT, D]; l = L: the last */
    TLM_B_MID,        /* z_l = h_l + attention [BT, D] */
    TLM_B_NORM1,      /* attention's input norm [BT, D] */
    TLM_B_RSTD1,      /* its 1/rms [BT] */
    TLM_B_QKV,        /* q, k, v packed per token [BT, 3A]; q and k after RoPE */
    TLM_B_ATTN_LSE,   /* attention's log-sum-exp per token and head [BT, H] */
    TLM_B_ATTN_Y,     /* attention output before o_proj [BT, A] */
    TLM_B_NORM2,      /* the MLP's input norm [BT, D] */
    TLM_B_RSTD2,      /* its 1/rms [BT] */
    TLM_B_PRE_GATE,   /* MLP pre-activations [BT, W_l] */
    TLM_B_PRE_UP,     /* [BT, W_l] */
    TLM_B_NORMF,      /* the final norm [BT, D] */
    TLM_B_RSTDF,      /* its 1/rms [BT] */
    TLM_B_LOGITS,     /* [BT, V]; the backward overwrites it with dlogits */
    TLM_B_LSE,        /* log-sum-exp per token [BT] */
    TLM_B_D_RESID,    /* gradient of the residual stream [BT, D] */
    TLM_B_D_NORM,     /* gradient of a norm's output [BT, D] */
    TLM_B_D_PRE_GATE, /* [BT, W_l] */
    TLM_B_D_PRE_UP,   /* [BT, W_l] */
    TLM_B_D_ATTN_Y,   /* [BT, A] */
    TLM_B_D_QKV,      /* [BT, 3A] */
    TLM_B_GATE_PRE,   /* output gate pre-activation [BT, A] (head-wise: [BT, H]) */
    TLM_B_ATTN_GATED, /* the gated mixer output fed to o_proj [BT, A] */
    TLM_B_D_GATE_PRE, /* their gradients */
    TLM_B_D_ATTN_GATED,
    TLM_B_MEM_ACT,       /* titans: silu(q, k, v) [BT, 3A] */
    TLM_B_MEM_QKV,       /* titans: l2-normalised q, k and v [BT, 3A] */
    TLM_B_MEM_RNORM,     /* titans: q and k's 1/norm [BT, 2H] */
    TLM_B_MEM_GATES_PRE, /* titans: theta, eta, alpha before the sigmoid [BT, 3H] */
    TLM_B_MEM_GATES,     /* titans: theta, eta, alpha [BT, 3H] */
    TLM_B_MEM_Y,         /* titans: memory read-out M_t q_t [BT, A] */
    TLM_B_MEM_SAVED,     /* titans: memory checkpoints for the backward pass */
    TLM_B_MEM_YN,        /* titans: the read-out's per-head norm [BT, A] */
    TLM_B_MEM_RSTD,      /* its 1/rms per head [BT, H] */
    TLM_B_D_MEM_YN,      /* titans: the gradients of the above */
    TLM_B_D_MEM_Y,
    TLM_B_D_MEM_QKV,
    TLM_B_D_MEM_GATES,
    TLM_B_D_MEM_GATES_PRE,
    TLM_B_CMS_U, /* hope: the residual stream between two CMS levels [BT, D] */
    TLM_B_COUNT
};

/* ---- the blob ---- */

typedef struct tlm_blob_header {
    uint32_t magic, version;
    uint64_t size;            /* of the whole blob */
    uint64_t checksum;        /* FNV-1a 64 of the bytes after the header */
    uint32_t nlayers, nparams, nkernels, nbuffers, nops, nplans;
    uint64_t model_off, train_off, layers_off, params_off, kernels_off, buffers_off, ops_off, plans_off, strings_off,
        strings_size;
} tlm_blob_header;

typedef struct tlm_abi_config {
    uint32_t name;            /* string offset */
    uint32_t mixer, mlp, gate, tie_embeddings, ncms;  /* gate: 0 elementwise, 1 head-wise */
    uint32_t tokenizer;       /* string: the tokenizer file's absolute path (`tokenizer = "..."`); 0: none */
    uint32_t cpu_needs;       /* string: the x86 extensions the CPU kernels may use, comma-separated
                                 (tlm_codegen_cpu_needs; "" none beyond x86-64); 0: not recorded
                                 (a model.so of tlmc before this field: nothing is checked) */
    int64_t vocab, context, d_model, layers, heads, head_dim, quantum, chunk;
    int64_t budget_width;     /* 0: no budget */
    int64_t cms[8];
    double norm_eps, rope_base, inner_lr;
    int64_t param_floats;     /* size of the parameter block */
    uint8_t tokenizer_hash[32]; /* the tokenizer's identity (runtime/tokenizer/tokenizer.h) when it has one */
} tlm_abi_config;

typedef struct tlm_abi_train {
    int64_t batch, context, steps, warmup, accumulate, eval_every, eval_batches, ckpt_every, log_every;
    uint64_t seed;
    uint32_t optimizer, lr_schedule;
  /* min_lr -1: the model leaves it to its default, a tenth of lr as the
   * reader's flags leave lr (tlm_train_resolve_defaults) */
    double lr, beta1, beta2, eps, weight_decay, momentum, min_lr, grad_clip;
} tlm_abi_train;

typedef struct tlm_abi_layer {
    int64_t width;            /* MLP width d_ff(l) */
    double exact_width;       /* the schedule's value before rounding */
    uint32_t kernel;          /* index into the kernel table */
    uint32_t reserved;
} tlm_abi_layer;

typedef struct tlm_abi_param {
    uint32_t name;            /* Llama-style, e.g. model.layers.3.mlp.gate_proj.weight */
    uint32_t role;            /* tlm_abi_param_role */
    int32_t layer;            /* -1 for embedding, final norm, head */
    uint32_t ndim;
    int64_t shape[2];
    int64_t offset, count;    /* in floats, into the parameter block */
    uint32_t decay;           /* weight decay applies */
    uint32_t init;            /* tlm_init */
    double init_std;
    uint32_t level;           /* hope_attention: the CMS level (0 elsewhere) */
    uint32_t period;          /* the optimizer updates it every `period` steps with the gradients
                                 summed over them (1: every step) */
} tlm_abi_param;

typedef struct tlm_abi_kernel {
    uint32_t mlp;             /* tlm_mlp */
    uint32_t symbol;          /* string: the fwd entry's symbol */
    int64_t d_model, width;
    uint32_t cpu_impl;        /* tlm_mlp_impl: what the CPU runs for this width (a GPU always
                                 runs the CUDA kernels) */
    uint32_t cpu_impl_why;    /* string: why tlmc chose it */
} tlm_abi_kernel;

typedef struct tlm_abi_buffer {
    uint32_t name;            /* e.g. qkv.3 */
    uint32_t role;            /* tlm_abi_buffer_role */
    int32_t layer;
    uint32_t reserved;
    int64_t per_token;        /* floats per B·T */
    int64_t per_token_t;      /* floats per B·T·T */
    int64_t per_seq;          /* floats per B */
} tlm_abi_buffer;

/* One op of a training step, in order; the forward ones alone are
 * inference. Operands are indices into the buffer and parameter tables (-1:
 * none), by slot (in[], out[], param[]) or by name (op->mlp.in_x): the op
 * table in tlm_ops.h says which. The runtime executes this list, so the
 * memory plan and the execution always agree. */
typedef struct tlm_abi_op {
    uint32_t kind;            /* tlm_op_kind */
    uint32_t flags;           /* TLM_OP_FLAG_* */
    int32_t layer, kernel;    /* kernel: index into the kernel table (MLP ops), else -1 */
    TLM_OP_OPERAND_UNION;
} tlm_abi_op;

/* The descriptor stores exactly these plans, at these indices. */
enum tlm_abi_plan_kind { TLM_PLAN_TRAIN, TLM_PLAN_INFER, TLM_PLAN_COUNT };

/* A memory plan: one arena, an offset per buffer (-1: not used by this
 * plan), for one batch and sequence length. Plans for other sizes are made by
 * the runtime with the same algorithm (tlm_plan_arena). */
typedef struct tlm_abi_plan {
    uint32_t kind;            /* tlm_abi_plan_kind */
    uint32_t nops;            /* the plan runs ops [0, nops) */
    int64_t batch, seq;
    int64_t arena_bytes;
    uint64_t offsets_off;     /* int64_t[nbuffers], bytes */
} tlm_abi_plan;

#endif
