/* The kernels under runtime/ops/attention.c, on their own:
 *  - v8_max_row (vec8.h) against a plain loop, every tail length;
 *  - v8_exp (vec8.h) against libm's expf over the float range, in ulps,
 *    and its edges (-inf, 0, NaN, underflow to subnormals and 0, overflow),
 *    both as the CPU runs it (the x86-64-v3 clone here) and as baseline;
 *  - gemm_rows (block_gemm.h), as run and as baseline, against a
 *    double-precision triple loop on odd sizes (1, 5, 37 rows; columns
 *    not multiples of 8; both layouts of a; a reduction range not from 0;
 *    fresh or accumulating; scaled), and every element bit-identical
 *    whatever tile computed it (GEMM_MR rows at a time, one row at a time,
 *    one column at a time), which is what keeps attention's results the
 *    same for any thread count; and, where the CPU has AVX-512, its
 *    16-float tiles bit-identical to the 8-float ones (AVX2 and AVX-512
 *    CPUs give attention the same bits). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../runtime/ops/block_gemm.h"
#include "../../runtime/ops/vec8.h"

static int failures = 0;
#define CHECK(cond, ...)                                         \
    do {                                                         \
        if (!(cond)) {                                           \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                        \
            fprintf(stderr, "\n");                               \
            failures++;                                          \
        }                                                        \
    } while (0)

/* ---- v8_exp ---- */

/* out[i] = e^(in[i] - sub) for i < n (n a multiple of 8), as attention.c's
 * kernels run it (the CPU's clone) and as the baseline build does. */
V8_CLONES static void exp_as_run(float *out, const float *in, int n, float sub) {
    for (int i = 0; i < n; i += 8) v8_exp(out + i, in + i, sub);
}
static void exp_baseline(float *out, const float *in, int n, float sub) {
    for (int i = 0; i < n; i += 8) v8_exp(out + i, in + i, sub);
}

/* floats in order as integers: the ulp distance is a difference */
static int64_t ordered(float x) {
    int32_t i;
    memcpy(&i, &x, sizeof i);
    return i < 0 ? -(int64_t)(i & 0x7fffffff) : (int64_t)i;
}

/* The largest ulp distance from expf over every 257th float (all signs and
 * exponents: -inf, huge, subnormal, ...), NaNs apart; a NaN must stay NaN. */
static int64_t exp_max_ulps(void (*fn)(float *, const float *, int, float), const char *name) {
    enum { N = 4096 };
    static float in[N], out[N];
    int64_t worst = 0;
    float worst_x = 0.0f;
    uint64_t bits = 0;
    while (bits <= 0xffffffffu) {
        int n = 0;
        for (; n < N && bits <= 0xffffffffu; n++, bits += 257) {
            uint32_t b = (uint32_t)bits;
            memcpy(&in[n], &b, sizeof b);
        }
        while (n % 8) in[n++] = 0.0f;
        fn(out, in, n, 0.0f);
        for (int i = 0; i < n; i++) {
            float want = expf(in[i]);
            if (isnan(in[i])) {
                CHECK(isnan(out[i]), "%s: e^NaN = %g, not NaN", name, out[i]);
                continue;
            }
            int64_t d = llabs(ordered(out[i]) - ordered(want));
            if (d > worst) worst = d, worst_x = in[i];
        }
    }
    printf("  v8_exp (%s): max %lld ulp from expf (at x = %.9g)\n", name, (long long)worst, worst_x);
    return worst;
}

