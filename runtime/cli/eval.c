/* tlm-run eval: loss, perplexity and bits per byte of a checkpoint over
 * whole texts, window after window (no sampling, so the numbers are exactly
 * reproducible), and the downstream scores of multiple-choice and cloze
 * sets (downstream.h). --json prints one JSON object per set instead of the
 * tables: the contract `tlm-run study` reads. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "corpus.h"
#include "device_flag.h"
#include "downstream.h"
#include "jsonl.h"
#include "profile.h"
#include "evaluate.h"
#include "load.h"
#include "numfmt.h"
#include "tlm_rt/json.h"
#include "tlm_rt/ops.h"

#define MAX_DATA 16
#define MAX_SETS 16

static void usage(FILE *out) {
    fputs("usage: tlm-run eval MODEL.so [--ckpt DIR] [--data FILE|DIR]... [--choices FILE]... [--cloze FILE]...\n"
          "                   [options]\n"
          "\n"
          "Evaluates a checkpoint on consecutive, non-overlapping windows of each text (or\n"
          "token shard) and prints loss (nats per token; a token is a byte for text),\n"
          "perplexity per token and bits per byte (shards: loss x the shards' tokens per byte\n"
          "/ ln 2, from the byte count in their headers). With --choices and --cloze it also\n"
          "scores zero-shot items by the log-likelihood of each continuation after its\n"
          "context (docs/runtime.md, \"Downstream sets\").\n"
          "  --ckpt DIR         the checkpoint's folder or file (default: checkpoints/MODEL)\n"
          "  --data FILE|DIR    a text, a shard (*.bin) or a folder of either to evaluate on;\n"
          "                     may be repeated (default: Persuasion, when no --choices or\n"
          "                     --cloze is given). Shards must come from the tokenizer the\n"
          "                     checkpoint was trained with\n"
          "  --choices FILE     multiple-choice items, JSON lines {\"context\": \"...\",\n"
          "                     \"choices\": [\"...\", ...], \"label\": i}: accuracy by the choices'\n"
          "                     log-likelihood, and per byte of the choice; may be repeated\n"
          "  --cloze FILE       passages, JSON lines {\"text\": \"...\"}: is the last word (with the\n"
          "                     space before it) the greedy continuation? may be repeated\n"
          "  --tokenizer PATH   the tokenizer of a checkpoint trained on token shards, to\n"
          "                     score --choices and --cloze (its hash must be the checkpoint's)\n"
          "  --json             one JSON object per set on stdout instead of the tables\n"
          "  --items            with --json: also one JSON line of scores per item\n"
          "  --batch N          windows (or items' sequences) per forward pass (default: the\n"
          "                     model's train batch)\n"
          "  --context T        tokens per window (default: the model's train context)\n"
          "  --max-tokens N     evaluate at most N tokens of each text, rounded down to whole\n"
          "                     windows (at least one)\n"
          "  --device DEV       cpu (default), cuda or cuda:N\n"
          "  --precision P      bf16 (the GPU's default) or fp32\n"
          "  --threads N        CPU threads (default: all cores)\n"
          "  --check            read and check every text and set against the model (its\n"
          "                     context and vocabulary; the tokenizer --tokenizer or the\n"
          "                     model names, else bytes) without a checkpoint, scoring\n"
          "                     nothing: what tlm-run study runs before it trains\n"
          "\n"
          "Exit status: 0 ok, 1 error (model, checkpoint, data), 2 bad usage.\n",
          out);
}

/* A diverged model's loss is NaN or Inf: say so plainly, without a sign. */
static void number(char *buf, size_t n, const char *fmt, double v) {
    if (isnan(v)) snprintf(buf, n, "nan");
    else if (isinf(v)) snprintf(buf, n, "inf");
    else snprintf(buf, n, fmt, v);
}

/* {"kind":KIND,"data":PATH, then what follows (",\"tokens\":...") */
static void print_json_set(const char *kind, const char *path, const char *rest) {
    tlm_strbuf sb = {0};
    tlm_sb_printf(&sb, "{\"kind\":\"%s\",\"data\":", kind);
    tlm_json_write_string(&sb, path, strlen(path));
    tlm_sb_printf(&sb, "%s}\n", rest);
    if (!sb.oom) fputs(sb.buf, stdout);
    fflush(stdout);
    tlm_sb_free(&sb);
}

