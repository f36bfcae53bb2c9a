/* Byte-level BPE training (train.h). The pre-tokens are counted once; each
 * merge then touches only the pre-tokens that hold its pair (every pair
 * keeps the list of pre-tokens it was seen in) and updates the counts of
 * the pairs around each occurrence. The best pair comes from a max-heap
 * with lazy deletion: a popped entry whose count is out of date is pushed
 * again with the current count. */
#include "train.h"

#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

typedef struct word {
    uint64_t count;
    uint32_t off, len; /* bytes at kpool[off..], later symbols at sym[off..off+len) */
} word;

typedef struct pair_entry {
    uint64_t key; /* left << 32 | right */
    int64_t count;
    uint32_t *words, n, cap;
    uint32_t stamp;
} pair_entry;

typedef struct heap_item {
    int64_t count;
    uint64_t key;
} heap_item;

struct tlm_bpe_trainer {
    uint64_t bytes;
    /* the distinct pre-tokens */
    word *words;
    size_t nwords, words_cap;
    uint8_t *kpool;
    size_t kpool_len, kpool_cap;
    uint32_t *wslot; /* word index + 1; 0: empty */
    size_t wmask;
    int32_t *sym;
    /* pairs */
    pair_entry *pairs;
    size_t npairs, pairs_cap;
    uint32_t *pslot; /* pair index + 1 */
    size_t pmask;
    heap_item *heap;
    size_t nheap, heap_cap;
    uint32_t stamp;
    uint64_t *touched;
    size_t ntouched, touched_cap;
    /* tokens */
    uint8_t *tpool;
    size_t tpool_len, tpool_cap;
    size_t *toff;
    uint32_t *tlen;
    int32_t ntok, tok_cap;
    int32_t *tslot; /* id; -1: empty */
    size_t tmask;
    int32_t *merges; /* pairs of ids */
    int32_t nmerges;
    bool oom;
};

/* Grows *p (of *cap items of size sz) to hold need; false when out of memory. */
static bool grow(void *p, size_t *cap, size_t need, size_t sz) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*(void **)p, c * sz);
    if (!q) return false;
    *(void **)p = q;
    *cap = c;
    return true;
}

tlm_bpe_trainer *tlm_bpe_new(tlm_err *err) {
    tlm_bpe_trainer *b = calloc(1, sizeof *b);
    if (b) {
        b->wmask = (1 << 16) - 1;
        b->wslot = calloc(b->wmask + 1, sizeof *b->wslot);
    }
    if (!b || !b->wslot) {
        tlm_bpe_free(b);
        return tlm_fail(err, "out of memory"), NULL;
    }
    return b;
}

void tlm_bpe_free(tlm_bpe_trainer *b) {
    if (!b) return;
    for (size_t i = 0; i < b->npairs; i++) free(b->pairs[i].words);
    free(b->words), free(b->kpool), free(b->wslot), free(b->sym), free(b->pairs), free(b->pslot), free(b->heap);
    free(b->touched), free(b->tpool), free(b->toff), free(b->tlen), free(b->tslot), free(b->merges);
    free(b);
}

/* ---- counting the pre-tokens ---- */

static bool rehash_words(tlm_bpe_trainer *b) {
    size_t cap = (b->wmask + 1) * 2;
    uint32_t *s = calloc(cap, sizeof *s);
    if (!s) return false;
    for (size_t w = 0; w < b->nwords; w++) {
        size_t i = tok_hash_bytes(b->kpool + b->words[w].off, b->words[w].len) & (cap - 1);
        while (s[i]) i = (i + 1) & (cap - 1);
        s[i] = (uint32_t)w + 1;
    }
    free(b->wslot);
    b->wslot = s, b->wmask = cap - 1;
    return true;
}

static bool count_word(tlm_bpe_trainer *b, const uint8_t *p, size_t n) {
    size_t i = tok_hash_bytes(p, n) & b->wmask;
    for (; b->wslot[i]; i = (i + 1) & b->wmask) {
        word *w = &b->words[b->wslot[i] - 1];
        if (w->len == n && !memcmp(b->kpool + w->off, p, n)) {
            w->count++;
            return true;
        }
    }
    if (b->nwords >= UINT32_MAX - 1 || b->kpool_len + n > UINT32_MAX) return false;
    if (!grow(&b->words, &b->words_cap, b->nwords + 1, sizeof *b->words) ||
        !grow(&b->kpool, &b->kpool_cap, b->kpool_len + n, 1))
        return false;
    memcpy(b->kpool + b->kpool_len, p, n);
    b->words[b->nwords] = (word){1, (uint32_t)b->kpool_len, (uint32_t)n};
    b->kpool_len += n;
    b->wslot[i] = (uint32_t)++b->nwords;
    return b->nwords * 2 <= b->wmask + 1 || rehash_words(b);
}

