/* Byte-level BPE training (GPT-2's recipe): the text is split with GPT-2's
 * pre-tokenization pattern, identical pre-tokens are counted, and merges are
 * learned greedily: each step merges, in every pre-token, the adjacent pair
 * of tokens with the highest total count (a pre-token's count times the
 * pair's occurrences in it, non-overlapping, left to right).
 *
 * Deterministic tie-breaking: among pairs with the same count, the one
 * whose left token id is smallest, then whose right token id is smallest.
 * Ids: the 256 bytes are 0..255 (id = byte value); each merge's result gets
 * the next id, unless its bytes are already a token (two merge paths can
 * spell the same bytes), whose id it then reuses. Training stops when the
 * vocabulary holds vocab - 1 tokens or no pair is left; <|endoftext|> is
 * then added as the last id, a special token.
 *
 * The result is written as a Hugging Face tokenizer.json (byte-level BPE,
 * GPT-2's pre-tokenizer), which tlm_tok_load reads back. */
#ifndef TLM_TOK_TRAIN_H
#define TLM_TOK_TRAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "errmsg.h"
#include "tlm_rt/json.h"

typedef struct tlm_bpe_trainer tlm_bpe_trainer;

tlm_bpe_trainer *tlm_bpe_new(tlm_err *err);
void tlm_bpe_free(tlm_bpe_trainer *b);

/* Pre-tokenizes text[0..n) and adds its pre-tokens to the counts (each call
 * is a separate document: no pre-token spans two calls). */
bool tlm_bpe_add_text(tlm_bpe_trainer *b, const uint8_t *text, size_t n, tlm_err *err);

/* Learns merges until the vocabulary has vocab tokens (>= 257, with
 * <|endoftext|>), or fewer when no pair is left to merge (every pre-token
 * is one token: tlm_bpe_stats tells), and appends the tokenizer.json to
 * out. progress, when not NULL, is called now and then with the tokens so
 * far. */
bool tlm_bpe_train(tlm_bpe_trainer *b, int32_t vocab, void (*progress)(void *ctx, int32_t tokens, int32_t vocab),
                   void *ctx, tlm_strbuf *out, tlm_err *err);

/* What was counted: bytes of text, distinct pre-tokens, merges learned,
 * and the tokens written (<|endoftext|> included; below the vocab asked
 * when no pair was left). */
void tlm_bpe_stats(const tlm_bpe_trainer *b, uint64_t *bytes, size_t *words, int32_t *merges, int32_t *tokens);

#endif
