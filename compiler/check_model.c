#include "check_model.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ast_build.h"
#include "eval.h"
#include "numfmt.h"
#include "resolve.h"
#include "suggest.h"
#include "tlm_train_settings.h"
#include "vocabulary.h"
#include "widths.h"
#include "xalloc.h"

enum { MAX_SETTINGS = 64, BUSY = 1, DONE = 2, FAILED = 3 };

/* The settings of one model after inheritance: for each setting of the
 * vocabulary, the definition that wins (the most derived one). */
typedef struct scope {
    program *p;
    const item *model;
    const setting *def[MAX_SETTINGS];
    const item *owner[MAX_SETTINGS];
    int state[MAX_SETTINGS];
    double value[MAX_SETTINGS];
    evaluator ev;
    tlm_loc train_loc[MAX_SETTINGS]; /* where each training setting (its row) was last set */
    bool train_set[MAX_SETTINGS];
    int64_t tokenizer_vocab;       /* the `tokenizer`'s vocabulary size, 0 if none */
} scope;

static diag_engine *D(scope *s) { return &s->p->s->diag; }

static int spec_index(const char *name) {
    const setting_spec *x = find_setting(model_settings, name);
    return x ? (int)(x - model_settings) : -1;
}

static const expr *value_of(scope *s, const char *name) {
    int i = spec_index(name);
    return i >= 0 && s->def[i] ? s->def[i]->value : NULL;
}

static tlm_loc loc_of(scope *s, const char *name) {
    int i = spec_index(name);
    return i >= 0 && s->def[i] ? s->def[i]->value->loc : s->model->name_loc;
}

/* An error in a setting the model inherited is worth a pointer to the model. */
static void inherited_note(scope *s, const char *name) {
    int i = spec_index(name);
    if (i >= 0 && s->owner[i] && s->owner[i] != s->model)
        diag_note(D(s), s->model->name_loc, "`%s` inherits `%s` from `%s`", s->model->name, name, s->owner[i]->name);
}

static bool default_number(scope *s, const char *name, double *out);

/* The evaluator's window onto this model's numeric settings. */
static bool lookup(void *opaque, const char *name, tlm_loc use, double *out, bool *found) {
    scope *s = opaque;
    int i = spec_index(name);
    *found = false;
    if (i < 0) return true;
    if (!s->def[i]) {
        *found = default_number(s, name, out);
        return true;
    }
    if (s->state[i] == DONE) {
        *found = true;
        *out = s->value[i];
        return true;
    }
    if (s->state[i] == FAILED) return false;
    if (s->state[i] == BUSY) {
        diag_error(D(s), use, "setting `%s` is defined in terms of itself", name);
        s->state[i] = FAILED;
        return false;
    }
    s->state[i] = BUSY;
    double v;
    bool ok = eval_number(&s->ev, s->def[i]->value, &v);
    if (!ok) {
        s->state[i] = FAILED;
        return false;
    }
    s->state[i] = DONE;
    s->value[i] = v;
    *found = true;
    *out = v;
    return true;
}

static bool number_of(scope *s, const char *name, double *out) {
    bool found;
    return lookup(s, name, loc_of(s, name), out, &found) && found;
}

static bool default_number(scope *s, const char *name, double *out) {
    if (strcmp(name, "vocab") == 0 && s->tokenizer_vocab > 0) {   /* derived from the tokenizer */
        *out = (double)s->tokenizer_vocab;
        return true;
    }
    if (strcmp(name, "quantum") == 0) {
        *out = 1;
        return true;
    }
    if (strcmp(name, "norm_eps") == 0) {
        *out = 1e-5;
        return true;
    }
    if (strcmp(name, "rope_base") == 0) {
        *out = 10000;
        return true;
    }
    if (strcmp(name, "chunk") == 0) {
        *out = 16;
        return true;
    }
    if (strcmp(name, "inner_lr") == 0) {
        *out = 0.1;
        return true;
    }
    if (strcmp(name, "head_dim") == 0) {
        double d, h;
        if (!number_of(s, "d_model", &d) || !number_of(s, "heads", &h) || h <= 0) return false;
        *out = floor(d / h);
        return true;
    }
    return false;
}

/* ---- typed readers for settings ---- */

static const char *describe_value(const expr *e) {
    switch (e->kind) {
    case EX_NUMBER: return "a number";
    case EX_STRING: return "a string";
    case EX_TUPLE: return "a tuple";
    case EX_LIST: return "a list";
    case EX_CALL: return "a call";
    default: return "an expression";
    }
}

/* A name that stands for a param is replaced by the param's value, so
 * `param mix = titans; mixer = mix;` and `-D mix=titans` work. */
static const expr *deref(scope *s, const expr *e) {
    for (int hops = 0; e && e->kind == EX_NAME && hops < 64; hops++) {
        item *param = symtab_get(&s->p->params, e->text);
        if (!param) break;
        const expr *override = symtab_get(&s->p->param_overrides, e->text);
        e = override ? override : param->value;
    }
    return e;
}

