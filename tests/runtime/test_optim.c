/* Optimiser, clipping and schedule properties checkable without PyTorch
 * (tests/reference/check_optim.py compares the numbers with torch). */
#include "test_util.h"

#ifdef _OPENMP
#include <omp.h>
#endif

static void test_schedule(void) {
    tlm_lr_schedule s = {TLM_LR_COSINE, 1.0f, 0.1f, 4, 14};
    CHECK(tlm_lr_at(&s, 0) == 0.25f, "warm-up step 0: %g", tlm_lr_at(&s, 0));
    CHECK(tlm_lr_at(&s, 3) == 1.0f, "end of warm-up");
    CHECK(tlm_lr_at(&s, 4) == 1.0f, "decay starts at max");
    CHECK(fabsf(tlm_lr_at(&s, 9) - 0.55f) < 1e-6f, "cosine midpoint %g", tlm_lr_at(&s, 9));
    CHECK(tlm_lr_at(&s, 13) > 0.1f && tlm_lr_at(&s, 13) < 0.13f, "near the end");
    CHECK(tlm_lr_at(&s, 14) == 0.1f && tlm_lr_at(&s, 1000) == 0.1f, "after total: min_lr");
    s.kind = TLM_LR_LINEAR;
    CHECK(fabsf(tlm_lr_at(&s, 9) - 0.55f) < 1e-6f, "linear midpoint");
    CHECK(fabsf(tlm_lr_at(&s, 6) - 0.82f) < 1e-6f, "linear at 1/5: %g", tlm_lr_at(&s, 6));
    s.kind = TLM_LR_CONSTANT;
    CHECK(tlm_lr_at(&s, 1) == 0.5f && tlm_lr_at(&s, 100) == 1.0f, "constant");
    tlm_lr_schedule nw = {TLM_LR_COSINE, 2.0f, 0.0f, 0, 10};
    CHECK(tlm_lr_at(&nw, 0) == 2.0f && tlm_lr_at(&nw, 5) == 1.0f, "no warm-up");
    bool mono = true;
    for (long i = 4; i < 20; i++) mono &= tlm_lr_at(&s, i + 1) <= tlm_lr_at(&s, i);
    CHECK(mono, "decay not monotone");
}

static void test_clip(void) {
    float g[2] = {3.0f, 4.0f};
    double n = tlm_clip_grad_norm(g, 2, 1.0f);
    CHECK(n == 5.0, "norm %g", n);
    CHECK(fabsf(g[0] - 0.6f) < 1e-6f && fabsf(g[1] - 0.8f) < 1e-6f, "clipped %g %g", g[0], g[1]);
    float h[2] = {0.3f, 0.4f};
    tlm_clip_grad_norm(h, 2, 1.0f);
    CHECK(h[0] == 0.3f && h[1] == 0.4f, "below the bound: untouched");
    float k[2] = {30.0f, 40.0f};
    tlm_clip_grad_norm(k, 2, 0.0f);
    CHECK(k[0] == 30.0f, "max_norm 0: no clipping");
    /* a long vector: accurate, and the same bits for 1 and 2 threads */
    size_t N = 3000001;
    float *x = falloc(N);
    tlm_rng r;
    tlm_rng_seed(&r, 3);
    tlm_rng_fill_normal(&r, x, N, 0.0f, 1.0f);
    long double ref = 0;
    for (size_t i = 0; i < N; i++) ref += (long double)x[i] * x[i];
    double n1 = tlm_grad_norm(x, N);
    double exact = (double)sqrtl(ref);
    CHECK(fabs(n1 - exact) / n1 < 1e-12, "norm accuracy %.3e", fabs(n1 - exact) / n1);
#ifdef _OPENMP
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    double a = tlm_grad_norm(x, N);
    omp_set_num_threads(2);
    double b = tlm_grad_norm(x, N);
    omp_set_num_threads(threads);
    CHECK(a == b && a == n1, "norm depends on the thread count");
#endif
    /* short and odd lengths: chunks shorter than the eight running sums,
     * empty chunks, tails of every length */
    for (size_t n = 1; n <= 1100; n += n < 80 ? 1 : 97) {
        long double sq = 0;
        for (size_t i = 0; i < n; i++) sq += (long double)x[i] * x[i];
        double got = tlm_grad_norm(x, n), want = (double)sqrtl(sq);
        CHECK(fabs(got - want) <= 1e-14 * want, "norm of %zu: %.17g, want %.17g", n, got, want);
    }
    free(x);
}

