/* The tokenizer's tables: the vocabulary (bytes by id, and the map back),
 * the merges (in rank order, and the map from a pair to its rank), the
 * special tokens, and the identity hash over all of them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sha256.h"
#include "tok_internal.h"

uint64_t tok_hash_bytes(const uint8_t *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

uint64_t tok_hash_u64(uint64_t key) {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return key;
}

static size_t pow2_at_least(size_t n) {
    size_t c = 16;
    while (c < n) c <<= 1;
    return c;
}

tlm_tokenizer *tok_new(int32_t n, tlm_err *err) {
    tlm_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return tlm_fail(err, "out of memory"), NULL;
    t->n_vocab = n;
    t->off = malloc(((size_t)n + 1) * sizeof *t->off);
    t->len = calloc((size_t)n + 1, sizeof *t->len);
    t->bos = -1;
    if (!t->off || !t->len) {
        tlm_tok_free(t);
        return tlm_fail(err, "out of memory"), NULL;
    }
    for (int32_t i = 0; i < n; i++) t->off[i] = SIZE_MAX; /* not set yet */
    return t;
}

bool tok_set(tlm_tokenizer *t, int32_t id, const uint8_t *bytes, size_t n, tlm_err *err) {
    if (id < 0 || id >= t->n_vocab) return tlm_fail(err, "token id %d is outside 0..%d", (int)id, (int)t->n_vocab - 1);
    if (t->off[id] != SIZE_MAX) return tlm_fail(err, "token id %d is given twice", (int)id);
    if (n == 0) return tlm_fail(err, "token id %d is empty", (int)id);
    if (n > UINT32_MAX) return tlm_fail(err, "token id %d is too long", (int)id);
    size_t need = t->pool_len + n;
    if (need > t->pool_cap) {
        size_t c = pow2_at_least(need);
        uint8_t *p = realloc(t->pool, c);
        if (!p) return tlm_fail(err, "out of memory");
        t->pool = p, t->pool_cap = c;
    }
    memcpy(t->pool + t->pool_len, bytes, n);
    t->off[id] = t->pool_len;
    t->len[id] = (uint32_t)n;
    t->pool_len += n;
    return true;
}

int32_t tok_lookup(const tlm_tokenizer *t, const uint8_t *bytes, size_t n) {
    if (!t->vocab.slot) return -1;
    for (size_t i = tok_hash_bytes(bytes, n) & t->vocab.mask;; i = (i + 1) & t->vocab.mask) {
        int32_t id = t->vocab.slot[i];
        if (id < 0) return -1;
        if (t->len[id] == n && !memcmp(t->pool + t->off[id], bytes, n)) return id;
    }
}

bool tok_index(tlm_tokenizer *t, const char *name, tlm_err *err) {
    size_t cap = pow2_at_least((size_t)t->n_vocab * 2 + 1);
    t->vocab.slot = malloc(cap * sizeof *t->vocab.slot);
    if (!t->vocab.slot) return tlm_fail(err, "out of memory");
    memset(t->vocab.slot, 0xff, cap * sizeof *t->vocab.slot);
    t->vocab.mask = cap - 1;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        if (t->off[id] == SIZE_MAX)
            return tlm_fail(err, "%s: no token has id %d (ids must run 0..%d)", name, (int)id, (int)t->n_vocab - 1);
        const uint8_t *b = t->pool + t->off[id];
        size_t i = tok_hash_bytes(b, t->len[id]) & t->vocab.mask;
        for (; t->vocab.slot[i] >= 0; i = (i + 1) & t->vocab.mask) {
            int32_t o = t->vocab.slot[i];
            if (t->len[o] == t->len[id] && !memcmp(t->pool + t->off[o], b, t->len[id]))
                return tlm_fail(err, "%s: tokens %d and %d have the same bytes", name, (int)o, (int)id);
        }
        t->vocab.slot[i] = id;
    }
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        t->byte_id[b] = tok_lookup(t, &c, 1);
        if (t->byte_id[b] < 0)
            return tlm_fail(err, "%s: byte 0x%02X has no token (a byte-level vocabulary needs all 256)", name, b);
    }
    return true;
}

