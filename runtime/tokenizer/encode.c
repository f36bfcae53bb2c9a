/* Encoding and decoding. A pre-token's bytes start as one token per byte in
 * a linked list; a min-heap holds the adjacent pairs that have a merge,
 * keyed by (rank, position), so the lowest-ranked merge is applied first
 * and the leftmost among equal ranks. A popped pair whose nodes have
 * changed since it was pushed is skipped. Results are cached per pre-token
 * (the cache is emptied when full). The cache and the merge scratch are an
 * encoder's own, so threads encode with one tokenizer, each through its
 * encoder; the cache never changes a result, only how soon it comes. */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

/* ---- the pre-token cache ---- */

enum { CACHE_SLOTS = 1 << 16, CACHE_MAX_BYTES = 1 << 22 };

typedef struct cache_slot {
    uint64_t hash; /* 0: empty */
    uint32_t key_off, key_len, ids_off, ids_len;
} cache_slot;

typedef struct tok_cache {
    cache_slot slot[CACHE_SLOTS];
    size_t used;
    uint8_t *keys;
    int32_t *ids;
    size_t keys_len, ids_len;
} tok_cache;

static void cache_free(tok_cache *c) {
    if (!c) return;
    free(c->keys);
    free(c->ids);
    free(c);
}

static uint64_t key_hash(const uint8_t *p, size_t n) { return tok_hash_bytes(p, n) | 1; /* 0 marks empty */ }

static cache_slot *cache_find(tok_cache *c, const uint8_t *p, size_t n, uint64_t h) {
    for (size_t i = h & (CACHE_SLOTS - 1);; i = (i + 1) & (CACHE_SLOTS - 1)) {
        cache_slot *s = &c->slot[i];
        if (!s->hash || (s->hash == h && s->key_len == n && !memcmp(c->keys + s->key_off, p, n))) return s;
    }
}

static void cache_put(tok_cache *c, cache_slot *s, const uint8_t *p, size_t n, uint64_t h, const int32_t *ids,
                      size_t k) {
    if (c->used >= CACHE_SLOTS / 2 || c->keys_len + n > CACHE_MAX_BYTES || c->ids_len + k > CACHE_MAX_BYTES) {
        memset(c->slot, 0, sizeof c->slot);
        c->used = c->keys_len = c->ids_len = 0;
        if (n > CACHE_MAX_BYTES || k > CACHE_MAX_BYTES) return;
        s = cache_find(c, p, n, h);
    }
    memcpy(c->keys + c->keys_len, p, n);
    memcpy(c->ids + c->ids_len, ids, k * sizeof *ids);
    *s = (cache_slot){h, (uint32_t)c->keys_len, (uint32_t)n, (uint32_t)c->ids_len, (uint32_t)k};
    c->keys_len += n, c->ids_len += k;
    c->used++;
}

/* ---- the output ---- */

static bool push(tlm_tok_ids *out, const int32_t *ids, size_t k, tlm_err *err) {
    if (out->n + k > out->cap) {
        size_t c = out->cap ? out->cap : 1024;
        while (c < out->n + k) c *= 2;
        int32_t *p = realloc(out->ids, c * sizeof *p);
        if (!p) return tlm_fail(err, "out of memory");
        out->ids = p, out->cap = c;
    }
    memcpy(out->ids + out->n, ids, k * sizeof *ids);
    out->n += k;
    return true;
}

void tlm_tok_ids_free(tlm_tok_ids *v) {
    free(v->ids);
    *v = (tlm_tok_ids){0};
}

/* ---- BPE over one pre-token ---- */

typedef struct heap_item {
    int32_t rank;
    uint32_t pos; /* the left node */
} heap_item;

typedef struct bpe_scratch {
    int32_t *id;
    uint32_t *prev, *next; /* UINT32_MAX: none */
    heap_item *heap;
    size_t cap, heap_n;
} bpe_scratch;

struct tlm_tok_encoder {
    const tlm_tokenizer *t;
    tok_cache *cache;
    bpe_scratch scratch;
};

