#include "symtab.h"
#include "xalloc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static size_t slot(const char *key, size_t cap) {
    uintptr_t h = (uintptr_t)key;
    h ^= h >> 17;
    h *= 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 7) & (cap - 1);
}

void symtab_free(symtab *t) {
    free(t->keys);
    free(t->values);
    t->keys = NULL;
    t->values = NULL;
    t->cap = t->count = 0;
}

static size_t find(const symtab *t, const char *key) {
    size_t i = slot(key, t->cap);
    while (t->keys[i] && t->keys[i] != key) i = (i + 1) & (t->cap - 1);
    return i;
}

void *symtab_get(const symtab *t, const char *key) {
    if (!t->cap) return NULL;
    size_t i = find(t, key);
    return t->keys[i] ? t->values[i] : NULL;
}

static void grow(symtab *t) {
    symtab n = {0};
    n.cap = t->cap ? 2 * t->cap : 64;
    n.keys = tlm_xcalloc(n.cap, sizeof *n.keys);
    n.values = tlm_xcalloc(n.cap, sizeof *n.values);
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->keys[i]) continue;
        size_t j = find(&n, t->keys[i]);
        n.keys[j] = t->keys[i];
        n.values[j] = t->values[i];
        n.count++;
    }
    symtab_free(t);
    *t = n;
}

void *symtab_put_new(symtab *t, const char *key, void *value) {
    if (2 * (t->count + 1) > t->cap) grow(t);
    size_t i = find(t, key);
    if (t->keys[i]) return t->values[i];
    t->keys[i] = key;
    t->values[i] = value;
    t->count++;
    return NULL;
}

void symtab_set(symtab *t, const char *key, void *value) {
    if (2 * (t->count + 1) > t->cap) grow(t);
    size_t i = find(t, key);
    if (!t->keys[i]) t->count++;
    t->keys[i] = key;
    t->values[i] = value;
}
