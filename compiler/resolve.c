#include "resolve.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "eval.h"
#include "suggest.h"
#include "vocabulary.h"
#include "xalloc.h"

typedef struct resolver {
    program *p;
    const item *sched;       /* the schedule whose body is checked, or NULL */
    bool layer_ok;
} resolver;

/* Whether the standard library's schedules define `name`: asked only when
 * a call names no schedule of this program, to point at the commonest
 * cause, a missing `use std.schedules;`. The module is loaded on its own,
 * quietly (its own session: its names are not this program's). */
static bool std_schedule_named(const program *p, const char *name) {
    if (!p->stdlib_dir) return false;
    tlm_session s;
    session_init(&s, NULL);
    program std;
    static const char text[] = "use std.schedules;";
    program_load_text(&std, &s, "<std>", text, sizeof text - 1, p->stdlib_dir);
    bool found = false;
    for (size_t i = 0; i < std.schedules.cap && !s.diag.errors; i++)
        if (std.schedules.keys[i] && strcmp(std.schedules.keys[i], name) == 0) found = true;
    program_free(&std);
    session_free(&s);
    return found;
}

static bool hint_std_schedule(resolver *r, const char *name) {
    if (!std_schedule_named(r->p, name)) return false;
    diag_hint(&r->p->s->diag, "`%s` is a schedule of std.schedules: add `use std.schedules;` to the file", name);
    return true;
}

static void check(resolver *r, const expr *e);

static void suggest_name(resolver *r, const char *name) {
    suggester s;
    suggest_begin(&s, name);
    for (const sched_param *p = r->sched ? r->sched->params : NULL; p; p = p->next) suggest_consider(&s, p->name);
    const symtab *params = &r->p->params;
    for (size_t i = 0; i < params->cap; i++) suggest_consider(&s, params->keys[i]);
    for (const setting_spec *x = model_settings; x->name; x++)
        if (is_numeric_setting(x->name)) suggest_consider(&s, x->name);
    static const char *const predefined[] = {"l", "L", "t", "pi", NULL};
    suggest_list(&s, predefined);
    const char *best = suggest_result(&s);
    if (best) diag_hint(&r->p->s->diag, "did you mean `%s`?", best);
}

static bool is_symbol_word(const char *n) {
    return name_index(tlm_mixer_enum.names, n) >= 0 || name_index(tlm_mlp_enum.names, n) >= 0 ||
           name_index(symbol_values, n) >= 0;
}

static void check_name(resolver *r, const expr *e) {
    diag_engine *d = &r->p->s->diag;
    ref_kind k = classify_name(r->p, r->sched, e->text);
    if (k == REF_LAYER_VAR && !r->sched && !r->layer_ok) {
        diag_error(d, e->loc, "`%s` is only defined where widths are computed", e->text);
        diag_hint(d, "l (layer index), L (layers) and t = l / (L - 1) can be used in d_ff "
                     "and in schedules");
        return;
    }
    if (k != REF_UNKNOWN) return;
    if (symtab_get(&r->p->schedules, e->text)) {
        item *s = symtab_get(&r->p->schedules, e->text);
        diag_error(d, e->loc, "schedule `%s` is used without arguments", e->text);
        diag_note(d, s->name_loc, "`%s` takes %d argument%s", e->text, s->nparams, s->nparams == 1 ? "" : "s");
        return;
    }
    if (is_symbol_word(e->text)) {
        diag_error(d, e->loc, "expected a number, found `%s`", e->text);
        return;
    }
    if (symtab_get(&r->p->models, e->text)) {
        diag_error(d, e->loc, "expected a number, found the model `%s`", e->text);
        return;
    }
    diag_error(d, e->loc, "unknown name `%s`", e->text);
    if (!hint_std_schedule(r, e->text)) suggest_name(r, e->text);
}

