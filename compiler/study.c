#include "study.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check_model.h"
#include "eval.h"
#include "numfmt.h"
#include "resolve.h"
#include "suggest.h"
#include "utf8.h"
#include "vocabulary.h"

typedef struct reader {
    program *p;
    study *st;
    const char *dir;             /* the folder of the study's file: paths are relative to it */
    bool ok;
} reader;

static diag_engine *D(reader *r) { return &r->p->s->diag; }

/* A name that stands for a param reads as the param's value (with -D).
 * keep_models: where a model is expected (base, variants, baseline), a
 * model's own name stays the model even if a param has that name too, since
 * models and params have namespaces of their own. */
static const expr *follow_params(const program *p, const expr *e, bool keep_models) {
    for (int hops = 0; e && e->kind == EX_NAME && hops < 64; hops++) {
        if (keep_models && symtab_get(&p->models, e->text)) break;
        const item *param = symtab_get(&p->params, e->text);
        if (!param) break;
        const expr *override = symtab_get(&p->param_overrides, e->text);
        e = override ? override : param->value;
    }
    return e;
}

static const expr *param_value(const program *p, const expr *e) { return follow_params(p, e, false); }
static const expr *model_value(const program *p, const expr *e) { return follow_params(p, e, true); }

static __attribute__((format(printf, 3, 4))) void fail(reader *r, tlm_loc loc, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    diag_error(D(r), loc, "study %s: %s", r->st->name, msg);
    r->ok = false;
}

static void hint_similar(reader *r, const char *word, const symtab *table, const char *const *list) {
    suggester sg;
    suggest_begin(&sg, word);
    if (list) suggest_list(&sg, list);
    for (size_t i = 0; table && i < table->cap; i++) suggest_consider(&sg, table->keys[i]);
    if (suggest_result(&sg)) diag_hint(D(r), "did you mean `%s`?", suggest_result(&sg));
}