void tok_escape(const uint8_t *b, size_t n, char *out, size_t cap) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        bool plain = b[i] >= 0x20 && b[i] < 0x7f && b[i] != '\\' && b[i] != '`';
        /* this byte, the NUL, and "..." when more bytes follow */
        if (k + (plain ? 1 : 4) + 1 + (i + 1 < n ? 3 : 0) > cap) {
            memcpy(out + k, "...", 3);
            k += 3;
            break;
        }
        if (plain) out[k++] = (char)b[i];
        else k += (size_t)snprintf(out + k, cap - k, "\\x%02X", b[i]);
    }
    out[k] = 0;
}

/* Makes room in the merge map for n merges (at most half full, so probes
 * stay short), rehashing what it holds. */
static bool merge_map_reserve(tlm_tokenizer *t, size_t n) {
    if (t->mkey && 2 * n + 1 <= t->mmask + 1) return true;
    size_t cap = pow2_at_least(2 * n + 1);
    uint64_t *key = calloc(cap, sizeof *key);
    int32_t *rank = malloc(cap * sizeof *rank), *result = malloc(cap * sizeof *result);
    if (!key || !rank || !result) {
        free(key), free(rank), free(result);
        return false;
    }
    for (size_t i = 0; t->mkey && i <= t->mmask; i++) {
        if (!t->mkey[i]) continue;
        size_t j = tok_hash_u64(t->mkey[i]) & (cap - 1);
        while (key[j]) j = (j + 1) & (cap - 1);
        key[j] = t->mkey[i], rank[j] = t->mrank[i], result[j] = t->mresult[i];
    }
    free(t->mkey), free(t->mrank), free(t->mresult);
    t->mkey = key, t->mrank = rank, t->mresult = result;
    t->mmask = cap - 1;
    return true;
}

/* Refuses the merge (left, right): "NAME: WHERE (`left` + `right`) WHY". */
static bool merge_fail(const tlm_tokenizer *t, int32_t left, int32_t right, const char *name, const char *unit,
                       size_t at, const char *why, tlm_err *err) {
    char where[64], l[48], r[48];
    if (unit) snprintf(where, sizeof where, "%s %zu", unit, at);
    else snprintf(where, sizeof where, "merge %d", (int)t->n_merges + 1);
    tok_escape(t->pool + t->off[left], t->len[left], l, sizeof l);
    tok_escape(t->pool + t->off[right], t->len[right], r, sizeof r);
    return tlm_fail(err, "%s: %s (`%s` + `%s`) %s", name, where, l, r, why);
}

bool tok_add_merge(tlm_tokenizer *t, int32_t left, int32_t right, const char *name, const char *unit, size_t at,
                   tlm_err *err) {
    if (t->n_merges == INT32_MAX) return tlm_fail(err, "%s: too many merges", name);
    size_t nl = t->len[left], n = nl + t->len[right];
    uint8_t buf[256], *both = n <= sizeof buf ? buf : malloc(n);
    if (!both) return tlm_fail(err, "out of memory");
    memcpy(both, t->pool + t->off[left], nl);
    memcpy(both + nl, t->pool + t->off[right], t->len[right]);
    int32_t res = tok_lookup(t, both, n);
    if (both != buf) free(both);
    if (res < 0) return merge_fail(t, left, right, name, unit, at, "makes a token that is not in the vocabulary", err);
    /* Only the first rank of a repeated pair could ever apply: a repeat
     * means a damaged or hand-edited file. */
    int32_t earlier;
    if (t->mkey && tok_merge_rank(t, left, right, &earlier) >= 0)
        return merge_fail(t, left, right, name, unit, at, "repeats an earlier merge", err);
    if ((t->n_merges & (t->n_merges - 1)) == 0) { /* 0, 1, 2, 4, ...: grow */
        size_t c = t->n_merges ? (size_t)t->n_merges * 2 : 1024;
        if (c < 1024) c = 1024;
        int32_t *l = realloc(t->merge_left, c * sizeof *l);
        if (l) t->merge_left = l;
        int32_t *r = realloc(t->merge_right, c * sizeof *r);
        if (r) t->merge_right = r;
        if (!l || !r) return tlm_fail(err, "out of memory");
    }
    if (!merge_map_reserve(t, (size_t)t->n_merges + 1)) return tlm_fail(err, "out of memory");
    uint64_t key = ((uint64_t)(uint32_t)left << 32 | (uint32_t)right) + 1;
    size_t i = tok_hash_u64(key) & t->mmask;
    while (t->mkey[i]) i = (i + 1) & t->mmask;
    t->mkey[i] = key, t->mrank[i] = t->n_merges, t->mresult[i] = res;
    t->merge_left[t->n_merges] = left;
    t->merge_right[t->n_merges] = right;
    t->n_merges++;
    return true;
}

