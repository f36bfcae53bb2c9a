/* Reading a study's plan JSON (plan.h) and writing it back canonically. */
#include "plan.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "precision.h"
#include "json_out.h"
#include "numfmt.h"
#include "tlm_rt/json.h"

static char *dup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* The study's or a variant's name (kind: "study", "variant"), which
 * names a folder: at most FOLDER_NAME_MAX bytes (the runs' paths hold it
 * twice), of letters, digits and _ - . = , (a grid point's name is
 * PARAM=VALUE,...), not starting with '.'. false with a message. */
enum { FOLDER_NAME_MAX = 100 };
static bool folder_name(const char *s, const char *kind, tlm_err *err) {
    const size_t n = strlen(s);
    if (n > FOLDER_NAME_MAX)
        return tlm_fail(err, "the plan's %s `%.100s…`: a %s's name is at most %d bytes (this one has %zu)", kind, s,
                        kind, FOLDER_NAME_MAX, n);
    bool ok = n && *s != '.';
    for (const char *p = s; ok && *p; p++)
        ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' ||
             *p == '-' || *p == '.' || *p == '=' || *p == ',';
    return ok || tlm_fail(err,
                          "the plan's %s `%.100s`: a %s's name must be letters, digits, '_', '-', '.', '=' or ',' (not "
                          "'.' first)",
                          kind, s, kind);
}

/* A string field (nullable: null or absent gives NULL). */
static bool get_string(const tlm_json *o, const char *key, bool nullable, const char *where, char **out, tlm_err *err) {
    const tlm_json *v = tlm_json_get(o, key);
    *out = NULL;
    if ((!v || v->type == TLM_JSON_NULL) && nullable) return true;
    if (!v || v->type != TLM_JSON_STRING || !v->str[0] || strlen(v->str) != v->len)
        return tlm_fail(err, "the plan's %s has no %s (a non-empty string)", where, key);
    if (!(*out = dup(v->str))) return tlm_fail(err, "out of memory");
    return true;
}

/* What a JSON value that is not a number is, for a message about a field
 * of the wrong type. */
static const char *json_kind(const tlm_json *v) {
    switch (v->type) {
    case TLM_JSON_NULL: return "null";
    case TLM_JSON_BOOL: return "a boolean";
    case TLM_JSON_STRING: return "a string";
    case TLM_JSON_ARRAY: return "an array";
    case TLM_JSON_OBJECT: return "an object";
    case TLM_JSON_NUMBER: break;
    }
    return "a number";
}

/* An integer field in [lo, hi]; the message says whether it is missing,
 * not an integer or out of range ("steps": 0 and "steps": "3" are not
 * missing). */
static bool get_int(const tlm_json *o, const char *key, bool optional, int64_t lo, int64_t hi, const char *where,
                    int64_t *out, tlm_err *err) {
    const tlm_json *v = tlm_json_get(o, key);
    if (!v && optional) return true;
    if (!v)
        return tlm_fail(err, "the plan's %s has no %s (an integer from %lld to %lld)", where, key, (long long)lo,
                        (long long)hi);
    if (v->type != TLM_JSON_NUMBER)
        return tlm_fail(err, "the plan's %s: %s is %s, not an integer (from %lld to %lld)", where, key, json_kind(v),
                        (long long)lo, (long long)hi);
    if (!v->is_int) /* 2.5, 1e3, or past int64 */
        return tlm_fail(err, "the plan's %s: %s is not an integer (from %lld to %lld)", where, key, (long long)lo,
                        (long long)hi);
    if (v->integer < lo || v->integer > hi)
        return tlm_fail(err, "the plan's %s: %s is %lld, out of range (from %lld to %lld)", where, key,
                        (long long)v->integer, (long long)lo, (long long)hi);
    *out = v->integer;
    return true;
}

