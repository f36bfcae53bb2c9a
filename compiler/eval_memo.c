#include "eval_memo.h"

#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

/* Each table holds at most this many entries: far more distinct frames and
 * means than a model file has call sites, and a few MB at most. Tables
 * start small (most models call mean once or never) and double at half
 * full. */
enum { MAX_ENTRIES = 1 << 16, FIRST_SLOTS = 16 };

typedef struct frame_entry {
    uint64_t hash;
    uint64_t *key; /* sched, n, then each argument and its scope; NULL: an empty slot */
    int len;
    int64_t id;
} frame_entry;

typedef struct mean_entry {
    const void *e; /* NULL: an empty slot */
    int64_t frame, L;
    double value;
} mean_entry;

struct eval_memo {
    frame_entry *frames;
    mean_entry *means;
    size_t frame_slots, mean_slots; /* powers of two */
    int nframes, nmeans;
};

static uint64_t mix(uint64_t h, uint64_t x) {
    h ^= x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdULL;
}

eval_memo *eval_memo_new(void) { return tlm_xcalloc(1, sizeof(eval_memo)); }

void eval_memo_free(eval_memo *m) {
    if (!m) return;
    for (size_t i = 0; i < m->frame_slots; i++) free(m->frames[i].key);
    free(m->frames);
    free(m->means);
    free(m);
}

/* The slot of hash h in a table of `slots` (a power of two): the first
 * that is empty or holds the key (same(i)). */
static frame_entry *frame_slot(frame_entry *t, size_t slots, uint64_t h, const uint64_t *key, int len) {
    for (size_t j = h & (slots - 1);; j = (j + 1) & (slots - 1))
        if (!t[j].key || (t[j].hash == h && t[j].len == len && !memcmp(t[j].key, key, (size_t)len * sizeof *key)))
            return &t[j];
}

static void grow_frames(eval_memo *m) {
    size_t slots = m->frame_slots ? 2 * m->frame_slots : FIRST_SLOTS;
    frame_entry *t = tlm_xcalloc(slots, sizeof *t);
    for (size_t i = 0; i < m->frame_slots; i++)
        if (m->frames[i].key)
            *frame_slot(t, slots, m->frames[i].hash, m->frames[i].key, m->frames[i].len) = m->frames[i];
    free(m->frames);
    m->frames = t, m->frame_slots = slots;
}

int64_t eval_memo_frame(eval_memo *m, const void *sched, int n, const void *const *args, const int64_t *scopes) {
    uint64_t key[2 + 2 * 64];
    if (n > 64) return EVAL_FRAME_UNKNOWN;
    int len = 0;
    key[len++] = (uint64_t)(uintptr_t)sched, key[len++] = (uint64_t)n;
    for (int i = 0; i < n; i++) {
        if (scopes[i] == EVAL_FRAME_UNKNOWN) return EVAL_FRAME_UNKNOWN;
        key[len++] = (uint64_t)(uintptr_t)args[i], key[len++] = (uint64_t)scopes[i];
    }
    uint64_t h = 0;
    for (int i = 0; i < len; i++) h = mix(h, key[i]);
    if (2 * (size_t)(m->nframes + 1) > m->frame_slots) {
        if (m->nframes == MAX_ENTRIES) { /* full: a frame seen before still has its id */
            frame_entry *s = m->frames ? frame_slot(m->frames, m->frame_slots, h, key, len) : NULL;
            return s && s->key ? s->id : EVAL_FRAME_UNKNOWN;
        }
        grow_frames(m);
    }
    frame_entry *s = frame_slot(m->frames, m->frame_slots, h, key, len);
    if (!s->key) {
        s->key = tlm_xmalloc((size_t)len * sizeof *key);
        memcpy(s->key, key, (size_t)len * sizeof *key);
        s->hash = h, s->len = len, s->id = ++m->nframes; /* ids from 1: 0 is the top level */
    }
    return s->id;
}

static uint64_t mean_hash(const void *e, int64_t frame, int64_t L) {
    return mix(mix(mix(0, (uint64_t)(uintptr_t)e), (uint64_t)frame), (uint64_t)L);
}

static mean_entry *mean_slot(mean_entry *t, size_t slots, const void *e, int64_t frame, int64_t L) {
    for (size_t j = mean_hash(e, frame, L) & (slots - 1);; j = (j + 1) & (slots - 1))
        if (!t[j].e || (t[j].e == e && t[j].frame == frame && t[j].L == L)) return &t[j];
}

bool eval_memo_get(const eval_memo *m, const void *e, int64_t frame, int64_t L, double *value) {
    if (!m->means) return false;
    const mean_entry *s = mean_slot(m->means, m->mean_slots, e, frame, L);
    if (!s->e) return false;
    *value = s->value;
    return true;
}

void eval_memo_put(eval_memo *m, const void *e, int64_t frame, int64_t L, double value) {
    if (2 * (size_t)(m->nmeans + 1) > m->mean_slots) {
        if (m->nmeans == MAX_ENTRIES) return;
        size_t slots = m->mean_slots ? 2 * m->mean_slots : FIRST_SLOTS;
        mean_entry *t = tlm_xcalloc(slots, sizeof *t);
        for (size_t i = 0; i < m->mean_slots; i++)
            if (m->means[i].e) *mean_slot(t, slots, m->means[i].e, m->means[i].frame, m->means[i].L) = m->means[i];
        free(m->means);
        m->means = t, m->mean_slots = slots;
    }
    mean_entry *s = mean_slot(m->means, m->mean_slots, e, frame, L);
    if (!s->e) m->nmeans++;
    *s = (mean_entry){e, frame, L, value};
}
