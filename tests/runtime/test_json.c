/* The small JSON reader/writer: accepted and rejected documents, exact
 * integers, escapes and UTF-8, depth limit, writer round trip, and random
 * mutations (no crash; every failure has a message). */
#include <time.h>

#include "test_util.h"

static tlm_json *parse(const char *s) {
    tlm_err err = {{0}};
    tlm_json *j = tlm_json_parse(s, strlen(s), &err);
    CHECK(j != NULL, "rejected %s: %s", s, err.msg);
    return j;
}

static void reject(const char *s, const char *needle) {
    tlm_err err = {{0}};
    tlm_json *j = tlm_json_parse(s, strlen(s), &err);
    CHECK(j == NULL, "accepted %s", s);
    CHECK(strstr(err.msg, needle) != NULL, "%s: message '%s' lacks '%s'", s, err.msg, needle);
    tlm_json_free(j);
}

static void test_values(void) {
    tlm_json *j = parse(" {\"a\": [1, -2.5e3, true, false, null, \"x\"], \"b\": {}, \"c\": []} ");
    if (j) {
        const tlm_json *a = tlm_json_get(j, "a");
        CHECK(a && a->type == TLM_JSON_ARRAY && a->len == 6, "array");
        CHECK(a->items[0].is_int && a->items[0].integer == 1, "int");
        CHECK(!a->items[1].is_int && a->items[1].number == -2500.0, "float");
        CHECK(a->items[2].type == TLM_JSON_BOOL && a->items[2].boolean, "true");
        CHECK(a->items[3].type == TLM_JSON_BOOL && !a->items[3].boolean, "false");
        CHECK(a->items[4].type == TLM_JSON_NULL, "null");
        CHECK(a->items[5].type == TLM_JSON_STRING && strcmp(a->items[5].str, "x") == 0, "string");
        CHECK(tlm_json_get(j, "b")->type == TLM_JSON_OBJECT, "object");
        CHECK(tlm_json_get(j, "zz") == NULL, "missing key");
        CHECK(tlm_json_get(a, "a") == NULL, "get on an array");
    }
    tlm_json_free(j);

    /* int64 exactly, at the edges; beyond them only as a double */
    j = parse("[9223372036854775807, -9223372036854775808, 9223372036854775808, 0, -0]");
    if (j) {
        CHECK(j->items[0].is_int && j->items[0].integer == INT64_MAX, "INT64_MAX");
        CHECK(j->items[1].is_int && j->items[1].integer == INT64_MIN, "INT64_MIN");
        CHECK(!j->items[2].is_int && j->items[2].number == 9223372036854775808.0, "2^63");
        CHECK(j->items[3].is_int && j->items[4].is_int && j->items[4].integer == 0, "zeros");
    }
    tlm_json_free(j);

    /* escapes and UTF-8 */
    j = parse("\"q\\\" b\\\\ s\\/ \\b\\f\\n\\r\\t \\u00e9 \\u20AC \\ud83d\\ude00 \xc3\xa9\"");
    if (j) {
        const char *want = "q\" b\\ s/ \b\f\n\r\t \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xc3\xa9";
        CHECK(strcmp(j->str, want) == 0 && j->len == strlen(want), "escapes: %s", j->str);
    }
    tlm_json_free(j);
    j = parse("\"a\\u0000b\"");
    CHECK(j && j->len == 3 && j->str[1] == '\0', "embedded NUL keeps its length");
    tlm_json_free(j);

    reject("", "value expected");
    reject("[1,]", "value expected");
    reject("{\"a\":1,}", "object key");
    reject("{\"a\" 1}", "':'");
    reject("{a:1}", "object key");
    reject("[1 2]", "','");
    reject("01", "leading zero");
    reject("1.", "digit");
    reject("1e", "digit");
    reject("-", "invalid number");
    reject("+1", "value expected");
    reject("NaN", "value expected");
    reject("tru", "literal");
    reject("\"abc", "unterminated");
    reject("\"a\nb\"", "control");
    reject("\"\\x\"", "invalid escape");
    reject("\"\\u12G4\"", "\\u");
    reject("\"\\ud83d\"", "surrogate");
    reject("\"\\ude00\"", "surrogate");
    reject("\"\xff\"", "UTF-8");
    reject("\"\xc0\xaf\"", "UTF-8");      /* overlong '/' */
    reject("\"\xed\xa0\x80\"", "UTF-8");  /* encoded surrogate */
    reject("{} {}", "after the value");
    reject("// comment\n{}", "value expected");

    /* TLM_JSON_MAX_DEPTH nested containers are fine, one more is not */
    char deep[2 * TLM_JSON_MAX_DEPTH + 8];
    for (int extra = 0; extra <= 1; extra++) {
        int d = TLM_JSON_MAX_DEPTH + extra;
        memset(deep, '[', (size_t)d);
        memset(deep + d, ']', (size_t)d);
        deep[2 * d] = '\0';
        if (extra) reject(deep, "nesting");
        else tlm_json_free(parse(deep));
    }
}

