/* Cloze (the LAMBADA layout): the target is a passage's last word with the
 * whitespace byte before it (" word"), the context everything before that.
 * An item is right when teacher-forced greedy decoding reproduces the
 * target: each of its tokens is the argmax given the context and the
 * target's tokens before it. Whitespace at the end of a passage is not
 * part of the target. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "downstream.h"
#include "jsonl.h"

static bool space(char ch) { return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v'; }

/* Splits s[0..n) into context [0, *cut) and target [*cut, *end): false when
 * the passage has no whitespace before its last word. */
static bool split_target(const char *s, size_t n, size_t *cut, size_t *end) {
    while (n > 0 && space(s[n - 1])) n--;
    size_t w = n;
    while (w > 0 && !space(s[w - 1])) w--;
    if (n == 0 || w == 0) return false;
    *cut = w - 1, *end = n;
    return true;
}

bool cloze_evaluate(const downstream_ctx *c, const char *path, cloze_result *out, tlm_err *err) {
    jsonl_file f;
    if (!jsonl_open(&f, path, err)) return false;
    request_pool pool = {0};
    tlm_tok_ids context = {0}, target = {0};
    int64_t *lines = NULL;
    bool ok = true;
    tlm_json *j = NULL;
    int got = 0;
    while (ok && (got = jsonl_next(&f, &j, err)) == 1) {
        const tlm_json *text = jsonl_field(j, "text", TLM_JSON_STRING, path, f.line, err);
        size_t cut = 0, end = 0;
        ok = text != NULL;
        if (ok && !split_target(text->str, text->len, &cut, &end))
            ok = tlm_fail(err, "%s:%lld: \"text\" needs a word before its last word", path, (long long)f.line);
        context.n = target.n = 0;
        tlm_err e = {""};
        if (ok && (!text_tokens_encode(c->text, text->str, cut, &context, &e) ||
                   !text_tokens_encode(c->text, text->str + cut, end - cut, &target, &e)))
            ok = tlm_fail(err, "%s:%lld: %s", path, (long long)f.line, e.msg);
        char where[4300];
        snprintf(where, sizeof where, "%s:%lld: the target", path, (long long)f.line);
        int64_t before = pool.cap;
        if (ok) ok = request_pool_add(&pool, &context, &target, c->T, where, err);
        if (ok && pool.cap != before) {
            int64_t *p = realloc(lines, (size_t)pool.cap * sizeof *p);
            if (!p) ok = tlm_fail(err, "out of memory");
            else lines = p;
        }
        if (ok) lines[pool.n - 1] = f.line;
        tlm_json_free(j);
        j = NULL;
    }
    if (ok && got < 0) ok = false;
    if (ok && pool.n == 0) ok = tlm_fail(err, "%s: no items (no JSON line in it)", path);
    if (ok && out) ok = request_pool_score(&pool, c, err);
    if (ok && out) {
        request_pool_note_cut(&pool, path, c->T, "");
        int64_t right = 0;
        double loglik = 0;
        for (int64_t i = 0; i < pool.n; i++) {
            right += pool.score[i].greedy;
            loglik += pool.score[i].loglik;
            if (c->items) {
                tlm_strbuf sb = {0};
                tlm_sb_puts(&sb, "{\"kind\":\"cloze_item\",\"data\":");
                tlm_json_write_string(&sb, path, strlen(path));
                char v[32];
                jsonl_number(v, sizeof v, pool.score[i].loglik);
                tlm_sb_printf(&sb, ",\"line\":%lld,\"loglik\":%s,\"correct\":%s}\n", (long long)lines[i], v,
                              pool.score[i].greedy ? "true" : "false");
                if (!sb.oom) fputs(sb.buf, c->items);
                tlm_sb_free(&sb);
            }
        }
        /* a diverged model's greedy verdicts mean nothing (NaN logits) */
        *out = (cloze_result){pool.n, isfinite(loglik) ? (double)right / (double)pool.n : NAN, loglik / (double)pool.n};
    }
    free(lines);
    tlm_tok_ids_free(&context);
    tlm_tok_ids_free(&target);
    request_pool_free(&pool);
    jsonl_close(&f);
    return ok;
}