/* An array of non-empty strings (absent or null: none). */
static bool get_strings(const tlm_json *o, const char *key, int max, const char *where, char ***out, int *n,
                        tlm_err *err) {
    const tlm_json *v = tlm_json_get(o, key);
    *out = NULL, *n = 0;
    if (!v || v->type == TLM_JSON_NULL) return true;
    if (v->type != TLM_JSON_ARRAY || v->len > (size_t)max)
        return tlm_fail(err, "the plan's %s: %s must be an array of at most %d strings", where, key, max);
    if (!v->len) return true;
    if (!(*out = calloc(v->len, sizeof **out))) return tlm_fail(err, "out of memory");
    for (size_t i = 0; i < v->len; i++) {
        const tlm_json *s = &v->items[i];
        if (s->type != TLM_JSON_STRING || !s->str[0] || strlen(s->str) != s->len)
            return tlm_fail(err, "the plan's %s: %s[%zu] is not a non-empty string", where, key, i);
        if (!((*out)[(*n)++] = dup(s->str))) return tlm_fail(err, "out of memory");
    }
    return true;
}

static bool parse_variant(const tlm_json *o, study_variant *v, int index, tlm_err *err) {
    char where[160];
    snprintf(where, sizeof where, "variant %d", index + 1);
    if (o->type != TLM_JSON_OBJECT) return tlm_fail(err, "the plan's %s is not an object", where);
    if (!get_string(o, "name", false, where, &v->name, err)) return false;
    snprintf(where, sizeof where, "variant `%.100s`", v->name);
    if (!folder_name(v->name, "variant", err)) return false;
    if (!get_string(o, "model", false, where, &v->model, err)) return false;
    const int64_t big = (int64_t)1 << 62;
    if (!get_int(o, "params", false, 1, big, where, &v->params, err) ||
        !get_int(o, "mlp_params", false, 0, big, where, &v->mlp_params, err) ||
        !get_int(o, "flops_per_token", false, 1, big, where, &v->flops_per_token, err))
        return false;
    const tlm_json *w = tlm_json_get(o, "widths");
    if (!w || w->type != TLM_JSON_ARRAY || !w->len || w->len > 100000)
        return tlm_fail(err, "the plan's %s has no widths (an array of d_ff per layer)", where);
    if (!(v->widths = calloc(w->len, sizeof *v->widths))) return tlm_fail(err, "out of memory");
    for (size_t i = 0; i < w->len; i++) {
        const tlm_json *x = &w->items[i];
        if (x->type != TLM_JSON_NUMBER || !x->is_int || x->integer < 0 || x->integer > big)
            return tlm_fail(err, "the plan's %s: widths[%zu] is not a width", where, i);
        v->widths[v->nwidths++] = x->integer;
    }
    const tlm_json *d = tlm_json_get(o, "defines");
    if (d && d->type != TLM_JSON_NULL) {
        if (d->type != TLM_JSON_OBJECT) return tlm_fail(err, "the plan's %s: defines is not an object", where);
        if (d->len && !(v->defines = calloc(d->len, sizeof *v->defines))) return tlm_fail(err, "out of memory");
        for (size_t i = 0; i < d->len; i++) {
            const tlm_json *x = &d->items[i];
            char num[40];
            const char *value = x->type == TLM_JSON_STRING   ? x->str
                                : x->type == TLM_JSON_NUMBER ? fmt_real(num, sizeof num, x->number)
                                                             : NULL;
            if (!value) return tlm_fail(err, "the plan's %s: define %s is not a string", where, d->keys[i]);
            study_define *def = &v->defines[v->ndefines++];
            if (!(def->name = dup(d->keys[i])) || !(def->value = dup(value))) return tlm_fail(err, "out of memory");
        }
    }
    return get_strings(o, "compile", 64, where, &v->compile, &v->ncompile, err);
}

