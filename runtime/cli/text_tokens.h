/* Text to the token ids a checkpoint reads: its bytes for a checkpoint
 * trained on text (tokenizer "bytes"), or the encoding of the tokenizer it
 * was trained with (a shards-trained checkpoint records that tokenizer's
 * hash; the file given with --tokenizer must have the same hash). Used by
 * eval's downstream sets, whose items are text. */
#ifndef TLM_CLI_TEXT_TOKENS_H
#define TLM_CLI_TEXT_TOKENS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"

typedef struct text_tokens {
    tlm_tokenizer *tok; /* NULL: bytes */
    char hash[65];      /* tok's hash in hex, or "bytes" */
    int64_t vocab;      /* the model's: every id must be below it */
} text_tokens;

/* Sets t up for a checkpoint (ckpt_path, for messages) whose tokenizer is
 * ckpt_tokenizer ("bytes" or a hash in hex), with tokenizer_path the
 * --tokenizer given (NULL: none), else model_tokenizer, the one model.so
 * names (`tokenizer = "..."` in its .tlm; NULL: none). A checkpoint trained
 * on shards needs one, with its hash; one trained on bytes takes none.
 * ckpt_tokenizer NULL (no checkpoint: eval --check): the tokenizer given,
 * else the model's, else bytes. false with a reason. */
bool text_tokens_open(text_tokens *t, const char *ckpt_tokenizer, const char *ckpt_path, const char *tokenizer_path,
                      const char *model_tokenizer, int64_t vocab, tlm_err *err);
/* Appends the ids of s[0..n) to out. false with a reason (an id at or past
 * the model's vocabulary: a byte-level model of 128 tokens reads no UTF-8
 * beyond ASCII; out of memory). */
bool text_tokens_encode(text_tokens *t, const char *s, size_t n, tlm_tok_ids *out, tlm_err *err);
/* Appends ids[0..n) to out; false when out of memory. */
bool text_tokens_append(tlm_tok_ids *out, const int32_t *ids, size_t n, tlm_err *err);
void text_tokens_close(text_tokens *t);

#endif
