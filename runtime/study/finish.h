/* The end of a study: every run's result.json read back, summarised, and
 * written as OUT/results.json, OUT/results.md and the plots (SVG; with png,
 * also PNG when rsvg-convert or ImageMagick's convert is on PATH; none: a
 * note, once). A short verdict per variant goes to out. */
#ifndef TLM_STUDY_FINISH_H
#define TLM_STUDY_FINISH_H

#include <stdbool.h>
#include <stdio.h>

#include "plan.h"

bool study_finish(const study_plan *plan, const char *dir, bool png, FILE *out, tlm_err *err);

#endif
