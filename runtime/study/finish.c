/* Reading the runs' results back and writing the study's (finish.h). */
#include "finish.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"
#include "locate.h"
#include "plots.h"
#include "report.h"
#include "run_result.h"
#include "spawn.h"
#include "summary.h"

static bool read_runs(const study_plan *p, const char *dir, study_run *runs, tlm_err *err) {
    for (int v = 0; v < p->nvariants; v++)
        for (int s = 0; s < p->nseeds; s++) {
            char path[4400];
            snprintf(path, sizeof path, "%s/runs/%s/seed%" PRId64 "/result.json", dir, p->variants[v].name,
                     p->seeds[s]);
            size_t n;
            char *text = study_read_file(path, &n, err);
            if (!text) return false;
            tlm_err e = {""};
            bool ok = study_run_parse(&runs[v * p->nseeds + s], text, n, &e);
            free(text);
            if (!ok) return tlm_fail(err, "%s: %s", path, e.msg);
        }
    return true;
}

/* Each SVG as a PNG beside it, through a temporary renamed into place;
 * a signal the runner records (stop) is passed on to the converter and
 * ends the conversions. */
static void write_pngs(const char *dir, const char *const *plots, int n, const study_stop *stop, FILE *out) {
    char tool[4200];
    bool rsvg = study_which("rsvg-convert", tool, sizeof tool);
    if (!rsvg && !study_which("convert", tool, sizeof tool)) {
        if (out) fprintf(out, "no rsvg-convert or convert on PATH: plots as SVG only\n");
        return;
    }
    for (int i = 0; i < n; i++) {
        char svg[4400], png[4400], tmp[4500], target[4600];
        snprintf(svg, sizeof svg, "%s/%s", dir, plots[i]);
        snprintf(png, sizeof png, "%.*s.png", (int)strlen(svg) - 4, svg);
        snprintf(tmp, sizeof tmp, "%s.tmp", png);
        snprintf(target, sizeof target, "png:%s", tmp);
        char *rsvg_argv[] = {tool, "-o", tmp, svg, NULL};
        char *convert_argv[] = {tool, svg, target, NULL};
        tlm_err e = {""};
        int rc = study_run_child(rsvg ? rsvg_argv : convert_argv, NULL, false, NULL, stop, &e);
        if (stop && stop->count) { /* the runner says it stopped */
            remove(tmp);
            return;
        }
        if (rc == 0 && rename(tmp, png) == 0) continue;
        remove(tmp);
        if (out) fprintf(out, "%s could not convert %s to PNG (exit %d): plots as SVG only\n", tool, svg, rc);
        return; /* the next would fail the same way: said once */
    }
}

/* One line per variant: the first metric's difference and verdict. */
static void print_verdicts(const study_summary *s, FILE *out) {
    if (!s->nmetrics) return;
    const study_metric *m = &s->metrics[0];
    for (int v = 0; v < s->plan->nvariants; v++) {
        if (v == s->baseline) continue;
        const study_paired *d = &s->variants[v].diff[0];
        fprintf(out, "  %-20s %s %+.4f vs %s", s->variants[v].variant->name, m->label, d->mean, s->plan->baseline);
        if (d->has_interval) fprintf(out, " (95%% interval %+.4f .. %+.4f)", d->low, d->high);
        fprintf(out, ": %s\n", study_verdict(d, m->lower_is_better));
    }
}

bool study_finish(const study_plan *p, const char *dir, bool png, const study_stop *stop, FILE *out, tlm_err *err) {
    int nruns = p->nvariants * p->nseeds;
    study_run *runs = calloc((size_t)nruns, sizeof *runs);
    if (!runs) return tlm_fail(err, "out of memory");
    study_summary s = {0};
    char *json = NULL, *md = NULL;
    const char *plots[STUDY_MAX_PLOTS];
    int nplots = 0;
    bool ok = read_runs(p, dir, runs, err) && study_summary_build(&s, p, runs, err);
    if (ok) ok = (nplots = study_plots_write(&s, dir, plots, err)) >= 0;
    if (ok) {
        json = study_report_json(&s), md = study_report_markdown(&s, plots, nplots);
        if (!json || !md) ok = tlm_fail(err, "out of memory");
    }
    char path[4300];
    if (ok) {
        snprintf(path, sizeof path, "%s/results.json", dir);
        ok = tlm_write_file_atomic(path, json, strlen(json), err);
    }
    if (ok) {
        snprintf(path, sizeof path, "%s/results.md", dir);
        ok = tlm_write_file_atomic(path, md, strlen(md), err);
    }
    if (ok && png) write_pngs(dir, plots, nplots, stop, out);
    if (ok && out && !(stop && stop->count)) {
        fprintf(out, "study %s: %d run%s; results in %s/results.md and results.json\n", p->name, nruns,
                nruns == 1 ? "" : "s", dir);
        print_verdicts(&s, out);
    }
    free(json), free(md);
    if (s.variants) study_summary_free(&s);
    for (int i = 0; i < nruns; i++) study_run_free(&runs[i]);
    free(runs);
    return ok;
}
