/* Global-norm gradient clipping (torch.nn.utils.clip_grad_norm_, 2-norm):
 *   total = ||g||_2;  coef = max_norm / (total + 1e-6);  if coef < 1: g *= coef
 * torch multiplies by min(coef, 1) unconditionally; multiplying by 1 is the
 * identity, so skipping it gives the same numbers.
 *
 * The squared norm is summed in double over a fixed number of chunks, each
 * chunk as eight running sums (element i of the chunk into sum i % 8) added
 * in a fixed order, then the chunk sums in order: the same bits for any
 * thread count. */
#include "tlm_rt/optim.h"
#include "tlm_rt/ops.h"

#include <math.h>

enum { NCHUNK = 64 };

/* The squares of g[lo, hi) in double. One running sum waited on every add,
 * about four cycles an element: 1.3% of tiny's training step at one
 * thread, for a pass that reads memory at a fraction of that. Eight
 * independent sums keep the adders busy (and vectorise). */
static double sum_squares(const float *g, size_t lo, size_t hi) {
    double acc[8] = {0};
    size_t i = lo;
    for (; i + 8 <= hi; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += (double)g[i + j] * g[i + j];
    for (int j = 0; i < hi; i++, j++) acc[j] += (double)g[i] * g[i];
    return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

double tlm_grad_norm(const float *g, size_t n) {
    double part[NCHUNK];
    size_t step = (n + NCHUNK - 1) / NCHUNK;
    TLM_PARALLEL_FOR_IF(
        n >= TLM_PAR_MIN_ELEMENTS, for (int c = 0; c < NCHUNK; c++) {
            size_t lo = (size_t)c * step, hi = lo + step;
            if (hi > n) hi = n;
            part[c] = sum_squares(g, lo, hi); /* 0 for an empty chunk (lo >= hi) */
        });
    double total = 0.0;
    for (int c = 0; c < NCHUNK; c++) total += part[c];
    return sqrt(total);
}

float tlm_clip_scale(double norm, float max_norm) {
    if (max_norm <= 0.0f) return 1.0f;
    float coef = (float)(max_norm / (norm + 1e-6));
    return coef < 1.0f ? coef : 1.0f;
}

double tlm_clip_grad_norm(float *g, size_t n, float max_norm) {
    double norm = tlm_grad_norm(g, n);
    float coef = tlm_clip_scale(norm, max_norm);
    if (coef < 1.0f) { TLM_PARALLEL_FOR_IF(n >= TLM_PAR_MIN_ELEMENTS, for (size_t i = 0; i < n; i++) g[i] *= coef;); }
    return norm;
}
