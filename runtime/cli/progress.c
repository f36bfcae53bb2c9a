#include "progress.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint.h"
#include "regular_file.h"
#include "test_hook.h"
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
    p->tokens_per_byte = 1;
}

/* Flushes stdout; the first write that fails keeps its errno for the
 * caller (p->stdout_errno), which decides what a lost stdout means. */
static void flush_stdout(progress *p) {
    errno = 0;
    if (fflush(stdout) != 0 && !p->stdout_errno) p->stdout_errno = errno ? errno : EIO;
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

/* What the log's records start with: a step's or a validation's
 * (progress_update and progress_validation below write "step" first), and
 * train's --profile record (log_profile). An existing file that starts
 * with neither, nor with a prefix of one (a first record torn by a crash),
 * is not a log. */
static const char record_start[] = "{\"step\":", profile_start[] = PROGRESS_PROFILE_RECORD;

static bool starts_as(const char *head, size_t n, const char *record) {
    return memcmp(head, record, n < strlen(record) ? n : strlen(record)) == 0;
}

bool progress_log_replaceable(const char *path, tlm_err *err) {
    struct stat st;
    tlm_err e;
    /* not there yet, the file standard output or error goes to, or not a
     * regular file (tlm_fopen_regular refuses a FIFO without waiting on it):
     * progress_open_log refuses those for what they are */
    if (stat(path, &st) != 0 || tlm_std_stream_file(&st)) return true;
    FILE *f = tlm_fopen_regular(path, &e);
    if (!f) return true;
    char head[sizeof profile_start - 1];
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    if (n == 0 || starts_as(head, n, record_start) || starts_as(head, n, profile_start)) return true;
    return tlm_fail(err,
                    "--log %s holds something other than a training log (it does not start with a JSON record "
                    "of a step): train writes its log over a log only (move the file away, or name another)",
                    path);
}

/* The records of the old log up to keep_upto (*nkept of them), or false
 * with a message. */
static bool kept_records(const char *path, int64_t keep_upto, tlm_strbuf *kept, int64_t *nkept, tlm_err *err) {
    FILE *old = tlm_fopen_regular(path, err);
    if (!old) return false;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, old)) > 0) {
        size_t n = (size_t)len;
        if (line[n - 1] != '\n') break; /* a torn last line */
        int64_t step = record_step(line, n - 1);
        if (step >= 0 && step <= keep_upto) tlm_sb_append(kept, line, n), ++*nkept;
    }
    int e = ferror(old) ? errno : 0;
    free(line);
    fclose(old);
    if (e || kept->oom)
        return tlm_fail(err, "%s: cannot read the log back: %s", path, kept->oom ? "out of memory" : strerror(e));
    return true;
}

/* Whether a running train holds the log at path (its lock, taken when it
 * opened the log): a second run renaming its own log over it would leave
 * the first appending to a file no name reaches, its records lost. */
static bool log_in_use(const char *path) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return false;
    bool held = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd);
    return held;
}

bool progress_open_log(progress *p, const char *path, bool resume, int64_t keep_upto, tlm_err *err) {
    /* The file to replace: the log, or what a symbolic link to it names. */
    struct stat st;
    char target[PATH_MAX];
    bool exists = stat(path, &st) == 0;
    if (exists && !S_ISREG(st.st_mode))
        return tlm_fail(err,
                        "--log %s is %s, not a regular file (the log is written to a temporary file and renamed "
                        "into place)",
                        path, tlm_file_kind(st.st_mode));
    const char *stream = exists ? tlm_std_stream_file(&st) : NULL;
    if (stream)
        return tlm_fail(err,
                        "--log %s is the file standard %s goes to: the log is written to a temporary file and renamed "
                        "into place, which would replace that file; give the log a path of its own",
                        path, stream);
    if (!exists || !realpath(path, target)) snprintf(target, sizeof target, "%s", path);
    snprintf(p->log_path, sizeof p->log_path, "%s", path);
    if (exists && log_in_use(target))
        return tlm_fail(err,
                        "--log %s is in use by another tlm-run train (a log has one writer; give this run a log of "
                        "its own)",
                        path);

    tlm_strbuf kept = {0};
    tlm_atomic_file out = {.fd = -1};
    int64_t nkept = 0;
    if (resume && exists && !kept_records(path, keep_upto, &kept, &nkept, err)) goto fail;
    p->log_lost = !resume || keep_upto == 0 || nkept ? NULL
                  : exists                           ? "held no record of this run up to the checkpoint's step"
                                                     : "was not there";
    if (tlm_remove_stale_temps(target, err) < 0) goto fail; /* a start killed before its rename */
    tlm_err why = {""};
    if (!tlm_atomic_open(&out, target, &why)) {
        tlm_fail(err, "--log %s: cannot write the log: %s", path, why.msg);
        goto fail;
    }
    if (!tlm_write_all(out.fd, kept.buf, kept.len)) {
        tlm_fail(err, "--log %s: cannot write the log: %s", path, strerror(errno));
        goto fail;
    }
    tlm_test_kill_at("log_rewrite");
    /* held until the log is closed, by the file the path names once renamed */
    (void)flock(out.fd, LOCK_EX | LOCK_NB);
    if (!tlm_atomic_publish(&out, &why)) {
        tlm_fail(err, "--log %s: cannot write the log: %s", path, why.msg);
        goto fail;
    }
    tlm_sb_free(&kept);
    if (!(p->log = fdopen(out.fd, "a"))) { /* the renamed file, appended to from here */
        close(out.fd);
        return tlm_fail(err, "--log %s: out of memory", path);
    }
    return true;
fail:
    tlm_atomic_abort(&out);
    tlm_sb_free(&kept);
    return false;
}

