/* The enumerated concepts of tlm, one table each (QBE's ops.h style): the
 * compiler, the model.so descriptor, codegen and the runtime all use these
 * enums, and every name, help text and printer is generated from the same
 * line. A value is stored in model.so, so the order is part of the ABI:
 * append, never reorder (ORDER MIXER, ORDER MLP, ...).
 *
 * Adding a mixer: one line in TLM_MIXERS plus the code that really differs
 * (its parameters and ops in compiler/ir.c, its cost in compiler/cost.c, its
 * math in runtime/ops/); docs/architecture.md lists the files. */
#ifndef TLM_ENUMS_H
#define TLM_ENUMS_H

#include <stddef.h>
#include <string.h>

/* ORDER MIXER: X(ENUM, name, title, help) */
#define TLM_MIXERS(X)                                                                              \
    X(ATTENTION, attention, "Transformer", "causal softmax attention")                             \
    X(GATED_ATTENTION, gated_attention, "Gated Attention", "attention with a sigmoid output gate") \
    X(TITANS, titans, "Titans", "a matrix memory updated by gradient descent at test time")        \
    X(HOPE_ATTENTION, hope_attention, "Hope-attention", "attention with a continuum of MLP memories")

/* ORDER MLP: X(ENUM, name, title, help) */
#define TLM_MLPS(X)                                                       \
    X(SWIGLU, swiglu, "SwiGLU", "silu(x W_gate) * (x W_up), then W_down") \
    X(GELU, gelu, "GELU", "gelu(x W_up), then W_down (tanh approximation)")

/* ORDER GATE (gated attention's output gate): X(ENUM, name, title, help) */
#define TLM_GATES(X)                                                   \
    X(ELEMENTWISE, elementwise, "elementwise", "one gate per channel") \
    X(HEADWISE, headwise, "head-wise", "one gate per head")

/* ORDER OPTIMIZER: X(ENUM, name, title, help) */
#define TLM_OPTIMIZERS(X)                                           \
    X(ADAMW, adamw, "AdamW", "adamw(lr, betas, eps, weight_decay)") \
    X(SGD, sgd, "SGD", "sgd(lr, momentum, weight_decay)")

/* ORDER LR: X(ENUM, name, title, help) */
#define TLM_LR_SCHEDULES(X)                                                           \
    X(COSINE, cosine, "cosine", "cosine(warmup, min_lr): warm-up, then cosine decay") \
    X(LINEAR, linear, "linear", "linear(warmup, min_lr): warm-up, then linear decay") \
    X(CONSTANT, constant, "constant", "constant(warmup): warm-up, then constant")

/* ORDER INIT: how a parameter starts. X(ENUM, name, title, help) */
#define TLM_INITS(X)                                               \
    X(NORMAL, normal, "normal", "normal with the parameter's std") \
    X(ONES, ones, "ones", "all ones (norm weights)")

/* ORDER MLP_IMPL: how the CPU runs a width's MLP, chosen by tlmc
 * (codegen/cpu_mlp_choice.c). X(ENUM, name, title, help) */
#define TLM_MLP_IMPLS(X)                                                                       \
    X(GENERATED, generated, "generated kernels", "the fused kernels tlmc generates per width") \
    X(BLAS, blas, "OpenBLAS", "OpenBLAS GEMMs, the activation in tiles between them (runtime/ops/mlp.c)")

#define TLM_ENUM_CONST_(prefix, E, name, title, help) prefix##E,
#define TLM_MIXER_CONST_(E, n, t, h) TLM_ENUM_CONST_(TLM_MIXER_, E, n, t, h)
#define TLM_MLP_CONST_(E, n, t, h) TLM_ENUM_CONST_(TLM_MLP_, E, n, t, h)
#define TLM_GATE_CONST_(E, n, t, h) TLM_ENUM_CONST_(TLM_GATE_, E, n, t, h)
#define TLM_OPT_CONST_(E, n, t, h) TLM_ENUM_CONST_(TLM_OPT_, E, n, t, h)
#define TLM_LR_CONST_(E, n, t, h) TLM_ENUM_CONST_(TLM_LR_, E, n, t, h)
#define TLM_INIT_CONST_(E, n, t, h) TLM_ENUM_CONST_(TLM_INIT_, E, n, t, h)
#define TLM_MLP_IMPL_CONST_(E, n, t, h) TLM_ENUM_CONST_(TLM_MLP_IMPL_, E, n, t, h)

/* The counts stand outside the enums, so that a switch over one is
 * checked for every value (-Wswitch) without a COUNT case. */
