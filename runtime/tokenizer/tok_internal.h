/* What the tokenizer's files share: the tokenizer's layout, the builder the
 * three readers fill (vocab.c), the byte-level character mapping of GPT-2
 * (bytelevel.c), the pre-tokenizers (pretokenize.c). */
#ifndef TLM_TOK_INTERNAL_H
#define TLM_TOK_INTERNAL_H

#include "tokenizer.h"

enum { TOK_PAT_GPT2, TOK_PAT_LLAMA3 };

/* The patterns' text, as the files and the references write them. */
extern const char tok_gpt2_pattern[], tok_llama3_pattern[];

/* The end of the pre-token that starts at s[i] (i < n) under pattern. */
size_t tok_pretoken_end(int pattern, const uint8_t *s, size_t n, size_t i);

/* A bytes -> id map (open addressing over the vocabulary's pool). */
typedef struct tok_map {
    int32_t *slot; /* -1: empty */
    size_t mask;
} tok_map;

struct tlm_tokenizer {
    int32_t n_vocab;
    uint8_t *pool; /* every token's bytes */
    size_t pool_len, pool_cap;
    size_t *off; /* token i is pool[off[i] .. off[i] + len[i]) */
    uint32_t *len;
    tok_map vocab;
    int32_t byte_id[256]; /* the one-byte tokens */

    int32_t n_merges;
    int32_t *merge_left, *merge_right; /* in rank order */
    /* (left, right) -> rank and result, open addressing */
    uint64_t *mkey; /* ((uint64_t)left << 32 | right) + 1; 0: empty */
    int32_t *mrank, *mresult;
    size_t mmask;

    int pattern;
    bool ignore_merges;
    int32_t n_special;
    int32_t *special; /* ids, ascending */
    uint8_t special_first[32]; /* bitmap of the specials' first bytes */
    int32_t bos;
    uint8_t hash[32];
    tlm_tok_encoder *encoder; /* tlm_tok_encode's, made on its first call */
};

/* ---- building (vocab.c) ---- */

/* The hashes of the tables: of bytes (FNV-1a, mixed) and of a 64-bit key. */
uint64_t tok_hash_bytes(const uint8_t *p, size_t n);
uint64_t tok_hash_u64(uint64_t key);

/* An empty tokenizer for n tokens whose bytes are to be set; NULL when out
 * of memory (reason in err). */
tlm_tokenizer *tok_new(int32_t n, tlm_err *err);
/* Sets token id's bytes (each id exactly once). */
bool tok_set(tlm_tokenizer *t, int32_t id, const uint8_t *bytes, size_t n, tlm_err *err);
/* The id of bytes, or -1. */
int32_t tok_lookup(const tlm_tokenizer *t, const uint8_t *bytes, size_t n);
/* After every id is set: builds the map, checks there are no duplicates
 * and that every byte has its token. */
bool tok_index(tlm_tokenizer *t, const char *name, tlm_err *err);
/* Appends a merge (the ids must be indexed) and enters it in the merge
 * map: the result left+right must be in the vocabulary and the pair not
 * merged already. Messages place it as "UNIT AT" ("line 12" of vocab.bpe,
 * "merge 12" of model.merges), or by its rank when unit is NULL. */
bool tok_add_merge(tlm_tokenizer *t, int32_t left, int32_t right, const char *name, const char *unit, size_t at,
                   tlm_err *err);
/* After the merges and the special tokens: every token of more than one
 * byte that is not special must be some merge's result, else the merges
 * were cut short (a truncated vocab.bpe, an empty model.merges) and the
 * tokens no merge makes could never be produced. For the readers of a
 * merges list; the merges derived from tiktoken's ranks need no check. */
bool tok_check_merges(const tlm_tokenizer *t, const char *name, tlm_err *err);
/* Marks id special. */
bool tok_add_special(tlm_tokenizer *t, int32_t id, tlm_err *err);
/* Derives the merges from the ranks (ids) as Hugging Face's tiktoken
 * converter does: see tokenizer.h. */
bool tok_merges_from_ranks(tlm_tokenizer *t, int32_t n_ranks, const char *name, tlm_err *err);
/* Builds the special-token tables, computes the hash. */
bool tok_finish(tlm_tokenizer *t, tlm_err *err);

/* (left, right)'s merge rank and result (*result), or -1. */
int32_t tok_merge_rank(const tlm_tokenizer *t, int32_t left, int32_t right, int32_t *result);

/* b[0..n) for a message, into out (cap bytes, at least 8): printable ASCII
 * as it is, other bytes (and \ and `) as \xNN, cut short with "...". */
void tok_escape(const uint8_t *b, size_t n, char *out, size_t cap);

/* ---- shared by the readers (load_gpt2.c) ---- */

/* A tokenizer whose vocabulary is the JSON object vocab (byte-level token
 * -> id; ids 0..len-1), not yet indexed. */
tlm_tokenizer *tok_vocab_from_json(const tlm_json *vocab, const char *name, tlm_err *err);
/* Appends the merge "left right" (byte-level tokens) of s[0..n), placed
 * as "UNIT AT" in messages (tok_add_merge). */
bool tok_merge_from_text(tlm_tokenizer *t, const char *s, size_t n, const char *unit, size_t at, const char *name,
                         tlm_err *err);

/* ---- GPT-2's byte-level characters (bytelevel.c) ---- */

/* Decodes a token written in GPT-2's byte-to-character mapping (UTF-8 of
 * code points each standing for one byte) into out (room for n bytes);
 * the number of bytes, or -1 when a character stands for no byte. */
long tok_bytelevel_decode(const char *s, size_t n, uint8_t *out);
/* Appends bytes b[0..n) written in those characters (UTF-8) to out. */
void tok_bytelevel_encode(const uint8_t *b, size_t n, tlm_strbuf *out);

#endif