static bool parse_study(const tlm_json *s, const char *file, study_plan *p, tlm_err *err) {
    const char *where = "study";
    if (!get_string(s, "name", false, where, &p->name, err)) return false;
    if (!folder_name(p->name, "study", err)) return false;
    if (!get_string(s, "file", true, where, &p->file, err)) return false;
    if (!p->file) {
        if (!file) return tlm_fail(err, "the plan names no .tlm file (\"file\")");
        if (!(p->file = dup(file))) return tlm_fail(err, "out of memory");
    }
    if (!get_string(s, "baseline", false, where, &p->baseline, err)) return false;
    const tlm_json *seeds = tlm_json_get(s, "seeds");
    if (!seeds || seeds->type != TLM_JSON_ARRAY || !seeds->len || seeds->len > STUDY_MAX_SEEDS)
        return tlm_fail(err, "the plan's study needs seeds: an array of 1 to %d integers (tlmc --plan writes it)",
                        STUDY_MAX_SEEDS);
    for (size_t i = 0; i < seeds->len; i++) {
        const tlm_json *x = &seeds->items[i];
        if (x->type != TLM_JSON_NUMBER || !x->is_int || x->integer < 0 || x->integer > ((int64_t)1 << 53) - 1)
            return tlm_fail(err, "the plan's seeds[%zu] is not a seed (0 to 2^53 - 1)", i);
        for (int k = 0; k < p->nseeds; k++)
            if (p->seeds[k] == x->integer) return tlm_fail(err, "the plan repeats seed %lld", (long long)x->integer);
        p->seeds[p->nseeds++] = x->integer;
    }
    const tlm_json *train = tlm_json_get(s, "train");
    if (train && train->type != TLM_JSON_NULL) {
        if (train->type != TLM_JSON_OBJECT) return tlm_fail(err, "the plan's train is not an object");
        const int64_t big = (int64_t)1 << 40;
        if (!get_int(train, "steps", true, 1, big, "train", &p->steps, err) ||
            !get_int(train, "batch", true, 1, 1 << 20, "train", &p->batch, err) ||
            !get_int(train, "context", true, 1, 1 << 20, "train", &p->context, err))
            return false;
    }
    if (!get_string(s, "data", true, where, &p->data, err) || !get_string(s, "val", true, where, &p->val, err) ||
        !get_strings(s, "eval", STUDY_MAX_TEXTS, where, &p->eval, &p->neval, err) ||
        !get_strings(s, "choices", STUDY_MAX_TEXTS, where, &p->choices, &p->nchoices, err) ||
        !get_strings(s, "cloze", STUDY_MAX_TEXTS, where, &p->cloze, &p->ncloze, err) ||
        !get_int(s, "eval_tokens", true, 1, (int64_t)1 << 40, where, &p->eval_tokens, err) ||
        !get_string(s, "device", true, where, &p->device, err) ||
        !get_string(s, "precision", true, where, &p->precision, err))
        return false;
    if (p->device && strcmp(p->device, "cuda") != 0)
        return tlm_fail(err, "the plan's device is `%.40s`, not cuda (a study on the CPU names none)", p->device);
    tlm_precision known;
    if (!p->device != !p->precision || (p->precision && !tlm_precision_parse(p->precision, &known)))
        return tlm_fail(err, "the plan's precision is not bf16 or fp32 beside its device (or it names none)");
    const tlm_json *vs = tlm_json_get(s, "variants");
    if (!vs || vs->type != TLM_JSON_ARRAY || !vs->len || vs->len > STUDY_MAX_VARIANTS)
        return tlm_fail(err, "the plan's study needs variants: an array of 1 to %d (tlmc --plan writes it)",
                        STUDY_MAX_VARIANTS);
    if (!(p->variants = calloc(vs->len, sizeof *p->variants))) return tlm_fail(err, "out of memory");
    for (size_t i = 0; i < vs->len; i++) {
        if (!parse_variant(&vs->items[i], &p->variants[p->nvariants++], (int)i, err)) return false;
        for (size_t k = 0; k < i; k++)
            if (!strcmp(p->variants[k].name, p->variants[i].name))
                return tlm_fail(err, "the plan has two variants named `%s`", p->variants[i].name);
    }
    if (!study_plan_variant(p, p->baseline))
        return tlm_fail(err, "the plan's baseline `%.100s` is not one of its variants", p->baseline);
    return true;
}

