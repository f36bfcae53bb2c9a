/* One optimizer step of training: forward and backward over the step's
 * micro-batches (gradient accumulation), the global gradient norm and
 * clipping, the learning rate from the schedule, and the AdamW (or SGD)
 * update with weight decay only where the parameter table allows it. The
 * optimizer state is here too, so a checkpoint saves and restores it. */
#ifndef TLM_TRAINER_H
#define TLM_TRAINER_H

#include <stdbool.h>
#include <stdint.h>

#include "model.h"
#include "tlm_rt/optim.h"

typedef struct tlm_trainer {
    tlm_model *model;
    tlm_abi_train settings;    /* the model's defaults with the user's overrides */
    bool decay_embeddings;     /* weight decay on the embedding (and a tied head) too */
    tlm_adamw adamw;
    tlm_sgd sgd;
    float *m, *v;              /* AdamW moments; SGD keeps its momentum in m */
    tlm_param_span *spans;     /* parameters updated every step */
    int nspans;
    /* Parameters updated every `period` > 1 steps (hope_attention's slower
     * CMS levels) sum their gradients here between updates. */
    float *grad_sum;           /* param_floats, or NULL when every period is 1 */
    int *slow;                 /* indices into the param table */
    int nslow;
    tlm_lr_schedule schedule;
    long step;                 /* optimizer steps taken so far */
    /* On a device the optimizer's state lives there too (m, v and
     * grad_sum above are then the host copies a checkpoint reads). */
    tlm_dptr dev_m, dev_v, dev_grad_sum;
} tlm_trainer;

typedef struct tlm_step_result {
    double loss;               /* mean over the step's micro-batches */
    double grad_norm;          /* before clipping */
    float lr;
    bool finite;               /* false: NaN or Inf in the loss or gradients; nothing was updated */
} tlm_step_result;

/* settings: the full training configuration (batch is the per-step batch;
 * the model's arena must hold batch / accumulate sequences). */
bool tlm_trainer_create(tlm_trainer *t, tlm_model *model, const tlm_abi_train *settings, bool decay_embeddings,
                        tlm_err *err);
void tlm_trainer_destroy(tlm_trainer *t);
/* The bytes tlm_trainer_create allocates for the optimizer's state with
 * these settings: momentum (and AdamW's second moment) per parameter, and
 * the summed gradients when a parameter updates every period > 1 steps. */
int64_t tlm_trainer_state_bytes(const tlm_so *so, const tlm_abi_train *settings);

/* On a device: bring the parameters and the optimizer's state to the host
 * (before a checkpoint), or send them to the device (after initialising or
 * loading them). No-ops on the CPU. */
bool tlm_trainer_to_host(tlm_trainer *t, tlm_err *err);
bool tlm_trainer_to_device(tlm_trainer *t, tlm_err *err);

/* One step. tokens and targets hold accumulate × micro-batch × T ids, the
 * micro-batches one after another. */
tlm_step_result tlm_trainer_step(tlm_trainer *t, const int32_t *tokens, const int32_t *targets, int64_t T);

#endif
