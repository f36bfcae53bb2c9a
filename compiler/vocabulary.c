#include "vocabulary.h"

#include <string.h>

#include "tlm_train_settings.h"

const char *const keywords[] = {"in", "model", "param", "schedule", "study", "train", "use", NULL};
static const char *const bools[] = {"false", "true", NULL};
/* Values and value functions come from the enum tables (abi/tlm_enums.h):
 * a gate kind is a value, an optimizer or LR schedule a function. */
#define ENUM_NAME_(E, name, title, help) #name,
const char *const symbol_values[] = {TLM_GATES(ENUM_NAME_) "false", "none", "true", NULL};
const char *const value_functions[] = {TLM_OPTIMIZERS(ENUM_NAME_) TLM_LR_SCHEDULES(ENUM_NAME_) "uniform", NULL};
#undef ENUM_NAME_
const char *const builtin_names[] = {"abs", "ceil", "clamp", "cos",     "exp", "floor", "log",  "max", "mean",
                                     "min", "pow",  "round", "sigmoid", "sin", "sqrt",  "tanh", NULL};

#define BIG 1e15
const setting_spec model_settings[] = {
    {"vocab", ST_INT, 2, 1 << 24, 0, NULL, ANY_MIXER, true,
     "vocabulary size (256 for byte-level text); with `tokenizer`, its size when left out"},
    {"tokenizer", ST_PATH, 0, 0, 0, NULL, ANY_MIXER, false,
     "a tokenizer (tokenizer.json, tiktoken ranks or GPT-2's folder), relative to the file; vocab must match it"},
    {"context", ST_INT, 1, 1 << 20, 0, NULL, ANY_MIXER, true, "longest sequence, in tokens"},
    {"d_model", ST_INT, 1, 1 << 16, 0, NULL, ANY_MIXER, true, "width of the residual stream"},
    {"layers", ST_INT, 1, 4096, 0, NULL, ANY_MIXER, true, "number of blocks L"},
    {"heads", ST_INT, 1, 4096, 0, NULL, ANY_MIXER, true, "attention (or memory) heads per block"},
    {"head_dim", ST_INT, 1, 1 << 16, 0, NULL, ANY_MIXER, false, "size of a head (default d_model / heads)"},
    {"mixer", ST_CHOICE, 0, 0, 0, tlm_mixer_enum_names_, ANY_MIXER, false, "token mixer (default attention)"},
    {"mlp", ST_CHOICE, 0, 0, 0, tlm_mlp_enum_names_, ANY_MIXER, false, "MLP kind (default swiglu)"},
    {"d_ff", ST_WIDTH, 0, 0, 0, NULL, ANY_MIXER, true, "MLP width, an expression in the layer index l"},
    {"quantum", ST_INT, 1, 1 << 16, 0, NULL, ANY_MIXER, false, "every width is a multiple of this (default 1)"},
    {"budget", ST_BUDGET, 0, 0, 0, NULL, ANY_MIXER, false,
     "uniform(W): same MLP params and FLOPs as width W in every layer; none (default)"},
    {"tie_embeddings", ST_BOOL, 0, 0, 0, bools, ANY_MIXER, false,
     "share the embedding with the LM head (default false)"},
    {"norm_eps", ST_REAL, 0, 1, 1, NULL, ANY_MIXER, false, "RMSNorm epsilon (default 1e-5)"},
    {"rope_base", ST_REAL, 1, BIG, 1, NULL, ANY_MIXER, false, "rotary embedding base (default 10000)"},
    {"monotone", ST_BOOL, 0, 0, 0, bools, ANY_MIXER, false,
     "false: widths may rise and fall with depth without a warning"},
    {"gate", ST_CHOICE, 0, 0, 0, tlm_gate_enum_names_, TLM_MIXER_GATED_ATTENTION, false,
     "the output gate: one per channel (elementwise, the default) or per head (headwise)"},
    {"chunk", ST_INT, 1, 1 << 16, 0, NULL, TLM_MIXER_TITANS, false,
     "memory update chunk size C (default 16; 1 is the exact recurrence)"},
    {"inner_lr", ST_REAL, 0, 1e6, 1, NULL, TLM_MIXER_TITANS, false,
     "bound on the memory's inner learning rate (default 0.1)"},
    {"cms", ST_INT_LIST, 1, 1 << 20, 0, NULL, TLM_MIXER_HOPE_ATTENTION, false,
     "update period of each memory level, e.g. [1, 4] (default [1])"},
    {NULL, 0, 0, 0, 0, NULL, ANY_MIXER, false, NULL},
};

