/* results.json and results.md of a study, from its summary: per variant,
 * mean ± standard deviation over seeds of every metric, params and FLOPs
 * per token, tokens/s; per variant and metric, the paired difference
 * against the baseline with its 95% interval, the half-width (the smallest
 * difference the seeds resolve) and the verdict. Timing (tokens/s, seconds
 * of training) sits under "timing" keys in the JSON: the only numbers that
 * differ between two runs of the same study. */
#ifndef TLM_STUDY_REPORT_H
#define TLM_STUDY_REPORT_H

#include "summary.h"

/* malloc'd text, NULL when out of memory. plots: the plot files written
 * beside results.md (basenames), for its links; may be NULL. */
char *study_report_json(const study_summary *s);
char *study_report_markdown(const study_summary *s, const char *const *plots, int nplots);

#endif
