/* Optimisers, gradient clipping and learning-rate schedules, with the exact
 * update rules of torch.optim (1.13, single-tensor path). All state lives in
 * caller-owned arrays the size of the parameter block (or of a slice of it),
 * so a driver can run them over one contiguous block, or tensor by tensor.
 * Parallel over elements; results do not depend on the thread count. */
#ifndef TLM_RT_OPTIM_H
#define TLM_RT_OPTIM_H

#include <stdbool.h>
#include <stddef.h>

#include "tlm_enums.h"

/* A run of parameters [offset, offset + count) of the parameter block and
 * whether weight decay applies to it (usually: matrices yes; norms, biases
 * and often embeddings no). This is the per-parameter decay mask. */
typedef struct tlm_param_span {
    size_t offset;
    size_t count;
    bool decay;
} tlm_param_span;

/* ---- adamw.c: torch.optim.AdamW (amsgrad=False, maximize=False) -------
 * step t counts from 1 (the first update is t = 1):
 *   p  *= 1 - lr * wd                       (decoupled decay, if decay)
 *   m   = b1 m + (1 - b1) g
 *   v   = b2 v + (1 - b2) g^2
 *   p  -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
 * m and v start at zero. */
typedef struct tlm_adamw {
    float beta1, beta2, eps, weight_decay;
} tlm_adamw;

/* The per-step scalars of the update above, formed in double and rounded to
 * float once: the CPU loop and the GPU kernel (runtime/gpu/optim.c) take
 * the same ones, so their updates agree bit for bit. */
typedef struct tlm_adamw_step {
    float beta1, beta2, one_minus_beta1, one_minus_beta2;
    float step_size; /* lr / (1 - b1^t) */
    float bc2_sqrt;  /* sqrt(1 - b2^t) */
    float eps;
    float shrink;    /* 1 - lr wd with decay, else 1 */
} tlm_adamw_step;
tlm_adamw_step tlm_adamw_step_at(const tlm_adamw *opt, float lr, long t, bool decay);

void tlm_adamw_update(const tlm_adamw *opt, float *p, const float *g, float *m, float *v, size_t n, float lr, long t,
                      bool decay);
/* The same over spans of one block: p, g, m, v all indexed by offset, with
 * the gradient g times grad_scale (tlm_clip_scale's: clipping folded into
 * the update, one pass over the gradients fewer; 1 leaves g as it is). */
void tlm_adamw_update_spans(const tlm_adamw *opt, float *p, const float *g, float grad_scale, float *m, float *v,
                            const tlm_param_span *spans, int nspans, float lr, long t);

/* ---- sgd.c: torch.optim.SGD --------------------------------------------
 *   d = g + wd p                          (coupled L2 decay, if decay)
 *   buf = d                (t == 1)  |  buf = mu buf + (1 - dampening) d
 *   d = nesterov ? d + mu buf : buf     (when mu != 0)
 *   p -= lr d
 * buf: momentum buffer, unused when momentum == 0. */
typedef struct tlm_sgd {
    float momentum, dampening, weight_decay;
    bool nesterov;
} tlm_sgd;

void tlm_sgd_update(const tlm_sgd *opt, float *p, const float *g, float *buf, size_t n, float lr, long t, bool decay);
/* The same over spans, g times grad_scale (as tlm_adamw_update_spans). */
void tlm_sgd_update_spans(const tlm_sgd *opt, float *p, const float *g, float grad_scale, float *buf,
                          const tlm_param_span *spans, int nspans, float lr, long t);

/* ---- clip.c: torch.nn.utils.clip_grad_norm_ ----------------------------
 * Global L2 norm of g[0..n) (summed in double, in a fixed chunk order).
 * When max_norm > 0 the gradient is scaled by tlm_clip_scale(norm,
 * max_norm), min(1, max_norm / (norm + 1e-6)) rounded to float (1 when
 * max_norm <= 0). tlm_clip_grad_norm scales g in place and returns the
 * norm before clipping; the trainer instead hands the scale to the update
 * (a multiply by it there rounds exactly as the in-place one did). */
double tlm_grad_norm(const float *g, size_t n);
float tlm_clip_scale(double norm, float max_norm);
double tlm_clip_grad_norm(float *g, size_t n, float max_norm);

/* ---- schedule.c: learning rate at a step -------------------------------
 * step counts from 0 (the lr for the first update is tlm_lr_at(s, 0)).
 *   warm-up, step < warmup:   max_lr * (step + 1) / warmup
 *   then, with p = (step - warmup) / (total - warmup) in [0, 1):
 *     CONSTANT  max_lr
 *     COSINE    min_lr + (max_lr - min_lr) (1 + cos(pi p)) / 2
 *     LINEAR    max_lr + (min_lr - max_lr) p
 *   step >= total:  min_lr (CONSTANT: max_lr)
 * Equal to torch's LinearLR(1/warmup -> 1 over warmup-1 steps) followed by
 * CosineAnnealingLR(T_max = total - warmup, eta_min = min_lr) (or
 * LinearLR for LINEAR), which tests/reference/check_optim.py checks. */

typedef struct tlm_lr_schedule {
    tlm_lr_kind kind;
    float max_lr, min_lr;
    long warmup, total;
} tlm_lr_schedule;

float tlm_lr_at(const tlm_lr_schedule *s, long step);

#endif
