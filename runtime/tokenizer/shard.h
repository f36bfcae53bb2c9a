/* Pre-tokenized shards: a corpus's token ids in one file, so that training
 * can read (memory-map) them instead of tokenizing again. The format (all
 * integers little-endian):
 *
 *   offset  size  field
 *        0     8  magic "TLMSHARD"
 *        8     4  version (1)
 *       12     4  token width in bytes: 2 (vocabulary <= 65,536) or 4
 *       16     8  count: the number of tokens
 *       24    32  the tokenizer's identity (tlm_tok_hash)
 *       56     4  the tokenizer's vocabulary size
 *       60     4  the end-of-text id that separates documents, or -1
 *       64     8  (version 2) the number of text bytes the tokens encode
 *                 (the documents' bytes; an end-of-text token counts none)
 *   64 or 72      count tokens of `width` bytes each, and nothing after
 *
 * Version 1 (64-byte header, no byte count) is still read; tokenize writes
 * version 2.
 *
 * The header is read and checked in one place (tlm_shard_parse): a wrong
 * magic, an unknown version or width, a size that is not exactly the header
 * plus count tokens, an end-of-text id outside the vocabulary is one line
 * in a tlm_err. Writing (tlm-run tokenize) goes through a temporary file
 * renamed into place. */
#ifndef TLM_TOK_SHARD_H
#define TLM_TOK_SHARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "errmsg.h"

#define TLM_SHARD_MAGIC "TLMSHARD"
enum { TLM_SHARD_VERSION = 2, TLM_SHARD_HEADER_SIZE = 72, TLM_SHARD_V1_HEADER_SIZE = 64 };

typedef struct tlm_shard {
    uint32_t version, width;
    uint64_t count;
    uint8_t tokenizer[32];
    uint32_t vocab;
    int32_t eot;
    uint64_t bytes;        /* version 2: the text bytes the tokens encode; version 1: 0 */
    uint32_t header_size;  /* parse: 64 (version 1) or 72 */
    const uint8_t *tokens; /* parse: into the bytes given */
} tlm_shard;

/* The header of s (version 2), into out[TLM_SHARD_HEADER_SIZE]. */
void tlm_shard_header(const tlm_shard *s, uint8_t *out);

/* Checks data[0..size) (a whole shard file) and fills out; false with a
 * reason (prefixed by name) in err. The token ids themselves are not read:
 * see tlm_shard_check_ids. */
bool tlm_shard_parse(const uint8_t *data, size_t size, const char *name, tlm_shard *out, tlm_err *err);

/* Token i of a parsed shard. */
static inline uint32_t tlm_shard_token(const tlm_shard *s, uint64_t i) {
    const uint8_t *p = s->tokens + i * s->width;
    return s->width == 2 ? (uint32_t)p[0] | (uint32_t)p[1] << 8
                         : (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Every id < the vocabulary size; false naming the first that is not. */
bool tlm_shard_check_ids(const tlm_shard *s, const char *name, tlm_err *err);

#endif