enum {
    OPT_CKPT = 256,
    OPT_DATA,
    OPT_BATCH,
    OPT_CONTEXT,
    OPT_MAX_TOKENS,
    OPT_THREADS,
    OPT_DEVICE,
    OPT_PRECISION,
    OPT_CHOICES,
    OPT_CLOZE,
    OPT_TOKENIZER,
    OPT_JSON,
    OPT_ITEMS,
    OPT_CHECK
};
static const struct option long_options[] = {
    {"help", no_argument, NULL, 'h'},
    {"ckpt", required_argument, NULL, OPT_CKPT},
    {"data", required_argument, NULL, OPT_DATA},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"context", required_argument, NULL, OPT_CONTEXT},
    {"max-tokens", required_argument, NULL, OPT_MAX_TOKENS},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"device", required_argument, NULL, OPT_DEVICE},
    {"precision", required_argument, NULL, OPT_PRECISION},
    {"choices", required_argument, NULL, OPT_CHOICES},
    {"cloze", required_argument, NULL, OPT_CLOZE},
    {"tokenizer", required_argument, NULL, OPT_TOKENIZER},
    {"json", no_argument, NULL, OPT_JSON},
    {"items", no_argument, NULL, OPT_ITEMS},
    {"check", no_argument, NULL, OPT_CHECK},
    {NULL, 0, NULL, 0},
};

/* The --choices and --cloze sets, in that order: a table, or JSON lines. */
static int evaluate_sets(const downstream_ctx *c, const char *const *choices, int nchoices, const char *const *cloze,
                         int ncloze, bool json) {
    tlm_err err = {""};
    int width = 4;
    for (int i = 0; i < nchoices; i++)
        if ((int)strlen(choices[i]) > width) width = (int)strlen(choices[i]);
    for (int i = 0; i < ncloze; i++)
        if ((int)strlen(cloze[i]) > width) width = (int)strlen(cloze[i]);
    if (nchoices && !json)
        printf("\n%-*s  %8s  %8s  %9s  %8s\n", width, "choices", "items", "accuracy", "acc/byte", "chance");
    for (int i = 0; i < nchoices; i++) {
        choices_result r;
        if (!choices_evaluate(c, choices[i], &r, &err)) return cli_error("eval", "%s", err.msg);
        if (json) {
            char rest[256], acc[32], norm[32], chance[32];
            jsonl_number(acc, sizeof acc, r.accuracy);
            jsonl_number(norm, sizeof norm, r.accuracy_norm);
            jsonl_number(chance, sizeof chance, r.chance);
            snprintf(rest, sizeof rest, ",\"items\":%" PRId64 ",\"accuracy\":%s,\"accuracy_norm\":%s,\"chance\":%s",
                     r.items, acc, norm, chance);
            print_json_set("choices", choices[i], rest);
        } else {
            printf("%-*s  %8" PRId64 "  %8.4f  %9.4f  %8.4f\n", width, choices[i], r.items, r.accuracy, r.accuracy_norm,
                   r.chance);
            fflush(stdout);
        }
    }
    if (ncloze && !json) printf("\n%-*s  %8s  %8s  %13s\n", width, "cloze", "items", "accuracy", "target loglik");
    for (int i = 0; i < ncloze; i++) {
        cloze_result r;
        if (!cloze_evaluate(c, cloze[i], &r, &err)) return cli_error("eval", "%s", err.msg);
        if (json) {
            char rest[256], acc[32], ll[32];
            jsonl_number(acc, sizeof acc, r.accuracy);
            jsonl_number(ll, sizeof ll, r.target_loglik);
            snprintf(rest, sizeof rest, ",\"items\":%" PRId64 ",\"accuracy\":%s,\"target_loglik\":%s", r.items, acc,
                     ll);
            print_json_set("cloze", cloze[i], rest);
        } else {
            printf("%-*s  %8" PRId64 "  %8.4f  %13.4f\n", width, cloze[i], r.items, r.accuracy, r.target_loglik);
            fflush(stdout);
        }
    }
    return 0;
}

