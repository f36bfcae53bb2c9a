/* tlm-run study: run a study declared in a .tlm file (docs/studies.md):
 * the plan from tlmc, then runtime/study's runner. This file holds the
 * flags, the overrides and the defaults only the command line knows (the
 * bundled validation text, the cores, the output folder's name). */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "args.h"
#include "commands.h"
#include "corpus.h"
#include "device.h"
#include "device_flag.h"
#include "files.h"
#include "gpu_model.h"
#include "launcher.h"
#include "load.h"
#include "locate.h"
#include "plan.h"
#include "runner.h"
#include "spawn.h"
#include "tlm_rt/json.h"

enum { DEFAULT_EVAL_TOKENS = 65536 };

static void usage(FILE *out) {
    fputs("usage: tlm-run study FILE.tlm [--study NAME] [options]\n"
          "\n"
          "Runs a study declared in FILE.tlm: compiles every variant, trains every (variant,\n"
          "seed), evaluates each run, and writes results.md, results.json and plots into the\n"
          "study's folder. Killed or interrupted, the same command continues where it stopped.\n"
          "  --study NAME       the study to run (default: the file's only one)\n"
          "  --steps N          train N steps instead of the study's count\n"
          "  --seeds K          K seeds: the study's first K (then the next unused numbers)\n"
          "  --jobs J           runs at a time (default 1)\n"
          "  --threads N        CPU threads in all, N/J per run (default: all cores)\n"
          "  --out DIR          the study's folder (default studies/NAME, with -stepsN,\n"
          "                     -seedsK and -eval-tokensN when those are overridden, and\n"
          "                     -cuda or -cuda-fp32 on a GPU)\n"
          "  --eval-tokens N    evaluate at most N tokens of each text (default: the study's,\n"
          "                     else 65536)\n"
          "  --device D         cpu (default) or cuda[:N]: where every run trains and\n"
          "                     evaluates (a folder's runs continue only where they began)\n"
          "  --precision P      on a GPU: bf16 (default) or fp32\n"
          "  --force            DIR holds another run of the study (other steps, seeds or\n"
          "                     plan), a plan.json that cannot be read, or files but no\n"
          "                     plan.json: discard its runs and results and start over\n"
          "                     (other files are kept). A plan that only adds variants or\n"
          "                     seeds to DIR's needs none: its runs are kept\n"
          "  --plan-file FILE   read the plan from FILE instead of asking tlmc (tests)\n"
          "\n"
          "tlmc is $TLMC, else the one beside tlm-run (or in its build tree), else on PATH.\n"
          "Exit status: 0 ok, 1 error (a file, a failed run, a folder of another plan),\n"
          "2 bad usage, 130/143/129 interrupted by SIGINT/SIGTERM/SIGHUP (run the command\n"
          "again to continue).\n",
          out);
}

static study_stop stop;

/* Each signal counted: the first stops the runs at a checkpoint, a second
 * at once, a third kills them. A SIGHUP after the first is not counted (a
 * terminal that goes away sends two: the shell's and the kernel's). */
static void on_signal(int sig) {
    static const char msg[] = "tlm-run study: stopping the runs at a checkpoint (signal again to stop them at once)\n";
    if (stop.count && sig == SIGHUP) return;
    if (!stop.count) {
        ssize_t written = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)written; /* the message is a courtesy: nothing to do if it failed */
    }
    stop.sig = sig;
    stop.count++;
}

/* The line and the exit status of a study stopped by a signal, wherever it
 * stopped (planning, compiling, training). */
static int stopped(void) {
    fprintf(stderr, "tlm-run study: stopped (%s); the runs kept their checkpoints: run the same command to continue\n",
            cli_signal_name(stop.sig));
    return 128 + stop.sig;
}

/* tlmc's diagnostics say what is wrong with the file: a compiler's
 * (file:line:col, the line, a caret) pass on as they are; one line of its
 * own ("tlmc: ...", "error: ...") is said as this command's; a line of ours
 * when it said nothing. */
static void pass_on_diagnostics(const char *diag, size_t m, const char *tlmc, const char *file, int rc) {
    const char *nl = diag ? memchr(diag, '\n', m) : NULL;
    bool one_line = m && (!nl || (size_t)(nl - diag) + 1 == m);
    const char *own[] = {"tlmc: ", "error: "};
    for (int i = 0; one_line && i < 2; i++)
        if (!strncmp(diag, own[i], strlen(own[i]))) {
            const char *rest = diag + strlen(own[i]);
            cli_error("study", "%.*s", (int)(nl ? (size_t)(nl - rest) : strlen(rest)), rest);
            return;
        }
    if (m) fputs(diag, stderr);
    else cli_error("study", "%s could not plan %s (exit %d)", tlmc, file, rc);
}

