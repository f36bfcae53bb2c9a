#include <stdio.h>
#include <stdlib.h>

#include "downstream.h"

bool request_pool_add(request_pool *p, const tlm_tok_ids *context, const tlm_tok_ids *continuation, int64_t T,
                      const char *where, tlm_err *err) {
    int64_t nctx = (int64_t)context->n, ncont = (int64_t)continuation->n;
    if (ncont == 0) return tlm_fail(err, "%s is empty", where);
    if (nctx == 0) return tlm_fail(err, "%s has no context before it (its first token needs one)", where);
    if (p->n == p->cap) {
        int64_t cap = p->cap ? 2 * p->cap : 256;
        tlm_loglik_request *r = realloc(p->req, (size_t)cap * sizeof *r);
        if (r) p->req = r;
        int64_t *o = r ? realloc(p->offset, (size_t)cap * sizeof *o) : NULL;
        if (!o) return tlm_fail(err, "out of memory");
        p->offset = o, p->cap = cap;
    }
    /* The window holds T inputs and the last one's target: the last T + 1
     * tokens of context + continuation. A continuation of more than T
     * tokens fills it alone, and its first token there, with nothing
     * before it, is not scored. */
    int64_t n = nctx + ncont, start = n > T + 1 ? n - (T + 1) : 0;
    int64_t from_ctx = start < nctx ? nctx - start : 0;
    p->offset[p->n] = (int64_t)p->ids.n;
    if (!text_tokens_append(&p->ids, context->ids + (nctx - from_ctx), (size_t)from_ctx, err) ||
        !text_tokens_append(&p->ids, continuation->ids + (start - (nctx - from_ctx)), (size_t)(n - start - from_ctx),
                            err))
        return false;
    p->req[p->n++] = (tlm_loglik_request){NULL, n - start, from_ctx > 0 ? from_ctx : 1};
    p->cut += ncont > T;
    return true;
}

void request_pool_note_cut(const request_pool *p, const char *path, int64_t T, const char *what) {
    if (p->cut == 0) return;
    fprintf(stderr,
            "note: %s: %lld continuation%s of more than the window's %lld tokens, scored on %s last %lld tokens "
            "only%s\n",
            path, (long long)p->cut, p->cut == 1 ? "" : "s", (long long)T, p->cut == 1 ? "its" : "their", (long long)T,
            what);
}

bool request_pool_score(request_pool *p, const downstream_ctx *c, tlm_err *err) {
    p->score = malloc((size_t)(p->n > 0 ? p->n : 1) * sizeof *p->score);
    if (!p->score) return tlm_fail(err, "out of memory");
    for (int64_t i = 0; i < p->n; i++) p->req[i].tokens = p->ids.ids + p->offset[i];
    return tlm_loglik_score(c->m, p->req, p->n, c->B, p->score, err);
}

void request_pool_free(request_pool *p) {
    tlm_tok_ids_free(&p->ids);
    free(p->req);
    free(p->offset);
    free(p->score);
    *p = (request_pool){0};
}
