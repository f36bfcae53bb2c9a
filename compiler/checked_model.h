/* A checked model: every setting evaluated, defaulted and validated, the
 * per-layer MLP widths rounded to the quantum with the budget met exactly.
 * This is what the back end (IR, code generation, model.so) consumes. */
#ifndef TLM_CHECKED_MODEL_H
#define TLM_CHECKED_MODEL_H

#include <stdbool.h>
#include <stdint.h>
#include "source.h"
#include "tlm_abi.h"
#include "tlm_enums.h"

enum { TLM_MAX_CMS_LEVELS = 8 };

typedef struct checked_model {
    const char *name;
    const char *parent;            /* NULL if none */
    tlm_loc loc;                   /* the model's name */

    int64_t vocab, context, d_model, layers, heads, head_dim, quantum;
    tlm_mixer mixer;
    tlm_mlp mlp;
    tlm_gate gate;                /* gated_attention */
    int64_t chunk;                 /* titans */
    double inner_lr;               /* titans */
    int ncms;                      /* hope_attention: levels */
    int64_t cms[TLM_MAX_CMS_LEVELS];
    bool tie_embeddings;
    double norm_eps, rope_base;
    bool warn_nonmonotone;

    const char *tokenizer;         /* `tokenizer = "..."`: the absolute path, or NULL */
    uint8_t tokenizer_hash[32];    /* its identity (model.so records both) */

    bool has_budget;
    int64_t budget_width;          /* uniform(W) */

    double *raw_widths;            /* d_ff evaluated per layer, before rounding */
    int64_t *widths;               /* the widths the model is built with */

    /* The training defaults: every field set, the table's derived defaults
     * (context, min_lr) resolved, as tlmc's checks and reports read them.
     * model.so stores them so, except a min_lr the model leaves to its
     * default (min_lr_default), which it stores as -1 for tlm-run to resolve
     * after its flags (tlm_train_defaults). */
    tlm_abi_train train;
    bool min_lr_default;
} checked_model;

#endif
