/* Gathering a study's runs into per-variant statistics (summary.h). */
#include "summary.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *base_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static void add_metric(study_summary *s, const char *key, const char *label, const char *data, enum study_kind kind,
                       int index, int value, bool lower) {
    study_metric *m = &s->metrics[s->nmetrics++];
    snprintf(m->key, sizeof m->key, "%s", key);
    snprintf(m->label, sizeof m->label, "%s", label);
    /* two sets of one file name (in two folders) would give two columns of
     * one label: the second is "... (2)" */
    int same = 0;
    m->given_len = strlen(m->label);
    for (int i = 0; i < s->nmetrics - 1; i++) /* labels as given, before their " (K)" */
        same += s->metrics[i].given_len == m->given_len && !strncmp(s->metrics[i].label, m->label, m->given_len);
    if (same) snprintf(m->label + m->given_len, sizeof m->label - m->given_len, " (%d)", same + 1);
    m->data = data, m->kind = kind, m->index = index, m->value = value, m->lower_is_better = lower;
}

/* The metrics the plan's evaluations give, in the order the tables show
 * them: validation loss, perplexity and bits per byte; each eval text's
 * perplexity and bits per byte; each multiple-choice set's accuracy and
 * length-normalised accuracy; each cloze set's accuracy. */
static bool list_metrics(study_summary *s, tlm_err *err) {
    const study_plan *p = s->plan;
    bool val = p->val != NULL;
    s->metrics = calloc((size_t)(3 + 2 * p->neval + 2 * p->nchoices + p->ncloze), sizeof *s->metrics);
    if (!s->metrics) return tlm_fail(err, "out of memory");
    char key[48], label[160];
    if (val) {
        add_metric(s, "val_loss", "val loss", p->val, STUDY_TEXT, 0, 0, true);
        add_metric(s, "val_ppl", "val ppl", p->val, STUDY_TEXT, 0, 1, true);
        add_metric(s, "val_bpb", "val bits/byte", p->val, STUDY_TEXT, 0, 2, true);
    }
    for (int i = 0; i < p->neval; i++) {
        snprintf(key, sizeof key, "eval%d_ppl", i + 1);
        snprintf(label, sizeof label, "ppl %.100s", base_name(p->eval[i]));
        add_metric(s, key, label, p->eval[i], STUDY_TEXT, i + val, 1, true);
        snprintf(key, sizeof key, "eval%d_bpb", i + 1);
        snprintf(label, sizeof label, "bits/byte %.100s", base_name(p->eval[i]));
        add_metric(s, key, label, p->eval[i], STUDY_TEXT, i + val, 2, true);
    }
    for (int i = 0; i < p->nchoices; i++) {
        snprintf(key, sizeof key, "choices%d_accuracy", i + 1);
        snprintf(label, sizeof label, "accuracy %.100s", base_name(p->choices[i]));
        add_metric(s, key, label, p->choices[i], STUDY_CHOICES, i, 0, false);
        snprintf(key, sizeof key, "choices%d_accuracy_norm", i + 1);
        snprintf(label, sizeof label, "length-normalised accuracy %.100s", base_name(p->choices[i]));
        add_metric(s, key, label, p->choices[i], STUDY_CHOICES, i, 1, false);
    }
    for (int i = 0; i < p->ncloze; i++) {
        snprintf(key, sizeof key, "cloze%d_accuracy", i + 1);
        snprintf(label, sizeof label, "cloze accuracy %.100s", base_name(p->cloze[i]));
        add_metric(s, key, label, p->cloze[i], STUDY_CLOZE, i, 0, false);
    }
    return true;
}

static bool run_matches(const study_plan *p, const study_run *r, const study_variant *v, int64_t seed, tlm_err *err) {
    if (!r->variant || strcmp(r->variant, v->name) || r->seed != seed)
        return tlm_fail(err, "the result for %s seed %lld is another run's (%s seed %lld)", v->name, (long long)seed,
                        r->variant ? r->variant : "?", (long long)r->seed);
    int want[STUDY_NKINDS] = {
        [STUDY_TEXT] = p->neval + (p->val != NULL), [STUDY_CHOICES] = p->nchoices, [STUDY_CLOZE] = p->ncloze};
    for (int k = 0; k < STUDY_NKINDS; k++)
        if (r->nscores[k] != want[k] || r->has_val != (p->val != NULL))
            return tlm_fail(err, "the result for %s seed %lld has other evaluations than the plan", v->name,
                            (long long)seed);
    return true;
}

/* The validation curve over seeds, at the steps of the first seed's log
 * (every seed validates at the same steps). */
