/* Integer MLP widths from the evaluated schedule: each layer rounded to the
 * quantum, with the sum held exactly at the budget by moving whole quanta
 * between layers (largest remainder first, ties broken so that a monotone
 * schedule stays monotone). A budget that cannot hold, or that the schedule
 * breaks, is an error with the numbers. */
#ifndef TLM_WIDTHS_H
#define TLM_WIDTHS_H

#include <stdbool.h>
#include "checked_model.h"
#include "session.h"

/* Fills m->widths from m->raw_widths. Returns false after reporting. */
bool fit_widths(tlm_session *s, checked_model *m, tlm_loc dff_loc, tlm_loc budget_loc, tlm_loc quantum_loc);

/* The widths rounding alone would give: each layer to the nearest quantum. */
void round_widths(const checked_model *m, int64_t *out);

#endif