bool tlm_bpe_add_text(tlm_bpe_trainer *b, const uint8_t *text, size_t n, tlm_err *err) {
    for (size_t i = 0; i < n;) {
        size_t j = tok_pretoken_end(TOK_PAT_GPT2, text, n, i);
        if (!count_word(b, text + i, j - i))
            return tlm_fail(err, "out of memory (or over 4 GiB of distinct pre-tokens)");
        i = j;
    }
    b->bytes += n;
    return true;
}

/* ---- tokens ---- */

static int32_t token_lookup(const tlm_bpe_trainer *b, const uint8_t *p, size_t n) {
    for (size_t i = tok_hash_bytes(p, n) & b->tmask;; i = (i + 1) & b->tmask) {
        int32_t id = b->tslot[i];
        if (id < 0 || (b->tlen[id] == n && !memcmp(b->tpool + b->toff[id], p, n))) return id;
    }
}

/* Adds the token p[0..n) (not yet present) under the next id. */
static int32_t token_add(tlm_bpe_trainer *b, const uint8_t *p, size_t n) {
    size_t tp_cap = b->tpool_cap;
    if (!grow(&b->tpool, &tp_cap, b->tpool_len + n, 1)) return -1;
    b->tpool_cap = tp_cap;
    memcpy(b->tpool + b->tpool_len, p, n);
    int32_t id = b->ntok++;
    b->toff[id] = b->tpool_len, b->tlen[id] = (uint32_t)n;
    b->tpool_len += n;
    size_t i = tok_hash_bytes(p, n) & b->tmask;
    while (b->tslot[i] >= 0) i = (i + 1) & b->tmask;
    b->tslot[i] = id;
    return id;
}

/* ---- pairs ---- */

static int64_t pair_find(const tlm_bpe_trainer *b, uint64_t key) {
    for (size_t i = tok_hash_u64(key) & b->pmask;; i = (i + 1) & b->pmask) {
        if (!b->pslot[i]) return -1;
        if (b->pairs[b->pslot[i] - 1].key == key) return b->pslot[i] - 1;
    }
}

static bool rehash_pairs(tlm_bpe_trainer *b, size_t cap) {
    uint32_t *s = calloc(cap, sizeof *s);
    if (!s) return false;
    for (size_t p = 0; p < b->npairs; p++) {
        size_t i = tok_hash_u64(b->pairs[p].key) & (cap - 1);
        while (s[i]) i = (i + 1) & (cap - 1);
        s[i] = (uint32_t)p + 1;
    }
    free(b->pslot);
    b->pslot = s, b->pmask = cap - 1;
    return true;
}

static int64_t pair_get(tlm_bpe_trainer *b, uint64_t key) {
    int64_t p = pair_find(b, key);
    if (p >= 0) return p;
    if (b->npairs >= UINT32_MAX - 1 || !grow(&b->pairs, &b->pairs_cap, b->npairs + 1, sizeof *b->pairs)) return -1;
    if ((b->npairs + 1) * 2 > b->pmask + 1 && !rehash_pairs(b, (b->pmask + 1) * 2)) return -1;
    b->pairs[b->npairs] = (pair_entry){.key = key};
    size_t i = tok_hash_u64(key) & b->pmask;
    while (b->pslot[i]) i = (i + 1) & b->pmask;
    b->pslot[i] = (uint32_t)++b->npairs;
    return (int64_t)b->npairs - 1;
}

static bool heap_before(heap_item x, heap_item y) { return x.count > y.count || (x.count == y.count && x.key < y.key); }

static bool heap_push(tlm_bpe_trainer *b, int64_t count, uint64_t key) {
    if (!grow(&b->heap, &b->heap_cap, b->nheap + 1, sizeof *b->heap)) return false;
    heap_item it = {count, key};
    size_t i = b->nheap++;
    while (i > 0 && heap_before(it, b->heap[(i - 1) / 2])) {
        b->heap[i] = b->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    b->heap[i] = it;
    return true;
}

static heap_item heap_pop(tlm_bpe_trainer *b) {
    heap_item top = b->heap[0], last = b->heap[--b->nheap];
    size_t i = 0, n = b->nheap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && heap_before(b->heap[c + 1], b->heap[c])) c++;
        if (!heap_before(b->heap[c], last)) break;
        b->heap[i] = b->heap[c];
        i = c;
    }
    if (n) b->heap[i] = last;
    return top;
}

/* Adds delta to the pair (x, y)'s count; a pre-token w where it now occurs
 * joins its list. */
