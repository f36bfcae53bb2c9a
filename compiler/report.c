#include "report.h"

#include "atomic_file.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "numfmt.h"
#include "tlm_train_settings.h"
#include "vocabulary.h"
#include "xalloc.h"

static int cmp_desc(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x < y) - (x > y);
}

int distinct_widths(const checked_model *m, int64_t *out) {
    memcpy(out, m->widths, (size_t)m->layers * sizeof *out);
    qsort(out, (size_t)m->layers, sizeof *out, cmp_desc);
    int n = 0;
    for (int64_t l = 0; l < m->layers; l++)
        if (n == 0 || out[n - 1] != out[l]) out[n++] = out[l];
    return n;
}

static int64_t *baseline_widths(const checked_model *m) {
    int64_t *b = tlm_xmalloc((size_t)m->layers * sizeof *b);
    for (int64_t l = 0; l < m->layers; l++) b[l] = m->budget_width;
    return b;
}

static double mean_width(const checked_model *m) {
    double s = 0;
    for (int64_t l = 0; l < m->layers; l++) s += (double)m->widths[l];
    return s / (double)m->layers;
}

static int64_t width_sum(const checked_model *m) {
    int64_t s = 0;
    for (int64_t l = 0; l < m->layers; l++) s += m->widths[l];
    return s;
}

void report_summary(FILE *out, const checked_model *m) {
    model_cost c = cost_of_model(m, m->widths);
    int64_t *d = tlm_xmalloc((size_t)m->layers * sizeof *d);
    int nd = distinct_widths(m, d);
    char p[32];
    fprintf(out, "%s: %lld layer%s, d_ff %lld..%lld (%d distinct), %s params", m->name, (long long)m->layers,
            m->layers == 1 ? "" : "s", (long long)d[nd - 1], (long long)d[0], nd,
            fmt_int(p, sizeof p, c.total_params, 0));
    if (m->has_budget) fprintf(out, ", budget uniform(%lld) met exactly", (long long)m->budget_width);
    fputc('\n', out);
    free(d);
}

static void cost_row(FILE *out, const char *what, int64_t got, int64_t base, bool has_base) {
    char a[32], b[32], c[32];
    if (has_base)
        fprintf(out, "  %-22s %15s %15s %13s\n", what, fmt_int(a, sizeof a, got, 0), fmt_int(b, sizeof b, base, 0),
                fmt_int(c, sizeof c, got - base, 1));
    else fprintf(out, "  %-22s %15s\n", what, fmt_int(a, sizeof a, got, 0));
}