/* A folder name must survive every file system and shell quoting. */
static bool safe_name(const char *s) {
    for (; *s; s++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.=,-", *s)) return false;
    return true;
}

/* ---- paths, relative to the study's file ---- */

static const char *read_path(reader *r, const char *key, const expr *e0) {
    const expr *e = param_value(r->p, e0);
    if (e->kind != EX_STRING) {
        fail(r, e0->loc, "%s is a path in quotes, like \"../../data/kjv/kjv.txt\"", key);
        return NULL;
    }
    if (!e->text[0]) { /* "" would name the .tlm file's folder */
        fail(r, e0->loc, "%s is empty: it needs a path", key);
        return NULL;
    }
    const char *joined = e->text[0] == '/' ? e->text : arena_printf(&r->p->s->arena, "%s/%s", r->dir, e->text);
    char *real = realpath(joined, NULL);
    if (!real) {
        fail(r, e0->loc, "%s `%s` does not exist (paths are relative to the .tlm file)", key, e->text);
        return NULL;
    }
    /* The plan is JSON (tlm-run study reads it back), and a JSON string
     * holds only UTF-8: a path with other bytes could not be given back as
     * it is. */
    for (const char *c = real, *end = real + strlen(real); c < end;) {
        int32_t cp;
        c += utf8_unit(c, end, &cp);
        if (cp < 0) {
            fail(r, e0->loc,
                 "%s `%s` is not UTF-8 (its folder's name?), which the study plan (JSON) cannot hold; rename it", key,
                 e->text);
            free(real);
            return NULL;
        }
    }
    const char *kept = arena_strndup(&r->p->s->arena, real, strlen(real));
    free(real);
    return kept;
}

/* A path or a list of them. */
static study_list read_paths(reader *r, const char *key, const expr *e0) {
    study_list out = {0};
    const expr *e = param_value(r->p, e0);
    if (e->kind != EX_LIST) {
        const char *one = read_path(r, key, e0);
        if (!one) return out;
        out.paths = arena_alloc(&r->p->s->arena, sizeof *out.paths);
        out.paths[out.n++] = one;
        return out;
    }
    out.paths = arena_alloc(&r->p->s->arena, (size_t)(e->nargs + 1) * sizeof *out.paths);
    for (arg *a = e->args; a; a = a->next) {
        const char *path = read_path(r, key, a->value);
        if (path) out.paths[out.n++] = path;
    }
    return out;
}

/* ---- seeds: a count K (1..K) or a list ---- */

static bool whole_in(double v, double lo, double hi) { return v == (double)(int64_t)v && v >= lo && v <= hi; }

static double number_of(reader *r, const expr *e, bool *ok) {
    evaluator ev;
    eval_init(&ev, r->p, NULL, NULL);
    double v = 0;
    int before = D(r)->errors;
    resolve_number(r->p, e, false);
    *ok = D(r)->errors == before && eval_number(&ev, e, &v);
    eval_free(&ev);
    if (!*ok) r->ok = false;
    return v;
}

static void read_seeds(reader *r, const expr *e0) {
    study *st = r->st;
    const expr *e = param_value(r->p, e0);
    const double max_seed = 9007199254740991.0;   /* 2^53 - 1: the train setting's range */
    bool ok;
    if (e->kind != EX_LIST) {
        double k = number_of(r, e0, &ok);
        if (!ok) return;
        if (!whole_in(k, 1, TLM_MAX_STUDY_SEEDS)) {
            char val[32];
            fail(r, e0->loc, "seeds is a count from 1 to %d or a list of seeds, not %s", TLM_MAX_STUDY_SEEDS,
                 fmt_real(val, sizeof val, k));
            return;
        }
        st->nseeds = (int)k;
        st->seeds = arena_alloc(&r->p->s->arena, (size_t)st->nseeds * sizeof *st->seeds);
        for (int i = 0; i < st->nseeds; i++) st->seeds[i] = i + 1;
        return;
    }
    if (e->nargs == 0 || e->nargs > TLM_MAX_STUDY_SEEDS) {
        fail(r, e0->loc, "seeds lists 1 to %d seeds, not %d", TLM_MAX_STUDY_SEEDS, e->nargs);
        return;
    }
    st->seeds = arena_alloc(&r->p->s->arena, (size_t)e->nargs * sizeof *st->seeds);
    st->nseeds = 0;
    for (arg *a = e->args; a; a = a->next) {
        double v = number_of(r, a->value, &ok);
        if (!ok) return;
        if (!whole_in(v, 0, max_seed)) {
            char val[32];
            fail(r, a->value->loc, "a seed is a whole number from 0 to 2^53 - 1, not %s", fmt_real(val, sizeof val, v));
            return;
        }
        for (int i = 0; i < st->nseeds; i++)
            if (st->seeds[i] == (int64_t)v) {
                fail(r, a->value->loc, "seed %lld is listed twice", (long long)v);
                return;
            }
        st->seeds[st->nseeds++] = (int64_t)v;
    }
}

/* ---- the variants ---- */

static const item *model_named(reader *r, const expr *e0, const char *key) {
    const expr *e = model_value(r->p, e0);
    if (e->kind != EX_NAME) {
        fail(r, e0->loc, "%s names a model of the file", key);
        return NULL;
    }
    const item *m = symtab_get(&r->p->models, e->text);
    if (!m) {
        fail(r, e0->loc, "unknown model `%s`", e->text);
        hint_similar(r, e->text, &r->p->models, NULL);
    }
    return m;
}

/* One axis: `ratio in [1.25, 1.5, 1.75]` over `param ratio`. Its values
 * are checked once here; the texts name the variants. */
typedef struct axis {
    const setting *decl;
    const expr **values;
    const char **texts;
    int n;
} axis;

static bool read_axis(reader *r, const setting *x, axis *out) {
    program *p = r->p;
    out->decl = x;
    if (!symtab_get(&p->params, x->name)) {
        fail(r, x->name_loc, "the grid varies `%s`, but the file declares no `param %s`", x->name, x->name);
        hint_similar(r, x->name, &p->params, NULL);
        return false;
    }
    const expr *e = x->value;
    if (e->kind != EX_LIST) {
        fail(r, e->loc, "the values of `%s` are a list, like [1.25, 1.5, 1.75]", x->name);
        return false;
    }
    if (e->nargs == 0) {
        fail(r, e->loc, "the grid over `%s` is empty", x->name);
        return false;
    }
    out->values = arena_alloc(&p->s->arena, (size_t)e->nargs * sizeof *out->values);
    out->texts = arena_alloc(&p->s->arena, (size_t)e->nargs * sizeof *out->texts);
    bool ok = true;
    for (arg *a = e->args; a; a = a->next) {
        const expr *v = a->value;
        const char *text;
        if (v->kind == EX_NAME && classify_name(p, NULL, v->text) == REF_UNKNOWN) {
            text = v->text;        /* a schedule, mixer or other name: checked where the model uses it */
        } else {
            bool good;
            double number = number_of(r, v, &good);
            if (!good) {
                ok = false;
                continue;
            }
            char buf[40];
            fmt_real(buf, sizeof buf, number);
            text = arena_strndup(&p->s->arena, buf, strlen(buf));
        }
        if (!safe_name(text)) {
            fail(r, v->loc, "`%s` cannot be part of a variant's name (letters, digits and _ . = , - only)", text);
            ok = false;
            continue;
        }
        out->values[out->n] = v;
        out->texts[out->n++] = text;
    }
    return ok;
}

static void add_variant(reader *r, const char *name, const item *model, tlm_loc at) {
    study *st = r->st;
    if (strlen(name) > TLM_MAX_VARIANT_NAME) {
        fail(r, at, "variant `%.40s...`: a variant's name is at most %d characters (it names the variant's folder)",
             name, TLM_MAX_VARIANT_NAME);
        diag_hint(D(r), "shorter param names or values shorten a grid point's name");
        return;
    }
    for (int i = 0; i < st->nvariants; i++)
        if (strcmp(st->variants[i].name, name) == 0) {
            fail(r, at, "variant `%s` is listed twice", name);
            return;
        }
    study_variant *v = &st->variants[st->nvariants++];
    v->name = name;
    v->model = model;
}

/* Every point of the grid, the first axis varying slowest. */
static void expand_grid(reader *r, axis *axes, int naxes, int64_t count) {
    study *st = r->st;
    arena *a = &r->p->s->arena;
    for (int64_t k = 0; k < count; k++) {
        int idx[TLM_MAX_STUDY_AXES];
        int64_t rest = k;
        for (int j = naxes - 1; j >= 0; j--) {
            idx[j] = (int)(rest % axes[j].n);
            rest /= axes[j].n;
        }
        char name[1024];
        size_t used = 0;
        for (int j = 0; j < naxes && used < sizeof name; j++)
            used += (size_t)snprintf(name + used, sizeof name - used, "%s%s=%s", j ? "," : "", axes[j].decl->name,
                                     axes[j].texts[idx[j]]);
        int before = st->nvariants;
        add_variant(r, arena_strndup(a, name, strlen(name)), st->base, axes[naxes - 1].values[idx[naxes - 1]]->loc);
        if (st->nvariants == before) continue;
        study_variant *v = &st->variants[before];
        v->values = arena_alloc(a, (size_t)naxes * sizeof *v->values);
        v->value_texts = arena_alloc(a, (size_t)naxes * sizeof *v->value_texts);
        for (int j = 0; j < naxes; j++) {
            v->values[j] = axes[j].values[idx[j]];
            v->value_texts[j] = axes[j].texts[idx[j]];
        }
    }
}

static void read_variants(reader *r, const expr *named) {
    study *st = r->st;
    program *p = r->p;
    axis axes[TLM_MAX_STUDY_AXES];
    int64_t count = st->naxes ? 1 : 0;
    bool axes_ok = true;
    for (int j = 0; j < st->naxes; j++) {
        memset(&axes[j], 0, sizeof axes[j]);
        if (!read_axis(r, st->axes[j], &axes[j])) axes_ok = false;
        else count *= axes[j].n;
        if (count > TLM_MAX_STUDY_VARIANTS) break;
    }
    if (st->naxes && !st->base && r->ok)
        fail(r, st->axes[0]->name_loc, "a grid varies a model: say which with `base = MODEL;`");
    if (!st->naxes && st->base)
        fail(r, st->decl->name_loc, "`base` names the model a grid varies, but there is no grid (`PARAM in [...];`)");
    const expr *list = named ? param_value(p, named) : NULL;
    if (list && list->kind != EX_LIST) {
        fail(r, named->loc, "variants is a list of models, like [early, uniform, late]");
        list = NULL;
    }
    int nnamed = list ? list->nargs : 0;
    if (count + nnamed > TLM_MAX_STUDY_VARIANTS) {
        fail(r, st->decl->name_loc, "more than %d variants", TLM_MAX_STUDY_VARIANTS);
        return;
    }
    if (count + nnamed == 0 && r->ok) {
        fail(r, st->decl->name_loc, "no variants: list models (`variants = [a, b];`) or a grid (`PARAM in [...];`)");
        return;
    }
    st->variants = arena_alloc(&p->s->arena, (size_t)(count + nnamed) * sizeof *st->variants);
    if (axes_ok && st->base && st->naxes) expand_grid(r, axes, st->naxes, count);
    for (arg *a = list ? list->args : NULL; a; a = a->next) {
        const item *m = model_named(r, a->value, "each of variants");
        if (m) add_variant(r, m->name, m, a->value->loc);
    }
}

static void read_baseline(reader *r, const expr *e0) {
    study *st = r->st;
    st->baseline = -1;
    if (!e0) {
        fail(r, st->decl->name_loc, "no baseline: say which variant the others are compared with");
        /* a grid point's name (`ratio=1.5`) is written in quotes */
        const char *first = st->nvariants ? st->variants[0].name : NULL;
        if (first) diag_hint(D(r), strchr(first, '=') ? "e.g. `baseline = \"%s\";`" : "e.g. `baseline = %s;`", first);
        return;
    }
    const expr *e = model_value(r->p, e0);
    const char *name = e->kind == EX_NAME || e->kind == EX_STRING ? e->text : NULL;
    if (!name) {
        fail(r, e0->loc, "baseline is a variant: a model's name or a grid point in quotes");
        return;
    }
    st->baseline = study_find_variant(st, name);
    if (st->baseline >= 0) return;
    fail(r, e0->loc, "the baseline `%s` is not one of the variants", name);
    char list[512] = "";
    size_t used = 0;
    for (int i = 0; i < st->nvariants && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", st->variants[i].name);
    if (st->nvariants) diag_hint(D(r), "the variants are: %s", list);
}

int study_find_variant(const study *st, const char *name) {
    for (int i = 0; i < st->nvariants; i++)
        if (strcmp(st->variants[i].name, name) == 0) return i;
    return -1;
}

bool study_expand(program *p, const item *decl, study *st) {
    memset(st, 0, sizeof *st);
    st->decl = decl;
    st->name = decl->name;
    st->baseline = -1;
    reader r = {p, st, program_file_dir(p, decl->file), true};
    if (strlen(decl->name) > TLM_MAX_VARIANT_NAME)      /* the study's folder: the same bound */
        fail(&r, decl->name_loc, "a study's name is at most %d characters (it names the study's folder)",
             TLM_MAX_VARIANT_NAME);
    const setting *given[16] = {0};
    enum { N_KEYS = sizeof given / sizeof *given };
    for (const setting *x = decl->settings; x; x = x->next) {
        const setting_spec *spec = find_setting(study_settings, x->name);
        if (!spec) {
            fail(&r, x->name_loc, "unknown setting `%s`", x->name);
            hint_similar(&r, x->name, NULL, setting_names(study_settings));
            continue;
        }
        int i = (int)(spec - study_settings);
        if (i >= N_KEYS) continue;
        if (given[i]) {
            fail(&r, x->name_loc, "`%s` is set twice", x->name);
            diag_note(D(&r), given[i]->name_loc, "the first setting is here");
            continue;
        }
        given[i] = x;
    }
    for (const setting *x = decl->grid; x; x = x->next) {
        for (int j = 0; j < st->naxes; j++)
            if (st->axes[j]->name == x->name) {
                fail(&r, x->name_loc, "the grid varies `%s` twice", x->name);
                diag_note(D(&r), st->axes[j]->name_loc, "the first is here");
            }
        if (st->naxes == TLM_MAX_STUDY_AXES) {
            fail(&r, x->name_loc, "a grid has at most %d axes", TLM_MAX_STUDY_AXES);
            break;
        }
        st->axes[st->naxes++] = x;
    }
#define GIVEN(key) given[find_setting(study_settings, key) - study_settings]
    if (GIVEN("base")) st->base = model_named(&r, GIVEN("base")->value, "base");
    read_variants(&r, GIVEN("variants") ? GIVEN("variants")->value : NULL);
    if (r.ok) read_baseline(&r, GIVEN("baseline") ? GIVEN("baseline")->value : NULL);
    if (GIVEN("seeds")) read_seeds(&r, GIVEN("seeds")->value);
    else {
        static const int64_t three[] = {1, 2, 3};
        st->seeds = (int64_t *)three;
        st->nseeds = 3;
    }
    if (GIVEN("data")) st->data = read_path(&r, "data", GIVEN("data")->value);
    if (GIVEN("val")) st->val = read_path(&r, "val", GIVEN("val")->value);
    if (GIVEN("eval")) st->eval = read_paths(&r, "eval", GIVEN("eval")->value);
    if (GIVEN("choices")) st->choices = read_paths(&r, "choices", GIVEN("choices")->value);
    if (GIVEN("cloze")) st->cloze = read_paths(&r, "cloze", GIVEN("cloze")->value);
#undef GIVEN
    return r.ok;
}

bool study_check_variant(program *p, const study *st, study_variant *v) {
    diag_engine *d = &p->s->diag;
    const void *saved[TLM_MAX_STUDY_AXES];
    int naxes = v->values ? st->naxes : 0;
    for (int j = 0; j < naxes; j++) {
        saved[j] = symtab_get(&p->param_overrides, st->axes[j]->name);
        symtab_set(&p->param_overrides, st->axes[j]->name, (void *)v->values[j]);
    }
    p->study_train = st->decl->train;
    d->context = arena_printf(&p->s->arena, "study %s: variant %s: ", st->name, v->name);
    int before = d->errors;
    bool ok = check_model(p, v->model, &v->checked, false) && d->errors == before;
    /* tlm-run study trains every run for the study's steps: 0 trains
     * nothing, and it refuses such a plan */
    for (const setting *x = st->decl->train ? st->decl->train->settings : NULL; ok && x; x = x->next)
        if (!strcmp(x->name, "steps") && v->checked.train.steps == 0) {
            diag_error(d, x->name_loc, "steps = 0 trains nothing; a study's runs need at least 1");
            ok = false;
        }
    d->context = NULL;
    p->study_train = NULL;
    for (int j = 0; j < naxes; j++) symtab_set(&p->param_overrides, st->axes[j]->name, (void *)saved[j]);
    return ok;
}
