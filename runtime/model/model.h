/* A model in memory: the parameter block, its gradients, the activation
 * arena laid out by the memory plan (model.c), and the executor that runs
 * the IR's ops (forward, then backward) with the runtime's ops and the
 * model's generated MLP kernels (executor.c). */
#ifndef TLM_RUNTIME_MODEL_H
#define TLM_RUNTIME_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "device.h"
#include "model_so.h"
#include "precision.h"

typedef struct tlm_model {
    const tlm_so *so;
    int64_t B, T;              /* the largest batch and sequence the arena holds */
    bool training;             /* gradients and the backward ops */
    int nforward, nops;        /* ops [0, nforward) are the forward pass */
    float *params, *grads;     /* param_floats each; grads NULL for inference */
    int64_t param_floats;
    uint8_t *arena;
    int64_t arena_bytes;
    int64_t *offsets;          /* byte offset of each buffer in the arena, -1: unused */
    float *rope_cos, *rope_sin;/* [T, head_dim / 2] */
    int32_t *tokens, *targets; /* [B*T] of the last forward */
    int64_t run_B, run_T;      /* sizes of the last forward */
    int threads;               /* the OpenMP threads the ops split into */
    float *titans_scratch;     /* titans' backward: per-thread scratch (NULL otherwise) */
    /* On a device (gpu_model.h): the arena, gradients and working copy of
     * the parameters live there, and arena is NULL here. */
    struct tlm_gpu_model *gpu;
    /* Sampling's KV cache (tlm_model_cache_open): per layer the [T, 3A]
     * rows of qkv its attention read, RoPE applied; on a device it lives
     * there (gpu_model.h) and this stays NULL. kv_mode says how the next
     * forward uses it; kv_pos is the decoded token's position. */
    float *kv_cache, *kv_scratch;
    int kv_mode;               /* tlm_kv_mode */
    int64_t kv_pos;
    /* NULL, or where each op's time goes (profile.h: train --profile) */
    struct tlm_profile *profile;
    /* NULL, or told during each tlm_model_backward that the gradient
     * floats [lo, hi) are final (no later op of this backward writes them):
     * every float of the block exactly once, in decreasing offsets, the
     * head's end first and offset 0 last (the data-parallel chain starts a
     * bucket's transfer there; runtime/dist). On a device it is told when
     * the ops are queued, not run: the caller orders its own device work
     * after them (the trainer records an event on the compute stream). */
    void (*grads_final)(void *ctx, int64_t lo, int64_t hi);
    void *grads_final_ctx;
} tlm_model;

/* B, T: the sizes to plan for (later calls may use smaller ones).
 * extra_bytes: what the caller allocates beside the model while it lives
 * (the optimizer's state, the batch buffers), counted in the same check
 * against what the process may still take, so a run that cannot fit is
 * refused before anything is allocated. */
bool tlm_model_create(tlm_model *m, const tlm_so *so, int64_t B, int64_t T, bool training, int64_t extra_bytes,
                      tlm_err *err);
/* The same on a device (dev NULL: the CPU) in a precision (bf16 only on a
 * device): the activations live on the device only; the host keeps the
 * parameters' master copy. */
bool tlm_model_create_on(tlm_model *m, const tlm_so *so, tlm_device *dev, tlm_precision precision, int64_t B, int64_t T,
                         bool training, int64_t extra_bytes, tlm_err *err);
void tlm_model_destroy(tlm_model *m);

/* ---- sampling with a KV cache (model.c; the executors read kv_mode) ----
 * An inference model of batch 1 keeps each layer's qkv rows, so the next
 * token's forward runs that token alone: embedding to logits for N = 1,
 * RoPE at its position, attention over the cached keys and values. Only
 * the attention mixers (Transformer, Gated Attention, Hope-attention) keep
 * keys and values; Titans keeps its memory's state (below), walked token by
 * token at the prefill. */
typedef enum tlm_kv_mode { TLM_KV_OFF, TLM_KV_FILL, TLM_KV_DECODE } tlm_kv_mode;
/* Titans keeps its memory instead: per layer and head M, S and M0 (the
 * memory at the chunk's start), a recurrence with no context limit of its
 * own. */
static inline size_t tlm_kv_state_floats(const tlm_abi_config *c) {
    return (size_t)c->layers * (size_t)c->heads * 3 * (size_t)c->head_dim * (size_t)c->head_dim;
}
bool tlm_model_cache_open(tlm_model *m, tlm_err *err);
/* The forward of tokens [0, n) from position 0 (n <= T), filling the
 * cache; logits [n, vocab]. false on a device failure. */
bool tlm_model_prefill(tlm_model *m, const int32_t *tokens, int64_t n);
/* The forward of one token at position pos (the cache holds [0, pos),
 * pos < T), adding it to the cache; logits [1, vocab]. */
bool tlm_model_decode(tlm_model *m, int32_t token, int64_t pos);

/* On a device: copy the host's parameters there (after initialising or
 * loading them), or bring the device's back (before a checkpoint), and the
 * gradients (tests). No-ops on the CPU. */
bool tlm_model_params_to_device(tlm_model *m, tlm_err *err);
bool tlm_model_params_to_host(tlm_model *m, tlm_err *err);
bool tlm_model_grads_to_host(tlm_model *m, tlm_err *err);
/* The device failure that made a forward return NaN, or NULL. */
const char *tlm_model_device_error(const tlm_model *m);

/* Initialises every parameter as its table entry says (normal with its std,
 * ones or zeros), in table order from one generator seeded with seed. */
void tlm_model_init_params(tlm_model *m, uint64_t seed);

/* Runs the forward pass on tokens [B*T]. With targets, returns the mean
 * cross-entropy (and keeps what the backward pass needs); without, returns
 * 0 and only the logits are meaningful. B <= m->B and T <= m->T, else it
 * returns NaN and computes nothing. */
double tlm_model_forward(tlm_model *m, const int32_t *tokens, const int32_t *targets, int64_t B, int64_t T);
/* Adds the gradients of dloss × the last forward's loss to m->grads. */
void tlm_model_backward(tlm_model *m, float dloss);
/* Both executors' way of telling grads_final (executor.c): begin before
 * the backward's first op, after_op once op i has run (or been queued),
 * end after the last (or after a failure: the rest is told final then, so
 * the contract holds). Without grads_final set, all three do nothing. */
typedef struct tlm_final_walk {
    struct tlm_param_final *order; /* the parameters from the highest offset down */
    uint32_t next;
    int64_t frontier;              /* [frontier, param_floats) told final */
} tlm_final_walk;
void tlm_final_walk_begin(tlm_final_walk *w, const tlm_model *m);
void tlm_final_walk_after_op(tlm_final_walk *w, tlm_model *m, int i);
void tlm_final_walk_end(tlm_final_walk *w, tlm_model *m);
void tlm_model_zero_grads(tlm_model *m);

/* The logits of the last forward, [B, T, vocab]. On a device, this and
 * tlm_model_buffer download the buffer into a host copy, in fp32 (a buffer
 * stored in bf16, as the logits are in --precision bf16, widened exactly),
 * NULL when that fails: tlm_model_device_error says why. */
const float *tlm_model_logits(const tlm_model *m);
/* A buffer by role and layer (-1 for the model-wide ones), or NULL. */
float *tlm_model_buffer(const tlm_model *m, uint32_t role, int layer);
/* Parameter i's values and gradient. */
float *tlm_model_param(const tlm_model *m, int i);
float *tlm_model_grad(const tlm_model *m, int i);

#endif
