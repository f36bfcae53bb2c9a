/* tlm's subword tokenizers: byte-level BPE as GPT-2, Llama 3 and Hugging
 * Face's byte-level BPE models define it.
 *
 * A tokenizer is a vocabulary (token id -> bytes, ids 0..N-1 without gaps),
 * an ordered list of merges (pairs of ids; earlier merges apply first), a
 * pre-tokenization pattern (GPT-2's or Llama 3's regular expression,
 * implemented by hand in pretokenize.c), whether a pre-token found whole in
 * the vocabulary skips the merges (Llama 3's ignore_merges), and the special
 * tokens (ids whose text is matched in the input only on request).
 *
 * Three file formats load into it:
 *   - GPT-2: a folder holding encoder.json and vocab.bpe;
 *   - a tiktoken rank file (Llama 3's tokenizer.model: base64 token, space,
 *     rank, one per line, ranks 0..N-1 in order), read with Llama 3's
 *     pattern and its 256 special tokens at ids N..N+255; the merges are
 *     derived from the ranks as Hugging Face's converter does (every split
 *     of a token into two tokens, ordered by the token's rank, then the
 *     ranks of the left and right parts);
 *   - a Hugging Face tokenizer.json whose model is byte-level BPE.
 *
 * Encoding: the input is split into pre-tokens; each pre-token's bytes
 * start as one token per byte and the merge with the lowest rank anywhere
 * in it is applied first, the leftmost first among equals (a heap over a
 * linked list: O(n log n) in the pre-token's length). By default special
 * tokens are not recognised in the input (their text encodes as ordinary
 * text) and no beginning-of-text token is added; options turn on both.
 * Decoding concatenates the tokens' bytes, so decode(encode(x)) == x for
 * every byte string x (invalid UTF-8 included: see unicode.h).
 *
 * Identity: the SHA-256 of the canonical content (the vocabulary's bytes by
 * id, the merges as id pairs in order, the pattern's text, the
 * ignore_merges flag and the special tokens' ids), so the same tokenizer
 * read from two formats has the same hash.
 *
 * Readers fail on malformed input with a one-line message in a tlm_err
 * (errmsg.h) and never abort; a merges list (GPT-2's, tokenizer.json's)
 * that leaves some token of more than one byte, not special, made by no
 * merge counts as malformed (cut short), as does a repeated merge.
 * tlm_tok_encode keeps a cache of pre-tokens in the tokenizer, so it is not
 * safe for concurrent calls; threads encode through encoders of their own
 * (tlm_tok_encoder_new). Decoding is safe. */
#ifndef TLM_TOKENIZER_H
#define TLM_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "errmsg.h"
#include "tlm_rt/json.h"

typedef struct tlm_tokenizer tlm_tokenizer;

/* Files larger than this are refused unread. */
#define TLM_TOK_MAX_FILE ((uint64_t)1 << 30)

/* Loads path: a folder (GPT-2's encoder.json and vocab.bpe), a file whose
 * first non-blank byte is '{' (tokenizer.json), or else a tiktoken rank
 * file. NULL with a reason in err. */
tlm_tokenizer *tlm_tok_load(const char *path, tlm_err *err);

/* The readers, from bytes in memory (`name` is used in messages). */
tlm_tokenizer *tlm_tok_parse_gpt2(const char *encoder_json, size_t encoder_len, const char *vocab_bpe, size_t vocab_len,
                                  const char *name, tlm_err *err);
tlm_tokenizer *tlm_tok_parse_tiktoken(const char *text, size_t len, const char *name, tlm_err *err);
tlm_tokenizer *tlm_tok_parse_hf(const char *text, size_t len, const char *name, tlm_err *err);

void tlm_tok_free(tlm_tokenizer *t);

int32_t tlm_tok_vocab_size(const tlm_tokenizer *t);
int32_t tlm_tok_merge_count(const tlm_tokenizer *t);
/* The tokenizer's identity (see above): 32 bytes. */
const uint8_t *tlm_tok_hash(const tlm_tokenizer *t);
/* "gpt2" or "llama3": the pre-tokenization pattern's name. */
const char *tlm_tok_pattern_name(const tlm_tokenizer *t);
/* The beginning-of-text token (<|begin_of_text|> when it is a special
 * token), or -1 when the tokenizer has none. */
int32_t tlm_tok_bos(const tlm_tokenizer *t);
/* The end-of-text token that separates documents: <|endoftext|> or
 * <|end_of_text|>, whichever is a special token, or -1. */
int32_t tlm_tok_eot(const tlm_tokenizer *t);
/* A tokenizer's identity (tlm_tok_hash, or a shard's copy of it) as 64 hex
 * digits and a NUL: how checkpoints and messages write it. */
void tlm_tok_hash_hex(const uint8_t hash[32], char hex[65]);

/* The id of the token whose bytes are text[0..n), or -1; *special tells
 * whether it is a special token. */
int32_t tlm_tok_find(const tlm_tokenizer *t, const char *text, size_t n, bool *special);

typedef struct tlm_tok_options {
    bool special; /* recognise special tokens' text in the input */
    bool bos;     /* start with the beginning-of-text token */
} tlm_tok_options;

/* A growable array of token ids. */
typedef struct tlm_tok_ids {
    int32_t *ids;
    size_t n, cap;
} tlm_tok_ids;
void tlm_tok_ids_free(tlm_tok_ids *v);

/* Appends the ids of text[0..n) to out. False (out of memory, or bos asked
 * of a tokenizer without one) with a reason in err. */
bool tlm_tok_encode(tlm_tokenizer *t, const uint8_t *text, size_t n, const tlm_tok_options *o, tlm_tok_ids *out,
                    tlm_err *err);

/* An encoder: the pre-token cache and the merge scratch of one thread.
 * The tokenizer must outlive it. NULL when out of memory (err). */
typedef struct tlm_tok_encoder tlm_tok_encoder;
tlm_tok_encoder *tlm_tok_encoder_new(const tlm_tokenizer *t, tlm_err *err);
void tlm_tok_encoder_free(tlm_tok_encoder *e);
/* tlm_tok_encode through e: the same ids. */
bool tlm_tok_encoder_run(tlm_tok_encoder *e, const uint8_t *text, size_t n, const tlm_tok_options *o, tlm_tok_ids *out,
                         tlm_err *err);

/* The first position j in [from, n) where text splits into two parts that
 * encode (without special tokens or BOS) to the ids of the whole, for
 * every pattern and whatever the bytes around it: a newline after an ASCII
 * letter or digit (the pre-token holding the letter or digit ends there in
 * both patterns, and every pre-token starts afresh after it); n when there
 * is none. Lets threads encode the parts of one text. */
size_t tlm_tok_split_point(const uint8_t *text, size_t n, size_t from);

/* Appends the bytes of ids[0..n) to out; false for an id outside the
 * vocabulary (or out of memory) with a reason in err. */
bool tlm_tok_decode(const tlm_tokenizer *t, const int32_t *ids, size_t n, tlm_strbuf *out, tlm_err *err);

#endif
