/* A run's record: reading the training log and eval's and probe's JSON
 * lines, writing result.json and reading it back (run_result.h). */
#include "run_result.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"
#include "json_out.h"
#include "tlm_rt/json.h"

const study_kind_info study_kinds[STUDY_NKINDS] = {
    [STUDY_TEXT] = {"text", "tokens", {"loss", "ppl", "bpb"}, 3},
    [STUDY_CHOICES] = {"choices", "items", {"accuracy", "accuracy_norm", "chance"}, 3},
    [STUDY_CLOZE] = {"cloze", "items", {"accuracy", "target_loglik"}, 2},
};

/* A number, or NaN for null (eval writes a value that is not finite so: a
 * perplexity past a double, a diverged model's accuracies). */
static bool get_real(const tlm_json *o, const char *key, double *out) {
    const tlm_json *v = tlm_json_get(o, key);
    if (v && v->type == TLM_JSON_NULL) return *out = NAN, true;
    if (!v || v->type != TLM_JSON_NUMBER) return false;
    *out = v->number;
    return true;
}

static bool get_count(const tlm_json *o, const char *key, int64_t *out) {
    const tlm_json *v = tlm_json_get(o, key);
    if (!v || v->type != TLM_JSON_NUMBER || !v->is_int || v->integer < 0) return false;
    *out = v->integer;
    return true;
}

