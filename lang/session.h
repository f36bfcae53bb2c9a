/* A compilation session: the memory, names, files and diagnostics that every
 * phase of the front end shares. */
#ifndef TLM_SESSION_H
#define TLM_SESSION_H

#include "arena.h"
#include "diag.h"
#include "intern.h"
#include "source.h"

typedef struct tlm_session {
    arena arena;
    interner names;
    source_table sources;
    diag_engine diag;
} tlm_session;

/* out: where diagnostics go (NULL: nowhere). */
void session_init(tlm_session *s, FILE *out);
void session_free(tlm_session *s);

#endif