void report_text(FILE *out, const checked_model *m) {
    char a[32], b[32];
    fprintf(out,
            "model %s: %s (%s, %s), %lld layer%s, d_model %lld, %lld head%s of %lld, vocab %lld, "
            "context %lld, quantum %lld%s\n",
            m->name, tlm_enum_title(&tlm_mixer_enum, m->mixer), tlm_enum_name(&tlm_mixer_enum, m->mixer),
            tlm_enum_name(&tlm_mlp_enum, m->mlp), (long long)m->layers, m->layers == 1 ? "" : "s",
            (long long)m->d_model, (long long)m->heads, m->heads == 1 ? "" : "s", (long long)m->head_dim,
            (long long)m->vocab, (long long)m->context, (long long)m->quantum,
            m->tie_embeddings ? ", tied embeddings" : "");
    if (m->tokenizer) {
        const char *slash = strrchr(m->tokenizer, '/');
        fprintf(out, "  tokenizer %s: %lld tokens, identity ", slash ? slash + 1 : m->tokenizer, (long long)m->vocab);
        for (int i = 0; i < 8; i++) fprintf(out, "%02x", m->tokenizer_hash[i]);
        fputs("...\n", out);
    }
    if (m->mixer == TLM_MIXER_HOPE_ATTENTION) {
        fprintf(out, "  CMS levels: %d, update periods [", m->ncms);
        for (int i = 0; i < m->ncms; i++) fprintf(out, "%s%lld", i ? ", " : "", (long long)m->cms[i]);
        fprintf(out, "]; every level has the layer's width\n");
    }
    model_cost c = cost_of_model(m, m->widths);
    double ref = m->has_budget ? (double)m->budget_width : mean_width(m);
    fprintf(out, "  %5s %8s %6s %15s %17s %7s\n", "layer", "d_ff", m->has_budget ? "ratio" : "/mean", "MLP params",
            "MLP FLOP/token", "share");
    for (int64_t l = 0; l < m->layers; l++) {
        layer_cost lc = cost_of_layer(m, m->widths[l]);
        fprintf(out, "  %5lld %8lld %6.3f %15s %17s %6.2f%%\n", (long long)l, (long long)m->widths[l],
                (double)m->widths[l] / ref, fmt_int(a, sizeof a, lc.mlp_params, 0),
                fmt_int(b, sizeof b, (int64_t)lc.mlp_flops, 0), 100.0 * (double)lc.mlp_params / (double)c.mlp_params);
    }
    fprintf(out, "  %5s %8lld %6s %15s %17s %6.2f%%\n", "sum", (long long)width_sum(m), "",
            fmt_int(a, sizeof a, c.mlp_params, 0), fmt_int(b, sizeof b, (int64_t)c.mlp_flops, 0), 100.0);

    model_cost base = c;
    if (m->has_budget) {
        int64_t *bw = baseline_widths(m);
        base = cost_of_model(m, bw);
        free(bw);
        fprintf(out, "  budget uniform(%lld): widths sum to %s = %lld x %lld, met exactly\n",
                (long long)m->budget_width, fmt_int(a, sizeof a, width_sum(m), 0), (long long)m->layers,
                (long long)m->budget_width);
        fprintf(out, "  %-22s %15s %15s %13s\n", "", "this model", "baseline", "difference");
    } else {
        fprintf(out, "  budget: none (no baseline to compare with)\n");
    }
    bool hb = m->has_budget;
    cost_row(out, "params: MLP", c.mlp_params, base.mlp_params, hb);
    cost_row(out, "params: mixers", c.mixer_params, base.mixer_params, hb);
    cost_row(out, "params: norms", c.norm_params + c.final_norm_params, base.norm_params + base.final_norm_params, hb);
    cost_row(out, "params: embedding", c.embed_params, base.embed_params, hb);
    cost_row(out, m->tie_embeddings ? "params: head (tied)" : "params: head", c.head_params, base.head_params, hb);
    cost_row(out, "params: total", c.total_params, base.total_params, hb);
    cost_row(out, "FLOP/token: forward", (int64_t)c.total_flops, (int64_t)base.total_flops, hb);
    cost_row(out, "FLOP/token: training", (int64_t)(3 * c.total_flops), (int64_t)(3 * base.total_flops), hb);

    int64_t *d = tlm_xmalloc((size_t)m->layers * sizeof *d);
    int nd = distinct_widths(m, d);
    fprintf(out, "  distinct widths: %d (", nd);
    for (int i = 0; i < nd; i++) fprintf(out, "%s%lld", i ? ", " : "", (long long)d[i]);
    fprintf(out, ") -> %d MLP kernel specialisation%s\n", nd, nd == 1 ? "" : "s");
    free(d);
}

void report_json_begin(FILE *out) { fputs("{\"models\": [", out); }
void report_json_end(FILE *out) { fputs("\n]}\n", out); }

static void json_cost(FILE *out, const char *key, const model_cost *c) {
    fprintf(out,
            ",\n   \"%s\": {\"params\": %lld, \"mlp_params\": %lld, \"mixer_params\": %lld, "
            "\"norm_params\": %lld, \"embed_params\": %lld, \"head_params\": %lld, "
            "\"flops_per_token_forward\": %.0f, \"flops_per_token_training\": %.0f}",
            key, (long long)c->total_params, (long long)c->mlp_params, (long long)c->mixer_params,
            (long long)(c->norm_params + c->final_norm_params), (long long)c->embed_params, (long long)c->head_params,
            c->total_flops, 3 * c->total_flops);
}

