#include "train_options.h"

#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "device_flag.h"
#include "numfmt.h"
#include "tlm_rt/json.h"

/* The flags that are not training settings; a setting's flag returns
 * OPT_SETTING + its row in the table. */
enum {
    OPT_DATA = 256,
    OPT_VAL,
    OPT_LOG,
    OPT_CKPT,
    OPT_DEVICE,
    OPT_PRECISION,
    OPT_THREADS,
    OPT_RESUME,
    OPT_OVERWRITE,
    OPT_DECAY_EMBEDDINGS,
    OPT_STOP_AT,
    OPT_DRY_RUN,
    OPT_PROFILE,
    OPT_PROFILE_KERNELS,
    OPT_SETTING = 512,
};

static const struct option other_options[] = {
    {"help", no_argument, NULL, 'h'},
    {"data", required_argument, NULL, OPT_DATA},
    {"val", required_argument, NULL, OPT_VAL},
    {"log", required_argument, NULL, OPT_LOG},
    {"ckpt", required_argument, NULL, OPT_CKPT},
    {"device", required_argument, NULL, OPT_DEVICE},
    {"precision", required_argument, NULL, OPT_PRECISION},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"resume", no_argument, NULL, OPT_RESUME},
    {"overwrite", no_argument, NULL, OPT_OVERWRITE},
    {"decay-embeddings", no_argument, NULL, OPT_DECAY_EMBEDDINGS},
    {"stop-at", required_argument, NULL, OPT_STOP_AT},
    {"dry-run", no_argument, NULL, OPT_DRY_RUN},
    {"profile", no_argument, NULL, OPT_PROFILE},
    {"profile-kernels", no_argument, NULL, OPT_PROFILE_KERNELS},
};
#define NOTHER ((int)(sizeof other_options / sizeof *other_options))

/* The choices of a row as "adamw|sgd" (sep "|") or "adamw, sgd". */
static const char *choice_list(char *buf, size_t n, const tlm_train_setting *row, const char *sep) {
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < row->choices->count && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%s", i ? sep : "", row->choices->names[i]);
    return buf;
}

/* Writes `text` from column `column` on, wrapped at 80 columns with
 * continuation lines indented by `indent`. */
static void wrap(FILE *out, const char *text, int column, int indent) {
    enum { WIDTH = 80 };
    const char *p = text;
    while (*p) {
        size_t word = strcspn(p, " ");
        if (column > indent && column + 1 + (int)word > WIDTH) {
            fprintf(out, "\n%*s", indent, "");
            column = indent;
        } else if (column > indent) {
            fputc(' ', out);
            column++;
        }
        column += fprintf(out, "%.*s", (int)word, p);
        p += word;
        while (*p == ' ') p++;
    }
    fputc('\n', out);
}

