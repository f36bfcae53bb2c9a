/* Tokenizer tests that need no reference encoder (runtime/tokenizer):
 *   - identity: GPT-2 read from encoder.json + vocab.bpe and from a
 *     tokenizer.json hashes equal, Llama 3 from tokenizer.model and from a
 *     tokenizer.json hashes equal, and the two families differ;
 *   - encode then decode is the identity on random bytes (invalid UTF-8
 *     included) and on long runs without spaces (1 MB each, which a
 *     quadratic merge loop could not finish in the test's time);
 *   - a small hand-made vocabulary: merge order, leftmost-first ties, the
 *     special-token options, decode's range check;
 *   - malformed files of each format: a one-line error, never a crash;
 *   - merges cut short (an empty or truncated vocab.bpe, an empty
 *     model.merges) or repeated are refused, and the messages place the
 *     fault (vocab.bpe's line, the rank file's line and what is wrong).
 * Usage: test_tokenizer REFDIR (what extract_vocab.mjs wrote). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tokenizer.h"

static int failures;
#define CHECK(cond, ...)                                \
    do {                                                \
        if (!(cond)) {                                  \
            failures++;                                 \
            printf("FAIL %s:%d: ", __FILE__, __LINE__); \
            printf(__VA_ARGS__);                        \
            putchar('\n');                              \
        }                                               \
    } while (0)

static tlm_tokenizer *load(const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    tlm_err err = {""};
    tlm_tokenizer *t = tlm_tok_load(path, &err);
    CHECK(t, "%s does not load: %s", path, err.msg);
    return t;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (uint32_t)rng_state;
}

/* encode then decode gives text back. */
static void round_trip(tlm_tokenizer *t, const uint8_t *text, size_t n, const char *what) {
    tlm_err err = {""};
    tlm_tok_ids ids = {0};
    tlm_strbuf out = {0};
    bool ok = tlm_tok_encode(t, text, n, NULL, &ids, &err);
    CHECK(ok, "%s: encode failed: %s", what, err.msg);
    ok = ok && tlm_tok_decode(t, ids.ids, ids.n, &out, &err);
    CHECK(ok, "%s: decode failed: %s", what, err.msg);
    CHECK(ok && out.len == n && (n == 0 || !memcmp(out.buf, text, n)), "%s: decode(encode(x)) != x (%zu bytes)", what,
          n);
    tlm_tok_ids_free(&ids);
    tlm_sb_free(&out);
}

static void round_trips(tlm_tokenizer *t, const char *name) {
    char what[128];
    uint8_t *buf = malloc(1 << 20);
    for (int k = 0; k < 200; k++) {
        size_t n = rnd() % 3000;
        for (size_t i = 0; i < n; i++) buf[i] = (uint8_t)rnd();
        snprintf(what, sizeof what, "%s random bytes %d", name, k);
        round_trip(t, buf, n, what);
    }
    static const char *const invalid[] = {
        "\x80",         "\xC0\xAF",         "\xE0\x80\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80",
        "\xF0\x9F\x99", "a\xFF\x62 \xFE c", "\xE2\x82",     "x\xC3"};
    for (size_t k = 0; k < sizeof invalid / sizeof *invalid; k++) {
        snprintf(what, sizeof what, "%s invalid UTF-8 %zu", name, k);
        round_trip(t, (const uint8_t *)invalid[k], strlen(invalid[k]), what);
    }
    static const char *const runs[] = {"a", "ab", "xyzzy", "7", "\xF0\x9F\x99\x82", "-="};
    for (size_t k = 0; k < sizeof runs / sizeof *runs; k++) {
        size_t len = strlen(runs[k]), n = 0;
        while (n + len <= (1 << 20)) memcpy(buf + n, runs[k], len), n += len;
        clock_t c0 = clock();
        snprintf(what, sizeof what, "%s 1 MB run of \"%s\"", name, runs[k]);
        round_trip(t, buf, n, what);
        printf("%s: %.2f s\n", what, (double)(clock() - c0) / CLOCKS_PER_SEC);
    }
    free(buf);
}

