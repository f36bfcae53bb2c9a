/* A Hugging Face tokenizer.json whose model is byte-level BPE: model.type
 * "BPE" with model.vocab (byte-level token -> id) and model.merges ("left
 * right" strings or [left, right] pairs; they must make every token but
 * the bytes and the added ones, so an empty or cut list is refused); no
 * normalizer; the pre-tokenizer either ByteLevel with use_regex (GPT-2's
 * pattern) or a Sequence of a Split on GPT-2's or Llama 3's pattern
 * (behavior Isolated) and a ByteLevel without use_regex;
 * model.ignore_merges as written. added_tokens must be special; they are
 * the special tokens (their content is plain text; an id past the model's
 * vocabulary extends it). Anything else is refused by name, since it would
 * not encode as its file means. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

static bool is_str(const tlm_json *j, const char *s) {
    return j && j->type == TLM_JSON_STRING && strlen(s) == j->len && !memcmp(j->str, s, j->len);
}

static bool is_false_or_null(const tlm_json *j) {
    return !j || j->type == TLM_JSON_NULL || (j->type == TLM_JSON_BOOL && !j->boolean);
}

static bool is_empty_or_null(const tlm_json *j) { return !j || j->type == TLM_JSON_NULL || is_str(j, ""); }

/* The pattern the pre-tokenizer stands for, or -1. */
static int pattern_of(const tlm_json *pre) {
    if (!pre || pre->type != TLM_JSON_OBJECT) return -1;
    const tlm_json *type = tlm_json_get(pre, "type");
    if (is_str(type, "ByteLevel")) {
        const tlm_json *re = tlm_json_get(pre, "use_regex");
        bool regex = !re || (re->type == TLM_JSON_BOOL && re->boolean);
        return regex && is_false_or_null(tlm_json_get(pre, "add_prefix_space")) ? TOK_PAT_GPT2 : -1;
    }
    if (!is_str(type, "Sequence")) return -1;
    const tlm_json *seq = tlm_json_get(pre, "pretokenizers");
    if (!seq || seq->type != TLM_JSON_ARRAY || seq->len != 2) return -1;
    const tlm_json *split = &seq->items[0], *bl = &seq->items[1];
    if (!is_str(tlm_json_get(split, "type"), "Split") || !is_str(tlm_json_get(split, "behavior"), "Isolated") ||
        !is_false_or_null(tlm_json_get(split, "invert")))
        return -1;
    if (!is_str(tlm_json_get(bl, "type"), "ByteLevel") || !is_false_or_null(tlm_json_get(bl, "add_prefix_space")))
        return -1;
    const tlm_json *re = tlm_json_get(bl, "use_regex");
    if (!re || re->type != TLM_JSON_BOOL || re->boolean) return -1;
    const tlm_json *pat = tlm_json_get(split, "pattern");
    const tlm_json *rx = pat && pat->type == TLM_JSON_OBJECT ? tlm_json_get(pat, "Regex") : NULL;
    if (is_str(rx, tok_llama3_pattern)) return TOK_PAT_LLAMA3;
    if (is_str(rx, tok_gpt2_pattern)) return TOK_PAT_GPT2;
    return -1;
}

static bool read_merges(tlm_tokenizer *t, const tlm_json *merges, const char *name, tlm_err *err) {
    if (!merges || merges->type != TLM_JSON_ARRAY) return tlm_fail(err, "%s is not an array", name);
    for (size_t i = 0; i < merges->len; i++) {
        const tlm_json *m = &merges->items[i];
        if (m->type == TLM_JSON_STRING) {
            if (!tok_merge_from_text(t, m->str, m->len, "merge", i + 1, name, err)) return false;
            continue;
        }
        if (m->type != TLM_JSON_ARRAY || m->len != 2 || m->items[0].type != TLM_JSON_STRING ||
            m->items[1].type != TLM_JSON_STRING)
            return tlm_fail(err, "%s: merge %zu is neither \"left right\" nor [left, right]", name, i + 1);
        size_t a = m->items[0].len, b = m->items[1].len;
        char *both = malloc(a + b + 1);
        if (!both) return tlm_fail(err, "out of memory");
        memcpy(both, m->items[0].str, a);
        both[a] = ' ';
        memcpy(both + a + 1, m->items[1].str, b);
        bool ok = tok_merge_from_text(t, both, a + b + 1, "merge", i + 1, name, err);
        free(both);
        if (!ok) return false;
    }
    return true;
}

/* The added tokens: all special, ids either inside the model's vocabulary
 * (with the same bytes) or continuing it without gaps. Builds the full
 * vocabulary into *tp. */
