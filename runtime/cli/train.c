/* tlm-run train: the training loop.
 *
 *   sample a batch of random windows -> forward/backward over its
 *   micro-batches -> clip, schedule, AdamW/SGD (tlm_trainer_step)
 *   -> log -> validate -> checkpoint
 *
 * Everything a step depends on is either in the checkpoint (parameters,
 * optimizer moments, step, the sampler's generator) or fixed by the
 * settings, so a resumed run repeats an uninterrupted one bit for bit at the
 * same thread count. --dry-run stops once the settings are resolved and
 * checked, before the data is read or the model allocated.
 *
 * Stopping: a failed write (log or checkpoint: a full disk, a file-size
 * limit) stops the run with exit 1, leaving the last checkpoint whole (a
 * failed log write writes no checkpoint, so the log never falls behind it).
 * The first SIGINT, SIGTERM, SIGHUP (the terminal or the SSH session
 * gone; left ignored where nohup ignores it) or SIGUSR1 (what mpirun
 * passes on at once) stops at the next step boundary with a checkpoint
 * (exit 130 / 143 / 129 / 138), and so does standard
 * output that cannot be written (a closed pipe: exit 141, as SIGPIPE's;
 * else 1); a second such signal exits at once (the checkpoint
 * is written to a temporary file and renamed, so nothing is torn). A crash
 * (kill -9, power loss) leaves at most temporary files, which the next
 * start removes. One run at a time trains a checkpoint folder (flock).
 *
 * Under mpirun (runtime/dist, docs/runtime.md "Several processes") every
 * rank draws the same global batch and trains on its share of the
 * micro-batches; the trainer's chain sums the gradients in one process's
 * order. Rank 0 alone prints, validates, logs and writes the checkpoint.
 * The ranks agree after every step on whether to stop (a signal on any
 * rank), so they all stop at the same step; a failure only one rank sees
 * (a failed write on rank 0) ends the job with MPI_Abort after its
 * message. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "args.h"
#include "atomic_file.h"
#include "checkpoint.h"
#include "commands.h"
#include "device_flag.h"
#include "dist.h"
#include "load.h"
#include "numfmt.h"
#include "corpus.h"
#include "evaluate.h"
#include "flops.h"
#include "gpu_model.h"
#include "profile.h"
#include "progress.h"
#include "rank_output.h"
#include "regular_file.h"
#include "remove_on_signal.h"
#include "stdout_status.h"
#include "test_hook.h"
#include "tlm_rt/data.h"
#include "tlm_rt/blas_room.h"
#include "tlm_rt/ops.h"
#include "train_options.h"
#include "trainer.h"

#ifndef TLM_VERSION
#define TLM_VERSION "0.0.0"
#endif

/* Validation draws the same windows every time, whatever --seed is, so
 * that validation losses compare across steps and across runs. */
#define VALIDATION_SEED 0x76616c6964617465ull   /* "validate" */
/* The data order gets a stream of its own, apart from the initialisation's. */
#define DATA_SEED_OFFSET 0x64617461ull           /* "data" */

/* The folders a start made for its checkpoint (mkdir_p), by their
 * lengths in path: exactly the levels whose mkdir succeeded, so that
 * taking them back (unmake_dirs) never touches one that was there, however
 * the path is spelled (`new/../old`, a trailing slash). */
typedef struct made_dirs {
    char path[4096];
    int n;
    int len[64]; /* deeper new levels than these are not taken back */
} made_dirs;

typedef struct run {
    train_options o;
    tlm_so so;
    tlm_device *dev;           /* NULL: the CPU */
    tlm_model model;
    tlm_trainer trainer;
    tlm_dataset train, val;
    corpus_info train_info, val_info;
    bool have_val;
    char val_in_data[4200]; /* a validation file the training data holds too, or "" */
    char train_name[4200], val_name[4200];
    char data_fingerprint[48];
    char ckpt_dir[4096], ckpt_file[4200];
    int64_t ckpt_step;             /* step of the checkpoint on disk, -1: none yet */
    tlm_run_state state;
    int64_t micro, T;              /* sequences per micro-batch, tokens per sequence */
    int32_t *x, *y;                /* one step's batch: batch × T each */
    progress out;
    double elapsed_base, started;  /* elapsed of earlier sessions; this one's start */
    int lock_fd;                   /* the checkpoint folder, locked; -1: none */
    made_dirs made;                /* the folders of the checkpoint's path this run made */
    struct stat resumed;           /* the checkpoint --resume read, as it was then */
    tlm_dist dist;                 /* this process among the job's ranks */
    bool agreed;                   /* the run stopped where every rank stopped */
} run;

static volatile sig_atomic_t stop_signal;
static volatile sig_atomic_t stdout_tty;
static volatile sig_atomic_t quiet_signals; /* ranks > 0: rank 0 tells */
static volatile sig_atomic_t several_ranks;
static volatile sig_atomic_t checkpoint_saved; /* a checkpoint of this run is on disk: a second signal keeps it */
static volatile sig_atomic_t usr1_early;       /* a SIGUSR1 came before the loop's handler: stop after step 1 */
static made_dirs *made_for_signal; /* rank 0's folders, which a stop at once before a checkpoint takes back */
static void unmake_dirs(made_dirs *made);

/* The first SIGINT, SIGTERM, SIGHUP or SIGUSR1 asks the loop to stop at
 * the next step boundary; a second SIGINT, SIGTERM or SIGUSR1 exits at
 * once. A SIGHUP never
 * does: a terminal that goes away sends one to the job from its shell and
 * another from the kernel as the session ends, and the run must still
 * reach its checkpoint. Only async-signal-safe calls. */
static void on_signal(int sig) {
    static const char first[] = "tlm-run train: stopping after this step, with a checkpoint (signal again to "
                                "stop at once)\n";
    static const char first_all[] = "tlm-run train: stopping every rank after this step, with a checkpoint (signal "
                                    "again to stop at once)\n";
    static const char again[] = "tlm-run train: stopped at once; the last checkpoint is intact (--resume "
                                "continues from it)\n";
    static const char again_none[] = "tlm-run train: stopped at once, before the run's first checkpoint: nothing "
                                     "was saved (start it again, without --resume)\n";
    if (stop_signal && sig == SIGHUP) return;
    int saved_errno = errno; /* the interrupted code's */
    if (stdout_tty) (void)!write(STDERR_FILENO, "\n", 1);
    /* a stop at once, mid-write: the checkpoint's (or log's) temporary goes
     * too, not left for the next start to find (atomic_file.h registers it) */
    if (stop_signal) tlm_remove_registered_now();
    if (stop_signal && quiet_signals) _exit(128 + sig);
    if (stop_signal) {
        if (checkpoint_saved) (void)!write(STDERR_FILENO, again, sizeof again - 1);
        else (void)!write(STDERR_FILENO, again_none, sizeof again_none - 1);
        if (!checkpoint_saved && made_for_signal) unmake_dirs(made_for_signal); /* rmdir: async-signal-safe */
        _exit(128 + sig);
    }
    stop_signal = sig;
    if (!quiet_signals) {
        if (several_ranks) (void)!write(STDERR_FILENO, first_all, sizeof first_all - 1);
        else (void)!write(STDERR_FILENO, first, sizeof first - 1);
    }
    errno = saved_errno;
}

/* Standard output that cannot be written (its reader gone: `| head`, a
 * tee that died; or a full disk) stops the run at the next step boundary
 * with a checkpoint, as SIGINT does, rather than let SIGPIPE end the
 * process and lose the steps since the last one. SIGPIPE is ignored while
 * the loop runs, so a write to the pipe fails with EPIPE instead, and the
 * flush after each step's progress finds it. Rank 0 alone writes stdout.
 * Not a signal: a SIGINT or SIGTERM after it is still a first one. The
 * run says so once, as it stops, on stderr (stopped_without_stdout): the
 * line that would have named the checkpoint cannot go where it goes. */
static int stdout_lost; /* the failed write's errno; 0: none */

static void check_stdout(const progress *out) {
    if (!stdout_lost) stdout_lost = out->stdout_errno;
}

/* The stop's one line when stdout is what failed, and the status: 1 for a
 * failed write (a full disk), SIGPIPE's where the reader went away. */