static void hex(const uint8_t *h, char *out) {
    for (int i = 0; i < 32; i++) sprintf(out + 2 * i, "%02x", h[i]);
}

static void identity(const char *ref) {
    tlm_tokenizer *g1 = load(ref, "gpt2"), *g2 = load(ref, "gpt2.json"), *l1 = load(ref, "llama3/tokenizer.model"),
                  *l2 = load(ref, "llama3.json");
    if (!g1 || !g2 || !l1 || !l2) goto done;
    char a[65], b[65];
    hex(tlm_tok_hash(g1), a), hex(tlm_tok_hash(g2), b);
    CHECK(!strcmp(a, b), "GPT-2: encoder.json+vocab.bpe hash %s, tokenizer.json %s", a, b);
    hex(tlm_tok_hash(l1), a), hex(tlm_tok_hash(l2), b);
    CHECK(!strcmp(a, b), "Llama 3: tokenizer.model hash %s, tokenizer.json %s", a, b);
    CHECK(memcmp(tlm_tok_hash(g1), tlm_tok_hash(l1), 32), "GPT-2 and Llama 3 hash equal");
    CHECK(tlm_tok_vocab_size(g1) == 50257 && tlm_tok_vocab_size(l1) == 128256, "vocabulary sizes %d, %d",
          (int)tlm_tok_vocab_size(g1), (int)tlm_tok_vocab_size(l1));
    CHECK(tlm_tok_merge_count(l1) == tlm_tok_merge_count(l2),
          "Llama 3 merges: %d derived from the ranks, %d in the json", (int)tlm_tok_merge_count(l1),
          (int)tlm_tok_merge_count(l2));
    round_trips(g1, "GPT-2");
    round_trips(l1, "Llama 3");
done:
    tlm_tok_free(g1), tlm_tok_free(g2), tlm_tok_free(l1), tlm_tok_free(l2);
}

/* ---- a hand-made tokenizer.json ---- */

/* GPT-2's character for byte b, as UTF-8, into out (NUL-terminated). */
static void byte_char(int b, char *out) {
    int cp = b, k = 0;
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    if (!printable) {
        for (int c = 0; c < b; c++)
            if (!((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF))) k++;
        cp = 0x100 + k;
    }
    if (cp < 0x80) out[0] = (char)cp, out[1] = 0;
    else out[0] = (char)(0xC0 | cp >> 6), out[1] = (char)(0x80 | (cp & 0x3F)), out[2] = 0;
}

/* A tokenizer.json with the 256 bytes (id = byte), then extra tokens, the
 * merges (JSON array body) and the added tokens (JSON array body). */
static char *small_json(const char *extra_vocab, const char *merges, const char *added, const char *pre) {
    size_t cap = 1 << 16;
    char *s = malloc(cap), c[4];
    size_t n = (size_t)snprintf(s, cap,
                                "{\"version\":\"1.0\",\"normalizer\":null,\"pre_tokenizer\":%s,"
                                "\"added_tokens\":[%s],\"model\":{\"type\":\"BPE\",\"vocab\":{",
                                pre, added);
    for (int b = 0; b < 256; b++) {
        byte_char(b, c);
        n += (size_t)snprintf(s + n, cap - n, "%s\"%s%s\":%d", b ? "," : "", b == '"' || b == '\\' ? "\\" : "", c, b);
    }
    snprintf(s + n, cap - n, "%s},\"merges\":[%s]}}", extra_vocab, merges);
    return s;
}

static const char gpt2_pre[] = "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}";

