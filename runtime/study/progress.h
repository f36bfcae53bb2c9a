/* The study's one progress line: runs done of the total, runs in flight,
 * and the time left estimated from the runs finished so far in this
 * invocation: their mean wall time times the runs left, less the time the
 * runs in flight have had, divided over the jobs. On a terminal
 * the line is redrawn in place (\r) and events print above it; otherwise
 * each event is one plain line that ends with the same status. */
#ifndef TLM_STUDY_PROGRESS_H
#define TLM_STUDY_PROGRESS_H

#include <stdbool.h>
#include <stdio.h>

typedef struct study_progress {
    FILE *out;
    bool tty, live;
    const char *name;
    int total, done, running, jobs;
    double run_seconds; /* the runs finished in this invocation: their wall time */
    double started_sum; /* the start times of the runs in flight, summed */
    int timed;
    double last_draw;
} study_progress;

void study_progress_init(study_progress *p, FILE *out, const char *name, int total, int jobs);
/* An event ("uniform seed 2: trained, 41s"): its own line, with the status. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void study_progress_event(study_progress *p, const char *fmt, ...);
/* A run started at t0 (study_now()); the same run ended: finished (done,
 * its wall time counts for the ETA) or stopped; a run reused from an
 * earlier invocation. */
void study_progress_run_started(study_progress *p, double t0);
void study_progress_run_ended(study_progress *p, double t0, bool finished);
void study_progress_run_reused(study_progress *p);
/* Redraws the live line (a terminal only; at most a few times a second
 * unless force). */
void study_progress_draw(study_progress *p, bool force);
/* Ends the live line. */
void study_progress_end(study_progress *p);

/* Seconds on a monotonic clock; "1h02m", "3m12s", "45s". */
double study_now(void);
void study_duration(char *buf, size_t n, double seconds);

#endif
