#include "ast_build.h"

#include <string.h>

static expr *node(tlm_session *s, expr_kind kind, tlm_loc loc) {
    expr *e = arena_alloc(&s->arena, sizeof *e);
    e->kind = kind;
    e->loc = loc;
    e->depth = 1;
    return e;
}

/* Deeper trees are refused here and replaced by an error node. The error
 * node keeps the depth just past the limit, so the nodes built on top of it
 * are replaced silently: a 100,000-term sum is one error, not one per
 * thousand terms. */
static expr *bounded(tlm_session *s, expr *e) {
    if (e->depth <= TLM_MAX_EXPR_DEPTH) return e;
    if (e->depth == TLM_MAX_EXPR_DEPTH + 1)
        diag_error(&s->diag, e->loc,
                   "expression nested too deeply: more than %d levels of operators, calls or parentheses (a chain "
                   "such as a + b + c counts a level a term)",
                   TLM_MAX_EXPR_DEPTH);
    expr *err = node(s, EX_ERROR, e->loc);
    err->depth = TLM_MAX_EXPR_DEPTH + 2;
    return err;
}

static int max_depth(const expr *a, const expr *b) {
    int da = a ? a->depth : 0, db = b ? b->depth : 0;
    return da > db ? da : db;
}

expr *mk_number(tlm_session *s, tlm_loc loc, double v) {
    expr *e = node(s, EX_NUMBER, loc);
    e->number = v;
    return e;
}

expr *mk_string(tlm_session *s, tlm_loc loc, const char *text) {
    expr *e = node(s, EX_STRING, loc);
    e->text = text;
    return e;
}

expr *mk_name(tlm_session *s, tlm_loc loc, const char *name) {
    expr *e = node(s, EX_NAME, loc);
    e->text = name;
    return e;
}

expr *mk_unary(tlm_session *s, tlm_loc loc, int op, expr *a) {
    expr *e = node(s, EX_UNARY, loc);
    e->op = op;
    e->a = a;
    e->depth = a->depth + 1;
    return bounded(s, e);
}

expr *mk_binary(tlm_session *s, tlm_loc loc, int op, expr *a, expr *b) {
    expr *e = node(s, EX_BINARY, loc);
    e->op = op;
    e->a = a;
    e->b = b;
    e->depth = max_depth(a, b) + 1;
    return bounded(s, e);
}

expr *mk_cond(tlm_session *s, tlm_loc loc, expr *c, expr *a, expr *b) {
    expr *e = node(s, EX_COND, loc);
    e->a = c;
    e->b = a;
    e->c = b;
    int d = max_depth(a, b);
    e->depth = (c->depth > d ? c->depth : d) + 1;
    return bounded(s, e);
}

/* args arrive in source order. */
static expr *with_args(tlm_session *s, expr *e, arg *args) {
    int d = 0, n = 0;
    for (arg *a = args; a; a = a->next, n++)
        if (a->value->depth > d) d = a->value->depth;
    e->args = args;
    e->nargs = n;
    e->depth = d + 1;
    return bounded(s, e);
}

expr *mk_call(tlm_session *s, tlm_loc loc, const char *name, arg *args) {
    expr *e = node(s, EX_CALL, loc);
    e->text = name;
    return with_args(s, e, args);
}

expr *mk_tuple(tlm_session *s, tlm_loc loc, expr *first, arg *rest) {
    arg *head = mk_arg(s, NULL, first->loc, first);
    head->next = rest;
    return with_args(s, node(s, EX_TUPLE, loc), head);
}

expr *mk_list(tlm_session *s, tlm_loc loc, arg *elems) { return with_args(s, node(s, EX_LIST, loc), elems); }

arg *mk_arg(tlm_session *s, const char *name, tlm_loc loc, expr *value) {
    arg *a = arena_alloc(&s->arena, sizeof *a);
    a->name = name;
    a->name_loc = loc;
    a->value = value;
    return a;
}

/* Lists are built by prepending (constant time, so a file with a million
 * settings parses in linear time) and put back in source order by the
 * construct that owns them. */
#define PREPEND(list, x)       \
    do {                       \
        if (!(x)) return list; \
        (x)->next = list;      \
        return x;              \
    } while (0)
#define REVERSE(type, list)            \
    do {                               \
        type *prev = NULL;             \
        while (list) {                 \
            type *next = (list)->next; \
            (list)->next = prev;       \
            prev = list;               \
            list = next;               \
        }                              \
        return prev;                   \
    } while (0)

arg *arg_prepend(arg *list, arg *a) { PREPEND(list, a); }
setting *setting_prepend(setting *list, setting *x) { PREPEND(list, x); }
sched_param *param_prepend(sched_param *list, sched_param *p) { PREPEND(list, p); }
item *item_prepend(item *list, item *it) { PREPEND(list, it); }
arg *arg_reverse(arg *list) { REVERSE(arg, list); }
setting *setting_reverse(setting *list) { REVERSE(setting, list); }
sched_param *param_reverse(sched_param *list) { REVERSE(sched_param, list); }
item *item_reverse(item *list) { REVERSE(item, list); }

setting *mk_setting(tlm_session *s, const char *name, tlm_loc loc, expr *value) {
    setting *x = arena_alloc(&s->arena, sizeof *x);
    x->name = name;
    x->name_loc = loc;
    x->value = value;
    return x;
}

sched_param *mk_sparam(tlm_session *s, const char *name, tlm_loc loc, expr *fallback) {
    sched_param *p = arena_alloc(&s->arena, sizeof *p);
    p->name = name;
    p->loc = loc;
    p->fallback = fallback;
    return p;
}

item *mk_item(tlm_session *s, item_kind kind, tlm_loc loc, const char *name, tlm_loc name_loc) {
    item *it = arena_alloc(&s->arena, sizeof *it);
    it->kind = kind;
    it->loc = loc;
    it->name = name;
    it->name_loc = name_loc;
    it->file = loc.file;
    return it;
}

item *mk_schedule(tlm_session *s, tlm_loc loc, const char *name, tlm_loc name_loc, sched_param *params, expr *body) {
    item *it = mk_item(s, IT_SCHEDULE, loc, name, name_loc);
    it->params = params = param_reverse(params);
    for (sched_param *p = params; p; p = p->next) it->nparams++;
    it->value = body;
    return it;
}

void finish_model(item *m, tlm_loc loc, const char *name, tlm_loc name_loc, const char *parent, tlm_loc parent_loc) {
    m->loc = loc;
    m->file = loc.file;
    m->name = name;
    m->name_loc = name_loc;
    m->parent = parent;
    m->parent_loc = parent_loc;
    m->settings = setting_reverse(m->settings);
}

void finish_study(item *st, tlm_loc loc, const char *name, tlm_loc name_loc) {
    finish_model(st, loc, name, name_loc, NULL, name_loc);
    st->grid = setting_reverse(st->grid);
}

void model_add_train(tlm_session *s, item *m, item *train) {
    if (m->train) {
        diag_error(&s->diag, train->name_loc, "a %s has at most one `train` block",
                   m->kind == IT_STUDY ? "study" : "model");
        diag_note(&s->diag, m->train->name_loc, "the first one is here");
        return;
    }
    m->train = train;
}

const char *join_path(tlm_session *s, const char *a, const char *b) {
    char *p = arena_printf(&s->arena, "%s.%s", a, b);
    return intern_cstr(&s->names, p);
}
