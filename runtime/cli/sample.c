/* tlm-run sample: text from a checkpoint, one byte at a time. Each new
 * byte runs the model over the text so far (the last `context` bytes once
 * it is longer: the window slides) and draws from the last position's
 * distribution. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "device_flag.h"
#include "load.h"
#include "tlm_rt/ops.h"
#include "tlm_rt/sample.h"

static void usage(FILE *out) {
    fputs("usage: tlm-run sample MODEL.so [--ckpt DIR] [--prompt TEXT] [options]\n"
          "\n"
          "Prints the prompt, then generated text, byte by byte as it is produced.\n"
          "  --ckpt DIR          the checkpoint's folder or file (default: checkpoints/MODEL)\n"
          "  --prompt TEXT       text to continue (default: none; generation starts after a newline)\n"
          "  --length N          bytes to generate (default 256)\n"
          "  --temperature X     0 is greedy (always the likeliest byte); default 0.8\n"
          "  --top-k K           draw only among the K likeliest bytes (0: all; default 0)\n"
          "  --seed N            seeds the draws: the same seed gives the same text (default 1337)\n"
          "  --device DEV        cpu (default), cuda or cuda:N\n"
          "  --precision P       bf16 (the GPU's default) or fp32\n"
          "  --threads N         CPU threads (default: all cores)\n"
          "  --no-cache          recompute the whole window for every byte instead of keeping\n"
          "                      a KV cache (titans: its memory's state); slower, for checking\n"
          "\n"
          "Exit status: 0 ok, 1 error (model, checkpoint), 2 bad usage.\n",
          out);
}

enum {
    OPT_CKPT = 256,
    OPT_PROMPT,
    OPT_LENGTH,
    OPT_TEMPERATURE,
    OPT_TOP_K,
    OPT_SEED,
    OPT_THREADS,
    OPT_DEVICE,
    OPT_PRECISION,
    OPT_NO_CACHE
};
static const struct option long_options[] = {
    {"help", no_argument, NULL, 'h'},
    {"ckpt", required_argument, NULL, OPT_CKPT},
    {"prompt", required_argument, NULL, OPT_PROMPT},
    {"length", required_argument, NULL, OPT_LENGTH},
    {"temperature", required_argument, NULL, OPT_TEMPERATURE},
    {"top-k", required_argument, NULL, OPT_TOP_K},
    {"seed", required_argument, NULL, OPT_SEED},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"device", required_argument, NULL, OPT_DEVICE},
    {"precision", required_argument, NULL, OPT_PRECISION},
    {"no-cache", no_argument, NULL, OPT_NO_CACHE},
    {NULL, 0, NULL, 0},
};

int cmd_sample(int argc, char **argv) {
    bool no_cache = false;
    const char *model_path = NULL, *ckpt = NULL, *prompt = "", *device = NULL, *precision_value = NULL;
    int64_t length = 256, top_k = 0, seed = 1337, threads = 0;
    double temperature = 0.8;
    cli_args a = {.cmd = "sample", .argc = argc, .argv = argv};
    int opt;
    while ((opt = cli_getopt(&a, "h", long_options)) != -1) {
        bool ok = true;
        switch (opt) {
        case 'h': usage(stdout); return 0;
        case OPT_CKPT: ckpt = a.val; break;
        case OPT_PROMPT: prompt = a.val; break;
        case OPT_LENGTH: ok = cli_int(&a, 0, INT32_MAX, &length); break;
        case OPT_TEMPERATURE: ok = cli_real(&a, 0, false, &temperature); break;
        case OPT_TOP_K: ok = cli_int(&a, 0, INT32_MAX, &top_k); break;
        case OPT_SEED: ok = cli_int(&a, 0, INT64_MAX, &seed); break;
        case OPT_THREADS: ok = cli_int(&a, 1, 4096, &threads); break;
        case OPT_DEVICE:
            device = a.val;
            if (device_flag_check("sample", device)) return 2;
            break;
        case OPT_PRECISION: precision_value = a.val; break;
        case OPT_NO_CACHE: no_cache = true; break;
        case 1:
            if (!cli_model_path(&a, &model_path)) return 2;
            break;
        default: return 2;   /* reported by cli_getopt */
        }
        if (!ok) return 2;
    }

    tlm_precision precision;
    if (precision_flag_resolve("sample", device, precision_value, &precision)) return 2;
    tlm_err err = {""};
    char path[4200];
    tlm_so so;
    int opened = open_model("sample", model_path, threads, &so);
    if (opened) return opened;
    tlm_device *dev = NULL;
    if ((opened = device_flag_open("sample", device, &dev))) {
        tlm_so_close(&so);
        return opened;
    }
    const int64_t T = so.config->context, V = so.config->vocab;
    /* Tokens are bytes: a larger vocabulary's other ids cannot be printed,
     * so the draw is among the first 256. */
    const int nbytes = V < 256 ? (int)V : 256;
    tlm_model m = {0};
    int64_t step;
    int32_t *window = malloc((size_t)T * sizeof *window);
    float *scratch = malloc((size_t)V * sizeof *scratch);
    int rc = 0;
    if (!window || !scratch) rc = cli_error("sample", "out of memory");
    else if (!tlm_model_create_on(&m, &so, dev, precision, 1, T, false, 0, &err))
        rc = cli_error("sample", "%s", err.msg);
    else {
        char tokenizer[65];
        rc = load_checkpoint("sample", &so, ckpt, &m, path, sizeof path, &step, tokenizer);
        /* sampling reads and prints bytes: a model trained on subword
         * tokens would need its tokenizer, which sample does not take yet */
        if (!rc && strcmp(tokenizer, "bytes") != 0)
            rc = cli_error("sample",
                           "%s was trained on tokens of tokenizer %.16s..., not bytes; sampling through a tokenizer "
                           "is not supported yet",
                           path, tokenizer);
    }

    /* The prompt's last T bytes are the context; an empty prompt starts from
     * a newline, as a text would after a paragraph. */
    size_t plen = strlen(prompt);
    int64_t n = 0;
    for (size_t i = plen > (size_t)T ? plen - (size_t)T : 0; !rc && i < plen; i++) {
        int b = (unsigned char)prompt[i];
        if (b >= nbytes) rc = cli_error("sample", "the prompt holds byte %d, outside the model's %d tokens", b, nbytes);
        window[n++] = b;
    }
    if (!rc && n == 0) window[n++] = '\n';
    /* With a KV cache (titans: its memory's state) each byte runs one
     * token's forward; a full window restarts from its last half (prefilled
     * again). Without one (--no-cache) each byte recomputes the window,
     * which slides one byte at a time. */
    bool cached = !rc && !no_cache && tlm_model_cache_open(&m, &err);
    if (!rc) {
        fwrite(prompt, 1, plen, stdout);
        fflush(stdout);
        tlm_rng rng;
        tlm_rng_seed(&rng, (uint64_t)seed);
        int last = plen ? (unsigned char)prompt[plen - 1] : '\n';
        bool ok = cached ? tlm_model_prefill(&m, window, n) : (tlm_model_forward(&m, window, NULL, 1, n), true);
        int64_t row = n - 1; /* the logits' row of the window's last byte */
        for (int64_t i = 0; ok && i < length; i++) {
            const float *all = tlm_model_logits(&m);
            if (!all) break;
            int next = tlm_sample(all + row * V, nbytes, (float)temperature, (int)top_k, &rng, scratch);
            putchar(next);
            fflush(stdout);
            last = next;
            if (i + 1 == length) break;
            if (cached && n < T) {
                window[n] = next;
                ok = tlm_model_decode(&m, next, n++);
                row = 0;
                continue;
            }
            int64_t keep = cached ? (T + 1) / 2 : T; /* bytes kept when the window is full, the new one included */
            if (n == T) memmove(window, window + n - (keep - 1), (size_t)(keep - 1) * sizeof *window), n = keep - 1;
            window[n++] = next;
            if (cached) ok = tlm_model_prefill(&m, window, n);
            else tlm_model_forward(&m, window, NULL, 1, n);
            row = n - 1;
        }
        if (!ok || tlm_model_device_error(&m))
            rc = cli_error("sample", "%s",
                           tlm_model_device_error(&m) ? tlm_model_device_error(&m) : "the KV cache refused the window");
        if (last != '\n') putchar('\n');
    }
    free(window);
    free(scratch);
    tlm_model_destroy(&m);
    if (dev) tlm_device_close(dev);
    tlm_so_close(&so);
    return rc;
}