static int stopped_without_stdout(int64_t step, int64_t steps, const char *ckpt) {
    fprintf(stderr,
            "tlm-run train: cannot write to standard output (%s): stopped at step %" PRId64 " of %" PRId64
            "; checkpoint %s (continue with --resume)\n",
            strerror(stdout_lost), step, steps, ckpt);
    tlm_stdout_said();
    return stdout_lost != EPIPE ? 1 : 128 + SIGPIPE;
}

/* The stop this step asks for: a signal's number, SIGPIPE for a lost
 * stdout, 0. */
static int stop_asked(void) { return stop_signal ? stop_signal : stdout_lost ? SIGPIPE : 0; }

/* SIGHUP too, unless the run was started ignoring it (nohup): then it
 * trains on after the terminal goes, as asked. And SIGUSR1, the stop for a
 * job under mpirun: Open MPI's mpirun passes a SIGUSR1 it gets on to every
 * rank at once, where its Ctrl-C reaches the ranks as SIGTERM only after
 * about a second, and SIGKILL a second later (odls_base_sigkill_timeout),
 * before a longer step could end with its checkpoint. */
static void handle_signals(void (*handler)(int)) {
    struct sigaction sa, hup;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask); /* one handler at a time: the second signal sees the first's flag */
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    sigaddset(&sa.sa_mask, SIGHUP);
    sigaddset(&sa.sa_mask, SIGUSR1);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    if (sigaction(SIGHUP, NULL, &hup) == 0 && hup.sa_handler != SIG_IGN) sigaction(SIGHUP, &sa, NULL);
}

/* The training and validation data are not tokens of one kind: which one
 * is text, if one is (the command that tokenizes it), or the two
 * tokenizers and how to see a shard's. */
static int data_kinds_differ(const run *r) {
    const corpus_info *t = &r->train_info, *v = &r->val_info;
    if (!t->shards || !v->shards) {
        const bool val_text = !v->shards;
        const char *text = val_text ? r->val_name : r->train_name;
        const char *path = val_text ? r->o.val : r->o.data;
        char shard[CORPUS_SHARD_NAME_BYTES];
        return cli_error("train",
                         "the %s data %s is text, but the %s data %s is tokenized with tokenizer %.16s...: tokenize "
                         "it first: tlm-run tokenize --tokenizer TOKENIZER %s -o %s%s",
                         val_text ? "validation" : "training", text, val_text ? "training" : "validation",
                         val_text ? r->train_name : r->val_name, val_text ? t->tokenizer : v->tokenizer,
                         corpus_tokenize_input(path), corpus_tokenize_output(path, shard, sizeof shard),
                         val_text ? "" : " (or give --val a text too)");
    }
    return cli_error("train",
                     "the validation data %s is tokenized with tokenizer %.16s..., the training data %s with "
                     "tokenizer %.16s...: tokenize both with one (tlm-run tokenize --info SHARD --tokenizer PATH "
                     "says whether a shard is a tokenizer's)",
                     r->val_name, v->tokenizer, r->train_name, t->tokenizer);
}

/* Makes path and the folders above it; made (NULL: not asked) records the
 * ones this call created, also when it fails partway. */
static int mkdir_p(const char *path, made_dirs *made) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    if (made) snprintf(made->path, sizeof made->path, "%s", buf), made->n = 0;
    for (char *p = buf + 1;; p++) {
        if (*p && *p != '/') continue;
        char c = *p;
        *p = '\0';
        if (mkdir(buf, 0777) == 0) {
            if (made && made->n < (int)(sizeof made->len / sizeof *made->len)) made->len[made->n++] = (int)(p - buf);
        } else if (errno != EEXIST) return -1;
        if (!c) return 0;
        *p = c;
    }
}

/* Removes the folders mkdir_p made, deepest first, while they are empty:
 * a run that failed to start leaves none behind (a file in one, the
 * log's, keeps it and those above). */
static void unmake_dirs(made_dirs *made) {
    for (int i = made->n - 1; i >= 0; i--) {
        made->path[made->len[i]] = '\0';
        if (rmdir(made->path) != 0) break;
    }
    made->n = 0;
}

static bool file_exists(const char *path) { return access(path, F_OK) == 0; }

static double elapsed(const run *r) { return r->elapsed_base + progress_now() - r->started; }

/* For messages when the run stops: what is on disk. */
static void last_checkpoint(const run *r, char *buf, size_t n) {
    if (r->ckpt_step >= 0)
        snprintf(buf, n, "the last checkpoint, %s (step %" PRId64 "), is intact", r->ckpt_file, r->ckpt_step);
    else snprintf(buf, n, "no checkpoint was written");
}

/* Stops the run after a failed write (err: which and why), exit 1. */
static int write_failed(run *r, const char *what, const tlm_err *err) {
    char last[4300];
    last_checkpoint(r, last, sizeof last);
    progress_close(&r->out, NULL);
    return cli_error("train", "%s%s; stopped at step %" PRId64 ", %s%s", what, err->msg, r->state.step, last,
                     r->ckpt_step >= 0 ? " (--resume continues from it)" : "");
}

/* One run at a time per checkpoint folder: two would overwrite each
 * other's checkpoints, and a start removes temporary files that only a
 * crashed run can have left. The lock goes with the process. */
