/* A finished study in numbers: every run's scores gathered per variant,
 * mean and standard deviation over seeds, and the paired comparison with
 * the baseline (stats.h). What results.json, results.md and the plots
 * show; computed once from the plan and the runs' results. */
#ifndef TLM_STUDY_SUMMARY_H
#define TLM_STUDY_SUMMARY_H

#include "plan.h"
#include "run_result.h"
#include "stats.h"

/* One number a run yields (a score's value), compared across variants. */
typedef struct study_metric {
    char key[48];   /* results.json's name: val_loss, eval1_ppl, choices2_accuracy_norm, ... */
    char label[160]; /* results.md's: "val loss", "ppl kjv.txt", ... */
    size_t given_len; /* the label's length before a " (2)" that tells a second set of one name */
    const char *data; /* the file it was measured on (the plan's) */
    enum study_kind kind;
    int index, value; /* run->scores[kind][index].v[value] */
    bool lower_is_better;
} study_metric;

typedef struct study_variant_summary {
    const study_variant *variant;
    double *values;        /* [metric * nseeds + seed] */
    double *mean, *sd;     /* per metric */
    study_paired *diff;    /* per metric, against the baseline (the baseline's own: zero) */
    double tokens_per_s[STUDY_MAX_SEEDS], train_seconds[STUDY_MAX_SEEDS];
    double *rho_mean;      /* per layer, over seeds */
    int nrho;
    /* the validation curve over seeds: steps, mean, min, max */
    double *curve_step, *curve_mean, *curve_min, *curve_max;
    int ncurve;
} study_variant_summary;

typedef struct study_summary {
    const study_plan *plan;
    study_metric *metrics;
    int nmetrics;
    study_variant_summary *variants; /* the plan's order */
    int baseline;                    /* its index */
    double level;                    /* 0.95 */
    double chance[STUDY_MAX_TEXTS];  /* each multiple-choice set's chance level (eval's) */
} study_summary;

/* runs[v * plan->nseeds + s]: every run of the plan, in order. false with a
 * message when a run does not match the plan (a variant, a seed, a count
 * of scores). */
bool study_summary_build(study_summary *s, const study_plan *plan, const study_run *runs, tlm_err *err);
void study_summary_free(study_summary *s);

/* The metric's per-seed values for variant v. */
static inline const double *study_values(const study_summary *s, int v, int metric) {
    return s->variants[v].values + (size_t)metric * (size_t)s->plan->nseeds;
}

#endif
