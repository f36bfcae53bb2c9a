/* titans_bench: the Titans memory op (runtime/ops/titans.c, chunk-parallel)
 * against its token-by-token form (tests/runtime/titans_tokenwise.h, the op
 * as it was before), forward and backward, measured in the same run on the
 * same inputs; prints the times and their ratio.
 *
 *   titans_bench [--reps N] [--threads T] [--b440 B]
 *
 * Shapes: examples/tiny_titans.tlm's micro-batch (batch 8 x context 256,
 * 4 heads of 64, chunk 16) and examples/paper/titans_440m.tlm's (16 heads of
 * 64, chunk 64, context 2048) with B sequences (default 1: its micro-batch
 * of 256 sequences is 256 times the same independent (b, h) work, so the
 * ratio is the one measured here); also titans_760m's heads (12 of 128,
 * chunk 64, B as for 440m). Each time is the best of `reps` runs.
 * Threads (default 1) split the (b, h) pairs in both forms. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_args.h"
#include "titans_tokenwise.h"
#include "tlm_rt/ops.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static unsigned long long g_state = 0x9e3779b97f4a7c15ull;

static float urand(void) { /* (0, 1) */
    g_state = g_state * 6364136223846793005ull + 1442695040888963407ull;
    return ((float)(g_state >> 40) + 0.5f) / 16777216.0f;
}

static float *falloc(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    if (!p) {
        fprintf(stderr, "titans_bench: out of memory\n");
        exit(2);
    }
    return p;
}

static void cpu_line(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[8192], model[256] = "?", flags[512] = "";
    static const char *want[] = {"sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_bf16"};
    while (f && fgets(line, sizeof line, f)) {
        if (!strncmp(line, "model name", 10) && model[0] == '?') {
            char *c = strchr(line, ':');
            if (c) snprintf(model, sizeof model, "%s", c + 2);
            model[strcspn(model, "\n")] = 0;
        }
        if (!strncmp(line, "flags", 5) && !flags[0]) {
            for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
                char pat[64];
                snprintf(pat, sizeof pat, " %s ", want[i]);
                line[strcspn(line, "\n")] = ' ';
                if (strstr(line, pat)) {
                    strncat(flags, want[i], sizeof flags - strlen(flags) - 2);
                    strcat(flags, " ");
                }
            }
        }
    }
    if (f) fclose(f);
    printf("CPU: %s; flags: %s\n", model, flags);
}

typedef struct {
    int B, T, H, D, C;
    const char *name;
} shape;

