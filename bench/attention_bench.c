/* attention_bench: the runtime's flash-style attention (runtime/ops/
 * attention.c: blocked, one log-sum-exp per token and head saved) next to
 * the implementation it replaced (kept here only: the full probabilities
 * [B,H,T,T] saved and read back), forward + backward, in one run on the
 * same inputs, with the largest difference between their outputs.
 *
 *   attention_bench [--batch B] [--heads H] [--head-dim D] [--reps N]
 *                   [--profile fwd|bwd] [T ...]
 *
 * --profile times the new implementation alone (the forward, or the
 * backward after one forward), for `perf record`: the replaced one would
 * swamp the profile. GFLOP/s count the causal half, two products forward
 * and four backward (the recomputed scores not counted), as tlm-run's
 * profile does.
 *
 * Defaults are examples/tiny.tlm's sizes (batch 8, 4 heads of 64) at
 * contexts 256 and 2048, packed qkv as the executor passes it. Threads:
 * OMP_NUM_THREADS (OpenMP's default otherwise). */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_args.h"
#include "tlm_rt/ops.h"

/* ---- the replaced implementation: probabilities kept ---- */

static float dot_old(const float *a, const float *b, int n) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}
static void axpy_old(float *y, float a, const float *x, int n) {
#pragma omp simd
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}

static void old_forward(float *y, float *att, const float *q, const float *k, const float *v, int B, int T, int H,
                        int D, int stride) {
    const float scale = 1.0f / sqrtf((float)D);
    const int C = H * D;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            const float *qb = q + (size_t)b * T * stride + (size_t)h * D;
            const float *kb = k + (size_t)b * T * stride + (size_t)h * D;
            const float *vb = v + (size_t)b * T * stride + (size_t)h * D;
            for (int t = 0; t < T; t++) {
                const float *qt = qb + (size_t)t * stride;
                float *p = att + (((size_t)b * H + h) * T + t) * T;
                float mx = -INFINITY;
                for (int u = 0; u <= t; u++) {
                    float s = dot_old(qt, kb + (size_t)u * stride, D) * scale;
                    p[u] = s;
                    if (s > mx) mx = s;
                }
                float sum = 0.0f;
                for (int u = 0; u <= t; u++) {
                    p[u] = expf(p[u] - mx);
                    sum += p[u];
                }
                float inv = 1.0f / sum;
                for (int u = 0; u <= t; u++) p[u] *= inv;
                for (int u = t + 1; u < T; u++) p[u] = 0.0f;
                float *yt = y + ((size_t)b * T + t) * C + (size_t)h * D;
                memset(yt, 0, (size_t)D * sizeof(float));
                for (int u = 0; u <= t; u++) axpy_old(yt, p[u], vb + (size_t)u * stride, D);
            }
        }
    }
}

static void old_backward(float *dq, float *dk, float *dv, const float *dy, const float *y, const float *att,
                         const float *q, const float *k, const float *v, int B, int T, int H, int D, int stride) {
    const float scale = 1.0f / sqrtf((float)D);
    const int C = H * D;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            size_t base = (size_t)b * T * stride + (size_t)h * D;
            const float *qb = q + base, *kb = k + base, *vb = v + base;
            float *dqb = dq + base, *dkb = dk + base, *dvb = dv + base;
            for (int t = 0; t < T; t++) {
                size_t at = (size_t)t * stride;
                memset(dqb + at, 0, (size_t)D * sizeof(float));
                memset(dkb + at, 0, (size_t)D * sizeof(float));
                memset(dvb + at, 0, (size_t)D * sizeof(float));
            }
            for (int t = 0; t < T; t++) {
                const float *p = att + (((size_t)b * H + h) * T + t) * T;
                size_t yo = ((size_t)b * T + t) * C + (size_t)h * D;
                const float *dyt = dy + yo;
                const float *qt = qb + (size_t)t * stride;
                float *dqt = dqb + (size_t)t * stride;
                float rowdot = dot_old(dyt, y + yo, D);
                for (int u = 0; u <= t; u++) {
                    size_t uo = (size_t)u * stride;
                    float dp = dot_old(dyt, vb + uo, D);
                    float ds = p[u] * (dp - rowdot) * scale;
                    axpy_old(dqt, ds, kb + uo, D);
                    axpy_old(dkb + uo, ds, qt, D);
                    axpy_old(dvb + uo, p[u], dyt, D);
                }
            }
        }
    }
}

