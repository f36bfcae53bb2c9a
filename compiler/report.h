/* What tlmc tells the user about checked models: a one-line summary, the
 * per-layer width table with costs against the baseline (text or JSON), and
 * an SVG plot of width against depth. */
#ifndef TLM_REPORT_H
#define TLM_REPORT_H

#include <stdio.h>
#include "checked_model.h"
#include "errmsg.h"

void report_summary(FILE *out, const checked_model *m);
void report_text(FILE *out, const checked_model *m);
/* JSON: call begin, then one model per call, then end. */
void report_json_begin(FILE *out);
void report_json_model(FILE *out, const checked_model *m, int index);
void report_json_end(FILE *out);
/* Several models in one plot; returns false if the file cannot be written. */
bool report_svg(const char *path, const checked_model *const *models, int n, tlm_err *err);

/* The sorted distinct widths; returns how many. */
int distinct_widths(const checked_model *m, int64_t *out);

#endif
