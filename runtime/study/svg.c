/* Hand-written SVG charts (svg.h). */
#include "svg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WIDTH = 760, HEIGHT = 460, LEFT = 76, RIGHT = 200, TOP = 54, BOTTOM = 64 };
#define PLOT_W (WIDTH - LEFT - RIGHT)
#define PLOT_H (HEIGHT - TOP - BOTTOM) /* the plot's height; long x labels add to the picture's */

/* Colours that stay apart for the common kinds of colour blindness (Okabe
 * and Ito), then a few more. */
static const char *const palette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00",
                                      "#56B4E9", "#000000", "#F0E442", "#7F7F7F", "#8C564B"};
static const char *colour(int series) { return palette[series % (int)(sizeof palette / sizeof *palette)]; }

static void put_text(tlm_strbuf *sb, const char *s) {
    for (; *s; s++) switch (*s) {
        case '&': tlm_sb_puts(sb, "&amp;"); break;
        case '<': tlm_sb_puts(sb, "&lt;"); break;
        case '>': tlm_sb_puts(sb, "&gt;"); break;
        case '"': tlm_sb_puts(sb, "&quot;"); break;
        default: tlm_sb_append(sb, s, 1);
        }
}

void svg_extend(double *lo, double *hi, const double *x, int n) {
    for (int i = 0; i < n; i++)
        if (isfinite(x[i])) *lo = fmin(*lo, x[i]), *hi = fmax(*hi, x[i]);
}

static double px(const svg_chart *c, double x) { return LEFT + (x - c->xmin) / (c->xmax - c->xmin) * PLOT_W; }
static double py(const svg_chart *c, double y) { return TOP + PLOT_H - (y - c->ymin) / (c->ymax - c->ymin) * PLOT_H; }

/* A round tick spacing giving about five ticks over range. */
static double tick_step(double range) {
    double raw = range / 5, mag = pow(10, floor(log10(raw))), f = raw / mag;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
}

static void fix_range(double *lo, double *hi, double pad) {
    if (!isfinite(*lo) || !isfinite(*hi)) *lo = 0, *hi = 1;
    if (*hi - *lo < 1e-12 * fmax(1, fabs(*hi)))
        *lo -= 0.5 * fmax(fabs(*lo) * 0.1, 1e-6), *hi = *lo + fmax(fabs(*lo) * 0.2, 2e-6);
    double room = (*hi - *lo) * pad;
    *lo -= room, *hi += room;
}

static void number(char *buf, size_t n, double v, double step) {
    int decimals = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    if (fabs(v) < step * 1e-9) v = 0;
    if (fabs(v) >= 1e6 || (v != 0 && fabs(v) < 1e-4)) snprintf(buf, n, "%.3g", v);
    else snprintf(buf, n, "%.*f", decimals, v);
}

/* Grid lines, ticks and labels at round numbers along the x axis (below
 * the plot) or the y axis (left of it). A numeric x axis counts (steps,
 * layers), so its ticks are whole numbers: a step of 0.5 is no step. */
static void numeric_ticks(svg_chart *c, bool x_axis) {
    double lo = x_axis ? c->xmin : c->ymin, hi = x_axis ? c->xmax : c->ymax, step = tick_step(hi - lo);
    if (x_axis) step = fmax(step, 1);
    char label[48];
    for (double t = ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) {
        number(label, sizeof label, t, step);
        double at = x_axis ? px(c, t) : py(c, t);
        /* the grid line across the plot, the tick outside it, the label */
        double g[4] = {at, TOP, at, TOP + PLOT_H}, k[4] = {at, TOP + PLOT_H, at, TOP + PLOT_H + 5};
        double lx = at, ly = TOP + PLOT_H + 18;
        if (!x_axis) {
            g[0] = LEFT, g[1] = at, g[2] = LEFT + PLOT_W, g[3] = at;
            k[0] = LEFT - 5, k[1] = at, k[2] = LEFT, k[3] = at;
            lx = LEFT - 8, ly = at + 4;
        }
        tlm_sb_printf(&c->sb,
                      "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                      "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444\"/>"
                      "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">%s</text>\n",
                      g[0], g[1], g[2], g[3], k[0], k[1], k[2], k[3], lx, ly, x_axis ? "middle" : "end", label);
    }
}