static bool check_range(scope *s, const setting_spec *x, tlm_loc loc, double v) {
    /* above a real's lower bound as a double, at it as the float the
     * trainer computes in, where the bound is excluded or means something
     * of its own (tlm_real_at_bound_as_float: eps = 1e-50 is 0, 0 / 0 at the
     * first step; grad_clip = 1e-46 is 0, clipping off) */
    const bool zero_as_float = x->type == ST_REAL && tlm_real_at_bound_as_float(x->name, x->lo, x->lo_open, v);
    bool low = (x->lo_open ? v <= x->lo : v < x->lo) || zero_as_float;
    if (!low && v <= x->hi) return true;
    /* Bounds in the fewest digits that are exact (0.9999999, not %g's 1). A
     * value below a bound of 1e15 or more is told only the lower bound. */
    /* The value too: 1e31, not %.17g's 9.9999999999999996e+30. */
    char lo[32], hi[32], val[32];
    fmt_real(lo, sizeof lo, x->lo);
    fmt_real(hi, sizeof hi, x->hi);
    fmt_real(val, sizeof val, v);
    if (zero_as_float) {
        char least[32];
        fmt_float(least, sizeof least, nextafterf((float)x->lo, INFINITY));
        diag_error(D(s), loc, "%s %s is %s as a float32, which the trainer computes in (the least is %s)", x->name, val,
                   lo, least);
    } else if (x->type == ST_INT)
        diag_error(D(s), loc, "%s must be between %.0f and %.0f, not %s", x->name, x->lo, x->hi, val);
    else if (low && x->hi >= 1e15)
        diag_error(D(s), loc, "%s must be %s %s, not %s", x->name, x->lo_open ? "greater than" : "at least", lo, val);
    else
        diag_error(D(s), loc, "%s must be %s %s and at most %s, not %s", x->name,
                   x->lo_open ? "greater than" : "at least", lo, hi, val);
    return false;
}

static bool check_whole(scope *s, const setting_spec *x, tlm_loc loc, double v) {
    if (v == floor(v)) return true;
    char val[32];
    diag_error(D(s), loc, "%s must be a whole number, not %s", x->name, fmt_real(val, sizeof val, v));
    return false;
}

static bool read_number_expr(scope *s, const setting_spec *x, const expr *e, double *out) {
    double v;
    if (!eval_number(&s->ev, e, &v)) return false;
    if (x->type == ST_INT && !check_whole(s, x, e->loc, v)) return false;
    if (!check_range(s, x, e->loc, v)) return false;
    *out = v;
    return true;
}

/* One of a fixed set of names: a mixer, an MLP kind, true/false, ...
 * what: "mixer", "MLP kind", ...; NULL for booleans. */
static int read_choice(scope *s, const setting_spec *x, const expr *e0, const char *what) {
    const expr *e = deref(s, e0);
    const char *const *choices = x->choices;
    char list[256] = "";
    size_t n = 0;
    for (int i = 0; choices[i]; i++)
        n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", choices[i]);
    if (e->kind != EX_NAME) {
        if (what)
            diag_error(D(s), e0->loc, "expected %s %s, found %s", strchr("aeiouAEIOU", what[0]) ? "an" : "a", what,
                       describe_value(e));
        else diag_error(D(s), e0->loc, "expected true or false, found %s", describe_value(e));
        if (what) diag_hint(D(s), "%s is one of: %s", x->name, list);
        return -1;
    }
    int i = name_index(choices, e->text);
    if (i >= 0) return i;
    if (what) diag_error(D(s), e0->loc, "unknown %s `%s`", what, e->text);
    else diag_error(D(s), e0->loc, "expected true or false, found `%s`", e->text);
    if (!what) return -1;
    suggester sg;
    suggest_begin(&sg, e->text);
    suggest_list(&sg, choices);
    const char *best = suggest_result(&sg);
    if (best) diag_hint(D(s), "did you mean `%s`?", best);
    diag_hint(D(s), "%s is one of: %s", x->name, list);
    return -1;
}

/* Names first (so a typo is reported as such), then the value. */
static bool checked_number(scope *s, const setting_spec *x, const expr *e, double *out) {
    int before = D(s)->errors;
    resolve_number(s->p, e, false);
    if (D(s)->errors > before) return false;
    return read_number_expr(s, x, e, out);
}

/* A numeric setting, evaluated once through lookup() (which also finds
 * settings defined in terms of each other), then checked against its type. */
static bool numeric_setting(scope *s, const char *name, double *v) {
    int i = spec_index(name);
    if (!s->def[i]) return default_number(s, name, v);
    bool found;
    const setting_spec *x = &model_settings[i];
    tlm_loc loc = s->def[i]->value->loc;
    if (!lookup(s, name, loc, v, &found) || !found || (x->type == ST_INT && !check_whole(s, x, loc, *v)) ||
        !check_range(s, x, loc, *v)) {
        inherited_note(s, name);
        return false;
    }
    return true;
}

static int64_t int_setting(scope *s, const char *name, bool *ok) {
    double v = 0;
    if (!numeric_setting(s, name, &v)) {
        *ok = false;
        return 0;                 /* v may be out of range for an integer */
    }
    return (int64_t)v;
}

