/* One token's attention over a KV cache (runtime/ops/attention_decode.c,
 * sampling's op) against a float64 reference: head sizes below, at and
 * past a vector (1, 7, 8, 9, 24, 33, 64, 72) and cache lengths below, at
 * and past the four keys the scores take at once (1, 3, 4, 5, 37, 256), in
 * the packed [q | k | v] rows the cache holds (stride 3 H D), on several
 * heads; also a score far above the others (y is that key's v) and keys
 * whose exponentials underflow. Bound per element: 1e-5 |ref| + 1e-6
 * max|ref|, test_gpu_decode's (float sums of up to 256 weighted values:
 * an element near 0 is the difference of terms of the head's size); the
 * same bits on 1, 2 and 3 threads (heads split between them past
 * TLM_PAR_MIN_DECODE).
 * ctest runs it at the CPU's level and at each lower one
 * (TLM_CPU_CAPABILITY): the baseline build, the AVX2 clone. */
#include "test_util.h"

static void reference(double *y, const float *q, const float *k, const float *v, int n, int H, int D, int stride) {
    double *s = malloc((size_t)n * sizeof *s);
    if (!s) abort();
    for (int h = 0; h < H; h++) {
        double mx = -INFINITY, sum = 0;
        for (int u = 0; u < n; u++) {
            double d = 0;
            for (int e = 0; e < D; e++) d += (double)q[h * D + e] * k[(size_t)u * stride + h * D + e];
            s[u] = d / sqrt((double)D);
            mx = fmax(mx, s[u]);
        }
        for (int u = 0; u < n; u++) sum += s[u] = exp(s[u] - mx);
        for (int e = 0; e < D; e++) {
            double acc = 0;
            for (int u = 0; u < n; u++) acc += s[u] / sum * v[(size_t)u * stride + h * D + e];
            y[h * D + e] = acc;
        }
    }
    free(s);
}

/* spike: key 0's score made far above the others (q . k_0 large) */
static void one_case(int n, int H, int D, bool spike, tlm_rng *rng) {
    const int A = H * D, stride = 3 * A;
    float *cache = falloc((size_t)n * stride), *q = falloc((size_t)A), *y = falloc((size_t)A);
    float *scratch = falloc((size_t)H * (size_t)n);
    double *want = malloc((size_t)A * sizeof *want);
    if (!want) abort();
    fill_uniform(rng, cache, (size_t)n * stride, -2.0f, 2.0f);
    fill_uniform(rng, q, (size_t)A, -2.0f, 2.0f);
    if (spike)
        for (int e = 0; e < A; e++) cache[A + e] = q[e] * 400.0f; /* k_0 = 400 q */
    tlm_set_num_threads(1);
    tlm_attention_decode(y, q, cache + A, cache + 2 * A, n, H, D, stride, scratch);
    reference(want, q, cache + A, cache + 2 * A, n, H, D, stride);
    /* heads split between threads past TLM_PAR_MIN_DECODE: the same bits */
    float *y_split = falloc((size_t)A);
    for (int threads = 2; threads <= 3; threads++) {
        tlm_set_num_threads(threads);
        tlm_attention_decode(y_split, q, cache + A, cache + 2 * A, n, H, D, stride, scratch);
        CHECK(!memcmp(y, y_split, (size_t)A * sizeof *y), "n %d H %d D %d: %d threads differ from one", n, H, D,
              threads);
    }
    free(y_split);
    double scale = 0, worst = 0;
    for (int i = 0; i < A; i++) scale = fmax(scale, fabs(want[i]));
    for (int i = 0; i < A; i++) worst = fmax(worst, fabs(y[i] - want[i]) / (1e-5 * fabs(want[i]) + 1e-6 * scale));
    CHECK(worst <= 1.0, "n %d H %d D %d%s: %.2f of the bound", n, H, D, spike ? " (one key dominant)" : "", worst);
    if (spike) /* P is one key's: y is v_0 exactly */
        for (int i = 0; i < A; i++)
            CHECK(y[i] == cache[2 * A + i], "n %d D %d, one key dominant: y[%d] %.9g, v_0 %.9g", n, D, i, y[i],
                  cache[2 * A + i]);
    free(cache), free(q), free(y), free(scratch), free(want);
}

int main(void) {
    test_say_cpu_level();
    tlm_rng rng;
    tlm_rng_seed(&rng, 2026);
    static const int ns[] = {1, 3, 4, 5, 37, 256}, ds[] = {1, 7, 8, 9, 24, 33, 64, 72};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (size_t j = 0; j < sizeof ds / sizeof ds[0]; j++) one_case(ns[i], 3, ds[j], false, &rng);
    one_case(37, 2, 64, true, &rng);
    one_case(5, 1, 9, true, &rng);
    one_case(256, 16, 64, false, &rng); /* a 440M model's heads */
    one_case(259, 5, 57, false, &rng);  /* split, with odd sizes */
    return test_finish("test_attention_decode");
}
