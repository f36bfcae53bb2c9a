#include "eval.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ast_build.h"
#include "eval_memo.h"
#include "vocabulary.h"
#include "xalloc.h"

struct frame {                     /* one schedule call */
    const item *sched;
    const expr **args;             /* by name: the caller's expressions ... */
    const frame **scopes;          /* ... and the frames to evaluate them in */
    const frame *caller;
    int64_t id;                    /* eval_memo_frame's: equal ids, equal bindings */
};

void eval_init(evaluator *ev, program *p, void *scope, setting_lookup lookup) {
    memset(ev, 0, sizeof *ev);
    ev->prog = p;
    ev->scope = scope;
    ev->lookup = lookup;
    ev->memo = eval_memo_new();
}

void eval_free(evaluator *ev) {
    symtab_free(&ev->busy_params);
    eval_memo_free(ev->memo);
    ev->memo = NULL;
}

int sched_param_index(const item *sched, const char *name) {
    int i = 0;
    for (const sched_param *p = sched ? sched->params : NULL; p; p = p->next, i++)
        if (p->name == name || strcmp(p->name, name) == 0) return i;
    return -1;
}

bool is_numeric_setting(const char *name) {
    const setting_spec *s = find_setting(model_settings, name);
    return s && (s->type == ST_INT || s->type == ST_REAL);
}

ref_kind classify_name(const program *p, const item *sched, const char *name) {
    if (sched && sched_param_index(sched, name) >= 0) return REF_SCHED_PARAM;
    if (strcmp(name, "l") == 0 || strcmp(name, "L") == 0 || strcmp(name, "t") == 0) return REF_LAYER_VAR;
    if (strcmp(name, "pi") == 0) return REF_PI;
    if (symtab_get(&p->params, name)) return REF_PARAM;
    if (is_numeric_setting(name)) return REF_SETTING;
    return REF_UNKNOWN;
}

bool builtin_arity(const char *name, int *min, int *max) {
    static const struct {
        const char *name;
        int min, max;
    } table[] = {
        {"abs", 1, 1},     {"ceil", 1, 1},
        {"clamp", 3, 3},   {"cos", 1, 1},
        {"exp", 1, 1},     {"floor", 1, 1},
        {"log", 1, 1},     {"max", 2, TLM_BUILTIN_ANY_ARGS},
        {"mean", 1, 1},    {"min", 2, TLM_BUILTIN_ANY_ARGS},
        {"pow", 2, 2},     {"round", 1, 1},
        {"sigmoid", 1, 1}, {"sin", 1, 1},
        {"sqrt", 1, 1},    {"tanh", 1, 1},
    };
    for (size_t i = 0; i < sizeof table / sizeof *table; i++) {
        if (strcmp(table[i].name, name) == 0) {
            *min = table[i].min;
            *max = table[i].max;
            return true;
        }
    }
    return false;
}

bool is_builtin_call_to(const char *name, int nargs) {
    int min, max;
    return builtin_arity(name, &min, &max) && nargs >= min && nargs <= max;
}

bool is_builtin_call(const expr *call) { return is_builtin_call_to(call->text, call->nargs); }

bool builtin_call_checked(diag_engine *d, const expr *call, int min, int max) {
    for (const arg *a = call->args; a; a = a->next) {
        if (a->name) {
            diag_error(d, a->name_loc, "builtin `%s` takes no named arguments", call->text);
            return false;
        }
    }
    if (call->nargs >= min && call->nargs <= max) return true;
    diag_error(d, call->loc, "`%s` takes %s%d argument%s, but %d %s given", call->text, min == max ? "" : "at least ",
               min, min == 1 ? "" : "s", call->nargs, call->nargs == 1 ? "was" : "were");
    return false;
}

const char *call_target(const program *p, const char *name) {
    int min, max;
    for (int hops = 0; hops < 64; hops++) {       /* a chain of params naming params; cycles stop here */
        if (symtab_get(&p->schedules, name) || builtin_arity(name, &min, &max)) return name;
        const item *param = symtab_get(&p->params, name);
        if (!param) return name;
        const expr *value = symtab_get(&p->param_overrides, name);
        if (!value) value = param->value;
        if (!value || value->kind != EX_NAME) return name;
        name = value->text;
    }
    return name;
}

static bool eval(evaluator *ev, const expr *e, const frame *f, double *out);

