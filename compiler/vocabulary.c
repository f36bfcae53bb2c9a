#include "vocabulary.h"

#include <string.h>

const char *const keywords[] = {"model", "param", "schedule", "train", "use", NULL};
static const char *const bools[] = {"false", "true", NULL};
const char *const symbol_values[] = {"elementwise", "false", "headwise", "none", "true", NULL};
const char *const value_functions[] = {"adamw", "constant", "cosine", "linear", "sgd", "uniform", NULL};
const char *const builtin_names[] = {"abs", "ceil", "clamp", "cos", "exp", "floor", "log", "max",
                                     "mean", "min", "pow", "round", "sigmoid", "sin", "sqrt",
                                     "tanh", NULL};

#define BIG 1e15
const setting_spec model_settings[] = {
    {"vocab", ST_INT, 2, 1 << 24, 0, NULL, NULL, true, "vocabulary size (256 for byte-level text)"},
    {"context", ST_INT, 1, 1 << 20, 0, NULL, NULL, true, "longest sequence, in tokens"},
    {"d_model", ST_INT, 1, 1 << 16, 0, NULL, NULL, true, "width of the residual stream"},
    {"layers", ST_INT, 1, 4096, 0, NULL, NULL, true, "number of blocks L"},
    {"heads", ST_INT, 1, 4096, 0, NULL, NULL, true, "attention (or memory) heads per block"},
    {"head_dim", ST_INT, 1, 1 << 16, 0, NULL, NULL, false, "size of a head (default d_model / heads)"},
    {"mixer", ST_CHOICE, 0, 0, 0, tlm_mixer_enum_names_, NULL, false, "token mixer (default attention)"},
    {"mlp", ST_CHOICE, 0, 0, 0, tlm_mlp_enum_names_, NULL, false, "MLP kind (default swiglu)"},
    {"d_ff", ST_WIDTH, 0, 0, 0, NULL, NULL, true, "MLP width, an expression in the layer index l"},
    {"quantum", ST_INT, 1, 1 << 16, 0, NULL, NULL, false, "every width is a multiple of this (default 1)"},
    {"budget", ST_BUDGET, 0, 0, 0, NULL, NULL, false,
     "uniform(W): same MLP params and FLOPs as width W in every layer; none (default)"},
    {"tie_embeddings", ST_BOOL, 0, 0, 0, bools, NULL, false,
     "share the embedding with the LM head (default false)"},
    {"norm_eps", ST_REAL, 0, 1, 1, NULL, NULL, false, "RMSNorm epsilon (default 1e-5)"},
    {"rope_base", ST_REAL, 1, BIG, 1, NULL, NULL, false, "rotary embedding base (default 10000)"},
    {"monotone", ST_BOOL, 0, 0, 0, bools, NULL, false,
     "false: widths may rise and fall with depth without a warning"},
    {"gate", ST_CHOICE, 0, 0, 0, tlm_gate_enum_names_, "gated_attention", false,
     "elementwise (default) or headwise output gate"},
    {"chunk", ST_INT, 1, 1 << 16, 0, NULL, "titans", false,
     "memory update chunk size C (default 16; 1 is the exact recurrence)"},
    {"inner_lr", ST_REAL, 0, 1e6, 1, NULL, "titans", false,
     "bound on the memory's inner learning rate (default 0.1)"},
    {"cms", ST_INT_LIST, 1, 1 << 20, 0, NULL, "hope_attention", false,
     "update period of each memory level, e.g. [1, 4] (default [1])"},
    {NULL, 0, 0, 0, 0, NULL, NULL, false, NULL},
};

const setting_spec train_settings[] = {
    {"batch", ST_INT, 1, 1 << 20, 0, NULL, NULL, false, "sequences per optimizer step (default 8)"},
    {"context", ST_INT, 1, 1 << 20, 0, NULL, NULL, false,
     "training sequence length (default: the model's context)"},
    {"steps", ST_INT, 0, BIG, 0, NULL, NULL, false, "optimizer steps (default 1000)"},
    {"optimizer", ST_OPTIMIZER, 0, 0, 0, NULL, NULL, false,
     "adamw(lr, betas, eps, weight_decay) or sgd(lr, momentum, weight_decay)"},
    {"lr_schedule", ST_LR_SCHEDULE, 0, 0, 0, NULL, NULL, false,
     "cosine(warmup, min_lr), linear(warmup, min_lr) or constant(warmup)"},
    {"seed", ST_INT, 0, 9007199254740991.0, 0, NULL, NULL, false, "random seed (default 1337)"},
    {"grad_clip", ST_REAL, 0, BIG, 0, NULL, NULL, false, "clip the global gradient norm; 0: off"},
    {"accumulate", ST_INT, 1, 1 << 16, 0, NULL, NULL, false,
     "micro-batches per step (gradient accumulation)"},
    {"eval_every", ST_INT, 0, BIG, 0, NULL, NULL, false, "validate every N steps; 0: only at the end"},
    {"eval_batches", ST_INT, 1, 1 << 20, 0, NULL, NULL, false, "batches per validation"},
    {"ckpt_every", ST_INT, 0, BIG, 0, NULL, NULL, false, "checkpoint every N steps; 0: only at the end"},
    {"log_every", ST_INT, 1, BIG, 0, NULL, NULL, false, "print a line every N steps"},
    {NULL, 0, 0, 0, 0, NULL, NULL, false, NULL},
};

const setting_spec *find_setting(const setting_spec *table, const char *name) {
    for (const setting_spec *s = table; s->name; s++)
        if (strcmp(s->name, name) == 0) return s;
    return NULL;
}

const char *const *setting_names(const setting_spec *table) {
    static const char *model_list[64], *train_list[64];
    const char **list = table == model_settings ? model_list : train_list;
    int n = 0;
    for (const setting_spec *s = table; s->name && n < 63; s++) list[n++] = s->name;
    list[n] = NULL;
    return list;
}

int name_index(const char *const *names, const char *name) {
    for (int i = 0; names[i]; i++)
        if (strcmp(names[i], name) == 0) return i;
    return -1;
}