/* One record, flushed; false (the run stops) when it cannot be written. */
static bool log_record(progress *p, tlm_strbuf *rec, tlm_err *err) {
    if (rec->oom) {
        tlm_sb_free(rec);
        return tlm_fail(err, "out of memory writing the log");
    }
    if (tlm_test_hook("log_write")) { /* test-only: a crash in mid-record */
        fwrite(rec->buf, 1, rec->len / 2, p->log);
        fflush(p->log);
        tlm_test_kill();
    }
    bool ok = fwrite(rec->buf, 1, rec->len, p->log) == rec->len && fflush(p->log) == 0;
    tlm_sb_free(rec);
    return ok || tlm_fail(err, "cannot write the log %s: %s", p->log_path, strerror(errno));
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
static void json_num(tlm_strbuf *sb, const char *key, const char *fmt, double v) {
    tlm_sb_printf(sb, ",\"%s\":", key);
    if (isfinite(v)) tlm_sb_printf(sb, fmt, v);
    else tlm_sb_puts(sb, "null");
}

bool progress_update(progress *p, const progress_step *s, bool logged, bool keep, tlm_err *err) {
    char tps[16], eta[16], el[16];
    rate(tps, sizeof tps, s->tokens_per_s);
    progress_duration(eta, sizeof eta, s->eta);
    progress_duration(el, sizeof el, s->elapsed);
    int w = snprintf(NULL, 0, "%lld", (long long)p->total);
    char dev[64] = ""; /* on a GPU: MFU when its peak is known, and memory */
    if (s->device_bytes >= 0) {
        int n = isfinite(s->mfu) ? snprintf(dev, sizeof dev, "  MFU %.1f%%", 100 * s->mfu) : 0;
        snprintf(dev + n, sizeof dev - (size_t)n, "  mem %.2f GiB", s->device_bytes / 1073741824.0);
    }
    if (p->tty) {
        double now = progress_now();
        if (keep || logged || s->step == p->total || now - p->last_draw >= 0.1) {
            printf("\r\033[Kstep %*lld/%lld  loss %.4f  lr %.2e  %s tok/s%s  ETA %s%s", w, (long long)s->step,
                   (long long)p->total, s->loss, s->lr, tps, dev, eta, keep ? "\n" : "");
            flush_stdout(p);
            p->live = !keep;
            p->last_draw = now;
        }
    } else if (logged) {
        printf("step %*lld/%lld  loss %.4f  lr %.2e  grad norm %.3f  %s tok/s%s  elapsed %s  ETA %s\n", w,
               (long long)s->step, (long long)p->total, s->loss, s->lr, s->grad_norm, tps, dev, el, eta);
        flush_stdout(p);
    }
    if (!logged || !p->log) return true;
    tlm_strbuf rec = {0};
    tlm_sb_printf(&rec, "%s%lld", record_start, (long long)s->step);
    json_num(&rec, "loss", "%.17g", s->loss);
    json_num(&rec, "lr", "%.9g", s->lr);
    json_num(&rec, "grad_norm", "%.9g", s->grad_norm);
    json_num(&rec, "tokens_per_s", "%.1f", s->tokens_per_s);
    json_num(&rec, "elapsed", "%.3f", s->elapsed);
    if (s->device_bytes >= 0) {
        json_num(&rec, "mfu", "%.4f", s->mfu);
        json_num(&rec, "device_memory", "%.0f", s->device_bytes);
    }
    tlm_sb_puts(&rec, "}\n");
    return log_record(p, &rec, err);
}

bool progress_validation(progress *p, int64_t step, double loss, tlm_err *err) {
    clear_live(p);
    int w = snprintf(NULL, 0, "%lld", (long long)p->total);
    double ppl = exp(loss), bpb = loss * p->tokens_per_byte / log(2.0);
    if (p->tokens_per_byte > 0)
        printf("step %*lld/%lld  val loss %.4f  ppl %.2f  bits/byte %.3f\n", w, (long long)step, (long long)p->total,
               loss, ppl, bpb);
    else printf("step %*lld/%lld  val loss %.4f  ppl %.2f\n", w, (long long)step, (long long)p->total, loss, ppl);
    flush_stdout(p);
    if (!p->log) return true;
    tlm_strbuf rec = {0};
    tlm_sb_printf(&rec, "%s%lld", record_start, (long long)step);
    json_num(&rec, "val_loss", "%.17g", loss);
    json_num(&rec, "val_ppl", "%.9g", ppl);
    if (p->tokens_per_byte > 0) json_num(&rec, "val_bpb", "%.9g", bpb);
    tlm_sb_puts(&rec, "}\n");
    return log_record(p, &rec, err);
}

bool progress_close(progress *p, tlm_err *err) {
    if (p->live) fputc('\n', stdout); /* leave the last state on screen */
    p->live = false;
    if (!p->log) return true;
    int e = 0;
    if (fflush(p->log) != 0 || fsync(fileno(p->log)) != 0) e = errno;
    if (fclose(p->log) != 0 && !e) e = errno;
    p->log = NULL;
    return !e || tlm_fail(err, "cannot write the log %s: %s", p->log_path, strerror(e));
}
