#include "intern.h"
#include "xalloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;          /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

void interner_init(interner *in, arena *a) {
    in->arena = a;
    in->cap = 256;
    in->count = 0;
    in->slots = tlm_xcalloc(in->cap, sizeof *in->slots);
}

void interner_free(interner *in) {
    free(in->slots);
    in->slots = NULL;
    in->cap = in->count = 0;
}

static void grow(interner *in) {
    size_t cap = in->cap * 2;
    const char **slots = tlm_xcalloc(cap, sizeof *slots);
    for (size_t i = 0; i < in->cap; i++) {
        const char *s = in->slots[i];
        if (!s) continue;
        size_t j = hash_bytes(s, strlen(s)) & (cap - 1);
        while (slots[j]) j = (j + 1) & (cap - 1);
        slots[j] = s;
    }
    free(in->slots);
    in->slots = slots;
    in->cap = cap;
}

const char *intern(interner *in, const char *s, size_t n) {
    if (2 * (in->count + 1) > in->cap) grow(in);
    size_t j = hash_bytes(s, n) & (in->cap - 1);
    for (;;) {
        const char *t = in->slots[j];
        if (!t) break;
        if (strncmp(t, s, n) == 0 && t[n] == '\0') return t;
        j = (j + 1) & (in->cap - 1);
    }
    const char *copy = arena_strndup(in->arena, s, n);
    in->slots[j] = copy;
    in->count++;
    return copy;
}

const char *intern_cstr(interner *in, const char *s) { return intern(in, s, strlen(s)); }
