#include "cost.h"

int64_t mlp_params_at(const checked_model *m, int64_t w) {
    int64_t per_level = (m->mlp == TLM_MLP_SWIGLU ? 3 : 2) * m->d_model * w;
    return per_level * (m->mixer == TLM_MIXER_HOPE_ATTENTION ? m->ncms : 1);
}

layer_cost cost_of_layer(const checked_model *m, int64_t width) {
    layer_cost c = {0};
    int64_t d = m->d_model, h = m->heads, a = m->heads * m->head_dim;
    double mean_ctx = ((double)m->context + 1) / 2;
    c.mlp_params = mlp_params_at(m, width);
    c.mlp_flops = 2.0 * (double)c.mlp_params;
    c.norm_params = 2 * d;
    int64_t matrices = 0;
    double extra = 0;                        /* FLOPs beyond the weight matrices */
    switch (m->mixer) {
    case TLM_MIXER_ATTENTION:
        matrices = 4 * d * a;                /* q, k, v, o */
        extra = 4.0 * (double)a * mean_ctx;
        break;
    case TLM_MIXER_GATED_ATTENTION:
        matrices = 4 * d * a + d * (m->gate == TLM_GATE_HEADWISE ? h : a);
        extra = 4.0 * (double)a * mean_ctx;
        break;
    case TLM_MIXER_TITANS:
        /* q, k, v, output gate, o; per-head theta, eta, alpha; an output
         * RMSNorm weight of size d_attn. */
        matrices = 5 * d * a + 3 * d * h;
        c.mixer_params = a;
        /* Per token and head: M k, the gradient's outer product, the
         * momentum and memory updates and M q, about 12 d_h^2 FLOPs. */
        extra = 12.0 * (double)h * (double)m->head_dim * (double)m->head_dim;
        break;
    case TLM_MIXER_HOPE_ATTENTION:
        matrices = 4 * d * a;
        extra = 4.0 * (double)a * mean_ctx;
        c.norm_params = d + (int64_t)m->ncms * d;    /* one norm per CMS level */
        break;
    }
    c.mixer_params += matrices;
    c.mixer_flops = 2.0 * (double)matrices + extra;
    return c;
}

model_cost cost_of_model(const checked_model *m, const int64_t *widths) {
    model_cost t = {0};
    t.embed_params = m->vocab * m->d_model;
    t.head_params = m->tie_embeddings ? 0 : m->vocab * m->d_model;
    t.final_norm_params = m->d_model;
    double flops = 2.0 * (double)m->vocab * (double)m->d_model;   /* the LM head */
    for (int64_t l = 0; l < m->layers; l++) {
        layer_cost c = cost_of_layer(m, widths[l]);
        t.mlp_params += c.mlp_params;
        t.mixer_params += c.mixer_params;
        t.norm_params += c.norm_params;
        t.mlp_flops += c.mlp_flops;
        flops += c.mlp_flops + c.mixer_flops;
    }
    t.total_params =
        t.embed_params + t.head_params + t.final_norm_params + t.mlp_params + t.mixer_params + t.norm_params;
    t.total_flops = flops;
    return t;
}