static void change(tlm_bpe_trainer *b, int32_t x, int32_t y, int64_t delta, uint32_t w) {
    uint64_t key = (uint64_t)(uint32_t)x << 32 | (uint32_t)y;
    int64_t p = pair_get(b, key);
    if (p < 0) {
        b->oom = true;
        return;
    }
    pair_entry *e = &b->pairs[p];
    e->count += delta;
    if (delta > 0 && (e->n == 0 || e->words[e->n - 1] != w)) {
        size_t cap = e->cap;
        if (!grow(&e->words, &cap, (size_t)e->n + 1, sizeof *e->words)) {
            b->oom = true;
            return;
        }
        e->cap = (uint32_t)cap;
        e->words[e->n++] = w;
    }
    if (e->stamp != b->stamp) {
        e->stamp = b->stamp;
        if (!grow(&b->touched, &b->touched_cap, b->ntouched + 1, sizeof *b->touched)) b->oom = true;
        else b->touched[b->ntouched++] = key;
    }
}

/* Merges (l, r) into c in pre-token w, updating the neighbouring pairs. */
static void merge_word(tlm_bpe_trainer *b, uint32_t w, int32_t l, int32_t r, int32_t c) {
    word *wd = &b->words[w];
    int32_t *s = b->sym + wd->off;
    int64_t f = (int64_t)wd->count;
    uint32_t m = wd->len, k = 0;
    for (uint32_t i = 0; i < m;) {
        if (i + 1 < m && s[i] == l && s[i + 1] == r) {
            if (k > 0) {
                if (!(s[k - 1] == l && l == r)) change(b, s[k - 1], l, -f, w);
                change(b, s[k - 1], c, f, w);
            }
            if (i + 2 < m) {
                if (!(l == r && s[i + 2] == r)) change(b, r, s[i + 2], -f, w);
                change(b, c, s[i + 2], f, w);
            }
            s[k++] = c;
            i += 2;
        } else s[k++] = s[i++];
    }
    b->words[w].len = k;
}

static bool start(tlm_bpe_trainer *b, int32_t vocab) {
    b->toff = malloc((size_t)vocab * sizeof *b->toff);
    b->tlen = malloc((size_t)vocab * sizeof *b->tlen);
    size_t tcap = 16;
    while (tcap < (size_t)vocab * 2) tcap *= 2;
    b->tslot = malloc(tcap * sizeof *b->tslot);
    b->merges = malloc((size_t)vocab * 2 * sizeof *b->merges);
    b->sym = malloc((b->kpool_len ? b->kpool_len : 1) * sizeof *b->sym);
    b->pmask = (1 << 16) - 1;
    b->pslot = calloc(b->pmask + 1, sizeof *b->pslot);
    if (!b->toff || !b->tlen || !b->tslot || !b->merges || !b->sym || !b->pslot) return false;
    memset(b->tslot, 0xff, tcap * sizeof *b->tslot);
    b->tmask = tcap - 1;
    for (int c = 0; c < 256; c++) {
        uint8_t byte = (uint8_t)c;
        if (token_add(b, &byte, 1) < 0) return false;
    }
    for (size_t i = 0; i < b->kpool_len; i++) b->sym[i] = b->kpool[i];
    b->stamp = 1;
    for (uint32_t w = 0; w < b->nwords; w++) {
        const int32_t *s = b->sym + b->words[w].off;
        for (uint32_t i = 0; i + 1 < b->words[w].len; i++) change(b, s[i], s[i + 1], (int64_t)b->words[w].count, w);
    }
    for (size_t i = 0; i < b->ntouched; i++) {
        int64_t p = pair_find(b, b->touched[i]);
        if (!heap_push(b, b->pairs[p].count, b->touched[i])) return false;
    }
    b->ntouched = 0;
    return !b->oom;
}

/* The next pair to merge, or false when none is left. */
static bool best_pair(tlm_bpe_trainer *b, uint64_t *key) {
    while (b->nheap) {
        heap_item it = heap_pop(b);
        int64_t p = pair_find(b, it.key);
        int64_t now = p >= 0 ? b->pairs[p].count : 0;
        if (now == it.count && now > 0) {
            *key = it.key;
            return true;
        }
        if (now > 0 && now < it.count && !heap_push(b, now, it.key)) b->oom = true;
    }
    return false;
}

