/* tile_bench: how close a register tile of the generated MLP kernels'
 * shape can come to the core's multiply-add peak, with nothing else
 * around it: an intrinsics copy of the tile's k loop (AVX2: 6 rows x 16
 * columns, per k step 2 vector loads of B, 6 broadcasts of A, 12 fused
 * multiply-adds; AVX-512: 12 x 32, 2 loads, 12 broadcasts, 24) over
 * packed panels of depth 256, next to the peak (runtime/model/cpu_peak.c)
 * measured in the same run. One thread. Not a test.
 *
 *   tile_bench [--reps N] [--panels P]
 *
 * --panels P walks P packed A panels in turn: 1 keeps A in L1 on AVX2 (6
 * KiB of A and 16 KiB of B; on AVX-512 12 and 32 KiB, past a 32 KiB L1);
 * the default, 384 / MR panels, is the kernels' packed MC x KC block of
 * 384 KiB, from L2. If the
 * tile reaches the peak here but the kernels' entries do not, what is
 * missing is the work around the tile (packing, the activation, C's loads
 * and stores): docs/performance.md, "where the gap is". */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_args.h"
#include "cpu_peak.h"

enum { KC = 256 };

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* tile_avx2 and tile_avx512: c (8 floats) = the sum of the tile's
 * accumulators, so that none is dead. The accumulators are named
 * variables, one per register as in the generated tile (gcc keeps an array
 * of them in memory): ROWS(X, ...) expands X once per row. */
#define ROWS6(X, ...) \
    X(0, __VA_ARGS__) X(1, __VA_ARGS__) X(2, __VA_ARGS__) X(3, __VA_ARGS__) X(4, __VA_ARGS__) X(5, __VA_ARGS__)
#define ROWS12(X, ...)    \
    ROWS6(X, __VA_ARGS__) \
    X(6, __VA_ARGS__) X(7, __VA_ARGS__) X(8, __VA_ARGS__) X(9, __VA_ARGS__) X(10, __VA_ARGS__) X(11, __VA_ARGS__)
#define DECLARE(i, vec, zero) vec c##i##0 = zero(), c##i##1 = c##i##0;
#define TERM(i, vec, set1, fma, mr)            \
    {                                          \
        const vec x = set1(a[(mr) * k + (i)]); \
        c##i##0 = fma(x, b0, c##i##0);         \
        c##i##1 = fma(x, b1, c##i##1);         \
    }
#define SUM(i, add) s = add(s, add(c##i##0, c##i##1));
#define TILE_FN(name, isa, vec, lanes, ROWS, mr, zero, load, set1, fma, add, storeu)                    \
    __attribute__((target(isa), noinline)) static void name(const float *a, const float *b, float *c) { \
        ROWS(DECLARE, vec, zero)                                                                        \
        for (int k = 0; k < KC; k++) {                                                                  \
            const vec b0 = load(b + 2 * (lanes) * k), b1 = load(b + 2 * (lanes) * k + (lanes));         \
            ROWS(TERM, vec, set1, fma, mr)                                                              \
        }                                                                                               \
        vec s = zero();                                                                                 \
        ROWS(SUM, add)                                                                                  \
        float out[lanes];                                                                               \
        storeu(out, s);                                                                                 \
        memcpy(c, out, 8 * sizeof(float));                                                              \
    }

TILE_FN(tile_avx2, "avx2,fma", __m256, 8, ROWS6, 6, _mm256_setzero_ps, _mm256_load_ps, _mm256_set1_ps, _mm256_fmadd_ps,
        _mm256_add_ps, _mm256_storeu_ps)
/* avx512vl too: with avx512f alone clang 19 left 9 of the 24 accumulators
 * in memory (it did not use zmm16-31). */
TILE_FN(tile_avx512, "avx512f,avx512vl", __m512, 16, ROWS12, 12, _mm512_setzero_ps, _mm512_load_ps, _mm512_set1_ps,
        _mm512_fmadd_ps, _mm512_add_ps, _mm512_storeu_ps)

