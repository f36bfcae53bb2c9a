/* The training settings, one line each (QBE's ops.h style): the one home of
 * their names, flags, kinds, ranges, defaults, help, and whether a resumed
 * run must keep them. Everything about a setting is generated from its line:
 *
 *   tlmc         checking a train { } block (compiler/check_model.c), the names
 *                and help of --help-settings and --print-keywords
 *                (compiler/vocabulary.c), the "train" object of --report=json
 *                (compiler/report.c)
 *   tlm-run      train's flags, their ranges and --help, --dry-run's listing,
 *                the --resume comparison and the checkpoint's settings JSON
 *                (runtime/cli/train_options.c); info's "train defaults"
 *                (tlm_train_print, below)
 *
 * tlmc and tlm-run check the same ranges, so a model tlmc accepts is never
 * refused by tlm-run, and a flag takes exactly the values a train { } block
 * takes.
 *
 * Adding a setting touches, besides its line here: the field in tlm_abi_train
 * (abi/tlm_abi.h, which bumps TLM_ABI_VERSION: the record is in model.so);
 * the code that uses it (runtime/train/trainer.c or runtime/cli/train.c); the
 * tables in docs/language.md and docs/runtime.md; its bounds in
 * tests/settings/settings.sh; and, for a SETTING (a name of its own in
 * train { }), the editor grammars, which tests/editors checks against
 * `tlmc --print-keywords`.
 *
 * The rows, in the order every listing uses (ORDER TRAIN: the order of
 * --report=json's "train" object; the checkpoint's JSON is read by key):
 *
 *   SETTING(field, flag, kind, lo, hi, default, default_text, trajectory, help)
 *       `field = value;` in a train { } block.
 *   ARGUMENT(field, flag, kind, lo, hi, default, default_text, trajectory, help,
 *            call, arg, for_choices)
 *       an argument of the call that the SETTING `call` takes as its value
 *       (optimizer = adamw(lr = 3e-3, ...)), named `arg` there; two rows with
 *       the same `arg` are one tuple (betas = (beta1, beta2)). It applies only
 *       to the choices in for_choices (a mask of TLM_TS_OPT / TLM_TS_LR bits).
 *
 *   field        the tlm_abi_train member; also the key in the checkpoint's
 *                settings JSON, --report=json and --dry-run
 *   flag         tlm-run train's flag
 *   kind         INT (int64_t), SEED (uint64_t), REAL ([lo, hi]), REAL_GT
 *                ((lo, hi]: lo itself is excluded), OPTIMIZER or LR_SCHEDULE
 *                (a choice from tlm_enums.h, stored as its enum value)
 *   lo, hi       the range, written as literals so that help texts can quote
 *                them (stringified); every bound is exact as a double
 *   default      what tlmc stores when the model does not say; two are derived:
 *                context (0 here: the model's context, resolved by the
 *                checker) and min_lr (-1 here: a tenth of lr, resolved by
 *                tlm-run after its flags, so model.so holds the -1)
 *   default_text the default as people read it (help texts)
 *   trajectory   changing it changes the numbers a run produces, so --resume
 *                refuses a value other than the checkpoint's
 *
 * Why these ranges:
 *   - batch, context, accumulate, eval_batches <= 2^20: a step's tokens
 *     (batch × context) stay far below what size_t indexing and the int the
 *     data loader takes per dimension allow; accumulate must divide batch, so
 *     it cannot usefully be larger.
 *   - steps, warmup and the periods eval_every, ckpt_every, log_every <= 2^40:
 *     tokens_seen = steps × batch × context must fit an int64_t, which 2^40
 *     steps of up to 2^23 tokens (more than one machine's memory holds) do;
 *     and a step count stays exact in a double (tlmc's numbers) and in JSON.
 *     A period of 0 means "never in between":
 *     eval_every 0 validates at the start and end only, ckpt_every 0
 *     checkpoints at the end only, log_every 0 logs steps 1 and the last only.
 *   - seed <= 2^53 - 1: tlmc's numbers are doubles, and JSON readers keep
 *     integers up to 2^53 exactly.
 *   - lr, min_lr, weight_decay, grad_clip <= 1e30: the trainer uses them as
 *     floats (FLT_MAX is about 3.4e38); the bound is far above any useful
 *     value so that a run can still be made to diverge on purpose
 *     (tests/run's nan case trains with --lr 1e30).
 *   - beta1, beta2, momentum <= 0.9999999: the optimizer keeps them as floats,
 *     and a value closer to 1 rounds to 1.0f, where AdamW's bias correction
 *     1 - beta^t divides by zero.
 *   - eps in (0, 1], lr > 0: zero would divide by zero or never move. */
#ifndef TLM_TRAIN_SETTINGS_H
#define TLM_TRAIN_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tlm_abi.h"
#include "tlm_enums.h"

/* Masks of the choices an ARGUMENT applies to. */
#define TLM_TS_OPT(E) (1u << TLM_OPT_##E)
#define TLM_TS_LR(E) (1u << TLM_LR_##E)

