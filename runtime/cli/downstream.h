/* eval's downstream sets: multiple choice and cloze items from JSON-lines
 * files, scored by the log-likelihood the model gives each continuation
 * (train/loglik.h). docs/runtime.md ("Downstream sets") defines the scores.
 *
 * Every item becomes one or more requests: a context and a continuation
 * (a choice, a cloze target), tokenized separately and concatenated. When
 * they are longer than the window of T tokens (T + 1 with the last one's
 * target), they are cut from the left: the context first, and a
 * continuation of more than T tokens is scored on its last T. An empty
 * continuation or context is an error naming the file and line. */
#ifndef TLM_CLI_DOWNSTREAM_H
#define TLM_CLI_DOWNSTREAM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "loglik.h"
#include "text_tokens.h"

/* What scoring a set needs. */
typedef struct downstream_ctx {
    tlm_model *m;
    int64_t B, T;      /* sequences per forward pass, the window */
    text_tokens *text; /* text to ids */
    FILE *items;       /* NULL, or where each item's scores go as a JSON line */
} downstream_ctx;

/* Multiple choice: {"context": "...", "choices": ["...", ...], "label": i}. */
typedef struct choices_result {
    int64_t items;
    double accuracy;      /* the label has the highest log-likelihood */
    double accuracy_norm; /* ... the highest log-likelihood per byte of the choice */
    double chance;        /* the mean over items of 1 / number of choices */
} choices_result;
/* Reads, checks and scores the items of path; out NULL: only reads and
 * checks them (so that eval refuses a bad set before any long work). */
bool choices_evaluate(const downstream_ctx *c, const char *path, choices_result *out, tlm_err *err);

/* Cloze: {"text": "..."}; the target is the last word with the whitespace
 * before it. */
typedef struct cloze_result {
    int64_t items;
    double accuracy;      /* every target token is the argmax (teacher forced) */
    double target_loglik; /* the mean over items of the target's log-likelihood */
} cloze_result;
/* The same for cloze: out NULL only reads and checks. */
bool cloze_evaluate(const downstream_ctx *c, const char *path, cloze_result *out, tlm_err *err);

/* ---- the requests of a set (downstream_requests.c) ---- */
typedef struct request_pool {
    tlm_tok_ids ids;          /* every request's tokens, one after another */
    tlm_loglik_request *req;  /* tokens set by request_pool_score */
    int64_t *offset;          /* where request i's tokens start in ids */
    int64_t n, cap;
    tlm_loglik_result *score; /* request_pool_score's results */
    int64_t cut;              /* continuations longer than the window: only their last tokens scored */
} request_pool;

/* Adds the request context + continuation, cut from the left to fit T + 1
 * tokens. where ("data/x.jsonl:3: choice 1") starts the
 * message of an error. */
bool request_pool_add(request_pool *p, const tlm_tok_ids *context, const tlm_tok_ids *continuation, int64_t T,
                      const char *where, tlm_err *err);
/* Scores every request (p->score[i]). */
bool request_pool_score(request_pool *p, const downstream_ctx *c, tlm_err *err);
void request_pool_free(request_pool *p);
/* When continuations of path were cut (p->cut), says so on stderr, once:
 * their scores are of their last tokens only (what, e.g. "; acc/byte still
 * divides by all their bytes", ends the line). */
void request_pool_note_cut(const request_pool *p, const char *path, int64_t T, const char *what);

#endif