static double real_setting(scope *s, const char *name, bool *ok) {
    double v = 0;
    if (!numeric_setting(s, name, &v)) *ok = false;
    return v;
}

static int choice_setting(scope *s, const char *name, int fallback, const char *what, bool *ok) {
    int i = spec_index(name);
    if (!s->def[i]) return fallback;
    int c = read_choice(s, &model_settings[i], s->def[i]->value, what);
    if (c < 0) {
        inherited_note(s, name);
        *ok = false;
        return fallback;
    }
    return c;
}

/* ---- collecting the settings along the inheritance chain ---- */

/* The longest chain of parents a model may have (see collect_settings). */
enum { TLM_MAX_INHERITANCE = 4096 };

/* "a -> b -> a" for the cycle chain[0..n] -> chain[0], cut short when long. */
static void cycle_path(char *buf, size_t len, const item *const *chain, int n) {
    size_t used = 0;
    buf[0] = '\0';
    for (int k = 0; k <= n + 1; k++) {
        const char *name = k <= n ? chain[k]->name : chain[0]->name;
        if (used + (k ? 4 : 0) + strlen(name) + sizeof " -> ..." > len) {       /* always room for the "..." */
            snprintf(buf + used, len - used, " -> ...");
            return;
        }
        used += (size_t)snprintf(buf + used, len - used, "%s%s", k ? " -> " : "", name);
    }
}

/* *chain_ok: the inheritance chain itself is sound (else nothing else can be
 * checked); returns false if any setting was rejected. */
static bool collect_settings(scope *s, const item *model, const item **chain, int *nchain, bool *chain_ok) {
    *chain_ok = false;
    program *p = s->p;
    int n = 0;
    int limit = (int)p->models.count + 1;
    for (const item *m = model; m; n++) {
        const item *parent = m->parent ? symtab_get(&p->models, m->parent) : NULL;
        /* Every model walks its whole chain, so the chain's length is
         * bounded: 20,000 models each inheriting from the one before took
         * tlmc 20 s. Whether the walk has entered a cycle is found here
         * rather than on every step. */
        if (n > TLM_MAX_INHERITANCE && n < limit) {
            const item *x = m;          /* a chain that ends within `limit` steps has no cycle */
            for (int k = 0; k < limit && x; k++) x = x->parent ? symtab_get(&p->models, x->parent) : NULL;
            if (!x) {
                diag_error(D(s), model->parent_loc, "model `%s` inherits through more than %d models", model->name,
                           TLM_MAX_INHERITANCE);
                return false;
            }
            n = limit;
        }
        /* A model in a cycle meets itself below; one that only inherits
         * from a cycle (whose members each get their own error) comes here,
         * or meets an ancestor that is its own parent. */
        if (n >= limit || (m != model && parent == m)) {
            diag_error(D(s), model->parent_loc,
                       "model `%s` cannot be checked: the models it inherits from form a cycle", model->name);
            return false;
        }
        chain[n] = m;
        if (!m->parent) break;
        if (!parent) {
            diag_error(D(s), m->parent_loc, "unknown model `%s`", m->parent);
            suggester sg;
            suggest_begin(&sg, m->parent);
            for (size_t i = 0; i < p->models.cap; i++) suggest_consider(&sg, p->models.keys[i]);
            const char *best = suggest_result(&sg);
            if (best) diag_hint(D(s), "did you mean `%s`?", best);
            return false;
        }
        if (parent == model) {
            char path[256];
            cycle_path(path, sizeof path, chain, n);
            diag_error(D(s), model->parent_loc, "model `%s` inherits from itself: %s", model->name, path);
            return false;
        }
        m = parent;
    }
    *nchain = n + 1;
    *chain_ok = true;
    bool ok = true;
    for (int k = *nchain - 1; k >= 0; k--) {        /* root first: the child overrides */
        const item *m = chain[k];
        for (const setting *x = m->settings; x; x = x->next) {
            int i = spec_index(x->name);
            if (i < 0) {
                if (find_setting(train_settings, x->name)) {
                    diag_error(D(s), x->name_loc, "`%s` is a training setting", x->name);
                    diag_hint(D(s), "put it in a `train { ... }` block");
                } else {
                    diag_error(D(s), x->name_loc, "unknown setting `%s`", x->name);
                    suggester sg;
                    suggest_begin(&sg, x->name);
                    suggest_list(&sg, setting_names(model_settings));
                    const char *best = suggest_result(&sg);
                    if (best) diag_hint(D(s), "did you mean `%s`?", best);
                }
                ok = false;
                continue;
            }
            if (s->def[i] && s->owner[i] == m) {
                diag_error(D(s), x->name_loc, "`%s` is set twice", x->name);
                diag_note(D(s), s->def[i]->name_loc, "the first setting is here");
                ok = false;
                continue;
            }
            s->def[i] = x;
            s->owner[i] = m;
        }
    }
    return ok;
}

