/* What tlmc tells about checked studies: the grid as text (`--report`: one
 * line per variant with its params, MLP params, FLOPs per token and first
 * and last widths, the baseline marked) and the plan as JSON (`--plan`, the
 * contract tlm-run study reads; docs/compiler.md shows it). */
#ifndef TLM_STUDY_REPORT_H
#define TLM_STUDY_REPORT_H

#include <stdio.h>

#include "study.h"

void study_report_text(FILE *out, const study *st);
/* file: the .tlm file's absolute path. Call begin, each study, then end. */
/* sources: every file the program was read from (the .tlm file and the
 * modules it uses, absolute): what the runner hashes to tell that a
 * variant's recipe changed. */
void study_plan_begin(FILE *out, const char *file, const char *const *sources, int nsources);
void study_plan_json(FILE *out, const study *st, int index);
void study_plan_end(FILE *out);

#endif