/* Error messages raised while widths are computed name the layer. */
static void fail(evaluator *ev, tlm_loc loc, const char *what) {
    if (ev->in_layer && ev->model)
        diag_error(&ev->prog->s->diag, loc, "%s (model `%s`, layer %lld of %lld)", what, ev->model, (long long)ev->l,
                   (long long)ev->L);
    else if (ev->in_layer)
        diag_error(&ev->prog->s->diag, loc, "%s (in layer %lld of %lld)", what, (long long)ev->l, (long long)ev->L);
    else diag_error(&ev->prog->s->diag, loc, "%s", what);
}

static bool eval_name(evaluator *ev, const expr *e, const frame *f, double *out) {
    diag_engine *d = &ev->prog->s->diag;
    const char *n = e->text;
    switch (classify_name(ev->prog, f ? f->sched : NULL, n)) {
    case REF_SCHED_PARAM: {
        int i = sched_param_index(f->sched, n);
        return eval(ev, f->args[i], f->scopes[i], out);
    }
    case REF_LAYER_VAR:
        if (!ev->in_layer) {
            diag_error(d, e->loc, "`%s` is only defined where widths are computed", n);
            diag_hint(d, "l (layer index), L (layers) and t = l / (L - 1) can be used in d_ff "
                         "and in the schedules it calls");
            return false;
        }
        *out = n[0] == 'l'   ? (double)ev->l
               : n[0] == 'L' ? (double)ev->L
               : ev->L > 1   ? (double)ev->l / (double)(ev->L - 1)
                             : 0.0;
        return true;
    case REF_PI: *out = M_PI; return true;
    case REF_PARAM: {
        item *param = symtab_get(&ev->prog->params, n);
        const expr *value = symtab_get(&ev->prog->param_overrides, n);
        if (!value) value = param->value;
        if (symtab_get(&ev->busy_params, n)) {
            diag_error(d, e->loc, "param `%s` is defined in terms of itself", n);
            diag_note(d, param->name_loc, "`%s` is defined here", n);
            return false;
        }
        symtab_set(&ev->busy_params, n, (void *)1);
        bool ok = eval(ev, value, NULL, out);
        symtab_set(&ev->busy_params, n, NULL);
        return ok;
    }
    case REF_SETTING: {
        bool found = false;
        if (ev->lookup && !ev->lookup(ev->scope, n, e->loc, out, &found)) return false;
        if (found) return true;
        diag_error(d, e->loc, "`%s` is used here but the model does not set it", n);
        return false;
    }
    case REF_UNKNOWN: break;
    }
    /* The resolver has named these where they are written; a param's value
     * or a -D value reaches here only when used as a number. */
    if (symtab_get(&ev->prog->schedules, n)) diag_error(d, e->loc, "expected a number, found the schedule `%s`", n);
    else if (symtab_get(&ev->prog->models, n)) diag_error(d, e->loc, "expected a number, found the model `%s`", n);
    else if (name_index(tlm_mixer_enum.names, n) >= 0 || name_index(tlm_mlp_enum.names, n) >= 0 ||
             name_index(symbol_values, n) >= 0)
        diag_error(d, e->loc, "expected a number, found `%s`", n);
    else diag_error(d, e->loc, "unknown name `%s`", n);
    return false;
}

/* mean(x): x evaluated at every layer of the model, averaged. */
static bool eval_mean(evaluator *ev, const expr *e, const frame *f, double *out) {
    if (!ev->in_layer) {
        diag_error(&ev->prog->s->diag, e->loc,
                   "`mean` averages over the layers, so it can only be "
                   "used where widths are computed");
        return false;
    }
    /* its value is the same at every layer: once per call and model
     * (eval_memo.h) */
    int64_t frame = f ? f->id : EVAL_FRAME_TOP;
    if (frame != EVAL_FRAME_UNKNOWN && eval_memo_get(ev->memo, e, frame, ev->L, out)) return true;
    int64_t saved = ev->l;
    double sum = 0;
    bool ok = true;
    for (ev->l = 0; ev->l < ev->L; ev->l++) {
        double v;
        if (!(ok = eval(ev, e->args->value, f, &v))) break;
        sum += v;
    }
    ev->l = saved;
    if (ok) {
        *out = sum / (double)ev->L;
        if (frame != EVAL_FRAME_UNKNOWN) eval_memo_put(ev->memo, e, frame, ev->L, *out);
    }
    return ok;
}