/* ---- the train block: the rows of abi/tlm_train_settings.h ---- */

_Static_assert((int)TLM_TRAIN_NSETTINGS <= (int)MAX_SETTINGS, "a train block's settings fit `seen`");

static bool read_named_args(scope *s, const expr *e, const char *fn, const char *const *names, const expr **values) {
    bool ok = true;
    for (arg *a = e->args; a; a = a->next) {
        if (!a->name) {
            diag_error(D(s), a->value->loc, "the arguments of `%s` are named", fn);
            char list[256] = "";
            size_t n = 0;
            for (int i = 0; names[i]; i++)
                n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", names[i]);
            diag_hint(D(s), "write e.g. `%s(%s = ...)`; it takes %s", fn, names[0], list);
            return false;
        }
        int i = name_index(names, a->name);
        if (i < 0) {
            diag_error(D(s), a->name_loc, "`%s` has no argument `%s`", fn, a->name);
            suggester sg;
            suggest_begin(&sg, a->name);
            suggest_list(&sg, names);
            const char *best = suggest_result(&sg);
            if (best) diag_hint(D(s), "did you mean `%s`?", best);
            ok = false;
            continue;
        }
        if (values[i]) {
            diag_error(D(s), a->name_loc, "`%s` is given twice", a->name);
            ok = false;
            continue;
        }
        values[i] = a->value;
    }
    return ok;
}

/* A number for `row`, checked against the row's kind and range (the
 * messages call it `name`, e.g. betas[0]), into t. */
static bool read_train_number(scope *s, const tlm_train_setting *row, const char *name, const expr *e,
                              tlm_abi_train *t) {
    setting_spec x = {
        name,     row->kind == TLM_TS_REAL ? ST_REAL : ST_INT, row->lo, row->hi, row->lo_open, NULL, ANY_MIXER, false,
        row->help};
    double v;
    if (!checked_number(s, &x, e, &v)) return false;
    tlm_train_set(t, row, v);
    return true;
}

/* What the messages call a setting whose value is a call, and the example
 * the hint after a wrong value gives (the table's help for another one). */
typedef struct call_words {
    const char *key, *noun, *a_noun, *example;
} call_words;

static call_words words_for(const tlm_train_setting *row) {
    static const call_words known[] = {
        {"optimizer", "optimizer", "an optimizer",
         "optimizer = adamw(lr = 3e-3, betas = (0.9, 0.95), weight_decay = 0.1) or sgd(lr = 0.1, momentum = 0.9)"},
        {"lr_schedule", "lr schedule", "an lr schedule",
         "lr_schedule = cosine(warmup = 100, min_lr = 3e-4), linear(...) or constant(warmup = 0)"},
    };
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (!strcmp(known[i].key, row->key)) return known[i];
    return (call_words){row->key, row->key, row->key, row->help};
}

/* A setting whose value is a call, like optimizer = adamw(lr = 3e-3): the
 * function names the choice; its named arguments are the ARGUMENT rows of
 * the table that this choice takes, where rows that share a name are one
 * tuple (betas = (beta1, beta2)). Arguments not given keep their defaults. */
static bool read_call(scope *s, const tlm_train_setting *row, const expr *e0, tlm_abi_train *t) {
    const expr *e = deref(s, e0);
    const char *fn = e->kind == EX_CALL || e->kind == EX_NAME ? e->text : NULL;
    call_words words = words_for(row);
    int choice = fn ? tlm_enum_find(row->choices, fn) : -1;
    if (choice < 0) {
        if (fn) {
            diag_error(D(s), e0->loc, "unknown %s `%s`", words.noun, fn);
            suggester sg;
            suggest_begin(&sg, fn);
            suggest_list(&sg, row->choices->names);
            const char *best = suggest_result(&sg);
            if (best) diag_hint(D(s), "did you mean `%s`?", best);
        } else {
            diag_error(D(s), e0->loc, "expected %s, found %s", words.a_noun, describe_value(e));
        }
        diag_hint(D(s), "%s", words.example);
        return false;
    }
    tlm_train_set(t, row, choice);
    if (e->kind == EX_NAME) return true;

    const char *names[TLM_TRAIN_NSETTINGS + 1];
    int first[TLM_TRAIN_NSETTINGS], count[TLM_TRAIN_NSETTINGS], n = 0;
    for (int i = 0; i < TLM_TRAIN_NSETTINGS; i++) {
        const tlm_train_setting *a = &tlm_train_settings[i];
        if (!a->call || strcmp(a->call, row->key) != 0 || !(a->for_choices & (1u << choice))) continue;
        if (n > 0 && first[n - 1] + count[n - 1] == i && !strcmp(names[n - 1], a->arg)) {
            count[n - 1]++;
            continue;
        }
        names[n] = a->arg;
        first[n] = i;
        count[n++] = 1;
    }
    names[n] = NULL;
    const expr *values[TLM_TRAIN_NSETTINGS] = {0};
    if (!read_named_args(s, e, fn, names, values)) return false;
    bool ok = true;
    for (int k = 0; k < n; k++) {
        const tlm_train_setting *a = &tlm_train_settings[first[k]];
        if (!values[k]) continue;
        if (count[k] == 1) {
            ok &= read_train_number(s, a, a->arg, values[k], t);
            continue;
        }
        const expr *tuple = deref(s, values[k]);
        if (tuple->kind != EX_TUPLE || tuple->nargs != count[k]) {
            char like[128] = "", v[32];
            size_t len = 0;
            for (int j = 0; j < count[k] && len < sizeof like; j++)
                len += (size_t)snprintf(like + len, sizeof like - len, "%s%s", j ? ", " : "",
                                        fmt_real(v, sizeof v, a[j].default_value));
            diag_error(D(s), values[k]->loc, "%s is a %s, like (%s)", a->arg, count[k] == 2 ? "pair" : "tuple", like);
            ok = false;
            continue;
        }
        int j = 0;
        for (arg *x = tuple->args; x; x = x->next, j++) {
            char name[64];
            snprintf(name, sizeof name, "%s[%d]", a->arg, j);
            ok &= read_train_number(s, &a[j], name, x->value, t);
        }
    }
    return ok;
}

