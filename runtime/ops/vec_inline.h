/* Small vector helpers the ops share, inlined into their inner loops. */
#ifndef TLM_VEC_INLINE_H
#define TLM_VEC_INLINE_H

#include <math.h>

static inline float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

static inline float dot(const float *a, const float *b, int n) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* y += a x */
static inline void axpy(float *y, float a, const float *x, int n) {
#pragma omp simd
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}

#endif
