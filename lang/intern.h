/* Interned names: equal names are the same pointer, so symbol tables compare
 * pointers and hash addresses. */
#ifndef TLM_INTERN_H
#define TLM_INTERN_H

#include <stddef.h>
#include "arena.h"

typedef struct interner {
    arena *arena;
    const char **slots;
    size_t cap, count;
} interner;

void interner_init(interner *in, arena *a);
void interner_free(interner *in);
const char *intern(interner *in, const char *s, size_t n);
const char *intern_cstr(interner *in, const char *s);

#endif