static void test_writer(void) {
    tlm_strbuf sb = {0};
    const char raw[] = "tab\t nl\n quote\" bs\\ bell\a nul\0 \xc3\xa9";
    tlm_json_write_string(&sb, raw, sizeof raw - 1);
    tlm_sb_printf(&sb, " %d", 7);
    CHECK(!sb.oom, "oom");
    /* the written string parses back to the same bytes */
    tlm_err err;
    size_t qlen = strlen(sb.buf) - 2; /* without " 7" */
    tlm_json *j = tlm_json_parse(sb.buf, qlen, &err);
    CHECK(j && j->len == sizeof raw - 1 && memcmp(j->str, raw, j->len) == 0, "writer round trip");
    CHECK(strstr(sb.buf, "\\u0007") && strstr(sb.buf, "\\u0000") && strstr(sb.buf, "\\\""), "escapes: %s", sb.buf);
    tlm_json_free(j);
    tlm_sb_free(&sb);

    /* bytes that start no UTF-8 sequence (a Latin-1 path, a cut sequence, a
     * surrogate, an overlong form) are written as U+FFFD: the document reads
     * back, and the valid sequences around them stay as they were */
    const char bad[] = "caf\xe9 \xc3\xa9 \xed\xa0\x80 \xc0\xaf \xe2\x82";
    CHECK(!tlm_json_valid_utf8(bad, sizeof bad - 1), "invalid UTF-8 seen");
    CHECK(tlm_json_valid_utf8(raw, sizeof raw - 1), "valid UTF-8 passes");
    tlm_json_write_string(&sb, bad, sizeof bad - 1);
    CHECK(!sb.oom, "oom");
    j = tlm_json_parse(sb.buf, sb.len, &err);
    static const char want[] = "caf\xef\xbf\xbd \xc3\xa9 \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd "
                               "\xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd";
    CHECK(j && j->len == sizeof want - 1 && memcmp(j->str, want, j->len) == 0, "invalid UTF-8 written as U+FFFD: %s",
          sb.buf);
    tlm_json_free(j);
    tlm_sb_free(&sb);
}