static void expect_ids(tlm_tokenizer *t, const char *text, const tlm_tok_options *o, const char *want) {
    tlm_err err = {""};
    tlm_tok_ids ids = {0};
    char got[512] = "";
    bool ok = tlm_tok_encode(t, (const uint8_t *)text, strlen(text), o, &ids, &err);
    for (size_t i = 0, n = 0; ok && i < ids.n && n < sizeof got - 16; i++)
        n += (size_t)snprintf(got + n, sizeof got - n, i ? " %d" : "%d", (int)ids.ids[i]);
    CHECK(ok && !strcmp(got, want), "encode \"%s\": got [%s] (%s), want [%s]", text, got, ok ? "ok" : err.msg, want);
    tlm_tok_ids_free(&ids);
}

static void small_vocabulary(void) {
    /* 256 aa, 257 aaa, 258 ab, 259 "<|x|>"; merges: a a, aa a, a b */
    char *json = small_json(",\"aa\":256,\"aaa\":257,\"ab\":258", "\"a a\",\"aa a\",\"a b\"",
                            "{\"id\":259,\"content\":\"<|x|>\",\"special\":true}", gpt2_pre);
    tlm_err err = {""};
    tlm_tokenizer *t = tlm_tok_parse_hf(json, strlen(json), "small", &err);
    CHECK(t, "the small tokenizer does not load: %s", err.msg);
    free(json);
    if (!t) return;
    expect_ids(t, "aa", NULL, "256");
    expect_ids(t, "aaa", NULL, "257");             /* a a (rank 0) leftmost: [aa][a], then aa a */
    expect_ids(t, "aaaa", NULL, "256 256");        /* then aa a never applies */
    expect_ids(t, "aab", NULL, "256 98");          /* a a (rank 0) before a b (rank 2) */
    expect_ids(t, "ab ab", NULL, "258 32 258");    /* " ab": space, then a b */
    expect_ids(t, "<|x|>", NULL, "60 124 120 124 62");
    tlm_tok_options sp = {.special = true};
    expect_ids(t, "a<|x|>a", &sp, "97 259 97");
    tlm_tok_options bos = {.bos = true};
    tlm_tok_ids ids = {0};
    CHECK(!tlm_tok_encode(t, (const uint8_t *)"a", 1, &bos, &ids, &err) && strstr(err.msg, "beginning-of-text"),
          "--bos without a BOS token: %s", err.msg);
    tlm_tok_ids_free(&ids);
    int32_t bad[] = {97, 260};
    tlm_strbuf out = {0};
    CHECK(!tlm_tok_decode(t, bad, 2, &out, &err) && strstr(err.msg, "outside the vocabulary"), "decode 260: %s",
          err.msg);
    tlm_sb_free(&out);
    tlm_tok_free(t);
}

/* ---- malformed files ---- */

static void expect_refused(tlm_tokenizer *t, const tlm_err *err, const char *what) {
    CHECK(!t, "%s: loaded", what);
    CHECK(t || (err->msg[0] && !strchr(err->msg, '\n')), "%s: the message is not one line: \"%s\"", what, err->msg);
    tlm_tok_free(t);
}

/* expect_refused, with a message holding each of want[] (NULL-ended) and
 * not holding avoid (when not NULL). */
static void expect_message(tlm_tokenizer *t, const tlm_err *err, const char *what, const char *const *want,
                           const char *avoid) {
    bool loaded = t != NULL;
    expect_refused(t, err, what);
    for (size_t i = 0; !loaded && want[i]; i++)
        CHECK(strstr(err->msg, want[i]), "%s: the message lacks \"%s\": \"%s\"", what, want[i], err->msg);
    CHECK(loaded || !avoid || !strstr(err->msg, avoid), "%s: the message holds \"%s\": \"%s\"", what, avoid, err->msg);
}

/* GPT-2's encoder.json with the 256 bytes (id = byte), then extra. */
static char *small_encoder(const char *extra) {
    size_t cap = 1 << 14, n = 1;
    char *s = malloc(cap), c[4];
    s[0] = '{';
    for (int b = 0; b < 256; b++) {
        byte_char(b, c);
        n += (size_t)snprintf(s + n, cap - n, "%s\"%s%s\":%d", b ? "," : "", b == '"' || b == '\\' ? "\\" : "", c, b);
    }
    snprintf(s + n, cap - n, "%s}", extra);
    return s;
}

