/* The end of a study: every run's result.json read back, summarised, and
 * written as OUT/results.json, OUT/results.md and the plots (SVG; with png,
 * also PNG when rsvg-convert or ImageMagick's convert is on PATH; none: a
 * note, once). A short verdict per variant goes to out. A signal the
 * runner records in stop (may be NULL) stops the PNG conversion (the
 * converter gets it, spawn.h) and the verdicts: the caller says it stopped. */
#ifndef TLM_STUDY_FINISH_H
#define TLM_STUDY_FINISH_H

#include <stdbool.h>
#include <stdio.h>

#include "plan.h"
#include "spawn.h"

bool study_finish(const study_plan *plan, const char *dir, bool png, const study_stop *stop, FILE *out, tlm_err *err);

#endif
