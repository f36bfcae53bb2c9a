/* The log-likelihood a model gives a continuation of a text: what the
 * downstream scores of `tlm-run eval` (multiple choice, cloze) are made of.
 *
 * A request is one token sequence, a context followed by a continuation,
 * and the index of the continuation's first token. Its score is the sum,
 * over the continuation's tokens, of log p(token | every token before it)
 * (natural log, a log-softmax over the whole vocabulary in double), and
 * whether every one of those tokens is the argmax of its distribution
 * (teacher-forced greedy decoding: the lowest id wins a tie).
 *
 * Requests are batched: sorted by length, longest first, B rows per forward
 * pass, each padded on the right to the longest of its batch. The model is
 * causal, so padding after a sequence does not change its scores; the
 * batching changes only float rounding. */
#ifndef TLM_LOGLIK_H
#define TLM_LOGLIK_H

#include <stdbool.h>
#include <stdint.h>

#include "model.h"

typedef struct tlm_loglik_request {
    const int32_t *tokens; /* [n]: context, then continuation; ids below the vocabulary */
    int64_t n;             /* 2 .. m->T + 1 */
    int64_t first;         /* the continuation's first token: 1 .. n - 1 */
} tlm_loglik_request;

typedef struct tlm_loglik_result {
    double loglik; /* sum of log p over tokens [first, n) */
    bool greedy;   /* each of them is its position's argmax */
} tlm_loglik_result;

/* Scores req[0..count) into out[0..count), B (<= m->B) sequences per
 * forward pass. false with a reason (out of memory, a device failure, a
 * request outside the preconditions above). */
bool tlm_loglik_score(tlm_model *m, const tlm_loglik_request *req, int64_t count, int64_t B, tlm_loglik_result *out,
                      tlm_err *err);

#endif
