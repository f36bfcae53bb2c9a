/* A bump allocator. Everything the front end builds (tokens' text, the AST,
 * interned names, checked models) lives in one arena and is freed at once,
 * so error paths never leak and never double-free. */
#ifndef TLM_ARENA_H
#define TLM_ARENA_H

#include <stddef.h>

typedef struct arena_block arena_block;

typedef struct arena {
    arena_block *head;
    size_t total;          /* bytes handed out, for limits and tests */
} arena;

void arena_init(arena *a);
void arena_free(arena *a);
void *arena_alloc(arena *a, size_t size);          /* zeroed, 16-byte aligned */
char *arena_strndup(arena *a, const char *s, size_t n);
char *arena_printf(arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