int cmd_eval(int argc, char **argv) {
    const char *model_path = NULL, *ckpt = NULL, *data[MAX_DATA], *device = NULL, *precision_value = NULL;
    const char *choices[MAX_SETS], *cloze[MAX_SETS], *tokenizer = NULL;
    int ndata = 0, nchoices = 0, ncloze = 0;
    bool json = false, items = false, check = false;
    int64_t batch = 0, context = 0, max_tokens = 0, threads = 0;
    cli_args a = {.cmd = "eval", .argc = argc, .argv = argv};
    int opt;
    while ((opt = cli_getopt(&a, "h", long_options)) != -1) {
        bool ok = true;
        switch (opt) {
        case 'h': usage(stdout); return 0;
        case OPT_CKPT: ok = cli_path(&a, &ckpt); break;
        case OPT_DATA:
            if (ndata == MAX_DATA) return cli_usage_error("eval", "at most %d --data", MAX_DATA);
            ok = cli_path(&a, &data[ndata++]);
            break;
        case OPT_CHOICES:
            if (nchoices == MAX_SETS) return cli_usage_error("eval", "at most %d --choices", MAX_SETS);
            ok = cli_path(&a, &choices[nchoices++]);
            break;
        case OPT_CLOZE:
            if (ncloze == MAX_SETS) return cli_usage_error("eval", "at most %d --cloze", MAX_SETS);
            ok = cli_path(&a, &cloze[ncloze++]);
            break;
        case OPT_TOKENIZER: ok = cli_path(&a, &tokenizer); break;
        case OPT_JSON: json = true; break;
        case OPT_ITEMS: items = true; break;
        case OPT_CHECK: check = true; break;
        case OPT_BATCH: ok = cli_int(&a, 1, 1 << 20, &batch); break;
        case OPT_CONTEXT: ok = cli_int(&a, 1, INT32_MAX, &context); break;
        case OPT_MAX_TOKENS: ok = cli_int(&a, 1, INT64_MAX, &max_tokens); break;
        case OPT_THREADS: ok = cli_int(&a, 1, 4096, &threads); break;
        case OPT_DEVICE:
            device = a.val;
            if (device_flag_check("eval", device)) return 2;
            break;
        case OPT_PRECISION:
            if (precision_flag_check("eval", a.val)) return 2;
            precision_value = a.val;
            break;
        case 1:
            if (!cli_model_path(&a, &model_path)) return 2;
            break;
        default: return 2;   /* reported by cli_getopt */
        }
        if (!ok) return 2;
    }
    if (items && !json) return cli_usage_error("eval", "--items goes with --json");
    if (check && (ckpt || json || device || precision_value))
        return cli_usage_error("eval", "--check reads no checkpoint and scores nothing: drop %s",
                               ckpt     ? "--ckpt"
                               : json   ? "--json"
                               : device ? "--device"
                                        : "--precision");
    if (ndata == 0 && nchoices + ncloze == 0) data[ndata++] = NULL;   /* Persuasion */

    tlm_precision precision;
    if (precision_flag_resolve("eval", device, precision_value, &precision)) return 2;
    tlm_err err = {""};
    char path[4200];
    tlm_so so;
    int opened = open_model("eval", model_path, threads, &so);
    if (opened) return opened;
    tlm_device *dev = NULL;
    if (!check && (opened = device_flag_open("eval", device, &dev))) {
        tlm_so_close(&so);
        return opened;
    }
    if (context == 0) context = so.train->context > 0 ? so.train->context : so.config->context;
    if (batch == 0) batch = so.train->batch > 0 ? so.train->batch : 1;
    tlm_model m = {0};
    tlm_dataset ds[MAX_DATA] = {{0}};
    corpus_info info[MAX_DATA];
    char ckpt_tokenizer[65] = "bytes";
    char names[MAX_DATA][4200];
    text_tokens text = {0};
    int64_t step = 0, trained = -1;
    int rc = 0, width = 4;
    if (context > so.config->context)
        rc = cli_usage_error("eval", "--context %" PRId64 " is longer than the model's context (%" PRId64 ")", context,
                             so.config->context);
    else if (check) snprintf(path, sizeof path, "(none: --check)"); /* no model made, no checkpoint read */
    else if (!tlm_model_create_on(&m, &so, dev, precision, batch, context, false, 0, &err))
        rc = cli_error("eval", "%s", err.msg);
    else rc = load_checkpoint("eval", &so, ckpt, &m, path, sizeof path, &step, ckpt_tokenizer, &trained);
    /* The tokenizer before any work: a wrong one is refused at once
     * (--check: whichever is given, or the model's, or bytes). */
    if (!rc && (nchoices + ncloze > 0 || tokenizer) &&
        !text_tokens_open(&text, check ? NULL : ckpt_tokenizer, path, tokenizer, so.tokenizer_path, so.config->vocab,
                          &err))
        rc = cli_error("eval", "%s", err.msg);

    /* Load every text first, so a bad path fails before any long work. */
    for (int i = 0; i < ndata && !rc; i++) {
        /* the tokens the texts must be: the checkpoint's (--check: the
         * tokenizer in play, else any), asked before their lengths */
        const char *want = !check ? ckpt_tokenizer : text.tok ? text.hash : NULL;
        bool ok = want
                      ? corpus_load_for(&ds[i], data[i], context, so.config->vocab, names[i], sizeof names[i], &info[i],
                                        want, check ? "" : path, tokenizer ? tokenizer : so.tokenizer_path, &err)
                      : corpus_load(&ds[i], data[i], CORPUS_VALID, context, so.config->vocab, names[i], sizeof names[i],
                                    &info[i], &err);
        if (!ok) rc = cli_error("eval", "%s", err.msg);
        else if ((int)strlen(names[i]) > width) width = (int)strlen(names[i]);
    }
    /* ... and every downstream set, read and checked (not scored) */
    downstream_ctx sets = {&m, batch, context, &text, items ? stdout : NULL};
    for (int i = 0; i < nchoices && !rc; i++)
        if (!choices_evaluate(&sets, choices[i], NULL, &err)) rc = cli_error("eval", "%s", err.msg);
    for (int i = 0; i < ncloze && !rc; i++)
        if (!cloze_evaluate(&sets, cloze[i], NULL, &err)) rc = cli_error("eval", "%s", err.msg);
    if (check) {
        if (!rc)
            printf("ok: %d text%s and %d set%s fit model %s (windows of %" PRId64 " token%s)\n", ndata,
                   ndata == 1 ? "" : "s", nchoices + ncloze, nchoices + ncloze == 1 ? "" : "s",
                   tlm_so_str(&so, so.config->name), context, context == 1 ? "" : "s");
    }
    if (!rc && !json && !check) {
        char st[24];
        printf("model %s, checkpoint %s (step %s), windows of %" PRId64 " token%s", tlm_so_str(&so, so.config->name),
               path, step_text(step, st), context, context == 1 ? "" : "s");
        print_device_suffix(dev, precision);
        printf("\n");
        if (ndata) printf("%-*s  %12s  %8s  %9s  %9s\n", width, "data", "tokens", "loss", "ppl", "bits/byte");
        fflush(stdout);
    }
    int64_t all_tokens = 0;
    double seconds = 0;
    for (int i = 0; i < ndata && !rc && !check; i++) {
        tlm_eval_result res;
        double t0 = tlm_profile_clock();
        bool ok = tlm_eval_windows(&m, &ds[i], batch, context, max_tokens, &res, &err);
        seconds += tlm_profile_clock() - t0;
        if (!ok) {
            rc = cli_error("eval", "%s: %s", names[i], err.msg);
            break;
        }
        if (tlm_model_device_error(&m)) {
            rc = cli_error("eval", "%s: %s", names[i], tlm_model_device_error(&m));
            break;
        }
        /* A diverged checkpoint (NaN or Inf weights) has no loss to
         * report: refused as sample and export refuse it, before a row or
         * a JSON line says "nan" or null under exit 0. */
        if (!isfinite(res.loss)) {
            char why[4400];
            rc = cli_error("eval", "%s: the loss is %s: %s", names[i], isnan(res.loss) ? "NaN" : "Inf",
                           nan_cause(&so, path, step, why, sizeof why));
            break;
        }
        /* bits per byte: the loss per token times the data's tokens per
         * byte (text: 1; shards: all their tokens over the bytes their
         * headers say they encode), over ln 2; unknown for a version-1 shard */
        double bpb =
            info[i].text_bytes > 0 ? res.loss * ((double)ds[i].n / (double)info[i].text_bytes) / log(2.0) : NAN;
        all_tokens += res.tokens;
        if (json) {
            char rest[256], loss[32], ppl[32], bits[32];
            jsonl_number(loss, sizeof loss, res.loss);
            jsonl_number(ppl, sizeof ppl, exp(res.loss));
            jsonl_number(bits, sizeof bits, bpb);
            snprintf(rest, sizeof rest, ",\"tokens\":%" PRId64 ",\"loss\":%s,\"ppl\":%s,\"bpb\":%s", res.tokens, loss,
                     ppl, bits);
            print_json_set("text", data[i] ? data[i] : names[i], rest);
            continue;
        }
        char tokens[32];
        fmt_int(tokens, sizeof tokens, res.tokens, 0);
        char loss[32], ppl[32], bits[32];
        number(loss, sizeof loss, "%.4f", res.loss);
        number(ppl, sizeof ppl, "%.3f", exp(res.loss));
        if (info[i].text_bytes > 0) number(bits, sizeof bits, "%.4f", bpb);
        else snprintf(bits, sizeof bits, "-");
        printf("%-*s  %12s  %8s  %9s  %9s\n", width, names[i], tokens, loss, ppl, bits);
        fflush(stdout);
    }
    if (!rc && !json && seconds > 0) {
        char tokens[32];
        fmt_int(tokens, sizeof tokens, all_tokens, 0);
        printf("%s tokens in %.2f s: %.0f tokens/s\n", tokens, seconds, (double)all_tokens / seconds);
    }
    if (!rc && !check && nchoices + ncloze > 0) rc = evaluate_sets(&sets, choices, nchoices, cloze, ncloze, json);
    /* notes come after the results, on success: a failure stays one line */
    if (!rc && !check) note_untrained_positions("eval", path, trained, context);
    text_tokens_close(&text);
    for (int i = 0; i < ndata; i++) tlm_data_free(&ds[i]);
    tlm_model_destroy(&m);
    if (dev) tlm_device_close(dev);
    tlm_so_close(&so);
    return rc;
}
