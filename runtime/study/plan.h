/* A study's plan: what `tlmc FILE.tlm --plan` prints (docs/studies.md), read
 * into memory. One study of the file: its variants (each a model with its
 * params, FLOPs and widths, all checked by tlmc), the baseline, the seeds,
 * the training settings and the data to train, validate and evaluate on.
 *
 * A variant may carry "compile": [ARGS...]: then it is compiled with
 * `tlmc FILE ARGS... -o V.so` instead of `tlmc FILE --study NAME --variant
 * V -o V.so` (the way tests drive the runner with a hand-written plan, and
 * a way to put any compiled model into a study). */
#ifndef TLM_STUDY_PLAN_H
#define TLM_STUDY_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "study_limits.h"
#include "tlm_rt/error.h"

enum { STUDY_MAX_SEEDS = TLM_STUDY_MAX_SEEDS, STUDY_MAX_VARIANTS = TLM_STUDY_MAX_VARIANTS, STUDY_MAX_TEXTS = 15 };

typedef struct study_define {
    char *name, *value;
} study_define;

typedef struct study_variant {
    char *name;  /* a folder name: letters, digits, '_', '-', '.' (not first), '=', ',' */
    char *model; /* the model it compiles */
    study_define *defines;
    int ndefines;
    int64_t params, mlp_params, flops_per_token;
    int64_t *widths; /* d_ff per layer */
    int nwidths;
    char **compile; /* NULL, or tlmc's arguments for this variant */
    int ncompile;
} study_variant;

typedef struct study_plan {
    char *file;     /* the .tlm file, absolute */
    char **sources; /* every file tlmc read for it (the modules it uses too), absolute */
    int nsources;
    char *name;     /* the study */
    char *baseline; /* a variant's name */
    int64_t seeds[STUDY_MAX_SEEDS];
    int nseeds;
    int64_t steps, batch, context; /* 0: the model's default */
    char *data, *val;              /* NULL: the bundled corpora / (val) none given */
    char **eval, **choices, **cloze;
    int neval, nchoices, ncloze;
    int64_t eval_tokens; /* tokens of each text to evaluate (eval --max-tokens); 0: the default */
    /* where the runs train and evaluate (tlm-run study --device,
     * --precision): "cuda" (the kind, not which GPU: any GPU's runs belong
     * to the study) and "bf16" or "fp32"; NULL both: the CPU */
    char *device, *precision;
    study_variant *variants;
    int nvariants;
} study_plan;

/* Why a plan was refused: its text is no JSON at all (from tlmc: a $TLMC
 * that is another program), the choice of study (a usage error, as tlmc's
 * --study takes it), or anything else in it. */
typedef enum { STUDY_PLAN_INVALID, STUDY_PLAN_NOT_JSON, STUDY_PLAN_BAD_CHOICE } study_plan_fault;

/* Reads the plan JSON and takes the study named want (NULL: the file's
 * only study; several is an error naming them). false with a one-line
 * reason (a missing or mistyped field names it), and *fault (when not
 * NULL) set. */
bool study_plan_parse(const char *json, size_t len, const char *want, study_plan *plan, study_plan_fault *fault,
                      tlm_err *err);
void study_plan_free(study_plan *plan);

/* The variant named name, or NULL. */
const study_variant *study_plan_variant(const study_plan *plan, const char *name);

/* How this plan (now) stands to the plan a folder was made for (was).
 * true when now is was grown: was with variants or seeds added and nothing
 * else changed (was's variants the same and in the same order among now's,
 * its seeds among now's in the same order, every other field the same), so
 * the folder's runs are now's too; what then says what was added ("variant
 * `tapered` and seeds 3, 4 added"). false otherwise, what then naming the
 * first difference that is not an addition, as a phrase for "OUT holds
 * another run of this study: WHAT" (the study, steps, seeds, eval tokens,
 * device and precision, batch, context, data, validation text, eval texts
 * and sets, file, baseline, then the variants); a phrase that names no
 * field when none differs. */
bool study_plan_grown(const study_plan *was, const study_plan *now, char *what, size_t n);

/* Where the plan's runs train, as a phrase: "on the CPU", or "on cuda in
 * bf16" (buf holds it, n bytes). */
const char *study_plan_runs_on(const study_plan *p, char *buf, size_t n);

/* The plan as canonical JSON (fields in a fixed order), malloc'd: what
 * OUT/plan.json holds and the study's identity hashes. NULL when out of
 * memory. */
char *study_plan_json(const study_plan *plan);

#endif