static bool read_added(tlm_tokenizer **tp, const tlm_json *added, const char *name, tlm_err *err) {
    if (!added || added->type == TLM_JSON_NULL) return true;
    if (added->type != TLM_JSON_ARRAY) return tlm_fail(err, "%s: added_tokens is not an array", name);
    tlm_tokenizer *t = *tp;
    int32_t base = t->n_vocab, top = base;
    for (size_t i = 0; i < added->len; i++) {
        const tlm_json *a = &added->items[i], *id = tlm_json_get(a, "id"), *content = tlm_json_get(a, "content"),
                       *special = tlm_json_get(a, "special");
        if (!id || !id->is_int || id->integer < 0 || id->integer > INT32_MAX / 2 || !content ||
            content->type != TLM_JSON_STRING || content->len == 0)
            return tlm_fail(err, "%s: added token %zu needs an integer id and a non-empty content", name, i + 1);
        if (!special || special->type != TLM_JSON_BOOL || !special->boolean)
            return tlm_fail(err,
                            "%s: added token %zu (id %lld) is not special (only special added tokens are supported)",
                            name, i + 1, (long long)id->integer);
        if (id->integer >= top) top = (int32_t)id->integer + 1;
    }
    /* a larger tokenizer holding the model's vocabulary, then the added */
    tlm_tokenizer *u = tok_new(top, err);
    if (!u) return false;
    for (int32_t i = 0; i < base; i++)
        if (!tok_set(u, i, t->pool + t->off[i], t->len[i], err)) goto fail;
    for (size_t i = 0; i < added->len; i++) {
        const tlm_json *a = &added->items[i], *content = tlm_json_get(a, "content");
        int32_t id = (int32_t)tlm_json_get(a, "id")->integer;
        if (id < base) {
            if (t->len[id] != content->len || memcmp(t->pool + t->off[id], content->str, content->len)) {
                tlm_fail(err, "%s: added token %d's content is not the model's token %d", name, (int)id, (int)id);
                goto fail;
            }
        } else if (u->off[id] == SIZE_MAX) {
            tlm_err e = {""};
            if (!tok_set(u, id, (const uint8_t *)content->str, content->len, &e)) {
                tlm_fail(err, "%s: %s", name, e.msg);
                goto fail;
            }
        }
    }
    for (size_t i = 0; i < added->len; i++)
        if (!tok_add_special(u, (int32_t)tlm_json_get(&added->items[i], "id")->integer, err)) goto fail;
    tlm_tok_free(t);
    *tp = u;
    return true;
fail:
    tlm_tok_free(u);
    return false;
}

tlm_tokenizer *tlm_tok_parse_hf(const char *text, size_t len, const char *name, tlm_err *err) {
    tlm_err e = {""};
    tlm_json *j = tlm_json_parse(text, len, &e);
    if (!j) return tlm_fail(err, "%s: %s", name, e.msg), NULL;
    tlm_tokenizer *t = NULL;
    const tlm_json *model = tlm_json_get(j, "model");
    if (!model || model->type != TLM_JSON_OBJECT) {
        tlm_fail(err, "%s: no \"model\" object (is this a tokenizer.json?)", name);
        goto fail;
    }
    const tlm_json *type = tlm_json_get(model, "type");
    if (type && !is_str(type, "BPE")) {
        tlm_fail(err, "%s: model.type is not \"BPE\" (only byte-level BPE models are supported)", name);
        goto fail;
    }
    if (!is_false_or_null(tlm_json_get(model, "byte_fallback")) ||
        !is_empty_or_null(tlm_json_get(model, "continuing_subword_prefix")) ||
        !is_empty_or_null(tlm_json_get(model, "end_of_word_suffix")) ||
        !(tlm_json_get(model, "dropout") == NULL || tlm_json_get(model, "dropout")->type == TLM_JSON_NULL)) {
        tlm_fail(err, "%s: the model uses byte_fallback, a subword prefix or suffix, or dropout (not supported)", name);
        goto fail;
    }
    const tlm_json *norm = tlm_json_get(j, "normalizer");
    if (norm && norm->type != TLM_JSON_NULL) {
        tlm_fail(err, "%s: the tokenizer has a normalizer (not supported)", name);
        goto fail;
    }
    int pattern = pattern_of(tlm_json_get(j, "pre_tokenizer"));
    if (pattern < 0) {
        tlm_fail(err,
                 "%s: the pre_tokenizer is neither GPT-2's (ByteLevel with its regex) nor a Split on GPT-2's or Llama "
                 "3's pattern followed by ByteLevel",
                 name);
        goto fail;
    }
    char what[4200];
    snprintf(what, sizeof what, "%s: model.vocab", name);
    if (!(t = tok_vocab_from_json(tlm_json_get(model, "vocab"), what, err))) goto fail;
    if (!read_added(&t, tlm_json_get(j, "added_tokens"), name, err) || !tok_index(t, name, err)) goto fail;
    snprintf(what, sizeof what, "%s: model.merges", name);
    if (!read_merges(t, tlm_json_get(model, "merges"), what, err) || !tok_check_merges(t, what, err)) goto fail;
    const tlm_json *im = tlm_json_get(model, "ignore_merges");
    if (im && im->type != TLM_JSON_BOOL && im->type != TLM_JSON_NULL) {
        /* "yes" read as false would encode other ids than the file means */
        tlm_fail(err, "%s: model.ignore_merges is neither true nor false", name);
        goto fail;
    }
    t->ignore_merges = im && im->type == TLM_JSON_BOOL && im->boolean;
    t->pattern = pattern;
    if (!tok_finish(t, err)) goto fail;
    tlm_json_free(j);
    return t;
fail:
    tlm_tok_free(t);
    tlm_json_free(j);
    return NULL;
}
