/* What `tlm-run train` shows while it runs, and the JSON-lines log.
 *
 * On a terminal, one live line (step/total, loss, lr, tokens/s, ETA) is
 * redrawn in place with \r; anything else printed (validation, notes)
 * clears it first and goes on a line of its own. When stdout is not a
 * terminal (a pipe, a file, a CI log) a plain line is printed instead every
 * log_every steps. The log file gets one JSON object per logged step and
 * one per validation. */
#ifndef TLM_CLI_PROGRESS_H
#define TLM_CLI_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tlm_rt/error.h"

typedef struct progress {
    bool tty;            /* stdout is a terminal: the live line */
    bool live;           /* the live line is on screen */
    double last_draw;    /* when it was last drawn (seconds) */
    FILE *log;           /* JSON lines, or NULL */
    int stdout_errno;    /* why the first write to stdout failed; 0: none did */
    char log_path[4096]; /* for messages */
    int64_t total;       /* steps of the run */
    double tokens_per_byte; /* the validation data's (1 for text); 0: unknown, no bits/byte */
    /* on --resume, why the log holds no record before the checkpoint's step
     * (it "was not there", ...): its history is lost; NULL when it was kept */
    const char *log_lost;
} progress;

typedef struct progress_step {
    int64_t step;
    double loss, lr, grad_norm;
    double tokens_per_s;  /* over the steps since the last logged one */
    double elapsed;       /* seconds of training, across resumes */
    double eta;           /* seconds left, < 0: unknown */
    double mfu;           /* model FLOPs utilisation (0..1) on a GPU whose peak is known, else NaN */
    double device_bytes;  /* device memory in use, < 0 on the CPU */
} progress_step;

/* Seconds on a monotonic clock. */
double progress_now(void);

void progress_init(progress *p, int64_t total);
/* Opens the JSON-lines log: afresh, or (resume) keeping only the records of
 * steps up to keep_upto, so a resumed run's log reads like an uninterrupted
 * one. The log must be a regular file (or not exist yet): a FIFO or device
 * is refused. The kept records are written to a temporary file in the
 * log's folder, fsynced and renamed over the old log (which a crash before
 * the rename leaves as it was; tlm_remove_stale_temps clears the
 * temporaries such a crash leaves), and the run appends to it. false with
 * a message. */
bool progress_open_log(progress *p, const char *path, bool resume, int64_t keep_upto, tlm_err *err);
/* How train's --profile record in the log starts (the profile's JSON and
 * "}\n" follow). */
#define PROGRESS_PROFILE_RECORD "{\"profile\": "

/* Whether path may become the log: absent, empty, or a log already (it
 * starts as a record does); a file that holds something else (notes, a
 * text) is never written over. false with a message. */
bool progress_log_replaceable(const char *path, tlm_err *err);

/* Every step: the live line (throttled; keep: drawn now and left on screen,
 * as before a validation); when logged, the plain line (not a terminal) and
 * the JSON record, flushed. false with a message when the record could not
 * be written (a full disk, a file-size limit): the run must stop. */
bool progress_update(progress *p, const progress_step *s, bool logged, bool keep, tlm_err *err);
/* A validation result, on its own line and in the log; false as above. */
bool progress_validation(progress *p, int64_t step, double loss, tlm_err *err);
/* Ends the live line; flushes, fsyncs and closes the log: false with a
 * message when that fails (err may be NULL where a failure is already
 * being reported). */
bool progress_close(progress *p, tlm_err *err);

/* "1h02m", "3m12s", "45s" */
void progress_duration(char *buf, size_t n, double seconds);

#endif
