/* Parameter and FLOP counts of a checked model, per layer and in total, and
 * of its uniform baseline. Conventions (docs/language.md, "Costs"):
 * forward FLOPs per token = 2 × every matrix weight used per token (embedding
 * lookups are free), plus attention's scores and weighted sum, 4 × d_attn ×
 * the mean causal context (T + 1) / 2; training ≈ 3 × forward. */
#ifndef TLM_COST_H
#define TLM_COST_H

#include <stdint.h>
#include "checked_model.h"

typedef struct layer_cost {
    int64_t mlp_params, mixer_params, norm_params;
    double mlp_flops, mixer_flops;     /* forward, per token */
} layer_cost;

typedef struct model_cost {
    int64_t embed_params, head_params, final_norm_params;
    int64_t mlp_params, mixer_params, norm_params, total_params;
    double mlp_flops, total_flops;     /* forward, per token */
} model_cost;

/* MLP weights of one layer at width w (all CMS levels for hope_attention). */
int64_t mlp_params_at(const checked_model *m, int64_t w);
layer_cost cost_of_layer(const checked_model *m, int64_t width);
/* widths: one per layer (the model's, or the baseline's). */
model_cost cost_of_model(const checked_model *m, const int64_t *widths);

#endif