/* The training defaults, from the table in its order, under the names a
 * train { } block uses: a call's choice by name, then its arguments; rows
 * that share an argument name are one list (betas). */
static void json_train(FILE *out, const tlm_abi_train *t) {
    fputs(",\n   \"train\": {", out);
    for (int i = 0; i < TLM_TRAIN_NSETTINGS; i++) {
        const tlm_train_setting *row = &tlm_train_settings[i];
        const tlm_train_setting *prev = i ? row - 1 : NULL, *next = i + 1 < TLM_TRAIN_NSETTINGS ? row + 1 : NULL;
        bool joins_prev = row->arg && prev && prev->arg && !strcmp(prev->arg, row->arg);
        bool joins_next = row->arg && next && next->arg && !strcmp(next->arg, row->arg);
        char v[40], name[32];
        if (row->kind == TLM_TS_CHOICE) snprintf(v, sizeof v, "\"%s\"", tlm_train_format(name, sizeof name, row, t));
        else if (row->kind == TLM_TS_REAL) fmt_real(v, sizeof v, tlm_train_get(t, row));
        else tlm_train_format(v, sizeof v, row, t);
        if (joins_prev) fprintf(out, ", %s", v);
        else fprintf(out, "%s\"%s\": %s%s", i ? ", " : "", row->arg ? row->arg : row->key, joins_next ? "[" : "", v);
        if (joins_prev && !joins_next) fputs("]", out);
    }
    fputs("}", out);
}

void report_json_model(FILE *out, const checked_model *m, int index) {
    fprintf(out,
            "%s\n  {\"name\": \"%s\", \"mixer\": \"%s\", \"mlp\": \"%s\", \"layers\": %lld, "
            "\"d_model\": %lld, \"heads\": %lld, \"head_dim\": %lld, \"vocab\": %lld, \"context\": %lld, "
            "\"quantum\": %lld, \"tie_embeddings\": %s,\n   \"budget\": ",
            index ? "," : "", m->name, tlm_enum_name(&tlm_mixer_enum, m->mixer), tlm_enum_name(&tlm_mlp_enum, m->mlp),
            (long long)m->layers, (long long)m->d_model, (long long)m->heads, (long long)m->head_dim,
            (long long)m->vocab, (long long)m->context, (long long)m->quantum, m->tie_embeddings ? "true" : "false");
    if (m->has_budget) fprintf(out, "{\"uniform\": %lld}", (long long)m->budget_width);
    else fputs("null", out);
    /* what sets models of one mixer apart beyond their widths: two models
     * that differ only in their gate or CMS periods are told apart here */
    char eps[40], base[40], lr[40];
    fprintf(out, ",\n   \"norm_eps\": %s, \"rope_base\": %s", fmt_real(eps, sizeof eps, m->norm_eps),
            fmt_real(base, sizeof base, m->rope_base));
    if (m->mixer == TLM_MIXER_GATED_ATTENTION)
        fprintf(out, ", \"gate\": \"%s\"", tlm_enum_name(&tlm_gate_enum, m->gate));
    if (m->mixer == TLM_MIXER_TITANS)
        fprintf(out, ", \"chunk\": %lld, \"inner_lr\": %s", (long long)m->chunk, fmt_real(lr, sizeof lr, m->inner_lr));
    if (m->mixer == TLM_MIXER_HOPE_ATTENTION) {
        fputs(", \"cms\": [", out);
        for (int i = 0; i < m->ncms; i++) fprintf(out, "%s%lld", i ? ", " : "", (long long)m->cms[i]);
        fputs("]", out);
    }
    fputs(",\n   \"layers_table\": [", out);
    for (int64_t l = 0; l < m->layers; l++) {
        layer_cost lc = cost_of_layer(m, m->widths[l]);
        char raw[40];
        fprintf(out,
                "%s\n    {\"layer\": %lld, \"d_ff\": %lld, \"d_ff_exact\": %s, \"mlp_params\": %lld, "
                "\"mlp_flops_per_token\": %.0f, \"mixer_params\": %lld}",
                l ? "," : "", (long long)l, (long long)m->widths[l], fmt_real(raw, sizeof raw, m->raw_widths[l]),
                (long long)lc.mlp_params, lc.mlp_flops, (long long)lc.mixer_params);
    }
    fputs("]", out);
    model_cost c = cost_of_model(m, m->widths);
    json_cost(out, "totals", &c);
    if (m->has_budget) {
        int64_t *bw = baseline_widths(m);
        model_cost base = cost_of_model(m, bw);
        free(bw);
        json_cost(out, "baseline", &base);
    }
    int64_t *d = tlm_xmalloc((size_t)m->layers * sizeof *d);
    int nd = distinct_widths(m, d);
    fputs(",\n   \"distinct_widths\": [", out);
    for (int i = 0; i < nd; i++) fprintf(out, "%s%lld", i ? ", " : "", (long long)d[i]);
    fputs("]", out);
    free(d);
    json_train(out, &m->train);
    fputs("}", out);
}