static void test_adamw(void) {
    enum { N = 6 };
    float p[N] = {1, -1, 2, -2, 0.5f, 3}, g[N] = {0.1f, -3, 1e-3f, 0, 5, -1e-4f};
    float m[N] = {0}, v[N] = {0}, p0[N];
    memcpy(p0, p, sizeof p);
    tlm_adamw opt = {0.9f, 0.999f, 1e-12f, 0.0f};
    tlm_adamw_update(&opt, p, g, m, v, N, 0.01f, 1, true);
    /* first step with bias correction: each moves by lr * sign(g) */
    for (int i = 0; i < N; i++) {
        float want = g[i] == 0 ? p0[i] : p0[i] - 0.01f * (g[i] > 0 ? 1 : -1);
        CHECK(fabsf(p[i] - want) < 1e-6f, "first step %d: %g vs %g", i, p[i], want);
    }
    /* decoupled decay only where the span says so, independent of grad */
    float q[4] = {1, 1, 1, 1}, zg[4] = {0}, zm[4] = {0}, zv[4] = {0};
    tlm_adamw dec = {0.9f, 0.999f, 1e-8f, 0.5f};
    tlm_param_span spans[2] = {{0, 2, true}, {2, 2, false}};
    tlm_adamw_update_spans(&dec, q, zg, 1.0f, zm, zv, spans, 2, 0.1f, 1);
    CHECK(q[0] == 0.95f && q[1] == 0.95f && q[2] == 1.0f && q[3] == 1.0f, "decay mask: %g %g %g %g", q[0], q[1], q[2],
          q[3]);
}

/* The runtime's AdamW (vectorised in its AVX2 clone, split into chunks over
 * threads) against the per-element formula written out here, bit for bit:
 * sqrt and division round correctly and nothing is fused, so a vector lane
 * must give what a scalar does. Sizes: past the parallel threshold, chunks
 * of 4096 and a tail of 13; one element; three steps. */
static void test_adamw_bits(size_t n) {
    tlm_rng r;
    tlm_rng_seed(&r, 11);
    float *p = malloc(n * sizeof *p), *g = malloc(n * sizeof *g), *m = malloc(n * sizeof *m);
    float *v = malloc(n * sizeof *v), *rp = malloc(n * sizeof *rp), *rm = malloc(n * sizeof *rm);
    float *rv = malloc(n * sizeof *rv);
    tlm_rng_fill_normal(&r, p, n, 0.0f, 1.0f);
    tlm_rng_fill_normal(&r, m, n, 0.0f, 0.1f);
    tlm_rng_fill_normal(&r, v, n, 0.0f, 0.01f);
    for (size_t i = 0; i < n; i++) v[i] *= v[i];
    memcpy(rp, p, n * sizeof *p), memcpy(rm, m, n * sizeof *m), memcpy(rv, v, n * sizeof *v);
    tlm_adamw opt = {0.9f, 0.95f, 1e-8f, 0.1f};
    size_t diff = 0;
    for (long t = 1; t <= 3; t++) {
        tlm_rng_fill_normal(&r, g, n, 0.0f, 1.0f);
        tlm_adamw_update(&opt, p, g, m, v, n, 1e-3f, t, true);
        const tlm_adamw_step k = tlm_adamw_step_at(&opt, 1e-3f, t, true);
        for (size_t i = 0; i < n; i++) {
            float gi = g[i];
            float mi = rm[i] * k.beta1 + k.one_minus_beta1 * gi;
            float vi = rv[i] * k.beta2 + k.one_minus_beta2 * gi * gi;
            rm[i] = mi, rv[i] = vi;
            float denom = sqrtf(vi) / k.bc2_sqrt + k.eps;
            rp[i] = rp[i] * k.shrink - k.step_size * (mi / denom);
        }
        for (size_t i = 0; i < n; i++)
            diff += memcmp(&p[i], &rp[i], sizeof(float)) || memcmp(&m[i], &rm[i], sizeof(float)) ||
                    memcmp(&v[i], &rv[i], sizeof(float));
    }
    CHECK(diff == 0, "adamw, %zu elements: %zu differ from the scalar formula", n, diff);
    free(p), free(g), free(m), free(v), free(rp), free(rm), free(rv);
}