bool study_plan_parse(const char *json, size_t len, const char *want, study_plan *plan, study_plan_fault *fault,
                      tlm_err *err) {
    memset(plan, 0, sizeof *plan);
    study_plan_fault unused;
    if (!fault) fault = &unused;
    *fault = STUDY_PLAN_INVALID;
    tlm_err e = {""};
    tlm_json *root = tlm_json_parse(json, len, &e);
    if (!root) {
        *fault = STUDY_PLAN_NOT_JSON;
        return tlm_fail(err, "the plan is not JSON: %s", e.msg);
    }
    bool ok = false;
    const tlm_json *studies = tlm_json_get(root, "studies");
    const tlm_json *file = tlm_json_get(root, "file");
    const tlm_json *chosen = NULL;
    if (!studies || studies->type != TLM_JSON_ARRAY) {
        tlm_fail(err, "the plan has no \"studies\" array");
        goto done;
    }
    for (size_t i = 0; i < studies->len; i++) {
        const tlm_json *name = tlm_json_get(&studies->items[i], "name");
        if (!want || (name && name->type == TLM_JSON_STRING && !strcmp(name->str, want))) {
            if (chosen) {
                tlm_strbuf names = {0};
                for (size_t k = 0; k < studies->len; k++) {
                    const tlm_json *n = tlm_json_get(&studies->items[k], "name");
                    tlm_sb_printf(&names, "%s%s", k ? ", " : "", n && n->type == TLM_JSON_STRING ? n->str : "?");
                }
                tlm_fail(err, "the file has several studies (%s): name one with --study", names.buf ? names.buf : "");
                tlm_sb_free(&names);
                *fault = STUDY_PLAN_BAD_CHOICE;
                goto done;
            }
            chosen = &studies->items[i];
        }
    }
    if (!chosen) {
        if (want) tlm_fail(err, "the file has no study named `%s`", want);
        else tlm_fail(err, "the file declares no study");
        if (want) *fault = STUDY_PLAN_BAD_CHOICE;
        goto done;
    }
    if (chosen->type != TLM_JSON_OBJECT) {
        tlm_fail(err, "the plan's study is not an object");
        goto done;
    }
    ok = parse_study(chosen, file && file->type == TLM_JSON_STRING ? file->str : NULL, plan, err) &&
         get_strings(root, "sources", 4096, "file", &plan->sources, &plan->nsources, err);
done:
    tlm_json_free(root);
    if (!ok) study_plan_free(plan);
    return ok;
}

static void free_strings(char **s, int n) {
    for (int i = 0; i < n; i++) free(s[i]);
    free(s);
}

void study_plan_free(study_plan *p) {
    for (int i = 0; i < p->nvariants; i++) {
        study_variant *v = &p->variants[i];
        free(v->name), free(v->model), free(v->widths);
        for (int k = 0; k < v->ndefines; k++) free(v->defines[k].name), free(v->defines[k].value);
        free(v->defines);
        free_strings(v->compile, v->ncompile);
    }
    free(p->variants);
    free(p->file), free(p->name), free(p->baseline), free(p->data), free(p->val), free(p->device), free(p->precision);
    free_strings(p->sources, p->nsources);
    free_strings(p->eval, p->neval), free_strings(p->choices, p->nchoices), free_strings(p->cloze, p->ncloze);
    memset(p, 0, sizeof *p);
}

const study_variant *study_plan_variant(const study_plan *plan, const char *name) {
    for (int i = 0; i < plan->nvariants; i++)
        if (!strcmp(plan->variants[i].name, name)) return &plan->variants[i];
    return NULL;
}