/* A name in a train block that is not a setting of its own: a model
 * setting, an argument of a call, or a typo. */
static void unknown_train_setting(scope *s, const setting *x, const tlm_train_setting *row) {
    if (row) {
        const tlm_train_setting *call = tlm_train_call_of(row);
        diag_error(D(s), x->name_loc, "`%s` is an argument of `%s`, not a setting of its own", x->name, call->key);
        unsigned first = 0;
        while (first < 31 && !(row->for_choices & (1u << first))) first++;
        diag_hint(D(s), "write e.g. `%s = %s(%s = ...)`", call->key, tlm_enum_name(call->choices, first), row->arg);
        return;
    }
    if (find_setting(model_settings, x->name))
        diag_error(D(s), x->name_loc, "`%s` is a model setting, not a training setting", x->name);
    else diag_error(D(s), x->name_loc, "unknown training setting `%s`", x->name);
    suggester sg;
    suggest_begin(&sg, x->name);
    suggest_list(&sg, setting_names(train_settings));
    const char *best = suggest_result(&sg);
    if (best) diag_hint(D(s), "did you mean `%s`?", best);
}

static bool apply_train_block(scope *s, const item *block, tlm_abi_train *t, const setting **seen) {
    bool ok = true;
    for (const setting *x = block->settings; x; x = x->next) {
        const tlm_train_setting *row = tlm_train_find(x->name);
        if (!row || row->call) {
            unknown_train_setting(s, x, row);
            ok = false;
            continue;
        }
        int i = (int)(row - tlm_train_settings);
        if (seen[i]) {
            diag_error(D(s), x->name_loc, "training setting `%s` is set twice", x->name);
            diag_note(D(s), seen[i]->name_loc, "the first setting is here");
            ok = false;
            continue;
        }
        seen[i] = x;
        s->train_loc[i] = x->value->loc, s->train_set[i] = true;
        if (row->kind == TLM_TS_CHOICE) {
            ok &= read_call(s, row, x->value, t);
            continue;
        }
        if (!read_train_number(s, row, row->key, x->value, t)) {
            ok = false;
            continue;
        }
    }
    return ok;
}

/* Where the first of the named training settings that a block sets was
 * set (the one a cross-check's error is about), else the model's name. */
static tlm_loc train_setting_loc(scope *s, const char *const *names, int n) {
    for (int k = 0; k < n; k++) {
        const tlm_train_setting *row = tlm_train_find(names[k]);
        int i = row ? (int)(row - tlm_train_settings) : -1;
        if (i >= 0 && s->train_set[i]) return s->train_loc[i];
    }
    return s->model->name_loc;
}

/* Top-level train blocks of the model's file apply first; then the blocks
 * inside the model and its parents, root first. Within one level a setting
 * may be given once. Defaults come from the table; the ones that depend on
 * other values (min_lr: a tenth of lr) are resolved once every block is read. */