static void check_schedule_call(resolver *r, const expr *e, const item *sched) {
    diag_engine *d = &r->p->s->diag;
    int n = sched->nparams, positional = 0, required = 0;
    bool given[TLM_MAX_SCHED_PARAMS] = {false};
    for (const sched_param *p = sched->params; p; p = p->next) required += p->fallback == NULL;
    bool named = false;
    for (arg *a = e->args; a; a = a->next) {
        if (!a->name) {
            /* After a named argument a positional one has no clear place
             * (it would fill the first parameter, perhaps the one just
             * named), so it is refused, as in Python. */
            if (named) {
                diag_error(d, a->value->loc, "a positional argument cannot follow a named one");
                diag_hint(d, "give the positional arguments first, or name this one too");
                return;
            }
            if (positional < n) given[positional] = true;
            positional++;
            continue;
        }
        named = true;
        int k = sched_param_index(sched, a->name);
        if (k < 0) {
            diag_error(d, a->name_loc, "schedule `%s` has no parameter `%s`", sched->name, a->name);
            diag_note(d, sched->name_loc, "`%s` is defined here", sched->name);
            return;
        }
        if (given[k]) {
            diag_error(d, a->name_loc, "parameter `%s` is given twice", a->name);
            return;
        }
        given[k] = true;
    }
    if (positional > n) {
        diag_error(d, e->loc, "schedule `%s` takes %d argument%s, but %d were given", sched->name, n, n == 1 ? "" : "s",
                   e->nargs);
        diag_note(d, sched->name_loc, "`%s` is defined here", sched->name);
        return;
    }
    int i = 0;
    for (const sched_param *p = sched->params; p; p = p->next, i++) {
        if (!given[i] && !p->fallback) {
            diag_error(d, e->loc, "missing argument `%s` in call to `%s`", p->name, sched->name);
            diag_note(d, sched->name_loc, "`%s` takes %d argument%s%s", sched->name, n, n == 1 ? "" : "s",
                      required < n ? " (some have defaults)" : "");
            return;
        }
    }
}

static void check_call(resolver *r, const expr *e) {
    diag_engine *d = &r->p->s->diag;
    int min, max;
    for (arg *a = e->args; a; a = a->next) check(r, a->value);
    const char *name = call_target(r->p, e->text);
    item *sched = symtab_get(&r->p->schedules, name);
    if (builtin_arity(name, &min, &max) && (!sched || is_builtin_call_to(name, e->nargs))) {
        /* sigmoid(a, b) is std.schedules' sigmoid when it is used: say so */
        if (!builtin_call_checked(d, e, min, max) && !sched) hint_std_schedule(r, name);
        return;
    }
    if (sched) {
        check_schedule_call(r, e, sched);
        return;
    }
    if (name_index(value_functions, e->text) >= 0) {
        diag_error(d, e->loc, "expected a number, found `%s(...)`", e->text);
        if (strcmp(e->text, "uniform") == 0) diag_hint(d, "uniform(W) is written as `budget = uniform(W);`");
        else hint_std_schedule(r, e->text);
        return;
    }
    if (symtab_get(&r->p->params, e->text)) {      /* param shape = cosine; shape(1.5, 0.5) */
        if (name == e->text)
            diag_error(d, e->loc, "param `%s` is called, but it does not hold a schedule's name", e->text);
        else diag_error(d, e->loc, "param `%s` is called, but it holds `%s`, which is not a schedule", e->text, name);
        /* `param s = cosine;` without the module: the name is the user's
         * intent, and the unknown name is reported (with the hint) where
         * the param is set */
        if (name == e->text || !std_schedule_named(r->p, name))
            diag_hint(d, "a param that is called holds a schedule's name, like `param %s = cosine;`", e->text);
        return;
    }
    diag_error(d, e->loc, "unknown function `%s`", e->text);
    if (hint_std_schedule(r, e->text)) return;
    suggester s;
    suggest_begin(&s, e->text);
    suggest_list(&s, builtin_names);
    for (size_t i = 0; i < r->p->schedules.cap; i++) suggest_consider(&s, r->p->schedules.keys[i]);
    const char *best = suggest_result(&s);
    if (best) diag_hint(d, "did you mean `%s`?", best);
}

