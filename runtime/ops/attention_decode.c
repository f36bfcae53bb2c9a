/* One new token's causal attention over a KV cache (sampling): the row
 * t = n - 1 of tlm_attention_forward, with the keys and values of positions
 * [0, n) read from the cache instead of recomputed:
 *   s_u = q . k_u / sqrt(D),  P = softmax(s),  y = sum_u P_u v_u
 * per head: the scores, their max, the exponentials (v8_exp, the training
 * op's) and their sum, then y accumulated over u; the logits agree with a
 * full forward to float rounding (tests/model/test_kv_cache.c). One token's
 * work is small: heads run one after another up to TLM_PAR_MIN_DECODE
 * multiply-adds (a parallel region costs more), split between threads past
 * it (a head's sums do not depend on which thread runs it), each in a
 * V8_KERNEL, eight channels a vector:
 * with the baseline build's scalar loops and libm's expf this op was 22% of
 * sampling's time on a Zen 5 (perf), the weights' reads most of the rest. */
#include <math.h>
#include <string.h>

#include "tlm_rt/ops.h"
#include "vec8.h"

/* q . k_u times scale for four keys at once (four independent sums keep
 * the multiply-add unit busy), eight channels a step, then the last D % 8. */
V8_ALWAYS_INLINE void dot4(float out[4], const float *q, const float *k, size_t stride, int D, float scale) {
    v8f s0 = V8_SPLAT(0.0f), s1 = s0, s2 = s0, s3 = s0;
    int d = 0;
    for (; d + 8 <= D; d += 8) {
        v8f a, b0, b1, b2, b3;
        V8_LOAD(a, q + d);
        V8_LOAD(b0, k + d), V8_LOAD(b1, k + stride + d), V8_LOAD(b2, k + 2 * stride + d);
        V8_LOAD(b3, k + 3 * stride + d);
        s0 += a * b0, s1 += a * b1, s2 += a * b2, s3 += a * b3;
    }
    v8f sums[4] = {s0, s1, s2, s3};
    for (int j = 0; j < 4; j++) {
        float s = 0.0f;
        for (int l = 0; l < 8; l++) s += sums[j][l];
        for (int e = d; e < D; e++) s += q[e] * k[j * stride + e];
        out[j] = s * scale;
    }
}

V8_KERNEL(decode_head,
          (float *y, const float *q, const float *k, const float *v, int n, int D, size_t stride, float scale,
           float *p),
          (y, q, k, v, n, D, stride, scale, p)) {
    int u = 0;
    for (; u + 4 <= n; u += 4) dot4(p + u, q, k + (size_t)u * stride, stride, D, scale);
  /* The last n % 4 keys through dot4 too, each as four copies of itself:
   * its four sums are independent, so a key's score is the one it would
   * get in a group, and does not depend on n % 4. */
    for (; u < n; u++) {
        float four[4];
        const float *ku = k + (size_t)u * stride;
        dot4(four, q, ku, 0, D, scale);
        p[u] = four[0];
    }
    v8_exp_row(p, n, v8_max_row(p, n, -INFINITY));
    float sum = 0.0f;
    for (u = 0; u < n; u++) sum += p[u];
    const float inv = 1.0f / sum;
    for (u = 0; u < n; u++) p[u] *= inv;
  /* y in chunks of 32 channels held in four vectors while u runs, then
   * eight, then one by one */
    int d = 0;
    for (; d + 32 <= D; d += 32) {
        v8f y0 = V8_SPLAT(0.0f), y1 = y0, y2 = y0, y3 = y0;
        for (u = 0; u < n; u++) {
            const float *vu = v + (size_t)u * stride + d;
            const v8f w = V8_SPLAT(p[u]);
            v8f a0, a1, a2, a3;
            V8_LOAD(a0, vu), V8_LOAD(a1, vu + 8), V8_LOAD(a2, vu + 16), V8_LOAD(a3, vu + 24);
            y0 += w * a0, y1 += w * a1, y2 += w * a2, y3 += w * a3;
        }
        V8_STORE(y + d, y0), V8_STORE(y + d + 8, y1), V8_STORE(y + d + 16, y2), V8_STORE(y + d + 24, y3);
    }
    for (; d + 8 <= D; d += 8) {
        v8f acc = V8_SPLAT(0.0f);
        for (u = 0; u < n; u++) {
            v8f a;
            V8_LOAD(a, v + (size_t)u * stride + d);
            acc += V8_SPLAT(p[u]) * a;
        }
        V8_STORE(y + d, acc);
    }
    for (; d < D; d++) {
        float acc = 0.0f;
        for (u = 0; u < n; u++) acc += p[u] * v[(size_t)u * stride + d];
        y[d] = acc;
    }
}

void tlm_attention_decode(float *y, const float *q, const float *k, const float *v, int n, int H, int D, int stride,
                          float *scratch) {
    const float scale = 1.0f / sqrtf((float)D);
    TLM_PARALLEL_FOR_IF((size_t)n * (size_t)H * (size_t)D >= TLM_PAR_MIN_DECODE && H > 1, for (int h = 0; h < H; h++) {
        const size_t off = (size_t)h * D;
        decode_head(y + off, q + off, k + off, v + off, n, D, (size_t)stride, scale, scratch + (size_t)h * n);
    });
}