/* The training settings that are names of their own in a train { } block,
 * as the table abi/tlm_train_settings.h has them (its ARGUMENT rows are
 * arguments of the optimizer's and the schedule's calls, not names here).
 * The help quotes the range and default from the same line. */
#define TYPE_INT ST_INT
#define TYPE_SEED ST_INT
#define TYPE_REAL ST_REAL
#define TYPE_REAL_GT ST_REAL
#define TYPE_OPTIMIZER ST_OPTIMIZER
#define TYPE_LR_SCHEDULE ST_LR_SCHEDULE
#define ABOUT_INT(lo, hi) "; " TLM_TS_RANGE_INT(lo, hi) ", default "
#define ABOUT_SEED(lo, hi) "; " TLM_TS_RANGE_SEED(lo, hi) ", default "
#define ABOUT_REAL(lo, hi) "; " TLM_TS_RANGE_REAL(lo, hi) ", default "
#define ABOUT_REAL_GT(lo, hi) "; " TLM_TS_RANGE_REAL_GT(lo, hi) ", default "
#define ABOUT_OPTIMIZER(lo, hi) "; default "
#define ABOUT_LR_SCHEDULE(lo, hi) "; default "
#define TRAIN_SETTING_(field, flag, kind, lo, hi, def, def_text, trajectory, help) \
    {#field, TYPE_##kind, lo, hi, TLM_TS_OPEN_##kind, NULL, ANY_MIXER, false, help ABOUT_##kind(lo, hi) def_text},
#define TRAIN_ARGUMENT_(...)

const setting_spec train_settings[] = {
    TLM_TRAIN_SETTINGS(TRAIN_SETTING_, TRAIN_ARGUMENT_){NULL, 0, 0, 0, 0, NULL, ANY_MIXER, false, NULL},
};

#define STUDY_(name, help) {name, ST_STUDY, 0, 0, 0, NULL, ANY_MIXER, false, help}
const setting_spec study_settings[] = {
    STUDY_("base", "the model a grid varies: base = tiny;"),
    STUDY_("variants", "models of the file trained as they are: variants = [early, uniform, late];"),
    STUDY_("baseline", "the variant the others are compared with: baseline = uniform;"),
    STUDY_("seeds", "a count K (seeds 1..K) or a list of seeds; default 3"),
    STUDY_("data", "training text, shards or folder, relative to the file; default tlm-run's (Austen)"),
    STUDY_("val", "validation text, relative to the file; default tlm-run's (Persuasion)"),
    STUDY_("eval", "extra texts to evaluate on (out of distribution): eval = [\"kjv.txt\"];"),
    STUDY_("choices", "multiple-choice sets (JSON lines) for tlm-run eval --choices"),
    STUDY_("cloze", "cloze sets (JSON lines) for tlm-run eval --cloze"),
    {NULL, 0, 0, 0, 0, NULL, ANY_MIXER, false, NULL},
};
#undef STUDY_

const setting_spec *find_setting(const setting_spec *table, const char *name) {
    for (const setting_spec *s = table; s->name; s++)
        if (strcmp(s->name, name) == 0) return s;
    return NULL;
}

const char *const *setting_names(const setting_spec *table) {
    static const char *model_list[64], *train_list[64], *study_list[64];
    const char **list = table == model_settings ? model_list : table == train_settings ? train_list : study_list;
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
