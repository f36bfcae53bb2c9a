#include "loglik.h"

#include <math.h>
#include <stdlib.h>

/* A request's place in the batching order: longer first, then by index,
 * so the order (and hence the rounding) is the same on every run. */
typedef struct by_length {
    int64_t n, index;
} by_length;
static int longer_first(const void *pa, const void *pb) {
    const by_length *a = pa, *b = pb;
    if (a->n != b->n) return a->n > b->n ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

/* The log-probability of target under one position's logits, and whether
 * target is their argmax (the lowest id among equals). */
static double log_prob(const float *logits, int64_t V, int32_t target, bool *is_argmax) {
    int64_t best = 0;
    for (int64_t v = 1; v < V; v++)
        if (logits[v] > logits[best]) best = v;
    double max = logits[best], sum = 0;
    for (int64_t v = 0; v < V; v++) sum += exp((double)logits[v] - max);
    *is_argmax = best == target;
    return (double)logits[target] - max - log(sum);
}

bool tlm_loglik_score(tlm_model *m, const tlm_loglik_request *req, int64_t count, int64_t B, tlm_loglik_result *out,
                      tlm_err *err) {
    int64_t V = m->so->config->vocab;
    for (int64_t i = 0; i < count; i++)
        if (req[i].n < 2 || req[i].n > m->T + 1 || req[i].first < 1 || req[i].first >= req[i].n)
            return tlm_fail(err, "request %lld: %lld tokens from %lld do not fit a window of %lld", (long long)i,
                            (long long)req[i].n, (long long)req[i].first, (long long)m->T);
    if (B > m->B) B = m->B;
    by_length *order = malloc((size_t)(count > 0 ? count : 1) * sizeof *order);
    int32_t *x = malloc((size_t)(B * m->T) * sizeof *x);
    if (!order || !x) {
        free(order);
        free(x);
        return tlm_fail(err, "out of memory for scoring %lld sequences", (long long)count);
    }
    for (int64_t i = 0; i < count; i++) order[i] = (by_length){req[i].n, i};
    qsort(order, (size_t)count, sizeof *order, longer_first);

    bool ok = true;
    for (int64_t start = 0; start < count && ok; start += B) {
        int64_t rows = count - start < B ? count - start : B;
        int64_t T = order[start].n - 1; /* the longest of the batch: inputs are all but the last token */
        for (int64_t r = 0; r < rows; r++) {
            const tlm_loglik_request *q = &req[order[start + r].index];
            for (int64_t t = 0; t < T; t++) x[r * T + t] = t < q->n - 1 ? q->tokens[t] : 0;
        }
        tlm_model_forward(m, x, NULL, rows, T);
        const float *logits = tlm_model_logits(m);
        if (!logits || tlm_model_device_error(m)) {
            const char *why = tlm_model_device_error(m);
            ok = tlm_fail(err, "%s", why ? why : "the forward pass failed");
            break;
        }
        for (int64_t r = 0; r < rows; r++) {
            const tlm_loglik_request *q = &req[order[start + r].index];
            tlm_loglik_result res = {0, true};
            /* the logits at position t predict token t + 1 */
            for (int64_t t = q->first - 1; t < q->n - 1; t++) {
                bool top;
                res.loglik += log_prob(logits + (r * T + t) * V, V, q->tokens[t + 1], &top);
                res.greedy = res.greedy && top;
            }
            out[order[start + r].index] = res;
        }
    }
    free(order);
    free(x);
    return ok;
}
