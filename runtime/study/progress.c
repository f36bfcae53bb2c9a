/* The study's progress line (progress.h). */
#include "progress.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double study_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void study_duration(char *buf, size_t n, double seconds) {
    long s = (long)(seconds + 0.5);
    if (s >= 3600) snprintf(buf, n, "%ldh%02ldm", s / 3600, s / 60 % 60);
    else if (s >= 60) snprintf(buf, n, "%ldm%02lds", s / 60, s % 60);
    else snprintf(buf, n, "%lds", s);
}

void study_progress_init(study_progress *p, FILE *out, const char *name, int total, int jobs) {
    memset(p, 0, sizeof *p);
    p->out = out, p->name = name, p->total = total, p->jobs = jobs > 0 ? jobs : 1;
    p->tty = isatty(fileno(out));
}

static void status(const study_progress *p, char *buf, size_t n) {
    char eta[32] = "?";
    int left = p->total - p->done;
    if (left == 0) snprintf(eta, sizeof eta, "0s");
    else if (p->timed) {
        int parallel = left < p->jobs ? left : p->jobs;
        double in_flight = p->running * study_now() - p->started_sum;
        study_duration(eta, sizeof eta, fmax(0, p->run_seconds / p->timed * left - in_flight) / parallel);
    }
    snprintf(buf, n, "study %s: %d/%d runs done, %d running, ETA %s", p->name, p->done, p->total, p->running, eta);
}

static void clear_live(study_progress *p) {
    if (p->live) fputs("\r\033[K", p->out), p->live = false;
}

void study_progress_event(study_progress *p, const char *fmt, ...) {
    char msg[512], st[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    clear_live(p);
    if (p->tty) fprintf(p->out, "%s\n", msg);
    else {
        status(p, st, sizeof st);
        fprintf(p->out, "%s  [%s]\n", msg, st);
    }
    fflush(p->out);
    study_progress_draw(p, true);
}

void study_progress_run_started(study_progress *p, double t0) { p->running++, p->started_sum += t0; }

void study_progress_run_ended(study_progress *p, double t0, bool finished) {
    p->running--, p->started_sum -= t0;
    if (finished) p->done++, p->run_seconds += study_now() - t0, p->timed++;
}

void study_progress_run_reused(study_progress *p) { p->done++; }

void study_progress_draw(study_progress *p, bool force) {
    if (!p->tty) return;
    double now = study_now();
    if (!force && now - p->last_draw < 0.5) return;
    char st[160];
    status(p, st, sizeof st);
    fprintf(p->out, "\r\033[K%s", st);
    fflush(p->out);
    p->live = true, p->last_draw = now;
}

void study_progress_end(study_progress *p) {
    clear_live(p);
    fflush(p->out);
}
