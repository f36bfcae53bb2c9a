/* Running a study: the folder, the plan it was made for, the pool of runs
 * and each run's stages (runner.h). */
#include "runner.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <math.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "compile.h"
#include "data_stamp.h"
#include "files.h"
#include "finish.h"
#include "progress.h"
#include "run_result.h"
#include "sha256.h"
#include "spawn.h"

/* ---- the folder and its plan ---- */

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* Removes what of OUT's entries exist (none past the first that cannot be
 * removed). */
static bool remove_entries(const study_options *o, const char *const *gone, size_t ngone, tlm_err *err) {
    char path[4200];
    for (size_t i = 0; i < ngone; i++) {
        snprintf(path, sizeof path, "%s/%s", o->out, gone[i]);
        if (study_exists(path) && nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
            return tlm_fail(err, "%s: cannot remove it: %s", path, strerror(errno));
    }
    return true;
}

/* Removes what a run of another plan left (force): the runs and the
 * results; the models stay, their hashes tell whether they still fit. */
static bool discard_runs(const study_options *o, tlm_err *err) {
    static const char *const gone[] = {"runs", "results.json", "results.md"};
    return remove_entries(o, gone, sizeof gone / sizeof *gone, err);
}

/* A plan that grew the folder's (check_plan, study_plan_grown). */
typedef struct grown_plan {
    const char *json; /* the new plan.json; NULL: the plan did not grow */
    char what[1024];  /* what it added */
} grown_plan;

/* The folder takes the grown plan g: the old plan's summary goes
 * (study_finish makes the new one's at the end; the plots are replaced
 * then too), and plan.json becomes the new plan. Done once every check
 * before training has passed, so that a growth refused or stopped before
 * then leaves the folder as it was. */
static bool adopt_grown_plan(const study_options *o, const grown_plan *g, study_progress *pr, tlm_err *err) {
    static const char *const gone[] = {"results.json", "results.md"};
    char path[4200];
    snprintf(path, sizeof path, "%s/plan.json", o->out);
    if (!remove_entries(o, gone, sizeof gone / sizeof *gone, err) ||
        !tlm_write_file_atomic(path, g->json, strlen(g->json), err))
        return false;
    study_progress_event(pr, "%s: the study grew (%s): its runs are kept, and the new ones trained", o->out, g->what);
    return true;
}

/* One study at a time per folder: two runners would train the same runs
 * (one of them failing on train's checkpoint lock, with the other's last
 * line for a reason), compile the same models at once, and a --force
 * would discard the runs the other is training. The lock is on the folder
 * itself, so a folder of other files gains nothing; it goes with the
 * process (a runner killed with SIGKILL holds it no more). Returns the
 * descriptor that holds it, -1 with err set. */
static int lock_folder(const char *out, tlm_err *err) {
    if (!study_make_dirs(out, err)) return -1;
    int fd = open(out, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return tlm_fail(err, "%s: cannot open the folder: %s", out, strerror(errno)), -1;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
    int why = errno;
    close(fd);
    if (why == EWOULDBLOCK)
        tlm_fail(err, "%s is in use by another tlm-run study (one study at a time runs in a folder)", out);
    else tlm_fail(err, "%s: cannot lock the folder: %s", out, strerror(why));
    return -1;
}

/* Whether the folder out holds anything but what a first start could have
 * left before its plan.json was in place (a temporary plan.json.*), and
 * its first such entry: a folder of files the study did not make is not
 * taken over without force. false with err set when it cannot be read. */
static bool foreign_files(const char *out, char *example, size_t n, tlm_err *err) {
    DIR *d = opendir(out);
    if (!d) {
        tlm_fail(err, "%s: cannot read the folder: %s", out, strerror(errno));
        return false;
    }
    bool found = false;
    for (struct dirent *e; !found && (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strncmp(e->d_name, "plan.json.", 10)) {
            snprintf(example, n, "%s", e->d_name);
            found = true;
        }
    closedir(d);
    return found;
}

/* OUT/plan.json is the plan OUT was made for: another one, an unreadable
 * one, or none in a folder that holds files is refused (force: the old runs
 * and results are removed, the models kept: their hashes tell whether they
 * still fit; other files are left alone). The plan that one grew
 * (study_plan_grown: variants or seeds added) is not another: grown->json
 * is set (else NULL), the runs stay, and plan.json is left for
 * adopt_grown_plan (force or not: force overrides refusals, and there is
 * none). */
static bool check_plan(const study_plan *plan, const char *json, const study_options *o, grown_plan *grown,
                       bool *refused, tlm_err *err) {
    char path[4200], what[1024] = "";
    grown->json = NULL;
    if (!study_make_dirs(o->out, err)) return false; /* nothing in it yet when it is new */
    snprintf(path, sizeof path, "%s/plan.json", o->out);
    size_t n;
    tlm_err e = {""};
    char *old = study_read_file(path, &n, &e);
    if (!old && errno != ENOENT) return tlm_fail(err, "%s", e.msg);
    if (!old) {
        char example[256];
        e.msg[0] = '\0';
        if (foreign_files(o->out, example, sizeof example, &e) && !o->force) {
            *refused = true;
            return tlm_fail(err,
                            "%s is not empty (%.100s) and holds no study (no plan.json); use another --out, or "
                            "--force to put the study in it (removing its runs/, results.json and results.md)",
                            o->out, example);
        }
        if (e.msg[0]) return tlm_fail(err, "%s", e.msg);
        if (o->force && !discard_runs(o, err)) return false;
    } else if (strcmp(old, json) != 0) {
        study_plan prev;
        bool grew = false;
        if (study_plan_parse(old, n, NULL, &prev, NULL, &e)) {
            grew = study_plan_grown(&prev, plan, what, sizeof what);
            study_plan_free(&prev);
        }
        free(old);
        if (grew) {
            grown->json = json;
            snprintf(grown->what, sizeof grown->what, "%s", what);
            return true;
        }
        if (!o->force) {
            *refused = true;
            if (!what[0])
                return tlm_fail(err,
                                "%s cannot be read as a study's plan (%s); use another --out, or --force to "
                                "discard the folder's runs and start over",
                                path, e.msg);
            return tlm_fail(err,
                            "%s holds another run of this study: %s; use another --out, or --force to discard "
                            "its runs and start over",
                            o->out, what);
        }
        if (o->progress)
            fprintf(o->progress, "%s: --force: discarding its runs and results (%s)\n", o->out,
                    what[0] ? what : "its plan.json cannot be read");
        if (!discard_runs(o, err)) return false;
    } else free(old);
    return tlm_write_file_atomic(path, json, strlen(json), err);
}

/* ---- runs ---- */

enum stage { STAGE_TRAIN, STAGE_EVAL, STAGE_PROBE, STAGE_DONE };
static const char *const stage_names[] = {"training", "evaluation", "probe"};

typedef struct run {
    const study_variant *variant;
    int64_t seed;
    char dir[4200], model[4400];
    const char *model_digest; /* the SHA-256 of model (hex): what its training is recorded against */
    const char *data_stamp;   /* the study's data (data_stamp.h): what it is trained and scored on */
    const char *data_listing; /* the same, a line a file: kept in the run to name a file changed since */
    enum stage stage;
    bool resumed; /* its training went on from a checkpoint */
    pid_t pid;
    double started;
} run;

static void path_in(char *out, size_t n, const run *r, const char *name) { snprintf(out, n, "%s/%s", r->dir, name); }

static int want_of(const study_plan *p, int want[STUDY_NKINDS]) {
    want[STUDY_TEXT] = p->neval + (p->val != NULL);
    want[STUDY_CHOICES] = p->nchoices;
    want[STUDY_CLOZE] = p->ncloze;
    return want[STUDY_TEXT] + want[STUDY_CHOICES] + want[STUDY_CLOZE];
}

/* The file `name` of the run's folder (malloc'd, *n bytes), or NULL when
 * it cannot be read: a file a run has not written yet. */
static char *read_in_run(const run *r, const char *name, size_t *n) {
    char path[4300];
    path_in(path, sizeof path, r, name);
    tlm_err e;
    return study_read_file(path, n, &e);
}

/* A result.json that belongs to this run of this plan. */
static bool result_valid(const study_plan *p, const run *r) {
    size_t n;
    tlm_err e;
    char *text = read_in_run(r, "result.json", &n);
    if (!text) return false;
    study_run res;
    bool ok = study_run_parse(&res, text, n, &e);
    free(text);
    if (!ok) return false;
    int want[STUDY_NKINDS];
    want_of(p, want);
    ok = !strcmp(res.variant, r->variant->name) && res.seed == r->seed && res.steps == p->steps &&
         res.has_val == (p->val != NULL);
    for (int k = 0; k < STUDY_NKINDS; k++) ok = ok && res.nscores[k] == want[k];
    study_run_free(&res);
    return ok;
}

/* ---- which model a run was trained with ---- */

/* A run's model.sha256 holds the SHA-256 of the model.so its training
 * started from (study_file_sha256). A model compiled again from a changed
 * recipe (another learning rate in the .tlm file, another tlmc) is another
 * model: the run's checkpoint and result are of the old one, and reusing
 * them would report the old recipe's numbers as the new one's (a resume
 * would even go on with the old settings, which come from the
 * checkpoint). tlmc's output does not change with comments, so an edit
 * that changes nothing keeps the runs. */

/* The record's line: the model's digest, the data's stamp, then the seed;
 * first the stamp's listing beside it (data.listing), whose lines name the
 * file of a stamp that no longer matches. */
static bool record_model(const run *r, tlm_err *err) {
    char path[4300], line[200];
    path_in(path, sizeof path, r, "data.listing");
    if (!tlm_write_file_atomic(path, r->data_listing, strlen(r->data_listing), err)) return false;
    path_in(path, sizeof path, r, "model.sha256");
    int len = snprintf(line, sizeof line, "%s %s %" PRId64 "\n", r->model_digest, r->data_stamp, r->seed);
    return tlm_write_file_atomic(path, line, (size_t)len, err);
}

static bool is_hex64(const char *s, size_t n) {
    if (n < 64) return false;
    for (int i = 0; i < 64; i++)
        if (!s[i] || !strchr("0123456789abcdef", s[i])) return false;
    return true;
}

/* A run's record, as record_model writes it: the model's SHA-256, then
 * (records since the data was stamped) a space and the data's stamp, then
 * (since the seed was added) a space and the seed, and a newline. */
typedef struct record {
    const char *model, *stamp; /* 64 hex digits each; stamp NULL: none */
    bool seeded;
    long long seed;
} record;

/* false when text[0, n) is not a record (NUL-terminated, as study_read_file gives it) */
static bool parse_record(const char *text, size_t n, record *r) {
    *r = (record){text, NULL, false, 0};
    if (!is_hex64(text, n)) return false;
    size_t i = 64;
    if (i < n && text[i] == ' ') {
        if (!is_hex64(text + i + 1, n - i - 1)) return false;
        r->stamp = text + i + 1, i += 65;
        if (i < n && text[i] == ' ') {
            if (i + 1 >= n || text[i + 1] < '0' || text[i + 1] > '9') return false;
            char *end;
            errno = 0;
            r->seed = strtoll(text + i + 1, &end, 10), r->seeded = true;
            if (errno) return false;
            i = (size_t)(end - text);
        }
    }
    return i == n || (text[i] == '\n' && i + 1 == n);
}

/* Whether the run holds a training of something else than r's model on
 * the study's data with r's seed, and why (in why[n]): its record names
 * another model, another data stamp or another seed (a folder copied from
 * another run), or cannot be read as a record (*damaged). A run without a
 * record (nothing trained yet, or a folder made before runs kept one) is
 * taken as it is, and so is a record without a stamp or a seed (made
 * before runs kept them: train's --seed, given on every resume, still
 * refuses another seed's checkpoint), and a run with neither a checkpoint
 * nor a result (its training failed first): it trains again. */
static bool trained_on_another(const run *r, char *why, size_t n_why, bool *damaged) {
    /* a run whose training left nothing (it failed before its first
     * checkpoint: a diverged run) holds nothing of the old recipe to keep */
    char ckpt[4300], result[4300];
    *damaged = false;
    why[0] = '\0';
    path_in(ckpt, sizeof ckpt, r, "checkpoint.safetensors");
    path_in(result, sizeof result, r, "result.json");
    if (!study_exists(ckpt) && !study_exists(result)) return false;
    size_t n;
    char *text = read_in_run(r, "model.sha256", &n);
    if (!text) return false;
    record rec;
    if (!parse_record(text, n, &rec)) {
        *damaged = true;
        snprintf(why, n_why,
                 "its record model.sha256 is damaged (not the model's SHA-256, the data's stamp and the seed)");
    } else if (strncmp(rec.model, r->model_digest, 64) != 0)
        snprintf(why, n_why, "another model (its recipe changed since: the .tlm file, a module it uses, or tlmc)");
    else if (rec.stamp && strncmp(rec.stamp, r->data_stamp, 64) != 0) {
        size_t n_listing;
        char *listing = read_in_run(r, "data.listing", &n_listing), change[4300];
        if (listing && study_data_change(listing, r->data_listing, change, sizeof change))
            snprintf(why, n_why, "other data (%s)", change);
        else snprintf(why, n_why, "other data (a data, validation or evaluation file changed since)");
        free(listing);
    } else if (rec.seeded && rec.seed != r->seed)
        snprintf(why, n_why, "seed %lld in %s, the folder of seed %lld (a copy of another seed's run)", rec.seed,
                 r->dir, (long long)r->seed);
    free(text);
    return why[0] != '\0';
}

/* Runs trained on another model or data than their variant's now: refused,
 * naming the first, or with force removed, to be trained again. */
static bool discard_stale_runs(run *runs, int nruns, const study_options *o, study_progress *pr, bool *refused,
                               tlm_err *err) {
    for (int i = 0; i < nruns; i++) {
        run *r = &runs[i];
        bool damaged;
        char why[4400];
        if (!trained_on_another(r, why, sizeof why, &damaged)) continue;
        if (!o->force) {
            *refused = true;
            if (damaged)
                return tlm_fail(err,
                                "%s: the run of variant %s seed %" PRId64
                                " cannot be checked: %s; use another --out, or --force to discard that run and "
                                "train it again",
                                r->dir, r->variant->name, r->seed, why);
            return tlm_fail(err,
                            "%s holds runs of variant %s trained on %s; use another --out, or --force to discard "
                            "those runs and train them again",
                            o->out, r->variant->name, why);
        }
        study_progress_event(pr, "--force: discarding the run of variant %s seed %" PRId64 " (%s%s)", r->variant->name,
                             r->seed, damaged ? "" : "trained on ", why);
        if (nftw(r->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
            return tlm_fail(err, "%s: cannot remove it: %s", r->dir, strerror(errno));
    }
    return true;
}

/* The arguments of the run's current stage; strings live in buf. */
typedef struct args {
    char *argv[128];
    int argc;
    char buf[8][64];
    int nbuf;
} args;

static void add(args *a, const char *s) {
    if (a->argc < 126) a->argv[a->argc++] = (char *)s;
    a->argv[a->argc] = NULL;
}

static const char *num(args *a, int64_t v) {
    snprintf(a->buf[a->nbuf], sizeof a->buf[0], "%" PRId64, v);
    return a->buf[a->nbuf++];
}

/* --device and --precision for a run's train, eval and probe, where the
 * study runs on a GPU. */
static void device_args(args *a, const study_plan *p, const study_options *o) {
    if (!p->device) return;
    add(a, "--device"), add(a, o->device ? o->device : p->device);
    add(a, "--precision"), add(a, p->precision);
}

static void train_args(args *a, const study_plan *p, const study_options *o, const run *r, const char *log,
                       bool resume) {
    add(a, o->tlm_run), add(a, "train"), add(a, r->model), add(a, "--ckpt"), add(a, r->dir);
    if (p->steps) add(a, "--steps"), add(a, num(a, p->steps));
    /* the log named each time: a checkpoint records the path it was given,
     * which names another folder once the study's folder is moved or
     * copied (or the command is run from elsewhere), and a resume would
     * rewrite that folder's log */
    add(a, "--log"), add(a, log);
    if (resume) {
        /* everything else comes from the checkpoint, the threads included: a
         * resumed run repeats an uninterrupted one bit for bit; the seed is
         * named so that train refuses another seed's checkpoint */
        add(a, "--resume"), add(a, "--seed"), add(a, num(a, r->seed));
        device_args(a, p, o); /* not a checkpoint's setting: named each time */
        return;
    }
    add(a, "--overwrite"), add(a, "--seed"), add(a, num(a, r->seed));
    add(a, "--threads"), add(a, num(a, o->threads));
    device_args(a, p, o);
    if (p->batch) add(a, "--batch"), add(a, num(a, p->batch));
    if (p->context) add(a, "--context"), add(a, num(a, p->context));
    if (p->data) add(a, "--data"), add(a, p->data);
    if (p->val) add(a, "--val"), add(a, p->val);
}

/* What eval scores: the validation text, the evaluation texts, the
 * multiple-choice and cloze sets. */
static void evaluated_sets(args *a, const study_plan *p) {
    if (p->val) add(a, "--data"), add(a, p->val);
    for (int i = 0; i < p->neval; i++) add(a, "--data"), add(a, p->eval[i]);
    for (int i = 0; i < p->nchoices; i++) add(a, "--choices"), add(a, p->choices[i]);
    for (int i = 0; i < p->ncloze; i++) add(a, "--cloze"), add(a, p->cloze[i]);
}

/* Every variant's evaluation texts and sets read and checked against its
 * model (`tlm-run eval --check`: a text shorter than a window, a set
 * with no items or with a byte past a small vocabulary) before anything
 * trains, where the first run's evaluation would find it after its
 * training. Its output goes to models/VARIANT.check. */
static bool check_evaluations(const study_plan *p, const study_options *o, const char *models, tlm_err *err) {
    int want[STUDY_NKINDS];
    if (want_of(p, want) == 0) return true;
    for (int v = 0; v < p->nvariants; v++) {
        args a = {.argc = 0};
        char model[4300], out[4300], last[1024];
        snprintf(model, sizeof model, "%s/%s.so", models, p->variants[v].name);
        snprintf(out, sizeof out, "%s/%s.check", models, p->variants[v].name);
        add(&a, o->tlm_run), add(&a, "eval"), add(&a, model), add(&a, "--check"), add(&a, "--threads"), add(&a, "1");
        evaluated_sets(&a, p);
        int rc = study_run_child(a.argv, out, false, NULL, o->stop, err);
        if (rc < 0 || o->stop->count) return false;
        if (rc != 0) {
            study_last_line(out, last, sizeof last);
            return tlm_fail(err, "variant %s cannot be evaluated as the plan asks: %s (see %s)", p->variants[v].name,
                            last, out);
        }
    }
    return true;
}

/* tlm-run COMMAND MODEL --ckpt DIR --json --threads N, then what only the
 * command takes: eval the texts, sets and token limit, probe the text (the
 * validation text, else the training data: probe's own default, byte text,
 * is no text for a model trained on shards). */
static void evaluation_args(args *a, const char *command, const study_plan *p, const study_options *o, const run *r) {
    add(a, o->tlm_run), add(a, command), add(a, r->model), add(a, "--ckpt"), add(a, r->dir), add(a, "--json");
    add(a, "--threads"), add(a, num(a, o->threads));
    device_args(a, p, o);
    if (strcmp(command, "eval")) {
        const char *text = p->val ? p->val : p->data;
        if (text) add(a, "--data"), add(a, text);
        return;
    }
    if (p->eval_tokens) add(a, "--max-tokens"), add(a, num(a, p->eval_tokens));
    evaluated_sets(a, p);
}

/* Starts the run's current stage (skipping an evaluation with nothing to
 * evaluate). */
static bool start_stage(run *r, const study_plan *p, const study_options *o, tlm_err *err) {
    args a = {.argc = 0};
    char out[4300], errp[4300], log[4300], ckpt[4300];
    int want[STUDY_NKINDS];
    if (r->stage == STAGE_EVAL && want_of(p, want) == 0) r->stage = STAGE_PROBE;
    switch (r->stage) {
    case STAGE_TRAIN: {
        path_in(log, sizeof log, r, "log.jsonl");
        path_in(ckpt, sizeof ckpt, r, "checkpoint.safetensors");
        bool resume = r->resumed = study_exists(ckpt);
        if (!resume && !record_model(r, err)) return false;
        train_args(&a, p, o, r, log, resume);
        path_in(out, sizeof out, r, "train.out");
        r->pid = study_spawn(a.argv, out, true, NULL, err);
        break;
    }
    case STAGE_EVAL:
    case STAGE_PROBE: {
        bool eval = r->stage == STAGE_EVAL;
        evaluation_args(&a, eval ? "eval" : "probe", p, o, r);
        path_in(out, sizeof out, r, eval ? "eval.jsonl" : "probe.json");
        path_in(errp, sizeof errp, r, eval ? "eval.err" : "probe.err");
        remove(errp);
        r->pid = study_spawn(a.argv, out, false, errp, err);
        break;
    }
    case STAGE_DONE: return true;
    }
    return r->pid > 0;
}

/* Reads the log and the outputs into result.json; *log_short: the log
 * lacks step 1's record, which every training logs, or stops before the
 * run's last step (removed or cut short after the training, or before a
 * resume, which then writes only the records after its checkpoint), so
 * the curve and tokens/s summarised are of part of the run, or none. */
static bool write_result(const run *r, const study_plan *p, bool *log_short, tlm_err *err) {
    study_run res = {.variant = r->variant->name, .seed = r->seed, .steps = p->steps, .has_val = p->val != NULL};
    int want[STUDY_NKINDS];
    want_of(p, want);
    bool ok = study_run_collect(&res, r->dir, want, err);
    *log_short = ok && (res.log_first != 1 || (p->steps > 0 && res.log_last < p->steps));
    char *json = ok ? study_run_json(&res) : NULL;
    if (ok && !json) ok = tlm_fail(err, "out of memory");
    if (ok) {
        char path[4300];
        path_in(path, sizeof path, r, "result.json");
        ok = tlm_write_file_atomic(path, json, strlen(json), err);
    }
    free(json);
    res.variant = NULL;
    study_run_free(&res);
    return ok;
}

/* The stage's failure as one line: the program's last words and where to look. */
static void stage_failed(const run *r, int status, tlm_err *err) {
    static const char *const outputs[] = {"train.out", "eval.err", "probe.err"};
    char path[4300], last[1024];
    path_in(path, sizeof path, r, outputs[r->stage]);
    study_last_line(path, last, sizeof last);
    /* a checkpoint that cannot be read fails every resume alike: the way out */
    char again[4400] = "";
    if (r->stage == STAGE_TRAIN && r->resumed && status == 1)
        snprintf(again, sizeof again, "; if its checkpoint cannot be read, remove %s to train that run again", r->dir);
    tlm_fail(err, "%s seed %" PRId64 ": %s failed (exit %d): %s (see %s)%s", r->variant->name, r->seed,
             stage_names[r->stage], status, last, path, again);
}

/* Sends sig to every running child. */
static void signal_all(run *runs, int n, int sig) {
    for (int i = 0; i < n; i++)
        if (runs[i].pid > 0) kill(-runs[i].pid, sig); /* its process group, as spawn.h passes signals on */
}

static void pause_briefly(void) {
    struct timespec t = {0, 100 * 1000 * 1000};
    nanosleep(&t, NULL);
}

static bool run_pool(run *runs, int nruns, const study_plan *p, const study_options *o, study_progress *pr,
                     bool *stopped, tlm_err *err) {
    int next = 0, passed = 0;
    bool failed = false; /* passed > 0: a signal came */
    for (;;) {
        int now = o->stop->count;
        if (now > passed) { /* each signal passed on as it comes: spawn.h */
            for (int i = 0; i < nruns; i++)
                if (runs[i].pid > 0) study_pass_signals(runs[i].pid, o->stop, passed, now);
            passed = now;
            *stopped = true;
        }
        while (!failed && !passed && pr->running < o->jobs && next < nruns) {
            run *r = &runs[next++];
            if (r->stage == STAGE_DONE) continue;
            r->started = study_now();
            char ckpt[4300];
            path_in(ckpt, sizeof ckpt, r, "checkpoint.safetensors");
            const char *what = r->stage != STAGE_TRAIN ? stage_names[r->stage]
                               : study_exists(ckpt)    ? "resuming from its checkpoint"
                                                       : "training";
            if (!start_stage(r, p, o, err)) {
                failed = true;
                signal_all(runs, nruns, SIGINT); /* the others stop at a checkpoint */
                break;
            }
            study_progress_run_started(pr, r->started);
            study_progress_event(pr, "%s seed %" PRId64 ": %s", r->variant->name, r->seed, what);
        }
        if (pr->running == 0) break;
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid == 0 || (pid < 0 && errno == EINTR)) {
            study_progress_draw(pr, false);
            pause_briefly();
            continue;
        }
        if (pid < 0) break; /* no children left (ECHILD) */
        run *r = NULL;
        for (int i = 0; i < nruns; i++)
            if (runs[i].pid == pid) r = &runs[i];
        if (!r) continue; /* a converter or tlmc reaped late: not ours here */
        r->pid = 0;
        int rc = study_exit_status(status);
        if (passed || failed) {
            study_progress_run_ended(pr, r->started, false);
            continue;
        }
        if (rc != 0) {
            study_progress_run_ended(pr, r->started, false);
            stage_failed(r, rc, err);
            failed = true;
            signal_all(runs, nruns, SIGINT); /* the others stop at a checkpoint */
            continue;
        }
        r->stage++;
        if (r->stage == STAGE_DONE) {
            bool log_short = false, written = write_result(r, p, &log_short, err);
            study_progress_run_ended(pr, r->started, written);
            if (!written) {
                failed = true;
                signal_all(runs, nruns, SIGINT);
                continue;
            }
            if (log_short)
                study_progress_event(pr,
                                     "%s seed %" PRId64 ": note: its log %s/log.jsonl holds part of the run "
                                     "(removed or cut short since it trained): its curve and tokens/s in the "
                                     "results are of that part",
                                     r->variant->name, r->seed, r->dir);
            char took[32];
            study_duration(took, sizeof took, study_now() - r->started);
            study_progress_event(pr, "%s seed %" PRId64 ": done in %s", r->variant->name, r->seed, took);
        } else if (!start_stage(r, p, o, err)) {
            study_progress_run_ended(pr, r->started, false);
            failed = true;
            signal_all(runs, nruns, SIGINT);
        }
    }
    return !failed;
}

/* compile_and_train's runs, once the models are made: on the data of
 * this stamp (and its listing). grown: the grown plan the folder takes
 * before the first new run starts (NULL: none). */
static study_outcome train_stamped(const study_plan *plan, const study_options *o, const char *models, run *runs,
                                   const char *data_stamp, const char *listing, char (*digests)[65],
                                   const grown_plan *grown, study_progress *pr, tlm_err *err) {
    const int nruns = plan->nvariants * plan->nseeds;
    for (int v = 0; v < plan->nvariants; v++)
        for (int s = 0; s < plan->nseeds; s++) {
            run *r = &runs[v * plan->nseeds + s];
            r->variant = &plan->variants[v], r->seed = plan->seeds[s], r->model_digest = digests[v];
            r->data_stamp = data_stamp, r->data_listing = listing;
            snprintf(r->dir, sizeof r->dir, "%s/runs/%s/seed%" PRId64, o->out, r->variant->name, r->seed);
            snprintf(r->model, sizeof r->model, "%s/%s.so", models, r->variant->name);
        }
    bool refused = false;
    if (!discard_stale_runs(runs, nruns, o, pr, &refused, err)) return refused ? STUDY_REFUSED : STUDY_FAILED;
    int reused = 0;
    for (int i = 0; i < nruns; i++)
        if (result_valid(plan, &runs[i])) {
            runs[i].stage = STAGE_DONE;
            study_progress_run_reused(pr);
            reused++;
        }
    if (reused) study_progress_event(pr, "%d of %d runs already done in %s", reused, nruns, o->out);
    /* nothing trains before the evaluation files are known to be usable;
     * with every run reused, none will be evaluated */
    if (reused < nruns && (!check_evaluations(plan, o, models, err) || o->stop->count))
        return o->stop->count ? STUDY_STOPPED : STUDY_FAILED;
    if (grown && !adopt_grown_plan(o, grown, pr, err)) return STUDY_FAILED;
    for (int i = 0; i < nruns; i++)
        if (runs[i].stage != STAGE_DONE && !study_make_dirs(runs[i].dir, err)) return STUDY_FAILED;
    bool stopped = false, ok = run_pool(runs, nruns, plan, o, pr, &stopped, err);
    return stopped ? STUDY_STOPPED : ok ? STUDY_DONE : STUDY_FAILED;
}

/* Compiles the variants (digests: their .so files' SHA-256), sets up runs
 * (nvariants x nseeds of them), refuses or discards stale ones, reuses the
 * finished ones, checks the evaluation files when a run is left to
 * evaluate, takes the grown plan (grown, when not NULL), and runs the
 * rest. */
static study_outcome compile_and_train(const study_plan *plan, const study_options *o, const char *models, run *runs,
                                       char (*digests)[65], const grown_plan *grown, study_progress *pr, tlm_err *err) {
    if (!study_compile(plan, o->tlmc, models, digests, pr, o->stop, err) || o->stop->count)
        return o->stop->count ? STUDY_STOPPED : STUDY_FAILED;
    char data_stamp[65], *listing = study_data_stamp(plan, data_stamp);
    if (!listing) return tlm_fail(err, "out of memory"), STUDY_FAILED;
    study_outcome outcome = train_stamped(plan, o, models, runs, data_stamp, listing, digests, grown, pr, err);
    free(listing);
    return outcome;
}

static study_outcome execute_locked(const study_plan *plan, const study_options *o, tlm_err *err) {
    char models[4200], path[4300];
    snprintf(models, sizeof models, "%s/models", o->out);
    char *json = study_plan_json(plan);
    if (!json) return tlm_fail(err, "out of memory"), STUDY_FAILED;
    /* the folder is looked at before anything is made in it: a folder of
     * other files is refused untouched */
    grown_plan grown;
    bool refused = false, ok = check_plan(plan, json, o, &grown, &refused, err);
    if (ok) ok = study_make_dirs(models, err);
    int nruns = plan->nvariants * plan->nseeds;
    run *runs = ok ? calloc((size_t)nruns, sizeof *runs) : NULL;
    char(*digests)[65] = ok ? calloc((size_t)plan->nvariants, sizeof *digests) : NULL;
    if (ok && (!runs || !digests)) ok = tlm_fail(err, "out of memory");
    if (!ok) {
        free(json), free(runs), free(digests);
        return refused ? STUDY_REFUSED : STUDY_FAILED;
    }
    if (!getenv("OMP_WAIT_POLICY")) setenv("OMP_WAIT_POLICY", "PASSIVE", 1); /* docs/runtime.md, shared cores */
    study_progress pr;
    study_progress_init(&pr, o->progress, plan->name, nruns, o->jobs);
    study_outcome outcome = compile_and_train(plan, o, models, runs, digests, grown.json ? &grown : NULL, &pr, err);
    study_progress_end(&pr);
    free(json), free(runs), free(digests);
    if (outcome != STUDY_DONE) return outcome;
    snprintf(path, sizeof path, "%s", o->out);
    if (!study_finish(plan, path, true, o->stop, o->progress, err)) return STUDY_FAILED;
    return o->stop->count ? STUDY_STOPPED : STUDY_DONE;
}

study_outcome study_execute(const study_plan *plan, const study_options *o, tlm_err *err) {
    int lock = lock_folder(o->out, err);
    if (lock < 0) return STUDY_FAILED;
    study_outcome outcome = execute_locked(plan, o, err);
    close(lock);
    return outcome;
}