/* Merges cut short or repeated, and the messages of each format: where the
 * fault is (a line of vocab.bpe, a merge of model.merges, a line of a rank
 * file) and what it is. */
static void merges_checked(void) {
    /* 256 ab, 257 abc, 258 <|endoftext|> */
    char *enc = small_encoder(",\"ab\":256,\"abc\":257,\"<|endoftext|>\":258");
    static const struct {
        const char *what, *bpe, *want[4];
    } gpt2[] = {
        {"an empty vocab.bpe", "", {"token 256 (`ab`)", "cut short", NULL}},
        {"a vocab.bpe of its header only", "#version: 0.2\n", {"token 256 (`ab`)", "cut short", NULL}},
        {"a vocab.bpe cut short", "#version: 0.2\na b\n", {"token 257 (`abc`)", "cut short", NULL}},
        {"a repeated merge", "#version: 0.2\na b\na b\nab c\n", {"line 3 (`a` + `b`) repeats an earlier merge", NULL}},
        {"a merge not two tokens", "#version: 0.2\na b\nabc\n", {"line 3 is not two tokens", NULL}},
        {"a merge of unknown tokens", "#version: 0.2\n\na b\nab zz\n", {"line 4 names a token", NULL}},
        {"a merge with no result", "#version: 0.2\na b\nb c\n", {"line 3 (`b` + `c`) makes a token", NULL}},
    };
    for (size_t i = 0; i < sizeof gpt2 / sizeof *gpt2; i++) {
        tlm_err err = {""};
        tlm_tokenizer *t = tlm_tok_parse_gpt2(enc, strlen(enc), gpt2[i].bpe, strlen(gpt2[i].bpe), "gpt2", &err);
        expect_message(t, &err, gpt2[i].what, gpt2[i].want, "merge 3");
    }
    /* the whole file loads (the special token needs no merge) */
    static const char whole[] = "#version: 0.2\na b\nab c\n";
    tlm_err err = {""};
    tlm_tokenizer *t = tlm_tok_parse_gpt2(enc, strlen(enc), whole, strlen(whole), "gpt2", &err);
    CHECK(t && tlm_tok_merge_count(t) == 2, "the whole vocab.bpe: %s", t ? "not 2 merges" : err.msg);
    tlm_tok_free(t);
    free(enc);

    static const struct {
        const char *what, *merges, *want[3];
    } hf[] = {
        {"no merges", "", {"model.merges: no merge makes token 256 (`ab`)", "cut short", NULL}},
        {"merges cut short", "\"a b\"", {"token 257 (`abc`)", "cut short", NULL}},
        {"a repeated merge",
         "\"a b\",[\"a\",\"b\"],\"ab c\"",
         {"model.merges: merge 2 (`a` + `b`) repeats an earlier merge", NULL}},
    };
    for (size_t i = 0; i < sizeof hf / sizeof *hf; i++) {
        char *json = small_json(",\"ab\":256,\"abc\":257", hf[i].merges, "", gpt2_pre);
        err.msg[0] = 0;
        expect_message(tlm_tok_parse_hf(json, strlen(json), "tok.json", &err), &err, hf[i].what, hf[i].want, NULL);
        free(json);
    }
    /* the token in the message: bytes outside printable ASCII escaped */
    static const char *const escaped[] = {"token 256 (`\\x0A\\x0A`)", NULL};
    char *json = small_json(",\"\\u010a\\u010a\":256", "", "", gpt2_pre);
    err.msg[0] = 0;
    expect_message(tlm_tok_parse_hf(json, strlen(json), "tok.json", &err), &err, "a newline pair", escaped, NULL);
    free(json);
    json = small_json("", "", "", gpt2_pre);
    char *merges = strstr(json, "\"merges\":[]");
    memcpy(merges, "\"merges\":5 ", 11);
    err.msg[0] = 0;
    t = tlm_tok_parse_hf(json, strlen(json), "tok.json", &err);
    CHECK(!t && !strcmp(err.msg, "tok.json: model.merges is not an array"), "merges not an array: %s", err.msg);
    tlm_tok_free(t);
    free(json);

    static const struct {
        const char *what, *text, *want[3];
    } tiktoken[] = {
        {"two spaces", "QQ== 0\nQg==  1\n", {"line 2 has more than one space", "BASE64 RANK", NULL}},
        {"a third field", "QQ== 0\nQg== 1 extra\n", {"line 2 has more than one space", NULL}},
        {"no space", "QQ== 0\nQg==\t1\n", {"line 2 has no space", NULL}},
        {"an empty line", "QQ== 0\n\nQg== 1\n", {"line 2 is empty", NULL}},
        {"no rank", "QQ== 0\nQg== \n", {"line 2 has no rank", NULL}},
        {"a rank not a number", "QQ== 0\nQg== -1\n", {"line 2: the rank `-1` is not a decimal number", NULL}},
        {"a lone carriage return", "\r", {"rank file: holds no ranks", NULL}},
        {"a rank out of order", "QQ== 0\nQg== 2\n", {"line 2: the rank is 2, not 1", NULL}},
    };
    for (size_t i = 0; i < sizeof tiktoken / sizeof *tiktoken; i++) {
        err.msg[0] = 0;
        expect_message(tlm_tok_parse_tiktoken(tiktoken[i].text, strlen(tiktoken[i].text), "rank file", &err), &err,
                       tiktoken[i].what, tiktoken[i].want,
                       i + 1 < sizeof tiktoken / sizeof *tiktoken ? "the rank is" : NULL);
    }
}

