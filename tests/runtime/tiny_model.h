/* A tiny tapered Llama-style model assembled from the tlm_rt ops, the way a
 * model driver will: one parameter block, one gradient block, a parameter
 * table of named slices, activations saved per layer. Two layers with
 * different MLP widths, and different variants so that one forward/backward
 * exercises them all:
 *   layer 0: packed qkv projection, plain attention, SwiGLU MLP (F = 64)
 *   layer 1: separate q/k/v, gated attention (elementwise sigmoid gate),
 *            GELU MLP (F = 32)
 * Pre-norm RMSNorm, RoPE on q and k, final RMSNorm, LM head tied to the
 * embedding. Used by the PyTorch comparison (dump_ops) and the determinism
 * test. */
#ifndef TLM_TINY_MODEL_H
#define TLM_TINY_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tlm_rt/optim.h"

#define TINY_L 2
#define TINY_MAX_PARAMS 32

typedef struct tiny_param {
    char name[96];
    int ndim;
    int64_t shape[2];
    size_t offset, count;
    bool decay;
} tiny_param;

typedef struct tiny_layer {
    bool packed, gated, gelu;
    int F;
    /* parameters (slices of the block; NULL when the variant lacks them) */
    float *attn_norm, *wqkv, *wq, *wk, *wv, *wg, *wo, *mlp_norm;
    float *w_gate, *w_up, *w_down;
    /* saved activations */
    float *in, *xn, *rstd1, *qkv, *y, *lse, *gpre, *yg, *z, *zn, *rstd2;
    float *pre_gate, *pre_up;
} tiny_layer;

typedef struct tiny_model {
    int V, C, H, D, B, T;
    float eps;
    int nparams;
    tiny_param params[TINY_MAX_PARAMS];
    size_t nfloats;
    float *p, *g; /* parameter and gradient blocks */
    float *embed, *final_norm;
    tiny_layer layer[TINY_L];
    float *res[TINY_L + 1], *hn, *rstdf, *logits, *lse, *cos_t, *sin_t;
    /* backward scratch */
    float *dres, *dxn, *dqkv, *dproj, *dy2, *dgpre, *dpg, *dpu, *dzn, *dlogits, *dhn;
    float *arena;
} tiny_model;

/* Allocates and initialises (normal, std `init_std`; norms near 1), for
 * batch 2 of 16 tokens. */
void tiny_init(tiny_model *m, uint64_t seed, float init_std);
/* The same model for batch B of T tokens. */
void tiny_init_sized(tiny_model *m, uint64_t seed, float init_std, int B, int T);
void tiny_free(tiny_model *m);
/* ids, targets: [B,T]. Returns the mean loss. */
double tiny_forward(tiny_model *m, const int32_t *ids, const int32_t *targets);
/* Zeroes m->g, then fills it with d(mean loss)/d(params). */
void tiny_backward(tiny_model *m, const int32_t *ids, const int32_t *targets);
/* Spans for the optimiser: matrices decay, norms do not. */
int tiny_spans(const tiny_model *m, tlm_param_span *spans, int max);

#endif
