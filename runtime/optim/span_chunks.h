/* The optimizers' walk over a parameter block's spans: every span cut into
 * chunks of SPAN_CHUNK elements (the last one of a span shorter), all the
 * spans' chunks numbered in order, so that one parallel loop takes them
 * all. A loop per span opened a parallel region per tensor: 57 for tiny's
 * model, and under OMP_WAIT_POLICY=passive their wake-ups made its AdamW
 * update as slow on two threads as on one (5.9 ms a step). A chunk never
 * crosses a span, so each element gets its span's operations, as before. */
#ifndef TLM_SPAN_CHUNKS_H
#define TLM_SPAN_CHUNKS_H

#include "tlm_rt/ops.h"
#include "tlm_rt/optim.h"

enum { SPAN_CHUNK = 4096 };

static inline size_t span_chunk_count(const tlm_param_span *s) { return (s->count + SPAN_CHUNK - 1) / SPAN_CHUNK; }

/* Elements [i0, i1) of one span (indices within it). */
typedef void span_range_fn(void *ctx, const tlm_param_span *span, size_t i0, size_t i1);

/* The chunks of a walk that this thread takes: all of them outside a
 * parallel region (an orphaned worksharing loop on the initial thread,
 * whose barrier returns at once), its share inside one. A static schedule
 * hands each thread its chunks in increasing order, so its cursor (the
 * span holding chunk c, and that span's first chunk) only moves forward. */
static inline void span_chunks_share(const tlm_param_span *spans, size_t chunks, span_range_fn *range, void *ctx) {
    int s = 0;
    size_t first = 0;
#pragma omp for schedule(static)
    for (size_t c = 0; c < chunks; c++) {
        while (c >= first + span_chunk_count(&spans[s])) first += span_chunk_count(&spans[s++]);
        const size_t i0 = (c - first) * SPAN_CHUNK, end = i0 + SPAN_CHUNK;
        range(ctx, &spans[s], i0, end < spans[s].count ? end : spans[s].count);
    }
}

/* range() on every chunk of every span, the chunks split over the threads
 * (a parallel region only past TLM_PAR_MIN_ELEMENTS and with threads to
 * split: TLM_PARALLEL_FOR_IF says why). */
static inline void span_chunks_for(const tlm_param_span *spans, int nspans, span_range_fn *range, void *ctx) {
    size_t chunks = 0, elements = 0;
    for (int s = 0; s < nspans; s++) chunks += span_chunk_count(&spans[s]), elements += spans[s].count;
    if (elements >= TLM_PAR_MIN_ELEMENTS && tlm_threads_can_split()) {
#pragma omp parallel
        span_chunks_share(spans, chunks, range, ctx);
    } else {
        span_chunks_share(spans, chunks, range, ctx);
    }
}

#endif
