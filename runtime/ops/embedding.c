/* Token embedding: a row gather forward, a row scatter-add backward. */
#include "tlm_rt/ops.h"

#include <string.h>

/* out[N,C] = table[ids[n], :]
 * ids [N] must lie in [0, V): the data loader only yields bytes 0..255, and a
 * model's vocab is at least that, so no check sits in this hot loop. */
void tlm_embedding_forward(float *out, const int32_t *ids, const float *table, int N, int C) {
    TLM_PARALLEL_FOR_IF(
        N >= TLM_PAR_MIN_ROWS, for (int n = 0; n < N; n++) {
            memcpy(out + (size_t)n * C, table + (size_t)ids[n] * C, (size_t)C * sizeof(float));
        });
}

/* dtable[ids[n], :] += dout[n, :]
 * Serial in row order: two rows with the same id would race if split across
 * threads, and the work (N*C adds) is small next to any matmul. Accumulates,
 * because a tied table also receives the LM head's gradient. */
void tlm_embedding_backward(float *dtable, const float *dout, const int32_t *ids, int N, int C) {
    for (int n = 0; n < N; n++) {
        float *drow = dtable + (size_t)ids[n] * C;
        const float *g = dout + (size_t)n * C;
        for (int c = 0; c < C; c++) drow[c] += g[c];
    }
}
