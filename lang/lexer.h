/* The .tlm lexer (lexer.re, compiled by re2c). It reads a NUL-terminated
 * buffer, reports lexical errors itself and hands the parser a token that
 * keeps parsing going (a bad number still lexes as a number). */
#ifndef TLM_LEXER_H
#define TLM_LEXER_H

#include <stdint.h>
#include "session.h"

typedef struct open_bracket {
    char c;
    uint32_t offset;
} open_bracket;

typedef struct lexer {
    tlm_session *session;
    int file;
    const unsigned char *base, *cur, *end;   /* *end == '\0' */
    uint32_t prev_end;                       /* end of the token before the last one */
    uint32_t last_end;                       /* end of the last token */
    open_bracket *open;                      /* brackets not yet closed */
    int nopen, capopen;
    int start_token;                         /* returned first if nonzero */
} lexer;

void lexer_init(lexer *lx, tlm_session *s, int file);
void lexer_free(lexer *lx);

#endif
