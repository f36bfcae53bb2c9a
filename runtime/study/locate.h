/* Finding the programs a study runs: tlmc and a PNG converter. */
#ifndef TLM_STUDY_LOCATE_H
#define TLM_STUDY_LOCATE_H

#include <stdbool.h>
#include <stddef.h>

#include "tlm_rt/error.h"

/* tlmc's path: $TLMC, else tlmc beside self (this program's path), else
 * ../compiler/tlmc from self's folder (the build tree), else tlmc on PATH.
 * false with a message naming where to put it. */
bool study_find_tlmc(const char *self, char *out, size_t n, tlm_err *err);

/* The first executable `name` in $PATH, into out; false when none. */
bool study_which(const char *name, char *out, size_t n);

#endif