static void check(resolver *r, const expr *e) {
    if (!e) return;
    diag_engine *d = &r->p->s->diag;
    switch (e->kind) {
    case EX_NUMBER:
    case EX_ERROR: return;
    case EX_NAME: check_name(r, e); return;
    case EX_CALL: check_call(r, e); return;
    case EX_UNARY: check(r, e->a); return;
    case EX_BINARY:
        check(r, e->a);
        check(r, e->b);
        return;
    case EX_COND:
        check(r, e->a);
        check(r, e->b);
        check(r, e->c);
        return;
    case EX_STRING: diag_error(d, e->loc, "expected a number, found a string"); return;
    case EX_TUPLE: diag_error(d, e->loc, "expected a number, found a tuple"); return;
    case EX_LIST: diag_error(d, e->loc, "expected a number, found a list"); return;
    }
}

void resolve_number(program *p, const expr *e, bool layer_ok) {
    resolver r = {p, NULL, layer_ok};
    check(&r, e);
}

/* ---- cycles: a schedule calling itself, a param referring to itself ---- */

typedef struct edge {
    item *to;
    tlm_loc at;
} edge;
typedef struct edges {
    edge *v;
    int n, cap;
} edges;

static void add_edge(edges *es, item *to, tlm_loc at) {
    if (es->n == es->cap) {
        es->cap = es->cap ? 2 * es->cap : 8;
        es->v = tlm_xrealloc(es->v, (size_t)es->cap * sizeof *es->v);
    }
    es->v[es->n++] = (edge){to, at};
}

/* The schedules an expression calls, or the params it names. */
static void collect(const program *p, const item *owner, const expr *e, edges *out) {
    if (!e) return;
    if (owner->kind == IT_SCHEDULE && e->kind == EX_CALL) {
        const char *name = call_target(p, e->text);
        item *s = is_builtin_call_to(name, e->nargs) ? NULL : symtab_get(&p->schedules, name);
        if (s) add_edge(out, s, e->loc);
    }
    if (owner->kind == IT_PARAM && e->kind == EX_NAME) {
        item *q = symtab_get(&p->params, e->text);
        if (q) add_edge(out, q, e->loc);
    }
    collect(p, owner, e->a, out);
    collect(p, owner, e->b, out);
    collect(p, owner, e->c, out);
    for (arg *a = e->args; a; a = a->next) collect(p, owner, a->value, out);
}

static edges successors(const program *p, const item *it) {
    edges es = {0};
    collect(p, it, it->value, &es);
    for (const sched_param *sp = it->params; sp; sp = sp->next) collect(p, it, sp->fallback, &es);
    return es;
}

enum { WHITE = 0, GREY = 1, BLACK = 2 };

/* Depth-first search with an explicit stack: a chain of a hundred thousand
 * schedules must not overflow the C stack. */
