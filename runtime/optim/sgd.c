/* SGD with momentum as torch.optim.SGD computes it (1.13):
 *
 *   d_p = grad.add(param, alpha=weight_decay)          if weight_decay != 0
 *   buf = clone(d_p)                                   first step
 *   buf.mul_(momentum).add_(d_p, alpha=1 - dampening)  later steps
 *   d_p = d_p.add(buf, alpha=momentum) if nesterov else buf
 *   param.add_(d_p, alpha=-lr)
 */
#include "tlm_rt/optim.h"
#include "tlm_rt/ops.h"

void tlm_sgd_update(const tlm_sgd *opt, float *p, const float *g, float *buf, size_t n, float lr, long t, bool decay) {
    float wd = decay ? opt->weight_decay : 0.0f;
    float mu = opt->momentum;
    float damp = (float)(1.0 - (double)opt->dampening);
#pragma omp parallel for schedule(static) if (n >= TLM_PAR_MIN_ELEMENTS)
    for (size_t i = 0; i < n; i++) {
        float d = g[i];
        if (wd != 0.0f) d = d + wd * p[i];
        if (mu != 0.0f) {
            float b = t <= 1 ? d : buf[i] * mu + damp * d;
            buf[i] = b;
            d = opt->nesterov ? d + mu * b : b;
        }
        p[i] = p[i] - lr * d;
    }
}

void tlm_sgd_update_spans(const tlm_sgd *opt, float *p, const float *g, float *buf, const tlm_param_span *spans,
                          int nspans, float lr, long t) {
    for (int s = 0; s < nspans; s++) {
        size_t o = spans[s].offset;
        tlm_sgd_update(opt, p + o, g + o, buf ? buf + o : NULL, spans[s].count, lr, t, spans[s].decay);
    }
}
