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
 * kernels run it (exp_as_run: the CPU's build) and as the baseline build
 * does (exp_as_run_base). */
V8_KERNEL(exp_as_run, (float *out, const float *in, int n, float sub), (out, in, n, sub)) {
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
V8_KERNEL(max_into, (float *max, const float *p, int n, float init), (max, p, n, init)) {
    *max = v8_max_row(p, n, init);
}
static float max_as_run(const float *p, int n, float init) {
    float max;
    max_into(&max, p, n, init);
    return max;
}

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

/* gemm_rows as attention.c runs it is the widest kernel the CPU has (AVX-512, AVX2 + FMA or the baseline);
 * gemm_rows_base is the baseline build's kernel (no FMA, twice the registers per vector). */

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

/* One case: C (M x N) = scale * (C0 + A B) over k in [k0, K), A
 * row-major or transposed, C fresh or accumulating. */
typedef struct {
    int M, N, K, k0;
    bool a_transposed, fresh;
    float scale;
} gemm_case;

/* A case's operands, random in [-1, 1], every row padded: a (lda), b
 * (ldb) and the starting C, c0 (ldc, nc floats). */
typedef struct {
    size_t lda, ars, aks, ldb, ldc, nc;
    float *a, *b, *c0;
} gemm_inputs;

static gemm_inputs inputs_of(const gemm_case *t, unsigned seed) {
    gemm_inputs in;
    in.lda = t->a_transposed ? (size_t)t->M + 3 : (size_t)t->K + 5;
    in.ars = t->a_transposed ? 1 : in.lda, in.aks = t->a_transposed ? in.lda : 1;
    in.ldb = (size_t)t->N + 7, in.ldc = (size_t)t->N + 2, in.nc = in.ldc * (size_t)t->M;
    const size_t na = in.lda * (size_t)(t->a_transposed ? t->K : t->M), nb = in.ldb * (size_t)t->K;
    in.a = malloc(sizeof(float) * na), in.b = malloc(sizeof(float) * nb), in.c0 = malloc(sizeof(float) * in.nc);
    for (size_t i = 0; i < na; i++) in.a[i] = frand(&seed);
    for (size_t i = 0; i < nb; i++) in.b[i] = frand(&seed);
    for (size_t i = 0; i < in.nc; i++) in.c0[i] = frand(&seed);
    return in;
}

static void inputs_free(gemm_inputs *in) { free(in->a), free(in->b), free(in->c0); }

/* A copy of the starting C, for a kernel to work on. */
static float *c_from(const gemm_inputs *in) {
    float *c = malloc(sizeof(float) * in->nc);
    memcpy(c, in->c0, sizeof(float) * in->nc);
    return c;
}

/* The case by `gemm`, mr_max rows a tile, into c (the columns from j0 at
 * N columns of b and c). */
static void run_case(gemm_fn *gemm, const gemm_case *t, const gemm_inputs *in, float *c, int N, int j0, int mr_max) {
    gemm_by_tiles(gemm, c + j0, in->ldc, t->M, N, in->a, in->ars, in->aks, in->b + j0, in->ldb, t->k0, t->K, t->fresh,
                  t->scale, mr_max);
}

static void test_gemm(gemm_fn *gemm, const gemm_case *t) {
    const int M = t->M, N = t->N, K = t->K, k0 = t->k0;
    gemm_inputs in = inputs_of(t, (unsigned)(M * 131 + N * 17 + K));
    const size_t ars = in.ars, aks = in.aks, ldb = in.ldb, ldc = in.ldc;
    const float *a = in.a, *b = in.b, *c0 = in.c0;
    float *c_tiled = c_from(&in), *c_rows = c_from(&in), *c_cols = c_from(&in);
    run_case(gemm, t, &in, c_tiled, N, 0, GEMM_MR);
    run_case(gemm, t, &in, c_rows, N, 0, 1);
    for (int j = 0; j < N; j++)
        run_case(gemm, t, &in, c_cols, 1, j, GEMM_MR); /* each column alone: the one-element path */
    double worst = 0.0;
    int differ = 0;
    for (int r = 0; r < M; r++) {
        for (int j = 0; j < N; j++) {
            double want = t->fresh ? 0.0 : c0[(size_t)r * ldc + j], mag = fabs(want);
            for (int k = k0; k < K; k++) {
                double p = (double)a[r * ars + k * aks] * b[(size_t)k * ldb + j];
                want += p, mag += fabs(p);
            }
            want *= t->scale, mag *= fabs(t->scale);
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
    const char *which = gemm == gemm_rows_base ? "baseline" : "as run";
    CHECK(worst <= 1e-5, "gemm %s %dx%dx%d (k from %d, a %s, %s, scale %g): rel err %.2e", which, M, N, K, k0,
          t->a_transposed ? "transposed" : "row-major", t->fresh ? "fresh" : "accumulating", t->scale, worst);
    CHECK(differ == 0, "gemm %s %dx%dx%d: %d elements differ between %d-row tiles and single rows or columns", which, M,
          N, K, differ, GEMM_MR);
    free(c_tiled), free(c_rows), free(c_cols);
    inputs_free(&in);
}

/* The kernel as run and the baseline build's, each against the double
 * triple loop and across tile shapes. */
static void test_as_run_and_baseline(const gemm_case *t) {
    test_gemm(gemm_rows, t);
    test_gemm(gemm_rows_base, t);
}

#ifdef GEMM_HAVE_V16
/* The AVX-512 tiles against the AVX2 kernel's: every element the same
 * bits. */
static void test_v16_same_bits(const gemm_case *t) {
    gemm_inputs in = inputs_of(t, (unsigned)(t->M * 7 + t->N * 13 + t->K * 3));
    float *c16 = c_from(&in), *c8 = c_from(&in);
    run_case(gemm_rows_v16, t, &in, c16, t->N, 0, GEMM_MR);
    run_case(gemm_rows_v3, t, &in, c8, t->N, 0, GEMM_MR);
    CHECK(memcmp(c16, c8, sizeof(float) * in.nc) == 0, "gemm %dx%dx%d (k from %d): AVX-512 and AVX2 tiles differ", t->M,
          t->N, t->K, t->k0);
    free(c16), free(c8);
    inputs_free(&in);
}
#endif

/* fn on every case of rows 1, 5 and 37, the columns given, depths 1, 3,
 * 64 and 70, and four variants (0: C fresh; 1: k from K / 3; 2: a
 * transposed; 3: both, scaled by 1/8; all but 0 accumulate into C);
 * returns how many cases. */
static int each_case(const int *cols, size_t ncols, void (*fn)(const gemm_case *)) {
    const int rows[] = {1, 5, 37}, ks[] = {1, 3, 64, 70};
    int cases = 0;
    for (size_t ri = 0; ri < sizeof rows / sizeof *rows; ri++)
        for (size_t ci = 0; ci < ncols; ci++)
            for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++)
                for (int variant = 0; variant < 4; variant++, cases++) {
                    const int K = ks[ki];
                    gemm_case t = {.M = rows[ri], .N = cols[ci], .K = K};
                    t.k0 = (variant & 1) && K > 2 ? K / 3 : 0;
                    t.a_transposed = variant & 2, t.fresh = variant == 0;
                    t.scale = variant == 3 ? 0.125f : 1.0f;
                    fn(&t);
                }
    return cases;
}

int main(void) {
    int64_t run = exp_max_ulps(exp_as_run, "as run"), base = exp_max_ulps(exp_as_run_base, "baseline");
    CHECK(run <= 2, "v8_exp as run: %lld ulp from expf", (long long)run);
    CHECK(base <= 2, "v8_exp baseline: %lld ulp from expf", (long long)base);
    test_exp_edges(exp_as_run, "as run");
    test_exp_edges(exp_as_run_base, "baseline");
    test_max_row();

    const int cols[] = {1, 7, 8, 15, 16, 17, 33, 64, 75};
    int cases = 2 * each_case(cols, sizeof cols / sizeof *cols, test_as_run_and_baseline);
    printf(
        "  gemm_rows: %d cases (as run and baseline) against a double triple loop, bit-identical by tile, by row and by column\n",
        cases);
    int wide = 0;
#ifdef GEMM_HAVE_V16
    const int cols16[] = {1, 15, 16, 17, 31, 32, 33, 48, 64, 75, 97};
    if (v8_cpu_level() >= 4) wide = each_case(cols16, sizeof cols16 / sizeof *cols16, test_v16_same_bits);
#endif
    if (wide) printf("  gemm_rows: %d cases, AVX-512 tiles bit-identical to the AVX2 kernel's\n", wide);
    else printf("  gemm_rows: no AVX-512 tiles run here (a CPU without AVX-512, or an unoptimised build)\n");
    if (failures) {
        fprintf(stderr, "test_attention_kernels: %d checks failed\n", failures);
        return 1;
    }
    printf("test_attention_kernels: all checks passed\n");
    return 0;
}
