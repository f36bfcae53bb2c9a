#include "train_options.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "tlm_rt/json.h"

enum kind { INT, SEED, REAL };

/* The numeric settings a flag can set. `trajectory`: changing it changes
 * the numbers a run produces, so a resumed run must keep it. */
static const struct setting {
    const char *flag, *key;
    enum kind kind;
    size_t off;
    bool trajectory;
    double lo;
    bool lo_open;
    int64_t hi;              /* integers: the largest allowed */
} settings[TRAIN_NSETTINGS] = {
    /* Sizes stay below 2^20 so that batch × context fits the int the data
     * loader takes, and step counts below 2^40 so that tokens_seen fits. */
    {"--steps", "steps", INT, offsetof(tlm_abi_train, steps), false, 0, false, INT64_C(1) << 40},
    {"--batch", "batch", INT, offsetof(tlm_abi_train, batch), true, 1, false, 1 << 20},
    {"--accumulate", "accumulate", INT, offsetof(tlm_abi_train, accumulate), true, 1, false, 1 << 20},
    {"--context", "context", INT, offsetof(tlm_abi_train, context), true, 1, false, 1 << 20},
    {"--lr", "lr", REAL, offsetof(tlm_abi_train, lr), true, 0, true, 0},
    {"--min-lr", "min_lr", REAL, offsetof(tlm_abi_train, min_lr), true, 0, false, 0},
    {"--warmup", "warmup", INT, offsetof(tlm_abi_train, warmup), true, 0, false, INT64_C(1) << 40},
    {"--weight-decay", "weight_decay", REAL, offsetof(tlm_abi_train, weight_decay), true, 0, false, 0},
    {"--grad-clip", "grad_clip", REAL, offsetof(tlm_abi_train, grad_clip), true, 0, false, 0},
    {"--seed", "seed", SEED, offsetof(tlm_abi_train, seed), true, 0, false, INT64_MAX},
    {"--eval-every", "eval_every", INT, offsetof(tlm_abi_train, eval_every), false, 0, false, INT64_MAX},
    {"--eval-batches", "eval_batches", INT, offsetof(tlm_abi_train, eval_batches), false, 1, false, 1 << 20},
    {"--ckpt-every", "ckpt_every", INT, offsetof(tlm_abi_train, ckpt_every), false, 0, false, INT64_MAX},
    {"--log-every", "log_every", INT, offsetof(tlm_abi_train, log_every), false, 0, false, INT64_MAX},
};

/* The optimizer's settings, which only the model's train {} block sets. */
static const struct { const char *key; size_t off; } optimizer_reals[] = {
    {"beta1", offsetof(tlm_abi_train, beta1)},
    {"beta2", offsetof(tlm_abi_train, beta2)},
    {"eps", offsetof(tlm_abi_train, eps)},
    {"momentum", offsetof(tlm_abi_train, momentum)},
};
#define NOPT ((int)(sizeof optimizer_reals / sizeof *optimizer_reals))

static const char *const optimizer_names[] = {"adamw", "sgd"};
static const char *const schedule_names[] = {"cosine", "linear", "constant"};

static int64_t *int_at(tlm_abi_train *s, size_t off) { return (int64_t *)(void *)((char *)s + off); }
static double *real_at(tlm_abi_train *s, size_t off) { return (double *)(void *)((char *)s + off); }
static uint64_t *seed_at(tlm_abi_train *s, size_t off) { return (uint64_t *)(void *)((char *)s + off); }

static void value_text(char *buf, size_t n, const struct setting *st, const tlm_abi_train *s) {
    tlm_abi_train *m = (tlm_abi_train *)s;
    if (st->kind == INT) snprintf(buf, n, "%" PRId64, *int_at(m, st->off));
    else if (st->kind == SEED) snprintf(buf, n, "%" PRIu64, *seed_at(m, st->off));
    else snprintf(buf, n, "%g", *real_at(m, st->off));
}

