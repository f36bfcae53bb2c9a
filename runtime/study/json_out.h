/* Writing the study's JSON (plan.json, result.json, results.json): a
 * string or null, a number or null (JSON has no NaN: a diverged run's
 * loss), and defines as an object, through tlm_strbuf. Numbers are the
 * shortest decimals that read back as the same double. */
#ifndef TLM_STUDY_JSON_OUT_H
#define TLM_STUDY_JSON_OUT_H

#include "plan.h"
#include "tlm_rt/json.h"

void study_json_string(tlm_strbuf *sb, const char *s); /* NULL: null */
void study_json_real(tlm_strbuf *sb, double v);        /* not finite: null */
void study_json_strings(tlm_strbuf *sb, char **s, int n);
/* A variant's name, model, defines, params, MLP params, FLOPs and widths:
 * the fields plan.json and results.json share. */
void study_json_variant(tlm_strbuf *sb, const study_variant *v);

#endif
