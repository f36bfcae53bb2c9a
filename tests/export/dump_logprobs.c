/* The tlm side of the llama.cpp parity test: the log-probabilities tlm's
 * own forward gives every byte after each position of a window.
 *
 *   dump_logprobs MODEL.so CHECKPOINT TEXT OFFSET N OUT
 *
 * runs the checkpoint's model over bytes [OFFSET, OFFSET + N) of TEXT (one
 * sequence from position 0, N <= the model's context) and writes OUT: N rows
 * of `vocab` float32 log-softmaxes, little-endian. Exit 0, or 1 with a
 * message. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "checkpoint.h"
#include "model.h"

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: dump_logprobs MODEL.so CHECKPOINT TEXT OFFSET N OUT\n");
        return 2;
    }
    long offset = atol(argv[4]), n = atol(argv[5]);
    tlm_err err = {""};
    tlm_so so;
    tlm_model m = {0};
    if (!tlm_so_open(argv[1], &so, &err)) return fprintf(stderr, "dump_logprobs: %s\n", err.msg), 1;
    const int64_t V = so.config->vocab;
    if (n < 1 || n > so.config->context) return fprintf(stderr, "dump_logprobs: N out of range\n"), 1;
    tlm_st_file *f = tlm_ckpt_open(argv[2], &so, &err);
    if (!f || !tlm_model_create(&m, &so, 1, n, false, 0, &err) || !tlm_ckpt_load_params(f, &m, &err))
        return fprintf(stderr, "dump_logprobs: %s\n", err.msg), 1;
    tlm_st_close(f);
    FILE *in = fopen(argv[3], "rb");
    int32_t *tokens = malloc((size_t)n * sizeof *tokens);
    if (!in || !tokens || fseek(in, offset, SEEK_SET) != 0) return fprintf(stderr, "dump_logprobs: %s\n", argv[3]), 1;
    for (long i = 0; i < n; i++) {
        int c = fgetc(in);
        if (c == EOF) return fprintf(stderr, "dump_logprobs: %s ends early\n", argv[3]), 1;
        tokens[i] = c;
    }
    fclose(in);
    tlm_model_forward(&m, tokens, NULL, 1, n);
    const float *logits = tlm_model_logits(&m);
    float *row = malloc((size_t)V * sizeof *row);
    FILE *out = fopen(argv[6], "wb");
    if (!row || !out) return fprintf(stderr, "dump_logprobs: cannot write %s\n", argv[6]), 1;
    for (long t = 0; t < n; t++) {
        const float *z = logits + t * V;
        double mx = z[0], s = 0;
        for (int64_t v = 1; v < V; v++) mx = z[v] > mx ? z[v] : mx;
        for (int64_t v = 0; v < V; v++) s += exp(z[v] - mx);
        double lse = mx + log(s);
        for (int64_t v = 0; v < V; v++) row[v] = (float)(z[v] - lse);
        fwrite(row, sizeof *row, (size_t)V, out);
    }
    free(row);
    free(tokens);
    tlm_model_destroy(&m);
    tlm_so_close(&so);
    return fclose(out) == 0 ? 0 : 1;
}
