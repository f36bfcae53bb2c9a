/* GPT-2's files: encoder.json maps each token, written in byte-level
 * characters (bytelevel.c), to its id; vocab.bpe lists the merges in rank
 * order, one "left right" per line after a "#version" line; every token
 * but the bytes and the special one must be some merge's result (so a cut
 * file is refused). The token "<|endoftext|>", when present, is special. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

/* The bytes of a byte-level token into t's vocabulary as id. */
static bool set_bytelevel(tlm_tokenizer *t, int32_t id, const char *s, size_t n, const char *name, tlm_err *err) {
    uint8_t *b = malloc(n ? n : 1);
    if (!b) return tlm_fail(err, "out of memory");
    long m = tok_bytelevel_decode(s, n, b);
    tlm_err e = {""};
    bool ok = true;
    if (m <= 0) ok = tlm_fail(err, "%s: token %d is not written in byte-level characters", name, (int)id);
    else if (!tok_set(t, id, b, (size_t)m, &e)) ok = tlm_fail(err, "%s: %s", name, e.msg);
    free(b);
    return ok;
}

/* The id of the byte-level token s[0..n), or -1. */
static int32_t lookup_bytelevel(const tlm_tokenizer *t, const char *s, size_t n) {
    uint8_t buf[256];
    uint8_t *b = n <= sizeof buf ? buf : malloc(n);
    if (!b) return -1;
    long m = tok_bytelevel_decode(s, n, b);
    int32_t id = m > 0 ? tok_lookup(t, b, (size_t)m) : -1;
    if (b != buf) free(b);
    return id;
}

/* Builds t's vocabulary from the JSON object vocab (token -> id) plus, when
 * extra is non-NULL, the entries it adds (used by tokenizer.json for its
 * added tokens, written as plain text); shared with load_hf.c. */
tlm_tokenizer *tok_vocab_from_json(const tlm_json *vocab, const char *name, tlm_err *err) {
    if (!vocab || vocab->type != TLM_JSON_OBJECT) return tlm_fail(err, "%s is not a JSON object", name), NULL;
    if (vocab->len == 0 || vocab->len > INT32_MAX / 2)
        return tlm_fail(err, "%s: the vocabulary has %zu tokens", name, vocab->len), NULL;
    tlm_tokenizer *t = tok_new((int32_t)vocab->len, err);
    if (!t) return NULL;
    for (size_t i = 0; i < vocab->len; i++) {
        const tlm_json *v = &vocab->items[i];
        if (v->type != TLM_JSON_NUMBER || !v->is_int || v->integer < 0 || v->integer >= (int64_t)vocab->len) {
            char id[48];
            if (v->type != TLM_JSON_NUMBER) snprintf(id, sizeof id, "is not a number");
            else if (!v->is_int) snprintf(id, sizeof id, "%.17g is not an integer", v->number);
            else snprintf(id, sizeof id, "%lld is out of range", (long long)v->integer);
            tlm_fail(
                err,
                "%s: the id of the vocabulary's token %zu (in file order) %s: the ids of %zu tokens are 0..%zu, each once",
                name, i + 1, id, vocab->len, vocab->len - 1);
            tlm_tok_free(t);
            return NULL;
        }
        if (!set_bytelevel(t, (int32_t)v->integer, vocab->keys[i], vocab->key_lens[i], name, err)) {
            tlm_tok_free(t);
            return NULL;
        }
    }
    return t;
}

/* One merge "left right" (byte-level tokens) of s[0..n). */
bool tok_merge_from_text(tlm_tokenizer *t, const char *s, size_t n, const char *unit, size_t at, const char *name,
                         tlm_err *err) {
    const char *sp = memchr(s, ' ', n);
    if (!sp || sp == s || sp + 1 == s + n || memchr(sp + 1, ' ', (size_t)(s + n - sp - 1)))
        return tlm_fail(err, "%s: %s %zu is not two tokens separated by one space", name, unit, at);
    int32_t l = lookup_bytelevel(t, s, (size_t)(sp - s)), r = lookup_bytelevel(t, sp + 1, (size_t)(s + n - sp - 1));
    if (l < 0 || r < 0) return tlm_fail(err, "%s: %s %zu names a token that is not in the vocabulary", name, unit, at);
    return tok_add_merge(t, l, r, name, unit, at, err);
}

tlm_tokenizer *tlm_tok_parse_gpt2(const char *encoder_json, size_t encoder_len, const char *vocab_bpe, size_t vocab_len,
                                  const char *name, tlm_err *err) {
    tlm_err e = {""};
    tlm_json *j = tlm_json_parse(encoder_json, encoder_len, &e);
    if (!j) return tlm_fail(err, "%s/encoder.json: %s", name, e.msg), NULL;
    char what[4200];
    snprintf(what, sizeof what, "%s/encoder.json", name);
    tlm_tokenizer *t = tok_vocab_from_json(j, what, err);
    tlm_json_free(j);
    if (!t || !tok_index(t, what, err)) goto fail;
    snprintf(what, sizeof what, "%s/vocab.bpe", name);
    size_t line = 0;
    for (size_t i = 0; i < vocab_len;) {
        const char *nl = memchr(vocab_bpe + i, '\n', vocab_len - i);
        size_t end = nl ? (size_t)(nl - vocab_bpe) : vocab_len, n = end - i;
        const char *s = vocab_bpe + i;
        line++;
        if (n && s[n - 1] == '\r') n--;
        bool header = line == 1 && n >= 8 && !memcmp(s, "#version", 8);
        if (!header && n && !tok_merge_from_text(t, s, n, "line", line, what, err)) goto fail;
        i = end + 1;
    }
    static const char eot[] = "<|endoftext|>";
    int32_t id = tok_lookup(t, (const uint8_t *)eot, sizeof eot - 1);
    if (id >= 0 && !tok_add_special(t, id, err)) goto fail;
    t->pattern = TOK_PAT_GPT2;
    if (!tok_check_merges(t, what, err) || !tok_finish(t, err)) goto fail;
    return t;
fail:
    tlm_tok_free(t);
    return NULL;
}