static bool eval_builtin(evaluator *ev, const expr *e, const char *n, const frame *f, double *out) {
    if (strcmp(n, "mean") == 0) return eval_mean(ev, e, f, out);
    double v[3];
    int i = 0;
    arg *a = e->args;
    if (strcmp(n, "min") == 0 || strcmp(n, "max") == 0) {
        bool is_min = n[1] == 'i';
        for (; a; a = a->next, i++) {
            double x;
            if (!eval(ev, a->value, f, &x)) return false;
            if (i == 0 || (is_min ? x < *out : x > *out)) *out = x;
        }
        return true;
    }
    for (; a && i < 3; a = a->next, i++)
        if (!eval(ev, a->value, f, &v[i])) return false;
    double x = v[0];
    if (strcmp(n, "log") == 0 && x <= 0) {
        fail(ev, e->loc, "log of a number that is not positive");
        return false;
    }
    if (strcmp(n, "sqrt") == 0 && x < 0) {
        fail(ev, e->loc, "sqrt of a negative number");
        return false;
    }
    if (strcmp(n, "abs") == 0) *out = fabs(x);
    else if (strcmp(n, "ceil") == 0) *out = ceil(x);
    else if (strcmp(n, "floor") == 0) *out = floor(x);
    else if (strcmp(n, "round") == 0) *out = round(x);
    else if (strcmp(n, "cos") == 0) *out = cos(x);
    else if (strcmp(n, "sin") == 0) *out = sin(x);
    else if (strcmp(n, "tanh") == 0) *out = tanh(x);
    else if (strcmp(n, "exp") == 0) *out = exp(x);
    else if (strcmp(n, "log") == 0) *out = log(x);
    else if (strcmp(n, "sqrt") == 0) *out = sqrt(x);
    else if (strcmp(n, "sigmoid") == 0) *out = 1.0 / (1.0 + exp(-x));
    else if (strcmp(n, "pow") == 0) *out = pow(x, v[1]);
    else if (strcmp(n, "clamp") == 0) *out = x < v[1] ? v[1] : x > v[2] ? v[2] : x;
    if (!isfinite(*out)) {
        fail(ev, e->loc, "the result is not a finite number");
        return false;
    }
    return true;
}

/* Binds arguments to parameters (positional, then named, then defaults) and
 * evaluates the body. The resolver has checked names and counts already. */
static bool eval_schedule(evaluator *ev, const item *sched, const expr *e, const frame *f, double *out) {
    int n = sched->nparams;
    if (n > TLM_MAX_SCHED_PARAMS) return false;      /* reported by the resolver */
    const expr *args[TLM_MAX_SCHED_PARAMS];
    const frame *scopes[TLM_MAX_SCHED_PARAMS];
    frame callee = {sched, args, scopes, f, EVAL_FRAME_UNKNOWN};
    int i = 0;
    for (const sched_param *p = sched->params; p; p = p->next, i++) {
        args[i] = p->fallback;       /* a default is evaluated in the callee */
        scopes[i] = &callee;
    }
    i = 0;
    for (arg *a = e->args; a; a = a->next) {
        int k = a->name ? sched_param_index(sched, a->name) : i++;
        if (k < 0 || k >= n) {
            diag_error(&ev->prog->s->diag, a->name_loc, "no parameter for this argument");
            return false;
        }
        args[k] = a->value;
        scopes[k] = f;
    }
    int64_t scope_ids[TLM_MAX_SCHED_PARAMS];
    for (int k = 0; k < n; k++) {
        if (!args[k]) {
            diag_error(&ev->prog->s->diag, e->loc, "missing argument in call to `%s`", sched->name);
            return false;
        }
        scope_ids[k] = scopes[k] == &callee ? EVAL_FRAME_SELF : scopes[k] ? scopes[k]->id : EVAL_FRAME_TOP;
    }
    callee.id = eval_memo_frame(ev->memo, sched, n, (const void *const *)args, scope_ids);
    return eval(ev, sched->value, &callee, out);
}

