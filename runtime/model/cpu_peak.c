#include "cpu_peak.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* Twelve independent chains: a core keeps latency x FMA pipes of them in
 * flight (4 x 2 on the x86 cores measured), so twelve leave the pipes, not
 * the chains' latency, as the limit. The multiplier just under 1 and the
 * small addend keep the values finite and normal for any count. The chains
 * start from a volatile read: with constant starts clang 19 ran one chain
 * fewer (eleven multiply-adds a step, counted as twelve), and a clang build
 * reported a peak 12/11 too high (43.9 against gcc's 40.2 GFLOP/s). */
enum { CHAINS = 12, STEPS = 1 << 22 };

static double seconds(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* run_avx2 and run_avx512: one timed run of the chains at that width. */
#define FMA_RUN(name, isa, vec, set1, fma, add, first)                                            \
    __attribute__((target(isa))) static double name(clockid_t clock, float *sink) {               \
        volatile float opaque = 0.0f; /* starts the compiler cannot see: see above */             \
        const float z = opaque;                                                                   \
        vec m = set1(0.999f), c = set1(1e-3f);                                                    \
        vec a0 = set1(z), a1 = set1(z + 1), a2 = set1(z + 2), a3 = set1(z + 3), a4 = set1(z + 4); \
        vec a5 = set1(z + 5), a6 = set1(z + 6), a7 = set1(z + 7), a8 = set1(z + 8);               \
        vec a9 = set1(z + 9), a10 = set1(z + 10), a11 = set1(z + 11);                             \
        double t0 = seconds(clock);                                                               \
        for (long i = 0; i < STEPS; i++) {                                                        \
            a0 = fma(a0, m, c), a1 = fma(a1, m, c), a2 = fma(a2, m, c), a3 = fma(a3, m, c);       \
            a4 = fma(a4, m, c), a5 = fma(a5, m, c), a6 = fma(a6, m, c), a7 = fma(a7, m, c);       \
            a8 = fma(a8, m, c), a9 = fma(a9, m, c), a10 = fma(a10, m, c), a11 = fma(a11, m, c);   \
        }                                                                                         \
        double t = seconds(clock) - t0;                                                           \
        vec s = add(add(add(a0, a1), add(a2, a3)), add(add(a4, a5), add(a6, a7)));                \
        s = add(s, add(add(a8, a9), add(a10, a11)));                                              \
        *sink += first(s); /* keeps the chains live */                                            \
        return t;                                                                                 \
    }

FMA_RUN(run_avx2, "avx2,fma", __m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, _mm256_cvtss_f32)
FMA_RUN(run_avx512, "avx512f", __m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, _mm512_cvtss_f32)

static int runs_width(int lanes) {
    __builtin_cpu_init();
    if (lanes == 16) return __builtin_cpu_supports("avx512f");
    return lanes == 8 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

int tlm_cpu_fma_lanes(void) { return runs_width(16) ? 16 : runs_width(8) ? 8 : 0; }

/* One thread's best of reps, in GFLOP/s. */
static double one_thread(int lanes, clockid_t clock, int reps) {
    float sink = 0;
    double best = 1e30;
    for (int r = 0; r < reps + 1; r++) { /* the first warms the core up */
        double t = lanes == 16 ? run_avx512(clock, &sink) : run_avx2(clock, &sink);
        if (r > 0 && t < best) best = t;
    }
    volatile float keep = sink;
    (void)keep;
    return 2.0 * lanes * CHAINS * (double)STEPS / best * 1e-9;
}

double tlm_cpu_fma_peak_gflops(int lanes, int threads, clockid_t clock, int reps) {
    if (!runs_width(lanes)) return 0;
    if (threads < 1) threads = 1;
    double total = 0;
#pragma omp parallel for num_threads(threads) reduction(+ : total) schedule(static, 1)
    for (int i = 0; i < threads; i++) total += one_thread(lanes, clock, reps);
    return total;
}

#else
int tlm_cpu_fma_lanes(void) { return 0; }
double tlm_cpu_fma_peak_gflops(int lanes, int threads, clockid_t clock, int reps) {
    (void)lanes, (void)threads, (void)clock, (void)reps;
    return 0;
}
#endif