/* clang-format off */
#define TLM_TRAIN_SETTINGS(SETTING, ARGUMENT)                                                                        \
    SETTING(batch, "--batch", INT, 1, 1048576, 8, "8", true, "sequences per optimizer step")                         \
    SETTING(context, "--context", INT, 1, 1048576, 0, "the model's context", true,                                  \
            "tokens per training sequence, at most the model's context")                                            \
    SETTING(steps, "--steps", INT, 0, 1099511627776, 1000, "1000", false,                                           \
            "optimizer steps in all (a resumed run may raise it)")                                                  \
    SETTING(optimizer, "--optimizer", OPTIMIZER, 0, 0, TLM_OPT_ADAMW, "adamw", true,                                \
            "adamw(lr, betas, eps, weight_decay) or sgd(lr, momentum, weight_decay); arguments are named")          \
    ARGUMENT(lr, "--lr", REAL_GT, 0, 1e30, 1e-3, "1e-3", true, "peak learning rate",                                \
             optimizer, "lr", TLM_TS_OPT(ADAMW) | TLM_TS_OPT(SGD))                                                   \
    ARGUMENT(beta1, "--beta1", REAL, 0, 0.9999999, 0.9, "0.9", true,                                                \
             "AdamW's betas[0], the decay of the gradient's running mean", optimizer, "betas", TLM_TS_OPT(ADAMW))  \
    ARGUMENT(beta2, "--beta2", REAL, 0, 0.9999999, 0.95, "0.95", true,                                              \
             "AdamW's betas[1], the decay of the squared gradient's running mean", optimizer, "betas",               \
             TLM_TS_OPT(ADAMW))                                                                                      \
    ARGUMENT(eps, "--eps", REAL_GT, 0, 1, 1e-8, "1e-8", true, "AdamW's epsilon, added to the denominator",          \
             optimizer, "eps", TLM_TS_OPT(ADAMW))                                                                    \
    ARGUMENT(weight_decay, "--weight-decay", REAL, 0, 1e30, 0.1, "0.1", true,                                       \
             "decoupled weight decay (AdamW) or L2 penalty (SGD)", optimizer, "weight_decay",                       \
             TLM_TS_OPT(ADAMW) | TLM_TS_OPT(SGD))                                                                    \
    ARGUMENT(momentum, "--momentum", REAL, 0, 0.9999999, 0.9, "0.9", true, "SGD's momentum", optimizer,             \
             "momentum", TLM_TS_OPT(SGD))                                                                            \
    SETTING(lr_schedule, "--lr-schedule", LR_SCHEDULE, 0, 0, TLM_LR_COSINE, "cosine", true,                         \
            "cosine(warmup, min_lr), linear(warmup, min_lr) or constant(warmup); arguments are named")              \
    ARGUMENT(warmup, "--warmup", INT, 0, 1099511627776, 100, "100", true, "steps of linear warm-up",                \
             lr_schedule, "warmup", TLM_TS_LR(COSINE) | TLM_TS_LR(LINEAR) | TLM_TS_LR(CONSTANT))                     \
    ARGUMENT(min_lr, "--min-lr", REAL, 0, 1e30, -1, "lr / 10", true, "learning rate at the end of the decay",       \
             lr_schedule, "min_lr", TLM_TS_LR(COSINE) | TLM_TS_LR(LINEAR))                                           \
    SETTING(seed, "--seed", SEED, 0, 9007199254740991, 1337, "1337", true,                                          \
            "seeds the initial parameters and the order of the training windows")                                   \
    SETTING(grad_clip, "--grad-clip", REAL, 0, 1e30, 1, "1", true, "clip the global gradient norm to this; 0: off") \
    SETTING(accumulate, "--accumulate", INT, 1, 1048576, 1, "1", true,                                              \
            "micro-batches per step (gradient accumulation); must divide batch")                                    \
    SETTING(eval_every, "--eval-every", INT, 0, 1099511627776, 100, "100", false,                                   \
            "validate every N steps; 0: only at the start and the end")                                             \
    SETTING(eval_batches, "--eval-batches", INT, 1, 1048576, 20, "20", false, "batches per validation")            \
    SETTING(ckpt_every, "--ckpt-every", INT, 0, 1099511627776, 500, "500", false,                                   \
            "checkpoint every N steps; 0: only at the end (always at the end)")                                     \
    SETTING(log_every, "--log-every", INT, 0, 1099511627776, 10, "10", false,                                       \
            "log (and print, when not on a terminal) every N steps and steps 1 and the last; 0: only those two")
/* clang-format on */

/* A row's range as text, quoted from the table: "[1, 1048576]", "(0, 1e30]";
 * NULL for a choice. */
#define TLM_TS_RANGE_INT(lo, hi) "[" #lo ", " #hi "]"
#define TLM_TS_RANGE_SEED(lo, hi) "[" #lo ", " #hi "]"
#define TLM_TS_RANGE_REAL(lo, hi) "[" #lo ", " #hi "]"
#define TLM_TS_RANGE_REAL_GT(lo, hi) "(" #lo ", " #hi "]"
#define TLM_TS_RANGE_OPTIMIZER(lo, hi) NULL
#define TLM_TS_RANGE_LR_SCHEDULE(lo, hi) NULL

