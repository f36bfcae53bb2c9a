/* Softmax cross-entropy over the vocabulary, fused so the probabilities are
 * never stored: forward keeps only the log-sum-exp of each row, backward
 * recomputes softmax = exp(logit - lse) on the fly.
 *
 *   loss_n    = lse_n - logit[n, target_n]
 *   lse_n     = m + log sum_v exp(logit[n,v] - m),  m = max_v logit[n,v]
 *   dlogit    = dloss / n_valid * (exp(logit - lse) - onehot(target))
 */
#include "tlm_rt/ops.h"

#include <math.h>

double tlm_crossentropy_forward(float *losses, float *lse, const float *logits, const int32_t *targets, int N, int V) {
    TLM_PARALLEL_FOR_IF((size_t)N * V >= TLM_PAR_MIN_ELEMENTS, for (int n = 0; n < N; n++) {
        const float *z = logits + (size_t)n * V;
        float m = -INFINITY;
        for (int v = 0; v < V; v++) m = z[v] > m ? z[v] : m;
        /* subtracting the max keeps every exp <= 1: no overflow, and the
         * largest term is exactly 1, so the sum never underflows to 0 */
        double s = 0.0;
        for (int v = 0; v < V; v++) s += exp((double)(z[v] - m));
        double l = (double)m + log(s);
        lse[n] = (float)l;
        if (losses) losses[n] = targets[n] < 0 ? 0.0f : (float)(l - z[targets[n]]);
    });
    /* the mean is summed serially in row order: deterministic. Recompute
     * the per-row loss in double from lse so losses may be NULL. */
    double total = 0.0;
    int valid = 0;
    for (int n = 0; n < N; n++) {
        if (targets[n] < 0) continue;
        total += (double)lse[n] - logits[(size_t)n * V + targets[n]];
        valid++;
    }
    return valid ? total / valid : 0.0;
}

void tlm_crossentropy_backward(float *dlogits, const float *logits, const float *lse, const int32_t *targets, int N,
                               int V, float dloss) {
    int valid = 0;
    for (int n = 0; n < N; n++) valid += targets[n] >= 0;
    float scale = valid ? dloss / (float)valid : 0.0f;
    TLM_PARALLEL_FOR_IF((size_t)N * V >= TLM_PAR_MIN_ELEMENTS, for (int n = 0; n < N; n++) {
        const float *z = logits + (size_t)n * V;
        float *dz = dlogits + (size_t)n * V;
        int tgt = targets[n];
        if (tgt < 0) {
            for (int v = 0; v < V; v++) dz[v] = 0.0f;
            continue;
        }
        float l = lse[n];
        /* dz may alias z: each element is read before it is written */
        for (int v = 0; v < V; v++) {
            float p = expf(z[v] - l);
            dz[v] = scale * (p - (v == tgt ? 1.0f : 0.0f));
        }
    });
}
