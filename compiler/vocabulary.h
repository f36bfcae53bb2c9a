/* The vocabulary of the language in one place: keywords, model settings
 * (with their types and ranges), builtins, and views of the tables kept
 * elsewhere: mixers and MLP kinds (abi/tlm_enums.h), training settings
 * (abi/tlm_train_settings.h, whose header says what adding one touches). The
 * checker, the --help text, `tlmc --print-keywords` and hence the editor
 * grammars all read these tables. */
#ifndef TLM_VOCABULARY_H
#define TLM_VOCABULARY_H

#include <stdbool.h>

#include "tlm_enums.h"

typedef enum {
    ST_INT,          /* a whole number in [lo, hi] */
    ST_REAL,         /* a number in (lo, hi] or [lo, hi] */
    ST_CHOICE,       /* one of `choices` */
    ST_BOOL,         /* true | false */
    ST_WIDTH,        /* d_ff: a number per layer */
    ST_BUDGET,       /* uniform(W) | none */
    ST_INT_LIST,     /* [1, 4] */
    ST_OPTIMIZER,    /* adamw(...) | sgd(...) */
    ST_LR_SCHEDULE,  /* cosine(...) | linear(...) | constant(...) */
    ST_STUDY,        /* a study's setting: read by study.c */
    ST_PATH,         /* "tok.json": a path relative to the file that sets it */
} setting_type;

enum { ANY_MIXER = -1 };

typedef struct setting_spec {
    const char *name;
    setting_type type;
    double lo, hi;                 /* ST_INT, ST_REAL, ST_INT_LIST elements */
    bool lo_open;                  /* ST_REAL: lo itself is not allowed */
    const char *const *choices;    /* ST_CHOICE, NULL-terminated */
    int mixer;                     /* the only mixer it applies to (tlm_mixer); ANY_MIXER: every one */
    bool required;
    const char *help;
} setting_spec;

extern const setting_spec model_settings[];
extern const setting_spec train_settings[];  /* the train { } names: a view of tlm_train_settings.h */
extern const setting_spec study_settings[];  /* a study's settings (compiler/study.c reads them) */
extern const char *const keywords[];
extern const char *const symbol_values[];   /* true false none elementwise headwise */
extern const char *const value_functions[]; /* uniform adamw sgd constant cosine linear */
extern const char *const builtin_names[];

const setting_spec *find_setting(const setting_spec *table, const char *name);
/* NULL-terminated list of the names in a settings table (static storage). */
const char *const *setting_names(const setting_spec *table);
int name_index(const char *const *names, const char *name);

#endif