char *study_plan_json(const study_plan *p) {
    tlm_strbuf sb = {0};
    tlm_sb_puts(&sb, "{\"file\": ");
    study_json_string(&sb, p->file);
    tlm_sb_puts(&sb, ", \"studies\": [{\"name\": ");
    study_json_string(&sb, p->name);
    tlm_sb_puts(&sb, ", \"baseline\": ");
    study_json_string(&sb, p->baseline);
    tlm_sb_puts(&sb, ",\n  \"seeds\": [");
    for (int i = 0; i < p->nseeds; i++) tlm_sb_printf(&sb, "%s%lld", i ? ", " : "", (long long)p->seeds[i]);
    tlm_sb_puts(&sb, "], \"train\": {");
    const char *keys[] = {"steps", "batch", "context"};
    const int64_t values[] = {p->steps, p->batch, p->context};
    for (int i = 0, n = 0; i < 3; i++)
        if (values[i] > 0) tlm_sb_printf(&sb, "%s\"%s\": %lld", n++ ? ", " : "", keys[i], (long long)values[i]);
    tlm_sb_puts(&sb, "},\n  \"data\": ");
    study_json_string(&sb, p->data);
    tlm_sb_puts(&sb, ", \"val\": ");
    study_json_string(&sb, p->val);
    tlm_sb_puts(&sb, ", \"eval\": ");
    study_json_strings(&sb, p->eval, p->neval);
    tlm_sb_puts(&sb, ", \"choices\": ");
    study_json_strings(&sb, p->choices, p->nchoices);
    tlm_sb_puts(&sb, ", \"cloze\": ");
    study_json_strings(&sb, p->cloze, p->ncloze);
    if (p->eval_tokens > 0) tlm_sb_printf(&sb, ", \"eval_tokens\": %lld", (long long)p->eval_tokens);
    /* absent on the CPU: a CPU study's plan, and identity, as before there were devices */
    if (p->device) tlm_sb_printf(&sb, ", \"device\": \"%s\", \"precision\": \"%s\"", p->device, p->precision);
    tlm_sb_puts(&sb, ",\n  \"variants\": [");
    for (int i = 0; i < p->nvariants; i++) {
        const study_variant *v = &p->variants[i];
        tlm_sb_puts(&sb, i ? ",\n    {" : "\n    {");
        study_json_variant(&sb, v);
        if (v->compile) {
            tlm_sb_puts(&sb, ", \"compile\": ");
            study_json_strings(&sb, v->compile, v->ncompile);
        }
        tlm_sb_puts(&sb, "}");
    }
    tlm_sb_puts(&sb, "]}]}\n");
    if (sb.oom) {
        tlm_sb_free(&sb);
        return NULL;
    }
    return sb.buf;
}

/* ---- what differs between two plans ---- */

static bool same_string(const char *a, const char *b) { return a == b || (a && b && !strcmp(a, b)); }

static bool same_strings(char **a, int na, char **b, int nb) {
    if (na != nb) return false;
    for (int i = 0; i < na; i++)
        if (strcmp(a[i], b[i])) return false;
    return true;
}

/* The seeds as "1, 2, 3", cut short with "..." past n bytes. */
static const char *seed_list(const study_plan *p, char *out, size_t n) {
    size_t k = 0;
    out[0] = '\0';
    for (int i = 0; i < p->nseeds && k < n; i++) {
        int w = snprintf(out + k, n - k, "%s%" PRId64, i ? ", " : "", p->seeds[i]);
        if (w < 0 || (size_t)w >= n - k) {
            snprintf(out + (n > 4 ? n - 4 : 0), n > 4 ? 4 : n, "...");
            break;
        }
        k += (size_t)w;
    }
    return out;
}

/* A training setting that 0 leaves to the model. */
static const char *setting(int64_t v, char *out, size_t n) {
    if (!v) return "the model's default";
    snprintf(out, n, "%" PRId64, v);
    return out;
}

/* A variant as plan.json holds it, malloc'd (NULL when out of memory). */
static char *variant_json(const study_variant *v) {
    tlm_strbuf sb = {0};
    study_json_variant(&sb, v);
    tlm_sb_puts(&sb, ", \"compile\": ");
    study_json_strings(&sb, v->compile, v->ncompile);
    if (sb.oom) {
        tlm_sb_free(&sb);
        return NULL;
    }
    return sb.buf;
}

