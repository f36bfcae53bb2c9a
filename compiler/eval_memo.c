#include "eval_memo.h"

#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

/* One table interns both kinds of key, a frame (its schedule, arguments and
 * their scopes) and a mean's call (its expression, frame and L), giving
 * each an id from 1; a mean's value is kept in its entry. At most this many
 * keys: far more than a model file has call sites, a few MB at most. The
 * table starts small (most models call mean once or never) and doubles at
 * half full. */
enum { MAX_KEYS = 1 << 16, FIRST_SLOTS = 16, MAX_KEY = 3 + 2 * 64 };
enum { KEY_FRAME = 1, KEY_MEAN = 2 };

typedef struct entry {
    uint64_t hash;
    uint64_t *key; /* NULL: an empty slot */
    int len;
    int64_t id;
    double value; /* a mean's */
} entry;

struct eval_memo {
    entry *slots;
    size_t nslots; /* a power of two */
    int n;
};

static uint64_t mix(uint64_t h, uint64_t x) {
    h ^= x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdULL;
}

eval_memo *eval_memo_new(void) { return tlm_xcalloc(1, sizeof(eval_memo)); }

void eval_memo_free(eval_memo *m) {
    if (!m) return;
    for (size_t i = 0; i < m->nslots; i++) free(m->slots[i].key);
    free(m->slots);
    free(m);
}

/* The slot of key in a table of nslots: the first that is empty or holds it. */
static entry *slot(entry *t, size_t nslots, uint64_t h, const uint64_t *key, int len) {
    for (size_t j = h & (nslots - 1);; j = (j + 1) & (nslots - 1))
        if (!t[j].key || (t[j].hash == h && t[j].len == len && !memcmp(t[j].key, key, (size_t)len * sizeof *key)))
            return &t[j];
}

/* key's entry, made when add and it is new and there is room; else NULL. */
static entry *entry_of(eval_memo *m, const uint64_t *key, int len, bool add) {
    uint64_t h = 0;
    for (int i = 0; i < len; i++) h = mix(h, key[i]);
    entry *s = m->slots ? slot(m->slots, m->nslots, h, key, len) : NULL;
    if (s && s->key) return s;
    if (!add || m->n == MAX_KEYS) return NULL;
    if (2 * (size_t)(m->n + 1) > m->nslots) {
        size_t nslots = m->nslots ? 2 * m->nslots : FIRST_SLOTS;
        entry *t = tlm_xcalloc(nslots, sizeof *t);
        for (size_t i = 0; i < m->nslots; i++)
            if (m->slots[i].key) *slot(t, nslots, m->slots[i].hash, m->slots[i].key, m->slots[i].len) = m->slots[i];
        free(m->slots);
        m->slots = t, m->nslots = nslots;
        s = slot(m->slots, m->nslots, h, key, len);
    }
    s->key = tlm_xmalloc((size_t)len * sizeof *key);
    memcpy(s->key, key, (size_t)len * sizeof *key);
    s->hash = h, s->len = len, s->id = ++m->n; /* ids from 1: 0 is the top level */
    return s;
}

int64_t eval_memo_frame(eval_memo *m, const void *sched, int n, const void *const *args, const int64_t *scopes) {
    uint64_t key[MAX_KEY];
    if (n > 64) return EVAL_FRAME_UNKNOWN;
    int len = 0;
    key[len++] = KEY_FRAME, key[len++] = (uint64_t)(uintptr_t)sched, key[len++] = (uint64_t)n;
    for (int i = 0; i < n; i++) {
        if (scopes[i] == EVAL_FRAME_UNKNOWN) return EVAL_FRAME_UNKNOWN;
        key[len++] = (uint64_t)(uintptr_t)args[i], key[len++] = (uint64_t)scopes[i];
    }
    const entry *s = entry_of(m, key, len, true);
    return s ? s->id : EVAL_FRAME_UNKNOWN;
}

bool eval_memo_get(eval_memo *m, const void *e, int64_t frame, int64_t L, double *value) {
    const uint64_t key[] = {KEY_MEAN, (uint64_t)(uintptr_t)e, (uint64_t)frame, (uint64_t)L};
    const entry *s = entry_of(m, key, 4, false); /* a mean's key is made only with its value */
    if (s) *value = s->value;
    return s != NULL;
}

void eval_memo_put(eval_memo *m, const void *e, int64_t frame, int64_t L, double value) {
    const uint64_t key[] = {KEY_MEAN, (uint64_t)(uintptr_t)e, (uint64_t)frame, (uint64_t)L};
    entry *s = entry_of(m, key, 4, true);
    if (s) s->value = value;
}