/* ---- the run ---- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *alloc_floats(size_t n) {
    float *p = malloc(n * sizeof(float));
    if (!p) {
        fprintf(stderr, "attention_bench: out of memory (%zu floats)\n", n);
        exit(1);
    }
    return p;
}

static float max_rel_diff(const float *a, const float *b, size_t n) {
    float scale = 0.0f, diff = 0.0f;
    for (size_t i = 0; i < n; i++) {
        scale = fmaxf(scale, fabsf(a[i]));
        diff = fmaxf(diff, fabsf(a[i] - b[i]));
    }
    return scale > 0.0f ? diff / scale : diff;
}

/* The same inputs for every run: qkv in [-1, 1), dy in [-0.5, 0.5). */
static void random_inputs(float *qkv, size_t n_qkv, float *dy, size_t n_dy) {
    unsigned seed = 1234;
    for (size_t i = 0; i < n_qkv; i++) qkv[i] = 2.0f * ((float)rand_r(&seed) / (float)RAND_MAX - 0.5f);
    for (size_t i = 0; i < n_dy; i++) dy[i] = (float)rand_r(&seed) / (float)RAND_MAX - 0.5f;
}

static void bench(int B, int T, int H, int D, int reps) {
    const int A = H * D, stride = 3 * A;
    const size_t N = (size_t)B * T, tt = (size_t)B * H * T * T;
    float *qkv = alloc_floats(N * stride), *dqkv = alloc_floats(N * stride), *dqkv_old = alloc_floats(N * stride);
    float *y = alloc_floats(N * A), *y_old = alloc_floats(N * A), *dy = alloc_floats(N * A);
    float *lse = alloc_floats(N * H), *att = alloc_floats(tt);
    random_inputs(qkv, N * stride, dy, N * A);
    const float *q = qkv, *k = qkv + A, *v = qkv + 2 * A;
    double t_old_f = 1e30, t_old_b = 1e30, t_new_f = 1e30, t_new_b = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        old_forward(y_old, att, q, k, v, B, T, H, D, stride);
        double t1 = now_s();
        old_backward(dqkv_old, dqkv_old + A, dqkv_old + 2 * A, dy, y_old, att, q, k, v, B, T, H, D, stride);
        double t2 = now_s();
        tlm_attention_forward(y, lse, q, k, v, B, T, H, D, stride);
        double t3 = now_s();
        tlm_attention_backward(dqkv, dqkv + A, dqkv + 2 * A, dy, y, lse, q, k, v, B, T, H, D, stride);
        double t4 = now_s();
        t_old_f = fmin(t_old_f, t1 - t0), t_old_b = fmin(t_old_b, t2 - t1);
        t_new_f = fmin(t_new_f, t3 - t2), t_new_b = fmin(t_new_b, t4 - t3);
    }
    double old_ms = 1e3 * (t_old_f + t_old_b), new_ms = 1e3 * (t_new_f + t_new_b);
    printf("B=%d T=%d H=%d D=%d threads=%d (best of %d)\n", B, T, H, D, omp_get_max_threads(), reps);
    printf("  old (probs kept): fwd %8.2f ms  bwd %8.2f ms  total %8.2f ms  saved %8.1f MiB\n", 1e3 * t_old_f,
           1e3 * t_old_b, old_ms, (double)tt * 4 / 1048576.0);
    printf("  new (flash, lse): fwd %8.2f ms  bwd %8.2f ms  total %8.2f ms  saved %8.3f MiB\n", 1e3 * t_new_f,
           1e3 * t_new_b, new_ms, (double)N * H * 4 / 1048576.0);
    printf("  old/new: fwd %.2fx  bwd %.2fx  total %.2fx   max rel diff y %.2e dqkv %.2e\n", t_old_f / t_new_f,
           t_old_b / t_new_b, old_ms / new_ms, max_rel_diff(y_old, y, N * A), max_rel_diff(dqkv_old, dqkv, N * stride));
    free(qkv), free(dqkv), free(dqkv_old), free(y), free(y_old), free(dy), free(lse), free(att);
}