static void variants_difference(const study_plan *was, const study_plan *now, char *what, size_t n) {
    for (int i = 0; i < was->nvariants; i++)
        if (!study_plan_variant(now, was->variants[i].name)) {
            snprintf(what, n, "its variant `%.100s` is not in this plan", was->variants[i].name);
            return;
        }
    for (int i = 0; i < now->nvariants; i++) {
        const study_variant *v = study_plan_variant(was, now->variants[i].name);
        if (!v) {
            snprintf(what, n, "this plan's variant `%.100s` is not in it", now->variants[i].name);
            return;
        }
        char *a = variant_json(v), *b = variant_json(&now->variants[i]);
        bool same = a && b && !strcmp(a, b);
        free(a), free(b);
        if (!same) {
            snprintf(what, n, "its variant `%.100s` differs (model, defines, widths, params or compile arguments)",
                     v->name);
            return;
        }
    }
    for (int i = 0; i < now->nvariants && i < was->nvariants; i++)
        if (strcmp(was->variants[i].name, now->variants[i].name)) {
            snprintf(what, n, "its variants are in another order");
            return;
        }
}

static bool has_seed(const study_plan *p, int64_t seed) {
    for (int i = 0; i < p->nseeds; i++)
        if (p->seeds[i] == seed) return true;
    return false;
}

const char *study_plan_runs_on(const study_plan *p, char *buf, size_t n) {
    if (!p->device) return "on the CPU";
    snprintf(buf, n, "on %s in %s", p->device, p->precision);
    return buf;
}

/* The first difference between was and now but the seeds, which
 * study_plan_grown compares first as the two plans hold them. */
static void plan_difference(const study_plan *was, const study_plan *now, char *what, size_t n) {
    char a[120], b[120];
    snprintf(what, n, "its plan differs (the .tlm file or the plan changed)");
    if (!same_string(was->name, now->name))
        snprintf(what, n, "it was made for the study `%.100s`, not `%.100s`", was->name, now->name);
    else if (was->steps != now->steps)
        snprintf(what, n, "it was made for %" PRId64 " steps, not %" PRId64, was->steps, now->steps);
    else if (was->eval_tokens != now->eval_tokens)
        snprintf(what, n, "it was made for %" PRId64 " eval tokens, not %" PRId64, was->eval_tokens, now->eval_tokens);
    else if (!same_string(was->device, now->device) || !same_string(was->precision, now->precision))
        snprintf(what, n,
                 "its runs train %s, not %s (on another device or precision they would not continue bit for bit)",
                 study_plan_runs_on(was, a, sizeof a), study_plan_runs_on(now, b, sizeof b));
    else if (was->batch != now->batch)
        snprintf(what, n, "it was made for batch %s, not %s", setting(was->batch, a, sizeof a),
                 setting(now->batch, b, sizeof b));
    else if (was->context != now->context)
        snprintf(what, n, "it was made for context %s, not %s", setting(was->context, a, sizeof a),
                 setting(now->context, b, sizeof b));
    else if (!same_string(was->data, now->data))
        snprintf(what, n, "it was trained on %.150s, not %.150s", was->data ? was->data : "the bundled corpora",
                 now->data ? now->data : "the bundled corpora");
    else if (!same_string(was->val, now->val))
        snprintf(what, n, "its validation text is %.150s, not %.150s", was->val ? was->val : "none",
                 now->val ? now->val : "none");
    else if (!same_strings(was->eval, was->neval, now->eval, now->neval)) snprintf(what, n, "its eval texts differ");
    else if (!same_strings(was->choices, was->nchoices, now->choices, now->nchoices))
        snprintf(what, n, "its multiple-choice sets differ");
    else if (!same_strings(was->cloze, was->ncloze, now->cloze, now->ncloze))
        snprintf(what, n, "its cloze sets differ");
    else if (!same_string(was->file, now->file))
        snprintf(what, n, "it was made from %.150s, not %.150s", was->file, now->file);
    else if (!same_string(was->baseline, now->baseline))
        snprintf(what, n, "its baseline is `%.100s`, not `%.100s`", was->baseline, now->baseline);
    else variants_difference(was, now, what, n);
}

