/* libFuzzer target over the tokenizer (runtime/tokenizer): its three file
 * readers and its encoder. The first byte picks what the rest is:
 *   'T'  a tiktoken rank file           (tlm_tok_parse_tiktoken)
 *   'G'  encoder.json, a 0 byte, vocab.bpe  (tlm_tok_parse_gpt2)
 *   'H'  a tokenizer.json               (tlm_tok_parse_hf)
 *   'S'  a token shard                  (tlm_shard_parse, tlm_shard_check_ids)
 *   else text, encoded with two small tokenizers built at start (Llama 3's
 *        pattern from a rank file, GPT-2's from a tokenizer.json made of
 *        the same vocabulary), with special tokens recognised when the
 *        first byte is odd; decode(encode(text)) must be the text.
 * A file that loads is also used to encode and decode a fixed text. Beyond
 * crashes, leaks and hangs, a failed load must leave a one-line message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shard.h"
#include "tok_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tlm_tokenizer *tik, *gpt;

static void b64(tlm_strbuf *sb, const uint8_t *p, size_t n) {
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        uint32_t w = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        char out[4] = {a[w >> 18], a[(w >> 12) & 63], i + 1 < n ? a[(w >> 6) & 63] : '=', i + 2 < n ? a[w & 63] : '='};
        tlm_sb_append(sb, out, 4);
    }
}

static void init(void) {
    static const char *const extra[] = {"th",
                                        "he",
                                        "the",
                                        " t",
                                        " the",
                                        "in",
                                        "ing",
                                        "aa",
                                        "aaaa",
                                        "12",
                                        "123",
                                        " \n",
                                        "\n\n",
                                        "'s",
                                        "\xC3\xA9",
                                        "\xF0\x9F",
                                        "\x99\x82", /* the next token's right part: a merge must make it */
                                        "\xF0\x9F\x99\x82"};
    tlm_strbuf sb = {0};
    int rank = 0;
    for (int b = 0; b < 256; b++, rank++) {
        uint8_t c = (uint8_t)b;
        b64(&sb, &c, 1);
        tlm_sb_printf(&sb, " %d\n", rank);
    }
    for (size_t i = 0; i < sizeof extra / sizeof *extra; i++, rank++) {
        b64(&sb, (const uint8_t *)extra[i], strlen(extra[i]));
        tlm_sb_printf(&sb, " %d\n", rank);
    }
    tlm_err err = {""};
    tik = tlm_tok_parse_tiktoken(sb.buf, sb.len, "fuzz rank file", &err);
    if (!tik) {
        fprintf(stderr, "fuzz_tokenizer: %s\n", err.msg);
        abort();
    }
    /* the same vocabulary and merges as a tokenizer.json with GPT-2's pattern */
    tlm_strbuf js = {0}, tmp = {0};
    tlm_sb_puts(&js, "{\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"use_regex\":true},"
                     "\"added_tokens\":[{\"id\":274,\"content\":\"<|endoftext|>\",\"special\":true}],"
                     "\"model\":{\"type\":\"BPE\",\"vocab\":{");
    for (int32_t id = 0; id < 256 + (int32_t)(sizeof extra / sizeof *extra); id++) {
        tmp.len = 0;
        tok_bytelevel_encode(tik->pool + tik->off[id], tik->len[id], &tmp);
        if (id) tlm_sb_puts(&js, ",");
        tlm_json_write_string(&js, tmp.buf, tmp.len);
        tlm_sb_printf(&js, ":%d", (int)id);
    }
    tlm_sb_puts(&js, "},\"merges\":[");
    for (int32_t m = 0; m < tik->n_merges; m++) {
        tmp.len = 0;
        tok_bytelevel_encode(tik->pool + tik->off[tik->merge_left[m]], tik->len[tik->merge_left[m]], &tmp);
        tlm_sb_puts(&tmp, " ");
        tok_bytelevel_encode(tik->pool + tik->off[tik->merge_right[m]], tik->len[tik->merge_right[m]], &tmp);
        if (m) tlm_sb_puts(&js, ",");
        tlm_json_write_string(&js, tmp.buf, tmp.len);
    }
    tlm_sb_puts(&js, "]}}");
    gpt = tlm_tok_parse_hf(js.buf, js.len, "fuzz tokenizer.json", &err);
    if (!gpt) {
        fprintf(stderr, "fuzz_tokenizer: %s\n", err.msg);
        abort();
    }
    tlm_sb_free(&sb);
    tlm_sb_free(&js);
    tlm_sb_free(&tmp);
}

static void round_trip(tlm_tokenizer *t, const uint8_t *text, size_t n, bool special) {
    tlm_err err = {""};
    tlm_tok_ids ids = {0};
    tlm_strbuf out = {0};
    tlm_tok_options o = {.special = special};
    if (!tlm_tok_encode(t, text, n, &o, &ids, &err) || !tlm_tok_decode(t, ids.ids, ids.n, &out, &err)) {
        fprintf(stderr, "fuzz_tokenizer: %s\n", err.msg);
        abort();
    }
    if (out.len != n || (n && memcmp(out.buf, text, n))) {
        fprintf(stderr, "fuzz_tokenizer: decode(encode(x)) != x\n");
        abort();
    }
    for (size_t i = 0; i < ids.n; i++)
        if (ids.ids[i] < 0 || ids.ids[i] >= tlm_tok_vocab_size(t)) abort();
    tlm_tok_ids_free(&ids);
    tlm_sb_free(&out);
}

static void loaded(tlm_tokenizer *t, const tlm_err *err) {
    if (!t) {
        if (!err->msg[0] || strchr(err->msg, '\n')) abort();
        return;
    }
    static const char text[] = "The fuzzer's text: 123 \xC3\xA9t\xC3\xA9 \xF0\x9F\x99\x82 <|endoftext|>\n\n  x";
    round_trip(t, (const uint8_t *)text, sizeof text - 1, false);
    round_trip(t, (const uint8_t *)text, sizeof text - 1, true);
    tlm_tok_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!tik) init();
    if (size == 0) return 0;
    const char *rest = (const char *)data + 1;
    size_t n = size - 1;
    tlm_err err = {""};
    switch (data[0]) {
    case 'T': loaded(tlm_tok_parse_tiktoken(rest, n, "fuzz", &err), &err); break;
    case 'H': loaded(tlm_tok_parse_hf(rest, n, "fuzz", &err), &err); break;
    case 'S': {
        tlm_shard s;
        if (tlm_shard_parse((const uint8_t *)rest, n, "fuzz", &s, &err)) {
            if (s.tokens + s.count * s.width != (const uint8_t *)rest + n) abort();
            tlm_shard_check_ids(&s, "fuzz", &err);
        } else if (!err.msg[0] || strchr(err.msg, '\n')) abort();
        break;
    }
    case 'G': {
        const char *zero = memchr(rest, 0, n);
        size_t a = zero ? (size_t)(zero - rest) : n;
        const char *bpe = zero ? zero + 1 : rest + n;
        loaded(tlm_tok_parse_gpt2(rest, a, bpe, n - a - (zero ? 1 : 0), "fuzz", &err), &err);
        break;
    }
    default:
        round_trip(tik, (const uint8_t *)rest, n, data[0] & 1);
        round_trip(gpt, (const uint8_t *)rest, n, data[0] & 1);
    }
    return 0;
}
