/* A small SVG chart, written by hand: a title, axes with ticks at round
 * numbers (1, 2, 5 times a power of ten), axis labels, series as lines
 * (with markers), shaded bands and error bars, and a legend at the right.
 * Readable in any browser; the plots of a study (plots.h) are made of it.
 * Series are numbered; a series' colour comes from a fixed palette, and its
 * name goes into the legend once. Points that are NaN break a line. */
#ifndef TLM_STUDY_SVG_H
#define TLM_STUDY_SVG_H

#include <stdbool.h>

#include "tlm_rt/json.h"

enum { SVG_MAX_LEGEND = 32 };

typedef struct svg_chart {
    tlm_strbuf sb;
    double xmin, xmax, ymin, ymax; /* the data range on the axes */
    const char *const *categories; /* x tick labels at 0, 1, ... (NULL: numbers) */
    int ncategories;
    char legend[SVG_MAX_LEGEND][64];
    int legend_series[SVG_MAX_LEGEND], nlegend;
} svg_chart;

/* Widens [*lo, *hi] to hold the finite values of x[0..n). Start from
 * lo = INFINITY, hi = -INFINITY. */
void svg_extend(double *lo, double *hi, const double *x, int n);

/* Starts a chart over the given ranges (an empty or NaN range gets a
 * default; y gets 5% room). categories: x is 0 .. n - 1, labelled so;
 * else x counts (steps, layers) and is ticked at whole numbers. */
void svg_begin(svg_chart *c, const char *title, const char *xlabel, const char *ylabel, double xmin, double xmax,
               double ymin, double ymax, const char *const *categories, int ncategories);
void svg_band(svg_chart *c, int series, const double *x, const double *lo, const double *hi, int n);
void svg_line(svg_chart *c, int series, const char *name, const double *x, const double *y, int n, bool markers);
/* A marker at (x, y) and a bar from lo to hi; a y that is not finite (a
 * diverged run's) is the words "not finite" at the top of the plot. */
void svg_error_bar(svg_chart *c, int series, const char *name, double x, double y, double lo, double hi);
/* A note under the title (e.g. "band: min-max over 3 seeds"). */
void svg_note(svg_chart *c, const char *text);
/* Draws the legend and closes the document: malloc'd text, NULL when out
 * of memory. */
char *svg_end(svg_chart *c);

#endif