static void usage(FILE *out) {
    fputs("usage: tlm-run train MODEL.so [options]\n"
          "\n"
          "Trains the model on byte-level text and writes checkpoints. Flags override the\n"
          "model's train {} defaults (see `tlm-run info MODEL.so`).\n"
          "\n"
          "data:\n"
          "  --data FILE|DIR      training text: a file, or a folder of .txt files\n"
          "                       (default: the five Austen novels in $TLM_DATA/austen)\n"
          "  --val FILE|DIR       validation text (default with the bundled data: Persuasion;\n"
          "                       with --data and no --val: no validation)\n"
          "run:\n"
          "  --steps N            optimizer steps in all\n"
          "  --batch N            sequences per step\n"
          "  --accumulate N       micro-batches per step (must divide --batch)\n"
          "  --context T          tokens per sequence (at most the model's context)\n"
          "  --seed N             seeds the initial parameters and the data order\n"
          "  --threads N          CPU threads (default: all cores)\n"
          "  --device cpu         where to run (cpu is the only one available yet)\n"
          "optimizer:\n"
          "  --lr X               peak learning rate (> 0)\n"
          "  --min-lr X           learning rate at the end of the schedule\n"
          "  --warmup N           steps of linear warm-up\n"
          "  --weight-decay X     decoupled weight decay (AdamW) or L2 (SGD)\n"
          "  --grad-clip X        clip the global gradient norm to X (0: off)\n"
          "  --decay-embeddings   decay the embedding (and a tied head) too\n"
          "evaluation and output:\n"
          "  --eval-every N       validate every N steps (0: only at the start and end)\n"
          "  --eval-batches N     batches per validation\n"
          "  --log FILE           JSON lines: one per logged step and per validation\n"
          "  --log-every N        log (and print, when not on a terminal) every N steps\n"
          "checkpoints:\n"
          "  --ckpt DIR           where checkpoint.safetensors goes (default: checkpoints/MODEL)\n"
          "  --ckpt-every N       write it every N steps (0: only at the end); always at the end\n"
          "  --resume             continue the run in DIR exactly where it stopped; flags\n"
          "                       default to the checkpoint's, only --steps may change\n"
          "  --overwrite          start afresh even though DIR holds a checkpoint\n"
          "  --stop-at N          stop after step N as an interruption would (the schedule\n"
          "                       still spans --steps); Ctrl-C does the same at the next step\n"
          "\n"
          "Exit status: 0 ok, 1 error (model, data, checkpoint, NaN), 2 bad usage.\n",
          out);
}

int train_parse(train_options *o, int argc, char **argv) {
    memset(o, 0, sizeof *o);
    cli_args a = {.cmd = "train", .argc = argc, .argv = argv};
    for (a.i = 1; a.i < argc; a.i++) {
        const char *arg = argv[a.i];
        int64_t n;
        if (cli_switch(&a, "--help") || cli_switch(&a, "-h")) {
            usage(stdout);
            return 0;
        } else if (cli_switch(&a, "--resume")) o->resume = true;
        else if (cli_switch(&a, "--overwrite")) o->overwrite = true;
        else if (cli_switch(&a, "--decay-embeddings")) o->given_decay = true;
        else if (cli_option(&a, "--data")) {
            if (!(o->data = a.val)) return 2;
            o->given_data = true;
        } else if (cli_option(&a, "--val")) {
            if (!(o->val = a.val)) return 2;
            o->given_val = true;
        } else if (cli_option(&a, "--log")) {
            if (!(o->log = a.val)) return 2;
            o->given_log = true;
        } else if (cli_option(&a, "--ckpt")) {
            if (!(o->ckpt = a.val)) return 2;
        } else if (cli_option(&a, "--device")) {
            if (!(o->device = a.val)) return 2;
            if (!strcmp(a.val, "cuda") || !strncmp(a.val, "cuda:", 5) || !strcmp(a.val, "gpu"))
                return cli_error("train", "--device %s is not available yet: this build trains on the CPU only "
                                          "(use --device cpu)", a.val);
            if (strcmp(a.val, "cpu") != 0) return cli_usage_error("train", "unknown device `%s` (known: cpu)", a.val);
        } else if (cli_option(&a, "--threads")) {
            if (!cli_int(&a, 1, 4096, &n)) return 2;
            o->threads = (int)n;
        } else if (cli_option(&a, "--stop-at")) {
            if (!cli_int(&a, 1, INT64_MAX, &o->stop_at)) return 2;
        } else {
            int k = 0;
            while (k < TRAIN_NSETTINGS && !cli_option(&a, settings[k].flag)) k++;
            if (k < TRAIN_NSETTINGS) {
                const struct setting *st = &settings[k];
                bool ok;
                if (st->kind == REAL) ok = cli_real(&a, st->lo, st->lo_open, real_at(&o->flags, st->off));
                else if (st->kind == INT) ok = cli_int(&a, (int64_t)st->lo, st->hi, int_at(&o->flags, st->off));
                else {
                    ok = cli_int(&a, 0, INT64_MAX, &n);
                    *seed_at(&o->flags, st->off) = (uint64_t)n;
                }
                if (!ok) return 2;
                o->given[k] = true;
            } else if (arg[0] == '-' && arg[1]) return cli_usage_error("train", "unknown option `%s`", arg);
            else if (o->model) return cli_usage_error("train", "more than one model given (`%s`)", arg);
            else o->model = arg;
        }
    }
    if (!o->model) return cli_usage_error("train", "no MODEL.so given");
    if (o->resume && o->overwrite) return cli_usage_error("train", "--resume and --overwrite contradict each other");
    return -1;
}