static bool eval_call(evaluator *ev, const expr *e, const frame *f, double *out) {
    diag_engine *d = &ev->prog->s->diag;
    const char *name = call_target(ev->prog, e->text);
    item *sched = symtab_get(&ev->prog->schedules, name);
    int min, max;
    bool builtin = builtin_arity(name, &min, &max);
    if (builtin && (!sched || is_builtin_call_to(name, e->nargs))) {
        /* The resolver checks the calls it sees; a -D value (-D r=mean())
         * or a param's value it leaves alone is checked here, so that no
         * builtin reads an argument that is not there. */
        return builtin_call_checked(d, e, min, max) && eval_builtin(ev, e, name, f, out);
    }
    if (sched) return eval_schedule(ev, sched, e, f, out);
    /* param opt = adamw(lr = 1e-3); used as a number, or a -D value. */
    if (name_index(value_functions, e->text) >= 0) diag_error(d, e->loc, "expected a number, found `%s(...)`", e->text);
    else diag_error(d, e->loc, "unknown function `%s`", e->text);
    return false;
}

static bool eval_binary(evaluator *ev, const expr *e, const frame *f, double *out) {
    double a, b;
    if (!eval(ev, e->a, f, &a)) return false;
    if (e->op == OP_AND && a == 0) {
        *out = 0;
        return true;
    }
    if (e->op == OP_OR && a != 0) {
        *out = 1;
        return true;
    }
    if (!eval(ev, e->b, f, &b)) return false;
    switch (e->op) {
    case '+': *out = a + b; break;
    case '-': *out = a - b; break;
    case '*': *out = a * b; break;
    case '/':
        if (b == 0) {
            fail(ev, e->loc, "division by zero");
            return false;
        }
        *out = a / b;
        break;
    case '%':
        if (b == 0) {
            fail(ev, e->loc, "remainder of a division by zero");
            return false;
        }
        *out = fmod(a, b);
        break;
    case '<': *out = a < b; break;
    case '>': *out = a > b; break;
    case OP_LE: *out = a <= b; break;
    case OP_GE: *out = a >= b; break;
    case OP_EQ: *out = a == b; break;
    case OP_NE: *out = a != b; break;
    case OP_AND: *out = b != 0; break;
    case OP_OR: *out = b != 0; break;
    }
    if (!isfinite(*out)) {
        fail(ev, e->loc, "the result is not a finite number");
        return false;
    }
    return true;
}

static const char *describe(const expr *e) {
    switch (e->kind) {
    case EX_STRING: return "a string";
    case EX_TUPLE: return "a tuple";
    case EX_LIST: return "a list";
    default: return "this";
    }
}

static bool eval(evaluator *ev, const expr *e, const frame *f, double *out) {
    diag_engine *d = &ev->prog->s->diag;
    /* The step budget is shared by the whole compilation, so many models
     * cannot add up to a hang either. */
    program *p = ev->prog;
    if (++p->eval_steps > p->max_eval_steps) {
        if (p->eval_steps == p->max_eval_steps + 1)
            diag_error(d, e->loc, "evaluation takes too long (more than %lld steps)", (long long)p->max_eval_steps);
        return false;
    }
    if (ev->depth >= TLM_MAX_EVAL_DEPTH) {
        diag_error(d, e->loc, "evaluation nested too deeply (the limit is %d)", TLM_MAX_EVAL_DEPTH);
        return false;
    }
    ev->depth++;
    bool ok = false;
    switch (e->kind) {
    case EX_NUMBER:
        *out = e->number;
        ok = true;
        break;
    case EX_NAME: ok = eval_name(ev, e, f, out); break;
    case EX_CALL: ok = eval_call(ev, e, f, out); break;
    case EX_BINARY: ok = eval_binary(ev, e, f, out); break;
    case EX_UNARY:
        ok = eval(ev, e->a, f, out);
        if (ok && e->op == '-') *out = -*out;
        if (ok && e->op == '!') *out = *out == 0;
        break;
    case EX_COND: {
        double c;
        ok = eval(ev, e->a, f, &c) && eval(ev, c != 0 ? e->b : e->c, f, out);
        break;
    }
    case EX_STRING:
    case EX_TUPLE:
    case EX_LIST: diag_error(d, e->loc, "expected a number, found %s", describe(e)); break;
    case EX_ERROR: break;
    }
    ev->depth--;
    return ok;
}

bool eval_number(evaluator *ev, const expr *e, double *out) { return eval(ev, e, NULL, out); }
