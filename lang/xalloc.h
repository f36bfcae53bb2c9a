/* The checked allocator of the front end and the compiler (QBE's emalloc):
 * these never return NULL. When memory runs out they print
 * "tlmc: out of memory" and exit with status 1 (the compiler cannot do what
 * was asked), so callers never test the result and no error path frees half a
 * structure. Memory that lives as long as a compilation belongs in an arena
 * (arena.h); these are for buffers that grow or outlive one. */
#ifndef TLM_XALLOC_H
#define TLM_XALLOC_H

#include <stddef.h>

void *tlm_xmalloc(size_t size);
void *tlm_xcalloc(size_t count, size_t size);            /* zeroed */
void *tlm_xrealloc(void *p, size_t size);
char *tlm_xstrdup(const char *s);
char *tlm_xstrndup(const char *s, size_t n);
_Noreturn void tlm_out_of_memory(void);

#endif