static void test_mutations(void) {
    const char *seed = "{\"a\":[1,2.5,-3e-2,\"x\\u00e9\\n\"],\"b\":{\"c\":null,\"d\":[true,false]}}";
    size_t n = strlen(seed);
    char *b = malloc(n + 1);
    tlm_rng r;
    tlm_rng_seed(&r, 11);
    int ok = 0, runs = 0;
    static const char alphabet[] = "{}[]\",:\\/ 0123456789-+.eEtrufalsn\x01\xc3\xff";
    for (int k = 0; k < 20000; k++) {
        memcpy(b, seed, n + 1);
        int edits = 1 + (int)tlm_rng_below(&r, 3);
        for (int e = 0; e < edits; e++) {
            size_t at = (size_t)tlm_rng_below(&r, n);
            b[at] = alphabet[tlm_rng_below(&r, sizeof alphabet - 1)];
        }
        size_t len = (size_t)tlm_rng_below(&r, n + 1); /* also truncate */
        tlm_err err = {{0}};
        tlm_json *j = tlm_json_parse(b, len, &err);
        if (j) ok++;
        else CHECK(err.msg[0], "failure without a message");
        tlm_json_free(j);
        runs++;
    }
    printf("  %d mutated documents: %d parsed, %d rejected with a message\n", runs, ok, runs - ok);
    free(b);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A key given twice in one object is refused wherever it is; keys that
 * only look alike (a prefix, an embedded NUL, another object's) are not;
 * and a large object (a tokenizer's vocabulary) is checked in linear time. */
static void test_duplicate_keys(void) {
    reject("{\"model\": {}, \"model\": {}}", "duplicate key \"model\" at byte 14");
    reject("{\"a\": {\"x\": 1, \"y\": 2, \"x\": 3}}", "duplicate key \"x\"");
    reject("[{\"a\": 1}, {\"b\": 1, \"b\": 1}]", "duplicate key \"b\"");
    reject("{\"\\u00e9\": 1, \"\xc3\xa9\": 2}", "duplicate key at");          /* one key, two spellings */
    reject("{\"\\u0000\": 1, \"\\u0000\": 2}", "duplicate key at");            /* not printable: unnamed */
    /* past 16 keys the keys are sorted: the repeat reported is still the
     * first place in the text that repeats an earlier key, though another
     * key sorts before it; and at 16 keys, pairwise, the same */
    reject("{\"k01\":0,\"k02\":0,\"k03\":0,\"k04\":0,\"k05\":0,\"k06\":0,\"k07\":0,\"k08\":0,\"zzz\":0,\"k09\":0,"
           "\"k10\":0,\"k11\":0,\"zzz\":1,\"k12\":0,\"k13\":0,\"k01\":1,\"k14\":0}",
           "duplicate key \"zzz\" at byte 97");
    reject("{\"k01\":0,\"k02\":0,\"k03\":0,\"k04\":0,\"k05\":0,\"k06\":0,\"k07\":0,\"k08\":0,\"zzz\":0,\"k09\":0,"
           "\"k10\":0,\"k11\":0,\"zzz\":1,\"k12\":0,\"k01\":1,\"k13\":0}",
           "duplicate key \"zzz\" at byte 97");
    tlm_json *j = parse("{\"a\": 1, \"ab\": 2, \"a\\u0000\": 3, \"b\": {\"a\": 4}, \"\": 5}");
    CHECK(j && j->len == 5 && tlm_json_get(j, "ab")->integer == 2, "keys that only look alike");
    tlm_json_free(j);

    /* 200,000 distinct keys, then the same with the first repeated last */
    enum { N = 200000 };
    size_t cap = (size_t)N * 24 + 64, len = 0;
    char *doc = malloc(cap);
    CHECK(doc != NULL, "out of memory");
    if (!doc) return;
    doc[len++] = '{';
    for (int i = 0; i < N; i++) len += (size_t)snprintf(doc + len, cap - len, "%s\"k%d\": %d", i ? ", " : "", i, i);
    len += (size_t)snprintf(doc + len, cap - len, "}");
    double t0 = now();
    j = parse(doc);
    double took = now() - t0;
    CHECK(j && j->len == N && tlm_json_get(j, "k199999")->integer == 199999, "200,000 keys");
    CHECK(took < 2.0, "200,000 keys parsed in %.2f s (quadratic?)", took);
    tlm_json_free(j);
    snprintf(doc + len - 1, cap - len + 1, ", \"k0\": 0}");
    reject(doc, "duplicate key \"k0\"");
    free(doc);
}

int main(void) {
    test_values();
    test_duplicate_keys();
    test_writer();
    test_mutations();
    return test_finish("test_json");
}
