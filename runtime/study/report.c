/* Writing results.json and results.md (report.h). */
#include "report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json_out.h"
#include "numfmt.h"
#include "tlm_rt/json.h"

static void put_stat(tlm_strbuf *sb, const double *x, int n) {
    tlm_sb_puts(sb, "{\"values\": [");
    for (int i = 0; i < n; i++) {
        if (i) tlm_sb_puts(sb, ", ");
        study_json_real(sb, x[i]);
    }
    tlm_sb_puts(sb, "], \"mean\": ");
    study_json_real(sb, study_mean(x, n));
    tlm_sb_puts(sb, ", \"sd\": ");
    study_json_real(sb, study_sd(x, n));
    tlm_sb_puts(sb, "}");
}

static void put_variant(tlm_strbuf *sb, const study_summary *s, int v) {
    const study_variant_summary *vs = &s->variants[v];
    const study_variant *var = vs->variant;
    int ns = s->plan->nseeds;
    tlm_sb_puts(sb, "\n  {");
    study_json_variant(sb, var);
    tlm_sb_puts(sb, ",\n   \"metrics\": {");
    for (int m = 0; m < s->nmetrics; m++) {
        tlm_sb_printf(sb, "%s\n    \"%s\": ", m ? "," : "", s->metrics[m].key);
        put_stat(sb, study_values(s, v, m), ns);
    }
    tlm_sb_puts(sb, "},\n   \"vs_baseline\": ");
    if (v == s->baseline) tlm_sb_puts(sb, "null");
    else {
        tlm_sb_puts(sb, "{");
        for (int m = 0; m < s->nmetrics; m++) {
            const study_paired *d = &vs->diff[m];
            tlm_sb_printf(sb, "%s\n    \"%s\": {\"mean\": ", m ? "," : "", s->metrics[m].key);
            study_json_real(sb, d->mean);
            tlm_sb_puts(sb, ", \"sd\": ");
            study_json_real(sb, d->sd);
            tlm_sb_puts(sb, ", \"low\": ");
            study_json_real(sb, d->low);
            tlm_sb_puts(sb, ", \"high\": ");
            study_json_real(sb, d->high);
            tlm_sb_puts(sb, ", \"half_width\": ");
            study_json_real(sb, d->half_width);
            tlm_sb_printf(sb, ", \"verdict\": \"%s\"}", study_verdict(d, s->metrics[m].lower_is_better));
        }
        tlm_sb_puts(sb, "}");
    }
    tlm_sb_puts(sb, ",\n   \"rho\": [");
    for (int l = 0; l < vs->nrho; l++) {
        if (l) tlm_sb_puts(sb, ", ");
        study_json_real(sb, vs->rho_mean[l]);
    }
    tlm_sb_puts(sb, "],\n   \"timing\": {\"tokens_per_s\": ");
    put_stat(sb, vs->tokens_per_s, ns);
    tlm_sb_puts(sb, ", \"train_seconds\": ");
    put_stat(sb, vs->train_seconds, ns);
    tlm_sb_puts(sb, "}}");
}

char *study_report_json(const study_summary *s) {
    const study_plan *p = s->plan;
    tlm_strbuf sb = {0};
    tlm_sb_puts(&sb, "{\"study\": ");
    study_json_string(&sb, p->name);
    tlm_sb_puts(&sb, ", \"file\": ");
    study_json_string(&sb, p->file);
    tlm_sb_puts(&sb, ", \"baseline\": ");
    study_json_string(&sb, p->baseline);
    tlm_sb_printf(&sb, ", \"steps\": %lld", (long long)p->steps);
    if (p->device) tlm_sb_printf(&sb, ", \"device\": \"%s\", \"precision\": \"%s\"", p->device, p->precision);
    tlm_sb_puts(&sb, ", \"seeds\": [");
    for (int i = 0; i < p->nseeds; i++) tlm_sb_printf(&sb, "%s%lld", i ? ", " : "", (long long)p->seeds[i]);
    tlm_sb_puts(&sb, "], \"level\": ");
    study_json_real(&sb, s->level);
    tlm_sb_puts(&sb, ",\n \"metrics\": [");
    for (int m = 0; m < s->nmetrics; m++) {
        const study_metric *mt = &s->metrics[m];
        tlm_sb_printf(&sb, "%s\n  {\"key\": \"%s\", \"label\": ", m ? "," : "", mt->key);
        study_json_string(&sb, mt->label);
        tlm_sb_puts(&sb, ", \"data\": ");
        study_json_string(&sb, mt->data);
        tlm_sb_printf(&sb, ", \"lower_is_better\": %s", mt->lower_is_better ? "true" : "false");
        if (mt->kind == STUDY_CHOICES) {
            tlm_sb_puts(&sb, ", \"chance\": ");
            study_json_real(&sb, s->chance[mt->index]);
        }
        tlm_sb_puts(&sb, "}");
    }
    tlm_sb_puts(&sb, "],\n \"variants\": [");
    for (int v = 0; v < p->nvariants; v++) {
        if (v) tlm_sb_puts(&sb, ",");
        put_variant(&sb, s, v);
    }
    tlm_sb_puts(&sb, "]}\n");
    if (sb.oom) {
        tlm_sb_free(&sb);
        return NULL;
    }
    return sb.buf;
}

