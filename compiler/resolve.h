/* Static checks of names in expressions, before anything is evaluated:
 * unknown names and functions (with suggestions), argument counts, schedules
 * that call themselves, params defined in terms of themselves. Every schedule
 * and param is checked, used or not. */
#ifndef TLM_RESOLVE_H
#define TLM_RESOLVE_H

#include <stdbool.h>
#include "program.h"

void resolve_program(program *p);
/* A setting's value that must be a number; layer_ok: l, L, t may appear. */
void resolve_number(program *p, const expr *e, bool layer_ok);

#endif