static void test_sgd(void) {
    float p[2] = {1, 1}, g[2] = {1, 1}, buf[2] = {123, 123};
    tlm_sgd opt = {0.9f, 0.5f, 0.0f, false};
    tlm_sgd_update(&opt, p, g, buf, 2, 0.1f, 1, true);
    /* first step: buf = grad (no dampening), p -= lr * buf */
    CHECK(buf[0] == 1.0f && fabsf(p[0] - 0.9f) < 1e-7f, "first step buf %g p %g", buf[0], p[0]);
    tlm_sgd_update(&opt, p, g, buf, 2, 0.1f, 2, true);
    CHECK(fabsf(buf[0] - 1.4f) < 1e-6f && fabsf(p[0] - 0.76f) < 1e-6f, "second step");
    tlm_sgd plain = {0, 0, 0, false};
    float pp[1] = {1}, gg[1] = {2};
    tlm_sgd_update(&plain, pp, gg, NULL, 1, 0.25f, 1, true);
    CHECK(pp[0] == 0.5f, "plain SGD without a buffer");
}

/* The optimizers over many spans in one parallel loop (runtime/optim/
 * span_chunks.h) against each span updated on its own, bit for bit, at 1,
 * 2 and 3 threads: spans empty, of one element, one short of a chunk, one
 * past it, many chunks, with and without decay, at offsets that are not
 * multiples of a chunk. A chunk given to the wrong span, or cut at the
 * wrong element, changes elements. */
static void test_spans_bits(void) {
    static const size_t counts[] = {3, 0, 4095, 4097, 70001, 1, 8192, 33000, 5};
    enum { NS = sizeof counts / sizeof *counts };
    tlm_param_span spans[NS];
    size_t n = 0;
    for (int s = 0; s < NS; s++) {
        spans[s] = (tlm_param_span){n, counts[s], s % 2 == 0};
        n += counts[s];
    }
    tlm_rng r;
    tlm_rng_seed(&r, 5);
    float *init = malloc(4 * n * sizeof *init), *got = malloc(4 * n * sizeof *got),
          *want = malloc(4 * n * sizeof *want);
    tlm_rng_fill_normal(&r, init, 4 * n, 0.0f, 1.0f);
    for (size_t i = 3 * n; i < 4 * n; i++) init[i] *= init[i]; /* v >= 0 */
    const tlm_adamw adamw = {0.9f, 0.95f, 1e-8f, 0.1f};
    const tlm_sgd sgd = {0.9f, 0.1f, 0.01f, true};
    for (int which = 0; which < 2; which++) {
        memcpy(want, init, 4 * n * sizeof *init);
        for (long t = 1; t <= 2; t++)
            for (int s = 0; s < NS; s++) {
                size_t o = spans[s].offset;
                float *p = want + o, *g = want + n + o, *m = want + 2 * n + o, *v = want + 3 * n + o;
                if (which == 0) tlm_adamw_update(&adamw, p, g, m, v, spans[s].count, 1e-3f, t, spans[s].decay);
                else tlm_sgd_update(&sgd, p, g, m, spans[s].count, 1e-2f, t, spans[s].decay);
            }
        for (int threads = 1; threads <= 3; threads++) {
            tlm_set_num_threads(threads);
            check_team_of(threads);
            memcpy(got, init, 4 * n * sizeof *init);
            for (long t = 1; t <= 2; t++) {
                if (which == 0)
                    tlm_adamw_update_spans(&adamw, got, got + n, 1.0f, got + 2 * n, got + 3 * n, spans, NS, 1e-3f, t);
                else tlm_sgd_update_spans(&sgd, got, got + n, 1.0f, got + 2 * n, spans, NS, 1e-2f, t);
            }
            size_t diff = 0;
            for (size_t i = 0; i < 4 * n; i++) diff += memcmp(&got[i], &want[i], sizeof(float)) != 0;
            CHECK(diff == 0, "%s over %d spans at %d threads: %zu of %zu floats differ from a span at a time",
                  which == 0 ? "adamw" : "sgd", NS, threads, diff, 4 * n);
        }
    }
    tlm_set_num_threads(1);
    free(init), free(got), free(want);
}