static int take_folder_lock(const run *r, int *fd) {
    *fd = open(r->ckpt_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (*fd >= 0 && flock(*fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK)
        return cli_error("train",
                         "%s is in use by another tlm-run train (one run at a time trains a checkpoint folder)",
                         r->ckpt_dir);
    return 0;
}

/* Whether out (the log, or the checkpoint: flag says which) is one of the
 * files a corpus argument reads (corpus_files: a file, a folder's texts or
 * shards, the bundled novels when no flag names one), or the argument
 * itself: false with err. */
static bool out_not_corpus(const char *out, const char *flag, const char *path, enum corpus_role role, tlm_err *err) {
    if (path && *path && !tlm_output_not_input(out, path, "the data", err)) return false;
    char **names;
    int n;
    corpus_source source;
    tlm_err ignored;
    if (corpus_files(path, role, &names, &n, &source, &ignored) != 0) return true; /* the loader said why */
    static const char *const what[] = {[CORPUS_FILE] = "the data",
                                       [CORPUS_FOLDER_TEXTS] = "a text of the data",
                                       [CORPUS_FOLDER_SHARDS] = "a shard of the data"};
    const char *label = source != CORPUS_BUNDLED ? what[source]
                        : role == CORPUS_TRAIN   ? "the bundled training data"
                                                 : "the bundled validation text";
    bool ok = true;
    for (int i = 0; i < n && ok; i++) ok = tlm_output_not_input(out, names[i], label, err);
    tlm_data_texts_free(names, n);
    /* nor a new file the next run on the folder would read as data */
    return ok && (source == CORPUS_FILE || source == CORPUS_BUNDLED || tlm_data_not_new_input(flag, out, path, err));
}

/* The log is written at once (a fresh run's replaces what is there): it
 * must not be one of the run's inputs, the model, its checkpoint or the
 * (validation) data, as no command's output may be. */
static bool log_not_input(const run *r, const char *log, tlm_err *err) {
    const train_options *o = &r->o;
    return tlm_output_not_input(log, o->model, "the model", err) &&
           tlm_output_not_input(log, r->ckpt_file, "the checkpoint", err) &&
           out_not_corpus(log, "--log", o->data, CORPUS_TRAIN, err) &&
           (!r->have_val || out_not_corpus(log, "--log", o->val, CORPUS_VALID, err)) &&
           progress_log_replaceable(log, err);
}

/* The checkpoint is written over the training or validation data it
 * names (`--data X --ckpt X --overwrite`: X is a checkpoint, so the
 * checkpoint's own check lets it be replaced) only after the data was
 * read: refused before, as the log is. */
static bool ckpt_not_corpus(const run *r, tlm_err *err) {
    const train_options *o = &r->o;
    return out_not_corpus(r->ckpt_file, "--ckpt", o->data, CORPUS_TRAIN, err) &&
           (!r->have_val || out_not_corpus(r->ckpt_file, "--ckpt", o->val, CORPUS_VALID, err));
}

/* The checkpoint was looked at long before the folder's lock was taken
 * (the data loaded, the model made between): another run started with
 * this one may have written it meanwhile, which a fresh run would then
 * replace (both exited 0, the first's checkpoint lost) and a resume would
 * continue from a state that is no longer the folder's. Looked at again,
 * under the lock. */
static int checkpoint_still_as_seen(const run *r) {
    struct stat st;
    bool exists = stat(r->ckpt_file, &st) == 0;
    if (!r->o.resume && exists && !r->o.overwrite)
        return cli_error("train",
                         "%s already holds a checkpoint, written by another run while this one started: pass "
                         "--resume to continue it, or --overwrite to start afresh",
                         r->ckpt_file);
    if (r->o.resume && (!exists || st.st_dev != r->resumed.st_dev || st.st_ino != r->resumed.st_ino ||
                        st.st_size != r->resumed.st_size || st.st_mtim.tv_sec != r->resumed.st_mtim.tv_sec ||
                        st.st_mtim.tv_nsec != r->resumed.st_mtim.tv_nsec))
        return cli_error("train",
                         "%s changed while this run started (another run wrote it): run the command again to "
                         "resume from it",
                         r->ckpt_file);
    return 0;
}

static int lock_folder(run *r) {
    int rc = take_folder_lock(r, &r->lock_fd);
    if (rc) return rc;
    tlm_err err = {""};
    int removed = tlm_remove_stale_temps(r->ckpt_file, &err);
    if (removed < 0) return cli_error("train", "%s", err.msg);
    if (removed > 0)
        printf("removed %d temporary file%s of an interrupted checkpoint write from %s\n", removed,
               removed == 1 ? "" : "s", r->ckpt_dir);
    return 0;
}

/* ---- checkpoints ---- */

static bool save_checkpoint(run *r, tlm_err *err) {
    if (r->dist.rank > 0) { /* rank 0 writes the one checkpoint */
        r->ckpt_step = r->state.step;
        return true;
    }
    if (mkdir_p(r->ckpt_dir, NULL) != 0) {
        tlm_fail(err, "%s: cannot create the checkpoint folder: %s", r->ckpt_dir, strerror(errno));
        return false;
    }
    char *settings = train_settings_json(&r->o);
    if (!settings) {
        tlm_fail(err, "out of memory writing the checkpoint");
        return false;
    }
    char threads[16], ranks[16], device[300];
    snprintf(threads, sizeof threads, "%d", tlm_get_num_threads());
    snprintf(ranks, sizeof ranks, "%d", r->dist.ranks);
    device_flag_describe(r->dev, device, sizeof device);
    tlm_st_meta extra[] = {
        {"settings", settings},
        {"data_fingerprint", r->data_fingerprint},
        {"tokenizer", r->train_info.tokenizer},
        {"threads", threads},
        {"ranks", ranks},
        {"device", device},
        {"precision", tlm_precision_name(r->o.precision)},
        {"created_by", "tlm-run " TLM_VERSION},
    };
    r->state.elapsed = elapsed(r);
    if (!tlm_trainer_to_host(&r->trainer, err)) {
        free(settings);
        return false;
    }
    bool ok = tlm_ckpt_save(r->ckpt_file, &r->trainer, &r->state, extra, (int)(sizeof extra / sizeof *extra), err);
    free(settings);
    if (ok) r->ckpt_step = r->state.step, checkpoint_saved = 1;
    return ok;
}

/* On --resume: the checkpoint's settings become the defaults. */
static int open_resume(run *r, tlm_st_file **ckpt, tlm_abi_train *s, bool *decay) {
    tlm_err err = {""};
    if (!file_exists(r->ckpt_file))
        return cli_error("train", "--resume: no checkpoint at %s (train without --resume first)", r->ckpt_file);
    *ckpt = tlm_ckpt_open(r->ckpt_file, &r->so, &err);
    if (!*ckpt) return cli_error("train", "%s", err.msg);
    const char *json = tlm_st_meta_get(*ckpt, "settings");
    if (!json) return cli_error("train", "%s: no training settings in the metadata", r->ckpt_file);
    if (!train_settings_parse(json, s, decay, &r->o.owned[0], &r->o.owned[1], &r->o.owned[2], &err))
        return cli_error("train", "%s: %s", r->ckpt_file, err.msg);
    return 0;
}

static void fingerprint_data(run *r) {
    if (r->train_info.shards) {
        snprintf(r->data_fingerprint, sizeof r->data_fingerprint, "%s", r->train_info.fingerprint);
        return;
    }
    snprintf(r->data_fingerprint, sizeof r->data_fingerprint, "%zu:%016" PRIx64, r->train.n,
             tlm_fnv1a(TLM_FNV_OFFSET, r->train.bytes, r->train.n));
}

/* A data fingerprint as words: "3,558,175 bytes (hash 248945178f93abe0)",
 * "1,024 tokens of shards (hash ...)"; one that is neither is quoted. */
static const char *fingerprint_text(char *buf, size_t n, const char *fp) {
    if (!fp) return "none recorded";
    bool shards = strncmp(fp, "shards ", 7) == 0;
    const char *count = shards ? fp + 7 : fp;
    char *colon;
    errno = 0;
    long long k = strtoll(count, &colon, 10);
    char digits[32];
    if (colon == count || *colon != ':' || errno || k < 0 || strlen(colon + 1) != 16) snprintf(buf, n, "`%.40s`", fp);
    else
        snprintf(buf, n, "%s %s (hash %s)", fmt_int(digits, sizeof digits, k, 0), shards ? "tokens of shards" : "bytes",
                 colon + 1);
    return buf;
}

/* A resumed run continues from the checkpoint's step: --steps and --stop-at
 * must lie ahead of it. */
static int check_resume_step(const run *r, int64_t step) {
    if (step > r->o.s.steps)
        return cli_error("train",
                         "the checkpoint is at step %" PRId64 ", past --steps %" PRId64 " (raise --steps to continue)",
                         step, r->o.s.steps);
    if (r->o.stop_at > 0 && r->o.stop_at <= step)
        return cli_error("train", "--stop-at %" PRId64 " is not past the checkpoint's step %" PRId64, r->o.stop_at,
                         step);
    return 0;
}

/* --dry-run: the settings as resolved, after the checks a run makes before
 * it loads data or allocates the model; with --resume, the checkpoint's step
 * (from its metadata) checked as a run checks it. */
static int dry_run(run *r, tlm_st_file *ckpt) {
    /* the folder's lock as a run's rank 0 would take it, let go at once */
    int fd = -1, rc = r->dist.rank == 0 ? take_folder_lock(r, &fd) : 0;
    if (fd >= 0) close(fd);
    if (rc) return rc;
    if (ckpt) {
        int64_t step;
        if (!tlm_ckpt_meta_step(ckpt, &step))
            return cli_error("train", "%s: no valid step in the metadata", r->ckpt_file);
        if ((rc = check_resume_step(r, step))) return rc;
        printf("resume_step %" PRId64 "\n", step);
    }
    train_print_settings(stdout, &r->o);
    printf("checkpoint %s\n", r->ckpt_file);
    printf("threads %d\n", tlm_get_num_threads());
    /* accumulate above is the step's micro-batches over all the ranks */
    const int64_t per_rank = r->o.s.accumulate / r->dist.ranks;
    if (r->dist.ranks > 1)
        printf("ranks %d (%" PRId64 " micro-batch%s a rank)\n", r->dist.ranks, per_rank, per_rank == 1 ? "" : "es");
    return 0;
}

/* The tokens the run will have trained on at its last step must fit in a
 * checkpoint its own loader reads (TLM_CKPT_MAX_TOKENS, far inside an
 * int64_t): a checkpoint's count at the bound, or --steps x batch x context
 * past it, would otherwise overflow the count or write a checkpoint that
 * no resume reads, after every step. */
static int tokens_fit(const run *r) {
    const int64_t per_step = r->o.s.batch * r->T, left = r->o.s.steps - r->state.step;
    int64_t added, reached;
    if (!__builtin_mul_overflow(left, per_step, &added) &&
        !__builtin_add_overflow(r->state.tokens_seen, added, &reached) && reached <= TLM_CKPT_MAX_TOKENS)
        return 0;
    if (r->state.step == 0 && r->state.tokens_seen == 0)
        return cli_error("train",
                         "--steps %" PRId64 " of %" PRId64 " tokens each would pass 2^62 tokens, the most a "
                         "checkpoint holds",
                         r->o.s.steps, per_step);
    return cli_error("train",
                     "%s: its %" PRId64 " tokens trained on and the %" PRId64 " steps left of %" PRId64
                     " tokens each would pass 2^62 tokens, the most a checkpoint holds",
                     r->ckpt_file, r->state.tokens_seen, left, per_step);
}

/* Whether two GPUs as device_flag_describe says them ("cuda:N NAME (sm_XY,
 * M GiB)") are the same kind: the name and architecture, not the ordinal
 * nor the memory (the emulated device reports the machine's). */
static bool same_gpu(const char *was, const char *now) {
    if (!was) return true; /* a checkpoint from before devices were recorded: nothing to compare */
    const char *a = strchr(was, ' '), *b = strchr(now, ' ');
    if (!a || !b) return !a == !b;
    size_t la = strcspn(a, ","), lb = strcspn(b, ",");
    return la == lb && strncmp(a, b, la) == 0;
}

/* What a resume's data error adds when the path is the checkpoint's (its
 * run's flag, not this command's): a relative one names a file from the
 * folder that run started in, not necessarily this one. */
static const char *from_checkpoint(const train_options *o, const char *path, bool given, const char *flag, char *buf,
                                   size_t n) {
    if (!o->resume || given || !path || !*path) return "";
    bool relative = path[0] != '/';
    snprintf(buf, n, " (the checkpoint's %s%s: give %s to name %s)", flag,
             relative ? ", relative to the folder its run started in" : "", flag,
             relative ? "it from here" : "where it is now");
    return buf;
}

/* Parameters and optimizer state: fresh, or the checkpoint's. */
static int start_state(run *r, tlm_st_file *ckpt) {
    tlm_err err = {""};
    if (!ckpt) {
        tlm_model_init_params(&r->model, r->o.s.seed);
        tlm_rng_seed(&r->state.data_rng, r->o.s.seed + DATA_SEED_OFFSET);
        return tlm_trainer_to_device(&r->trainer, &err) ? 0 : cli_error("train", "%s", err.msg);
    }
    const char *tok = tlm_st_meta_get(ckpt, "tokenizer");
    if (strcmp(tok ? tok : "bytes", r->train_info.tokenizer) != 0)
        return cli_error("train", "the training data %s is tokenized %s%s, the checkpoint's was %s%s", r->train_name,
                         r->train_info.shards ? "with tokenizer " : "as ", r->train_info.tokenizer,
                         tok && strcmp(tok, "bytes") ? "tokenized with " : "", tok ? tok : "bytes");
    const char *fp = tlm_st_meta_get(ckpt, "data_fingerprint");
    if (!fp || strcmp(fp, r->data_fingerprint) != 0) {
        char then[96], now[96];
        return cli_error("train",
                         "the training data %s differs from the checkpoint's: %s then, %s now (resume on the data "
                         "the run trained on)",
                         r->train_name, fingerprint_text(then, sizeof then, fp),
                         fingerprint_text(now, sizeof now, r->data_fingerprint));
    }
    if (!tlm_ckpt_load_params(ckpt, &r->model, &err) || !tlm_ckpt_load_trainer(ckpt, &r->trainer, &r->state, &err))
        return cli_error("train", "%s: %s", r->ckpt_file, err.msg);
    int rc = check_resume_step(r, r->state.step);
    if (rc) return rc;
    if (!tlm_trainer_to_device(&r->trainer, &err)) return cli_error("train", "%s", err.msg);
    /* Device and thread count are not trajectory settings: a resume
     * elsewhere continues from the fp32 master weights, not bit for bit. */
    const char *was = tlm_st_meta_get(ckpt, "device");
    char now[300];
    device_flag_describe(r->dev, now, sizeof now);
    bool same_kind = !was || (strncmp(was, "cpu", 3) == 0) == (r->dev == NULL);
    /* another GPU (another model, or architecture: cuBLASLt's algorithms
     * and the kernels' code differ) is another device, whichever ordinal */
    if (!same_kind || (r->dev && !same_gpu(was, now)))
        printf("note: resuming on %s, the checkpoint was written on %s; the run continues from its fp32 weights "
               "but will not repeat an uninterrupted run bit for bit\n",
               now, was);
    const char *precision = tlm_st_meta_get(ckpt, "precision");
    const char *now_precision = tlm_precision_name(r->o.precision);
    if (same_kind && precision && strcmp(precision, now_precision) != 0)
        printf("note: resuming in %s, the checkpoint was written in %s; the run continues from its fp32 weights "
               "but will not repeat an uninterrupted run bit for bit\n",
               now_precision, precision);
    const char *threads = tlm_st_meta_get(ckpt, "threads");
    if (same_kind && !r->dev && threads && atoi(threads) != tlm_get_num_threads())
        printf("note: resuming with %d thread%s, the checkpoint was written with %s; the result will differ in "
               "the last bits from an uninterrupted run\n",
               tlm_get_num_threads(), tlm_get_num_threads() == 1 ? "" : "s", threads);
    r->ckpt_step = r->state.step;
    checkpoint_saved = 1;
    r->elapsed_base = r->state.elapsed;
    return 0;
}

/* ---- set-up ---- */

/* Several ranks: --accumulate counts each rank's micro-batches, the
 * settings (and the checkpoint) the step's, P × a, so that a checkpoint
 * resumes with any P that divides its count, and the trajectory check
 * compares what shapes the trajectory: the micro-batch size. A resume
 * without --accumulate shares the checkpoint's count among the ranks. */
static int share_accumulate(run *r, const tlm_abi_train *checkpoint) {
    train_options *o = &r->o;
    int P = r->dist.ranks;
    if (P == 1) return 0;
    bool given = false;
    for (int i = 0; i < TLM_TRAIN_NSETTINGS; i++)
        if (strcmp(tlm_train_settings[i].key, "accumulate") == 0) given = o->given[i];
    /* Told here, in the flag's own terms: the trajectory check would
     * compare P × a, a count the user never typed. */
    if (o->resume && given && o->s.accumulate >= 1 && o->s.accumulate * P != checkpoint->accumulate)
        return cli_error("train",
                         "--accumulate %" PRId64 " on %d ranks runs %" PRId64 " micro-batches a step, the "
                         "checkpoint's steps run %" PRId64
                         ": a resumed run keeps the settings that shape its trajectory "
                         "(leave out --accumulate to share the checkpoint's micro-batches among the ranks)",
                         o->s.accumulate, P, o->s.accumulate * P, checkpoint->accumulate);
    if (o->resume && !given) {
        if (o->s.accumulate % P == 0) return 0;
        return cli_usage_error("train",
                               "the checkpoint's steps run %" PRId64 " micro-batches, which %d ranks cannot share "
                               "evenly (resume with a number of ranks that divides it)",
                               o->s.accumulate, P);
    }
    if (o->s.accumulate < 1 || o->s.batch % ((int64_t)P * o->s.accumulate) != 0)
        return cli_usage_error("train",
                               "--batch %" PRId64 " is not divisible by %d ranks x --accumulate %" PRId64
                               " (each rank trains on its share of the batch in --accumulate micro-batches)",
                               o->s.batch, P, o->s.accumulate);
    o->s.accumulate *= P;
    return 0;
}

static int setup(run *r) {
    tlm_err err = {""};
    train_options *o = &r->o;
    if (!tlm_so_open(o->model, &r->so, &err)) return cli_error("train", "%s", err.msg);
    const char *name = tlm_so_str(&r->so, r->so.config->name);
    /* the checkpoint and its temporary (PATH.tmp.XXXXXX, which a start
     * after a crash knows to remove) must be paths the system takes:
     * found only when the first checkpoint was written, every step
     * before it was lost */
    const size_t tmp_suffix = strlen(".tmp.XXXXXX");
    if (!checkpoint_dir(r->ckpt_dir, sizeof r->ckpt_dir, o->ckpt, name) ||
        !checkpoint_path(r->ckpt_file, sizeof r->ckpt_file, o->ckpt, name) ||
        strlen(r->ckpt_file) + tmp_suffix >= PATH_MAX ||
        strlen(strrchr(r->ckpt_file, '/') ? strrchr(r->ckpt_file, '/') + 1 : r->ckpt_file) + tmp_suffix > NAME_MAX)
        return checkpoint_path_too_long("train", o->ckpt, name);
    r->ckpt_step = -1;

    /* The defaults: the model's, or the checkpoint's when resuming. */
    tlm_st_file *ckpt = NULL;
    tlm_abi_train defaults = *r->so.train;
    bool decay = false;
    int rc = 0;
    if (o->resume) {
        /* as it is before it is read: one renamed over it while it is read
         * is then found changed under the lock, never missed */
        if (stat(r->ckpt_file, &r->resumed) != 0) memset(&r->resumed, 0, sizeof r->resumed);
        rc = open_resume(r, &ckpt, &defaults, &decay);
        if (rc) goto out;
        train_apply(o, &defaults, decay, o->owned[0], o->owned[1], o->owned[2]);
    } else {
        /* A folder or FIFO by the checkpoint's name would only be found
         * when the first checkpoint is written, the steps before it lost. */
        struct stat st;
        /* so would a --ckpt that is itself a FIFO or a device (not a
         * folder to write in): found when the folder was made, after the
         * data was loaded, and --dry-run passed it */
        if (o->ckpt && stat(o->ckpt, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
            rc = cli_error("train", "--ckpt %s is %s, not a folder or a checkpoint file", o->ckpt,
                           tlm_file_kind(st.st_mode));
            goto out;
        }
        if (stat(r->ckpt_file, &st) == 0 && !S_ISREG(st.st_mode)) {
            rc = cli_error("train",
                           "%s is %s: train writes its checkpoint under that name (move it away, or give --ckpt "
                           "another folder)",
                           r->ckpt_file, tlm_file_kind(st.st_mode));
            goto out;
        }
        /* nor a symbolic link to a file that is not there, which the
         * write's own check (tlm_atomic_open) refuses; a path that is not
         * there at all is a new checkpoint */
        if (lstat(r->ckpt_file, &st) == 0 && !tlm_atomic_target_ok(r->ckpt_file, &err)) {
            rc = cli_error("train", "%s", err.msg);
            goto out;
        }
        /* --ckpt may name the checkpoint file itself; a file that is not one
         * (the model.so, a text) is never written over, not even with
         * --overwrite, which starts afresh over a checkpoint only. */
        if (o->ckpt && strcmp(o->ckpt, r->ckpt_file) == 0 && file_exists(r->ckpt_file) &&
            !tlm_ckpt_file_is_checkpoint(r->ckpt_file)) {
            rc = cli_error("train",
                           "--ckpt %s is a file that holds no checkpoint train can read (another kind of file, or "
                           "a damaged checkpoint): train writes its checkpoint over a file only when it holds one "
                           "(move it away, or give --ckpt a folder or a new file name)",
                           r->ckpt_file);
            goto out;
        }
        if (file_exists(r->ckpt_file) && !o->overwrite) {
            rc = cli_error("train",
                           "%s already holds a checkpoint: pass --resume to continue it, or --overwrite "
                           "to start afresh",
                           r->ckpt_file);
            goto out;
        }
        train_apply(o, &defaults, false, NULL, NULL, NULL);
    }
    /* Threads: the flag, else on resume the checkpoint's count (the same
     * count gives the same bits), else every core. */
    const char *ckpt_threads = ckpt ? tlm_st_meta_get(ckpt, "threads") : NULL;
    int threads = o->threads > 0                           ? o->threads
                  : ckpt_threads && atoi(ckpt_threads) > 0 ? atoi(ckpt_threads)
                  : cli_cores() > r->dist.local_ranks      ? cli_cores() / r->dist.local_ranks
                                                           : 1;
    if (!cli_threads_start("train", threads, &err)) {
        rc = cli_error("train", "%s", err.msg);
        goto out;
    }
    if (o->s.context <= 0) o->s.context = r->so.config->context;
    if ((rc = share_accumulate(r, &defaults)) || (rc = train_check(o, &r->so))) goto out;
    if (o->resume && !train_same_trajectory(o, &defaults, decay, &err)) {
        rc = cli_error("train", "%s", err.msg);
        goto out;
    }
    /* the log's place, before the data is read and the folder made (and
     * in --dry-run, which checks what a run checks): a log named as the
     * checkpoint not yet written, in a folder not yet made, is found by
     * where both would be (tlm_same_file) */
    r->have_val = (o->val && *o->val) || !(o->data && *o->data);
    if (r->dist.rank == 0 && (!ckpt_not_corpus(r, &err) || (o->log && *o->log && !log_not_input(r, o->log, &err)))) {
        rc = cli_error("train", "%s", err.msg);
        goto out;
    }
    if (r->dist.rank == 0) train_note_unused(o, stderr); /* stderr: --dry-run's stdout is `key value` lines */
    if (o->dry_run) {
        rc = dry_run(r, ckpt);
        goto out;
    }

    /* Data: the bundled corpora validate on Persuasion; a user's --data
     * validates only on an explicit --val. */
    r->T = o->s.context;
    r->micro = o->s.batch / o->s.accumulate;
    int64_t vocab = r->so.config->vocab;
    char whose[160]; /* from_checkpoint's words */
    if (!corpus_load(&r->train, o->data, CORPUS_TRAIN, r->T, vocab, r->train_name, sizeof r->train_name, &r->train_info,
                     &err)) {
        rc = cli_error("train", "%s%s", err.msg,
                       from_checkpoint(o, o->data, o->given_data, "--data", whose, sizeof whose));
        goto out;
    }
    if (r->have_val &&
        !corpus_load(&r->val, o->val, CORPUS_VALID, r->T, vocab, r->val_name, sizeof r->val_name, &r->val_info, &err)) {
        rc =
            cli_error("train", "%s%s", err.msg, from_checkpoint(o, o->val, o->given_val, "--val", whose, sizeof whose));
        goto out;
    }
    if (r->have_val) corpus_val_in_data(o->data, o->val, r->val_in_data, sizeof r->val_in_data);
    if (r->have_val && strcmp(r->val_info.tokenizer, r->train_info.tokenizer) != 0) {
        rc = data_kinds_differ(r);
        goto out;
    }
    if (!corpus_fits_model(&r->train_info, r->train_name, &r->so, &err)) {
        rc = cli_error("train", "%s", err.msg);
        goto out;
    }
    fingerprint_data(r);

    /* The optimizer's state and the step's token buffers live as long as
     * the model: counted in its memory check. */
    int64_t beside = tlm_trainer_state_bytes(&r->so, &o->s) + 2 * o->s.batch * r->T * (int64_t)sizeof *r->x;
    if (r->dist.mpi) beside += tlm_trainer_chain_bytes(&r->so, &o->s, r->dist.rank, r->dist.ranks);
    if ((rc = device_flag_open("train", o->device, &r->dev))) goto out;
    if (!tlm_model_create_on(&r->model, &r->so, r->dev, r->o.precision, r->micro, r->T, true, beside, &err) ||
        !tlm_trainer_create(&r->trainer, &r->model, &o->s, o->decay_embeddings, &err)) {
        rc = cli_error("train", "%s", err.msg);
        goto out;
    }
    if (o->profile && !(r->model.profile = tlm_profile_create(o->profile_kernels))) {
        rc = cli_error("train", "out of memory");
        goto out;
    }
    if (r->model.profile && !r->dev) tlm_profile_watch_threads(r->model.profile, r->model.threads);
    r->x = malloc((size_t)(o->s.batch * r->T) * sizeof *r->x);
    r->y = malloc((size_t)(o->s.batch * r->T) * sizeof *r->y);
    if (!r->x || !r->y) {
        rc = cli_error("train", "out of memory for a batch of %" PRId64 " x %" PRId64 " tokens", o->s.batch, r->T);
        goto out;
    }
    if ((rc = start_state(r, ckpt)) || (rc = tokens_fit(r))) goto out;
    /* A checkpoint folder that cannot be made should fail now, not after
     * hours of training. The folder, its lock and the log are rank 0's. */
    bool root = r->dist.rank == 0;
    if (root && (mkdir_p(r->ckpt_dir, &r->made) != 0 || access(r->ckpt_dir, W_OK) != 0)) {
        rc = cli_error("train", "%s: cannot create or write the checkpoint folder: %s", r->ckpt_dir, strerror(errno));
        goto out;
    }
    if (root && (rc = lock_folder(r))) {
        r->made.n = 0; /* the run that holds it (it may have come in since we made it) keeps it */
        goto out;
    }
    if (root && (rc = checkpoint_still_as_seen(r))) goto out;

    progress_init(&r->out, o->s.steps);
    /* Open MPI's mpirun gives its ranks a pseudo-terminal for stdout even
     * when its own output goes to a file or a pipe: under a launcher a
     * terminal says nothing of where the lines end up, so rank 0 prints
     * the plain lines, never the live one's carriage returns. */
    if (r->dist.mpi) r->out.tty = false;
    if (r->have_val)
        r->out.tokens_per_byte = r->val_info.text_bytes ? (double)r->val.n / (double)r->val_info.text_bytes : 0;
    if (root && o->log && *o->log && !progress_open_log(&r->out, o->log, o->resume, r->state.step, &err))
        rc = cli_error("train", "%s", err.msg);
    else if (root && r->out.log_lost)
        printf("note: the log %s %s; it holds this run's records from step %" PRId64 " on\n", o->log, r->out.log_lost,
               r->state.step + 1);
out:
    if (rc) unmake_dirs(&r->made);
    tlm_st_close(ckpt);
    return rc;
}

static void banner(const run *r) {
    const tlm_abi_train *s = &r->o.s;
    const tlm_abi_config *m = r->so.config;
    int64_t params = 0;
    for (uint32_t i = 0; i < r->so.header->nparams; i++) params += r->so.params[i].count;
    printf("model %s: %.2fM parameters, %" PRId64 " layer%s, d_model %" PRId64 ", context %" PRId64 "\n",
           tlm_so_str(&r->so, m->name), (double)params / 1e6, m->layers, m->layers == 1 ? "" : "s", m->d_model,
           m->context);
    const char *unit = r->train_info.shards ? "M tokens" : " MB";
    printf("data: %s, %.2f%s", r->train_name, (double)r->train.n / 1e6, unit);
    if (r->have_val) printf("; validation: %s, %.2f%s\n", r->val_name, (double)r->val.n / 1e6, unit);
    else printf("; no validation (give --val)\n");
    if (r->val_in_data[0])
        printf("note: the validation text %s is training data too: its loss measures text the model trains on\n",
               r->val_in_data);
    if (r->train_info.shards) printf("tokenizer %s, end-of-text id %d\n", r->train_info.tokenizer, r->train_info.eot);
    if (r->o.resume) printf("resuming at step %" PRId64 " of %" PRId64 ",", r->state.step, s->steps);
    else printf("training %" PRId64 " step%s,", s->steps, s->steps == 1 ? "" : "s");
    printf(" %" PRId64 " x %" PRId64 " tokens a step", s->batch, r->T);
    if (r->dist.ranks > 1)
        printf(" on %d ranks, %" PRId64 " micro-batch%s of %" PRId64 " each", r->dist.ranks,
               s->accumulate / r->dist.ranks, s->accumulate / r->dist.ranks > 1 ? "es" : "", r->micro);
    else if (s->accumulate > 1) printf(" in %" PRId64 " micro-batches", s->accumulate);
    char where[300];
    device_flag_describe(r->dev, where, sizeof where);
    printf(", %s lr %g, %s%s%s\n", tlm_enum_name(&tlm_optimizer_enum, s->optimizer), s->lr, where, r->dev ? ", " : "",
           r->dev ? tlm_precision_name(r->o.precision) : "");
    train_note_warmup(&r->o, stdout);
    if (r->model.gpu) {
        char kernels[400];
        device_kernels_describe(&r->so, r->dev, r->o.precision, tlm_gpu_graphs_off_reason(&r->model), kernels,
                                sizeof kernels);
        printf("%s\n", kernels);
        device_compile_report(&r->model, stdout);
    }
    printf("checkpoints: %s\n", r->ckpt_file);
    fflush(stdout);
}

/* Why the loss or gradient of the weights at r's step is not finite, as
 * the rest of a message: at step 0 (the initial weights, before any
 * update) it is the model's settings, never the learning rate. */
static const char *nan_cause_at(const run *r, char *buf, size_t n) {
    if (r->state.step != 0) return " (is the learning rate, or the weight decay, too high?)";
    snprintf(buf, n,
             " before any update (the initial weights): the model's settings make it diverge, not the learning rate%s",
             untrained_nan_hint(&r->so));
    return buf;
}

/* 0, or the exit status after a message. */
static int validate(run *r) {
    if (r->dist.rank > 0) return 0; /* rank 0 validates; the others go on and wait for it at the next step */
    tlm_eval_result res;
    tlm_err err = {""};
    /* --profile times the training steps, not the validations */
    tlm_profile *profile = r->model.profile;
    r->model.profile = NULL;
    if (tlm_test_hook("validation")) raise(SIGINT); /* test-only: a Ctrl-C while it runs */
    bool ok = tlm_eval_sampled(&r->model, &r->val, r->micro, r->T, r->o.s.eval_batches, VALIDATION_SEED, &res, &err);
    r->model.profile = profile;
    if (!ok) {
        progress_close(&r->out, NULL);
        return cli_error("train", "%s", err.msg);
    }
    /* a validation loss that is not finite is no result to print, and the
     * weights that gave it are no checkpoint: from the first update on the
     * run diverged; at step 0 the model's settings did it */
    if (!isfinite(res.loss)) {
        char last[4300], cause[160];
        last_checkpoint(r, last, sizeof last);
        progress_close(&r->out, NULL);
        return cli_error("train", "step %" PRId64 ": the validation loss is %s%s; %s", r->state.step,
                         isnan(res.loss) ? "NaN" : "Inf", nan_cause_at(r, cause, sizeof cause), last);
    }
    if (!progress_validation(&r->out, r->state.step, res.loss, &err)) return write_failed(r, "", &err);
    return 0;
}

/* --profile: its record in the log (before the log closes) ... */
static bool log_profile(run *r, tlm_err *err) {
    const tlm_profile *p = r->model.profile;
    if (!p || p->steps < 1 || !r->out.log) return true;
    fputs(PROGRESS_PROFILE_RECORD, r->out.log);
    if (tlm_profile_write_json(p, r->out.log) && fputs("}\n", r->out.log) >= 0) return true;
    return tlm_fail(err, "%s: cannot write the profile: %s", r->out.log_path, strerror(errno));
}
/* ... and its table (after the progress line has ended). */
static void print_profile(const run *r) {
    if (r->model.profile) tlm_profile_print(r->model.profile, stdout);
}

/* --profile under several ranks: this rank's communication and wait, and
 * on rank 0 every rank's (a collective: called where all ranks stop). */
static void profile_ranks(run *r) {
    tlm_profile *p = r->model.profile;
    if (!p || r->dist.ranks < 2) return;
    p->ranks = r->dist.ranks;
    p->comm_seconds = r->dist.comm_seconds;
    p->wait_seconds = r->dist.wait_seconds;
    p->buckets = r->dist.buckets;
    p->early_buckets = r->dist.early_buckets;
    const double mine[3] = {p->step_seconds, p->comm_seconds, p->wait_seconds};
    double *all = r->dist.rank == 0 ? calloc((size_t)r->dist.ranks * 3, sizeof *all) : NULL;
    if (r->dist.rank == 0 && !all) {
        fprintf(stderr, "tlm-run train: out of memory for the profile\n");
        tlm_dist_abort(&r->dist, 1);
    }
    tlm_dist_gather(&r->dist, mine, 3, all);
    p->per_rank = all;
}

/* ---- the loop ---- */

static int train_loop(run *r) {
    const tlm_abi_train *s = &r->o.s;
    tlm_err err = {""};
    int64_t logged_tokens = 0;
    double train_time = 0, logged_time = 0, step_ema = 0;
    r->started = progress_now();

    if (r->state.step == s->steps && r->o.resume) {
        printf("the checkpoint is already at step %" PRId64 " of %" PRId64 ": nothing to do (raise --steps to go on)\n",
               r->state.step, s->steps);
        return 0;
    }
    int rc;
    if (r->have_val && !r->o.resume && (rc = validate(r))) return rc;
    r->dist.comm_seconds = r->dist.wait_seconds = 0;
    r->dist.buckets = r->dist.early_buckets = 0;
    int end_signal = 0; /* ranks: the signal they agreed on at the last step */
    while (r->state.step < s->steps) {
        double t0 = progress_now();
        tlm_profile_mark profile_t0 = r->model.profile ? tlm_profile_now(r->model.profile) : (tlm_profile_mark){0};
        tlm_err e;
        if (tlm_data_sample_batch(&r->train, &r->state.data_rng, (int)s->batch, (int)r->T, r->x, r->y, &e) != 0) {
            progress_close(&r->out, NULL);
            return cli_error("train", "%s", e.msg);
        }
        tlm_step_result res = tlm_trainer_step(&r->trainer, r->x, r->y, r->T);
        const char *device_error = tlm_model_device_error(&r->model);
        if (device_error) {
            progress_close(&r->out, NULL);
            char last[4300];
            last_checkpoint(r, last, sizeof last);
            return cli_error("train", "step %" PRId64 ": %s; %s", r->state.step + 1, device_error, last);
        }
        if (!res.finite) {
            /* Every rank saw the same losses and gradient norm: all stop
             * here, rank 0 tells. */
            r->agreed = true;
            if (r->dist.rank > 0) return 1;
            progress_close(&r->out, NULL);
            bool loss_bad = !isfinite(res.loss);
            double bad = loss_bad ? res.loss : res.grad_norm;
            char last[4300], where[48] = "", cause[160];
            last_checkpoint(r, last, sizeof last);
            if (res.bad_rank >= 0) snprintf(where, sizeof where, " on rank %d of %d", res.bad_rank, r->dist.ranks);
            return cli_error("train", "step %" PRId64 ": the %s is %s%s%s, stopping; the step was not applied and %s",
                             r->state.step + 1, loss_bad ? "loss" : "gradient norm", isnan(bad) ? "NaN" : "Inf", where,
                             nan_cause_at(r, cause, sizeof cause), last);
        }
        /* A signal on any rank stops every rank after this step. The
         * flag is read once: one that comes during the agreement (a rank
         * blocked in it) waits for the next step's, or this rank alone
         * would stop. */
        int step_signal = stop_asked();
        if (r->dist.ranks > 1) {
            step_signal = tlm_dist_max(&r->dist, step_signal);
            if (step_signal && !stop_signal && step_signal != SIGPIPE) stop_signal = step_signal;
        }
        double dt = progress_now() - t0;
        if (r->model.profile) tlm_profile_steps(r->model.profile, 1, profile_t0);
        r->state.step++;
        r->state.tokens_seen += s->batch * r->T;
        train_time += dt;
        logged_tokens += s->batch * r->T;
        step_ema = step_ema == 0 ? dt : 0.9 * step_ema + 0.1 * dt;

        int64_t step = r->state.step;
        bool last = step == s->steps;
        if (r->dist.ranks < 2) step_signal = stop_asked(); /* alone: as late as it can */
        bool stop = last || step == r->o.stop_at || step_signal;
        if (last && step_signal != SIGPIPE) end_signal = step_signal;
        bool logged = last || step == 1 || (s->log_every > 0 && step % s->log_every == 0);
        progress_step ps = {
            .step = step,
            .loss = res.loss,
            .lr = res.lr,
            .grad_norm = res.grad_norm,
            .tokens_per_s = logged ? (double)logged_tokens / fmax(train_time - logged_time, 1e-9)
                                   : (double)(s->batch * r->T) / fmax(step_ema, 1e-9),
            .elapsed = elapsed(r),
            .eta = step_ema * (double)(s->steps - step),
            .mfu = NAN,
            .device_bytes = -1,
        };
        if (r->dev) {
            double peak = tlm_device_get_info(r->dev)->peak_bf16_tflops * 1e12;
            if (peak > 0) ps.mfu = ps.tokens_per_s * tlm_train_flops_per_token(&r->so, r->T) / peak;
            ps.device_bytes = (double)tlm_device_memory_in_use(r->dev);
        }
        bool validating = r->have_val && (last || (s->eval_every > 0 && step % s->eval_every == 0));
        if (!progress_update(&r->out, &ps, logged, validating, &err)) return write_failed(r, "", &err);
        if (r->dist.rank == 0) check_stdout(&r->out);
        if (logged) {
            logged_tokens = 0;
            logged_time = train_time;
        }
        if (validating && (rc = validate(r))) return rc;
        /* a signal during the validation stops at this step, with its
         * checkpoint, rather than after another step (alone: ranks agree on
         * stopping only at the next step's agreement) */
        if (validating && !stop && r->dist.ranks < 2 && (step_signal = stop_asked())) stop = true;
        if ((stop || (s->ckpt_every > 0 && step % s->ckpt_every == 0)) && !save_checkpoint(r, &err))
            return write_failed(r, "cannot write the checkpoint: ", &err);
        if (stop && !last) {
            r->agreed = true;
            profile_ranks(r);
            if (!log_profile(r, &err) || !progress_close(&r->out, &err)) return write_failed(r, "", &err);
            print_profile(r);
            int sig = step_signal;
            if (sig == SIGPIPE && stdout_lost) return stopped_without_stdout(step, s->steps, r->ckpt_file);
            const char *why = sig == SIGPIPE ? "standard output could not be written" : cli_signal_name(sig);
            printf("%s at step %" PRId64 " of %" PRId64, sig ? "interrupted" : "stopped", step, s->steps);
            if (why) printf(" (%s)", why);
            printf("; checkpoint %s (continue with --resume)\n", r->ckpt_file);
            /* a signal's status (another rank's closed pipe: SIGPIPE's, as
             * if it had ended the process) */
            return sig ? 128 + sig : 0;
        }
    }
    if (r->ckpt_step != r->state.step && !save_checkpoint(r, &err)) /* --steps 0 */
        return write_failed(r, "cannot write the checkpoint: ", &err);
    r->agreed = true;
    profile_ranks(r);
    if (!log_profile(r, &err) || !progress_close(&r->out, &err)) return write_failed(r, "", &err);
    print_profile(r);
    char took[16];
    progress_duration(took, sizeof took, elapsed(r));
    /* Tokens in full, as eval counts them: a short run's "0.00M" said nothing. */
    char tokens[32];
    /* A signal that came in the last step or the final validation finds
     * the run complete, and says so; its status is still the signal's, so
     * that a script's loop over runs stops as the user asked. Ranks use
     * the signal they agreed on at the last step, so they end alike. */
    int sig = r->dist.ranks > 1 ? end_signal : stop_signal;
    printf("done: %" PRId64 " step%s, %s tokens in %s; checkpoint %s", r->state.step, r->state.step == 1 ? "" : "s",
           fmt_int(tokens, sizeof tokens, r->state.tokens_seen, 0), took, r->ckpt_file);
    if (cli_signal_name(sig)) printf(" (%s came at the end: the run is complete)", cli_signal_name(sig));
    putchar('\n');
    return sig ? 128 + sig : 0;
}

/* Several ranks train one model only if they run one job: mpirun's
 * per-rank commands (`-np 1 ... : -np 1 ...`), or files that differ
 * between machines, could give a rank another model, other settings, other
 * data or another checkpoint, and its gradients would be summed into the
 * others' without a word; a rank told to stop at another step, or to
 * profile when the others do not, would wait forever in a collective the
 * others never reach. Each rank's fingerprints are compared with rank 0's
 * before the first step (a collective every rank reaches once every rank
 * has set up, one that will not train included: --help); rank 0 names
 * the first rank that differs, and every rank stops with exit 1. */
/* What the ranks compare, in the order a mismatch is told: whether they
 * train, the model, each setting (so that the message names the one that
 * differs), the data, the starting state. */
enum { SAME_TRAINS, SAME_MODEL, SAME_SETTING0 };
/* after the train block's settings, the flags that decide where the ranks
 * meet: how they compute, when they stop, --profile */
static const char *const meeting_flags[] = {"--precision", "--device",  "--decay-embeddings",
                                            "--resume",    "--profile", "--stop-at"};
enum {
    SAME_FLAG0 = SAME_SETTING0 + TLM_TRAIN_NSETTINGS,
    SAME_DATA = SAME_FLAG0 + (int)(sizeof meeting_flags / sizeof *meeting_flags),
    SAME_STATE,
    SAME_COUNT
};

_Static_assert(SAME_COUNT <= TLM_DIST_COMPARE_MAX, "tlm_dist_first_mismatch compares them all");

static uint64_t hash_of(const void *p, size_t n) { return tlm_fnv1a(TLM_FNV_OFFSET, p, n); }

static int check_ranks_run_one_job(run *r, bool trains) { /* trains: not after --help */
    uint64_t mine[SAME_COUNT] = {0};
    mine[SAME_TRAINS] = !trains ? 0 : r->o.dry_run ? 1 : 2;
    if (trains) {
        /* The resolved settings (not the paths: two ranks may name the
         * same data differently). */
        for (int i = 0; i < TLM_TRAIN_NSETTINGS; i++) {
            char value[64];
            tlm_train_format(value, sizeof value, &tlm_train_settings[i], &r->o.s);
            mine[SAME_SETTING0 + i] = hash_of(value, strlen(value) + 1);
        }
        const char *precision = tlm_precision_name(r->o.precision);
        const train_options *o = &r->o;
        const bool on_device = r->dev != NULL;
        const uint64_t flags[] = {hash_of(precision, strlen(precision) + 1),
                                  hash_of(&on_device, sizeof on_device),
                                  hash_of(&o->decay_embeddings, sizeof o->decay_embeddings),
                                  hash_of(&o->resume, sizeof o->resume),
                                  hash_of(&o->profile, sizeof o->profile),
                                  hash_of(&o->stop_at, sizeof o->stop_at)};
        _Static_assert(sizeof flags / sizeof *flags == sizeof meeting_flags / sizeof *meeting_flags,
                       "a hash for each meeting flag");
        memcpy(&mine[SAME_FLAG0], flags, sizeof flags);
        const tlm_blob_header *blob = r->so.header;
        uint64_t h = hash_of(&blob->size, sizeof blob->size);
        mine[SAME_MODEL] = tlm_fnv1a(h, &blob->checksum, sizeof blob->checksum);
        mine[SAME_DATA] = hash_of(r->data_fingerprint, strlen(r->data_fingerprint));
        /* The starting state: a fresh start's follows from the settings; a
         * checkpoint's step, sampler and elapsed time tell one run's
         * checkpoint from another's (or a stale copy of it). */
        h = hash_of(&r->state.step, sizeof r->state.step);
        h = tlm_fnv1a(h, &r->state.tokens_seen, sizeof r->state.tokens_seen);
        h = tlm_fnv1a(h, &r->state.data_rng, sizeof r->state.data_rng);
        mine[SAME_STATE] = tlm_fnv1a(h, &r->state.elapsed, sizeof r->state.elapsed);
    }

    int item = 0, rank = tlm_dist_first_mismatch(&r->dist, mine, SAME_COUNT, &item);
    if (rank < 0) return 0;
    if (r->dist.rank > 0) return 1; /* rank 0 tells */
    if (item >= SAME_SETTING0 && item < SAME_DATA) {
        const char *flag =
            item < SAME_FLAG0 ? tlm_train_settings[item - SAME_SETTING0].flag : meeting_flags[item - SAME_FLAG0];
        return cli_error("train",
                         "rank %d of %d has different training settings from rank 0's (%s differs, the first that "
                         "does): give every rank the same flags",
                         rank, r->dist.ranks, flag);
    }
    static const char *const what[SAME_COUNT] = {
        [SAME_TRAINS] = "was given different flags from rank 0's (--help or --dry-run on one of them): give "
                        "every rank the same flags",
        [SAME_MODEL] = "loaded a different model.so from rank 0's: every rank must train the same model",
        [SAME_DATA] = "read different training data from rank 0's: every rank must read the same data (one "
                      "machine, or a shared file system)",
        [SAME_STATE] = "resumed a different checkpoint from rank 0's: every rank must read the same one (one "
                       "machine, or a shared file system)",
    };
    return cli_error("train", "rank %d of %d %s", rank, r->dist.ranks, what[item]);
}

/* The ranks' gradient chain. On a GPU it opens NCCL, whose set-up is
 * collective (each rank waits in it for all the others): so it comes after
 * every rank has set up and been found to run the same job, and a rank that
 * fails here is told of once, as in set-up, rather than leaving the others
 * waiting in a collective it never reaches. */
static int join_chain(run *r) {
    rank_output_quiet(r->dist.rank);
    tlm_err err = {""};
    int rc = 0;
    bool stopped = false; /* by another rank's failure, which that rank tells */
    if ((r->dev && !tlm_dist_use_device(&r->dist, r->dev, &err)) ||
        !tlm_trainer_join(&r->trainer, &r->dist.chain, &err)) {
        if (err.msg[0]) rc = cli_error("train", "%s", err.msg);
        else stopped = true;
    }
    char held[TLM_DIST_MESSAGE_BYTES];
    rank_output_release(held, sizeof held);
    rc = tlm_dist_agree_status(&r->dist, rc, held);
    return rc ? rc : stopped;
}

/* A SIGUSR1 before the loop's handler is in place (the data loading, the
 * model's creation, the ranks' agreement): its default would end the
 * process with no checkpoint, and mpirun passes one on whenever it is
 * sent. Noted here, it stops the run after its first step instead. */
static void on_early_usr1(int sig) {
    (void)sig;
    usr1_early = 1;
}

/* A run that fails before its first checkpoint is on disk (another rank's
 * failed start, the first checkpoint's write on a full disk) takes back
 * the folders it made for it, as a failed start does (setup): the lock it
 * holds is on the folder itself, and a folder with a file in it (the
 * log's) stays. */
static void forget_folders(run *r, int rc) {
    if (rc != 0 && r->dist.rank == 0 && !checkpoint_saved) unmake_dirs(&r->made);
}

int cmd_train(int argc, char **argv) {
    run *r = calloc(1, sizeof *r);
    if (!r) return cli_error("train", "out of memory");
    tlm_err err = {""};
    if (!tlm_dist_start(&r->dist, &err)) {
        free(r);
        return cli_error("train", "%s", err.msg);
    }
    rank_output_quiet(r->dist.rank);
    usr1_early = 0;
    struct sigaction early = {.sa_handler = on_early_usr1}, usr1_was;
    sigemptyset(&early.sa_mask);
    sigaction(SIGUSR1, &early, &usr1_was);
    int rc = train_parse(&r->o, argc, argv);
    bool go = rc < 0; /* not after --help or a usage error */
    r->lock_fd = -1;
    if (go) rc = setup(r);
    if (go && rc == 0 && tlm_test_hook("setup")) raise(SIGUSR1); /* test-only: before the loop's handler */
    /* Every rank started, or the job stops here, its failure told once. */
    char held[TLM_DIST_MESSAGE_BYTES];
    rank_output_release(held, sizeof held);
    rc = tlm_dist_agree_status(&r->dist, rc, held);
    if (rc == 0) rc = check_ranks_run_one_job(r, go);
    if (go && rc == 0 && !r->o.dry_run && r->dist.mpi) rc = join_chain(r); /* a dry run made no trainer */
    bool trained = false; /* the loop ran */
    if (go && rc == 0 && !r->o.dry_run) {
        if (r->dist.rank == 0) banner(r);
        stop_signal = 0;
        stdout_tty = r->out.tty;
        quiet_signals = r->dist.rank > 0;
        several_ranks = r->dist.ranks > 1;
        stdout_lost = 0;
        made_for_signal = r->dist.rank == 0 ? &r->made : NULL;
        handle_signals(on_signal);
        if (usr1_early) on_signal(SIGUSR1); /* as if it came now: says so, stops after this step */
        struct sigaction ignore = {.sa_handler = SIG_IGN}, pipe_was;
        sigaction(SIGPIPE, &ignore, &pipe_was);
        rc = train_loop(r);
        sigaction(SIGPIPE, &pipe_was, NULL); /* as MPI or the caller left it */
        handle_signals(SIG_DFL);
        trained = true;
    }
    forget_folders(r, rc);
    made_for_signal = NULL;
    /* A failure in training only this rank saw: the others wait on it at
     * the next collective, so the job ends here. */
    if (trained && rc != 0 && !r->agreed && r->dist.ranks > 1) tlm_dist_abort(&r->dist, rc);
    sigaction(SIGUSR1, &usr1_was, NULL);
    progress_close(&r->out, NULL);
    if (r->lock_fd >= 0) close(r->lock_fd);
    free(r->x);
    free(r->y);
    tlm_trainer_destroy(&r->trainer);
    tlm_profile_destroy(r->model.profile);
    r->model.profile = NULL;
    tlm_model_destroy(&r->model);
    if (r->dev) tlm_device_close(r->dev);
    tlm_data_free(&r->train);
    tlm_data_free(&r->val);
    if (r->so.handle) tlm_so_close(&r->so);
    train_options_free(&r->o);
    tlm_dist_finish(&r->dist);
    free(r);
    return rc;
}
