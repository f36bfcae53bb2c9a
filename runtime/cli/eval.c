/* tlm-run eval: loss, perplexity and bits per byte of a checkpoint over
 * whole texts, window after window (no sampling, so the numbers are exactly
 * reproducible). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "corpus.h"
#include "device_flag.h"
#include "profile.h"
#include "evaluate.h"
#include "load.h"
#include "numfmt.h"
#include "tlm_rt/ops.h"

#define MAX_DATA 16

static void usage(FILE *out) {
    fputs("usage: tlm-run eval MODEL.so [--ckpt DIR] [--data FILE|DIR]... [options]\n"
          "\n"
          "Evaluates a checkpoint on consecutive, non-overlapping windows of each text (or\n"
          "token shard) and prints loss (nats per token; a token is a byte for text),\n"
          "perplexity per token and bits per byte (shards: loss x the shards' tokens per byte\n"
          "/ ln 2, from the byte count in their headers).\n"
          "  --ckpt DIR         the checkpoint's folder or file (default: checkpoints/MODEL)\n"
          "  --data FILE|DIR    a text, a shard (*.bin) or a folder of either to evaluate on;\n"
          "                     may be repeated (default: Persuasion). Shards must come from\n"
          "                     the tokenizer the checkpoint was trained with\n"
          "  --batch N          windows per forward pass (default: the model's train batch)\n"
          "  --context T        tokens per window (default: the model's train context)\n"
          "  --max-tokens N     evaluate at most N tokens of each text, in whole windows\n"
          "  --device DEV        cpu (default), cuda or cuda:N\n"
          "  --precision P       bf16 (the GPU's default) or fp32\n"
          "  --threads N        CPU threads (default: all cores)\n"
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

enum { OPT_CKPT = 256, OPT_DATA, OPT_BATCH, OPT_CONTEXT, OPT_MAX_TOKENS, OPT_THREADS, OPT_DEVICE, OPT_PRECISION };
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
    {NULL, 0, NULL, 0},
};

int cmd_eval(int argc, char **argv) {
    const char *model_path = NULL, *ckpt = NULL, *data[MAX_DATA], *device = NULL, *precision_value = NULL;
    int ndata = 0;
    int64_t batch = 0, context = 0, max_tokens = 0, threads = 0;
    cli_args a = {.cmd = "eval", .argc = argc, .argv = argv};
    int opt;
    while ((opt = cli_getopt(&a, "h", long_options)) != -1) {
        bool ok = true;
        switch (opt) {
        case 'h': usage(stdout); return 0;
        case OPT_CKPT: ckpt = a.val; break;
        case OPT_DATA:
            if (ndata == MAX_DATA) return cli_usage_error("eval", "at most %d --data", MAX_DATA);
            data[ndata++] = a.val;
            break;
        case OPT_BATCH: ok = cli_int(&a, 1, 1 << 20, &batch); break;
        case OPT_CONTEXT: ok = cli_int(&a, 1, INT32_MAX, &context); break;
        case OPT_MAX_TOKENS: ok = cli_int(&a, 1, INT64_MAX, &max_tokens); break;
        case OPT_THREADS: ok = cli_int(&a, 1, 4096, &threads); break;
        case OPT_DEVICE:
            device = a.val;
            if (device_flag_check("eval", device)) return 2;
            break;
        case OPT_PRECISION: precision_value = a.val; break;
        case 1:
            if (!cli_model_path(&a, &model_path)) return 2;
            break;
        default: return 2;   /* reported by cli_getopt */
        }
        if (!ok) return 2;
    }
    if (ndata == 0) data[ndata++] = NULL;   /* Persuasion */

    tlm_precision precision;
    if (precision_flag_resolve("eval", device, precision_value, &precision)) return 2;
    tlm_err err = {""};
    char path[4200];
    tlm_so so;
    int opened = open_model("eval", model_path, threads, &so);
    if (opened) return opened;
    tlm_device *dev = NULL;
    if ((opened = device_flag_open("eval", device, &dev))) {
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
    int64_t step = 0;
    int rc = 0, width = 4;
    if (context > so.config->context)
        rc = cli_usage_error("eval", "--context %" PRId64 " is longer than the model's context (%" PRId64 ")", context,
                             so.config->context);
    else if (!tlm_model_create_on(&m, &so, dev, precision, batch, context, false, 0, &err))
        rc = cli_error("eval", "%s", err.msg);
    else rc = load_checkpoint("eval", &so, ckpt, &m, path, sizeof path, &step, ckpt_tokenizer);

    /* Load every text first, so a bad path fails before any long work. */
    for (int i = 0; i < ndata && !rc; i++) {
        if (!corpus_load(&ds[i], data[i], CORPUS_VALID, context, so.config->vocab, names[i], sizeof names[i], &info[i],
                         &err))
            rc = cli_error("eval", "%s", err.msg);
        else if (!corpus_same_tokenizer(&info[i], names[i], ckpt_tokenizer, path, &err))
            rc = cli_error("eval", "%s", err.msg);
        else if ((int)strlen(names[i]) > width) width = (int)strlen(names[i]);
    }
    if (!rc) {
        printf("model %s, checkpoint %s (step %" PRId64 "), windows of %" PRId64 " tokens\n",
               tlm_so_str(&so, so.config->name), path, step, context);
        printf("%-*s  %12s  %8s  %9s  %9s\n", width, "data", "tokens", "loss", "ppl", "bits/byte");
        fflush(stdout);
    }
    int64_t all_tokens = 0;
    double seconds = 0;
    for (int i = 0; i < ndata && !rc; i++) {
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
        char tokens[32];
        fmt_int(tokens, sizeof tokens, res.tokens, 0);
        char loss[32], ppl[32], bpb[32];
        number(loss, sizeof loss, "%.4f", res.loss);
        number(ppl, sizeof ppl, "%.3f", exp(res.loss));
        /* bits per byte: the loss per token times the data's tokens per
         * byte (text: 1; shards: all their tokens over the bytes their
         * headers say they encode), over ln 2 */
        if (info[i].text_bytes > 0)
            number(bpb, sizeof bpb, "%.4f", res.loss * ((double)ds[i].n / (double)info[i].text_bytes) / log(2.0));
        else snprintf(bpb, sizeof bpb, "-");
        printf("%-*s  %12s  %8s  %9s  %9s\n", width, names[i], tokens, loss, ppl, bpb);
        fflush(stdout);
        all_tokens += res.tokens;
    }
    if (!rc && seconds > 0) {
        char tokens[32];
        fmt_int(tokens, sizeof tokens, all_tokens, 0);
        printf("%s tokens in %.2f s: %.0f tokens/s\n", tokens, seconds, (double)all_tokens / seconds);
    }
    for (int i = 0; i < ndata; i++) tlm_data_free(&ds[i]);
    tlm_model_destroy(&m);
    if (dev) tlm_device_close(dev);
    tlm_so_close(&so);
    return rc;
}