static void run(const shape *s, int reps, int threads) {
    const int B = s->B, T = s->T, H = s->H, D = s->D, C = s->C, stride = 3 * H * D;
    const size_t n = (size_t)B * T * H * D, BTH = (size_t)B * T * H;
    float *qkv = falloc(3 * n), *g = falloc(3 * BTH), *dy = falloc(n), *y = falloc(n);
    float *dqkv = falloc(3 * n), *dg = falloc(3 * BTH);
    float *saved = falloc(tlm_titans_saved_floats(B, T, H, D, C));
    float *scratch = falloc(tlm_titans_scratch_floats(D, C) * (size_t)threads);
    float *saved0 = falloc(tok_saved_floats(B, T, H, D, C));
    float *scratch0 = falloc(tok_scratch_floats(D, C) * (size_t)threads);
    for (size_t r = 0; r < (size_t)B * T; r++) { /* q, k unit vectors, v in (-1, 1) */
        for (int part = 0; part < 3; part++) {
            for (int h = 0; h < H; h++) {
                float *x = qkv + r * stride + (size_t)part * H * D + (size_t)h * D;
                double ss = 0.0;
                for (int i = 0; i < D; i++) x[i] = 2.0f * urand() - 1.0f, ss += (double)x[i] * x[i];
                if (part < 2)
                    for (int i = 0; i < D; i++) x[i] = (float)(x[i] / sqrt(ss));
            }
        }
    }
    for (size_t i = 0; i < BTH; i++) g[i] = 0.001f + 0.099f * urand();
    for (size_t i = BTH; i < 3 * BTH; i++) g[i] = 0.05f + 0.9f * urand();
    for (size_t i = 0; i < n; i++) dy[i] = 2.0f * urand() - 1.0f;
    const float *q = qkv, *k = qkv + (size_t)H * D, *v = qkv + 2 * (size_t)H * D;
    float *dq = dqkv, *dk = dqkv + (size_t)H * D, *dv = dqkv + 2 * (size_t)H * D;
    double best[2][2] = {{1e30, 1e30}, {1e30, 1e30}}; /* [old/new][fwd/bwd] */
    for (int rep = 0; rep < reps; rep++) {
        for (int form = 0; form < 2; form++) {
            double t0 = now_s();
            if (form == 0) tok_forward(y, saved0, q, k, v, stride, g, g + BTH, g + 2 * BTH, B, T, H, D, C);
            else tlm_titans_forward(y, saved, q, k, v, stride, g, g + BTH, g + 2 * BTH, B, T, H, D, C);
            double t1 = now_s();
            if (form == 0)
                tok_backward(dq, dk, dv, dg, dg + BTH, dg + 2 * BTH, dy, saved0, q, k, v, stride, g, g + BTH,
                             g + 2 * BTH, B, T, H, D, C, scratch0, threads);
            else
                tlm_titans_backward(dq, dk, dv, dg, dg + BTH, dg + 2 * BTH, dy, saved, q, k, v, stride, g, g + BTH,
                                    g + 2 * BTH, B, T, H, D, C, scratch, threads);
            double t2 = now_s();
            best[form][0] = fmin(best[form][0], t1 - t0);
            best[form][1] = fmin(best[form][1], t2 - t1);
        }
    }
    double old_t = best[0][0] + best[0][1], new_t = best[1][0] + best[1][1];
    printf("%-12s B=%d T=%d H=%d D=%d C=%d, %d thread(s):\n", s->name, B, T, H, D, C, threads);
    printf("  token-by-token  fwd %8.2f ms  bwd %8.2f ms  total %8.2f ms\n", 1e3 * best[0][0], 1e3 * best[0][1],
           1e3 * old_t);
    printf("  chunk-parallel  fwd %8.2f ms  bwd %8.2f ms  total %8.2f ms\n", 1e3 * best[1][0], 1e3 * best[1][1],
           1e3 * new_t);
    printf("  speed-up        fwd %8.2fx     bwd %8.2fx     fwd+bwd %6.2fx\n", best[0][0] / best[1][0],
           best[0][1] / best[1][1], old_t / new_t);
    free(qkv), free(g), free(dy), free(y), free(dqkv), free(dg);
    free(saved), free(scratch), free(saved0), free(scratch0);
}

/* A whole number in [1, hi], or 0: atoi took "3x" for 3 and "abc" for 0. */
static int count_arg(const char *text, long hi) {
    int v;
    return bench_whole(text, 1, hi, &v) ? v : 0;
}

int main(int argc, char **argv) {
    int reps = 3, threads = 1, b440 = 1;
    static const char usage[] = "usage: titans_bench [--reps N] [--threads T] [--b440 B] (each a whole number, at "
                                "least 1; T at most 4096, B at most 256)\n";
    for (int i = 1; i < argc; i += 2) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(usage, stdout);
            return 0;
        }
        if (i + 1 < argc && !strcmp(argv[i], "--reps")) reps = count_arg(argv[i + 1], 1000000);
        else if (i + 1 < argc && !strcmp(argv[i], "--threads")) threads = count_arg(argv[i + 1], 4096);
        else if (i + 1 < argc && !strcmp(argv[i], "--b440")) b440 = count_arg(argv[i + 1], 256);
        else {
            fputs(usage, stderr);
            return 2;
        }
    }
    if (reps < 1 || threads < 1 || b440 < 1) {
        fputs(usage, stderr);
        return 2;
    }
    tlm_set_num_threads(threads);
    cpu_line();
    const shape shapes[] = {{8, 256, 4, 64, 16, "tiny_titans"},
                            {b440, 2048, 16, 64, 64, "titans_440m"},
                            {b440, 2048, 12, 128, 64, "titans_760m"}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) run(&shapes[i], reps, threads);
    return 0;
}