void svg_begin(svg_chart *c, const char *title, const char *xlabel, const char *ylabel, double xmin, double xmax,
               double ymin, double ymax, const char *const *categories, int ncategories) {
    memset(c, 0, sizeof *c);
    c->categories = categories, c->ncategories = ncategories;
    if (categories) xmin = -0.5, xmax = ncategories - 0.5;
    else fix_range(&xmin, &xmax, 0);
    fix_range(&ymin, &ymax, 0.05);
    c->xmin = xmin, c->xmax = xmax, c->ymin = ymin, c->ymax = ymax;
    /* category labels longer than a few letters are slanted, and the
     * picture grows to hold them */
    size_t longest = 0;
    for (int i = 0; i < ncategories; i++)
        if (strlen(categories[i]) > longest) longest = strlen(categories[i]);
    bool slant = longest > 8;
    int height = HEIGHT + (slant ? (int)(longest * 4) : 0);
    tlm_strbuf *sb = &c->sb;
    tlm_sb_printf(sb,
                  "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                  "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                  "font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n"
                  "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n<text x=\"%d\" y=\"24\" font-size=\"16\" "
                  "font-weight=\"bold\">",
                  WIDTH, height, WIDTH, height, WIDTH, height, LEFT);
    put_text(sb, title);
    tlm_sb_printf(sb,
                  "</text>\n<g class=\"axes\" stroke=\"#444\" fill=\"none\">\n"
                  "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"/>\n</g>\n",
                  LEFT, TOP, PLOT_W, PLOT_H);
    /* ticks and grid */
    tlm_sb_puts(sb, "<g class=\"ticks\">\n");
    if (categories) {
        for (int i = 0; i < ncategories; i++) {
            double x = px(c, i);
            tlm_sb_printf(sb, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#444\"/>\n", x, TOP + PLOT_H,
                          x, TOP + PLOT_H + 5);
            if (slant)
                tlm_sb_printf(sb, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"end\" transform=\"rotate(-35 %.1f %d)\">", x,
                              TOP + PLOT_H + 16, x, TOP + PLOT_H + 16);
            else tlm_sb_printf(sb, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">", x, TOP + PLOT_H + 18);
            put_text(sb, categories[i]);
            tlm_sb_puts(sb, "</text>\n");
        }
    } else numeric_ticks(c, true);
    numeric_ticks(c, false);
    tlm_sb_puts(sb, "</g>\n");
    tlm_sb_printf(sb, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">", LEFT + PLOT_W / 2, height - 20);
    put_text(sb, xlabel);
    tlm_sb_printf(sb, "</text>\n<text x=\"18\" y=\"%d\" text-anchor=\"middle\" transform=\"rotate(-90 18 %d)\">",
                  TOP + PLOT_H / 2, TOP + PLOT_H / 2);
    put_text(sb, ylabel);
    tlm_sb_puts(sb, "</text>\n");
}

void svg_note(svg_chart *c, const char *text) {
    tlm_sb_printf(&c->sb, "<text x=\"%d\" y=\"42\" fill=\"#555\">", LEFT);
    put_text(&c->sb, text);
    tlm_sb_puts(&c->sb, "</text>\n");
}

static void add_legend(svg_chart *c, int series, const char *name) {
    if (!name) return;
    for (int i = 0; i < c->nlegend; i++)
        if (c->legend_series[i] == series) return;
    if (c->nlegend == SVG_MAX_LEGEND) return;
    snprintf(c->legend[c->nlegend], sizeof c->legend[0], "%s", name);
    c->legend_series[c->nlegend++] = series;
}