void train_options_free(train_options *o) {
    for (int i = 0; i < 3; i++) free(o->owned[i]);
    memset(o->owned, 0, sizeof o->owned);
}

void train_apply(train_options *o, const tlm_abi_train *defaults, bool decay, const char *data, const char *val,
                 const char *log) {
    o->s = *defaults;
    for (int k = 0; k < TRAIN_NSETTINGS; k++) {
        if (!o->given[k]) continue;
        const struct setting *st = &settings[k];
        if (st->kind == REAL) *real_at(&o->s, st->off) = *real_at(&o->flags, st->off);
        else if (st->kind == INT) *int_at(&o->s, st->off) = *int_at(&o->flags, st->off);
        else *seed_at(&o->s, st->off) = *seed_at(&o->flags, st->off);
    }
    o->decay_embeddings = o->given_decay || decay;
    if (!o->given_data) o->data = data;
    if (!o->given_val) o->val = val;
    if (!o->given_log) o->log = log;
}

int train_check(const train_options *o, const tlm_so *so) {
    tlm_abi_train s = o->s;
    /* Defaults come from the model or a checkpoint, so check them all, not
     * only what the flags set. */
    for (int k = 0; k < TRAIN_NSETTINGS; k++) {
        const struct setting *st = &settings[k];
        char v[48];
        value_text(v, sizeof v, st, &s);
        bool bad = st->kind == REAL ? (st->lo_open ? !(*real_at(&s, st->off) > st->lo)
                                                   : !(*real_at(&s, st->off) >= st->lo))
                 : st->kind == INT  ? *int_at(&s, st->off) < (int64_t)st->lo || *int_at(&s, st->off) > st->hi
                                    : false;
        if (bad && st->kind == INT)
            return cli_usage_error("train", "%s must be between %g and %" PRId64 " (got %s)", st->flag, st->lo,
                                   st->hi, v);
        if (bad)
            return cli_usage_error("train", "%s must be %s %g (got %s)", st->flag, st->lo_open ? ">" : ">=", st->lo, v);
    }
    if (s.batch % s.accumulate != 0)
        return cli_usage_error("train", "--batch %" PRId64 " is not divisible by --accumulate %" PRId64, s.batch,
                               s.accumulate);
    if (s.context > so->config->context)
        return cli_usage_error("train", "--context %" PRId64 " is longer than the model's context (%" PRId64 ")",
                               s.context, so->config->context);
    if (s.optimizer > TLM_OPT_SGD || s.lr_schedule > TLM_LR_CONSTANT)
        return cli_usage_error("train", "unknown optimizer or learning-rate schedule");
    return 0;
}

bool train_same_trajectory(const train_options *o, const tlm_abi_train *ckpt, bool ckpt_decay, char *err,
                           size_t errlen) {
    tlm_abi_train now = o->s, then = *ckpt;
    for (int k = 0; k < TRAIN_NSETTINGS; k++) {
        const struct setting *st = &settings[k];
        if (!st->trajectory) continue;
        bool same = st->kind == REAL ? *real_at(&now, st->off) == *real_at(&then, st->off)
                  : st->kind == INT  ? *int_at(&now, st->off) == *int_at(&then, st->off)
                                     : *seed_at(&now, st->off) == *seed_at(&then, st->off);
        if (!same) {
            char a[48], b[48];
            value_text(a, sizeof a, st, &now);
            value_text(b, sizeof b, st, &then);
            snprintf(err, errlen,
                     "%s is %s, the checkpoint's is %s: a resumed run keeps the settings that shape its "
                     "trajectory (only --steps may change)", st->flag, a, b);
            return false;
        }
    }
    if (o->decay_embeddings != ckpt_decay) {
        snprintf(err, errlen, "--decay-embeddings is %s, in the checkpoint's run it was %s",
                 o->decay_embeddings ? "on" : "off", ckpt_decay ? "on" : "off");
        return false;
    }
    bool same_opt = now.optimizer == then.optimizer && now.lr_schedule == then.lr_schedule;
    for (int k = 0; k < NOPT; k++)
        same_opt = same_opt && *real_at(&now, optimizer_reals[k].off) == *real_at(&then, optimizer_reals[k].off);
    if (!same_opt) {
        snprintf(err, errlen, "the optimizer or its schedule differs from the checkpoint's");
        return false;
    }
    return true;
}

/* ---- the settings as JSON ---- */

