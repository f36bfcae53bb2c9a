#include "tokenizer_reader.h"

#include <stdio.h>
#include <string.h>

#include "tokenizer.h"

bool tokenizer_reader_load(const char *path, int64_t *vocab, uint8_t hash[32], char *why, size_t whylen) {
    tlm_err err = {""};
    tlm_tokenizer *t = tlm_tok_load(path, &err);
    if (!t) {
        snprintf(why, whylen, "%s", err.msg);
        return false;
    }
    *vocab = tlm_tok_vocab_size(t);
    memcpy(hash, tlm_tok_hash(t), 32);
    tlm_tok_free(t);
    return true;
}