/* Runs `tlmc FILE --plan [--study NAME]` and returns its output (malloc'd),
 * or NULL after printing why (tlmc's diagnostics as they came; nothing
 * when a signal stopped it: the caller says so). Its two temporary files,
 * in $TMPDIR or /tmp, are removed either way. */
static char *plan_from_tlmc(const char *tlmc, const char *file, const char *study, size_t *n, int *status) {
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    char out[4200], errs[4200];
    snprintf(out, sizeof out, "%s/tlm-study-plan.XXXXXX", dir);
    snprintf(errs, sizeof errs, "%s/tlm-study-plan-err.XXXXXX", dir);
    int fo = mkstemp(out), fe = fo >= 0 ? mkstemp(errs) : -1;
    if (fo < 0 || fe < 0) {
        cli_error("study", "cannot create a temporary file in %s: %s", dir, strerror(errno));
        if (fo >= 0) close(fo), unlink(out);
        return NULL;
    }
    close(fo), close(fe);
    char *argv[] = {(char *)tlmc, (char *)file, "--plan", study ? "--study" : NULL, (char *)study, NULL};
    tlm_err err = {""};
    int rc = study_run_child(argv, out, false, errs, &stop, &err);
    char *text = NULL;
    *status = 1;
    if (stop.count) {
        /* stopped: the caller says so, and what tlmc made of it is moot */
    } else if (rc < 0) cli_error("study", "%s", err.msg);
    else if (rc > 0) {
        if (rc == 2) *status = 2; /* a usage error (no such --study) stays one */
        size_t m = 0;
        char *diag = study_read_file(errs, &m, &err);
        pass_on_diagnostics(diag, m, tlmc, file, rc);
        free(diag);
    } else if (!(text = study_read_file(out, n, &err))) cli_error("study", "%s", err.msg);
    unlink(out), unlink(errs);
    return text;
}

/* --seeds K: the plan's first K seeds, then the smallest numbers not used. */
static void take_seeds(study_plan *p, int k) {
    int have = p->nseeds < k ? p->nseeds : k;
    int64_t next = 1;
    p->nseeds = have;
    while (p->nseeds < k) {
        bool used = false;
        for (int i = 0; i < p->nseeds; i++) used |= p->seeds[i] == next;
        if (!used) p->seeds[p->nseeds++] = next;
        next++;
    }
}

/* A flag's value that names a path (or the study): an empty one would
 * name the current folder or, joined with "/", the root ("--out ''" put
 * the study into /), so it is a usage error. */
static bool non_empty(cli_args *a, const char **out) {
    if (!a->val[0]) {
        cli_usage_error("study", "%s is empty: it needs a value", a->flag);
        return false;
    }
    *out = a->val;
    return true;
}

/* The folder without its trailing slashes ("A/" gives "A/results.md", not
 * "A//results.md"); "/" stays "/"; as the runs' commands can take it.
 * false when it does not fit. */
static bool folder_name(const char *path, char *out, size_t n) {
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/') len--;
    return study_child_path(path, len, out, n);
}

enum {
    OPT_STUDY = 256,
    OPT_STEPS,
    OPT_SEEDS,
    OPT_JOBS,
    OPT_THREADS,
    OPT_OUT,
    OPT_EVAL_TOKENS,
    OPT_FORCE,
    OPT_PLAN,
    OPT_DEVICE,
    OPT_PRECISION
};
static const struct option long_options[] = {
    {"help", no_argument, NULL, 'h'},
    {"study", required_argument, NULL, OPT_STUDY},
    {"steps", required_argument, NULL, OPT_STEPS},
    {"seeds", required_argument, NULL, OPT_SEEDS},
    {"jobs", required_argument, NULL, OPT_JOBS},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"out", required_argument, NULL, OPT_OUT},
    {"eval-tokens", required_argument, NULL, OPT_EVAL_TOKENS},
    {"force", no_argument, NULL, OPT_FORCE},
    {"plan-file", required_argument, NULL, OPT_PLAN},
    {"device", required_argument, NULL, OPT_DEVICE},
    {"precision", required_argument, NULL, OPT_PRECISION},
    {NULL, 0, NULL, 0},
};

/* What the command line asks for. */
typedef struct study_flags {
    const char *file, *study, *out, *plan_file; /* out: without trailing slashes, or NULL */
    const char *device;                         /* NULL or "cpu": the CPU */
    tlm_precision precision;                    /* resolved for the device */
    int64_t steps, seeds, jobs, threads, eval_tokens;
    bool force;
} study_flags;