static bool before(heap_item a, heap_item b) { return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos); }

static void heap_push(bpe_scratch *s, heap_item it) {
    size_t i = s->heap_n++;
    while (i > 0 && before(it, s->heap[(i - 1) / 2])) {
        s->heap[i] = s->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    s->heap[i] = it;
}

static heap_item heap_pop(bpe_scratch *s) {
    heap_item top = s->heap[0], last = s->heap[--s->heap_n];
    size_t i = 0, n = s->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && before(s->heap[c + 1], s->heap[c])) c++;
        if (!before(s->heap[c], last)) break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (n) s->heap[i] = last;
    return top;
}

static void push_pair(const tlm_tokenizer *t, bpe_scratch *s, uint32_t left) {
    uint32_t right = s->next[left];
    if (right == UINT32_MAX) return;
    int32_t res, r = tok_merge_rank(t, s->id[left], s->id[right], &res);
    if (r >= 0) heap_push(s, (heap_item){r, left});
}

/* The ids of the pre-token p[0..n) (n >= 2), into s->id in list order;
 * returns their count. */
static size_t bpe(const tlm_tokenizer *t, bpe_scratch *s, const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        s->id[i] = t->byte_id[p[i]];
        s->prev[i] = i ? (uint32_t)i - 1 : UINT32_MAX;
        s->next[i] = i + 1 < n ? (uint32_t)i + 1 : UINT32_MAX;
    }
    s->heap_n = 0;
    for (size_t i = 0; i + 1 < n; i++) push_pair(t, s, (uint32_t)i);
    while (s->heap_n) {
        heap_item it = heap_pop(s);
        uint32_t l = it.pos, r = s->next[l];
        if (s->id[l] < 0 || r == UINT32_MAX) continue; /* merged away since */
        int32_t res, rank = tok_merge_rank(t, s->id[l], s->id[r], &res);
        if (rank != it.rank) continue; /* a node changed since */
        s->id[l] = res;
        s->id[r] = -1;
        s->next[l] = s->next[r];
        if (s->next[r] != UINT32_MAX) s->prev[s->next[r]] = l;
        if (s->prev[l] != UINT32_MAX) push_pair(t, s, s->prev[l]);
        push_pair(t, s, l);
    }
    size_t k = 0;
    for (uint32_t i = 0; i != UINT32_MAX; i = s->next[i]) s->id[k++] = s->id[i];
    return k;
}

static bool scratch_fit(bpe_scratch *s, size_t n, tlm_err *err) {
    if (n <= s->cap) return true;
    size_t c = n < 256 ? 256 : n;
    int32_t *id = realloc(s->id, c * sizeof *id);
    if (id) s->id = id;
    uint32_t *pr = realloc(s->prev, c * sizeof *pr);
    if (pr) s->prev = pr;
    uint32_t *nx = realloc(s->next, c * sizeof *nx);
    if (nx) s->next = nx;
    /* every push follows a merge or a starting pair: at most 3n items */
    heap_item *h = realloc(s->heap, 3 * c * sizeof *h);
    if (h) s->heap = h;
    if (!id || !pr || !nx || !h) return tlm_fail(err, "out of memory");
    s->cap = c;
    return true;
}

static bool encode_piece(tlm_tok_encoder *e, const uint8_t *p, size_t n, tlm_tok_ids *out, tlm_err *err) {
    const tlm_tokenizer *t = e->t;
    bpe_scratch *s = &e->scratch;
    if (n == 1) return push(out, &t->byte_id[p[0]], 1, err);
    if (t->ignore_merges) {
        int32_t id = tok_lookup(t, p, n);
        if (id >= 0) return push(out, &id, 1, err);
    }
    uint64_t h = key_hash(p, n);
    cache_slot *slot = cache_find(e->cache, p, n, h);
    if (slot->hash) return push(out, e->cache->ids + slot->ids_off, slot->ids_len, err);
    if (n > UINT32_MAX - 1) return tlm_fail(err, "a pre-token of %zu bytes is too long", n);
    if (!scratch_fit(s, n, err)) return false;
    size_t k = bpe(t, s, p, n);
    cache_put(e->cache, slot, p, n, h, s->id, k);
    return push(out, s->id, k, err);
}