void svg_band(svg_chart *c, int series, const double *x, const double *lo, const double *hi, int n) {
    tlm_sb_printf(&c->sb, "<polygon class=\"band\" fill=\"%s\" fill-opacity=\"0.18\" stroke=\"none\" points=\"",
                  colour(series));
    for (int i = 0; i < n; i++)
        if (isfinite(x[i]) && isfinite(hi[i])) tlm_sb_printf(&c->sb, "%.1f,%.1f ", px(c, x[i]), py(c, hi[i]));
    for (int i = n - 1; i >= 0; i--)
        if (isfinite(x[i]) && isfinite(lo[i])) tlm_sb_printf(&c->sb, "%.1f,%.1f ", px(c, x[i]), py(c, lo[i]));
    tlm_sb_puts(&c->sb, "\"/>\n");
}

void svg_line(svg_chart *c, int series, const char *name, const double *x, const double *y, int n, bool markers) {
    add_legend(c, series, name);
    tlm_strbuf *sb = &c->sb;
    tlm_sb_puts(sb, "<g class=\"series\" data-name=\"");
    put_text(sb, name ? name : "");
    tlm_sb_printf(sb, "\" stroke=\"%s\" fill=\"%s\">\n", colour(series), colour(series));
    bool open = false;
    for (int i = 0; i < n; i++) {
        if (!isfinite(x[i]) || !isfinite(y[i])) {
            if (open) tlm_sb_puts(sb, "\"/>\n"), open = false;
            continue;
        }
        if (!open) tlm_sb_puts(sb, "<polyline fill=\"none\" stroke-width=\"2\" points=\""), open = true;
        tlm_sb_printf(sb, "%.1f,%.1f ", px(c, x[i]), py(c, y[i]));
    }
    if (open) tlm_sb_puts(sb, "\"/>\n");
    if (markers)
        for (int i = 0; i < n; i++)
            if (isfinite(x[i]) && isfinite(y[i]))
                tlm_sb_printf(sb, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\"/>\n", px(c, x[i]), py(c, y[i]));
    tlm_sb_puts(sb, "</g>\n");
}

void svg_error_bar(svg_chart *c, int series, const char *name, double x, double y, double lo, double hi) {
    add_legend(c, series, name);
    tlm_strbuf *sb = &c->sb;
    tlm_sb_puts(sb, "<g class=\"series\" data-name=\"");
    put_text(sb, name ? name : "");
    tlm_sb_printf(sb, "\" stroke=\"%s\" fill=\"%s\" stroke-width=\"1.5\">\n", colour(series), colour(series));
    if (isfinite(lo) && isfinite(hi)) {
        double X = px(c, x), Y0 = py(c, lo), Y1 = py(c, hi);
        tlm_sb_printf(sb,
                      "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
                      "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
                      "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
                      X, Y0, X, Y1, X - 8, Y0, X + 8, Y0, X - 8, Y1, X + 8, Y1);
    }
    if (isfinite(y)) tlm_sb_printf(sb, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\"/>\n", px(c, x), py(c, y));
    else /* a diverged run's mean: said where its marker would be, not left out unseen */
        tlm_sb_printf(sb,
                      "<text class=\"not-finite\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" stroke=\"none\">"
                      "not finite</text>\n",
                      px(c, x), TOP + 16);
    tlm_sb_puts(sb, "</g>\n");
}

char *svg_end(svg_chart *c) {
    tlm_strbuf *sb = &c->sb;
    tlm_sb_puts(sb, "<g class=\"legend\">\n");
    for (int i = 0; i < c->nlegend; i++) {
        int y = TOP + 10 + 20 * i;
        tlm_sb_printf(sb,
                      "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"3\"/>"
                      "<text x=\"%d\" y=\"%d\">",
                      LEFT + PLOT_W + 14, y, LEFT + PLOT_W + 38, y, colour(c->legend_series[i]), LEFT + PLOT_W + 44,
                      y + 4);
        put_text(sb, c->legend[i]);
        tlm_sb_puts(sb, "</text>\n");
    }
    tlm_sb_puts(sb, "</g>\n</svg>\n");
    if (sb->oom) {
        tlm_sb_free(sb);
        return NULL;
    }
    char *text = sb->buf;
    memset(sb, 0, sizeof *sb);
    return text;
}