bool tok_check_merges(const tlm_tokenizer *t, const char *name, tlm_err *err) {
    /* made[id]: some merge's result is id. One pass over the merge map:
     * linear, not a search of the merges for each token. */
    uint8_t *made = calloc((size_t)t->n_vocab, 1);
    if (!made) return tlm_fail(err, "out of memory");
    for (size_t i = 0; t->mkey && i <= t->mmask; i++)
        if (t->mkey[i]) made[t->mresult[i]] = 1;
    for (int32_t i = 0; i < t->n_special; i++) made[t->special[i]] = 2; /* needs no merge */
    int32_t first = -1, need = 0;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        if (t->len[id] == 1 || made[id] == 2) continue;
        need++;
        if (!made[id] && first < 0) first = id;
    }
    free(made);
    if (first < 0) return true;
    char text[64];
    tok_escape(t->pool + t->off[first], t->len[first], text, sizeof text);
    return tlm_fail(
        err, "%s: no merge makes token %d (`%s`): the merges look cut short (%d merges for %d tokens that need one)",
        name, (int)first, text, (int)t->n_merges, (int)need);
}

bool tok_add_special(tlm_tokenizer *t, int32_t id, tlm_err *err) {
    for (int32_t i = 0; i < t->n_special; i++)
        if (t->special[i] == id) return true;
    int32_t *s = realloc(t->special, ((size_t)t->n_special + 1) * sizeof *s);
    if (!s) return tlm_fail(err, "out of memory");
    t->special = s;
    int32_t i = t->n_special++;
    for (; i > 0 && s[i - 1] > id; i--) s[i] = s[i - 1];
    s[i] = id;
    return true;
}

typedef struct split {
    int32_t left, right;
} split;

static int cmp_split(const void *a, const void *b) {
    const split *x = a, *y = b;
    if (x->left != y->left) return x->left < y->left ? -1 : 1;
    return (x->right > y->right) - (x->right < y->right);
}

bool tok_merges_from_ranks(tlm_tokenizer *t, int32_t n_ranks, const char *name, tlm_err *err) {
    split *local = NULL;
    size_t cap = 0, longest = 0;
    /* The lengths some token has: a split is looked up only where both
     * sides could be tokens. Every split point's lookup hashes its bytes, so
     * a token of n bytes cost n^2 (a rank file with one line of a megabyte
     * took minutes to load); real vocabularies have tokens of every short
     * length, and the filter changes nothing for them. */
    for (int32_t id = 0; id < n_ranks; id++)
        if (t->len[id] > longest) longest = t->len[id];
    bool *has_len = calloc(longest + 1, sizeof *has_len);
    if (!has_len) return tlm_fail(err, "out of memory");
    for (int32_t id = 0; id < n_ranks; id++) has_len[t->len[id]] = true;
    bool ok = true;
    for (int32_t id = 0; id < n_ranks && ok; id++) {
        const uint8_t *b = t->pool + t->off[id];
        size_t n = t->len[id], k = 0;
        if (n < 2) continue;
        if (n - 1 > cap) {
            cap = n - 1;
            split *p = realloc(local, cap * sizeof *p);
            if (!p) {
                ok = tlm_fail(err, "out of memory");
                break;
            }
            local = p;
        }
        for (size_t i = 1; i < n; i++) {
            if (!has_len[i] || !has_len[n - i]) continue;
            int32_t l = tok_lookup(t, b, i), r = tok_lookup(t, b + i, n - i);
            if (l >= 0 && l < n_ranks && r >= 0 && r < n_ranks) local[k++] = (split){l, r};
        }
        qsort(local, k, sizeof *local, cmp_split);
        for (size_t i = 0; i < k && ok; i++) ok = tok_add_merge(t, local[i].left, local[i].right, name, NULL, 0, err);
    }
    free(local);
    free(has_len);
    return ok;
}

