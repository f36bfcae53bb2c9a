#include "study_report.h"

#include <string.h>

#include "cost.h"
#include "numfmt.h"
#include "tlm_train_settings.h"

static int64_t first_width(const checked_model *m) { return m->widths[0]; }
static int64_t last_width(const checked_model *m) { return m->widths[m->layers - 1]; }

void study_report_text(FILE *out, const study *st) {
    fprintf(out, "study %s: %d variant%s x %d seed%s (", st->name, st->nvariants, st->nvariants == 1 ? "" : "s",
            st->nseeds, st->nseeds == 1 ? "" : "s");
    for (int i = 0; i < st->nseeds; i++) fprintf(out, "%s%lld", i ? ", " : "", (long long)st->seeds[i]);
    fprintf(out, "), baseline %s\n", st->variants[st->baseline].name);
    int wname = 7;
    for (int i = 0; i < st->nvariants; i++) {
        int n = (int)strlen(st->variants[i].name) + (i == st->baseline ? 11 : 0);
        if (n > wname) wname = n;
    }
    fprintf(out, "  %-*s  %-16s %15s %13s %15s  %s\n", wname, "variant", "model", "params", "MLP params", "FLOP/token",
            "d_ff first..last");
    int64_t min_mlp = 0, max_mlp = 0;
    double min_flops = 0, max_flops = 0;
    for (int i = 0; i < st->nvariants; i++) {
        const study_variant *v = &st->variants[i];
        const checked_model *m = &v->checked;
        model_cost c = cost_of_model(m, m->widths);
        char name[1100], a[32], b[32], f[32];
        snprintf(name, sizeof name, "%s%s", v->name, i == st->baseline ? " (baseline)" : "");
        fprintf(out, "  %-*s  %-16s %15s %13s %15s  %lld..%lld\n", wname, name, m->name,
                fmt_int(a, sizeof a, c.total_params, 0), fmt_int(b, sizeof b, c.mlp_params, 0),
                fmt_int(f, sizeof f, (int64_t)c.total_flops, 0), (long long)first_width(m), (long long)last_width(m));
        if (i == 0 || c.mlp_params < min_mlp) min_mlp = c.mlp_params;
        if (i == 0 || c.mlp_params > max_mlp) max_mlp = c.mlp_params;
        if (i == 0 || c.total_flops < min_flops) min_flops = c.total_flops;
        if (i == 0 || c.total_flops > max_flops) max_flops = c.total_flops;
    }
    char a[32], b[32];
    if (min_mlp == max_mlp && min_flops == max_flops)
        fprintf(out, "  MLP params and FLOPs per token (forward): equal in every variant\n");
    else if (min_mlp == max_mlp)
        fprintf(out, "  MLP params: equal in every variant; FLOPs per token (forward) differ by up to %s\n",
                fmt_int(b, sizeof b, (int64_t)(max_flops - min_flops), 0));
    else if (min_flops == max_flops)
        fprintf(out,
                "  MLP params differ by up to %s between variants; FLOPs per token (forward): equal in every "
                "variant\n",
                fmt_int(a, sizeof a, max_mlp - min_mlp, 0));
    else
        fprintf(out, "  MLP params differ by up to %s and FLOPs per token by up to %s between variants\n",
                fmt_int(a, sizeof a, max_mlp - min_mlp, 0), fmt_int(b, sizeof b, (int64_t)(max_flops - min_flops), 0));
}

/* A JSON string: quotes, backslashes and control characters escaped. */
static void json_string(FILE *out, const char *s) {
    fputc('"', out);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') fprintf(out, "\\%c", *c);
        else if (*c < 0x20) fprintf(out, "\\u%04x", *c);
        else fputc(*c, out);
    }
    fputc('"', out);
}

static void json_path_or_null(FILE *out, const char *path) {
    if (path) json_string(out, path);
    else fputs("null", out);
}

static void json_paths(FILE *out, const study_list *l) {
    fputc('[', out);
    for (int i = 0; i < l->n; i++) {
        if (i) fputs(", ", out);
        json_string(out, l->paths[i]);
    }
    fputc(']', out);
}

/* The settings the study's train block gives, as the baseline was built
 * with them (a call's choice by name: "adamw"); for display only. */
static void json_train(FILE *out, const study *st) {
    fputc('{', out);
    const tlm_abi_train *t = &st->variants[st->baseline].checked.train;
    int n = 0;
    for (const setting *x = st->decl->train ? st->decl->train->settings : NULL; x; x = x->next) {
        const tlm_train_setting *row = tlm_train_find(x->name);
        if (!row) continue;
        char v[64];
        fprintf(out, "%s\"%s\": ", n++ ? ", " : "", row->key);
        if (row->kind == TLM_TS_CHOICE) json_string(out, tlm_train_format(v, sizeof v, row, t));
        else if (row->kind == TLM_TS_REAL) fputs(fmt_real(v, sizeof v, tlm_train_get(t, row)), out);
        else fputs(tlm_train_format(v, sizeof v, row, t), out);
    }
    fputc('}', out);
}

void study_plan_begin(FILE *out, const char *file, const char *const *sources, int nsources) {
    fputs("{\"file\": ", out);
    json_string(out, file);
    fputs(", \"sources\": [", out);
    for (int i = 0; i < nsources; i++) {
        if (i) fputs(", ", out);
        json_string(out, sources[i]);
    }
    fputs("], \"studies\": [", out);
}

void study_plan_end(FILE *out) { fputs("]}\n", out); }

void study_plan_json(FILE *out, const study *st, int index) {
    fputs(index ? ",\n {\"name\": " : "\n {\"name\": ", out);
    json_string(out, st->name);
    fputs(", \"baseline\": ", out);
    json_string(out, st->variants[st->baseline].name);
    fputs(",\n  \"seeds\": [", out);
    for (int i = 0; i < st->nseeds; i++) fprintf(out, "%s%lld", i ? ", " : "", (long long)st->seeds[i]);
    fputs("],\n  \"train\": ", out);
    json_train(out, st);
    fputs(",\n  \"data\": ", out);
    json_path_or_null(out, st->data);
    fputs(", \"val\": ", out);
    json_path_or_null(out, st->val);
    fputs(",\n  \"eval\": ", out);
    json_paths(out, &st->eval);
    fputs(", \"choices\": ", out);
    json_paths(out, &st->choices);
    fputs(", \"cloze\": ", out);
    json_paths(out, &st->cloze);
    fputs(",\n  \"variants\": [", out);
    for (int i = 0; i < st->nvariants; i++) {
        const study_variant *v = &st->variants[i];
        const checked_model *m = &v->checked;
        model_cost c = cost_of_model(m, m->widths);
        fputs(i ? ",\n   {\"name\": " : "\n   {\"name\": ", out);
        json_string(out, v->name);
        fputs(", \"model\": ", out);
        json_string(out, m->name);
        fputs(", \"defines\": {", out);
        for (int j = 0; v->values && j < st->naxes; j++) {
            fprintf(out, "%s\"%s\": ", j ? ", " : "", st->axes[j]->name);
            json_string(out, v->value_texts[j]);
        }
        fprintf(out, "},\n    \"params\": %lld, \"mlp_params\": %lld, \"flops_per_token\": %.0f, \"widths\": [",
                (long long)c.total_params, (long long)c.mlp_params, c.total_flops);
        for (int64_t l = 0; l < m->layers; l++) fprintf(out, "%s%lld", l ? ", " : "", (long long)m->widths[l]);
        fputs("]}", out);
    }
    fputs("]}", out);
}