static void usage(FILE *out) {
    fputs("usage: tlm-run train MODEL.so [options]\n"
          "\n"
          "Trains the model on text (as bytes) or token shards and writes checkpoints. The\n"
          "settings' flags override the model's train {} defaults (see `tlm-run info\n"
          "MODEL.so`) and take the values a train {} block takes.\n"
          "\n"
          "data:\n"
          "  --data FILE|DIR      training text: a file, or a folder of .txt files; or token\n"
          "                       shards: a *.bin file or a folder of them (docs/data.md)\n"
          "                       (default: the five Austen novels in $TLM_DATA/austen)\n"
          "  --val FILE|DIR       validation text or shards (default with the bundled data:\n"
          "                       Persuasion; with --data and no --val: no validation)\n"
          "  --log FILE           JSON lines: one per logged step and per validation\n"
          "run:\n"
          "  --threads N          CPU threads (default: all cores; with --resume: the\n"
          "                       checkpoint's count, which its bits depend on)\n"
          "  --device DEV         cpu (default), cuda or cuda:N (docs/gpu.md)\n"
          "  --precision P        bf16 (the GPU's default: bf16 GEMMs, fp32 master weights)\n"
          "                       or fp32 (the CPU's only one)\n"
          "  --profile            time each op kind: a table at the end, a record in the log\n"
          "                       (on a GPU each op is waited for: slower while profiling)\n"
          "  --profile-kernels    --profile, and on a device each kernel's and GEMM's time\n"
          "                       (each waited for, before and after: the op times grow)\n"
          "  --decay-embeddings   decay the embedding (and a tied head) too\n"
          "  --dry-run            resolve the settings as a run would (the model's, the\n"
          "                       flags, with --resume the checkpoint's), print them one\n"
          "                       `key value` a line and exit, training and writing nothing\n"
          "checkpoints:\n"
          "  --ckpt DIR           where checkpoint.safetensors goes (default: checkpoints/MODEL)\n"
          "  --resume             continue the run in DIR exactly where it stopped; flags\n"
          "                       default to the checkpoint's; of the settings that shape\n"
          "                       the trajectory only --steps may change (--threads,\n"
          "                       --device, --log, --val and the cadences may too)\n"
          "  --overwrite          start afresh even though DIR holds a checkpoint\n"
          "  --stop-at N          stop after step N as an interruption would (the schedule\n"
          "                       still spans --steps); Ctrl-C does the same at the next step\n"
          "settings ([range]; the default when the model's train {} block omits it):\n",
          out);
    enum { TEXT_COLUMN = 23 };
    for (int i = 0; i < TLM_TRAIN_NSETTINGS; i++) {
        const tlm_train_setting *row = &tlm_train_settings[i];
        char list[64];
        const char *metavar = row->kind == TLM_TS_CHOICE ? choice_list(list, sizeof list, row, "|")
                              : row->kind == TLM_TS_REAL ? "X"
                                                         : "N";
        int column = fprintf(out, "  %s %s", row->flag, metavar);
        if (column >= TEXT_COLUMN) {
            fputc('\n', out);
            column = 0;
        }
        fprintf(out, "%*s", TEXT_COLUMN - column, "");
        wrap(out, row->help, TEXT_COLUMN, TEXT_COLUMN);
        /* The range on a line of its own, so that it is never split. */
        fprintf(out, "%*s%s%sdefault %s\n", TEXT_COLUMN, "", row->range_text ? row->range_text : "",
                row->range_text ? ", " : "", row->default_text);
    }
    fputs("\nExit status: 0 ok, 1 error (model, data, checkpoint, NaN), 2 bad usage.\n", out);
}

/* "--lr must be > 0 and <= 1e+30 (got 0)": the row's range, exit 2, for a
 * flag's value (from NULL); a value the model or a checkpoint holds (from:
 * "the model's", "the checkpoint's") is no usage error but a damaged or
 * forged file's, exit 1, and named as that file's. */
static int range_error(const tlm_train_setting *row, const char *got, double v, const char *from) {
    char what[128], range[1024], lo[32], hi[32], list[64];
    if (from) snprintf(what, sizeof what, "%s %s", from, row->key);
    else snprintf(what, sizeof what, "%s", row->flag);
    if (tlm_train_zero_as_float(row, v))
        snprintf(range, sizeof range, "%s %s is %s as a float32, which the trainer computes in (the least is %s)", what,
                 got, fmt_real(lo, sizeof lo, row->lo), fmt_float(hi, sizeof hi, nextafterf((float)row->lo, INFINITY)));
    else if (row->kind == TLM_TS_CHOICE)
        snprintf(range, sizeof range, "%s must be one of %s (got %s)", what, choice_list(list, sizeof list, row, ", "),
                 got);
    else if (row->kind == TLM_TS_REAL)
        snprintf(range, sizeof range, "%s must be %s %s and <= %s (got %s)", what,
                 row->lo_open ? ">" : ">=", fmt_real(lo, sizeof lo, row->lo), fmt_real(hi, sizeof hi, row->hi), got);
    else snprintf(range, sizeof range, "%s must be between %.0f and %.0f (got %s)", what, row->lo, row->hi, got);
    if (from) return cli_error("train", "%s: is the file damaged?", range);
    return cli_usage_error("train", "%s", range);
}

/* A setting's flag: its value parsed by kind, checked against the row. */
static bool read_setting_flag(cli_args *a, const tlm_train_setting *row, train_options *o) {
    double v;
    if (row->kind == TLM_TS_CHOICE) {
        int choice = tlm_enum_find(row->choices, a->val);
        if (choice < 0) {
            char list[64];
            cli_usage_error("train", "unknown %s `%s` (known: %s)", a->flag, a->val,
                            choice_list(list, sizeof list, row, ", "));
            return false;
        }
        v = choice;
    } else if (row->kind == TLM_TS_REAL) {
        if (!cli_real(a, -HUGE_VAL, false, &v)) return false;
    } else {
        /* the row's own range (whole numbers within 2^53), so that one
         * past int64_t's is said as past the row's */
        int64_t n;
        if (!cli_int(a, (int64_t)row->lo, (int64_t)row->hi, &n)) return false;
        v = (double)n;
    }
    if (!tlm_train_in_range(row, v)) {
        range_error(row, a->val, v, NULL);
        return false;
    }
    tlm_train_set(&o->flags, row, v);
    o->given[row - tlm_train_settings] = true;
    return true;
}

