/* Helpers shared by the whole-model tests: open a compiled model.so,
 * create the in-memory model, give it parameters that exercise every term
 * of the gradient, and draw fixed batches. Header-only (static functions),
 * so each test is one C file. */
#ifndef TLM_TEST_MODEL_UTIL_H
#define TLM_TEST_MODEL_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "model.h"
#include "test_util.h"   /* CHECK and its failure count, shared with the runtime tests */
#include "tlm_rt/rng.h"

static inline void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fprintf(stderr, "test: out of memory\n");
        exit(2);
    }
    return p;
}

/* Opens path or exits with the reason. */
static inline void open_so(const char *path, tlm_so *so) {
    tlm_err err = {""};
    if (!tlm_so_open(path, so, &err)) {
        fprintf(stderr, "cannot open %s: %s\n", path, err.msg);
        exit(2);
    }
}

/* The device the GPU tests run on (the emulated one under
 * TLM_TEST_DEVICE=emulated, which ctest sets), or exits failing. */
static inline tlm_device *open_test_device(void) {
    tlm_err err = {""};
    tlm_device *dev = tlm_device_open("cuda", &err);
    if (!dev) {
        printf("FAIL: cannot open the device: %s\n", err.msg);
        exit(1);
    }
    return dev;
}

static inline void create_model(tlm_model *m, const tlm_so *so, int64_t B, int64_t T, bool training) {
    tlm_err err = {""};
    if (!tlm_model_create(m, so, B, T, training, 0, &err)) {
        fprintf(stderr, "cannot create the model (B %lld, T %lld): %s\n", (long long)B, (long long)T, err.msg);
        exit(2);
    }
}

/* The parameters the checks use: tlm_model_init_params(seed), then every
 * normally initialised tensor multiplied by `scale` (the default std 0.02
 * leaves attention almost uniform and the MLPs almost linear, which would
 * hide errors in those terms) and every tensor initialised to ones (the
 * norms) set to 1 + uniform(-noise, noise) from a second generator, so a
 * gradient that confuses w with 1 shows. */
static inline void init_test_params(tlm_model *m, uint64_t seed, double scale, double norm_noise) {
    tlm_model_init_params(m, seed);
    tlm_rng rng;
    tlm_rng_seed(&rng, seed ^ 0x9e3779b97f4a7c15ull);
    for (uint32_t i = 0; i < m->so->header->nparams; i++) {
        const tlm_abi_param *p = &m->so->params[i];
        float *w = tlm_model_param(m, (int)i);
        if (p->init == TLM_INIT_NORMAL)
            for (int64_t k = 0; k < p->count; k++) w[k] = (float)(w[k] * scale);
        else if (p->init == TLM_INIT_ONES)
            for (int64_t k = 0; k < p->count; k++)
                w[k] = (float)(1.0 + norm_noise * (2.0 * tlm_rng_uniform(&rng) - 1.0));
    }
}

/* B sequences of T + 1 tokens: tokens are the first T, targets the last T
 * (next-token prediction). With ignore > 0, that many targets (at random
 * positions) are -1, which the loss skips. */
static inline void draw_batch(tlm_rng *rng, int64_t V, int64_t B, int64_t T, int ignore, int32_t *tokens,
                              int32_t *targets) {
    for (int64_t b = 0; b < B; b++) {
        int32_t prev = (int32_t)tlm_rng_below(rng, (uint64_t)V);
        for (int64_t t = 0; t < T; t++) {
            int32_t next = (int32_t)tlm_rng_below(rng, (uint64_t)V);
            tokens[b * T + t] = prev;
            targets[b * T + t] = next;
            prev = next;
        }
    }
    for (int i = 0; i < ignore; i++) targets[tlm_rng_below(rng, (uint64_t)(B * T))] = -1;
}

#endif