int32_t tok_merge_rank(const tlm_tokenizer *t, int32_t left, int32_t right, int32_t *result) {
    uint64_t key = ((uint64_t)(uint32_t)left << 32 | (uint32_t)right) + 1;
    for (size_t i = tok_hash_u64(key) & t->mmask;; i = (i + 1) & t->mmask) {
        if (t->mkey[i] == key) {
            *result = t->mresult[i];
            return t->mrank[i];
        }
        if (!t->mkey[i]) return -1;
    }
}

static void put_u32(tlm_sha256_ctx *h, uint32_t v) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    tlm_sha256_update(h, b, 4);
}

static void compute_hash(tlm_tokenizer *t) {
    tlm_sha256_ctx h;
    tlm_sha256_init(&h);
    static const char magic[] = "tlm tokenizer 1\n";
    tlm_sha256_update(&h, magic, sizeof magic - 1);
    put_u32(&h, (uint32_t)t->n_vocab);
    for (int32_t i = 0; i < t->n_vocab; i++) {
        put_u32(&h, t->len[i]);
        tlm_sha256_update(&h, t->pool + t->off[i], t->len[i]);
    }
    put_u32(&h, (uint32_t)t->n_merges);
    for (int32_t i = 0; i < t->n_merges; i++) {
        put_u32(&h, (uint32_t)t->merge_left[i]);
        put_u32(&h, (uint32_t)t->merge_right[i]);
    }
    const char *pat = t->pattern == TOK_PAT_LLAMA3 ? tok_llama3_pattern : tok_gpt2_pattern;
    put_u32(&h, (uint32_t)strlen(pat));
    tlm_sha256_update(&h, pat, strlen(pat));
    uint8_t im = t->ignore_merges;
    tlm_sha256_update(&h, &im, 1);
    put_u32(&h, (uint32_t)t->n_special);
    for (int32_t i = 0; i < t->n_special; i++) put_u32(&h, (uint32_t)t->special[i]);
    tlm_sha256_final(&h, t->hash);
}

bool tok_finish(tlm_tokenizer *t, tlm_err *err) {
    if (!merge_map_reserve(t, 0)) return tlm_fail(err, "out of memory"); /* tok_merge_rank needs a map */
    memset(t->special_first, 0, sizeof t->special_first);
    for (int32_t i = 0; i < t->n_special; i++) {
        uint8_t c = t->pool[t->off[t->special[i]]];
        t->special_first[c >> 3] |= (uint8_t)(1u << (c & 7));
    }
    static const char bos[] = "<|begin_of_text|>";
    int32_t b = tok_lookup(t, (const uint8_t *)bos, sizeof bos - 1);
    for (int32_t i = 0; i < t->n_special && b >= 0; i++)
        if (t->special[i] == b) t->bos = b;
    compute_hash(t);
    return true;
}

void tlm_tok_free(tlm_tokenizer *t) {
    if (!t) return;
    free(t->pool);
    free(t->off);
    free(t->len);
    free(t->vocab.slot);
    free(t->merge_left);
    free(t->merge_right);
    free(t->mkey);
    free(t->mrank);
    free(t->mresult);
    free(t->special);
    tlm_tok_encoder_free(t->encoder);
    free(t);
}

int32_t tlm_tok_vocab_size(const tlm_tokenizer *t) { return t->n_vocab; }
int32_t tlm_tok_merge_count(const tlm_tokenizer *t) { return t->n_merges; }
const uint8_t *tlm_tok_hash(const tlm_tokenizer *t) { return t->hash; }
const char *tlm_tok_pattern_name(const tlm_tokenizer *t) { return t->pattern == TOK_PAT_LLAMA3 ? "llama3" : "gpt2"; }
int32_t tlm_tok_bos(const tlm_tokenizer *t) { return t->bos; }

int32_t tlm_tok_eot(const tlm_tokenizer *t) {
    bool special;
    int32_t id = tlm_tok_find(t, "<|endoftext|>", 13, &special);
    if (!special) id = tlm_tok_find(t, "<|end_of_text|>", 15, &special);
    return special ? id : -1;
}

void tlm_tok_hash_hex(const uint8_t hash[32], char hex[65]) { tlm_sha256_hex(hash, hex); }

int32_t tlm_tok_find(const tlm_tokenizer *t, const char *text, size_t n, bool *special) {
    int32_t id = tok_lookup(t, (const uint8_t *)text, n);
    *special = false;
    for (int32_t i = 0; i < t->n_special && id >= 0; i++)
        if (t->special[i] == id) *special = true;
    return id;
}
