/* Small helpers shared by the runtime tests: checks that count failures,
 * random fills, buffers that abort the test (not the library) on OOM. */
#ifndef TLM_TEST_UTIL_H
#define TLM_TEST_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tlm_rt/cpu_level.h"
#include "tlm_rt/rt.h"
#ifdef _OPENMP
#include <omp.h>
#endif

static int g_failures = 0;

#define CHECK(cond, ...)                                           \
    do {                                                           \
        if (!(cond)) {                                             \
            printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            printf(__VA_ARGS__);                                   \
            printf("\n");                                          \
            g_failures++;                                          \
        }                                                          \
    } while (0)

static inline int test_finish(const char *name) {
    if (g_failures) {
        printf("%s: %d failure(s)\n", name, g_failures);
        return 1;
    }
    printf("%s: all checks passed\n", name);
    return 0;
}

/* Fails the test where OpenMP gives a team of fewer than n threads
 * (OMP_THREAD_LIMIT, OMP_DYNAMIC): its checks at n threads ran on fewer.
 * Leaves the thread count as it was. */
static inline void check_team_of(int n) {
#ifdef _OPENMP
    int was = omp_get_max_threads(), team = 0;
    omp_set_num_threads(n);
#pragma omp parallel
#pragma omp master
    team = omp_get_num_threads();
    omp_set_num_threads(was);
    CHECK(team == n, "OpenMP gave %d threads where %d were asked for: the checks at %d threads ran on fewer", team, n,
          n);
#else
    (void)n;
#endif
}

/* Says which build of the kernels runs (TLM_CPU_CAPABILITY lowers it): the
 * first line of a test that ctest runs at each CPU level. */
static inline void test_say_cpu_level(void) {
    char level[128];
    tlm_cpu_level_describe(level, sizeof level);
    printf("the runtime's kernels at %s\n", level);
}

static inline float *falloc(size_t n) {
    float *p = calloc(n ? n : 1, sizeof(float));
    if (!p) {
        fprintf(stderr, "test: out of memory\n");
        exit(2);
    }
    return p;
}

static inline void fill_uniform(tlm_rng *r, float *x, size_t n, float lo, float hi) {
    tlm_rng_fill_uniform(r, x, n, lo, hi);
}

static inline void fill_const(float *x, size_t n, float v) {
    for (size_t i = 0; i < n; i++) x[i] = v;
}

/* sum_i a_i b_i in double */
static inline double dot_d(const float *a, const float *b, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

static inline double max_abs(const float *a, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i]));
    return m;
}

/* max |a - b| / max |b|: a relative error that ignores entries near zero */
static inline double rel_err(const float *a, const float *b, size_t n) {
    double d = 0.0;
    for (size_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
    double s = max_abs(b, n);
    return d / (s > 0 ? s : 1.0);
}

#endif
