/* The C side of the optimizer kernels (gpu_optim.h): the step's scalars,
 * the grid, and the norm's second stage. */
#include "gpu_optim.h"

#include <math.h>

/* Threads per block; the element-wise kernels work with any, the norm's
 * partial sums need exactly this many (GRAD_NORM_THREADS in grad_norm.cu). */
enum { BLOCK = 256 };

/* The norm's chunks: at least CHUNK_MIN elements each (fewer blocks than
 * that would leave most threads idle), at most MAX_CHUNKS of them (enough
 * blocks to fill the largest GPUs). Both are functions of n alone. */
enum { CHUNK_MIN = 16384, MAX_CHUNKS = 1024, FLOATS_PER_CHUNK = 3 };

static tlm_dptr offset_of(tlm_dptr base, size_t elements) {
    return base ? base + (tlm_dptr)elements * sizeof(float) : 0;
}

/* One launch over n elements, each gradient read times grad_scale. */
static bool adamw_launch(tlm_gpu *g, const tlm_adamw *opt, tlm_dptr p, tlm_dptr grad, float grad_scale, tlm_dptr m,
                         tlm_dptr v, size_t n, float lr, long t, bool decay, tlm_err *err) {
    if (n == 0) return true;
    tlm_adamw_step k = tlm_adamw_step_at(opt, lr, t, decay); /* the CPU update's own scalars */
    long long count = (long long)n;
    void *args[] = {&p,
                    &grad,
                    &grad_scale,
                    &m,
                    &v,
                    &count,
                    &k.beta1,
                    &k.beta2,
                    &k.one_minus_beta1,
                    &k.one_minus_beta2,
                    &k.step_size,
                    &k.bc2_sqrt,
                    &k.eps,
                    &k.shrink};
    return tlm_gpu_launch(g, "tlm_adamw_update", tlm_gpu_blocks(count, BLOCK), BLOCK, args, err);
}

bool tlm_gpu_adamw_update(tlm_gpu *g, const tlm_adamw *opt, tlm_dptr p, tlm_dptr grad, tlm_dptr m, tlm_dptr v, size_t n,
                          float lr, long t, bool decay, tlm_err *err) {
    return adamw_launch(g, opt, p, grad, 1.0f, m, v, n, lr, t, decay, err);
}

static bool sgd_launch(tlm_gpu *g, const tlm_sgd *opt, tlm_dptr p, tlm_dptr grad, float grad_scale, tlm_dptr buf,
                       size_t n, float lr, long t, bool decay, tlm_err *err) {
    if (n == 0) return true;
    /* As tlm_sgd_update (runtime/optim/sgd.c) forms them. */
    float wd = decay ? opt->weight_decay : 0.0f;
    float mu = opt->momentum;
    float damp = (float)(1.0 - (double)opt->dampening);
    int first = t <= 1, nesterov = opt->nesterov;
    long long count = (long long)n;
    void *args[] = {&p, &grad, &grad_scale, &buf, &count, &lr, &wd, &mu, &damp, &first, &nesterov};
    return tlm_gpu_launch(g, "tlm_sgd_update", tlm_gpu_blocks(count, BLOCK), BLOCK, args, err);
}

bool tlm_gpu_sgd_update(tlm_gpu *g, const tlm_sgd *opt, tlm_dptr p, tlm_dptr grad, tlm_dptr buf, size_t n, float lr,
                        long t, bool decay, tlm_err *err) {
    return sgd_launch(g, opt, p, grad, 1.0f, buf, n, lr, t, decay, err);
}

/* The next run of spans that one launch can update: back to back in the
 * block and with the same decay (a model's matrices usually are). The
 * update is element-wise, so merging changes no result. */
static int next_run(const tlm_param_span *spans, int nspans, int i, tlm_param_span *run) {
    *run = spans[i++];
    while (i < nspans && spans[i].decay == run->decay && spans[i].offset == run->offset + run->count)
        run->count += spans[i++].count;
    return i;
}

bool tlm_gpu_adamw_update_spans(tlm_gpu *g, const tlm_adamw *opt, tlm_dptr p, tlm_dptr grad, float grad_scale,
                                tlm_dptr m, tlm_dptr v, const tlm_param_span *spans, int nspans, float lr, long t,
                                tlm_err *err) {
    tlm_param_span run;
    for (int i = 0; i < nspans;) {
        i = next_run(spans, nspans, i, &run);
        size_t o = run.offset;
        if (!adamw_launch(g, opt, offset_of(p, o), offset_of(grad, o), grad_scale, offset_of(m, o), offset_of(v, o),
                          run.count, lr, t, run.decay, err))
            return false;
    }
    return true;
}

bool tlm_gpu_sgd_update_spans(tlm_gpu *g, const tlm_sgd *opt, tlm_dptr p, tlm_dptr grad, float grad_scale, tlm_dptr buf,
                              const tlm_param_span *spans, int nspans, float lr, long t, tlm_err *err) {
    tlm_param_span run;
    for (int i = 0; i < nspans;) {
        i = next_run(spans, nspans, i, &run);
        size_t o = run.offset;
        if (!sgd_launch(g, opt, offset_of(p, o), offset_of(grad, o), grad_scale, offset_of(buf, o), run.count, lr, t,
                        run.decay, err))
            return false;
    }
    return true;
}

double tlm_gpu_grad_norm(tlm_gpu *g, tlm_dptr grad, size_t n, tlm_err *err) {
    if (n == 0) return 0.0;
    long long count = (long long)n;
    long long want = (count + CHUNK_MIN - 1) / CHUNK_MIN;
    int chunks = (int)(want < MAX_CHUNKS ? want : MAX_CHUNKS);
    long long chunk = (count + chunks - 1) / chunks;
    float partials[MAX_CHUNKS * FLOATS_PER_CHUNK];
    size_t bytes = (size_t)chunks * FLOATS_PER_CHUNK * sizeof(float);
    tlm_dptr scratch = tlm_gpu_scratch(g, bytes, err);
    if (!scratch) return -1.0;
    void *args[] = {&scratch, &grad, &count, &chunk, &chunks};
    if (!tlm_gpu_launch(g, "tlm_grad_norm_partials", (unsigned)chunks, BLOCK, args, err) ||
        !tlm_device_download(g->dev, partials, scratch, bytes, err))
        return -1.0;
    /* Stage 2: the chunks' sums in chunk order (grad_norm.cu). */
    double total = 0.0;
    for (int c = 0; c < chunks; c++) {
        const float *q = partials + (size_t)c * FLOATS_PER_CHUNK;
        total += ldexp((double)q[0] + (double)q[1], (int)q[2]);
    }
    return sqrt(total);
}

bool tlm_gpu_add(tlm_gpu *g, tlm_dptr sum, tlm_dptr x, float scale, size_t n, tlm_err *err) {
    if (n == 0) return true;
    long long count = (long long)n;
    void *args[] = {&sum, &x, &count, &scale};
    return tlm_gpu_launch(g, "tlm_grad_add", tlm_gpu_blocks(count, BLOCK), BLOCK, args, err);
}