static bool read_train(scope *s, const item **chain, int nchain, checked_model *m) {
    tlm_train_defaults(&m->train, m->context);
    bool ok = true;
    const setting *seen[MAX_SETTINGS] = {0};
    for (int f = 0; f < s->p->nfiles; f++) {
        if (s->p->files[f].file != s->model->file) continue;
        for (int i = 0; i < s->p->files[f].ntrains; i++)
            ok &= apply_train_block(s, s->p->files[f].trains[i], &m->train, seen);
    }
    for (int k = nchain - 1; k >= 0; k--) {
        if (!chain[k]->train) continue;
        const setting *level[MAX_SETTINGS] = {0};
        ok &= apply_train_block(s, chain[k]->train, &m->train, level);
    }
    if (s->p->study_train) {          /* a study overrides every model it trains */
        const setting *level[MAX_SETTINGS] = {0};
        ok &= apply_train_block(s, s->p->study_train, &m->train, level);
    }
    m->min_lr_default = m->train.min_lr == -1; /* what tlm_train_resolve_defaults resolves */
    tlm_train_resolve_defaults(&m->train);
    if (ok && m->train.batch % m->train.accumulate != 0) {
        diag_error(D(s), train_setting_loc(s, (const char *const[]){"accumulate", "batch"}, 2),
                   "the training batch (%lld) must be a multiple of "
                   "accumulate (%lld): each step adds up equal micro-batches",
                   (long long)m->train.batch, (long long)m->train.accumulate);
        ok = false;
    }
    if (ok && tlm_train_decay_rises(&m->train)) {
        char lr[64], min_lr[64];
        diag_error(D(s), train_setting_loc(s, (const char *const[]){"lr_schedule", "optimizer"}, 2),
                   "the training min_lr (%s) is above its lr (%s): the %s schedule would raise the rate to "
                   "min_lr instead of decaying to it",
                   tlm_train_format(min_lr, sizeof min_lr, tlm_train_find("min_lr"), &m->train),
                   tlm_train_format(lr, sizeof lr, tlm_train_find("lr"), &m->train),
                   tlm_enum_name(&tlm_lr_enum, m->train.lr_schedule));
        ok = false;
    }
    if (ok && m->train.context > m->context) {
        diag_error(D(s), train_setting_loc(s, (const char *const[]){"context"}, 1),
                   "the training context (%lld) is longer than the model's context (%lld)", (long long)m->train.context,
                   (long long)m->context);
        ok = false;
    }
    return ok;
}

/* ---- the model ---- */

/* tokenizer = "path": read with the runtime's tokenizer library, so that
 * vocab can be checked against it (or derived from it). The path is
 * relative to the file that sets it. */
static bool read_tokenizer(scope *s, checked_model *m) {
    int i = spec_index("tokenizer");
    if (!s->def[i]) return true;
    const expr *e0 = s->def[i]->value, *e = deref(s, e0);
    if (e->kind != EX_STRING) {
        diag_error(D(s), e0->loc, "expected a path in quotes, found %s", describe_value(e));
        diag_hint(D(s), "tokenizer = \"tokenizer.json\"; (relative to the .tlm file)");
        inherited_note(s, "tokenizer");
        return false;
    }
    if (!e->text[0]) {
        diag_error(D(s), e0->loc, "the tokenizer's path is empty");
        diag_hint(D(s), "tokenizer = \"tokenizer.json\"; (relative to the .tlm file), or no tokenizer line for bytes");
        inherited_note(s, "tokenizer");
        return false;
    }
    if (!s->p->load_tokenizer) {
        diag_error(D(s), e0->loc,
                   "this tlmc was built without the tokenizer library (runtime/), so it cannot read `%s`", e->text);
        return false;
    }
    arena *a = &s->p->s->arena;
    const char *path =
        e->text[0] == '/' ? e->text : arena_printf(a, "%s/%s", program_file_dir(s->p, s->owner[i]->file), e->text);
    char why[512];
    int64_t vocab = 0;
    if (!s->p->load_tokenizer(path, &vocab, m->tokenizer_hash, why, sizeof why)) {
        diag_error(D(s), e0->loc, "cannot read the tokenizer `%s`: %s", e->text, why);
        inherited_note(s, "tokenizer");
        return false;
    }
    m->tokenizer = path;
    s->tokenizer_vocab = vocab;
    return true;
}

static bool read_budget(scope *s, checked_model *m) {
    const expr *e0 = value_of(s, "budget");
    m->has_budget = false;
    if (!e0) return true;
    const expr *e = deref(s, e0);
    if (e->kind == EX_NAME && strcmp(e->text, "none") == 0) return true;
    if (e->kind != EX_CALL || strcmp(e->text, "uniform") != 0 || e->nargs != 1 || e->args->name) {
        diag_error(D(s), e0->loc, "expected a budget, found %s", e->kind == EX_CALL ? "a call" : describe_value(e));
        diag_hint(D(s), "budget = uniform(W) keeps the MLP params and FLOPs of width W in every "
                        "layer; budget = none checks nothing");
        inherited_note(s, "budget");
        return false;
    }
    setting_spec x = {"the budget width", ST_INT, 1, 1 << 24, 0, NULL, ANY_MIXER, false, NULL};
    double w;
    if (!checked_number(s, &x, e->args->value, &w)) {
        inherited_note(s, "budget");
        return false;
    }
    m->has_budget = true;
    m->budget_width = (int64_t)w;
    return true;
}

static bool read_cms(scope *s, checked_model *m) {
    const expr *e0 = value_of(s, "cms");
    m->ncms = 1;
    m->cms[0] = 1;
    if (!e0) return true;
    const expr *e = deref(s, e0);
    if (e->kind != EX_LIST || e->nargs == 0) {
        diag_error(D(s), e0->loc, "cms is a non-empty list of update periods, like [1, 4]");
        return false;
    }
    if (e->nargs > TLM_MAX_CMS_LEVELS) {
        diag_error(D(s), e0->loc, "cms has %d levels; the limit is %d", e->nargs, TLM_MAX_CMS_LEVELS);
        return false;
    }
    setting_spec x = {"each cms period", ST_INT, 1, 1 << 20, 0, NULL, ANY_MIXER, false, NULL};
    m->ncms = 0;
    for (arg *a = e->args; a; a = a->next) {
        double v;
        if (!checked_number(s, &x, a->value, &v)) return false;
        m->cms[m->ncms++] = (int64_t)v;
    }
    return true;
}

