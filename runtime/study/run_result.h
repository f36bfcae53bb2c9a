/* One finished run of a study (a variant trained with one seed): what its
 * training log, `tlm-run eval --json` and `tlm-run probe --json` said, kept
 * as OUT/runs/VARIANT/seedS/result.json.
 *
 * The scores are eval's JSON lines as they came (docs/studies.md):
 *   {"kind":"text","data":P,"tokens":N,"loss":X,"ppl":X,"bpb":X}
 *   {"kind":"choices","data":P,"items":N,"accuracy":X,"accuracy_norm":X,"chance":X}
 *   {"kind":"cloze","data":P,"items":N,"accuracy":X,"target_loglik":X}
 * one table (study_kinds) naming each kind's count and values, read and
 * written by the same code. Numbers are written with 17 significant digits,
 * so a result read back is the same bit for bit. */
#ifndef TLM_STUDY_RUN_RESULT_H
#define TLM_STUDY_RUN_RESULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tlm_rt/error.h"

enum study_kind { STUDY_TEXT, STUDY_CHOICES, STUDY_CLOZE, STUDY_NKINDS };
enum { STUDY_MAX_VALUES = 3 };

typedef struct study_kind_info {
    const char *kind;  /* "text" */
    const char *count; /* "tokens" */
    const char *values[STUDY_MAX_VALUES];
    int nvalues;
} study_kind_info;
extern const study_kind_info study_kinds[STUDY_NKINDS];

typedef struct study_score {
    char *data;
    int64_t count;
    double v[STUDY_MAX_VALUES]; /* in study_kinds' order; NaN where eval wrote null */
} study_score;

typedef struct study_point {
    int64_t step;
    double loss;
} study_point;

typedef struct study_run {
    char *variant;
    int64_t seed, steps;
    double tokens_per_s, train_seconds; /* timing: the only numbers that differ between equal runs */
    study_point *curve;                 /* the log's validations */
    int ncurve;
    bool has_val; /* scores[STUDY_TEXT][0] is the validation text */
    study_score *scores[STUDY_NKINDS];
    int nscores[STUDY_NKINDS];
    double *rho;
    int nrho;
    /* the log's last record's step and its first training step's (-1:
     * none): not in result.json */
    int64_t log_last, log_first;
} study_run;

/* The training log (--log): the validation records as the curve, tokens/s
 * as the mean over the logged steps after the first, the seconds of
 * training as the last record's elapsed. */
bool study_run_read_log(study_run *r, const char *text, size_t len, tlm_err *err);
/* eval --json's lines: each kind's records in order; want[k] of each are
 * expected (a different count is an error). */
bool study_run_read_eval(study_run *r, const char *text, size_t len, const int want[STUDY_NKINDS], tlm_err *err);
/* probe --json's record. */
bool study_run_read_probe(study_run *r, const char *text, size_t len, tlm_err *err);

/* All three from a run's folder: DIR/log.jsonl, DIR/eval.jsonl (not read
 * when want asks for nothing) and DIR/probe.json; a message names the file
 * at fault. */
bool study_run_collect(study_run *r, const char *dir, const int want[STUDY_NKINDS], tlm_err *err);

/* result.json: written (malloc'd, NULL when out of memory) and read back. */
char *study_run_json(const study_run *r);
bool study_run_parse(study_run *r, const char *text, size_t len, tlm_err *err);
void study_run_free(study_run *r);

#endif