/* The plan, the overrides and the run, with the signal handlers in place. */
static int run_study(const study_flags *f, const char *tlmc, const char *self) {
    size_t n;
    tlm_err err = {""};
    int status = 1;
    char *text =
        f->plan_file ? study_read_file(f->plan_file, &n, &err) : plan_from_tlmc(tlmc, f->file, f->study, &n, &status);
    if (stop.count) {
        free(text);
        return stopped();
    }
    if (!text) return f->plan_file ? cli_error("study", "%s", err.msg) : status;
    study_plan plan;
    study_plan_fault fault;
    bool ok = study_plan_parse(text, n, f->study, &plan, &fault, &err);
    free(text);
    if (!ok && fault == STUDY_PLAN_BAD_CHOICE)
        return cli_usage_error("study", "%s: %s", f->plan_file ? f->plan_file : f->file, err.msg);
    /* tlmc prints JSON or fails: output that is no JSON at all is tlmc's
     * fault (a $TLMC that is another program), not the file's */
    if (!ok && fault == STUDY_PLAN_NOT_JSON && !f->plan_file)
        return cli_error("study", "%s --plan %s printed no study plan (%s): is it tlmc, and of this version?", tlmc,
                         f->file, err.msg);
    if (!ok) return cli_error("study", "%s: %s", f->plan_file ? f->plan_file : f->file, err.msg);
    if (f->file && f->plan_file) {
        free(plan.file);
        plan.file = strdup(f->file);
    }

    if (f->steps) plan.steps = f->steps;
    if (f->seeds) take_seeds(&plan, (int)f->seeds);
    if (f->eval_tokens) plan.eval_tokens = f->eval_tokens;
    else if (!plan.eval_tokens) plan.eval_tokens = DEFAULT_EVAL_TOKENS;
    const bool gpu = !device_flag_is_cpu(f->device);
    if (gpu) {
        free(plan.device), free(plan.precision);
        plan.device = strdup("cuda");
        plan.precision = strdup(tlm_precision_name(f->precision));
        if (!plan.device || !plan.precision) {
            study_plan_free(&plan);
            return cli_error("study", "out of memory");
        }
    }
    char bundled[CORPUS_MAX_DEFAULT][4096];
    if (!plan.val && !plan.data) { /* train's default validation text, named so eval and probe use it too */
        corpus_default_files(CORPUS_VALID, bundled);
        plan.val = strdup(bundled[0]);
    }
    /* said before hours of training, not found in the results: without a
     * text or set to score, only probe's rho (on the training data) and the
     * widths compare the variants */
    if (!plan.val && !plan.neval && !plan.nchoices && !plan.ncloze)
        printf("note: study %s trains on %s and scores no text or set (no val, eval, choices or cloze): its "
               "results compare the variants' rho and widths only, no loss\n",
               plan.name, plan.data);
    char folder[4200];
    const char *out = f->out;
    if (!out) {
        int k = snprintf(folder, sizeof folder, "studies/%s", plan.name);
        if (f->steps) k += snprintf(folder + k, sizeof folder - (size_t)k, "-steps%" PRId64, f->steps);
        if (f->seeds) k += snprintf(folder + k, sizeof folder - (size_t)k, "-seeds%" PRId64, f->seeds);
        if (f->eval_tokens)
            k += snprintf(folder + k, sizeof folder - (size_t)k, "-eval-tokens%" PRId64, f->eval_tokens);
        if (gpu)
            snprintf(folder + k, sizeof folder - (size_t)k, "-cuda%s",
                     f->precision == TLM_PRECISION_FP32 ? "-fp32" : "");
        out = folder;
    }
    int64_t threads = f->threads ? f->threads : cli_cores();
    study_options o = {.tlmc = tlmc,
                       .tlm_run = self,
                       .out = out,
                       .jobs = (int)f->jobs,
                       .threads = threads / f->jobs > 0 ? (int)(threads / f->jobs) : 1,
                       .device = gpu ? f->device : NULL,
                       .force = f->force,
                       .progress = stdout,
                       .stop = &stop};
    study_outcome outcome = study_execute(&plan, &o, &err);
    study_plan_free(&plan);
    switch (outcome) {
    case STUDY_DONE: return 0;
    case STUDY_STOPPED: return stopped();
    case STUDY_REFUSED:
    case STUDY_FAILED: break;
    }
    return cli_error("study", "%s", err.msg);
}

