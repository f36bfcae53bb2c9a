/* Studies: a `study` declaration expanded into its variants. A variant is a
 * model of the file named in `variants = [...]`, or the `base` model at one
 * point of the grid (`ratio in [1.25, 1.5]` sets `param ratio`); each is
 * checked with the study's `train { }` block applied after the model's own,
 * and an error found while checking it names the variant. The study also
 * carries what the runner (tlm-run study) needs: the baseline variant, the
 * seeds, and the data and evaluation files as absolute paths.
 * docs/language.md ("Studies") has the syntax and the errors. */
#ifndef TLM_STUDY_H
#define TLM_STUDY_H

#include <stdbool.h>
#include <stdint.h>

#include "checked_model.h"
#include "program.h"
#include "study_limits.h"

/* The variants and seeds: tlm-run study's limits (study_limits.h).
 * TLM_MAX_VARIANT_NAME: tlm-run study refuses a longer variant name (its
 * folder name; runtime/study/plan.c), so tlmc refuses it first. */
enum {
    TLM_MAX_STUDY_AXES = 16,
    TLM_MAX_STUDY_VARIANTS = TLM_STUDY_MAX_VARIANTS,
    TLM_MAX_STUDY_SEEDS = TLM_STUDY_MAX_SEEDS,
    TLM_MAX_VARIANT_NAME = 100
};

typedef struct study_variant {
    const char *name;            /* "uniform" or "shape=cosine,ratio=1.5": a folder name */
    const item *model;
    const expr **values;         /* grid variants: the value of each axis, else NULL */
    const char **value_texts;    /* the same as written in the name: "cosine", "1.5" */
    checked_model checked;       /* after study_check_variant */
} study_variant;

typedef struct study_list {      /* `eval = ["a.txt", "b.txt"];` as absolute paths */
    const char **paths;
    int n;
} study_list;

typedef struct study {
    const item *decl;
    const char *name;
    const item *base;            /* the model the grid varies, or NULL */
    const setting *axes[TLM_MAX_STUDY_AXES];
    int naxes;
    study_variant *variants;     /* grid points first (the first axis varies slowest), then named models */
    int nvariants;
    int baseline;                /* index into variants */
    int64_t *seeds;
    int nseeds;
    const char *data, *val;      /* absolute; NULL: tlm-run's defaults */
    study_list eval, choices, cloze;
} study;

/* Reads the declaration and lists its variants (not yet checked). Reports
 * errors and returns false. Everything lives in the session arena. */
bool study_expand(program *p, const item *decl, study *out);
/* Checks one variant's model at its grid point with the study's train
 * block; errors are prefixed "study NAME: variant VARIANT: ". */
bool study_check_variant(program *p, const study *st, study_variant *v);
/* The index of the variant called name, or -1. */
int study_find_variant(const study *st, const char *name);

#endif