static void malformed(void) {
    static const struct {
        const char *what, *enc, *bpe;
    } gpt2[] = {
        {"encoder.json not JSON", "{\"a\":", ""},
        {"encoder.json not an object", "[1,2]", ""},
        {"an id not an integer", "{\"a\":1.5}", ""},
        {"an id out of range", "{\"a\":7}", ""},
        {"two tokens one id", "{\"a\":0,\"b\":0}", ""},
        {"bytes missing", "{\"a\":0,\"b\":1}", "#version: 0.2\na b\n"},
        {"empty token", "{\"\":0}", ""},
    };
    for (size_t i = 0; i < sizeof gpt2 / sizeof *gpt2; i++) {
        tlm_err err = {""};
        tlm_tokenizer *t =
            tlm_tok_parse_gpt2(gpt2[i].enc, strlen(gpt2[i].enc), gpt2[i].bpe, strlen(gpt2[i].bpe), "gpt2", &err);
        expect_refused(t, &err, gpt2[i].what);
    }
    static const char *const tiktoken[] = {
        "",         "QQ== 0\nQg== 2\n",   "QQ== x\n",         "Q 0\n",    "QQ==0\n",
        "@@@@ 0\n", "QQ== 0\n\nQg== 1\n", "QQ== 0\nQQ== 1\n", "QQ== 0\n", /* bytes missing */
    };
    for (size_t i = 0; i < sizeof tiktoken / sizeof *tiktoken; i++) {
        tlm_err err = {""};
        char what[64];
        snprintf(what, sizeof what, "tiktoken case %zu", i);
        expect_refused(tlm_tok_parse_tiktoken(tiktoken[i], strlen(tiktoken[i]), "rank file", &err), &err, what);
    }
    static const struct {
        const char *what, *extra, *merges, *added, *pre;
    } hf[] = {
        {"a merge of unknown tokens", "", "\"a zz\"", "", gpt2_pre},
        {"a merge with no result", "", "\"a b\"", "", gpt2_pre},
        {"a merge not two tokens", "", "\"ab\"", "", gpt2_pre},
        {"a merge of three", "", "[\"a\",\"b\",\"c\"]", "", gpt2_pre},
        {"a merge of numbers", "", "[1,2]", "", gpt2_pre},
        {"a Metaspace pre-tokenizer", "", "", "", "{\"type\":\"Metaspace\"}"},
        {"an unknown Split pattern", "", "", "",
         "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\w+\"},"
         "\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"use_regex\":false}]}"},
        {"a non-special added token", "", "", "{\"id\":256,\"content\":\"x\",\"special\":false}", gpt2_pre},
        {"an added token with a gap", "", "", "{\"id\":300,\"content\":\"<s>\",\"special\":true}", gpt2_pre},
        {"an added token unlike the model's", "", "", "{\"id\":5,\"content\":\"<s>\",\"special\":true}", gpt2_pre},
        {"an id past the vocabulary", ",\"zz\":900", "", "", gpt2_pre},
        {"a token not in byte-level characters", ",\"\\u4e00\":256", "", "", gpt2_pre},
    };
    for (size_t i = 0; i < sizeof hf / sizeof *hf; i++) {
        char *json = small_json(hf[i].extra, hf[i].merges, hf[i].added, hf[i].pre);
        tlm_err err = {""};
        expect_refused(tlm_tok_parse_hf(json, strlen(json), "tokenizer.json", &err), &err, hf[i].what);
        free(json);
    }
    /* what the model says of itself, and the file's keys, taken as written:
     * an ignore_merges that is not a boolean, a second "model" (readers
     * disagree on which counts) */
    static const struct {
        const char *what, *model_key, *top_key, *want;
    } strict[] = {
        {"ignore_merges a string", ",\"ignore_merges\":\"yes\"", "", "model.ignore_merges is neither true nor false"},
        {"ignore_merges a number", ",\"ignore_merges\":1", "", "model.ignore_merges is neither true nor false"},
        {"two models", "", ",\"model\":{\"type\":\"BPE\"}", "duplicate key \"model\""},
        {"a vocabulary with a token twice", "", "", "duplicate key \"a\""},
    };
    for (size_t i = 0; i < sizeof strict / sizeof *strict; i++) {
        char *base = small_json(i == 3 ? ",\"a\":300" : "", "", "", gpt2_pre), json[1 << 17];
        const char *model = strstr(base, "\"type\":\"BPE\"") + strlen("\"type\":\"BPE\"");
        snprintf(json, sizeof json, "%.*s%s%.*s%s}", (int)(model - base), base, strict[i].model_key,
                 (int)(strlen(model) - 1), model, strict[i].top_key);
        tlm_err err = {""};
        tlm_tokenizer *t = tlm_tok_parse_hf(json, strlen(json), "tokenizer.json", &err);
        expect_refused(t, &err, strict[i].what);
        CHECK(strstr(err.msg, strict[i].want), "%s: message '%s' lacks '%s'", strict[i].what, err.msg, strict[i].want);
        free(base);
    }
    static const char *const not_bpe[] = {
        "{}",
        "[]",
        "{\"model\":{\"type\":\"WordPiece\",\"vocab\":{}}}",
        "{\"model\":{\"type\":\"BPE\"}}",
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{},\"merges\":[]},\"normalizer\":{\"type\":\"NFC\"}}",
    };
    for (size_t i = 0; i < sizeof not_bpe / sizeof *not_bpe; i++) {
        tlm_err err = {""};
        expect_refused(tlm_tok_parse_hf(not_bpe[i], strlen(not_bpe[i]), "tokenizer.json", &err), &err, not_bpe[i]);
    }
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_tokenizer REFDIR\n");
        return 2;
    }
    small_vocabulary();
    malformed();
    merges_checked();
    identity(argv[1]);
    if (failures) {
        printf("%d failure(s)\n", failures);
        return 1;
    }
    printf("tokenizer: all checks passed\n");
    return 0;
}