static void find_cycles(program *p, item_kind kind) {
    diag_engine *d = &p->s->diag;
    symtab color = {0};
    typedef struct {
        item *it;
        edges es;
        int next;
    } dfs_frame;
    dfs_frame *stack = NULL;
    int depth = 0, cap = 0;
    /* Roots in source order, so the report does not depend on hashing. */
    for (int f = 0; f < p->nfiles; f++)
        for (item *root = p->files[f].items; root; root = root->next) {
            const symtab *table = kind == IT_SCHEDULE ? &p->schedules : &p->params;
            if (root->kind != kind || !root->name || symtab_get(table, root->name) != root ||
                symtab_get(&color, root->name))
                continue;
            symtab_set(&color, root->name, (void *)GREY);
            if (depth == cap) {
                cap = cap ? 2 * cap : 64;
                stack = tlm_xrealloc(stack, (size_t)cap * sizeof *stack);
            }
            stack[depth++] = (dfs_frame){root, successors(p, root), 0};
            while (depth > 0) {
                dfs_frame *top = &stack[depth - 1];
                if (top->next == top->es.n) {
                    symtab_set(&color, top->it->name, (void *)BLACK);
                    free(top->es.v);
                    depth--;
                    continue;
                }
                edge e = top->es.v[top->next++];
                intptr_t c = (intptr_t)symtab_get(&color, e.to->name);
                if (c == GREY) {
                    const char *what = top->it->kind == IT_SCHEDULE ? "schedule" : "param";
                    if (e.to == top->it) diag_error(d, e.at, "%s `%s` refers to itself", what, e.to->name);
                    else
                        diag_error(d, e.at, "%s `%s` refers back to `%s`, which depends on it", what, top->it->name,
                                   e.to->name);
                    diag_hint(d, "%ss cannot be recursive", what);
                } else if (c == WHITE) {
                    symtab_set(&color, e.to->name, (void *)GREY);
                    if (depth == cap) {
                        cap *= 2;
                        stack = tlm_xrealloc(stack, (size_t)cap * sizeof *stack);
                    }
                    stack[depth++] = (dfs_frame){e.to, successors(p, e.to), 0};
                }
            }
        }
    free(stack);
    symtab_free(&color);
}

/* Params may hold a mixer name, a string, a list or an optimizer as well as
 * a number; only the numeric-looking ones are checked as numbers here (the
 * rest are checked where they are used). */
static bool is_symbolic(const program *p, const expr *e) {
    switch (e->kind) {
    case EX_STRING:
    case EX_LIST:
    case EX_TUPLE: return true;
    case EX_NAME:
        return is_symbol_word(e->text) || symtab_get(&p->models, e->text) || symtab_get(&p->schedules, e->text);
    case EX_CALL: return name_index(value_functions, e->text) >= 0 && !symtab_get(&p->schedules, e->text);
    default: return false;
    }
}

void resolve_program(program *p) {
    diag_engine *d = &p->s->diag;
    for (int f = 0; f < p->nfiles; f++) {
        for (item *it = p->files[f].items; it; it = it->next) {
            if (it->kind == IT_SCHEDULE) {
                if (it->nparams > TLM_MAX_SCHED_PARAMS) {
                    diag_error(d, it->name_loc, "schedule `%s` has %d parameters; the limit is %d", it->name,
                               it->nparams, TLM_MAX_SCHED_PARAMS);
                    continue;
                }
                for (sched_param *a = it->params; a; a = a->next) {
                    for (sched_param *b = a->next; b; b = b->next) {
                        if (a->name == b->name) {
                            diag_error(d, b->loc, "duplicate parameter `%s`", b->name);
                            diag_note(d, a->loc, "the first is here");
                        }
                    }
                    if (classify_name(p, NULL, a->name) == REF_LAYER_VAR || strcmp(a->name, "pi") == 0)
                        diag_error(d, a->loc, "`%s` is predefined and cannot name a parameter", a->name);
                }
                resolver r = {p, it, true};
                for (sched_param *a = it->params; a; a = a->next) check(&r, a->fallback);
                check(&r, it->value);
            } else if (it->kind == IT_PARAM && !is_symbolic(p, it->value)) {
                resolver r = {p, NULL, true};
                check(&r, it->value);
            }
        }
    }
    /* -D values are checked like a param's value: unchecked, `-D r=mean()`
     * reached the evaluator with an argument missing and crashed it. */
    for (size_t i = 0; i < p->param_overrides.cap; i++) {
        const expr *value = p->param_overrides.keys[i] ? p->param_overrides.values[i] : NULL;
        if (!value || is_symbolic(p, value)) continue;
        resolver r = {p, NULL, true};
        check(&r, value);
    }
    find_cycles(p, IT_SCHEDULE);
    find_cycles(p, IT_PARAM);
}
