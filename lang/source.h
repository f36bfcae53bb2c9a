/* Source files held in memory, NUL-terminated (the lexer's sentinel), with a
 * table of line starts built on first use so diagnostics can turn a byte
 * offset into line, column and the text of the line. */
#ifndef TLM_SOURCE_H
#define TLM_SOURCE_H

#include <stddef.h>
#include <stdint.h>

/* A span of source text: a file index and byte offsets [begin, end). */
typedef struct tlm_loc {
    int32_t file;            /* index into the source table; -1: no location */
    uint32_t begin, end;
} tlm_loc;

#define TLM_NO_LOC ((tlm_loc){-1, 0, 0})

typedef struct source {
    char *name;              /* as the user wrote it */
    char *path;              /* resolved path; modules are loaded once per path */
    char *text;              /* len bytes + NUL */
    size_t len;
    uint32_t *line_starts;   /* lazily built */
    size_t nlines;
} source;

typedef struct source_table {
    source **files;
    int count, cap;
} source_table;

enum { TLM_MAX_SOURCE_BYTES = 64 * 1024 * 1024 };

void source_table_free(source_table *t);
/* Takes ownership of text (malloc'd, len bytes followed by a NUL). */
int source_add(source_table *t, const char *name, const char *path, char *text, size_t len);
/* Reads a file; returns the new index, or -1 and sets *why (static text). */
int source_load(source_table *t, const char *name, const char *path, const char **why);

/* 1-based line; column counts characters (UTF-8 code points), 1-based. */
void source_position(source *s, uint32_t offset, unsigned *line, unsigned *col);
/* The text of a 1-based line, without its newline. */
const char *source_line(source *s, unsigned line, size_t *len);

#endif
