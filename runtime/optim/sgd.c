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

#include "span_chunks.h"

/* Elements [i0, i1) of one tensor (wd 0 where it does not decay). */
static void sgd_range(const tlm_sgd *opt, float *p, const float *g, float gs, float *buf, size_t i0, size_t i1,
                      float lr, long t, float wd) {
    const float mu = opt->momentum, damp = (float)(1.0 - (double)opt->dampening);
    for (size_t i = i0; i < i1; i++) {
        float d = g[i] * gs; /* x 1 is exact */
        if (wd != 0.0f) d = d + wd * p[i];
        if (mu != 0.0f) {
            float b = t <= 1 ? d : buf[i] * mu + damp * d;
            buf[i] = b;
            d = opt->nesterov ? d + mu * b : b;
        }
        p[i] = p[i] - lr * d;
    }
}

typedef struct {
    const tlm_sgd *opt;
    float *p, *buf;
    const float *g;
    float grad_scale, lr;
    long t;
} sgd_walk;

static void sgd_chunk(void *ctx, const tlm_param_span *span, size_t i0, size_t i1) {
    const sgd_walk *w = ctx;
    const size_t o = span->offset;
    sgd_range(w->opt, w->p + o, w->g + o, w->grad_scale, w->buf ? w->buf + o : NULL, i0, i1, w->lr, w->t,
              span->decay ? w->opt->weight_decay : 0.0f);
}

void tlm_sgd_update_spans(const tlm_sgd *opt, float *p, const float *g, float grad_scale, float *buf,
                          const tlm_param_span *spans, int nspans, float lr, long t) {
    sgd_walk w = {opt, p, buf, g, grad_scale, lr, t};
    span_chunks_for(spans, nspans, sgd_chunk, &w);
}

void tlm_sgd_update(const tlm_sgd *opt, float *p, const float *g, float *buf, size_t n, float lr, long t, bool decay) {
    const tlm_param_span span = {0, n, decay};
    tlm_sgd_update_spans(opt, p, g, 1.0f, buf, &span, 1, lr, t);
}