/* A path the checkpoint's settings record (JSON, UTF-8) and a resume reads
 * back as it was: one that is not UTF-8 would make the checkpoint
 * unreadable, or come back as another path. */
static bool recordable(cli_args *a) {
    if (tlm_json_valid_utf8(a->val, strlen(a->val))) return true;
    cli_usage_error(a->cmd,
                    "%s %s: the path is not UTF-8, which the checkpoint's settings (JSON) cannot hold; rename it",
                    a->flag, a->val);
    return false;
}

int train_parse(train_options *o, int argc, char **argv) {
    memset(o, 0, sizeof *o);
    struct option options[TLM_TRAIN_NSETTINGS + NOTHER + 1];
    for (int i = 0; i < TLM_TRAIN_NSETTINGS; i++)
        options[i] = (struct option){tlm_train_settings[i].flag + 2, required_argument, NULL, OPT_SETTING + i};
    memcpy(options + TLM_TRAIN_NSETTINGS, other_options, sizeof other_options);
    options[TLM_TRAIN_NSETTINGS + NOTHER] = (struct option){NULL, 0, NULL, 0};

    cli_args a = {.cmd = "train", .argc = argc, .argv = argv};
    int opt;
    int64_t n;
    const char *precision = NULL;
    while ((opt = cli_getopt(&a, "h", options)) != -1) {
        if (opt >= OPT_SETTING) {
            if (!read_setting_flag(&a, &tlm_train_settings[opt - OPT_SETTING], o)) return 2;
            continue;
        }
        switch (opt) {
        case 'h': usage(stdout); return 0;
        case OPT_RESUME: o->resume = true; break;
        case OPT_OVERWRITE: o->overwrite = true; break;
        case OPT_DECAY_EMBEDDINGS: o->given_decay = true; break;
        case OPT_DRY_RUN: o->dry_run = true; break;
        case OPT_PROFILE: o->profile = true; break;
        case OPT_PROFILE_KERNELS: o->profile = o->profile_kernels = true; break;
        case OPT_DATA: /* eval's --data repeats; here a second would be dropped unseen */
            if (o->given_data)
                return cli_usage_error(a.cmd, "--data given twice: training reads one text or folder (put the "
                                              "texts in one folder)");
            if (!cli_path(&a, &o->data) || !recordable(&a)) return 2;
            o->given_data = true;
            break;
        case OPT_VAL:
            if (o->given_val) return cli_usage_error(a.cmd, "--val given twice: validation reads one text or folder");
            if (!cli_path(&a, &o->val) || !recordable(&a)) return 2;
            o->given_val = true;
            break;
        case OPT_LOG: /* "" is no log: how a resume stops the checkpoint's */
            if (!recordable(&a) || !cli_value_not_option(&a)) return 2;
            o->log = a.val;
            o->given_log = true;
            break;
        case OPT_CKPT:
            if (!cli_path(&a, &o->ckpt)) return 2;
            break;
        case OPT_DEVICE:
            o->device = a.val;
            if (device_flag_check("train", a.val)) return 2;
            break;
        case OPT_PRECISION:
            if (precision_flag_check("train", a.val)) return 2;
            precision = a.val;
            break;
        case OPT_THREADS:
            if (!cli_int(&a, 1, 4096, &n)) return 2;
            o->threads = (int)n;
            break;
        case OPT_STOP_AT:
            if (!cli_int(&a, 1, INT64_MAX, &o->stop_at)) return 2;
            break;
        case 1:
            if (!cli_model_path(&a, &o->model)) return 2;
            break;
        default: return 2;     /* '?': cli_getopt said why */
        }
    }
    if (!o->model) return cli_usage_error("train", "no MODEL.so given");
    if (precision_flag_resolve("train", o->device, precision, &o->precision)) return 2;
    if (o->resume && o->overwrite) return cli_usage_error("train", "--resume and --overwrite contradict each other");
    if (o->profile_kernels && device_flag_is_cpu(o->device))
        return cli_usage_error("train", "--profile-kernels times a device's kernels: it needs --device cuda (on the "
                                        "CPU, --profile times the ops)");
    return -1;
}

void train_options_free(train_options *o) {
    for (int i = 0; i < 3; i++) free(o->owned[i]);
    memset(o->owned, 0, sizeof o->owned);
}