/* ---- results.md ---- */

/* "2.3456 ± 0.0123" (one seed: the value alone); digits after the point. */
static void put_mean_sd(tlm_strbuf *sb, const double *x, int n, int digits) {
    double m = study_mean(x, n), sd = study_sd(x, n);
    if (!isfinite(m)) tlm_sb_puts(sb, "n/a");
    else if (n < 2 || !isfinite(sd)) tlm_sb_printf(sb, "%.*f", digits, m);
    else tlm_sb_printf(sb, "%.*f ± %.*f", digits, m, digits, sd);
}

/* A table cell's text: a '|' (a file's name may hold one) would end the
 * cell. */
static void md_cell(tlm_strbuf *sb, const char *text) {
    for (const char *c = text; *c; c++) {
        if (*c == '|') tlm_sb_puts(sb, "\\|");
        else tlm_sb_append(sb, c, 1);
    }
}

/* text as a code span: fenced by one more backtick than its longest run of
 * them, with spaces inside when it holds one (CommonMark's rule), so a
 * path with a backtick stays one span. */
static void md_code(tlm_strbuf *sb, const char *text) {
    int longest = 0, run = 0;
    for (const char *c = text; *c; c++) {
        run = *c == '`' ? run + 1 : 0;
        if (run > longest) longest = run;
    }
    char fence[16];
    int n = longest + 1 < (int)sizeof fence ? longest + 1 : (int)sizeof fence - 1;
    memset(fence, '`', (size_t)n), fence[n] = '\0';
    tlm_sb_printf(sb, longest ? "%s %s %s" : "%s%s%s", fence, text, fence);
}

static int digits_of(const study_metric *m) { return m->kind == STUDY_TEXT && m->value == 1 ? 3 : 4; }

static void put_table(tlm_strbuf *sb, const study_summary *s) {
    const study_plan *p = s->plan;
    int ns = p->nseeds;
    char a[40], b[40];
    tlm_sb_puts(sb, "| variant | params | FLOPs/token |");
    for (int m = 0; m < s->nmetrics; m++) {
        tlm_sb_puts(sb, " ");
        md_cell(sb, s->metrics[m].label);
        tlm_sb_puts(sb, " |");
    }
    tlm_sb_puts(sb, " tokens/s |\n|---|--:|--:|");
    for (int m = 0; m < s->nmetrics; m++) tlm_sb_puts(sb, "--:|");
    tlm_sb_puts(sb, "--:|\n");
    for (int v = 0; v < p->nvariants; v++) {
        const study_variant_summary *vs = &s->variants[v];
        tlm_sb_printf(sb, "| %s%s | %s | %s |", vs->variant->name, v == s->baseline ? " (baseline)" : "",
                      fmt_int(a, sizeof a, vs->variant->params, 0),
                      fmt_int(b, sizeof b, vs->variant->flops_per_token, 0));
        for (int m = 0; m < s->nmetrics; m++) {
            tlm_sb_puts(sb, " ");
            put_mean_sd(sb, study_values(s, v, m), ns, digits_of(&s->metrics[m]));
            tlm_sb_puts(sb, " |");
        }
        tlm_sb_puts(sb, " ");
        put_mean_sd(sb, vs->tokens_per_s, ns, 0);
        tlm_sb_puts(sb, " |\n");
    }
}