/* GFLOP/s of the tile (mr rows x nr columns), best of reps runs. */
static double run(int lanes, int panels, int reps, float *sink) {
    const int mr = lanes == 16 ? 12 : 6, nr = 2 * lanes;
    float *a = aligned_alloc(64, sizeof(float) * (size_t)mr * KC * (size_t)panels);
    float *b = aligned_alloc(64, sizeof(float) * (size_t)nr * KC);
    if (!a || !b) {
        fprintf(stderr, "tile_bench: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < (size_t)mr * KC * (size_t)panels; i++) a[i] = 1e-3f * (float)(i % 7);
    for (size_t i = 0; i < (size_t)nr * KC; i++) b[i] = 1e-3f * (float)(i % 5);
    const long calls = 20000;
    double best = 1e30;
    float c[8];
    for (int r = 0; r < reps + 1; r++) { /* the first warms up */
        double t0 = now_s();
        for (long i = 0; i < calls; i++) {
            const float *ap = a + (size_t)mr * KC * (size_t)(i % panels);
            if (lanes == 16) tile_avx512(ap, b, c);
            else tile_avx2(ap, b, c);
        }
        double t = now_s() - t0;
        if (r > 0 && t < best) best = t;
        *sink += c[0];
    }
    free(a);
    free(b);
    return 2.0 * mr * nr * KC * (double)calls / best * 1e-9;
}

/* The value of --reps or --panels, or -1 when it is not a whole number up
 * to `hi` (atoi took "abc" for 0, which for --panels quietly meant the
 * default; 10,000 12-row panels are 123 MB, past any L3). */
static int count_arg(const char *text, long hi) {
    int v;
    return bench_whole(text, 0, hi, &v) ? v : -1;
}

int main(int argc, char **argv) {
    int reps = 5, panels = 0; /* 0: 384 / MR */
    static const char usage[] = "usage: tile_bench [--reps N] [--panels P]\n";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(usage, stdout);
            return 0;
        }
        if (i + 1 < argc && !strcmp(argv[i], "--reps")) reps = count_arg(argv[++i], 1000000);
        else if (i + 1 < argc && !strcmp(argv[i], "--panels")) panels = count_arg(argv[++i], 10000);
        else {
            fputs(usage, stderr);
            return 2;
        }
    }
    if (reps < 1 || panels < 0) {
        fprintf(
            stderr,
            "tile_bench: --reps takes a count from 1 and --panels one from 0 (the default), at most 1000000 and 10000\n");
        return 2;
    }
    float sink = 0;
    __builtin_cpu_init();
    for (int lanes = 8; lanes <= 16; lanes *= 2) {
        if (lanes == 8 && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) {
            printf("skip 8-float vectors: this CPU lacks AVX2/FMA\n");
            continue;
        }
        if (lanes == 16 && !(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl"))) {
            printf("skip 16-float vectors: this CPU lacks AVX-512 (F and VL)\n");
            continue;
        }
        const int mr = lanes == 16 ? 12 : 6, np = panels ? panels : 384 / mr;
        double peak = tlm_cpu_fma_peak_gflops(lanes, 1, CLOCK_MONOTONIC, reps);
        double tile = run(lanes, np, reps, &sink);
        double peak2 = tlm_cpu_fma_peak_gflops(lanes, 1, CLOCK_MONOTONIC, reps);
        if (peak2 > peak) peak = peak2;
        printf("%d-float vectors: %d x %d tile, depth %d, %d A panel%s: %.1f GFLOP/s; multiply-add peak %.1f "
               "(best of before and after); tile / peak %.3f\n",
               lanes, mr, 2 * lanes, KC, np, np > 1 ? "s" : "", tile, peak, tile / peak);
    }
    volatile float keep = sink;
    (void)keep;
    return 0;
}