static void test_exp_edges(void (*fn)(float *, const float *, int, float), const char *name) {
    float in[16] = {-INFINITY, 0.0f,    1.0f,    -1.0f,   88.72f,  88.73f, 89.5f, 1e30f,
                    -88.0f,    -100.0f, -103.9f, -104.5f, -200.0f, -1e30f, 0.5f,  1e-30f};
    float out[16];
    fn(out, in, 16, 0.0f);
    CHECK(out[0] == 0.0f, "%s: e^-inf = %g", name, out[0]);
    CHECK(out[1] == 1.0f, "%s: e^0 = %.9g", name, out[1]);
    CHECK(isinf(out[5]) && isinf(out[6]) && isinf(out[7]), "%s: no overflow to inf", name);
    CHECK(isfinite(out[4]), "%s: e^88.72 = %g", name, out[4]);
    CHECK(out[8] > 0.0f && out[8] < 1.2e-38f, "%s: e^-88 = %g, not subnormal", name, out[8]);
    CHECK(out[10] > 0.0f, "%s: e^-103.9 = %g, not the smallest subnormals", name, out[10]);
    CHECK(out[11] == 0.0f && out[12] == 0.0f && out[13] == 0.0f, "%s: no underflow to 0", name);
    /* the subtrahend: e^(x - sub) */
    float shifted[8] = {3.0f, 2.0f, 1.0f, 0.0f, -1.0f, -50.0f, 90.0f, 100.0f}, got[8];
    fn(got, shifted, 8, 90.0f);
    for (int i = 0; i < 8; i++) {
        float want = expf(shifted[i] - 90.0f);
        CHECK(llabs(ordered(got[i]) - ordered(want)) <= 2, "%s: e^(%g - 90) = %.9g, expf %.9g", name, shifted[i],
              got[i], want);
    }
}

/* v8_max_row against a plain loop: every length to 40 (tails), the max in
 * every position, all values below init. */
V8_CLONES static float max_as_run(const float *p, int n, float init) { return v8_max_row(p, n, init); }

static void test_max_row(void) {
    float p[40];
    for (int n = 0; n <= 40; n++) {
        for (int at = 0; at < (n > 0 ? n : 1); at++) {
            for (int i = 0; i < n; i++) p[i] = -1.0f - (float)((i * 7) % 11);
            if (n > 0) p[at] = 3.5f;
            float want = -INFINITY;
            for (int i = 0; i < n; i++) want = p[i] > want ? p[i] : want;
            CHECK(max_as_run(p, n, -INFINITY) == want, "max of %d (largest at %d): %g, want %g", n, at,
                  max_as_run(p, n, -INFINITY), want);
            CHECK(max_as_run(p, n, 10.0f) == 10.0f, "max of %d with init 10: %g", n, max_as_run(p, n, 10.0f));
        }
    }
}

/* ---- gemm_rows ---- */

typedef void gemm_fn(float *c, size_t ldc, int mr, int n, const float *a, size_t ars, size_t aks, const float *b,
                     size_t ldb, int k0, int k1, bool fresh, float scale);

/* gemm_rows as attention.c runs it is the widest kernel the CPU has (AVX-512, AVX2 + FMA or the baseline); this one is the
 * baseline build's kernel (no FMA, twice the registers per vector). */
static void gemm_baseline(float *c, size_t ldc, int mr, int n, const float *a, size_t ars, size_t aks, const float *b,
                          size_t ldb, int k0, int k1, bool fresh, float scale) {
    gemm_rows_any(c, ldc, mr, n, a, ars, aks, b, ldb, k0, k1, fresh, scale);
}

/* C (M x N, ldc) = scale * (C0 + A B) over k in [k0, k1), M rows a tile of
 * mr_max at a time as attention.c calls it. */
static void gemm_by_tiles(gemm_fn *gemm, float *c, size_t ldc, int M, int N, const float *a, size_t ars, size_t aks,
                          const float *b, size_t ldb, int k0, int k1, bool fresh, float scale, int mr_max) {
    for (int r0 = 0; r0 < M; r0 += mr_max) {
        int mr = M - r0 < mr_max ? M - r0 : mr_max;
        gemm(c + (size_t)r0 * ldc, ldc, mr, N, a + (size_t)r0 * ars, ars, aks, b, ldb, k0, k1, fresh, scale);
    }
}

static float frand(unsigned *seed) { return 2.0f * ((float)rand_r(seed) / (float)RAND_MAX) - 1.0f; }

