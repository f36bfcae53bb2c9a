/* How far a decoded row of logits (the KV cache's) is from the full
 * forward's, as a share of model.kv_cache's bound: per element
 * 1e-5 |want| + floor max|want row|. Shared by tests/model/test_kv_cache.c
 * and bench/decode_bench.c, so the bench checks what the test does. */
#ifndef TLM_TEST_KV_BOUND_H
#define TLM_TEST_KV_BOUND_H

#include <math.h>
#include <stdint.h>

#define KV_BOUND_REL 1e-5

/* The worst |got - want| / bound over one row of V logits; above 1 fails. */
static inline double kv_row_ratio(const float *got, const float *want, int64_t V, double floor) {
    double scale = 0, worst = 0;
    for (int64_t i = 0; i < V; i++) scale = fmax(scale, fabs((double)want[i]));
    for (int64_t i = 0; i < V; i++) {
        double r = fabs((double)got[i] - want[i]) / (KV_BOUND_REL * fabs((double)want[i]) + floor * scale);
        if (!(r <= worst)) worst = r;
    }
    return worst;
}

#endif
