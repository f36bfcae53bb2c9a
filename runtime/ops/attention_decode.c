/* One new token's causal attention over a KV cache (sampling): the row
 * t = n - 1 of tlm_attention_forward, with the keys and values of positions
 * [0, n) read from the cache instead of recomputed:
 *   s_u = q . k_u / sqrt(D),  P = softmax(s),  y = sum_u P_u v_u
 * per head, in the same order as the training op (scores, max, exponentials
 * and their sum, then y accumulated over u), so the logits agree with a
 * full forward to float rounding. One token's work is small: heads run one
 * after another (no parallel region for a few thousand multiply-adds). */
#include <math.h>
#include <string.h>

#include "tlm_rt/ops.h"
#include "vec_inline.h"

void tlm_attention_decode(float *y, const float *q, const float *k, const float *v, int n, int H, int D, int stride,
                          float *scratch) {
    const float scale = 1.0f / sqrtf((float)D);
    for (int h = 0; h < H; h++) {
        const float *qh = q + (size_t)h * D, *kh = k + (size_t)h * D, *vh = v + (size_t)h * D;
        float *p = scratch, mx = -INFINITY;
        for (int u = 0; u < n; u++) {
            p[u] = dot(qh, kh + (size_t)u * stride, D) * scale;
            if (p[u] > mx) mx = p[u];
        }
        float sum = 0.0f;
        for (int u = 0; u < n; u++) {
            p[u] = expf(p[u] - mx);
            sum += p[u];
        }
        float inv = 1.0f / sum, *yh = y + (size_t)h * D;
        memset(yh, 0, (size_t)D * sizeof(float));
        for (int u = 0; u < n; u++) axpy(yh, p[u] * inv, vh + (size_t)u * stride, D);
    }
}
