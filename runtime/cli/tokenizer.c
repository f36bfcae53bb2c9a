/* tlm-run tokenizer: encode text to token ids, decode ids to bytes,
 * describe a tokenizer, and train one (runtime/tokenizer/tokenizer.h,
 * train.h, docs/data.md). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "atomic_file.h"
#include "commands.h"
#include "input_file.h"
#include "regular_file.h"
#include "stdout_status.h"
#include "tlm_rt/data.h"
#include "tokenizer.h"
#include "train.h"

/* Inputs larger than this are refused (the text and its ids are held in
 * memory). */
#define MAX_INPUT ((uint64_t)1 << 32)

static void usage(FILE *out) {
    fputs("usage: tlm-run tokenizer encode|decode|info --tokenizer PATH [options] [FILE...]\n"
          "       tlm-run tokenizer train --vocab N DATA... -o TOKENIZER.json\n"
          "\n"
          "  encode   prints the token ids of FILE (default, or -: standard input), space-separated,\n"
          "           one line per FILE\n"
          "  decode   reads token ids (separated by white space) and writes their bytes, FILE after FILE\n"
          "           (default, or -: standard input)\n"
          "  info     the vocabulary size, merges, pattern and identity hash\n"
          "  train    learns a byte-level BPE tokenizer (GPT-2's pre-tokenization) from DATA\n"
          "           (files, or folders of .txt files) and writes it as a tokenizer.json\n"
          "\n"
          "  --tokenizer PATH   a tokenizer.json, a tiktoken rank file (Llama 3's tokenizer.model),\n"
          "                     or a folder holding GPT-2's encoder.json and vocab.bpe\n"
          "  --special          encode: recognise special tokens' text (default: plain text)\n"
          "  --bos              encode: start with <|begin_of_text|> (default: none)\n"
          "  --vocab N          train: the vocabulary size, <|endoftext|> included (257..16777216)\n"
          "  -o, --output PATH  train: where to write the tokenizer.json (atomically)\n"
          "\n"
          "Exit status: 0 ok, 1 error (tokenizer file, input), 2 bad usage.\n",
          out);
}

/* Token ids and text can be far more than stdio's buffer: a write that
 * fails (a full disk) is noted with its reason at once, for the one line
 * tlm_stdout_status says as the command ends. */
static void stdout_write(const void *p, size_t n) {
    if (fwrite(p, 1, n, stdout) != n) tlm_stdout_failed();
}

static int do_encode(tlm_tokenizer *t, const uint8_t *text, size_t n, const tlm_tok_options *o) {
    tlm_err err = {""};
    tlm_tok_ids ids = {0};
    if (!tlm_tok_encode(t, text, n, o, &ids, &err)) {
        tlm_tok_ids_free(&ids);
        return cli_error("tokenizer", "%s", err.msg);
    }
    char buf[1 << 16];
    size_t used = 0;
    for (size_t i = 0; i < ids.n; i++) {
        if (used > sizeof buf - 16) {
            stdout_write(buf, used);
            used = 0;
        }
        used += (size_t)snprintf(buf + used, sizeof buf - used, i ? " %d" : "%d", (int)ids.ids[i]);
    }
    buf[used++] = '\n';
    stdout_write(buf, used);
    tlm_tok_ids_free(&ids);
    return 0;
}

