/* Sampling the next token from logits. */
#ifndef TLM_RT_SAMPLE_H
#define TLM_RT_SAMPLE_H

#include "tlm_rt/rng.h"

/* logits [V]. temperature <= 0: greedy (argmax, lowest index on ties).
 * Otherwise softmax(logits / temperature) restricted to the top_k largest
 * logits (top_k <= 0 or >= V: all; ties at the cut go to the lower index),
 * sampled with one tlm_rng_uniform draw. scratch: [V] floats (no
 * allocation). Returns a token id in [0, V) (-1 if V <= 0). */
int tlm_sample(const float *logits, int V, float temperature, int top_k, tlm_rng *rng, float *scratch);

#endif
