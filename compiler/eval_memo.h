/* mean(x)'s memo (eval.c). A mean's value is the same at every layer (its
 * argument is evaluated at all of them), so each call of mean is computed
 * once per model rather than once per layer: normalize(s) = s / mean(s)
 * was O(L^2) and ran out of evaluation steps past about 1,500 layers.
 *
 * A call of mean is its expression and the frame its names are bound in.
 * Frames are rebuilt at every schedule call, so each gets an id by what it
 * holds (hash-consing): its schedule, and each argument's expression and
 * the id of the frame that expression is evaluated in. Equal ids are equal
 * bindings, however deep the calls, in O(arguments) a call. The table of
 * keys is bounded: past it a frame's id is unknown (-1) and its means are
 * computed as they were, so memory never grows with the evaluation. */
#ifndef TLM_EVAL_MEMO_H
#define TLM_EVAL_MEMO_H

#include <stdbool.h>
#include <stdint.h>

typedef struct eval_memo eval_memo;

enum { EVAL_FRAME_TOP = 0, EVAL_FRAME_UNKNOWN = -1, EVAL_FRAME_SELF = -2 };

eval_memo *eval_memo_new(void);
void eval_memo_free(eval_memo *m);

/* The id of a frame of sched whose n arguments are args[i], evaluated in
 * the frames scopes[i] (EVAL_FRAME_TOP: at top level, EVAL_FRAME_SELF: in
 * the frame itself, a default); EVAL_FRAME_UNKNOWN when a scope is unknown
 * or the table is full. */
int64_t eval_memo_frame(eval_memo *m, const void *sched, int n, const void *const *args, const int64_t *scopes);

/* The memoised value of the mean expression e in frame (a known id) for L
 * layers: true and *value, or false. */
bool eval_memo_get(eval_memo *m, const void *e, int64_t frame, int64_t L, double *value);
void eval_memo_put(eval_memo *m, const void *e, int64_t frame, int64_t L, double value);

#endif