int cmd_study(int argc, char **argv) {
    study_flags f = {.jobs = 1};
    const char *precision = NULL;
    char folder[4200], file[4200];
    cli_args a = {.cmd = "study", .argc = argc, .argv = argv};
    int opt;
    while ((opt = cli_getopt(&a, "h", long_options)) != -1) {
        bool ok = true;
        switch (opt) {
        case 'h': usage(stdout); return 0;
        case OPT_STUDY: ok = non_empty(&a, &f.study); break;
        case OPT_STEPS: ok = cli_int(&a, 1, (int64_t)1 << 40, &f.steps); break;
        case OPT_SEEDS: ok = cli_int(&a, 1, STUDY_MAX_SEEDS, &f.seeds); break;
        case OPT_JOBS: ok = cli_int(&a, 1, 256, &f.jobs); break;
        case OPT_THREADS: ok = cli_int(&a, 1, 4096, &f.threads); break;
        case OPT_OUT:
            if (!(ok = non_empty(&a, &f.out) && cli_value_not_option(&a))) break;
            /* the runs' checkpoints record their log's path in their
             * settings (JSON): train would refuse it after the compiles */
            if (!tlm_json_valid_utf8(f.out, strlen(f.out)))
                return cli_usage_error("study",
                                       "--out %s: the path is not UTF-8, which the runs' checkpoints (their "
                                       "settings, JSON) cannot hold; name another folder",
                                       f.out);
            if (!folder_name(f.out, folder, sizeof folder))
                return cli_usage_error("study", "--out: the path is too long");
            f.out = folder;
            break;
        case OPT_EVAL_TOKENS: ok = cli_int(&a, 1, (int64_t)1 << 40, &f.eval_tokens); break;
        case OPT_FORCE: f.force = true; break;
        case OPT_PLAN: ok = non_empty(&a, &f.plan_file) && cli_value_not_option(&a); break;
        case OPT_DEVICE:
            if (device_flag_check("study", a.val)) return 2;
            f.device = a.val;
            break;
        case OPT_PRECISION:
            if (precision_flag_check("study", a.val)) return 2;
            precision = a.val;
            break;
        case 1:
            if (f.file) return cli_usage_error("study", "one FILE.tlm only (got `%s` and `%s`)", f.file, a.val);
            if (!a.val[0]) return cli_usage_error("study", "FILE.tlm is empty: it needs a path");
            if (!study_child_path(a.val, strlen(a.val), file, sizeof file))
                return cli_usage_error("study", "FILE.tlm: the path is too long");
            f.file = file;
            break;
        default: return 2; /* reported by cli_getopt */
        }
        if (!ok) return 2;
    }
    if (!f.file && !f.plan_file) return cli_usage_error("study", "no FILE.tlm given");
    if (precision_flag_resolve("study", f.device, precision, &f.precision)) return 2;
    /* a GPU that cannot be opened is said once, before anything compiles,
     * not by the first run's training */
    tlm_device *dev = NULL;
    if (device_flag_open("study", f.device, &dev)) return 1;
    if (dev) tlm_device_close(dev);
    tlm_err bad = {""}; /* and a GPU switch every run would refuse, before the compiles too */
    if (dev && !tlm_gpu_settings_ok(&bad)) return cli_error("study", "%s", bad.msg);

    char self[4096], tlmc[4200];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return cli_error("study", "cannot find this program's path (/proc/self/exe): %s", strerror(errno));
    self[len] = '\0';
    tlm_err err = {""};
    if (!study_find_tlmc(self, tlmc, sizeof tlmc, &err)) return cli_error("study", "%s", err.msg);

    /* A study started by mpirun or srun is one process, not one of their
     * ranks, and neither are the trainings it starts: they would each
     * take the launcher's variables for theirs (docs/studies.md). */
    const char *launcher;
    int ranks = tlm_launcher_size(&launcher);
    if (ranks > 1)
        return cli_usage_error("study",
                               "started as one of %d processes (%s): a study is one process, whose runs it starts "
                               "itself (--jobs runs them side by side); start it alone, or with -np 1",
                               ranks, launcher);
    tlm_launcher_forget();

    /* From here a signal stops the study wherever it is, the planning
     * included (its temporary files are removed), with one line: SIGHUP
     * (the terminal gone) too, unless it is ignored (nohup). */
    struct sigaction sa = {.sa_handler = on_signal}, old_int, old_term, old_hup;
    sigemptyset(&sa.sa_mask); /* one at a time: each counted */
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    sigaddset(&sa.sa_mask, SIGHUP);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGHUP, NULL, &old_hup);
    if (old_hup.sa_handler != SIG_IGN) sigaction(SIGHUP, &sa, NULL);
    int rc = run_study(&f, tlmc, self);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGHUP, &old_hup, NULL);
    return rc;
}
