/* The study library's pieces, driven from tests/study/check.py:
 *   study_tool stats                    t quantiles, incomplete beta, means, sds and
 *                                       paired intervals of fixed numbers, as JSON
 *   study_tool collect DIR VARIANT SEED STEPS HAS_VAL NTEXT NCHOICES NCLOZE
 *                                       DIR's log.jsonl, eval.jsonl and probe.json
 *                                       read as the runner reads them: result.json on stdout
 *   study_tool finish PLAN.json DIR     results.json, results.md and the plots from
 *                                       DIR/runs/VARIANT/seedS/result.json (no PNG)
 *   study_tool last-line FILE           FILE's last line as a failed stage quotes it
 *   study_tool data-change THEN NOW     the file two data listings (data_stamp.h) differ
 *                                       in, as the runner names it, or "none"
 *   study_tool stop-at-start            with the runner's SIGINT handler in place, runs
 *                                       `sleep 5` as a stage runs its program, SIGINT
 *                                       reaching the child as it is forked: the seconds
 *                                       it took
 * Exit 0, or 1 with the library's message. */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data_stamp.h"
#include "files.h"
#include "finish.h"
#include "plan.h"
#include "run_result.h"
#include "spawn.h"
#include "stats.h"

static void put(const char *key, double v, int *n) { printf("%s\"%s\": %.17g", (*n)++ ? ",\n " : "{", key, v); }

static int stats(void) {
    static const double dofs[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 15, 20, 25, 30, 40, 60, 120, 1000, 2.5, 0.5};
    static const double ps[] = {0.975, 0.95, 0.995, 0.9, 0.6, 0.999, 0.025};
    int n = 0;
    char key[64];
    for (size_t i = 0; i < sizeof dofs / sizeof *dofs; i++)
        for (size_t j = 0; j < sizeof ps / sizeof *ps; j++) {
            snprintf(key, sizeof key, "t %g %g", ps[j], dofs[i]);
            put(key, study_t_quantile(ps[j], dofs[i]), &n);
        }
    static const double betas[][3] = {{0.5, 0.5, 0.3}, {2, 3, 0.4}, {10, 0.5, 0.9}, {0.5, 10, 0.01}, {50, 60, 0.45}};
    for (size_t i = 0; i < sizeof betas / sizeof *betas; i++) {
        snprintf(key, sizeof key, "beta %g %g %g", betas[i][0], betas[i][1], betas[i][2]);
        put(key, study_beta_inc(betas[i][0], betas[i][1], betas[i][2]), &n);
    }
    /* validation losses of a baseline and a variant over five seeds */
    static const double base[] = {2.3456, 2.3391, 2.3512, 2.3470, 2.3403};
    static const double var[] = {2.3301, 2.3342, 2.3395, 2.3288, 2.3350};
    for (int k = 1; k <= 5; k++) {
        study_paired d = study_paired_diff(var, base, k, 0.95);
        snprintf(key, sizeof key, "mean %d", k), put(key, study_mean(var, k), &n);
        if (k > 1) {
            snprintf(key, sizeof key, "sd %d", k), put(key, study_sd(var, k), &n);
            snprintf(key, sizeof key, "low %d", k), put(key, d.low, &n);
            snprintf(key, sizeof key, "high %d", k), put(key, d.high, &n);
            snprintf(key, sizeof key, "half %d", k), put(key, d.half_width, &n);
        }
        snprintf(key, sizeof key, "diff %d", k), put(key, d.mean, &n);
        printf(",\n \"verdict %d\": \"%s\"", k, study_verdict(&d, true));
    }
    /* the same difference on both seeds: s_d = 0, a verdict would rest on
     * an interval of no width. An accuracy over four items (exactly equal
     * differences), and losses whose differences are equal in decimal but
     * an ulp apart as doubles. */
    static const double acc_base[] = {0.75, 0.5}, acc_var[] = {0.5, 0.25};
    static const double loss_base[] = {2.3456, 1.3391}, loss_var[] = {2.3323, 1.3258};
    study_paired acc = study_paired_diff(acc_var, acc_base, 2, 0.95);
    study_paired loss = study_paired_diff(loss_var, loss_base, 2, 0.95);
    printf(",\n \"verdict equal accuracy\": \"%s\"", study_verdict(&acc, false));
    printf(",\n \"verdict equal loss\": \"%s\"", study_verdict(&loss, true));
    /* a diverged run: its perplexity overflowed to infinity, or its loss
     * is NaN (a metric the study could not score) */
    static const double diverged_inf[] = {2.3301, INFINITY}, diverged_nan[] = {NAN, 2.3342};
    study_paired inf = study_paired_diff(diverged_inf, base, 2, 0.95);
    study_paired nan_ = study_paired_diff(diverged_nan, base, 2, 0.95);
    printf(",\n \"verdict diverged inf\": \"%s\"", study_verdict(&inf, true));
    printf(",\n \"verdict diverged nan\": \"%s\"", study_verdict(&nan_, true));
    printf("}\n");
    return 0;
}

