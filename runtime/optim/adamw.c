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
V8_KERNEL(adamw_range,
          (const tlm_adamw_step *k, float *p, const float *g, float gs, float *m, float *v, size_t i0, size_t i1),
          (k, p, g, gs, m, v, i0, i1)) {
    const float shrink = k->shrink, fb1 = k->beta1, fb2 = k->beta2, one_b1 = k->one_minus_beta1,
                one_b2 = k->one_minus_beta2, step_size = k->step_size, bc2_sqrt = k->bc2_sqrt, eps = k->eps;
#pragma omp simd
    for (size_t i = i0; i < i1; i++) {
        float gi = g[i] * gs; /* x 1 is exact: no clipping changes nothing */
        float mi = m[i] * fb1 + one_b1 * gi;
        float vi = v[i] * fb2 + one_b2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        float denom = sqrtf(vi) / bc2_sqrt + eps;
        p[i] = p[i] * shrink - step_size * (mi / denom);
    }
}

typedef struct {
    tlm_adamw_step k[2]; /* without decay, with it */
    float *p, *m, *v;
    const float *g;
    float grad_scale;
} adamw_walk;

static void adamw_chunk(void *ctx, const tlm_param_span *span, size_t i0, size_t i1) {
    const adamw_walk *w = ctx;
    const size_t o = span->offset;
    adamw_range(&w->k[span->decay], w->p + o, w->g + o, w->grad_scale, w->m + o, w->v + o, i0, i1);
}

void tlm_adamw_update_spans(const tlm_adamw *opt, float *p, const float *g, float grad_scale, float *m, float *v,
                            const tlm_param_span *spans, int nspans, float lr, long t) {
    adamw_walk w = {
        {tlm_adamw_step_at(opt, lr, t, false), tlm_adamw_step_at(opt, lr, t, true)}, p, m, v, g, grad_scale};
    span_chunks_for(spans, nspans, adamw_chunk, &w);
}

void tlm_adamw_update(const tlm_adamw *opt, float *p, const float *g, float *m, float *v, size_t n, float lr, long t,
                      bool decay) {
    const tlm_param_span span = {0, n, decay};
    tlm_adamw_update_spans(opt, p, g, 1.0f, m, v, &span, 1, lr, t);
}