static bool encode_text(tlm_tok_encoder *e, const uint8_t *text, size_t n, tlm_tok_ids *out, tlm_err *err) {
    for (size_t i = 0; i < n;) {
        size_t j = tok_pretoken_end(e->t->pattern, text, n, i);
        if (!encode_piece(e, text + i, j - i, out, err)) return false;
        i = j;
    }
    return true;
}

/* The longest special token at text[i..n), or -1. */
static int32_t special_at(const tlm_tokenizer *t, const uint8_t *text, size_t n, size_t i) {
    uint8_t c = text[i];
    if (!(t->special_first[c >> 3] & (1u << (c & 7)))) return -1;
    int32_t best = -1;
    for (int32_t k = 0; k < t->n_special; k++) {
        int32_t id = t->special[k];
        size_t len = t->len[id];
        if (len <= n - i && !memcmp(text + i, t->pool + t->off[id], len) && (best < 0 || len > t->len[best])) best = id;
    }
    return best;
}

tlm_tok_encoder *tlm_tok_encoder_new(const tlm_tokenizer *t, tlm_err *err) {
    tlm_tok_encoder *e = calloc(1, sizeof *e);
    if (e) {
        e->t = t;
        e->cache = calloc(1, sizeof *e->cache);
    }
    if (e && e->cache) {
        e->cache->keys = malloc(CACHE_MAX_BYTES);
        e->cache->ids = malloc(CACHE_MAX_BYTES * sizeof(int32_t));
    }
    if (!e || !e->cache || !e->cache->keys || !e->cache->ids) {
        tlm_tok_encoder_free(e);
        tlm_fail(err, "out of memory");
        return NULL;
    }
    return e;
}

void tlm_tok_encoder_free(tlm_tok_encoder *e) {
    if (!e) return;
    cache_free(e->cache);
    free(e->scratch.id);
    free(e->scratch.prev);
    free(e->scratch.next);
    free(e->scratch.heap);
    free(e);
}

bool tlm_tok_encoder_run(tlm_tok_encoder *e, const uint8_t *text, size_t n, const tlm_tok_options *o, tlm_tok_ids *out,
                         tlm_err *err) {
    const tlm_tokenizer *t = e->t;
    if (o && o->bos) {
        if (t->bos < 0) return tlm_fail(err, "this tokenizer has no beginning-of-text token (<|begin_of_text|>)");
        if (!push(out, &t->bos, 1, err)) return false;
    }
    if (!(o && o->special && t->n_special)) return encode_text(e, text, n, out, err);
    size_t start = 0;
    for (size_t i = 0; i < n;) {
        int32_t sp = special_at(t, text, n, i);
        if (sp < 0) {
            i++;
            continue;
        }
        if (!encode_text(e, text + start, i - start, out, err) || !push(out, &sp, 1, err)) return false;
        i += t->len[sp];
        start = i;
    }
    return encode_text(e, text + start, n - start, out, err);
}

bool tlm_tok_encode(tlm_tokenizer *t, const uint8_t *text, size_t n, const tlm_tok_options *o, tlm_tok_ids *out,
                    tlm_err *err) {
    if (!t->encoder && !(t->encoder = tlm_tok_encoder_new(t, err))) return false;
    return tlm_tok_encoder_run(t->encoder, text, n, o, out, err);
}

bool tlm_tok_decode(const tlm_tokenizer *t, const int32_t *ids, size_t n, tlm_strbuf *out, tlm_err *err) {
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= t->n_vocab)
            return tlm_fail(err, "token %zu: id %d is outside the vocabulary (0..%d)", i + 1, (int)id,
                            (int)t->n_vocab - 1);
        tlm_sb_append(out, (const char *)t->pool + t->off[id], t->len[id]);
    }
    if (out->oom) return tlm_fail(err, "out of memory");
    return true;
}
