/* Turns a model declaration (with its parents) into a checked_model: every
 * setting is looked up in the vocabulary, evaluated, defaulted and checked
 * against the others, the train defaults are merged, and the widths are
 * computed and fitted to the budget. */
#ifndef TLM_CHECK_MODEL_H
#define TLM_CHECK_MODEL_H

#include <stdbool.h>
#include "checked_model.h"
#include "program.h"

/* Returns false if the model has errors (reported). names_only: the file had
 * syntax errors, so only report what needs no evaluation (unknown settings,
 * names, mixers) and return false. */
bool check_model(program *p, const item *model, checked_model *out, bool names_only);

#endif
