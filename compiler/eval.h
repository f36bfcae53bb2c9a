/* Evaluation of numeric expressions: arithmetic, builtins, params, model
 * settings, the layer variables l, L, t, and schedule calls. Schedule
 * arguments are passed by name (unevaluated, with the caller's scope), so
 * `mean(s)` inside a schedule can evaluate its argument at every layer; that
 * is how normalize() is written in the standard library. Evaluation is
 * bounded in depth and in steps, so no input can hang or overflow the stack. */
#ifndef TLM_EVAL_H
#define TLM_EVAL_H

#include <stdbool.h>
#include <stdint.h>
#include "program.h"

typedef struct frame frame;

/* Asks the model being checked for a numeric setting (d_model, layers, ...).
 * Returns false after reporting an error; sets *found = false if the model
 * has no such setting. */
typedef bool (*setting_lookup)(void *scope, const char *name, tlm_loc use, double *out, bool *found);

typedef struct evaluator {
    program *prog;
    void *scope;
    setting_lookup lookup;
    bool in_layer;           /* evaluating d_ff for one layer */
    int64_t l, L;
    const char *model;       /* the model whose d_ff it is, named in errors */
    int depth;
    symtab busy_params;      /* params being evaluated: a reference back is a cycle */
    struct eval_memo *memo;  /* mean(x) per call (eval_memo.h): its value does not depend on the layer */
} evaluator;

enum { TLM_MAX_EVAL_DEPTH = 3000, TLM_MAX_SCHED_PARAMS = 64 };

void eval_init(evaluator *ev, program *p, void *scope, setting_lookup lookup);
void eval_free(evaluator *ev);
/* Evaluates e at top level (not inside a schedule). Reports and returns false
 * on error. */
bool eval_number(evaluator *ev, const expr *e, double *out);

/* What a name in an expression refers to, in the order names are looked up. */
typedef enum { REF_SCHED_PARAM, REF_LAYER_VAR, REF_PI, REF_PARAM, REF_SETTING, REF_UNKNOWN } ref_kind;
ref_kind classify_name(const program *p, const item *sched, const char *name);
/* The index of a schedule parameter, or -1. */
int sched_param_index(const item *sched, const char *name);
/* Arity of a builtin: min and max argument counts; false if not a builtin.
 * A max of TLM_BUILTIN_ANY_ARGS means any number (min, max). */
bool builtin_arity(const char *name, int *min, int *max);
enum { TLM_BUILTIN_ANY_ARGS = 1000 };
/* A call goes to the builtin of that name when its argument count fits the
 * builtin (sigmoid(x)), else to the schedule (sigmoid(a, b, k)). */
bool is_builtin_call(const expr *call);
bool is_builtin_call_to(const char *name, int nargs);
/* Whether a call of a builtin with arity min..max has no named arguments
 * and a count in range; else false after one error. The resolver asks for
 * the calls it sees, the evaluator for those it does not (a -D value). */
bool builtin_call_checked(diag_engine *d, const expr *call, int min, int max);
/* The function a call names: its own name, or, when the name is a param that
 * holds a schedule's (or builtin's) name, that name, so `param shape =
 * cosine;` makes `shape(1.5, 0.5)` call cosine, and `-D shape=linear` or a
 * study's grid can swap the schedule. */
const char *call_target(const program *p, const char *name);
/* Whether a setting can be read as a number inside expressions. */
bool is_numeric_setting(const char *name);

#endif
