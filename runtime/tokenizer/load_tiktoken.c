/* A tiktoken rank file, read as Llama 3's tokenizer.model: one token per
 * line, its bytes in base64, a space, its rank; ranks 0..N-1 in order. The
 * rank is the token's id. Llama 3's pattern applies, pre-tokens found whole
 * in the vocabulary skip the merges (as tiktoken does), and Llama 3.1's 256
 * special tokens follow at ids N..N+255. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

enum { LLAMA3_SPECIALS = 256 };

static const char *const llama3_named[] = {
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|reserved_special_token_0|>",
    "<|reserved_special_token_1|>",
    "<|finetune_right_pad_id|>",
    "<|reserved_special_token_2|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eom_id|>",
    "<|eot_id|>",
    "<|python_tag|>",
};

/* The text of Llama 3's special token k (0..255) into buf. */
static const char *llama3_special(int k, char *buf, size_t n) {
    int named = (int)(sizeof llama3_named / sizeof *llama3_named);
    if (k < named) return llama3_named[k];
    snprintf(buf, n, "<|reserved_special_token_%d|>", k - named + 3);
    return buf;
}

static int b64_value(uint8_t c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Decodes base64 s[0..n) (padded to a multiple of 4) into out; the byte
 * count, or -1. */
static long b64_decode(const uint8_t *s, size_t n, uint8_t *out) {
    if (n == 0 || n % 4) return -1;
    long m = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4], pad = 0;
        for (int k = 0; k < 4; k++) {
            if (s[i + k] == '=' && i + 4 == n && k >= 2) {
                v[k] = 0, pad++;
                continue;
            }
            if (pad || (v[k] = b64_value(s[i + k])) < 0) return -1;
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        out[m++] = (uint8_t)(w >> 16);
        if (pad < 2) out[m++] = (uint8_t)(w >> 8);
        if (pad < 1) out[m++] = (uint8_t)w;
    }
    return m;
}

tlm_tokenizer *tlm_tok_parse_tiktoken(const char *text, size_t len, const char *name, tlm_err *err) {
    const uint8_t *s = (const uint8_t *)text;
    size_t lines = 0;
    for (size_t i = 0; i < len; i++) lines += s[i] == '\n';
    if (len && s[len - 1] != '\n') lines++;
    if (lines == 0) return tlm_fail(err, "%s: the rank file is empty", name), NULL;
    if (lines > INT32_MAX / 2) return tlm_fail(err, "%s: too many lines", name), NULL;
    int32_t n = 0; /* lines read */
    tlm_tokenizer *t = tok_new((int32_t)lines + LLAMA3_SPECIALS, err);
    uint8_t *buf = malloc(len + 1);
    if (!t || !buf) {
        if (t) tlm_fail(err, "out of memory");
        goto fail;
    }
    /* What a format error starts with: refused at its first line, the file
     * is most likely no tokenizer at all (a .tlm, a shard), so line 1's say
     * how it was read. */
    char lead[sizeof err->msg];
    snprintf(lead, sizeof lead,
             "%s is not a tokenizer: it does not start with `{` (a tokenizer.json), so it was read as a tiktoken rank "
             "file, and",
             name);
    for (size_t i = 0; i < len; n++) {
        const uint8_t *nl = memchr(s + i, '\n', len - i);
        size_t end = nl ? (size_t)(nl - s) : len, k = end;
        if (k > i && s[k - 1] == '\r') k--;
        const uint8_t *sp = memchr(s + i, ' ', k - i);
        if (!sp && k == i && end == len) break; /* nothing after the last newline */
        const char *bad = NULL;
        if (k == i) bad = "is empty";
        else if (!sp) bad = "has no space";
        else if (memchr(sp + 1, ' ', (size_t)(s + k - sp - 1))) bad = "has more than one space";
        else if (sp + 1 == s + k) bad = "has no rank after the space";
        if (bad) {
            tlm_fail(err, "%s line %d %s (expected \"BASE64 RANK\": the token in base64, one space, its rank)", lead,
                     (int)n + 1, bad);
            goto fail;
        }
        long m = sp == s + i ? 0 : b64_decode(s + i, (size_t)(sp - (s + i)), buf);
        if (m <= 0) {
            tlm_fail(err, "%s line %d: %s", lead, (int)n + 1,
                     m == 0 ? "the token is empty (a token is one byte or more)" : "the token is not valid base64");
            goto fail;
        }
        int64_t rank = 0;
        const uint8_t *p = sp + 1;
        for (; p < s + k && *p >= '0' && *p <= '9'; p++) rank = rank > INT32_MAX ? rank : rank * 10 + (*p - '0');
        if (p < s + k || rank != n) {
            char shown[48];
            tok_escape(sp + 1, (size_t)(s + k - sp - 1), shown, sizeof shown);
            if (p < s + k) tlm_fail(err, "%s line %d: the rank `%s` is not a decimal number", lead, (int)n + 1, shown);
            else
                tlm_fail(err, "%s line %d: the rank is %s, not %d (ranks must run 0, 1, 2, ... in order)", lead,
                         (int)n + 1, shown, (int)n);
            goto fail;
        }
        tlm_err e = {""};
        if (!tok_set(t, n, buf, (size_t)m, &e)) {
            tlm_fail(err, "%s: %s", name, e.msg);
            goto fail;
        }
        i = end + 1;
        if (n == 0) snprintf(lead, sizeof lead, "%s:", name); /* past line 1 */
    }
    if (n == 0) { /* a lone "\r": no line, so no token at all */
        tlm_fail(err, "%s: holds no ranks (expected lines \"BASE64 RANK\": the token in base64, one space, its rank)",
                 name);
        goto fail;
    }
    t->n_vocab = n + LLAMA3_SPECIALS;
    for (int k = 0; k < LLAMA3_SPECIALS; k++) {
        char sb[64];
        const char *sp = llama3_special(k, sb, sizeof sb);
        if (!tok_set(t, n + k, (const uint8_t *)sp, strlen(sp), err) || !tok_add_special(t, n + k, err)) goto fail;
    }
    if (!tok_index(t, name, err) || !tok_merges_from_ranks(t, n, name, err)) goto fail;
    t->pattern = TOK_PAT_LLAMA3;
    t->ignore_merges = true;
    if (!tok_finish(t, err)) goto fail;
    free(buf);
    return t;
fail:
    free(buf);
    tlm_tok_free(t);
    return NULL;
}
