/* tlm-run sample: text from a checkpoint, one token at a time (a byte for a
 * model trained on text; a subword token, decoded to its bytes, for one
 * trained on shards, through --tokenizer). Each new token runs one token's
 * forward against a KV cache (or, with --no-cache, the whole window, which
 * slides) and draws from the last position's distribution. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "input_file.h"
#include "commands.h"
#include "corpus.h"
#include "device_flag.h"
#include "load.h"
#include "stdout_status.h"
#include "tlm_rt/ops.h"
#include "tlm_rt/sample.h"

static void usage(FILE *out) {
    fputs("usage: tlm-run sample MODEL.so [--ckpt DIR] [--prompt TEXT | --prompt-file FILE] [options]\n"
          "\n"
          "Prints the prompt, then generated text, token by token as it is produced.\n"
          "  --ckpt DIR          the checkpoint's folder or file (default: checkpoints/MODEL)\n"
          "  --tokenizer PATH    the tokenizer of a checkpoint trained on token shards (its hash\n"
          "                      must match the checkpoint's); none for one trained on text\n"
          "  --prompt TEXT       text to continue (default: none; generation starts after a\n"
          "                      newline, or after the tokenizer's end-of-text token)\n"
          "  --prompt-file FILE  the prompt is FILE's bytes, any of them (- : standard input;\n"
          "                      at most 256 MiB); only its last context's tokens are read\n"
          "  --length N          tokens to generate (bytes for a model trained on text; default 256)\n"
          "  --temperature X     0 is greedy (always the likeliest token); default 0.8\n"
          "  --top-k K           draw only among the K likeliest tokens (0: all; default 0)\n"
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

/* A prompt file larger than this is refused: it is held whole, and printed,
 * though only its last context's tokens are read. */
#define MAX_PROMPT ((uint64_t)256 << 20)

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
    OPT_NO_CACHE,
    OPT_TOKENIZER,
    OPT_PROMPT_FILE
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
    {"tokenizer", required_argument, NULL, OPT_TOKENIZER},
    {"prompt-file", required_argument, NULL, OPT_PROMPT_FILE},
    {NULL, 0, NULL, 0},
};

/* The prompt's last T tokens into window (*n of them): its bytes, or its
 * ids under tok. An empty prompt starts after a newline, as a text would
 * after a paragraph, or after the end-of-text token that separates a
 * shard's documents. 0, or 1 after a message. */
static int prompt_window(tlm_tokenizer *tok, const char *prompt, size_t plen, int64_t T, int nprint, int32_t *window,
                         int64_t *n) {
    tlm_tok_ids ids = {0};
    tlm_err err = {""};
    int32_t eot = tok && !plen ? tlm_tok_eot(tok) : -1;
    bool ok = !tok || eot >= 0 ||
              tlm_tok_encode(tok, (const uint8_t *)(plen ? prompt : "\n"), plen ? plen : 1, NULL, &ids, &err);
    if (!ok) {
        tlm_tok_ids_free(&ids);
        return cli_error("sample", "the prompt: %s", err.msg);
    }
    int rc = 0;
    *n = 0;
    if (!tok) {
        for (size_t i = plen > (size_t)T ? plen - (size_t)T : 0; i < plen; i++)
            window[(*n)++] = (unsigned char)prompt[i];
        if (!plen) window[(*n)++] = '\n';
    } else if (eot >= 0) window[(*n)++] = eot;
    else
        for (size_t i = ids.n > (size_t)T ? ids.n - (size_t)T : 0; i < ids.n; i++) window[(*n)++] = ids.ids[i];
    const char *kind = tok ? "token" : "byte";
    for (int64_t i = 0; i < *n && !rc; i++)
        if (window[i] >= nprint && plen)
            rc = cli_error("sample", "the prompt holds %s %d, outside the model's %d tokens", kind, (int)window[i],
                           nprint);
        else if (window[i] >= nprint) /* the start it chose, not the user's */
            rc = cli_error("sample",
                           "with no --prompt, sampling starts after %s (%s %d), outside the model's %d tokens: give a "
                           "--prompt the model can read",
                           eot >= 0 ? "the end-of-text token" : "a newline", kind, (int)window[i], nprint);
    tlm_tok_ids_free(&ids);
    return rc;
}

