/* The study's four plots, drawn with svg.h (plots.h). */
#include "plots.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"
#include "svg.h"

char *study_plot_loss_curves(const study_summary *s) {
    const study_plan *p = s->plan;
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    for (int v = 0; v < p->nvariants; v++) {
        const study_variant_summary *vs = &s->variants[v];
        svg_extend(&x0, &x1, vs->curve_step, vs->ncurve);
        svg_extend(&y0, &y1, vs->curve_min, vs->ncurve);
        svg_extend(&y0, &y1, vs->curve_max, vs->ncurve);
    }
    if (!(x1 >= x0)) return NULL;
    char title[200], note[120];
    snprintf(title, sizeof title, "%s: validation loss", p->name);
    svg_chart c;
    svg_begin(&c, title, "step", "validation loss (nats per token)", x0, x1, y0, y1, NULL, 0);
    /* one seed draws no band (nothing between a lowest and a highest) */
    if (p->nseeds > 1) snprintf(note, sizeof note, "line: mean over %d seeds; band: lowest to highest seed", p->nseeds);
    else snprintf(note, sizeof note, "line: the one seed's run");
    svg_note(&c, note);
    for (int v = 0; v < p->nvariants; v++) {
        const study_variant_summary *vs = &s->variants[v];
        if (p->nseeds > 1) svg_band(&c, v, vs->curve_step, vs->curve_min, vs->curve_max, vs->ncurve);
        svg_line(&c, v, vs->variant->name, vs->curve_step, vs->curve_mean, vs->ncurve, false);
    }
    return svg_end(&c);
}

char *study_plot_widths(const study_summary *s) {
    const study_plan *p = s->plan;
    double x0 = 0, x1 = 0, y0 = INFINITY, y1 = -INFINITY;
    for (int v = 0; v < p->nvariants; v++) {
        const study_variant *var = &p->variants[v];
        x1 = fmax(x1, var->nwidths - 1);
        for (int l = 0; l < var->nwidths; l++)
            y0 = fmin(y0, (double)var->widths[l]), y1 = fmax(y1, (double)var->widths[l]);
    }
    y0 = fmin(y0, 0);
    char title[200];
    snprintf(title, sizeof title, "%s: MLP width per layer", p->name);
    svg_chart c;
    svg_begin(&c, title, "layer", "d_ff", x0, x1, y0, y1, NULL, 0);
    for (int v = 0; v < p->nvariants; v++) {
        const study_variant *var = &p->variants[v];
        double *x = calloc((size_t)var->nwidths, sizeof *x), *y = calloc((size_t)var->nwidths, sizeof *y);
        if (x && y) {
            for (int l = 0; l < var->nwidths; l++) x[l] = l, y[l] = (double)var->widths[l];
            svg_line(&c, v, var->name, x, y, var->nwidths, true);
        } else c.sb.oom = true;
        free(x), free(y);
    }
    return svg_end(&c);
}

char *study_plot_ppl(const study_summary *s) {
    const study_plan *p = s->plan;
    int metric = -1;
    for (int m = 0; m < s->nmetrics; m++)
        if (!strcmp(s->metrics[m].key, "val_ppl")) metric = m;
    if (metric < 0) return NULL;
    const char **names = calloc((size_t)p->nvariants, sizeof *names);
    if (!names) return NULL;
    double y0 = INFINITY, y1 = -INFINITY;
    for (int v = 0; v < p->nvariants; v++) {
        const study_variant_summary *vs = &s->variants[v];
        double m = vs->mean[metric], sd = isfinite(vs->sd[metric]) ? vs->sd[metric] : 0;
        double band[2] = {m - sd, m + sd};
        svg_extend(&y0, &y1, band, 2);
        names[v] = vs->variant->name;
    }
    char title[200], note[120];
    snprintf(title, sizeof title, "%s: final validation perplexity", p->name);
    svg_chart c;
    svg_begin(&c, title, "variant", "validation perplexity", 0, 0, y0, y1, names, p->nvariants);
    snprintf(note, sizeof note, "mean over %d seed%s%s", p->nseeds, p->nseeds == 1 ? "" : "s",
             p->nseeds > 1 ? "; bars: ±1 standard deviation" : "");
    svg_note(&c, note);
    for (int v = 0; v < p->nvariants; v++) {
        const study_variant_summary *vs = &s->variants[v];
        double m = vs->mean[metric], sd = vs->sd[metric];
        svg_error_bar(&c, v, vs->variant->name, v, m, m - sd, m + sd);
    }
    free(names);
    return svg_end(&c);
}

char *study_plot_rho(const study_summary *s) {
    const study_plan *p = s->plan;
    double x0 = 0, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    for (int v = 0; v < p->nvariants; v++) {
        const study_variant_summary *vs = &s->variants[v];
        if (vs->nrho) x1 = fmax(x1, vs->nrho - 1);
        svg_extend(&y0, &y1, vs->rho_mean, vs->nrho);
    }
    if (!(x1 >= x0)) return NULL;
    char title[200], note[120];
    snprintf(title, sizeof title, "%s: rho per layer (probe)", p->name);
    svg_chart c;
    svg_begin(&c, title, "layer", "rho: cos(MLP output, residual stream)", x0, x1, fmin(y0, 0), y1, NULL, 0);
    snprintf(note, sizeof note, "mean over %d seed%s", p->nseeds, p->nseeds == 1 ? "" : "s");
    svg_note(&c, note);
    for (int v = 0; v < p->nvariants; v++) {
        const study_variant_summary *vs = &s->variants[v];
        double *x = calloc((size_t)vs->nrho + 1, sizeof *x);
        if (!x) {
            c.sb.oom = true;
            continue;
        }
        for (int l = 0; l < vs->nrho; l++) x[l] = l;
        svg_line(&c, v, vs->variant->name, x, vs->rho_mean, vs->nrho, true);
        free(x);
    }
    return svg_end(&c);
}

int study_plots_write(const study_summary *s, const char *dir, const char *names[STUDY_MAX_PLOTS], tlm_err *err) {
    static const struct {
        const char *name;
        char *(*draw)(const study_summary *);
    } plots[STUDY_MAX_PLOTS] = {{"loss_curves.svg", study_plot_loss_curves},
                                {"widths.svg", study_plot_widths},
                                {"ppl.svg", study_plot_ppl},
                                {"rho.svg", study_plot_rho}};
    int n = 0;
    for (int i = 0; i < STUDY_MAX_PLOTS; i++) {
        char *svg = plots[i].draw(s), path[4200];
        if (!svg) continue;
        snprintf(path, sizeof path, "%s/%s", dir, plots[i].name);
        bool ok = tlm_write_file_atomic(path, svg, strlen(svg), err);
        free(svg);
        if (!ok) return -1;
        names[n++] = plots[i].name;
    }
    return n;
}
