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
    /* The step's gradient is the in-order sum of its micro-batches'
     * gradients, each computed into zeroed gradients: g = m0; g += m1; ...
     * (a backward that accumulated straight into the gradients would round
     * differently, and the ranks of a data-parallel run could not repeat
     * it). sum: param_floats, when a step has more than one micro-batch. */
    float *sum;
    double *losses;            /* accumulate: each micro-batch's loss, in order */
    const struct tlm_grad_chain *chain; /* NULL: one process */
    float **keep;              /* a rank > 0's own micro-batch gradients, kept until the prefix arrives */
    int nkeep;
    float **mine;              /* nkeep + 1: what this rank adds in the chain (chain->start) */
    tlm_dptr dev_sum, *dev_keep; /* the same on a device */
    tlm_dptr *dev_mine;        /* nkeep + 2: what this rank adds in the chain (chain->device_start) */
    /* On a device with a chain: grads_done, recorded on the compute stream
     * each time the backward tells gradients final, which the comm stream
     * waits for before their buckets; chain_done, recorded on the comm
     * stream after the chain, which the compute stream waits for before
     * the gradient norm (device.h: streams and events). */
    struct tlm_event *grads_done, *chain_done;
    bool chain_failed;         /* a device call of the chain failed in the backward (chain_err) */
    bool chain_wait_late;      /* test-only (test_hook.h: chain_no_wait): the compute stream waits after the step */
    tlm_err chain_err;
} tlm_trainer;

/* Data parallelism (runtime/dist): `ranks` processes share each step's
 * accumulate micro-batches, rank r running micro-batches [r·a, r·a + a),
 * a = accumulate / ranks, of the same global batch. The step's gradient is
 * the same in-order sum a single process makes: rank 0 sums its own, rank
 * r > 0 receives the sum of the micro-batches before its first and adds
 * its own in order (keeping them until then), and the last rank's total
 * goes to all. The losses travel likewise, so every rank takes the same
 * step as one process with the same batch and accumulate, bit for bit. */
/* sum[n] += g[n] on the device (the trainer's, for the chain below). */
typedef bool (*tlm_chain_add)(void *actx, tlm_dptr sum, tlm_dptr g, size_t n, tlm_err *err);

typedef struct tlm_grad_chain {
    int rank, ranks;
    void *ctx;
    /* all[accumulate] = every rank's `a` losses, in rank order (mine:
     * this rank's). */
    void (*gather_losses)(void *ctx, const double *mine, int a, double *all);
    /* sum[n] = prefix + mine[0] + mine[1] + ... in that order on rank r > 0
     * (prefix: rank r-1's sum), mine[0] + mine[1] + ... on rank 0 (mine[0]
     * may be sum itself); then the last rank's sum on every rank. In three
     * calls, so that it starts during the last micro-batch's backward:
     * start (nothing of mine need be final yet), ready(lo) each time floats
     * [lo, n) of every mine[] are final (lo decreasing), finish (the rest,
     * then the total everywhere). Every rank calls start and finish once a
     * step, whatever its losses: the others' transfers wait on it. */
    void (*start)(void *ctx, float *sum, float *const *mine, int n_mine, size_t n);
    void (*ready)(void *ctx, size_t lo);
    void (*finish)(void *ctx);
    /* The same over device memory, queued on dev's comm stream (device.h)
     * so that it runs beside the last micro-batch's backward (NULL: this
     * chain cannot reduce device memory). device_start before that
     * backward (nothing of mine need be final; on rank 0 mine[0] is sum;
     * mine is copied); device_ready(lo) each time floats [lo, n) of every
     * mine[] are final, once the caller has made the comm stream wait for
     * the compute work that made them so; device_finish queues the rest
     * and the total's broadcast, after which the caller records an event
     * on the comm stream and makes the compute stream wait for it before
     * reading sum. add queues the device's addition sum += g on the comm
     * stream. Every rank calls start and finish once a step. false with a
     * message (the job cannot go on). */
    bool (*device_start)(void *ctx, tlm_device *dev, tlm_dptr sum, const tlm_dptr *mine, int n_mine, size_t n,
                         tlm_chain_add add, void *actx, tlm_err *err);
    bool (*device_ready)(void *ctx, size_t lo, tlm_err *err);
    bool (*device_finish)(void *ctx, tlm_err *err);
} tlm_grad_chain;

typedef struct tlm_step_result {
    double loss;               /* mean over the step's micro-batches */
    double grad_norm;          /* before clipping */
    float lr;
    bool finite;               /* false: NaN or Inf in the loss or gradients; nothing was updated */
    int bad_rank;              /* with a chain: the first rank whose loss was not finite (-1: none) */
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

/* Makes t one rank of a data-parallel run (chain outlives t; on a device
 * the chain must reduce device memory): its accumulate must divide by
 * chain->ranks. A rank r > 0 keeps its
 * a micro-batches' gradients, tlm_trainer_chain_bytes more memory. */
bool tlm_trainer_join(tlm_trainer *t, const tlm_grad_chain *chain, tlm_err *err);
int64_t tlm_trainer_chain_bytes(const tlm_so *so, const tlm_abi_train *settings, int rank, int ranks);

/* On a device: bring the parameters and the optimizer's state to the host
 * (before a checkpoint), or send them to the device (after initialising or
 * loading them). No-ops on the CPU. */
bool tlm_trainer_to_host(tlm_trainer *t, tlm_err *err);
bool tlm_trainer_to_device(tlm_trainer *t, tlm_err *err);

/* One step. tokens and targets hold accumulate × micro-batch × T ids, the
 * micro-batches one after another (the whole step's, on every rank). */
tlm_step_result tlm_trainer_step(tlm_trainer *t, const int32_t *tokens, const int32_t *targets, int64_t T);

#endif
