#include "xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Noreturn void tlm_out_of_memory(void) {
    fputs("tlmc: out of memory\n", stderr);
    exit(1);
}

/* A zero-byte request still gets a real block, so a NULL result always means
 * the system refused. */
void *tlm_xmalloc(size_t size) {
    void *p = malloc(size ? size : 1);
    if (!p) tlm_out_of_memory();
    return p;
}

void *tlm_xcalloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) tlm_out_of_memory();
    return p;
}

void *tlm_xrealloc(void *p, size_t size) {
    void *q = realloc(p, size ? size : 1);
    if (!q) tlm_out_of_memory();
    return q;
}

char *tlm_xstrndup(const char *s, size_t n) {
    char *p = tlm_xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *tlm_xstrdup(const char *s) { return tlm_xstrndup(s, strlen(s)); }
