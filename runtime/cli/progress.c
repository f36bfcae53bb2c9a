#include "progress.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tlm_rt/json.h"

double progress_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void progress_init(progress *p, int64_t total) {
    memset(p, 0, sizeof *p);
    p->tty = isatty(STDOUT_FILENO);
    p->total = total;
}

/* The step of one JSON line, or -1 when it is not a complete record (the
 * tail of a run that was killed mid-write). */
static int64_t record_step(const char *line, size_t len) {
    tlm_err e;
    tlm_json *j = tlm_json_parse(line, len, &e);
    const tlm_json *step = j ? tlm_json_get(j, "step") : NULL;
    int64_t v = step && step->type == TLM_JSON_NUMBER && step->is_int ? step->integer : -1;
    tlm_json_free(j);
    return v;
}

bool progress_open_log(progress *p, const char *path, bool resume, int64_t keep_upto, tlm_err *err) {
    tlm_strbuf kept = {0};
    FILE *old = resume ? fopen(path, "rb") : NULL;
    if (old) {
        char *line = NULL;
        size_t cap = 0;
        ssize_t len;
        while ((len = getline(&line, &cap, old)) > 0) {
            size_t n = (size_t)len;
            if (line[n - 1] != '\n') break;   /* a torn last line */
            int64_t step = record_step(line, n - 1);
            if (step >= 0 && step <= keep_upto) tlm_sb_append(&kept, line, n);
        }
        free(line);
        fclose(old);
    }
    p->log = fopen(path, "w");
    if (!p->log || kept.oom) {
        tlm_fail(err, "%s: cannot write the log", path);
        if (p->log) fclose(p->log);
        p->log = NULL;
        tlm_sb_free(&kept);
        return false;
    }
    if (kept.len) fwrite(kept.buf, 1, kept.len, p->log);
    fflush(p->log);
    tlm_sb_free(&kept);
    return true;
}

static void clear_live(progress *p) {
    if (p->live) {
        fputs("\r\033[K", stdout);
        p->live = false;
    }
}

void progress_duration(char *buf, size_t n, double s) {
    if (!(s >= 0) || s > 1e8) snprintf(buf, n, "?");
    else if (s >= 3600) snprintf(buf, n, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
    else if (s >= 60) snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else snprintf(buf, n, "%.0fs", s);
}

static void rate(char *buf, size_t n, double tps) {
    if (tps >= 1e6) snprintf(buf, n, "%.2fM", tps / 1e6);
    else if (tps >= 1e4) snprintf(buf, n, "%.1fk", tps / 1e3);
    else snprintf(buf, n, "%.0f", tps);
}

/* A JSON number; NaN and Inf are not JSON, so they become null. */
static void json_num(FILE *f, const char *key, const char *fmt, double v) {
    fprintf(f, ",\"%s\":", key);
    if (isfinite(v)) fprintf(f, fmt, v);
    else fputs("null", f);
}

void progress_update(progress *p, const progress_step *s, bool logged, bool keep) {
    char tps[16], eta[16], el[16];
    rate(tps, sizeof tps, s->tokens_per_s);
    progress_duration(eta, sizeof eta, s->eta);
    progress_duration(el, sizeof el, s->elapsed);
    int w = snprintf(NULL, 0, "%lld", (long long)p->total);
    if (p->tty) {
        double now = progress_now();
        if (keep || logged || s->step == p->total || now - p->last_draw >= 0.1) {
            printf("\r\033[Kstep %*lld/%lld  loss %.4f  lr %.2e  %s tok/s  ETA %s%s", w, (long long)s->step,
                   (long long)p->total, s->loss, s->lr, tps, eta, keep ? "\n" : "");
            fflush(stdout);
            p->live = !keep;
            p->last_draw = now;
        }
    } else if (logged) {
        printf("step %*lld/%lld  loss %.4f  lr %.2e  grad norm %.3f  %s tok/s  elapsed %s  ETA %s\n", w,
               (long long)s->step, (long long)p->total, s->loss, s->lr, s->grad_norm, tps, el, eta);
        fflush(stdout);
    }
    if (logged && p->log) {
        fprintf(p->log, "{\"step\":%lld", (long long)s->step);
        json_num(p->log, "loss", "%.17g", s->loss);
        json_num(p->log, "lr", "%.9g", s->lr);
        json_num(p->log, "grad_norm", "%.9g", s->grad_norm);
        json_num(p->log, "tokens_per_s", "%.1f", s->tokens_per_s);
        json_num(p->log, "elapsed", "%.3f", s->elapsed);
        fputs("}\n", p->log);
        fflush(p->log);
    }
}

void progress_validation(progress *p, int64_t step, double loss) {
    clear_live(p);
    int w = snprintf(NULL, 0, "%lld", (long long)p->total);
    double ppl = exp(loss), bpb = loss / log(2.0);
    printf("step %*lld/%lld  val loss %.4f  ppl %.2f  bits/byte %.3f\n", w, (long long)step, (long long)p->total, loss,
           ppl, bpb);
    fflush(stdout);
    if (p->log) {
        fprintf(p->log, "{\"step\":%lld", (long long)step);
        json_num(p->log, "val_loss", "%.17g", loss);
        json_num(p->log, "val_ppl", "%.9g", ppl);
        json_num(p->log, "val_bpb", "%.9g", bpb);
        fputs("}\n", p->log);
        fflush(p->log);
    }
}

void progress_close(progress *p) {
    if (p->live) fputc('\n', stdout);   /* leave the last state on screen */
    p->live = false;
    if (p->log) fclose(p->log);
    p->log = NULL;
}
