/* Sampling's cost per token on the CPU, timed inside one process: a
 * model's KV-cache decode against recomputing the window (the full forward
 * over every token so far, what `tlm-run sample --no-cache` does), for
 * windows of 1 to LENGTH tokens (default: the context), as a greedy
 * sample of LENGTH tokens from an empty prompt grows its window.
 *
 * bench/sample_bench.sh times whole `tlm-run sample` runs and takes the
 * difference of two; at tiny's 0.4 ms a token the loading's noise (0.4 s a
 * run) moved its ratios by a third from run to run. Here each pass times
 * the decodes and the forwards alone; the best of REPS passes is printed,
 * with the worst beside it to show the spread.
 *
 * Random parameters (tlm_model_init_params) and tokens: the cost does not
 * depend on their values. The decoded logits are checked against the
 * recomputed ones (the model.kv_cache bound), so a fast wrong decode
 * cannot pass for a fast one.
 *
 *   decode_bench MODEL.so [--threads N] [--reps R] [--length L] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_args.h"
#include "kv_bound.h"
#include "model.h"
#include "tlm_rt/ops.h"
#include "tlm_rt/rng.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct {
    double cached, recomputed;          /* seconds over the LENGTH tokens */
    double cached_last, recomputed_last; /* the last token's (the widest window) */
    double error;                       /* the worst logit against its bound */
} pass;

/* The decodes back to back, as sampling runs them (a forward between two
 * decodes would evict the weights from the caches), each token's logits
 * kept in got [length, V]; then the recomputed windows, each checked. */
static bool run_pass(tlm_model *m, const int32_t *tokens, int length, float *got, pass *p) {
    const int64_t V = m->so->config->vocab;
    memset(p, 0, sizeof *p);
    for (int n = 1; n <= length; n++) {
        double t0 = now();
        bool ok = n == 1 ? tlm_model_prefill(m, tokens, 1) : tlm_model_decode(m, tokens[n - 1], n - 1);
        double t1 = now();
        if (!ok) return false;
        memcpy(got + (size_t)(n - 1) * (size_t)V, tlm_model_logits(m), (size_t)V * sizeof(float));
        p->cached += t1 - t0;
        if (n == length) p->cached_last = t1 - t0;
    }
    for (int n = 1; n <= length; n++) {
        double t0 = now();
        tlm_model_forward(m, tokens, NULL, 1, n);
        double t1 = now();
        double e =
            kv_row_ratio(got + (size_t)(n - 1) * (size_t)V, tlm_model_logits(m) + (size_t)(n - 1) * (size_t)V, V, 1e-5);
        if (!(e <= p->error)) p->error = e;
        p->recomputed += t1 - t0;
        if (n == length) p->recomputed_last = t1 - t0;
    }
    return true;
}

#define USAGE "usage: decode_bench MODEL.so [--threads N] [--reps R] [--length L]"

int main(int argc, char **argv) {
    const char *path = NULL;
    int threads = 1, reps = 5, length = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            puts(USAGE);
            return 0;
        }
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            if (!bench_int_arg("decode_bench", "--threads", argv[++i], 1, 1024, &threads)) return 2;
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            if (!bench_int_arg("decode_bench", "--reps", argv[++i], 1, 1000, &reps)) return 2;
        } else if (!strcmp(argv[i], "--length") && i + 1 < argc) {
            if (!bench_int_arg("decode_bench", "--length", argv[++i], 1, 1 << 20, &length)) return 2;
        } else if (argv[i][0] != '-' && !path) {
            path = argv[i];
        } else {
            fprintf(stderr, "decode_bench: unexpected argument '%s' (" USAGE ")\n", argv[i]);
            return 2;
        }
    }
    if (!path) {
        fprintf(stderr, "decode_bench: no MODEL.so (" USAGE ")\n");
        return 2;
    }
    tlm_set_num_threads(threads);
    tlm_err err = {""};
    tlm_so so;
    if (!tlm_so_open(path, &so, &err)) { /* its message names the file */
        fprintf(stderr, "decode_bench: %s\n", err.msg);
        return 1;
    }
    const int64_t T = so.config->context, V = so.config->vocab;
    if (length > T) { /* refused, as tlm-run bench's --context is, not cut to the context */
        fprintf(stderr, "decode_bench: --length %d is longer than the model's context (%lld)\n", length, (long long)T);
        tlm_so_close(&so);
        return 2;
    }
    if (length == 0) length = (int)T;
    tlm_model m;
    if (!tlm_model_create(&m, &so, 1, T, false, 0, &err) || !tlm_model_cache_open(&m, &err)) {
        fprintf(stderr, "decode_bench: %s\n", err.msg);
        return 1;
    }
    tlm_model_init_params(&m, 1337);
    int32_t *tokens = malloc((size_t)length * sizeof *tokens);
    float *got = malloc((size_t)length * (size_t)V * sizeof *got);
    if (!tokens || !got) {
        fprintf(stderr, "decode_bench: out of memory\n");
        return 1;
    }
    tlm_rng rng;
    tlm_rng_seed(&rng, 42);
    for (int i = 0; i < length; i++) tokens[i] = (int32_t)tlm_rng_below(&rng, (uint64_t)V);
    pass best = {0}, worst = {0};
    double error = 0;
    for (int r = 0; r < reps; r++) {
        pass p;
        if (!run_pass(&m, tokens, length, got, &p)) {
            fprintf(stderr, "decode_bench: the decode failed\n");
            return 1;
        }
        if (r == 0 || p.cached < best.cached) best.cached = p.cached, best.cached_last = p.cached_last;
        if (r == 0 || p.recomputed < best.recomputed)
            best.recomputed = p.recomputed, best.recomputed_last = p.recomputed_last;
        if (p.cached > worst.cached) worst.cached = p.cached;
        if (p.recomputed > worst.recomputed) worst.recomputed = p.recomputed;
        if (!(p.error <= error)) error = p.error;
    }
    const double ms = 1e3 / length;
    printf("%s, %d thread(s), %d tokens (windows 1 to %d), best of %d (worst):\n", path, threads, length, length, reps);
    printf("  KV cache     %.3f ms a token (%.3f)\n", best.cached * ms, worst.cached * ms);
    printf("  recomputed   %.3f ms a token (%.3f)\n", best.recomputed * ms, worst.recomputed * ms);
    printf("  ratio        %.1fx over the %d tokens; %.1fx at the last (window %d: %.3f against %.3f ms)\n",
           best.recomputed / best.cached, length, best.recomputed_last / best.cached_last, length,
           best.cached_last * 1e3, best.recomputed_last * 1e3);
    printf("  logits       worst %.3f of the bound (1e-5 relative + 1e-5 of the row's largest)\n", error);
    free(tokens), free(got);
    tlm_model_destroy(&m);
    tlm_so_close(&so);
    return error <= 1.0 ? 0 : 1;
}