static bool gather_curve(study_variant_summary *vs, const study_run *runs, int nseeds) {
    int n = runs[0].ncurve;
    for (int s = 1; s < nseeds; s++)
        if (runs[s].ncurve < n) n = runs[s].ncurve;
    if (n == 0) return true;
    vs->curve_step = calloc((size_t)n, sizeof(double)), vs->curve_mean = calloc((size_t)n, sizeof(double));
    vs->curve_min = calloc((size_t)n, sizeof(double)), vs->curve_max = calloc((size_t)n, sizeof(double));
    if (!vs->curve_step || !vs->curve_mean || !vs->curve_min || !vs->curve_max) return false;
    for (int i = 0; i < n; i++) {
        double sum = 0, lo = INFINITY, hi = -INFINITY;
        for (int s = 0; s < nseeds; s++) {
            double l = runs[s].curve[i].loss;
            sum += l, lo = fmin(lo, l), hi = fmax(hi, l);
        }
        vs->curve_step[i] = (double)runs[0].curve[i].step;
        vs->curve_mean[i] = sum / nseeds, vs->curve_min[i] = lo, vs->curve_max[i] = hi;
    }
    vs->ncurve = n;
    return true;
}

static bool gather_rho(study_variant_summary *vs, const study_run *runs, int nseeds) {
    int n = runs[0].nrho;
    for (int s = 1; s < nseeds; s++)
        if (runs[s].nrho != n) n = 0; /* seeds disagree on the layers: no profile */
    if (n == 0) return true;
    if (!(vs->rho_mean = calloc((size_t)n, sizeof *vs->rho_mean))) return false;
    for (int l = 0; l < n; l++) {
        double sum = 0;
        for (int s = 0; s < nseeds; s++) sum += runs[s].rho[l];
        vs->rho_mean[l] = sum / nseeds;
    }
    vs->nrho = n;
    return true;
}

bool study_summary_build(study_summary *s, const study_plan *p, const study_run *runs, tlm_err *err) {
    memset(s, 0, sizeof *s);
    s->plan = p, s->level = 0.95;
    int ns = p->nseeds;
    if (!list_metrics(s, err)) goto fail;
    if (!(s->variants = calloc((size_t)p->nvariants, sizeof *s->variants))) goto oom;
    for (int v = 0; v < p->nvariants; v++) {
        study_variant_summary *vs = &s->variants[v];
        const study_run *vr = runs + (size_t)v * (size_t)ns;
        vs->variant = &p->variants[v];
        if (!strcmp(vs->variant->name, p->baseline)) s->baseline = v;
        for (int k = 0; k < ns; k++)
            if (!run_matches(p, &vr[k], vs->variant, p->seeds[k], err)) goto fail;
        size_t nm = (size_t)(s->nmetrics ? s->nmetrics : 1);
        vs->values = calloc(nm * (size_t)ns, sizeof *vs->values);
        vs->mean = calloc(nm, sizeof *vs->mean), vs->sd = calloc(nm, sizeof *vs->sd);
        vs->diff = calloc(nm, sizeof *vs->diff);
        if (!vs->values || !vs->mean || !vs->sd || !vs->diff) goto oom;
        for (int m = 0; m < s->nmetrics; m++) {
            const study_metric *mt = &s->metrics[m];
            double *x = vs->values + (size_t)m * (size_t)ns;
            for (int k = 0; k < ns; k++) x[k] = vr[k].scores[mt->kind][mt->index].v[mt->value];
            vs->mean[m] = study_mean(x, ns), vs->sd[m] = study_sd(x, ns);
        }
        for (int k = 0; k < ns; k++)
            vs->tokens_per_s[k] = vr[k].tokens_per_s, vs->train_seconds[k] = vr[k].train_seconds;
        if (!gather_curve(vs, vr, ns) || !gather_rho(vs, vr, ns)) goto oom;
    }
    for (int i = 0; i < p->nchoices; i++) s->chance[i] = runs[0].scores[STUDY_CHOICES][i].v[2];
    for (int v = 0; v < p->nvariants; v++)
        for (int m = 0; m < s->nmetrics; m++)
            s->variants[v].diff[m] =
                study_paired_diff(study_values(s, v, m), study_values(s, s->baseline, m), ns, s->level);
    return true;
oom:
    tlm_fail(err, "out of memory");
fail:
    study_summary_free(s);
    return false;
}

void study_summary_free(study_summary *s) {
    if (s->plan && s->variants)
        for (int v = 0; v < s->plan->nvariants; v++) {
            study_variant_summary *vs = &s->variants[v];
            free(vs->values), free(vs->mean), free(vs->sd), free(vs->diff), free(vs->rho_mean);
            free(vs->curve_step), free(vs->curve_mean), free(vs->curve_min), free(vs->curve_max);
        }
    free(s->variants), free(s->metrics);
    memset(s, 0, sizeof *s);
}