static void profile(int B, int T, int H, int D, int reps, int backward) {
    const int A = H * D, stride = 3 * A;
    const size_t N = (size_t)B * T;
    float *qkv = alloc_floats(N * stride), *dqkv = alloc_floats(N * stride);
    float *y = alloc_floats(N * A), *dy = alloc_floats(N * A), *lse = alloc_floats(N * H);
    random_inputs(qkv, N * stride, dy, N * A);
    const float *q = qkv, *k = qkv + A, *v = qkv + 2 * A;
    tlm_attention_forward(y, lse, q, k, v, B, T, H, D, stride);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now_s();
        if (backward) tlm_attention_backward(dqkv, dqkv + A, dqkv + 2 * A, dy, y, lse, q, k, v, B, T, H, D, stride);
        else tlm_attention_forward(y, lse, q, k, v, B, T, H, D, stride);
        best = fmin(best, now_s() - t0);
    }
    const double flops = (backward ? 4.0 : 2.0) * 2.0 * (double)B * H * ((double)T * (T + 1) / 2) * D;
    printf("B=%d T=%d H=%d D=%d threads=%d (best of %d): new %s %.2f ms, %.1f GFLOP/s\n", B, T, H, D,
           omp_get_max_threads(), reps, backward ? "bwd" : "fwd", 1e3 * best, flops / best / 1e9);
    free(qkv), free(dqkv), free(y), free(dy), free(lse);
}

/* A whole number in [1, hi], or 0 after saying so: atoi took "abc" for 0,
 * and a context of 0 ran and printed a table of nothing. */
static int count_arg(const char *what, const char *text, long hi) {
    int v;
    return bench_int_arg("attention_bench", what, text, 1, hi, &v) ? v : 0;
}

int main(int argc, char **argv) {
    int B = 8, H = 4, D = 64, reps = 0, nT = 0, Ts[16], only = -1;
    static const char usage[] =
        "usage: attention_bench [--batch B] [--heads H] [--head-dim D] [--reps N] [--profile fwd|bwd] [T ...]\n";
    for (int i = 1; i < argc; i++) {
        int ok = 1;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(usage, stdout);
            puts("  threads: OMP_NUM_THREADS (e.g. OMP_NUM_THREADS=1 for one), else OpenMP's default");
            return 0;
        }
        if (i + 1 < argc && !strcmp(argv[i], "--batch")) ok = B = count_arg(argv[i], argv[i + 1], 65536), i++;
        else if (i + 1 < argc && !strcmp(argv[i], "--heads")) ok = H = count_arg(argv[i], argv[i + 1], 4096), i++;
        else if (i + 1 < argc && !strcmp(argv[i], "--head-dim")) ok = D = count_arg(argv[i], argv[i + 1], 4096), i++;
        else if (i + 1 < argc && !strcmp(argv[i], "--reps")) ok = reps = count_arg(argv[i], argv[i + 1], 1000000), i++;
        else if (i + 1 < argc && !strcmp(argv[i], "--profile") && !strcmp(argv[i + 1], "fwd")) only = 0, i++;
        else if (i + 1 < argc && !strcmp(argv[i], "--profile") && !strcmp(argv[i + 1], "bwd")) only = 1, i++;
        else if (argv[i][0] != '-' && nT < 16) ok = Ts[nT++] = count_arg("a context T", argv[i], 1 << 20);
        else {
            fputs(usage, stderr);
            return 2;
        }
        if (!ok) return 2;
    }
    if (nT == 0) Ts[nT++] = 256, Ts[nT++] = 2048;
    for (int i = 0; i < nT; i++) {
        int n = reps > 0 ? reps : Ts[i] >= 1024 ? 2 : 10;
        if (only >= 0) profile(B, Ts[i], H, D, n, only);
        else bench(B, Ts[i], H, D, n);
    }
    return 0;
}