void train_apply(train_options *o, const tlm_abi_train *defaults, bool decay, const char *data, const char *val,
                 const char *log) {
    o->s = *defaults;
    for (int i = 0; i < TLM_TRAIN_NSETTINGS; i++)
        if (o->given[i]) tlm_train_set(&o->s, &tlm_train_settings[i], tlm_train_get(&o->flags, &tlm_train_settings[i]));
    tlm_train_resolve_defaults(&o->s); /* min_lr: a tenth of lr as the flags left it */
    o->decay_embeddings = o->given_decay || decay;
    if (!o->given_data) o->data = data;
    if (!o->given_val) o->val = val;
    if (!o->given_log) o->log = log;
}

void train_note_unused(const train_options *o, FILE *out) {
    for (int i = 0; i < TLM_TRAIN_NSETTINGS; i++) {
        const tlm_train_setting *row = &tlm_train_settings[i], *call = tlm_train_call_of(row);
        if (!o->given[i] || tlm_train_applies(row, &o->s)) continue;
        fprintf(out, "note: %s is not an argument of this run's %s, %s: it changes nothing\n", row->flag, call->key,
                tlm_enum_name(call->choices, (unsigned)tlm_train_get(&o->s, call)));
    }
}

void train_note_warmup(const train_options *o, FILE *out) {
    /* the schedule's default warm-up (100 steps) outlasts a short trial run */
    const tlm_abi_train *s = &o->s;
    if (tlm_train_applies(tlm_train_find("warmup"), s) && s->steps > 0 && s->warmup > s->steps)
        fprintf(out,
                "note: the warm-up (%" PRId64 " steps) lasts the whole run (%" PRId64
                " steps): the learning rate climbs to %.3g of lr %.3g at the last step (lower --warmup)\n",
                s->warmup, s->steps, s->lr * (double)s->steps / (double)s->warmup, s->lr);
}

int train_check(const train_options *o, const tlm_so *so) {
    const tlm_abi_train *s = &o->s;
    /* Defaults come from the model or a checkpoint, so check them all, not
     * only what the flags set: a model.so or a checkpoint may be damaged. */
    for (int i = 0; i < TLM_TRAIN_NSETTINGS; i++) {
        const tlm_train_setting *row = &tlm_train_settings[i];
        if (tlm_train_in_range(row, tlm_train_get(s, row))) continue;
        char got[64];
        if (row->kind == TLM_TS_CHOICE) snprintf(got, sizeof got, "%.0f", tlm_train_get(s, row));
        else tlm_train_format(got, sizeof got, row, s);
        return range_error(row, got, tlm_train_get(s, row),
                           o->given[i] ? NULL
                           : o->resume ? "the checkpoint's"
                                       : "the model's");
    }
    if (s->batch % s->accumulate != 0)
        return cli_usage_error("train", "--batch %" PRId64 " is not divisible by --accumulate %" PRId64, s->batch,
                               s->accumulate);
    /* A resumed run's settings are the checkpoint's, which the trajectory
     * check holds it to, whatever this check would say of them. */
    if (!o->resume && tlm_train_decay_rises(s)) {
        char lr[64], min_lr[64];
        return cli_usage_error("train",
                               "min_lr %s is above lr %s: the %s schedule would raise the rate to min_lr instead of "
                               "decaying to it (give --min-lr below --lr)",
                               tlm_train_format(min_lr, sizeof min_lr, tlm_train_find("min_lr"), s),
                               tlm_train_format(lr, sizeof lr, tlm_train_find("lr"), s),
                               tlm_enum_name(&tlm_lr_enum, s->lr_schedule));
    }
    if (s->context > so->config->context)
        return cli_usage_error("train", "--context %" PRId64 " is longer than the model's context (%" PRId64 ")",
                               s->context, so->config->context);
    return 0;
}

bool train_same_trajectory(const train_options *o, const tlm_abi_train *ckpt, bool ckpt_decay, tlm_err *err) {
    /* In table order, so a different optimizer is named before its
     * arguments, which then compare under the same choice. */
    for (int i = 0; i < TLM_TRAIN_NSETTINGS; i++) {
        const tlm_train_setting *row = &tlm_train_settings[i];
        if (!row->trajectory || !tlm_train_applies(row, &o->s)) continue;
        if (tlm_train_get(&o->s, row) == tlm_train_get(ckpt, row)) continue;
        char now[64], then[64];
        tlm_fail(err,
                 "%s is %s, the checkpoint's is %s: a resumed run keeps the settings that shape its "
                 "trajectory (of those, only --steps may change)",
                 row->flag, tlm_train_format(now, sizeof now, row, &o->s),
                 tlm_train_format(then, sizeof then, row, ckpt));
        return false;
    }
    if (o->decay_embeddings != ckpt_decay) {
        tlm_fail(err, "--decay-embeddings is %s, in the checkpoint's run it was %s", o->decay_embeddings ? "on" : "off",
                 ckpt_decay ? "on" : "off");
        return false;
    }
    return true;
}