static bool finite_row(const float *x, int n) {
    for (int i = 0; i < n; i++)
        if (!isfinite(x[i])) return false;
    return true;
}

/* Prints token id (a byte, or its bytes under tok); returns the last byte
 * printed, or -1 when it printed none. */
static int print_token(const tlm_tokenizer *tok, int32_t id) {
    if (!tok) return putchar(id) == EOF ? -1 : id;
    tlm_strbuf sb = {0};
    tlm_err err = {""};
    int last = -1;
    if (tlm_tok_decode(tok, &id, 1, &sb, &err) && sb.len) {
        fwrite(sb.buf, 1, sb.len, stdout);
        last = (unsigned char)sb.buf[sb.len - 1];
    }
    tlm_sb_free(&sb);
    return last;
}

int cmd_sample(int argc, char **argv) {
    bool no_cache = false;
    const char *model_path = NULL, *ckpt = NULL, *prompt = NULL, *device = NULL, *precision_value = NULL,
               *tok_path = NULL, *prompt_file = NULL;
    int64_t length = 256, top_k = 0, seed = 1337, threads = 0;
    double temperature = 0.8;
    cli_args a = {.cmd = "sample", .argc = argc, .argv = argv};
    int opt;
    while ((opt = cli_getopt(&a, "h", long_options)) != -1) {
        bool ok = true;
        switch (opt) {
        case 'h': usage(stdout); return 0;
        case OPT_CKPT: ok = cli_path(&a, &ckpt); break;
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
        case OPT_PRECISION:
            if (precision_flag_check("sample", a.val)) return 2;
            precision_value = a.val;
            break;
        case OPT_NO_CACHE: no_cache = true; break;
        case OPT_TOKENIZER: ok = cli_path(&a, &tok_path); break;
        case OPT_PROMPT_FILE: ok = cli_path(&a, &prompt_file); break;
        case 1:
            if (!cli_model_path(&a, &model_path)) return 2;
            break;
        default: return 2;   /* reported by cli_getopt */
        }
        if (!ok) return 2;
    }

    if (prompt && prompt_file) return cli_usage_error("sample", "--prompt and --prompt-file: give one of them");
    tlm_precision precision;
    if (precision_flag_resolve("sample", device, precision_value, &precision)) return 2;
    /* the prompt's bytes (a file's may hold NULs), read before the model */
    tlm_err err = {""};
    size_t plen = prompt ? strlen(prompt) : 0;
    uint8_t *prompt_bytes = NULL;
    if (prompt_file) {
        const bool from_stdin = !strcmp(prompt_file, "-");
        prompt_bytes = cli_read_input(from_stdin ? NULL : prompt_file, MAX_PROMPT, "a prompt", &plen, &err);
        if (!prompt_bytes) return cli_error("sample", "--prompt-file %s: %s", prompt_file, err.msg);
        prompt = (const char *)prompt_bytes;
    }
    if (!prompt) prompt = "";
    char path[4200];
    tlm_so so;
    int opened = open_model("sample", model_path, threads, &so);
    tlm_device *dev = NULL;
    if (!opened && (opened = device_flag_open("sample", device, &dev))) tlm_so_close(&so);
    if (opened) {
        free(prompt_bytes);
        return opened;
    }
    const int64_t T = so.config->context, V = so.config->vocab;
    tlm_model m = {0};
    tlm_tokenizer *tok = NULL;
    int64_t step, trained = -1;
    int32_t *window = malloc((size_t)T * sizeof *window);
    float *scratch = malloc((size_t)V * sizeof *scratch);
    int rc = 0;
    if (!window || !scratch) rc = cli_error("sample", "out of memory");
    else if (!tlm_model_create_on(&m, &so, dev, precision, 1, T, false, 0, &err))
        rc = cli_error("sample", "%s", err.msg);
    else {
        char tokenizer[65];
        rc = load_checkpoint("sample", &so, ckpt, &m, path, sizeof path, &step, tokenizer, &trained);
        if (!rc) rc = load_checkpoint_tokenizer("sample", tok_path, &so, tokenizer, path, &tok);
    }
    /* Only ids that print can be drawn: bytes for a model trained on text,
     * the tokenizer's ids (at most the model's) for one trained on tokens. */
    int64_t ntok = tok ? tlm_tok_vocab_size(tok) : 256;
    const int nprint = (int)(V < ntok ? V : ntok);
    int64_t n = 0;
    if (!rc) rc = prompt_window(tok, prompt, plen, T, nprint, window, &n);
    /* the longest window a forward runs: the prompt and every token but the
     * last, which is drawn and printed, never fed back */
    const int64_t reach = length > 0 ? n + length - 1 : n, used = reach < T ? reach : T;
    /* With a KV cache (titans: its memory's state) each token runs one
     * token's forward; a full window restarts from its last half (prefilled
     * again). Without one (--no-cache) each token recomputes the window,
     * which slides one token at a time. */
    bool cached = !rc && !no_cache && tlm_model_cache_open(&m, &err);
    if (!rc) {
        fwrite(prompt, 1, plen, stdout);
        bool written = tlm_stdout_flush();
        tlm_rng rng;
        tlm_rng_seed(&rng, (uint64_t)seed);
        int last = plen ? (unsigned char)prompt[plen - 1] : '\n';
        bool ok =
            !written || (cached ? tlm_model_prefill(&m, window, n) : (tlm_model_forward(&m, window, NULL, 1, n), true));
        int64_t row = n - 1; /* the logits' row of the window's last token */
        bool diverged = false;
        for (int64_t i = 0; written && ok && i < length; i++) {
            const float *all = tlm_model_logits(&m);
            if (!all) break;
            /* a diverged checkpoint's logits are NaN: what tlm_sample drew
             * from them would be noise, printed as if the model wrote it */
            if ((diverged = !finite_row(all + row * V, nprint))) break;
            int next = tlm_sample(all + row * V, nprint, (float)temperature, (int)top_k, &rng, scratch);
            int wrote = print_token(tok, next);
            if (wrote >= 0) last = wrote;
            /* standard output gone (a full disk, /dev/full): stop here, not
             * after --length tokens; tlm-run's end says why (exit 1) */
            if (!tlm_stdout_flush()) break;
            if (i + 1 == length) break;
            if (cached && n < T) {
                window[n] = next;
                ok = tlm_model_decode(&m, next, n++);
                row = 0;
                continue;
            }
            int64_t keep = cached ? (T + 1) / 2 : T; /* tokens kept when the window is full, the new one included */
            if (n == T) memmove(window, window + n - (keep - 1), (size_t)(keep - 1) * sizeof *window), n = keep - 1;
            window[n++] = next;
            if (cached) ok = tlm_model_prefill(&m, window, n);
            else tlm_model_forward(&m, window, NULL, 1, n);
            row = n - 1;
        }
        if (last != '\n' && !ferror(stdout)) putchar('\n');
        fflush(stdout);
        if (!ok || tlm_model_device_error(&m))
            rc = cli_error("sample", "%s",
                           tlm_model_device_error(&m) ? tlm_model_device_error(&m) : "the KV cache refused the window");
        else if (diverged) {
            char why[4400];
            rc = cli_error("sample", "the model's logits are not finite (NaN or Inf): %s",
                           nan_cause(&so, path, step, why, sizeof why));
        } else note_untrained_positions("sample", path, trained, used);
    }
    tlm_tok_free(tok);
    free(window);
    free(scratch);
    free(prompt_bytes);
    tlm_model_destroy(&m);
    if (dev) tlm_device_close(dev);
    tlm_so_close(&so);
    return rc;
}