static bool read_widths(scope *s, checked_model *m) {
    const expr *e = value_of(s, "d_ff");
    m->raw_widths = arena_alloc(&s->p->s->arena, (size_t)m->layers * sizeof *m->raw_widths);
    m->widths = arena_alloc(&s->p->s->arena, (size_t)m->layers * sizeof *m->widths);
    s->ev.in_layer = true;
    s->ev.L = m->layers;
    s->ev.model = s->model->name;
    bool ok = true;
    int errors = D(s)->errors;
    for (int64_t l = 0; l < m->layers && ok; l++) {
        s->ev.l = l;
        ok = eval_number(&s->ev, e, &m->raw_widths[l]);
    }
    s->ev.in_layer = false;
    /* an error inside a schedule (a module's, even) is said where it
     * happened; the model's d_ff that called it is named here */
    tlm_loc at = D(s)->last_error_loc;
    if (!ok && D(s)->errors > errors && !D(s)->last_dropped &&
        (at.file != e->loc.file || at.begin < e->loc.begin || at.end > e->loc.end))
        diag_note(D(s), e->loc, "in the d_ff of `%s`", s->model->name);
    if (!ok) inherited_note(s, "d_ff");
    return ok;
}

/* Whether setting i was written for another mixer by an ancestor above the
 * model that chose this one (`model a : t { mixer = attention; }` below a
 * Titans `t`: t's chunk, inner_lr). Such a setting is not checked against
 * the model's mixer, since the language has no way to unset one; names that
 * refer to it still read its value. One written at or below the level that
 * chose the mixer is checked. */
static bool written_for_another_mixer(scope *s, const item **chain, int nchain, int i) {
    int mix = spec_index("mixer"), chosen = nchain, level = nchain; /* nchain: above every level (a default) */
    for (int k = 0; k < nchain; k++) {
        if (s->def[mix] && s->owner[mix] == chain[k]) chosen = k;
        if (s->owner[i] == chain[k]) level = k;
    }
    return level > chosen;
}

/* Settings that only make sense for one mixer. */
static bool check_mixer_settings(scope *s, const item **chain, int nchain, checked_model *m) {
    bool ok = true;
    for (const setting_spec *x = model_settings; x->name; x++) {
        int i = (int)(x - model_settings);
        if (x->mixer == ANY_MIXER || !s->def[i] || written_for_another_mixer(s, chain, nchain, i)) continue;
        if (x->mixer != (int)m->mixer) {
            diag_error(D(s), s->def[i]->name_loc,
                       "`%s` is a setting of the `%s` mixer, but `%s` "
                       "uses `%s`",
                       x->name, tlm_enum_name(&tlm_mixer_enum, (unsigned)x->mixer), s->model->name,
                       tlm_enum_name(&tlm_mixer_enum, m->mixer));
            ok = false;
        }
    }
    return ok;
}

static bool check_shape(scope *s, checked_model *m) {
    bool ok = true;
    int hd = spec_index("head_dim");
    if (!s->def[hd]) {
        if (m->d_model % m->heads != 0) {
            diag_error(D(s), loc_of(s, "heads"), "heads (%lld) must divide d_model (%lld)", (long long)m->heads,
                       (long long)m->d_model);
            diag_hint(D(s), "d_model / heads = %.4g; heads could be %s", (double)m->d_model / (double)m->heads,
                      m->d_model % 4 == 0 ? "4 or another divisor of d_model" : "a divisor of d_model");
            inherited_note(s, "heads");
            return false;
        }
        m->head_dim = m->d_model / m->heads;
    } else if (m->heads * m->head_dim != m->d_model) {
        diag_error(D(s), loc_of(s, "head_dim"), "heads × head_dim = %lld × %lld = %lld, but d_model is %lld",
                   (long long)m->heads, (long long)m->head_dim, (long long)(m->heads * m->head_dim),
                   (long long)m->d_model);
        inherited_note(s, "head_dim");
        return false;
    }
    if (m->mixer != TLM_MIXER_TITANS && m->head_dim % 2 != 0) {
        diag_error(D(s), loc_of(s, s->def[hd] ? "head_dim" : "heads"),
                   "rotary position embeddings need an even head size, but it is %lld", (long long)m->head_dim);
        ok = false;
    }
    if (m->mixer == TLM_MIXER_TITANS && m->context % m->chunk != 0) {
        diag_error(D(s), loc_of(s, "chunk"), "chunk (%lld) must divide context (%lld)", (long long)m->chunk,
                   (long long)m->context);
        ok = false;
    }
    return ok;
}

