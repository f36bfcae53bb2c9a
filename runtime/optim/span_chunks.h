/* The optimizers' walk over a parameter block's spans: every span cut into
 * chunks of SPAN_CHUNK elements (the last one of a span shorter), all the
 * spans' chunks numbered in order, so that one parallel loop takes them
 * all. A loop per span opened a parallel region per tensor: 57 for tiny's
 * model, and under OMP_WAIT_POLICY=passive their wake-ups made its AdamW
 * update as slow on two threads as on one (5.9 ms a step). A chunk never
 * crosses a span, so each element gets its span's operations, as before. */
#ifndef TLM_SPAN_CHUNKS_H
#define TLM_SPAN_CHUNKS_H

#include <stdlib.h>

#include "tlm_rt/optim.h"

enum { SPAN_CHUNK = 4096 };

/* first[s]: the number of span s's first chunk; first[nspans] the total.
 * malloc'd (NULL without memory), *elements the spans' elements. */
static inline size_t *span_chunks(const tlm_param_span *spans, int nspans, size_t *elements) {
    size_t *first = malloc(((size_t)nspans + 1) * sizeof *first);
    if (!first) return NULL;
    size_t c = 0, e = 0;
    for (int s = 0; s < nspans; s++) {
        first[s] = c;
        c += (spans[s].count + SPAN_CHUNK - 1) / SPAN_CHUNK;
        e += spans[s].count;
    }
    first[nspans] = c;
    *elements = e;
    return first;
}

/* The span whose chunks hold chunk c (first as span_chunks made it; empty
 * spans own no chunk). */
static inline int span_of_chunk(const size_t *first, int nspans, size_t c) {
    int lo = 0, hi = nspans - 1;
    while (lo < hi) { /* the last span whose first chunk is <= c */
        int mid = (lo + hi + 1) / 2;
        if (first[mid] <= c) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

#endif
