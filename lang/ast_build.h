/* Constructors the parser's actions call. They bound the depth of expression
 * trees, so every later recursive walk has bounded stack use whatever the input. */
#ifndef TLM_AST_BUILD_H
#define TLM_AST_BUILD_H

#include "ast.h"
#include "session.h"

enum { TLM_MAX_EXPR_DEPTH = 1000 };

expr *mk_number(tlm_session *s, tlm_loc loc, double v);
expr *mk_string(tlm_session *s, tlm_loc loc, const char *text);
expr *mk_name(tlm_session *s, tlm_loc loc, const char *name);
expr *mk_unary(tlm_session *s, tlm_loc loc, int op, expr *a);
expr *mk_binary(tlm_session *s, tlm_loc loc, int op, expr *a, expr *b);
expr *mk_cond(tlm_session *s, tlm_loc loc, expr *c, expr *a, expr *b);
expr *mk_call(tlm_session *s, tlm_loc loc, const char *name, arg *args);
expr *mk_tuple(tlm_session *s, tlm_loc loc, expr *first, arg *rest);
expr *mk_list(tlm_session *s, tlm_loc loc, arg *elems);
arg *mk_arg(tlm_session *s, const char *name, tlm_loc loc, expr *value);
/* Parser lists are built backwards in constant time per element, then
 * reversed once by the construct that owns them. */
arg *arg_prepend(arg *list, arg *a);
arg *arg_reverse(arg *list);

setting *mk_setting(tlm_session *s, const char *name, tlm_loc loc, expr *value);
setting *setting_prepend(setting *list, setting *x);
setting *setting_reverse(setting *list);
sched_param *mk_sparam(tlm_session *s, const char *name, tlm_loc loc, expr *fallback);
sched_param *param_prepend(sched_param *list, sched_param *p);
sched_param *param_reverse(sched_param *list);

item *mk_item(tlm_session *s, item_kind kind, tlm_loc loc, const char *name, tlm_loc name_loc);
item *mk_schedule(tlm_session *s, tlm_loc loc, const char *name, tlm_loc name_loc, sched_param *params, expr *body);
void finish_model(item *m, tlm_loc loc, const char *name, tlm_loc name_loc, const char *parent, tlm_loc parent_loc);
void finish_study(item *st, tlm_loc loc, const char *name, tlm_loc name_loc);
void model_add_train(tlm_session *s, item *m, item *train);
item *item_prepend(item *list, item *it);
item *item_reverse(item *list);
const char *join_path(tlm_session *s, const char *a, const char *b);

#endif