static bool learn(tlm_bpe_trainer *b, int32_t vocab, void (*progress)(void *, int32_t, int32_t), void *ctx) {
    uint8_t *both = NULL;
    size_t both_cap = 0;
    uint64_t key;
    while (b->ntok < vocab - 1 && !b->oom && best_pair(b, &key)) {
        int32_t l = (int32_t)(key >> 32), r = (int32_t)(uint32_t)key;
        size_t n = (size_t)b->tlen[l] + b->tlen[r];
        if (!grow(&both, &both_cap, n, 1)) {
            b->oom = true;
            break;
        }
        memcpy(both, b->tpool + b->toff[l], b->tlen[l]);
        memcpy(both + b->tlen[l], b->tpool + b->toff[r], b->tlen[r]);
        int32_t c = token_lookup(b, both, n);
        if (c < 0 && (c = token_add(b, both, n)) < 0) {
            b->oom = true;
            break;
        }
        b->merges[2 * b->nmerges] = l, b->merges[2 * b->nmerges + 1] = r;
        b->nmerges++;
        int64_t p = pair_find(b, key);
        uint32_t *list = b->pairs[p].words, nlist = b->pairs[p].n;
        b->pairs[p].words = NULL, b->pairs[p].n = b->pairs[p].cap = 0, b->pairs[p].count = 0;
        b->stamp++;
        for (uint32_t i = 0; i < nlist && !b->oom; i++) merge_word(b, list[i], l, r, c);
        free(list);
        for (size_t i = 0; i < b->ntouched && !b->oom; i++) {
            int64_t q = pair_find(b, b->touched[i]);
            if (b->pairs[q].count > 0 && !heap_push(b, b->pairs[q].count, b->touched[i])) b->oom = true;
        }
        b->ntouched = 0;
        if (progress && b->nmerges % 256 == 0) progress(ctx, b->ntok, vocab);
    }
    free(both);
    return !b->oom;
}

/* ---- the tokenizer.json ---- */

static void write_token(tlm_strbuf *sb, const tlm_bpe_trainer *b, int32_t id, tlm_strbuf *tmp) {
    tmp->len = 0;
    tok_bytelevel_encode(b->tpool + b->toff[id], b->tlen[id], tmp);
    tlm_json_write_string(sb, tmp->buf ? tmp->buf : "", tmp->len);
}

static void write_json(const tlm_bpe_trainer *b, tlm_strbuf *sb) {
    static const char eot[] = "<|endoftext|>";
    tlm_strbuf tmp = {0};
    tlm_sb_printf(sb,
                  "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n"
                  "  \"added_tokens\": [\n    {\"id\": %d, \"content\": \"%s\", \"single_word\": false, "
                  "\"lstrip\": false, \"rstrip\": false, \"normalized\": false, \"special\": true}\n  ],\n"
                  "  \"normalizer\": null,\n"
                  "  \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, "
                  "\"use_regex\": true},\n"
                  "  \"post_processor\": null,\n"
                  "  \"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"trim_offsets\": true, "
                  "\"use_regex\": true},\n"
                  "  \"model\": {\n    \"type\": \"BPE\",\n    \"dropout\": null,\n    \"unk_token\": null,\n"
                  "    \"continuing_subword_prefix\": null,\n    \"end_of_word_suffix\": null,\n"
                  "    \"fuse_unk\": false,\n    \"byte_fallback\": false,\n    \"ignore_merges\": false,\n"
                  "    \"vocab\": {",
                  (int)b->ntok, eot);
    for (int32_t id = 0; id < b->ntok; id++) {
        tlm_sb_puts(sb, id ? ",\n      " : "\n      ");
        write_token(sb, b, id, &tmp);
        tlm_sb_printf(sb, ": %d", (int)id);
    }
    tlm_sb_puts(sb, "\n    },\n    \"merges\": [");
    for (int32_t m = 0; m < b->nmerges; m++) {
        tlm_sb_puts(sb, m ? ",\n      [" : "\n      [");
        write_token(sb, b, b->merges[2 * m], &tmp);
        tlm_sb_puts(sb, ", ");
        write_token(sb, b, b->merges[2 * m + 1], &tmp);
        tlm_sb_puts(sb, "]");
    }
    tlm_sb_puts(sb, "\n    ]\n  }\n}\n");
    if (tmp.oom) sb->oom = true;
    tlm_sb_free(&tmp);
}

bool tlm_bpe_train(tlm_bpe_trainer *b, int32_t vocab, void (*progress)(void *ctx, int32_t tokens, int32_t vocab),
                   void *ctx, tlm_strbuf *out, tlm_err *err) {
    if (vocab < 257 || vocab > (1 << 24))
        return tlm_fail(err, "the vocabulary size %d is outside 257..16777216", (int)vocab);
    if (b->ntok) return tlm_fail(err, "this trainer has already trained");
    if (!start(b, vocab) || !learn(b, vocab, progress, ctx)) return tlm_fail(err, "out of memory");
    write_json(b, out);
    if (out->oom) return tlm_fail(err, "out of memory");
    return true;
}

void tlm_bpe_stats(const tlm_bpe_trainer *b, uint64_t *bytes, size_t *words, int32_t *merges, int32_t *tokens) {
    *bytes = b->bytes, *words = b->nwords, *merges = b->nmerges;
    *tokens = b->ntok + 1; /* <|endoftext|>, added by write_json */
}
