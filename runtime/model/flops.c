#include "flops.h"

double tlm_train_flops_per_token(const tlm_so *so, int64_t T) {
    const tlm_abi_config *c = so->config;
    double n = 0;
    for (uint32_t i = 0; i < so->header->nparams; i++) {
        const tlm_abi_param *p = &so->params[i];
        if (p->ndim != 2) continue;
        if (p->role == TLM_P_EMBED) {
            if (c->tie_embeddings) n += (double)p->count; /* the head */
            continue;
        }
        n += (double)p->count;
    }
    double per_layer = c->mixer == TLM_MIXER_TITANS
                           ? 24.0 * (double)c->heads * (double)c->head_dim * (double)c->head_dim
                           : 12.0 * (double)(c->heads * c->head_dim) * (double)T;
    return 6.0 * n + (double)c->layers * per_layer;
}