#define TLM_ENUM_ONE_(E, name, title, help) +1
typedef enum tlm_mixer { TLM_MIXERS(TLM_MIXER_CONST_) } tlm_mixer;
typedef enum tlm_mlp { TLM_MLPS(TLM_MLP_CONST_) } tlm_mlp;
typedef enum tlm_gate { TLM_GATES(TLM_GATE_CONST_) } tlm_gate;
typedef enum tlm_optimizer { TLM_OPTIMIZERS(TLM_OPT_CONST_) } tlm_optimizer;
typedef enum tlm_lr_kind { TLM_LR_SCHEDULES(TLM_LR_CONST_) } tlm_lr_kind;
typedef enum tlm_init { TLM_INITS(TLM_INIT_CONST_) } tlm_init;
typedef enum tlm_mlp_impl { TLM_MLP_IMPLS(TLM_MLP_IMPL_CONST_) } tlm_mlp_impl;
enum {
    TLM_MIXER_COUNT = 0 TLM_MIXERS(TLM_ENUM_ONE_),
    TLM_MLP_COUNT = 0 TLM_MLPS(TLM_ENUM_ONE_),
    TLM_GATE_COUNT = 0 TLM_GATES(TLM_ENUM_ONE_),
    TLM_OPT_COUNT = 0 TLM_OPTIMIZERS(TLM_ENUM_ONE_),
    TLM_LR_COUNT = 0 TLM_LR_SCHEDULES(TLM_ENUM_ONE_),
    TLM_INIT_COUNT = 0 TLM_INITS(TLM_ENUM_ONE_),
    TLM_MLP_IMPL_COUNT = 0 TLM_MLP_IMPLS(TLM_ENUM_ONE_),
};

/* An enumeration's names as a NULL-terminated list, with its title and
 * help: what parsers, printers, --help and the editor grammars read. */
typedef struct tlm_enum_names {
    const char *const *names;     /* NULL-terminated, indexed by value */
    const char *const *titles;    /* for people: "Gated Attention" */
    const char *const *helps;
    int count;
} tlm_enum_names;

#define TLM_ENUM_NAME_(E, name, title, help) #name,
#define TLM_ENUM_TITLE_(E, name, title, help) title,
#define TLM_ENUM_HELP_(E, name, title, help) help,
#define TLM_ENUM_NAMES_DEFINE_(table, list, count)                             \
    static const char *const table##_names_[] = {list(TLM_ENUM_NAME_) NULL};   \
    static const char *const table##_titles_[] = {list(TLM_ENUM_TITLE_) NULL}; \
    static const char *const table##_helps_[] = {list(TLM_ENUM_HELP_) NULL};   \
    static const tlm_enum_names table = {table##_names_, table##_titles_, table##_helps_, count};

TLM_ENUM_NAMES_DEFINE_(tlm_mixer_enum, TLM_MIXERS, TLM_MIXER_COUNT)
TLM_ENUM_NAMES_DEFINE_(tlm_mlp_enum, TLM_MLPS, TLM_MLP_COUNT)
TLM_ENUM_NAMES_DEFINE_(tlm_gate_enum, TLM_GATES, TLM_GATE_COUNT)
TLM_ENUM_NAMES_DEFINE_(tlm_optimizer_enum, TLM_OPTIMIZERS, TLM_OPT_COUNT)
TLM_ENUM_NAMES_DEFINE_(tlm_lr_enum, TLM_LR_SCHEDULES, TLM_LR_COUNT)
TLM_ENUM_NAMES_DEFINE_(tlm_init_enum, TLM_INITS, TLM_INIT_COUNT)
TLM_ENUM_NAMES_DEFINE_(tlm_mlp_impl_enum, TLM_MLP_IMPLS, TLM_MLP_IMPL_COUNT)

/* The name of value v, or "?" when v is out of range (a damaged file). */
static inline const char *tlm_enum_name(const tlm_enum_names *e, unsigned v) {
    return v < (unsigned)e->count ? e->names[v] : "?";
}
static inline const char *tlm_enum_title(const tlm_enum_names *e, unsigned v) {
    return v < (unsigned)e->count ? e->titles[v] : "?";
}
static inline const char *tlm_enum_help(const tlm_enum_names *e, unsigned v) {
    return v < (unsigned)e->count ? e->helps[v] : "?";
}
/* The value named s, or -1. */
static inline int tlm_enum_find(const tlm_enum_names *e, const char *s) {
    for (int i = 0; i < e->count; i++)
        if (strcmp(e->names[i], s) == 0) return i;
    return -1;
}

#endif