char *train_settings_json(const train_options *o) {
    tlm_strbuf sb = {0};
    tlm_abi_train s = o->s;
    tlm_sb_puts(&sb, "{");
    for (int k = 0; k < TRAIN_NSETTINGS; k++) {
        const struct setting *st = &settings[k];
        tlm_sb_printf(&sb, "\"%s\":", st->key);
        /* %.17g: a double survives the round trip exactly; a seed is
         * written as the int64 of its bits, which JSON readers keep exact. */
        if (st->kind == REAL) tlm_sb_printf(&sb, "%.17g,", *real_at(&s, st->off));
        else if (st->kind == INT) tlm_sb_printf(&sb, "%" PRId64 ",", *int_at(&s, st->off));
        else tlm_sb_printf(&sb, "%" PRId64 ",", (int64_t)*seed_at(&s, st->off));
    }
    for (int k = 0; k < NOPT; k++) tlm_sb_printf(&sb, "\"%s\":%.17g,", optimizer_reals[k].key, *real_at(&s, optimizer_reals[k].off));
    tlm_sb_printf(&sb, "\"optimizer\":\"%s\",\"lr_schedule\":\"%s\",\"decay_embeddings\":%s",
                  optimizer_names[s.optimizer <= TLM_OPT_SGD ? s.optimizer : 0],
                  schedule_names[s.lr_schedule <= TLM_LR_CONSTANT ? s.lr_schedule : 0],
                  o->decay_embeddings ? "true" : "false");
    const char *keys[3] = {"data", "val", "log"}, *vals[3] = {o->data, o->val, o->log};
    for (int k = 0; k < 3; k++) {
        tlm_sb_printf(&sb, ",\"%s\":", keys[k]);
        if (vals[k]) tlm_json_write_string(&sb, vals[k], strlen(vals[k]));
        else tlm_sb_puts(&sb, "null");
    }
    tlm_sb_puts(&sb, "}");
    if (sb.oom) {
        tlm_sb_free(&sb);
        return NULL;
    }
    return sb.buf;
}

static int name_index(const char *const *names, int n, const char *s) {
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], s)) return i;
    return -1;
}

bool train_settings_parse(const char *json, tlm_abi_train *s, bool *decay, char **data, char **val, char **log,
                          char *err, size_t errlen) {
    tlm_err e;
    tlm_json *j = tlm_json_parse(json, strlen(json), &e);
    memset(s, 0, sizeof *s);
    *data = *val = *log = NULL;
    const char *missing = NULL;
    if (!j || j->type != TLM_JSON_OBJECT) {
        snprintf(err, errlen, "the checkpoint's settings are not a JSON object");
        tlm_json_free(j);
        return false;
    }
    for (int k = 0; k < TRAIN_NSETTINGS && !missing; k++) {
        const struct setting *st = &settings[k];
        const tlm_json *v = tlm_json_get(j, st->key);
        if (!v || v->type != TLM_JSON_NUMBER || (st->kind != REAL && !v->is_int)) missing = st->key;
        else if (st->kind == REAL) *real_at(s, st->off) = v->number;
        else if (st->kind == INT) *int_at(s, st->off) = v->integer;
        else *seed_at(s, st->off) = (uint64_t)v->integer;
    }
    for (int k = 0; k < NOPT && !missing; k++) {
        const tlm_json *v = tlm_json_get(j, optimizer_reals[k].key);
        if (!v || v->type != TLM_JSON_NUMBER) missing = optimizer_reals[k].key;
        else *real_at(s, optimizer_reals[k].off) = v->number;
    }
    const tlm_json *opt = tlm_json_get(j, "optimizer"), *sched = tlm_json_get(j, "lr_schedule"),
                   *dec = tlm_json_get(j, "decay_embeddings");
    int oi = opt && opt->type == TLM_JSON_STRING ? name_index(optimizer_names, 2, opt->str) : -1;
    int si = sched && sched->type == TLM_JSON_STRING ? name_index(schedule_names, 3, sched->str) : -1;
    if (!missing && oi < 0) missing = "optimizer";
    if (!missing && si < 0) missing = "lr_schedule";
    if (!missing && (!dec || dec->type != TLM_JSON_BOOL)) missing = "decay_embeddings";
    if (!missing) {
        s->optimizer = (uint32_t)oi;
        s->lr_schedule = (uint32_t)si;
        *decay = dec->boolean;
        const char *keys[3] = {"data", "val", "log"};
        char **outs[3] = {data, val, log};
        for (int k = 0; k < 3; k++) {
            const tlm_json *v = tlm_json_get(j, keys[k]);
            if (v && v->type == TLM_JSON_STRING) *outs[k] = strdup(v->str);
        }
    }
    tlm_json_free(j);
    if (missing) {
        snprintf(err, errlen, "the checkpoint's settings lack a valid `%s`", missing);
        return false;
    }
    return true;
}