void train_print_settings(FILE *out, const train_options *o) {
    for (int i = 0; i < TLM_TRAIN_NSETTINGS; i++) {
        const tlm_train_setting *row = &tlm_train_settings[i];
        char v[64];
        if (tlm_train_applies(row, &o->s)) fprintf(out, "%s %s\n", row->key, tlm_train_format(v, sizeof v, row, &o->s));
    }
    bool data = o->data && *o->data, val = o->val && *o->val;
    fprintf(out, "decay_embeddings %s\n", o->decay_embeddings ? "true" : "false");
    fprintf(out, "data %s\n", data ? o->data : "(the bundled Austen novels)");
    fprintf(out, "val %s\n", val ? o->val : data ? "(none)" : "(the bundled Persuasion)");
    fprintf(out, "log %s\n", o->log && *o->log ? o->log : "(none)");
}

/* ---- the settings as JSON ---- */

char *train_settings_json(const train_options *o) {
    tlm_strbuf sb = {0};
    tlm_sb_puts(&sb, "{");
    for (int i = 0; i < TLM_TRAIN_NSETTINGS; i++) {
        const tlm_train_setting *row = &tlm_train_settings[i];
        char v[64];
        /* Reals in the fewest digits that read back exactly; integers (seeds
         * too: at most 2^53 - 1) as JSON readers keep them exactly. */
        tlm_train_format(v, sizeof v, row, &o->s);
        if (row->kind == TLM_TS_CHOICE) tlm_sb_printf(&sb, "\"%s\":\"%s\",", row->key, v);
        else tlm_sb_printf(&sb, "\"%s\":%s,", row->key, v);
    }
    tlm_sb_printf(&sb, "\"decay_embeddings\":%s", o->decay_embeddings ? "true" : "false");
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

bool train_settings_parse(const char *json, tlm_abi_train *s, bool *decay, char **data, char **val, char **log,
                          tlm_err *err) {
    tlm_err e = {""};
    tlm_json *j = tlm_json_parse(json, strlen(json), &e);
    memset(s, 0, sizeof *s);
    *data = *val = *log = NULL;
    if (!j || j->type != TLM_JSON_OBJECT) {
        tlm_fail(err, "the checkpoint's settings are not a JSON object%s%s", j ? "" : ": ", j ? "" : e.msg);
        tlm_json_free(j);
        return false;
    }
    const char *missing = NULL;
    for (int i = 0; i < TLM_TRAIN_NSETTINGS && !missing; i++) {
        const tlm_train_setting *row = &tlm_train_settings[i];
        const tlm_json *v = tlm_json_get(j, row->key);
        if (row->kind == TLM_TS_CHOICE) {
            int choice = v && v->type == TLM_JSON_STRING ? tlm_enum_find(row->choices, v->str) : -1;
            if (choice < 0) missing = row->key;
            else tlm_train_set(s, row, choice);
        } else if (!v || v->type != TLM_JSON_NUMBER || (row->kind != TLM_TS_REAL && !v->is_int)) {
            missing = row->key;
        } else if (row->kind == TLM_TS_REAL) {
            tlm_train_set(s, row, v->number);
        } else {
            /* The integer as it is, even out of range (train_check says so),
             * which a double might not hold. */
            memcpy((char *)s + row->offset, &v->integer, sizeof v->integer);
        }
    }
    const tlm_json *dec = tlm_json_get(j, "decay_embeddings");
    if (!missing && (!dec || dec->type != TLM_JSON_BOOL)) missing = "decay_embeddings";
    bool oom = false;
    if (!missing) {
        *decay = dec->boolean;
        const char *keys[3] = {"data", "val", "log"};
        char **outs[3] = {data, val, log};
        for (int k = 0; k < 3; k++) {
            const tlm_json *v = tlm_json_get(j, keys[k]);
            if (v && v->type == TLM_JSON_STRING && !(*outs[k] = strdup(v->str))) oom = true;
        }
    }
    tlm_json_free(j);
    if (missing) {
        tlm_fail(err, "the checkpoint's settings lack a valid `%s`", missing);
        return false;
    }
    if (oom) {
        free(*data);
        free(*val);
        free(*log);
        *data = *val = *log = NULL;
        tlm_fail(err, "out of memory reading the checkpoint's settings");
        return false;
    }
    return true;
}