bool check_model(program *p, const item *model, checked_model *m, bool names_only) {
    scope *s = tlm_xcalloc(1, sizeof *s);
    s->p = p;
    s->model = model;
    eval_init(&s->ev, p, s, lookup);
    memset(m, 0, sizeof *m);
    m->name = model->name;
    m->parent = model->parent;
    m->loc = model->name_loc;

    /* collect_settings stops a chain past TLM_MAX_INHERITANCE models: a
     * table the size of every model, cleared per model, cost a file of
     * 60,000 models 28 GB of memset */
    int nmodels = (int)(p->models.count < TLM_MAX_INHERITANCE ? p->models.count : TLM_MAX_INHERITANCE) + 2;
    const item **chain = tlm_xcalloc((size_t)nmodels, sizeof *chain);
    int nchain = 0;
    bool chain_ok = true;
    bool ok = collect_settings(s, model, chain, &nchain, &chain_ok);
    if (!chain_ok) names_only = false;          /* nothing more to look at */
    else if (!ok) names_only = true;

    bool complete = true;
    for (const setting_spec *x = model_settings; ok && !names_only && x->name; x++) {
        int i = (int)(x - model_settings);
        bool derived = strcmp(x->name, "vocab") == 0 && s->def[spec_index("tokenizer")];
        if (x->required && !s->def[i] && !derived) {
            diag_error(D(s), model->name_loc, "model `%s` does not set `%s`", model->name, x->name);
            diag_hint(D(s), "%s: %s", x->name, x->help);
            complete = false;
        }
    }
    ok &= complete;
    /* Names are checked before anything is evaluated, so each mistake is
     * reported once and evaluation only meets well-formed expressions. */
    int before = D(s)->errors;
    for (const setting_spec *x = model_settings; (ok || names_only) && x->name; x++) {
        int i = (int)(x - model_settings);
        if (s->def[i] && (x->type == ST_INT || x->type == ST_REAL || x->type == ST_WIDTH))
            resolve_number(p, deref(s, s->def[i]->value), x->type == ST_WIDTH);
    }
    if (D(s)->errors > before) ok = false;
    if (names_only) {
        /* After syntax errors: report what can be known without evaluating. */
        bool good = true;
        choice_setting(s, "mixer", TLM_MIXER_ATTENTION, "mixer", &good);
        choice_setting(s, "mlp", TLM_MLP_SWIGLU, "MLP kind", &good);
        choice_setting(s, "gate", TLM_GATE_ELEMENTWISE, "gate kind", &good);
        choice_setting(s, "tie_embeddings", 0, NULL, &good);
        choice_setting(s, "monotone", 1, NULL, &good);
        ok = false;
    }

    if (ok) ok = read_tokenizer(s, m);
    if (ok) {
        bool good = true;
        m->vocab = int_setting(s, "vocab", &good);
        if (good && s->tokenizer_vocab > 0 && m->vocab != s->tokenizer_vocab) {
            diag_error(D(s), loc_of(s, "vocab"), "vocab is %lld, but the tokenizer has %lld tokens",
                       (long long)m->vocab, (long long)s->tokenizer_vocab);
            diag_note(D(s), loc_of(s, "tokenizer"), "the tokenizer is set here");
            diag_hint(D(s), "leave vocab out to take the tokenizer's size");
            good = false;
        }
        m->context = int_setting(s, "context", &good);
        m->d_model = int_setting(s, "d_model", &good);
        m->layers = int_setting(s, "layers", &good);
        m->heads = int_setting(s, "heads", &good);
        m->quantum = int_setting(s, "quantum", &good);
        m->chunk = int_setting(s, "chunk", &good);
        m->norm_eps = real_setting(s, "norm_eps", &good);
        m->rope_base = real_setting(s, "rope_base", &good);
        m->inner_lr = real_setting(s, "inner_lr", &good);
        m->mixer = (tlm_mixer)choice_setting(s, "mixer", TLM_MIXER_ATTENTION, "mixer", &good);
        m->mlp = (tlm_mlp)choice_setting(s, "mlp", TLM_MLP_SWIGLU, "MLP kind", &good);
        m->gate = (tlm_gate)choice_setting(s, "gate", TLM_GATE_ELEMENTWISE, "gate kind", &good);
        m->tie_embeddings = choice_setting(s, "tie_embeddings", 0, NULL, &good) == 1;
        m->warn_nonmonotone = choice_setting(s, "monotone", 1, NULL, &good) == 1;
        if (s->def[spec_index("head_dim")]) m->head_dim = int_setting(s, "head_dim", &good);
        good &= read_budget(s, m);
        good &= read_cms(s, m);
        if (good) good = check_mixer_settings(s, chain, nchain, m) && check_shape(s, m);
        ok = good;
    }
    if (ok) ok = read_train(s, chain, nchain, m);
    if (ok) ok = read_widths(s, m);
    if (ok)
        ok = fit_widths(p->s, m, value_of(s, "d_ff")->loc,
                        value_of(s, "budget") ? value_of(s, "budget")->loc : model->name_loc, loc_of(s, "quantum"));
    free(chain);
    eval_free(&s->ev);
    free(s);
    return ok;
}
