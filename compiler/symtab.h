/* A map from interned names to declarations. Keys are compared by pointer. */
#ifndef TLM_SYMTAB_H
#define TLM_SYMTAB_H

#include <stddef.h>

typedef struct symtab {
    const char **keys;
    void **values;
    size_t cap, count;
} symtab;

void symtab_free(symtab *t);
void *symtab_get(const symtab *t, const char *key);
/* Returns the previous value, or NULL if the key was new (then it is set). */
void *symtab_put_new(symtab *t, const char *key, void *value);
void symtab_set(symtab *t, const char *key, void *value);

#endif
