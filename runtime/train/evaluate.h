/* Measuring a model's loss on held-out text, two ways:
 *
 *   - during training, on a fixed sample of random windows (the generator
 *     is seeded the same way at every validation, so the numbers of one run,
 *     and of runs with other seeds, are comparable);
 *   - for `tlm-run eval`, on consecutive non-overlapping windows from the
 *     start of the text, which uses every byte once and involves no
 *     randomness at all.
 *
 * Tokens are bytes, so bits per byte = loss / ln 2. */
#ifndef TLM_EVALUATE_H
#define TLM_EVALUATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "tlm_rt/data.h"

typedef struct tlm_eval_result {
    double loss;        /* mean cross-entropy per token, nats */
    int64_t tokens;     /* tokens scored */
    int64_t windows;
} tlm_eval_result;

/* The mean loss over nbatches batches of B random windows of T tokens,
 * drawn with a generator seeded with seed. B <= m->B, T <= m->T. */
bool tlm_eval_sampled(tlm_model *m, const tlm_dataset *ds, int64_t B, int64_t T, int64_t nbatches, uint64_t seed,
                      tlm_eval_result *out, tlm_err *err);

/* The mean loss over consecutive windows of T tokens (each with its next
 * token as target), B at a time, from the start of the text; max_tokens > 0
 * stops after that many tokens, rounded down to whole windows (at least
 * one). */
bool tlm_eval_windows(tlm_model *m, const tlm_dataset *ds, int64_t B, int64_t T, int64_t max_tokens,
                      tlm_eval_result *out, tlm_err *err);

/* The largest byte value in the text: a model whose vocabulary is not
 * larger cannot read it. */
int tlm_data_max_byte(const tlm_dataset *ds);

#endif
