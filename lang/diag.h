/* Diagnostics in the style of modern compilers:
 *
 *   model.tlm:3:5: error: unknown setting `layrs`
 *       3 |     layrs = 6;
 *         |     ^~~~~
 *         = hint: did you mean `layers`?
 *
 * They are printed as they are reported. Notes and hints belong to the error
 * or warning before them and are dropped with it once the error limit is hit. */
#ifndef TLM_DIAG_H
#define TLM_DIAG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "source.h"

typedef enum { DIAG_ERROR, DIAG_WARNING, DIAG_NOTE } diag_level;

typedef struct diag_engine {
    source_table *sources;
    FILE *out;              /* NULL: count, print nothing (the fuzzer) */
    bool color;
    int errors, warnings;
    int max_errors;         /* stop after this many errors (0: no limit) */
    bool stopped;           /* the limit was reached: callers should wind down */
    bool last_dropped;      /* the last error/warning was not printed */
    tlm_loc last_error_loc; /* where the last error shown was */
    const char *context;    /* prefixed to errors and warnings while set, e.g.
                               "study sweep: variant ratio=1.75: " */
    uint64_t *seen;         /* fingerprints of reported errors and warnings: */
    size_t nseen, capseen;  /* the same message at the same place is shown once */
} diag_engine;

void diag_init(diag_engine *d, source_table *sources, FILE *out);
void diag_free(diag_engine *d);

void diag_error(diag_engine *d, tlm_loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void diag_warning(diag_engine *d, tlm_loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void diag_note(diag_engine *d, tlm_loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void diag_hint(diag_engine *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prints "N errors, M warnings generated." when there were any. */
void diag_summary(diag_engine *d);

#endif