/* The clipping folded into the update (the trainer's way): the update with
 * grad_scale = tlm_clip_scale's coefficient gives the bits of scaling the
 * gradients in place first (tlm_clip_grad_norm) and updating with 1, at
 * 1 to 3 threads; grad_scale 1 is the unscaled update. */
static void test_scaled_update_bits(void) {
    const size_t n = 3 * 4096 + 77;
    const tlm_param_span spans[2] = {{0, 4096 + 5, true}, {4096 + 5, n - 4096 - 5, false}};
    tlm_rng r;
    tlm_rng_seed(&r, 11);
    float *init = malloc(4 * n * sizeof *init), *got = malloc(4 * n * sizeof *got),
          *want = malloc(4 * n * sizeof *want);
    tlm_rng_fill_normal(&r, init, 4 * n, 0.0f, 1.0f);
    for (size_t i = 3 * n; i < 4 * n; i++) init[i] *= init[i];
    const float max_norm = 1.0f;
    const double norm = tlm_grad_norm(init + n, n);
    const float scale = tlm_clip_scale(norm, max_norm);
    CHECK(scale < 1.0f && scale == (float)(max_norm / (norm + 1e-6)), "clip scale %g for norm %g", scale, norm);
    CHECK(tlm_clip_scale(0.5, 1.0f) == 1.0f && tlm_clip_scale(50.0, 0.0f) == 1.0f, "clip scale 1 when not clipping");
    const tlm_adamw adamw = {0.9f, 0.95f, 1e-8f, 0.1f};
    const tlm_sgd sgd = {0.9f, 0.0f, 0.01f, false};
    for (int which = 0; which < 2; which++) {
        memcpy(want, init, 4 * n * sizeof *init);
        CHECK(tlm_clip_grad_norm(want + n, n, max_norm) == norm, "the same norm");
        if (which == 0)
            tlm_adamw_update_spans(&adamw, want, want + n, 1.0f, want + 2 * n, want + 3 * n, spans, 2, 1e-3f, 1);
        else tlm_sgd_update_spans(&sgd, want, want + n, 1.0f, want + 2 * n, spans, 2, 1e-2f, 2);
        for (int threads = 1; threads <= 3; threads++) {
            tlm_set_num_threads(threads);
            memcpy(got, init, 4 * n * sizeof *init);
            if (which == 0)
                tlm_adamw_update_spans(&adamw, got, got + n, scale, got + 2 * n, got + 3 * n, spans, 2, 1e-3f, 1);
            else tlm_sgd_update_spans(&sgd, got, got + n, scale, got + 2 * n, spans, 2, 1e-2f, 2);
            size_t diff = 0;
            for (size_t i = 0; i < n; i++) /* the parameters and moments; got's g stays unscaled */
                diff += memcmp(&got[i], &want[i], sizeof(float)) != 0 ||
                        memcmp(&got[2 * n + i], &want[2 * n + i], sizeof(float)) != 0 ||
                        (which == 0 && memcmp(&got[3 * n + i], &want[3 * n + i], sizeof(float)) != 0);
            CHECK(diff == 0, "%s with grad_scale at %d threads: %zu of %zu elements differ from clipping in place",
                  which == 0 ? "adamw" : "sgd", threads, diff, n);
        }
    }
    tlm_set_num_threads(1);
    free(init), free(got), free(want);
}

int main(void) {
    test_schedule();
    test_clip();
    test_scaled_update_bits();
    test_adamw();
    test_adamw_bits(9 * 4096 + 13);
    test_adamw_bits(1);
    test_sgd();
    test_spans_bits();
    return test_finish("test_optim");
}
