/* See tiny_model.h. */
#include "tiny_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tlm_rt/ops.h"
#include "tlm_rt/rng.h"

/* gradient slice matching a parameter slice */
#define GRAD(m, ptr) ((m)->g + ((ptr) - (m)->p))

/* Appends a parameter to the table; returns its index. */
static int add_param(tiny_model *m, const char *name, int64_t rows, int64_t cols, bool decay) {
    tiny_param *t = &m->params[m->nparams++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = cols ? 2 : 1;
    t->shape[0] = rows;
    t->shape[1] = cols;
    t->count = (size_t)rows * (size_t)(cols ? cols : 1);
    t->offset = m->nfloats;
    t->decay = decay;
    m->nfloats += t->count;
    return m->nparams - 1;
}

static float *carve(float **at, size_t n) {
    float *p = *at;
    *at += n;
    return p;
}

void tiny_init(tiny_model *m, uint64_t seed, float init_std) { tiny_init_sized(m, seed, init_std, 2, 16); }

void tiny_init_sized(tiny_model *m, uint64_t seed, float init_std, int B, int T) {
    memset(m, 0, sizeof *m);
    m->V = 64, m->C = 32, m->H = 4, m->D = 8, m->B = B, m->T = T;
    m->eps = 1e-5f;
    int C = m->C, V = m->V;
    static const int widths[TINY_L] = {64, 32}; /* tapered: wide, then narrow */

    /* 1. the parameter table; each named pointer is bound to its entry and
     * set once the block exists */
    struct {
        float **dst;
        int idx;
    } bind[TINY_MAX_PARAMS];
    int nbind = 0;
#define BIND(ptr, index) (bind[nbind].dst = &(ptr), bind[nbind++].idx = (index))
    char name[96];
    BIND(m->embed, add_param(m, "model.embed_tokens.weight", V, C, true));
    for (int l = 0; l < TINY_L; l++) {
        tiny_layer *L = &m->layer[l];
        L->packed = l == 0, L->gated = l == 1, L->gelu = l == 1;
        L->F = widths[l];
#define P(field, suffix, r, c, dec)                               \
    snprintf(name, sizeof name, "model.layers.%d.%s", l, suffix); \
    BIND(L->field, add_param(m, name, r, c, dec))
        P(attn_norm, "input_layernorm.weight", C, 0, false);
        if (L->packed) {
            P(wqkv, "self_attn.qkv_proj.weight", 3 * C, C, true);
        } else {
            P(wq, "self_attn.q_proj.weight", C, C, true);
            P(wk, "self_attn.k_proj.weight", C, C, true);
            P(wv, "self_attn.v_proj.weight", C, C, true);
        }
        if (L->gated) { P(wg, "self_attn.g_proj.weight", C, C, true); }
        P(wo, "self_attn.o_proj.weight", C, C, true);
        P(mlp_norm, "post_attention_layernorm.weight", C, 0, false);
        if (!L->gelu) { P(w_gate, "mlp.gate_proj.weight", L->F, C, true); }
        P(w_up, "mlp.up_proj.weight", L->F, C, true);
        P(w_down, "mlp.down_proj.weight", C, L->F, true);
#undef P
    }
    BIND(m->final_norm, add_param(m, "model.norm.weight", C, 0, false));

    /* 2. one block for parameters and one for gradients */
    m->p = calloc(m->nfloats, sizeof(float));
    m->g = calloc(m->nfloats, sizeof(float));
    for (int i = 0; i < nbind; i++) { *bind[i].dst = m->p + m->params[bind[i].idx].offset; }
#undef BIND
    tlm_rng rng;
    tlm_rng_seed(&rng, seed);
    for (int i = 0; i < m->nparams; i++) {
        tiny_param *t = &m->params[i];
        float *x = m->p + t->offset;
        if (t->ndim == 1) tlm_rng_fill_uniform(&rng, x, t->count, 0.8f, 1.2f);
        else tlm_rng_fill_normal(&rng, x, t->count, 0.0f, init_std);
    }

    /* 3. one arena for activations and backward scratch */
    int N = m->B * m->T, Fmax = widths[0] > widths[1] ? widths[0] : widths[1];
    size_t per_layer = (size_t)N * C * 8 + 2 * (size_t)N + 3 * (size_t)N * C + (size_t)N * m->H + 2 * (size_t)N * Fmax;
    size_t total = TINY_L * per_layer + (size_t)(TINY_L + 1) * N * C + (size_t)N * C + 2 * (size_t)N + (size_t)N * V +
                   (size_t)m->T * m->D + /* activations */
                   (size_t)N * C * 9 + 2 * (size_t)N * Fmax + (size_t)N * V; /* scratch */
    m->arena = calloc(total, sizeof(float));
    float *at = m->arena;
    for (int l = 0; l <= TINY_L; l++) m->res[l] = carve(&at, (size_t)N * C);
    for (int l = 0; l < TINY_L; l++) {
        tiny_layer *L = &m->layer[l];
        L->in = m->res[l];
        L->xn = carve(&at, (size_t)N * C);
        L->rstd1 = carve(&at, N);
        L->qkv = carve(&at, 3 * (size_t)N * C);
        L->y = carve(&at, (size_t)N * C);
        L->lse = carve(&at, (size_t)N * m->H);
        L->gpre = carve(&at, (size_t)N * C);
        L->yg = carve(&at, (size_t)N * C);
        L->z = carve(&at, (size_t)N * C);
        L->zn = carve(&at, (size_t)N * C);
        L->rstd2 = carve(&at, N);
        L->pre_gate = carve(&at, (size_t)N * Fmax);
        L->pre_up = carve(&at, (size_t)N * Fmax);
    }
    m->hn = carve(&at, (size_t)N * C);
    m->rstdf = carve(&at, N);
    m->logits = carve(&at, (size_t)N * V);
    m->lse = carve(&at, N);
    m->cos_t = carve(&at, (size_t)m->T * m->D / 2);
    m->sin_t = carve(&at, (size_t)m->T * m->D / 2);
    m->dres = carve(&at, (size_t)N * C);
    m->dxn = carve(&at, (size_t)N * C);
    m->dqkv = carve(&at, 3 * (size_t)N * C);
    m->dproj = carve(&at, (size_t)N * C);
    m->dy2 = carve(&at, (size_t)N * C);
    m->dgpre = carve(&at, (size_t)N * C);
    m->dzn = carve(&at, (size_t)N * C);
    m->dpg = carve(&at, (size_t)N * Fmax);
    m->dpu = carve(&at, (size_t)N * Fmax);
    m->dlogits = carve(&at, (size_t)N * V);
    m->dhn = carve(&at, (size_t)N * C);
    if ((size_t)(at - m->arena) > total) {
        fprintf(stderr, "tiny_model: arena too small\n");
        abort();
    }
    tlm_rope_init(m->cos_t, m->sin_t, m->T, m->D, 10000.0);
}

void tiny_free(tiny_model *m) {
    free(m->p);
    free(m->g);
    free(m->arena);
}

/* q, k, v pointers and token stride inside a layer's qkv buffer: packed
 * [N, 3C] rows (q | k | v), or three [N, C] tensors one after another */
static int qkv_view(const tiny_model *m, const tiny_layer *L, float *buf, float **q, float **k, float **v) {
    int C = m->C;
    size_t NC = (size_t)m->B * m->T * C;
    if (L->packed) {
        *q = buf, *k = buf + C, *v = buf + 2 * C;
        return 3 * C;
    }
    *q = buf, *k = buf + NC, *v = buf + 2 * NC;
    return C;
}

double tiny_forward(tiny_model *m, const int32_t *ids, const int32_t *targets) {
    int B = m->B, T = m->T, C = m->C, H = m->H, D = m->D, N = B * T;
    size_t NC = (size_t)N * C;
    tlm_embedding_forward(m->res[0], ids, m->embed, N, C);
    for (int l = 0; l < TINY_L; l++) {
        tiny_layer *L = &m->layer[l];
        /* z = in + Wo attn(rope(q), rope(k), v), q k v from norm(in) */
        tlm_rmsnorm_forward(L->xn, L->rstd1, L->in, L->attn_norm, N, C, m->eps);
        float *q, *k, *v;
        int stride = qkv_view(m, L, L->qkv, &q, &k, &v);
        if (L->packed) {
            tlm_linear_forward(L->qkv, L->xn, L->wqkv, N, C, 3 * C, false);
        } else {
            tlm_linear_forward(q, L->xn, L->wq, N, C, C, false);
            tlm_linear_forward(k, L->xn, L->wk, N, C, C, false);
            tlm_linear_forward(v, L->xn, L->wv, N, C, C, false);
        }
        tlm_rope_forward(q, q, m->cos_t, m->sin_t, B, T, H, D, stride);
        tlm_rope_forward(k, k, m->cos_t, m->sin_t, B, T, H, D, stride);
        tlm_attention_forward(L->y, L->lse, q, k, v, B, T, H, D, stride);
        const float *proj_in = L->y;
        if (L->gated) {
            tlm_linear_forward(L->gpre, L->xn, L->wg, N, C, C, false);
            tlm_sigmoid_gate_forward(L->yg, L->y, L->gpre, N * C, 1);
            proj_in = L->yg;
        }
        memcpy(L->z, L->in, NC * sizeof(float));
        tlm_linear_forward(L->z, proj_in, L->wo, N, C, C, true);
        /* out = z + mlp(norm(z)) */
        tlm_rmsnorm_forward(L->zn, L->rstd2, L->z, L->mlp_norm, N, C, m->eps);
        float *out = m->res[l + 1];
        memcpy(out, L->z, NC * sizeof(float));
        if (L->gelu) tlm_mlp_gelu_forward(C, L->F, 0, N, L->zn, L->w_up, L->w_down, L->pre_up, out);
        else tlm_mlp_swiglu_forward(C, L->F, 0, N, L->zn, L->w_gate, L->w_up, L->w_down, L->pre_gate, L->pre_up, out);
    }
    tlm_rmsnorm_forward(m->hn, m->rstdf, m->res[TINY_L], m->final_norm, N, C, m->eps);
    tlm_linear_forward(m->logits, m->hn, m->embed, N, C, m->V, false);
    return tlm_crossentropy_forward(NULL, m->lse, m->logits, targets, N, m->V);
}

void tiny_backward(tiny_model *m, const int32_t *ids, const int32_t *targets) {
    int B = m->B, T = m->T, C = m->C, H = m->H, D = m->D, N = B * T;
    size_t NC = (size_t)N * C;
    memset(m->g, 0, m->nfloats * sizeof(float));
    tlm_crossentropy_backward(m->dlogits, m->logits, m->lse, targets, N, m->V, 1.0f);
    /* tied head: the embedding's gradient collects here and at the bottom */
    tlm_linear_backward(m->dhn, GRAD(m, m->embed), m->dlogits, m->hn, m->embed, N, C, m->V, false);
    memset(m->dres, 0, NC * sizeof(float));
    tlm_rmsnorm_backward(m->dres, GRAD(m, m->final_norm), m->dhn, m->res[TINY_L], m->final_norm, m->rstdf, N, C);
    for (int l = TINY_L - 1; l >= 0; l--) {
        tiny_layer *L = &m->layer[l];
        /* dres = d out. MLP branch: d zn, then dres += norm backward -> d z */
        if (L->gelu)
            tlm_mlp_gelu_backward(C, L->F, N, L->zn, L->w_up, L->w_down, L->pre_up, m->dres, m->dpu, m->dzn,
                                  GRAD(m, L->w_up), GRAD(m, L->w_down));
        else
            tlm_mlp_swiglu_backward(C, L->F, N, L->zn, L->w_gate, L->w_up, L->w_down, L->pre_gate, L->pre_up, m->dres,
                                    m->dpg, m->dpu, m->dzn, GRAD(m, L->w_gate), GRAD(m, L->w_up), GRAD(m, L->w_down));
        tlm_rmsnorm_backward(m->dres, GRAD(m, L->mlp_norm), m->dzn, L->z, L->mlp_norm, L->rstd2, N, C);
        /* attention branch: dres = d z */
        const float *proj_in = L->gated ? L->yg : L->y;
        tlm_linear_backward(m->dproj, GRAD(m, L->wo), m->dres, proj_in, L->wo, N, C, C, false);
        const float *dy = m->dproj;
        if (L->gated) {
            tlm_sigmoid_gate_backward(m->dy2, m->dgpre, m->dproj, L->y, L->gpre, N * C, 1);
            tlm_linear_backward(m->dxn, GRAD(m, L->wg), m->dgpre, L->xn, L->wg, N, C, C, false);
            dy = m->dy2;
        }
        float *q, *k, *v, *dq, *dk, *dv;
        int stride = qkv_view(m, L, L->qkv, &q, &k, &v);
        qkv_view(m, L, m->dqkv, &dq, &dk, &dv);
        tlm_attention_backward(dq, dk, dv, dy, L->y, L->lse, q, k, v, B, T, H, D, stride);
        tlm_rope_backward(dq, dq, m->cos_t, m->sin_t, B, T, H, D, stride);
        tlm_rope_backward(dk, dk, m->cos_t, m->sin_t, B, T, H, D, stride);
        /* xn fans out to q, k, v (and the gate): accumulate into dxn */
        bool acc = L->gated;
        if (L->packed) {
            tlm_linear_backward(m->dxn, GRAD(m, L->wqkv), m->dqkv, L->xn, L->wqkv, N, C, 3 * C, acc);
        } else {
            tlm_linear_backward(m->dxn, GRAD(m, L->wq), dq, L->xn, L->wq, N, C, C, acc);
            tlm_linear_backward(m->dxn, GRAD(m, L->wk), dk, L->xn, L->wk, N, C, C, true);
            tlm_linear_backward(m->dxn, GRAD(m, L->wv), dv, L->xn, L->wv, N, C, C, true);
        }
        tlm_rmsnorm_backward(m->dres, GRAD(m, L->attn_norm), m->dxn, L->in, L->attn_norm, L->rstd1, N, C);
    }
    tlm_embedding_backward(GRAD(m, m->embed), m->dres, ids, N, C);
}

int tiny_spans(const tiny_model *m, tlm_param_span *spans, int max) {
    int n = 0;
    for (int i = 0; i < m->nparams && n < max; i++) {
        spans[n++] = (tlm_param_span){m->params[i].offset, m->params[i].count, m->params[i].decay};
    }
    return n;
}