/* What now adds to was, as "variant `x` and seeds 3, 4 added" (now holds
 * every variant and seed of was). */
static void additions(const study_plan *was, const study_plan *now, char *what, size_t n) {
    tlm_strbuf sb = {0};
    int added = now->nvariants - was->nvariants;
    if (added) tlm_sb_printf(&sb, "variant%s ", added > 1 ? "s" : "");
    for (int i = 0, k = 0; i < now->nvariants; i++)
        if (!study_plan_variant(was, now->variants[i].name))
            tlm_sb_printf(&sb, "%s`%s`", k++ ? ", " : "", now->variants[i].name);
    added = now->nseeds - was->nseeds;
    if (added) tlm_sb_printf(&sb, "%sseed%s ", sb.len ? " and " : "", added > 1 ? "s" : "");
    for (int i = 0, k = 0; i < now->nseeds; i++)
        if (!has_seed(was, now->seeds[i])) tlm_sb_printf(&sb, "%s%" PRId64, k++ ? ", " : "", now->seeds[i]);
    snprintf(what, n, "%s added", sb.oom ? "variants or seeds" : sb.buf);
    tlm_sb_free(&sb);
}

/* A seed of was that now lacks, or was's seeds in another order among
 * now's (cut: now's seeds that are was's, in now's order), said in terms of
 * the two plans as written; false when neither. */
static bool seeds_difference(const study_plan *was, const study_plan *now, const study_plan *cut, char *what,
                             size_t n) {
    char a[120], b[120];
    for (int i = 0; i < was->nseeds; i++)
        if (!has_seed(now, was->seeds[i])) {
            snprintf(what, n, "its seed %" PRId64 " is not in this plan (it was made for seeds %s, this plan has %s)",
                     was->seeds[i], seed_list(was, a, sizeof a), seed_list(now, b, sizeof b));
            return true;
        }
    if (memcmp(was->seeds, cut->seeds, sizeof(int64_t) * (size_t)was->nseeds)) {
        snprintf(what, n, "its seeds are in another order (%s there, %s here)", seed_list(was, a, sizeof a),
                 seed_list(now, b, sizeof b));
        return true;
    }
    return false;
}

bool study_plan_grown(const study_plan *was, const study_plan *now, char *what, size_t n) {
    /* now cut to was's variants and seeds (in now's order) must be was, by
     * the very JSON plan.json holds: then nothing but the additions
     * differs; else the cut's first difference from was is what blocks
     * (an added seed beside a changed variant is not the reason) */
    study_plan cut = *now;
    cut.variants = malloc(sizeof *cut.variants * (size_t)(now->nvariants ? now->nvariants : 1));
    if (!cut.variants) {
        snprintf(what, n, "its plan cannot be compared (out of memory)");
        return false;
    }
    cut.nvariants = cut.nseeds = 0;
    for (int i = 0; i < now->nvariants; i++)
        if (study_plan_variant(was, now->variants[i].name)) cut.variants[cut.nvariants++] = now->variants[i];
    for (int i = 0; i < now->nseeds; i++)
        if (has_seed(was, now->seeds[i])) cut.seeds[cut.nseeds++] = now->seeds[i];
    char *a = study_plan_json(&cut), *b = study_plan_json(was);
    const bool grown = a && b && !strcmp(a, b) && (cut.nvariants < now->nvariants || cut.nseeds < now->nseeds);
    free(a), free(b);
    /* in plan_difference's order: the study and steps, then the seeds as
     * the plans hold them, then the rest of the cut */
    const bool before_seeds = !same_string(was->name, now->name) || was->steps != now->steps;
    if (grown) additions(was, now, what, n);
    else if (before_seeds || !seeds_difference(was, now, &cut, what, n)) {
        memcpy(cut.seeds, was->seeds, sizeof cut.seeds), cut.nseeds = was->nseeds;
        plan_difference(was, &cut, what, n);
    }
    free(cut.variants);
    return grown;
}