/* Whether a row's lower bound is excluded (REAL_GT: lr > 0). */
#define TLM_TS_OPEN_INT false
#define TLM_TS_OPEN_SEED false
#define TLM_TS_OPEN_REAL false
#define TLM_TS_OPEN_REAL_GT true
#define TLM_TS_OPEN_OPTIMIZER false
#define TLM_TS_OPEN_LR_SCHEDULE false

typedef enum tlm_train_kind {
    TLM_TS_INT,     /* int64_t */
    TLM_TS_SEED,    /* uint64_t */
    TLM_TS_REAL,    /* double */
    TLM_TS_CHOICE,  /* uint32_t: an enum value of `choices` */
} tlm_train_kind;

typedef struct tlm_train_setting {
    const char *key;               /* the field's name */
    const char *flag;              /* "--min-lr" */
    tlm_train_kind kind;
    size_t offset;                 /* of the field in tlm_abi_train */
    double lo, hi;                 /* INT, SEED, REAL */
    bool lo_open;                  /* REAL_GT: lo itself is excluded */
    const char *range_text;        /* "[1, 1048576]", "(0, 1e30]", or the choices "adamw|sgd" */
    const tlm_enum_names *choices; /* CHOICE */
    double default_value;
    const char *default_text;
    bool trajectory;
    const char *help;
    const char *call;              /* ARGUMENT: the SETTING whose call takes it; NULL for a SETTING */
    const char *arg;               /* ARGUMENT: its name in that call */
    unsigned for_choices;          /* ARGUMENT: the call's choices that take it */
} tlm_train_setting;

#define TLM_TS_ONE_(...) +1
enum { TLM_TRAIN_NSETTINGS = 0 TLM_TRAIN_SETTINGS(TLM_TS_ONE_, TLM_TS_ONE_) };

/* Every row, in ORDER TRAIN. */
extern const tlm_train_setting tlm_train_settings[TLM_TRAIN_NSETTINGS];

/* The row of field `key`, or NULL. */
const tlm_train_setting *tlm_train_find(const char *key);

/* An ARGUMENT's call: the row of its `call`; NULL for a SETTING. */
const tlm_train_setting *tlm_train_call_of(const tlm_train_setting *s);
/* Whether row s is in force under t: a SETTING always, an ARGUMENT when its
 * call's choice takes it (momentum only with sgd). */
bool tlm_train_applies(const tlm_train_setting *s, const tlm_abi_train *t);

/* The value of a row as a double (every INT, SEED and CHOICE value in range
 * is exact as a double), and back. */
double tlm_train_get(const tlm_abi_train *t, const tlm_train_setting *s);
void tlm_train_set(tlm_abi_train *t, const tlm_train_setting *s, double v);

/* Whether v is in the row's range (a CHOICE: one of its values). Whole
 * numbers are the caller's to check for INT and SEED. */
bool tlm_train_in_range(const tlm_train_setting *s, double v);
/* Whether v, above a real row's lower bound as a double (--eps 1e-50,
 * --grad-clip 1e-320), is at it as the float the trainer computes in, where
 * the bound is excluded or means something of its own: out of range (an
 * eps of 0 divides 0 by 0 at the first step; a grad_clip of 0 turns
 * clipping off, which 1e-320 does not ask for). */
bool tlm_train_zero_as_float(const tlm_train_setting *s, double v);
/* The same rule for any real setting named name with lower bound lo
 * (lo_open: excluded), a .tlm file's model settings too (norm_eps,
 * inner_lr, rope_base): tlmc's check and the trainer's are one. */
bool tlm_real_at_bound_as_float(const char *name, double lo, bool lo_open, double v);

/* Every field at its default, context at model_context; min_lr stays -1
 * until tlm_train_resolve_defaults makes it a tenth of lr. model.so keeps
 * the -1 of a model that does not set min_lr (tlmc resolves a copy for its
 * own checks and reports): tlm-run resolves it after its flags, so that
 * --lr moves the default min_lr with it (ABI version 6). Only -1 is
 * resolved: another negative value is damage, for the range checks. */
void tlm_train_defaults(tlm_abi_train *t, int64_t model_context);
void tlm_train_resolve_defaults(tlm_abi_train *t);

/* Whether the schedule would end above its peak: min_lr > lr under a
 * schedule that decays to min_lr. Both tlmc and tlm-run refuse it. */
bool tlm_train_decay_rises(const tlm_abi_train *t);

/* A value as text: integers in full, reals in the fewest digits that read
 * back as the same double, choices by name. Returns buf. */
const char *tlm_train_format(char *buf, size_t n, const tlm_train_setting *s, const tlm_abi_train *t);

/* The settings as a train { } block would set them (tlm-run info):
 *   title:
 *     batch = 8; context = 64; steps = 1000;
 *     optimizer = adamw(lr = 0.001, betas = (0.9, 0.95), eps = 1e-08, weight_decay = 0.1);
 *     ... */
void tlm_train_print(FILE *out, const char *title, const tlm_abi_train *t);

#endif
