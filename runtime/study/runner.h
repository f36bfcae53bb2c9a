/* Running a study (docs/studies.md): compile every variant into
 * OUT/models/VARIANT.so (skipped when up to date), train every (variant,
 * seed) with `tlm-run train` as child processes, at most `jobs` at a time,
 * evaluate each finished run (`eval --json`, `probe --json`) into
 * OUT/runs/VARIANT/seedS/result.json, then write results.json, results.md
 * and the plots.
 *
 * Resumable at any point: a run whose result.json is present and valid is
 * reused; one with a checkpoint continues with `train --resume`; one
 * without starts afresh with `--overwrite`; its evaluation is redone when
 * the result is missing. OUT/plan.json holds the plan the folder was made
 * for: another plan (other --steps or --seeds, a changed study), a
 * plan.json that cannot be read, and a folder that holds files but no
 * plan.json are refused unless force, which discards the old runs and
 * results (OUT/runs, results.json, results.md) and keeps the other files.
 * One study at a time runs in a folder (a lock on OUT): another is refused.
 * A run records the SHA-256 of the model it trained from (model.sha256):
 * runs of a model compiled since from a changed recipe are refused, or
 * with force trained again. */
#ifndef TLM_STUDY_RUNNER_H
#define TLM_STUDY_RUNNER_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

#include "plan.h"
#include "spawn.h"

typedef struct study_options {
    const char *tlmc;    /* the compiler */
    const char *tlm_run; /* this program, for train, eval and probe */
    const char *out;     /* the study's folder */
    int jobs;            /* runs at a time */
    int threads;         /* CPU threads per run */
    const char *device;  /* the runs' --device as given (cuda:N; the plan has its kind), or NULL: the CPU */
    bool force;          /* discard runs of another plan, or take over a folder of other files */
    FILE *progress;      /* where the progress line goes */
    const study_stop *stop; /* set by a signal handler: stop the children (spawn.h) and return */
} study_options;

typedef enum study_outcome { STUDY_DONE, STUDY_FAILED, STUDY_REFUSED, STUDY_STOPPED } study_outcome;

/* Runs the study to its end. STUDY_FAILED (a child failed, a file could
 * not be written) and STUDY_REFUSED (the folder holds another plan) come
 * with a message in err; STUDY_STOPPED when a signal came (stop->count) (the children
 * were stopped, each training with a checkpoint). */
study_outcome study_execute(const study_plan *plan, const study_options *o, tlm_err *err);

#endif