static void test_gemm(gemm_fn *gemm, int M, int N, int K, int k0, bool a_transposed, bool fresh, float scale) {
    const size_t lda = a_transposed ? (size_t)M + 3 : (size_t)K + 5; /* padded rows */
    const size_t ars = a_transposed ? 1 : lda, aks = a_transposed ? lda : 1;
    const size_t ldb = (size_t)N + 7, ldc = (size_t)N + 2;
    float *a = malloc(sizeof(float) * lda * (size_t)(a_transposed ? K : M));
    float *b = malloc(sizeof(float) * ldb * (size_t)K);
    float *c0 = malloc(sizeof(float) * ldc * (size_t)M), *c_tiled = malloc(sizeof(float) * ldc * (size_t)M);
    float *c_rows = malloc(sizeof(float) * ldc * (size_t)M), *c_cols = malloc(sizeof(float) * ldc * (size_t)M);
    unsigned seed = (unsigned)(M * 131 + N * 17 + K);
    for (size_t i = 0; i < lda * (size_t)(a_transposed ? K : M); i++) a[i] = frand(&seed);
    for (size_t i = 0; i < ldb * (size_t)K; i++) b[i] = frand(&seed);
    for (size_t i = 0; i < ldc * (size_t)M; i++) c0[i] = frand(&seed);
    memcpy(c_tiled, c0, sizeof(float) * ldc * (size_t)M);
    memcpy(c_rows, c0, sizeof(float) * ldc * (size_t)M);
    memcpy(c_cols, c0, sizeof(float) * ldc * (size_t)M);
    gemm_by_tiles(gemm, c_tiled, ldc, M, N, a, ars, aks, b, ldb, k0, K, fresh, scale, GEMM_MR);
    gemm_by_tiles(gemm, c_rows, ldc, M, N, a, ars, aks, b, ldb, k0, K, fresh, scale, 1);
    for (int j = 0; j < N; j++) /* each column alone: the one-element path */
        gemm_by_tiles(gemm, c_cols + j, ldc, M, 1, a, ars, aks, b + j, ldb, k0, K, fresh, scale, GEMM_MR);
    double worst = 0.0;
    int differ = 0;
    for (int r = 0; r < M; r++) {
        for (int j = 0; j < N; j++) {
            double want = fresh ? 0.0 : c0[(size_t)r * ldc + j], mag = fabs(want);
            for (int k = k0; k < K; k++) {
                double t = (double)a[r * ars + k * aks] * b[(size_t)k * ldb + j];
                want += t, mag += fabs(t);
            }
            want *= scale, mag *= fabs(scale);
            double err = fabs(c_tiled[(size_t)r * ldc + j] - want) / (mag > 0 ? mag : 1.0);
            if (err > worst) worst = err;
            differ += memcmp(&c_tiled[(size_t)r * ldc + j], &c_rows[(size_t)r * ldc + j], sizeof(float)) != 0;
            differ += memcmp(&c_tiled[(size_t)r * ldc + j], &c_cols[(size_t)r * ldc + j], sizeof(float)) != 0;
        }
        /* the padding past N is not written */
        for (size_t j = (size_t)N; j < ldc; j++)
            CHECK(c_tiled[(size_t)r * ldc + j] == c0[(size_t)r * ldc + j], "gemm %dx%dx%d wrote past column %d", M, N,
                  K, N);
    }
    const char *which = gemm == gemm_baseline ? "baseline" : "as run";
    CHECK(worst <= 1e-5, "gemm %s %dx%dx%d (k from %d, a %s, %s, scale %g): rel err %.2e", which, M, N, K, k0,
          a_transposed ? "transposed" : "row-major", fresh ? "fresh" : "accumulating", scale, worst);
    CHECK(differ == 0, "gemm %s %dx%dx%d: %d elements differ between %d-row tiles and single rows or columns", which, M,
          N, K, differ, GEMM_MR);
    free(a), free(b), free(c0), free(c_tiled), free(c_rows), free(c_cols);
}

#ifdef GEMM_HAVE_V16
/* The AVX-512 tiles against the x86-64-v3 clone's: every element the same
 * bits, on the same odd sizes; returns 1 when checked. */