static bool is_space(uint8_t c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

static int do_decode(tlm_tokenizer *t, const uint8_t *text, size_t n) {
    tlm_tok_ids ids = {0};
    tlm_err err = {""};
    int rc = 0;
    for (size_t i = 0; i < n && !rc;) {
        if (is_space(text[i])) {
            i++;
            continue;
        }
        int64_t v = 0;
        size_t start = i;
        while (i < n && text[i] >= '0' && text[i] <= '9' && v <= INT32_MAX) v = v * 10 + (text[i++] - '0');
        if (i == start || (i < n && !is_space(text[i])) || v > INT32_MAX) {
            size_t end = start; /* the word, up to the next white space */
            while (end < n && !is_space(text[end])) end++;
            size_t shown = end - start < 40 ? end - start : 40;
            rc = cli_error("tokenizer",
                           "decode: the input holds `%.*s%s`, not a token id (ids are decimal integers "
                           "separated by white space)",
                           (int)shown, (const char *)text + start, shown < end - start ? "..." : "");
            break;
        }
        if (ids.n == ids.cap) {
            size_t cap = ids.cap ? ids.cap * 2 : 4096;
            int32_t *p = realloc(ids.ids, cap * sizeof *p);
            if (!p) {
                rc = cli_error("tokenizer", "out of memory");
                break;
            }
            ids.ids = p, ids.cap = cap;
        }
        ids.ids[ids.n++] = (int32_t)v;
    }
    tlm_strbuf out = {0};
    if (!rc && !tlm_tok_decode(t, ids.ids, ids.n, &out, &err)) rc = cli_error("tokenizer", "decode: %s", err.msg);
    if (!rc && out.len) stdout_write(out.buf, out.len);
    tlm_sb_free(&out);
    tlm_tok_ids_free(&ids);
    return rc;
}

static void print_info(const tlm_tokenizer *t) {
    const uint8_t *h = tlm_tok_hash(t);
    printf("vocab     %d\nmerges    %d\npattern   %s\nbos       %d\nhash      ", (int)tlm_tok_vocab_size(t),
           (int)tlm_tok_merge_count(t), tlm_tok_pattern_name(t), (int)tlm_tok_bos(t));
    for (int i = 0; i < 32; i++) printf("%02x", h[i]);
    putchar('\n');
}

static void show_progress(void *ctx, int32_t tokens, int32_t vocab) {
    (void)ctx;
    fprintf(stderr, "\rtlm-run tokenizer train: %d / %d tokens", (int)tokens, (int)vocab);
    fflush(stderr);
}

/* The output must not be one of the texts a DATA path names (a folder's
 * too): the rename would put the tokenizer in its place; nor a new text of
 * a DATA folder. */
static int output_not_text(const char *out_path, const char *path) {
    tlm_err err = {""};
    char **names;
    int n;
    if (tlm_data_texts(path, &names, &n, &err) != 0) return cli_error("tokenizer", "%s", err.msg);
    int rc = 0;
    for (int i = 0; i < n && !rc; i++)
        if (!tlm_output_not_input(out_path, names[i], "a text to train on", &err))
            rc = cli_error("tokenizer", "%s", err.msg);
    tlm_data_texts_free(names, n);
    if (!rc && !tlm_data_not_new_input("-o", out_path, path, &err)) rc = cli_error("tokenizer", "%s", err.msg);
    return rc;
}

static int do_train(const char *const *data, int ndata, int64_t vocab, const char *out_path) {
    tlm_err err = {""};
    tlm_bpe_trainer *b = tlm_bpe_new(&err);
    if (!b) return cli_error("tokenizer", "%s", err.msg);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = 0;
    for (int i = 0; i < ndata && !rc; i++) rc = output_not_text(out_path, data[i]);
    for (int i = 0; i < ndata && !rc; i++) {
        tlm_dataset ds = {0};
        if (tlm_data_load(&ds, data[i], &err) != 0) rc = cli_error("tokenizer", "%s", err.msg);
        else if (!tlm_bpe_add_text(b, ds.bytes, ds.n, &err)) rc = cli_error("tokenizer", "%s: %s", data[i], err.msg);
        tlm_data_free(&ds);
    }
    tlm_strbuf json = {0};
    bool tty = isatty(2);
    if (!rc && !tlm_bpe_train(b, (int32_t)vocab, tty ? show_progress : NULL, NULL, &json, &err))
        rc = cli_error("tokenizer", "train: %s", err.msg);
    if (tty) fputs("\r\033[K", stderr);
    if (!rc && !tlm_write_file_atomic(out_path, json.buf, json.len, &err)) rc = cli_error("tokenizer", "%s", err.msg);
    if (!rc) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        uint64_t bytes;
        size_t words;
        int32_t merges, tokens;
        tlm_bpe_stats(b, &bytes, &words, &merges, &tokens);
        char shortfall[160] = "";
        if (tokens < vocab)
            snprintf(shortfall, sizeof shortfall,
                     " (stopped short of --vocab %" PRId64 ": no pair of tokens was left to merge, every pre-token is "
                     "one token)",
                     vocab);
        fprintf(stderr,
                "tlm-run tokenizer train: %s: %d tokens%s, %d merges from %" PRIu64
                " bytes (%zu distinct pre-tokens) in %.2f s\n",
                out_path, (int)tokens, shortfall, (int)merges, bytes, words,
                (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
    }
    tlm_sb_free(&json);
    tlm_bpe_free(b);
    return rc;
}

enum { OPT_TOKENIZER = 256, OPT_SPECIAL, OPT_BOS, OPT_VOCAB };
static const struct option long_options[] = {
    {"help", no_argument, NULL, 'h'},
    {"vocab", required_argument, NULL, OPT_VOCAB},
    {"output", required_argument, NULL, 'o'},
    {"tokenizer", required_argument, NULL, OPT_TOKENIZER},
    {"special", no_argument, NULL, OPT_SPECIAL},
    {"bos", no_argument, NULL, OPT_BOS},
    {NULL, 0, NULL, 0},
};

/* What the command line gave (the flags as given, checked once the action
 * is known). */
typedef struct cmdline {
    const char *action, *tok_path, *vocab, *out_path;
    tlm_tok_options o;
    int nfiles;
} cmdline;

/* Each flag belongs to some actions: one given to another is a usage error
 * naming the action it belongs to, before its value is looked at (so
 * `encode --vocab 5` does not complain about the 5). */
static int check_usage(const cmdline *c) {
    if (!c->action) return cli_usage_error("tokenizer", "say encode, decode, info or train");
    const char *act = c->action;
    bool encode = !strcmp(act, "encode"), decode = !strcmp(act, "decode"), info = !strcmp(act, "info"),
         train = !strcmp(act, "train");
    if (!encode && !decode && !info && !train)
        return cli_usage_error("tokenizer", "unknown action `%s` (encode, decode, info or train)", act);
    if (!train && c->vocab) return cli_usage_error("tokenizer", "--vocab applies to train only, not %s", act);
    if (!train && c->out_path) return cli_usage_error("tokenizer", "-o applies to train only, not %s", act);
    if (!encode && c->o.special) return cli_usage_error("tokenizer", "--special applies to encode only, not %s", act);
    if (!encode && c->o.bos) return cli_usage_error("tokenizer", "--bos applies to encode only, not %s", act);
    if (train && c->tok_path)
        return cli_usage_error("tokenizer", "--tokenizer applies to encode, decode and info, not train");
    if (train) {
        if (!c->vocab) return cli_usage_error("tokenizer", "train needs --vocab N");
        if (!c->out_path) return cli_usage_error("tokenizer", "train needs -o TOKENIZER.json");
        if (!c->nfiles) return cli_usage_error("tokenizer", "train needs DATA (files or folders)");
        return 0;
    }
    if (!c->tok_path) return cli_usage_error("tokenizer", "--tokenizer PATH is required");
    if (info && c->nfiles) return cli_usage_error("tokenizer", "info takes no input file");
    return 0;
}

/* encode, decode or info (check_usage has passed). */
static int run_tokenizer(const cmdline *c, const char *const *files) {
    int rc = 0;
    tlm_err err = {""};
    tlm_tokenizer *t = tlm_tok_load(c->tok_path, &err);
    if (!t) rc = cli_error("tokenizer", "%s", err.msg);
    else if (!strcmp(c->action, "info")) print_info(t);
    else
        for (int i = 0; i < (c->nfiles ? c->nfiles : 1) && !rc; i++) {
            size_t n = 0;
            /* no FILE, or `-` (as sample's --prompt-file -): standard input */
            const char *path = c->nfiles && strcmp(files[i], "-") != 0 ? files[i] : NULL;
            uint8_t *text = cli_read_input(path, MAX_INPUT, "an input", &n, &err);
            if (!text) rc = cli_error("tokenizer", "%s", err.msg);
            else rc = !strcmp(c->action, "encode") ? do_encode(t, text, n, &c->o) : do_decode(t, text, n);
            free(text);
        }
    tlm_tok_free(t);
    /* a failed write of standard output is tlm-run's to report, once
     * (tlm_stdout_status, as it ends) */
    return rc;
}

int cmd_tokenizer(int argc, char **argv) {
    const char **files = calloc((size_t)argc + 1, sizeof *files);
    if (!files) return cli_error("tokenizer", "out of memory");
    cmdline c = {0};
    cli_args a = {.cmd = "tokenizer", .argc = argc, .argv = argv};
    int opt;
    while ((opt = cli_getopt(&a, "ho:", long_options)) != -1) {
        switch (opt) {
        case OPT_VOCAB: c.vocab = a.val; break;
        case 'o':
            if (!cli_output_path(&a, &c.out_path)) {
                free(files);
                return 2;
            }
            break;
        case 'h':
            free(files);
            usage(stdout);
            return 0;
        case OPT_TOKENIZER:
            if (!cli_path(&a, &c.tok_path)) {
                free(files);
                return 2;
            }
            break;
        case OPT_SPECIAL: c.o.special = true; break;
        case OPT_BOS: c.o.bos = true; break;
        case 1:
            if (!c.action) c.action = a.val;
            else if (!a.val[0]) {
                /* a usage slip, not "cannot open : No such file or directory" */
                free(files);
                return cli_usage_error("tokenizer", "%s is empty: it needs a path",
                                       !strcmp(c.action, "train") ? "DATA" : "FILE");
            } else files[c.nfiles++] = a.val;
            break;
        default: free(files); return 2; /* reported by cli_getopt */
        }
    }
    int rc = check_usage(&c);
    if (!rc && !strcmp(c.action, "train")) {
        int64_t vocab;
        a.val = c.vocab, a.flag = "--vocab";
        rc = cli_int(&a, 257, 1 << 24, &vocab) ? do_train(files, c.nfiles, vocab, c.out_path) : 2;
    } else if (!rc) rc = run_tokenizer(&c, files);
    free(files);
    return rc;
}
