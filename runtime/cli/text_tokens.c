#include "text_tokens.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool text_tokens_open(text_tokens *t, const char *ckpt_tokenizer, const char *ckpt_path, const char *tokenizer_path,
                      const char *model_tokenizer, int64_t vocab, tlm_err *err) {
    *t = (text_tokens){.hash = "bytes", .vocab = vocab};
    if (!ckpt_tokenizer && !tokenizer_path && !model_tokenizer) ckpt_tokenizer = "bytes"; /* eval --check */
    bool bytes = ckpt_tokenizer && !strcmp(ckpt_tokenizer, "bytes");
    if (bytes && tokenizer_path)
        return tlm_fail(
            err,
            "--tokenizer %s: the checkpoint %s was trained on text as bytes, not with a tokenizer; drop --tokenizer",
            tokenizer_path, ckpt_path);
    if (bytes) return true;
    const char *flag = tokenizer_path;
    if (!tokenizer_path) tokenizer_path = model_tokenizer;
    if (!tokenizer_path)
        return tlm_fail(
            err, "the checkpoint %s was trained on tokens of tokenizer %s: it needs --tokenizer with that tokenizer",
            ckpt_path, ckpt_tokenizer);
    tlm_err e = {""};
    t->tok = tlm_tok_load(tokenizer_path, &e);
    if (!t->tok && !flag) /* a path compiled into model.so: the file may have moved since */
        return tlm_fail(err, "%s (the tokenizer the model was compiled with; --tokenizer PATH names another)", e.msg);
    if (!t->tok) return tlm_fail(err, "%s", e.msg);
    char *hex = t->hash;
    tlm_tok_hash_hex(tlm_tok_hash(t->tok), hex);
    if (ckpt_tokenizer && strcmp(hex, ckpt_tokenizer)) {
        text_tokens_close(t);
        return tlm_fail(err, "%s%s is tokenizer %s, but the checkpoint %s was trained with tokenizer %s",
                        flag ? "--tokenizer " : "the model's tokenizer ", tokenizer_path, hex, ckpt_path,
                        ckpt_tokenizer);
    }
    return true;
}

bool text_tokens_append(tlm_tok_ids *out, const int32_t *ids, size_t n, tlm_err *err) {
    if (out->n + n > out->cap) {
        size_t c = out->cap ? out->cap : 256;
        while (c < out->n + n) c *= 2;
        int32_t *p = realloc(out->ids, c * sizeof *p);
        if (!p) return tlm_fail(err, "out of memory");
        out->ids = p, out->cap = c;
    }
    if (n) memcpy(out->ids + out->n, ids, n * sizeof *ids);
    out->n += n;
    return true;
}

bool text_tokens_encode(text_tokens *t, const char *s, size_t n, tlm_tok_ids *out, tlm_err *err) {
    size_t from = out->n;
    if (t->tok) {
        if (!tlm_tok_encode(t->tok, (const uint8_t *)s, n, NULL, out, err)) return false;
    } else {
        for (size_t i = 0; i < n; i++) {
            int32_t byte = (uint8_t)s[i];
            if (!text_tokens_append(out, &byte, 1, err)) return false;
        }
    }
    for (size_t i = from; i < out->n; i++)
        if (out->ids[i] >= t->vocab)
            return tlm_fail(err, "%s %d is outside the model's vocabulary of %lld", t->tok ? "token" : "byte",
                            (int)out->ids[i], (long long)t->vocab);
    return true;
}

void text_tokens_close(text_tokens *t) {
    tlm_tok_free(t->tok);
    t->tok = NULL;
}
