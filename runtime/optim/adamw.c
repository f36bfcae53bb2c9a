/* AdamW as torch.optim.AdamW computes it (1.13, _single_tensor_adamw):
 *
 *   param.mul_(1 - lr * weight_decay)
 *   exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
 *   exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
 *   step_size = lr / (1 - beta1^t)
 *   denom = (exp_avg_sq.sqrt() / sqrt(1 - beta2^t)).add_(eps)
 *   param.addcdiv_(exp_avg, denom, value=-step_size)
 *
 * The scalars are formed in double (as Python does) and rounded to float
 * once; the per-element arithmetic is float, in torch's order. */
#include "tlm_rt/optim.h"
#include "tlm_rt/ops.h"

#include <math.h>

#include "../ops/vec8.h"
#include "span_chunks.h"

tlm_adamw_step tlm_adamw_step_at(const tlm_adamw *opt, float lr, long t, bool decay) {
    double b1 = opt->beta1, b2 = opt->beta2;
    return (tlm_adamw_step){
        .beta1 = (float)b1,
        .beta2 = (float)b2,
        .one_minus_beta1 = (float)(1.0 - b1),
        .one_minus_beta2 = (float)(1.0 - b2),
        .step_size = (float)((double)lr / (1.0 - pow(b1, (double)t))),
        .bc2_sqrt = (float)sqrt(1.0 - pow(b2, (double)t)),
        .eps = opt->eps,
        .shrink = decay ? (float)(1.0 - (double)lr * opt->weight_decay) : 1.0f,
    };
}

/* Elements [i0, i1): the per-element arithmetic above, in float. The
 * x86-64-v3 clone runs it eight elements a step (gcc vectorises the loop,
 * sqrt and division included: this file is built with -fno-math-errno);
 * each element is the same correctly rounded operations in the same order,
 * none fused (-ffp-contract=off), so both clones give the same bits. */
V8_KERNEL(adamw_range, (const tlm_adamw_step *k, float *p, const float *g, float *m, float *v, size_t i0, size_t i1),
          (k, p, g, m, v, i0, i1)) {
    const float shrink = k->shrink, fb1 = k->beta1, fb2 = k->beta2, one_b1 = k->one_minus_beta1,
                one_b2 = k->one_minus_beta2, step_size = k->step_size, bc2_sqrt = k->bc2_sqrt, eps = k->eps;
#pragma omp simd
    for (size_t i = i0; i < i1; i++) {
        float gi = g[i];
        float mi = m[i] * fb1 + one_b1 * gi;
        float vi = v[i] * fb2 + one_b2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        float denom = sqrtf(vi) / bc2_sqrt + eps;
        p[i] = p[i] * shrink - step_size * (mi / denom);
    }
}

void tlm_adamw_update(const tlm_adamw *opt, float *p, const float *g, float *m, float *v, size_t n, float lr, long t,
                      bool decay) {
    const tlm_adamw_step k = tlm_adamw_step_at(opt, lr, t, decay);
    enum { CHUNK = 4096 };
    const size_t chunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static) if (n >= TLM_PAR_MIN_ELEMENTS)
    for (size_t c = 0; c < chunks; c++) {
        const size_t i0 = c * CHUNK, i1 = i0 + CHUNK < n ? i0 + CHUNK : n;
        adamw_range(&k, p, g, m, v, i0, i1);
    }
}

void tlm_adamw_update_spans(const tlm_adamw *opt, float *p, const float *g, float *m, float *v,
                            const tlm_param_span *spans, int nspans, float lr, long t) {
    size_t elements;
    size_t *first = span_chunks(spans, nspans, &elements);
    if (!first) { /* no memory for the chunk table: a region a span */
        for (int s = 0; s < nspans; s++) {
            size_t o = spans[s].offset;
            tlm_adamw_update(opt, p + o, g + o, m + o, v + o, spans[s].count, lr, t, spans[s].decay);
        }
        return;
    }
    const tlm_adamw_step k[2] = {tlm_adamw_step_at(opt, lr, t, false), tlm_adamw_step_at(opt, lr, t, true)};
    const size_t chunks = first[nspans];
#pragma omp parallel for schedule(static) if (elements >= TLM_PAR_MIN_ELEMENTS)
    for (size_t c = 0; c < chunks; c++) {
        const int s = span_of_chunk(first, nspans, c);
        const size_t o = spans[s].offset, i0 = (c - first[s]) * SPAN_CHUNK;
        const size_t i1 = i0 + SPAN_CHUNK < spans[s].count ? i0 + SPAN_CHUNK : spans[s].count;
        adamw_range(&k[spans[s].decay], p + o, g + o, m + o, v + o, i0, i1);
    }
    free(first);
}
