/* Multiple choice: each choice is scored by the log-likelihood of its
 * tokens after the context; the item is right when the label's is the
 * highest (accuracy) and when the label's per byte of the choice is the
 * highest (accuracy_norm: per byte rather than per token, so that models
 * with different tokenizers compare). The first of equal scores wins. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "downstream.h"
#include "jsonl.h"

typedef struct choice_item {
    int64_t line, label, first, count; /* its requests: [first, first + count) */
} choice_item;

/* Reads every item of path and adds its requests; *items (the caller frees
 * it) gets one entry per item and *bytes one per choice. */
static bool read_items(const downstream_ctx *c, const char *path, request_pool *pool, choice_item **items,
                       int64_t *nitems, int64_t **bytes, tlm_err *err) {
    jsonl_file f;
    if (!jsonl_open(&f, path, err)) return false;
    tlm_tok_ids context = {0}, choice = {0};
    int64_t cap = 0, bytes_cap = 0;
    bool ok = true;
    tlm_json *j = NULL;
    int got = 0;
    while (ok && (got = jsonl_next(&f, &j, err)) == 1) {
        const tlm_json *ctx = jsonl_field(j, "context", TLM_JSON_STRING, path, f.line, err);
        const tlm_json *choices = ctx ? jsonl_field(j, "choices", TLM_JSON_ARRAY, path, f.line, err) : NULL;
        const tlm_json *label = choices ? jsonl_field(j, "label", TLM_JSON_NUMBER, path, f.line, err) : NULL;
        ok = label != NULL;
        if (ok && choices->len == 0) ok = tlm_fail(err, "%s:%lld: \"choices\" is empty", path, (long long)f.line);
        if (ok && (!label->is_int || label->integer < 0 || label->integer >= (int64_t)choices->len))
            ok = tlm_fail(err, "%s:%lld: \"label\" must be an integer from 0 to %lld (the choices' indices)", path,
                          (long long)f.line, (long long)choices->len - 1);
        context.n = 0;
        tlm_err e = {""};
        if (ok && !text_tokens_encode(c->text, ctx->str, ctx->len, &context, &e))
            ok = tlm_fail(err, "%s:%lld: the context: %s", path, (long long)f.line, e.msg);
        if (ok && *nitems == cap) {
            cap = cap ? 2 * cap : 256;
            choice_item *p = realloc(*items, (size_t)cap * sizeof *p);
            if (!p) ok = tlm_fail(err, "out of memory");
            else *items = p;
        }
        if (ok) (*items)[(*nitems)++] = (choice_item){f.line, label->integer, pool->n, (int64_t)choices->len};
        for (size_t k = 0; ok && k < choices->len; k++) {
            const tlm_json *s = &choices->items[k];
            char where[4300];
            snprintf(where, sizeof where, "%s:%lld: choice %zu", path, (long long)f.line, k);
            choice.n = 0;
            if (s->type != TLM_JSON_STRING) ok = tlm_fail(err, "%s is not a string", where);
            else if (!text_tokens_encode(c->text, s->str, s->len, &choice, &e))
                ok = tlm_fail(err, "%s: %s", where, e.msg);
            else ok = request_pool_add(pool, &context, &choice, c->T, where, err);
            if (ok && pool->n > bytes_cap) {
                bytes_cap = pool->cap;
                int64_t *p = realloc(*bytes, (size_t)bytes_cap * sizeof *p);
                if (!p) ok = tlm_fail(err, "out of memory");
                else *bytes = p;
            }
            if (ok) (*bytes)[pool->n - 1] = (int64_t)s->len;
        }
        tlm_json_free(j);
        j = NULL;
    }
    if (ok && got < 0) ok = false;
    if (ok && *nitems == 0) ok = tlm_fail(err, "%s: no items (no JSON line in it)", path);
    tlm_tok_ids_free(&context);
    tlm_tok_ids_free(&choice);
    jsonl_close(&f);
    return ok;
}

/* The index of the largest of v[0..n), the first among equals. */
static int64_t argmax(const double *v, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return best;
}

static void print_item(FILE *out, const char *path, const choice_item *it, const request_pool *pool,
                       const int64_t *bytes) {
    tlm_strbuf sb = {0};
    tlm_sb_puts(&sb, "{\"kind\":\"choices_item\",\"data\":");
    tlm_json_write_string(&sb, path, strlen(path));
    tlm_sb_printf(&sb, ",\"line\":%lld,\"label\":%lld,\"loglik\":[", (long long)it->line, (long long)it->label);
    for (int64_t k = 0; k < it->count; k++) {
        char v[32];
        jsonl_number(v, sizeof v, pool->score[it->first + k].loglik);
        tlm_sb_printf(&sb, "%s%s", k ? "," : "", v);
    }
    tlm_sb_puts(&sb, "],\"bytes\":[");
    for (int64_t k = 0; k < it->count; k++) tlm_sb_printf(&sb, "%s%lld", k ? "," : "", (long long)bytes[it->first + k]);
    tlm_sb_puts(&sb, "]}\n");
    if (!sb.oom) fputs(sb.buf, out);
    tlm_sb_free(&sb);
}

bool choices_evaluate(const downstream_ctx *c, const char *path, choices_result *out, tlm_err *err) {
    request_pool pool = {0};
    choice_item *items = NULL;
    int64_t nitems = 0, *bytes = NULL;
    bool ok = read_items(c, path, &pool, &items, &nitems, &bytes, err) && (!out || request_pool_score(&pool, c, err));
    double *scores = ok && out ? malloc((size_t)pool.n * sizeof *scores) : NULL;
    if (ok && out && !scores) ok = tlm_fail(err, "out of memory");
    if (ok && out) {
        request_pool_note_cut(&pool, path, c->T, " (acc/byte still divides by all of each choice's bytes)");
        int64_t right = 0, right_norm = 0;
        double chance = 0;
        bool finite = true;
        for (int64_t i = 0; i < nitems; i++) {
            const choice_item *it = &items[i];
            for (int64_t k = 0; k < it->count; k++) {
                scores[k] = pool.score[it->first + k].loglik;
                finite &= isfinite(scores[k]) != 0;
            }
            right += argmax(scores, it->count) == it->label;
            for (int64_t k = 0; k < it->count; k++) scores[k] /= (double)bytes[it->first + k];
            right_norm += argmax(scores, it->count) == it->label;
            chance += 1.0 / (double)it->count;
            if (c->items) print_item(c->items, path, it, &pool, bytes);
        }
        /* A diverged model's log-likelihoods are NaN, which compare false
         * with everything: its verdicts would be the first choice's, not
         * the model's. Its accuracy is not a number, as its loss is not. */
        *out = (choices_result){nitems, finite ? (double)right / (double)nitems : NAN,
                                finite ? (double)right_norm / (double)nitems : NAN, chance / (double)nitems};
    }
    free(scores);
    free(items);
    free(bytes);
    request_pool_free(&pool);
    return ok;
}
