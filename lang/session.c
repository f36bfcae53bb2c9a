#include "session.h"

#include <string.h>

void session_init(tlm_session *s, FILE *out) {
    memset(s, 0, sizeof *s);
    arena_init(&s->arena);
    interner_init(&s->names, &s->arena);
    diag_init(&s->diag, &s->sources, out);
}

void session_free(tlm_session *s) {
    diag_free(&s->diag);
    interner_free(&s->names);
    source_table_free(&s->sources);
    arena_free(&s->arena);
}