static void put_comparisons(tlm_strbuf *sb, const study_summary *s) {
    const study_plan *p = s->plan;
    tlm_sb_printf(sb, "\n## Against the baseline `%s`\n\n", p->baseline);
    if (p->nseeds > 1)
        tlm_sb_printf(sb,
                      "Per seed, variant minus baseline trained with the same seed; the mean difference over the "
                      "%d seeds and its 95%% Student t interval. \"Resolves\" is the interval's half-width: the "
                      "smallest difference these seeds can tell from noise. A verdict is \"better\" or \"worse\" "
                      "only when the interval excludes 0.\n\n",
                      p->nseeds);
    else tlm_sb_puts(sb, "Variant minus baseline, each trained with the one seed.\n\n");
    if (p->nseeds < 2)
        tlm_sb_puts(sb,
                    "With one seed there is no interval: the differences below are single measurements, "
                    "with no way to tell them from noise. Run more seeds (--seeds 3 with the same --out: these runs "
                    "are kept).\n\n");
    bool no_spread = false;
    for (int v = 0; v < p->nvariants; v++)
        for (int m = 0; v != s->baseline && m < s->nmetrics; m++) no_spread |= s->variants[v].diff[m].no_spread;
    if (no_spread)
        tlm_sb_puts(sb, "\"No spread\": every seed gave the same difference, so the interval has no width and "
                        "the seeds say nothing of the noise; there is no verdict. Run more seeds, or a larger "
                        "evaluation.\n\n");
    tlm_sb_puts(sb,
                "| variant | metric | difference | 95% interval | resolves | verdict |\n|---|---|--:|---|--:|---|\n");
    for (int v = 0; v < p->nvariants; v++) {
        if (v == s->baseline) continue;
        for (int m = 0; m < s->nmetrics; m++) {
            const study_paired *d = &s->variants[v].diff[m];
            int dg = digits_of(&s->metrics[m]);
            tlm_sb_printf(sb, "| %s | ", s->variants[v].variant->name);
            md_cell(sb, s->metrics[m].label);
            tlm_sb_printf(sb, " | %+.*f | ", dg, d->mean);
            if (d->has_interval)
                tlm_sb_printf(sb, "[%+.*f, %+.*f] | ±%.*f |", dg, d->low, dg, d->high, dg, d->half_width);
            else tlm_sb_puts(sb, "none (1 seed) | – |");
            tlm_sb_printf(sb, " %s |\n", study_verdict(d, s->metrics[m].lower_is_better));
        }
    }
}

char *study_report_markdown(const study_summary *s, const char *const *plots, int nplots) {
    const study_plan *p = s->plan;
    tlm_strbuf sb = {0};
    tlm_sb_printf(&sb, "# Study `%s`\n\n", p->name);
    md_code(&sb, p->file);
    tlm_sb_printf(&sb, ": %d variants, baseline `%s`; %d seed%s (", p->nvariants, p->baseline, p->nseeds,
                  p->nseeds == 1 ? "" : "s");
    for (int i = 0; i < p->nseeds; i++) tlm_sb_printf(&sb, "%s%lld", i ? ", " : "", (long long)p->seeds[i]);
    /* 0: no steps in the study's train block, each model's own */
    if (p->steps) tlm_sb_printf(&sb, "), %lld steps each", (long long)p->steps);
    else tlm_sb_puts(&sb, "), each variant for its model's own steps");
    char where[120];
    if (p->device) tlm_sb_printf(&sb, ", %s", study_plan_runs_on(p, where, sizeof where));
    tlm_sb_puts(&sb, ".\n\n");
    if (p->val) tlm_sb_puts(&sb, "Validation (in distribution): "), md_code(&sb, p->val), tlm_sb_puts(&sb, ".\n");
    for (int i = 0; i < p->neval; i++)
        tlm_sb_puts(&sb, "Out of distribution: "), md_code(&sb, p->eval[i]), tlm_sb_puts(&sb, ".\n");
    for (int i = 0; i < p->nchoices; i++) {
        tlm_sb_puts(&sb, "Multiple choice: ");
        md_code(&sb, p->choices[i]);
        tlm_sb_printf(&sb, " (chance %.4f).\n", s->chance[i]);
    }
    for (int i = 0; i < p->ncloze; i++) tlm_sb_puts(&sb, "Cloze: "), md_code(&sb, p->cloze[i]), tlm_sb_puts(&sb, ".\n");
    tlm_sb_puts(&sb, "\nMean ± standard deviation over seeds. Params and FLOPs per token come from the compiler's "
                     "budget check (equal by construction across the variants of a budget).\n\n");
    put_table(&sb, s);
    put_comparisons(&sb, s);
    if (nplots) {
        tlm_sb_puts(&sb, "\n## Plots\n\n");
        for (int i = 0; i < nplots; i++) tlm_sb_printf(&sb, "![%s](%s)\n\n", plots[i], plots[i]);
    }
    if (sb.oom) {
        tlm_sb_free(&sb);
        return NULL;
    }
    return sb.buf;
}