/* A plain SVG line chart: width (relative to the baseline or the mean) on
 * the y axis, layer on the x axis, one line per model. */
bool report_svg(const char *path, const checked_model *const *models, int n, tlm_err *err) {
    /* drawn in memory, then written whole (atomic_file.h) */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return tlm_fail(err, "%s: out of memory", path);
    const double W = 640, H = 400, left = 60, right = 150, top = 30, bottom = 50;
    double ymax = 0;
    int64_t lmax = 1;
    for (int i = 0; i < n; i++) {
        const checked_model *m = models[i];
        double ref = m->has_budget ? (double)m->budget_width : mean_width(m);
        for (int64_t l = 0; l < m->layers; l++)
            if ((double)m->widths[l] / ref > ymax) ymax = (double)m->widths[l] / ref;
        if (m->layers - 1 > lmax) lmax = m->layers - 1;
    }
    ymax = ceil(ymax * 4 + 0.5) / 4;
    double pw = W - left - right, ph = H - top - bottom;
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "font-family=\"sans-serif\" font-size=\"12\">\n",
            W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"%.0f\" y=\"18\" font-size=\"14\">MLP width against depth</text>\n", left);
    for (int k = 0; k <= (int)(ymax * 4 + 0.5); k++) {
        double v = k * 0.25, y = top + ph - v / ymax * ph;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", left, y, left + pw, y);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.2f</text>\n", left - 6, y + 4, v);
    }
    for (int64_t l = 0; l <= lmax; l += lmax > 12 ? lmax / 12 + 1 : 1) {
        double x = left + (double)l / (double)lmax * pw;
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%lld</text>\n", x, top + ph + 18, (long long)l);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">layer</text>\n", left + pw / 2, H - 10);
    fprintf(f,
            "<text transform=\"translate(16,%.1f) rotate(-90)\" text-anchor=\"middle\">"
            "d_ff / baseline</text>\n",
            top + ph / 2);
    static const char *colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};
    for (int i = 0; i < n; i++) {
        const checked_model *m = models[i];
        double ref = m->has_budget ? (double)m->budget_width : mean_width(m);
        const char *color = colors[i % 6];
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", color);
        for (int64_t l = 0; l < m->layers; l++) {
            double x = left + (m->layers > 1 ? (double)l / (double)lmax : 0) * pw;
            double y = top + ph - (double)m->widths[l] / ref / ymax * ph;
            fprintf(f, "%.1f,%.1f ", x, y);
        }
        fprintf(f, "\"/>\n");
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\">%s</text>\n", left + pw + 10, top + 16.0 * (i + 1), color,
                m->name);
    }
    fprintf(f, "</svg>\n");
    bool ok = fclose(f) == 0 ? tlm_write_file_atomic(path, text, len, err) : tlm_fail(err, "%s: out of memory", path);
    free(text);
    return ok;
}
