/* The study's JSON writing helpers (json_out.h). */
#include "json_out.h"

#include <math.h>
#include <string.h>

#include "numfmt.h"

void study_json_string(tlm_strbuf *sb, const char *s) {
    if (s) tlm_json_write_string(sb, s, strlen(s));
    else tlm_sb_puts(sb, "null");
}

void study_json_real(tlm_strbuf *sb, double v) {
    char buf[40];
    if (isfinite(v)) tlm_sb_puts(sb, fmt_real(buf, sizeof buf, v));
    else tlm_sb_puts(sb, "null");
}

void study_json_strings(tlm_strbuf *sb, char **s, int n) {
    tlm_sb_puts(sb, "[");
    for (int i = 0; i < n; i++) {
        if (i) tlm_sb_puts(sb, ", ");
        study_json_string(sb, s[i]);
    }
    tlm_sb_puts(sb, "]");
}

void study_json_variant(tlm_strbuf *sb, const study_variant *v) {
    tlm_sb_puts(sb, "\"name\": ");
    study_json_string(sb, v->name);
    tlm_sb_puts(sb, ", \"model\": ");
    study_json_string(sb, v->model);
    tlm_sb_puts(sb, ", \"defines\": {");
    for (int k = 0; k < v->ndefines; k++) {
        if (k) tlm_sb_puts(sb, ", ");
        study_json_string(sb, v->defines[k].name);
        tlm_sb_puts(sb, ": ");
        study_json_string(sb, v->defines[k].value);
    }
    tlm_sb_printf(sb, "}, \"params\": %lld, \"mlp_params\": %lld, \"flops_per_token\": %lld, \"widths\": [",
                  (long long)v->params, (long long)v->mlp_params, (long long)v->flops_per_token);
    for (int k = 0; k < v->nwidths; k++) tlm_sb_printf(sb, "%s%lld", k ? ", " : "", (long long)v->widths[k]);
    tlm_sb_puts(sb, "]");
}
