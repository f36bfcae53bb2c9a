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
static void sgd_range(const tlm_sgd *opt, float *p, const float *g, float *buf, size_t i0, size_t i1, float lr, long t,
                      float wd) {
    const float mu = opt->momentum, damp = (float)(1.0 - (double)opt->dampening);
    for (size_t i = i0; i < i1; i++) {
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

void tlm_sgd_update(const tlm_sgd *opt, float *p, const float *g, float *buf, size_t n, float lr, long t, bool decay) {
    tlm_param_span span = {0, n, decay};
    tlm_sgd_update_spans(opt, p, g, buf, &span, 1, lr, t);
}

void tlm_sgd_update_spans(const tlm_sgd *opt, float *p, const float *g, float *buf, const tlm_param_span *spans,
                          int nspans, float lr, long t) {
    size_t elements;
    size_t *first = span_chunks(spans, nspans, &elements);
    if (!first) { /* no memory for the chunk table: in order, on this thread */
        for (int s = 0; s < nspans; s++) {
            size_t o = spans[s].offset;
            sgd_range(opt, p + o, g + o, buf ? buf + o : NULL, 0, spans[s].count, lr, t,
                      spans[s].decay ? opt->weight_decay : 0.0f);
        }
        return;
    }
    const size_t chunks = first[nspans];
#pragma omp parallel for schedule(static) if (elements >= TLM_PAR_MIN_ELEMENTS)
    for (size_t c = 0; c < chunks; c++) {
        const int s = span_of_chunk(first, nspans, c);
        const size_t o = spans[s].offset, i0 = (c - first[s]) * SPAN_CHUNK;
        const size_t i1 = i0 + SPAN_CHUNK < spans[s].count ? i0 + SPAN_CHUNK : spans[s].count;
        sgd_range(opt, p + o, g + o, buf ? buf + o : NULL, i0, i1, lr, t, spans[s].decay ? opt->weight_decay : 0.0f);
    }
    free(first);
}