static int test_v16_same_bits(int M, int N, int K, int k0, bool a_transposed, bool fresh, float scale) {
    const size_t lda = a_transposed ? (size_t)M + 3 : (size_t)K + 5;
    const size_t ars = a_transposed ? 1 : lda, aks = a_transposed ? lda : 1;
    const size_t ldb = (size_t)N + 7, ldc = (size_t)N + 2;
    const size_t na = lda * (size_t)(a_transposed ? K : M), nb = ldb * (size_t)K, nc = ldc * (size_t)M;
    float *a = malloc(sizeof(float) * na), *b = malloc(sizeof(float) * nb);
    float *c16 = malloc(sizeof(float) * nc), *c8 = malloc(sizeof(float) * nc);
    unsigned seed = (unsigned)(M * 7 + N * 13 + K * 3);
    for (size_t i = 0; i < na; i++) a[i] = frand(&seed);
    for (size_t i = 0; i < nb; i++) b[i] = frand(&seed);
    for (size_t i = 0; i < nc; i++) c16[i] = c8[i] = frand(&seed);
    gemm_by_tiles(gemm_rows_v16, c16, ldc, M, N, a, ars, aks, b, ldb, k0, K, fresh, scale, GEMM_MR);
    gemm_by_tiles(gemm_rows_v3, c8, ldc, M, N, a, ars, aks, b, ldb, k0, K, fresh, scale, GEMM_MR);
    CHECK(memcmp(c16, c8, sizeof(float) * nc) == 0, "gemm %dx%dx%d (k from %d): AVX-512 and AVX2 tiles differ", M, N, K,
          k0);
    free(a), free(b), free(c16), free(c8);
    return 1;
}
#endif

int main(void) {
    int64_t run = exp_max_ulps(exp_as_run, "as run"), base = exp_max_ulps(exp_baseline, "baseline");
    CHECK(run <= 2, "v8_exp as run: %lld ulp from expf", (long long)run);
    CHECK(base <= 2, "v8_exp baseline: %lld ulp from expf", (long long)base);
    test_exp_edges(exp_as_run, "as run");
    test_exp_edges(exp_baseline, "baseline");
    test_max_row();

    const int rows[] = {1, 5, 37}, cols[] = {1, 7, 8, 15, 16, 17, 33, 64, 75}, ks[] = {1, 3, 64, 70};
    int cases = 0;
    for (size_t ri = 0; ri < sizeof rows / sizeof *rows; ri++)
        for (size_t ci = 0; ci < sizeof cols / sizeof *cols; ci++)
            for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++)
                for (int variant = 0; variant < 4; variant++) {
                    const int K = ks[ki], k0 = (variant & 1) && K > 2 ? K / 3 : 0;
                    for (int baseline = 0; baseline < 2; baseline++, cases++)
                        test_gemm(baseline ? gemm_baseline : gemm_rows, rows[ri], cols[ci], K, k0, variant & 2,
                                  variant == 0, variant == 3 ? 0.125f : 1.0f);
                }
    printf(
        "  gemm_rows: %d cases (as run and baseline) against a double triple loop, bit-identical by tile, by row and by column\n",
        cases);
    int wide = 0;
#ifdef GEMM_HAVE_V16
    const int cols16[] = {1, 15, 16, 17, 31, 32, 33, 48, 64, 75, 97};
    if (gemm_cpu_level() >= 4)
        for (size_t ri = 0; ri < sizeof rows / sizeof *rows; ri++)
            for (size_t ci = 0; ci < sizeof cols16 / sizeof *cols16; ci++)
                for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++)
                    for (int variant = 0; variant < 4; variant++) {
                        const int K = ks[ki], k0 = (variant & 1) && K > 2 ? K / 3 : 0;
                        wide += test_v16_same_bits(rows[ri], cols16[ci], K, k0, variant & 2, variant == 0,
                                                   variant == 3 ? 0.125f : 1.0f);
                    }
#endif
    if (wide) printf("  gemm_rows: %d cases, AVX-512 tiles bit-identical to the AVX2 kernel's\n", wide);
    else printf("  gemm_rows: this CPU has no AVX-512: its tiles not run here\n");
    if (failures) {
        fprintf(stderr, "test_attention_kernels: %d checks failed\n", failures);
        return 1;
    }
    printf("test_attention_kernels: all checks passed\n");
    return 0;
}