static char *dup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* Calls each(line's JSON) for every non-blank line; false at the first
 * line that is not JSON or that each refuses. what names the text. */
static bool each_line(const char *text, size_t len, const char *what, bool (*each)(void *, const tlm_json *, tlm_err *),
                      void *ctx, tlm_err *err) {
    size_t start = 0;
    int lineno = 0;
    while (start < len) {
        size_t end = start;
        while (end < len && text[end] != '\n') end++;
        lineno++;
        size_t k = start;
        while (k < end && (text[k] == ' ' || text[k] == '\t' || text[k] == '\r')) k++;
        if (k < end) {
            tlm_err e = {""};
            tlm_json *j = tlm_json_parse(text + start, end - start, &e);
            if (!j) return tlm_fail(err, "%s, line %d: %s", what, lineno, e.msg);
            bool ok = each(ctx, j, &e);
            tlm_json_free(j);
            if (!ok) return tlm_fail(err, "%s, line %d: %s", what, lineno, e.msg);
        }
        start = end + 1;
    }
    return true;
}

static bool grow(void **items, int n, int *cap, size_t size) {
    if (n < *cap) return true;
    int c = *cap ? *cap * 2 : 8;
    void *p = realloc(*items, (size_t)c * size);
    if (!p) return false;
    *items = p, *cap = c;
    return true;
}

/* ---- the training log ---- */

typedef struct log_reader {
    study_run *r;
    int cap;
    double tps_sum;
    int tps_n;
    int64_t last_step, first_step; /* of any record; of a training step's (-1: none) */
} log_reader;

static bool log_line(void *ctx, const tlm_json *j, tlm_err *err) {
    log_reader *lr = ctx;
    int64_t step;
    double v;
    if (j->type != TLM_JSON_OBJECT) return tlm_fail(err, "not a JSON object");
    if (!get_count(j, "step", &step)) return true; /* a profile record */
    if (get_real(j, "val_loss", &v)) {
        if (!grow((void **)&lr->r->curve, lr->r->ncurve, &lr->cap, sizeof *lr->r->curve))
            return tlm_fail(err, "out of memory");
        lr->r->curve[lr->r->ncurve++] = (study_point){step, v};
    }
    if (get_real(j, "tokens_per_s", &v) && step > 1) lr->tps_sum += v, lr->tps_n++;
    if (step > lr->last_step) lr->last_step = step;
    if (get_real(j, "loss", &v) && (lr->first_step < 0 || step < lr->first_step)) lr->first_step = step;
    if (get_real(j, "elapsed", &v)) lr->r->train_seconds = v;
    return true;
}

bool study_run_read_log(study_run *r, const char *text, size_t len, tlm_err *err) {
    log_reader lr = {.r = r, .last_step = -1, .first_step = -1};
    r->ncurve = 0;
    r->train_seconds = NAN;
    if (!each_line(text, len, "the training log", log_line, &lr, err)) return false;
    r->tokens_per_s = lr.tps_n ? lr.tps_sum / lr.tps_n : NAN;
    r->log_last = lr.last_step, r->log_first = lr.first_step;
    return true;
}

/* ---- scores (eval's lines, result.json's lists) ---- */

static bool read_score(const tlm_json *j, enum study_kind k, study_score *s, tlm_err *err) {
    const study_kind_info *info = &study_kinds[k];
    const tlm_json *data = tlm_json_get(j, "data");
    memset(s, 0, sizeof *s);
    if (!data || data->type != TLM_JSON_STRING) return tlm_fail(err, "a %s record without \"data\"", info->kind);
    if (!get_count(j, info->count, &s->count))
        return tlm_fail(err, "a %s record without \"%s\" (a count)", info->kind, info->count);
    for (int i = 0; i < info->nvalues; i++)
        if (!get_real(j, info->values[i], &s->v[i]))
            return tlm_fail(err, "a %s record without \"%s\" (a number)", info->kind, info->values[i]);
    if (!(s->data = dup(data->str))) return tlm_fail(err, "out of memory");
    return true;
}

static bool add_score(study_run *r, enum study_kind k, const tlm_json *j, int *cap, tlm_err *err) {
    if (!grow((void **)&r->scores[k], r->nscores[k], cap, sizeof *r->scores[k])) return tlm_fail(err, "out of memory");
    if (!read_score(j, k, &r->scores[k][r->nscores[k]], err)) return false;
    r->nscores[k]++;
    return true;
}

typedef struct eval_reader {
    study_run *r;
    int cap[STUDY_NKINDS];
} eval_reader;

static bool eval_line(void *ctx, const tlm_json *j, tlm_err *err) {
    eval_reader *er = ctx;
    const tlm_json *kind = tlm_json_get(j, "kind");
    if (!kind || kind->type != TLM_JSON_STRING) return tlm_fail(err, "a record without \"kind\"");
    for (int k = 0; k < STUDY_NKINDS; k++)
        if (!strcmp(kind->str, study_kinds[k].kind)) return add_score(er->r, (enum study_kind)k, j, &er->cap[k], err);
    return true; /* a kind the study does not use */
}

static void free_scores(study_run *r) {
    for (int k = 0; k < STUDY_NKINDS; k++) {
        for (int i = 0; i < r->nscores[k]; i++) free(r->scores[k][i].data);
        free(r->scores[k]);
        r->scores[k] = NULL, r->nscores[k] = 0;
    }
}

bool study_run_read_eval(study_run *r, const char *text, size_t len, const int want[STUDY_NKINDS], tlm_err *err) {
    eval_reader er = {.r = r};
    free_scores(r);
    if (!each_line(text, len, "eval's output", eval_line, &er, err)) return false;
    for (int k = 0; k < STUDY_NKINDS; k++)
        if (want[k] == 0) { /* a kind not asked for (eval's default text): dropped */
            for (int i = 0; i < r->nscores[k]; i++) free(r->scores[k][i].data);
            free(r->scores[k]);
            r->scores[k] = NULL, r->nscores[k] = 0;
        } else if (r->nscores[k] != want[k])
            return tlm_fail(err, "eval printed %d %s records, the study asked for %d", r->nscores[k],
                            study_kinds[k].kind, want[k]);
    return true;
}

static bool read_rho(study_run *r, const tlm_json *rho, tlm_err *err) {
    if (!rho || rho->type != TLM_JSON_ARRAY) return tlm_fail(err, "no \"rho\" array");
    free(r->rho);
    r->nrho = 0;
    if (!(r->rho = calloc(rho->len + 1, sizeof *r->rho))) return tlm_fail(err, "out of memory");
    for (size_t i = 0; i < rho->len; i++) {
        const tlm_json *x = &rho->items[i];
        if (x->type == TLM_JSON_NULL) r->rho[r->nrho++] = NAN;
        else if (x->type == TLM_JSON_NUMBER) r->rho[r->nrho++] = x->number;
        else return tlm_fail(err, "rho[%zu] is not a number", i);
    }
    return true;
}

static bool probe_line(void *ctx, const tlm_json *j, tlm_err *err) {
    const tlm_json *kind = tlm_json_get(j, "kind");
    if (!kind || kind->type != TLM_JSON_STRING || strcmp(kind->str, "probe")) return true;
    return read_rho(ctx, tlm_json_get(j, "rho"), err);
}

bool study_run_read_probe(study_run *r, const char *text, size_t len, tlm_err *err) {
    free(r->rho);
    r->rho = NULL, r->nrho = 0;
    if (!each_line(text, len, "probe's output", probe_line, r, err)) return false;
    if (!r->rho) return tlm_fail(err, "probe printed no {\"kind\":\"probe\"} record");
    return true;
}

/* ---- result.json ---- */

char *study_run_json(const study_run *r) {
    tlm_strbuf sb = {0};
    tlm_sb_puts(&sb, "{\"variant\": ");
    tlm_json_write_string(&sb, r->variant, strlen(r->variant));
    tlm_sb_printf(&sb, ", \"seed\": %lld, \"steps\": %lld, \"val\": %s,\n \"timing\": {\"tokens_per_s\": ",
                  (long long)r->seed, (long long)r->steps, r->has_val ? "true" : "false");
    study_json_real(&sb, r->tokens_per_s);
    tlm_sb_puts(&sb, ", \"train_seconds\": ");
    study_json_real(&sb, r->train_seconds);
    tlm_sb_puts(&sb, "},\n \"curve\": [");
    for (int i = 0; i < r->ncurve; i++) {
        tlm_sb_printf(&sb, "%s[%lld, ", i ? ", " : "", (long long)r->curve[i].step);
        study_json_real(&sb, r->curve[i].loss);
        tlm_sb_puts(&sb, "]");
    }
    tlm_sb_puts(&sb, "],\n \"scores\": [");
    int n = 0;
    for (int k = 0; k < STUDY_NKINDS; k++) {
        const study_kind_info *info = &study_kinds[k];
        for (int i = 0; i < r->nscores[k]; i++) {
            const study_score *s = &r->scores[k][i];
            tlm_sb_printf(&sb, "%s\n  {\"kind\": \"%s\", \"data\": ", n++ ? "," : "", info->kind);
            tlm_json_write_string(&sb, s->data, strlen(s->data));
            tlm_sb_printf(&sb, ", \"%s\": %lld", info->count, (long long)s->count);
            for (int v = 0; v < info->nvalues; v++) {
                tlm_sb_printf(&sb, ", \"%s\": ", info->values[v]);
                study_json_real(&sb, s->v[v]);
            }
            tlm_sb_puts(&sb, "}");
        }
    }
    tlm_sb_puts(&sb, "],\n \"rho\": [");
    for (int i = 0; i < r->nrho; i++) {
        if (i) tlm_sb_puts(&sb, ", ");
        study_json_real(&sb, r->rho[i]);
    }
    tlm_sb_puts(&sb, "]}\n");
    if (sb.oom) {
        tlm_sb_free(&sb);
        return NULL;
    }
    return sb.buf;
}

bool study_run_parse(study_run *r, const char *text, size_t len, tlm_err *err) {
    memset(r, 0, sizeof *r);
    tlm_err e = {""};
    tlm_json *j = tlm_json_parse(text, len, &e);
    if (!j) return tlm_fail(err, "not JSON: %s", e.msg);
    bool ok = false;
    const tlm_json *variant = tlm_json_get(j, "variant"), *val = tlm_json_get(j, "val");
    const tlm_json *timing = tlm_json_get(j, "timing"), *curve = tlm_json_get(j, "curve");
    const tlm_json *scores = tlm_json_get(j, "scores");
    if (!variant || variant->type != TLM_JSON_STRING || !get_count(j, "seed", &r->seed) ||
        !get_count(j, "steps", &r->steps) || !val || val->type != TLM_JSON_BOOL || !timing ||
        !get_real(timing, "tokens_per_s", &r->tokens_per_s) || !get_real(timing, "train_seconds", &r->train_seconds) ||
        !curve || curve->type != TLM_JSON_ARRAY || !scores || scores->type != TLM_JSON_ARRAY) {
        tlm_fail(err, "not a run's result (a field is missing)");
        goto done;
    }
    r->has_val = val->boolean;
    if (!(r->variant = dup(variant->str)) || (curve->len && !(r->curve = calloc(curve->len, sizeof *r->curve)))) {
        tlm_fail(err, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < curve->len; i++) {
        const tlm_json *p = &curve->items[i];
        if (p->type != TLM_JSON_ARRAY || p->len != 2 || p->items[0].type != TLM_JSON_NUMBER || !p->items[0].is_int ||
            (p->items[1].type != TLM_JSON_NUMBER && p->items[1].type != TLM_JSON_NULL)) {
            tlm_fail(err, "curve[%zu] is not [step, loss]", i);
            goto done;
        }
        r->curve[r->ncurve++] =
            (study_point){p->items[0].integer, p->items[1].type == TLM_JSON_NULL ? NAN : p->items[1].number};
    }
    eval_reader er = {.r = r};
    for (size_t i = 0; i < scores->len; i++)
        if (!eval_line(&er, &scores->items[i], err)) goto done;
    ok = read_rho(r, tlm_json_get(j, "rho"), err);
done:
    tlm_json_free(j);
    if (!ok) study_run_free(r);
    return ok;
}

void study_run_free(study_run *r) {
    free_scores(r);
    free(r->variant), free(r->curve), free(r->rho);
    memset(r, 0, sizeof *r);
}

bool study_run_collect(study_run *r, const char *dir, const int want[STUDY_NKINDS], tlm_err *err) {
    static const char *const files[] = {"log.jsonl", "eval.jsonl", "probe.json"};
    bool evaluated = want[STUDY_TEXT] + want[STUDY_CHOICES] + want[STUDY_CLOZE] > 0;
    for (int i = 0; i < 3; i++) {
        if (i == 1 && !evaluated) continue;
        char path[4300];
        size_t n;
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        char *text = study_read_file(path, &n, err);
        if (!text) return false;
        tlm_err e = {""};
        bool ok = i == 0   ? study_run_read_log(r, text, n, &e)
                  : i == 1 ? study_run_read_eval(r, text, n, want, &e)
                           : study_run_read_probe(r, text, n, &e);
        free(text);
        if (!ok) return tlm_fail(err, "%s: %s", path, e.msg);
    }
    return true;
}
