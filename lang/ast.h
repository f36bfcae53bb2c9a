/* The syntax tree of a .tlm file, as the parser builds it. Names are interned;
 * everything is allocated in the session arena. Lists are singly linked in
 * source order. */
#ifndef TLM_AST_H
#define TLM_AST_H

#include <stdbool.h>
#include "source.h"

typedef enum {
    EX_NUMBER,      /* 1_000, 3e-4 */
    EX_STRING,      /* "data/austen" */
    EX_NAME,        /* ratio, attention, l */
    EX_UNARY,       /* -x, !x */
    EX_BINARY,      /* x + y, x < y, x && y */
    EX_COND,        /* c ? x : y */
    EX_CALL,        /* cosine(a, 2 - a), adamw(lr = 3e-3) */
    EX_TUPLE,       /* (0.9, 0.95) */
    EX_LIST,        /* [1, 4] */
    EX_ERROR,       /* stands in for something already diagnosed */
} expr_kind;

/* Operators are their token characters; two-character ones get codes. */
enum { OP_LE = 256, OP_GE, OP_EQ, OP_NE, OP_AND, OP_OR };

typedef struct expr expr;
typedef struct arg arg;

struct arg {                 /* a call argument or list element */
    const char *name;        /* named argument `lr = 3e-3`, else NULL */
    tlm_loc name_loc;
    expr *value;
    arg *next;
};

struct expr {
    expr_kind kind;
    tlm_loc loc;
    int depth;               /* height of this subtree, bounded by the parser */
    int op;                  /* EX_UNARY, EX_BINARY */
    double number;           /* EX_NUMBER */
    const char *text;        /* EX_STRING (decoded), EX_NAME / EX_CALL (interned) */
    expr *a, *b, *c;         /* operands; EX_COND: a ? b : c */
    arg *args;               /* EX_CALL, EX_TUPLE, EX_LIST */
    int nargs;
};

typedef struct setting setting;
struct setting {             /* name = value; */
    const char *name;
    tlm_loc name_loc;
    expr *value;
    setting *next;
};

typedef struct sched_param sched_param;
struct sched_param {         /* a schedule's parameter, optionally with a default */
    const char *name;
    tlm_loc loc;
    expr *fallback;          /* `k = 10`, else NULL */
    sched_param *next;
};

typedef enum { IT_USE, IT_PARAM, IT_SCHEDULE, IT_MODEL, IT_TRAIN, IT_STUDY } item_kind;

typedef struct item item;
struct item {
    item_kind kind;
    tlm_loc loc;             /* the whole declaration */
    const char *name;        /* use: "std.schedules"; param/schedule/model: its name */
    tlm_loc name_loc;
    int file;
    expr *value;             /* param value, schedule body */
    sched_param *params;     /* schedule */
    int nparams;
    const char *parent;      /* model b : a */
    tlm_loc parent_loc;
    setting *settings;       /* model, train, study */
    setting *grid;           /* study: the axes `ratio in [1.25, 1.5];`, in order */
    item *train;             /* a train block inside a model or a study */
    item *next;
};

#endif