static int collect(char **argv) {
    study_run r = {.variant = argv[0], .seed = atoll(argv[1]), .steps = atoll(argv[2]), .has_val = atoi(argv[3])};
    int want[STUDY_NKINDS] = {atoi(argv[4]), atoi(argv[5]), atoi(argv[6])};
    tlm_err err = {""};
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", argv[-1]);
    bool ok = study_run_collect(&r, dir, want, &err);
    if (ok) {
        char *json = study_run_json(&r);
        fputs(json, stdout);
        free(json);
    } else fprintf(stderr, "study_tool: %s\n", err.msg);
    r.variant = NULL; /* argv's */
    study_run_free(&r);
    return ok ? 0 : 1;
}

static int finish(const char *plan_path, const char *dir) {
    tlm_err err = {""};
    size_t n;
    char *text = study_read_file(plan_path, &n, &err);
    study_plan plan;
    if (!text || !study_plan_parse(text, n, NULL, &plan, NULL, &err)) {
        fprintf(stderr, "study_tool: %s\n", err.msg);
        free(text);
        return 1;
    }
    free(text);
    bool ok = study_finish(&plan, dir, false, NULL, stdout, &err);
    study_plan_free(&plan);
    if (!ok) fprintf(stderr, "study_tool: %s\n", err.msg);
    return ok ? 0 : 1;
}

static study_stop recorded;
static void record(int sig) { recorded.sig = sig, recorded.count++; }
static void interrupt_child(void) { raise(SIGINT); }

/* A Ctrl-C that reaches a child the moment it is forked must end it:
 * between fork and its default actions, the child ran the runner's handler
 * (the signal recorded in its own copy, then lost at exec) and the program
 * ran to its end. The child here gets SIGINT in its first instant (an
 * atfork handler), so the window is hit every time, not by chance. */
static int stop_at_start(void) {
    struct sigaction sa = {.sa_handler = record};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    pthread_atfork(NULL, NULL, interrupt_child);
    recorded.sig = 0, recorded.count = 0; /* the child's own SIGINT only: none passed on after */
    char *argv[] = {"sleep", "5", NULL};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    tlm_err err = {""};
    int rc = study_run_child(argv, NULL, false, NULL, &recorded, &err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%.2f s, exit %d\n", (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec), rc);
    return 0;
}

/* Two data listings (data_stamp.h) compared as the runner compares a
 * run's with the study's now. */
static int data_change(const char *then_path, const char *now_path) {
    size_t n;
    tlm_err err;
    char *then = study_read_file(then_path, &n, &err), *now = then ? study_read_file(now_path, &n, &err) : NULL;
    if (!now) {
        fprintf(stderr, "study_tool: %s\n", err.msg);
        free(then);
        return 1;
    }
    char why[4096];
    printf("%s\n", study_data_change(then, now, why, sizeof why) ? why : "none");
    free(then), free(now);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "stats")) return stats();
    if (argc == 10 && !strcmp(argv[1], "collect")) return collect(argv + 3);
    if (argc == 4 && !strcmp(argv[1], "finish")) return finish(argv[2], argv[3]);
    if (argc == 2 && !strcmp(argv[1], "stop-at-start")) return stop_at_start();
    if (argc == 3 && !strcmp(argv[1], "last-line")) {
        char last[1024];
        study_last_line(argv[2], last, sizeof last);
        printf("%s\n", last);
        return 0;
    }
    if (argc == 4 && !strcmp(argv[1], "data-change")) return data_change(argv[2], argv[3]);
    fprintf(stderr, "usage: study_tool stats | collect DIR VARIANT SEED STEPS HAS_VAL NTEXT NCHOICES NCLOZE | "
                    "finish PLAN.json DIR | last-line FILE | stop-at-start | data-change THEN NOW\n");
    return 2;
}
