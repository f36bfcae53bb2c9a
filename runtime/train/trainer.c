#include "trainer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_model.h"
#include "gpu_optim.h"
#include "profile.h"
#include "test_hook.h"

/* The optimizer's state on the device, zero-filled like calloc's. */
static bool device_state(tlm_trainer *t, tlm_err *err) {
    tlm_device *dev = t->model->gpu->gpu.dev;
    size_t bytes = (size_t)t->model->param_floats * sizeof(float);
    return (t->dev_m = tlm_device_alloc(dev, bytes, err)) &&
           (!t->v || (t->dev_v = tlm_device_alloc(dev, bytes, err))) &&
           (!t->grad_sum || (t->dev_grad_sum = tlm_device_alloc(dev, bytes, err)));
}

bool tlm_trainer_create(tlm_trainer *t, tlm_model *model, const tlm_abi_train *s, bool decay_embeddings, tlm_err *err) {
    memset(t, 0, sizeof *t);
    t->model = model;
    t->settings = *s;
    t->decay_embeddings = decay_embeddings;
    if (!model->grads) {
        tlm_fail(err, "the model was not created for training");
        return false;
    }
    if (!(s->min_lr >= 0)) { /* model.so's -1 unresolved: a reader forgot tlm_train_resolve_defaults */
        tlm_fail(err, "min_lr %g is not a learning rate", s->min_lr);
        return false;
    }
    if (s->context < 1 || s->context > model->T) {
        tlm_fail(err, "training context %lld does not fit the model's arena (%lld tokens)", (long long)s->context,
                 (long long)model->T);
        return false;
    }
    if (s->accumulate < 1 || s->batch % s->accumulate != 0 || s->batch / s->accumulate > model->B) {
        tlm_fail(err, "batch %lld in %lld micro-batches does not fit the model's arena (%lld sequences)",
                 (long long)s->batch, (long long)s->accumulate, (long long)model->B);
        return false;
    }
    size_t n = (size_t)model->param_floats;
    t->m = calloc(n, sizeof *t->m);
    t->v = s->optimizer == TLM_OPT_ADAMW ? calloc(n, sizeof *t->v) : NULL;
    const tlm_so *so = model->so;
    t->spans = calloc(so->header->nparams + 1, sizeof *t->spans);
    if (!t->m || (s->optimizer == TLM_OPT_ADAMW && !t->v) || !t->spans) {
        tlm_trainer_destroy(t);
        tlm_fail(err, "out of memory for the optimizer state");
        return false;
    }
    /* The decay mask: the parameter table says which tensors decay (not
     * norms, not the embedding); --decay-embeddings adds the embedding. */
    t->slow = calloc(so->header->nparams + 1, sizeof *t->slow);
    if (!t->slow) {
        tlm_trainer_destroy(t);
        tlm_fail(err, "out of memory for the optimizer state");
        return false;
    }
    for (uint32_t i = 0; i < so->header->nparams; i++) {
        const tlm_abi_param *p = &so->params[i];
        if (p->period > 1) {
            t->slow[t->nslow++] = (int)i;
            continue;
        }
        bool decay = p->decay || (decay_embeddings && p->role == TLM_P_EMBED);
        t->spans[t->nspans++] = (tlm_param_span){(size_t)p->offset, (size_t)p->count, decay};
    }
    if (t->nslow && !(t->grad_sum = calloc(n, sizeof *t->grad_sum))) {
        tlm_trainer_destroy(t);
        tlm_fail(err, "out of memory for the optimizer state");
        return false;
    }
    if (model->gpu && !device_state(t, err)) {
        tlm_trainer_destroy(t);
        return false;
    }
    t->losses = calloc((size_t)s->accumulate, sizeof *t->losses);
    if (!t->losses || (!model->gpu && s->accumulate > 1 && !(t->sum = malloc(n * sizeof *t->sum)))) {
        tlm_trainer_destroy(t);
        tlm_fail(err, "out of memory for the optimizer state");
        return false;
    }
    if (model->gpu && s->accumulate > 1 &&
        !(t->dev_sum = tlm_device_alloc(model->gpu->gpu.dev, n * sizeof(float), err))) {
        tlm_trainer_destroy(t);
        return false;
    }
    t->adamw = (tlm_adamw){(float)s->beta1, (float)s->beta2, (float)s->eps, (float)s->weight_decay};
    t->sgd = (tlm_sgd){(float)s->momentum, 0.0f, (float)s->weight_decay, false};
    t->schedule.kind = (tlm_lr_kind)s->lr_schedule;
    t->schedule.max_lr = (float)s->lr;
    t->schedule.min_lr = (float)s->min_lr;
    t->schedule.warmup = (long)s->warmup;
    t->schedule.total = (long)s->steps;
    return true;
}

int64_t tlm_trainer_state_bytes(const tlm_so *so, const tlm_abi_train *s) {
    int64_t copies = s->optimizer == TLM_OPT_ADAMW ? 2 : 1;
    for (uint32_t i = 0; i < so->header->nparams; i++)
        if (so->params[i].period > 1) {
            copies++;
            break;
        }
    if (s->accumulate > 1) copies++; /* the micro-batches' sum */
    return copies * so->config->param_floats * (int64_t)sizeof(float);
}

/* Rank r > 0 keeps its a micro-batches' gradients; rank 0 sums its own in
 * place, in the buffer every rank needs when there are several. */
static int64_t kept_copies(const tlm_abi_train *s, int rank, int ranks) { return rank > 0 ? s->accumulate / ranks : 0; }

int64_t tlm_trainer_chain_bytes(const tlm_so *so, const tlm_abi_train *s, int rank, int ranks) {
    int64_t copies = kept_copies(s, rank, ranks) + (s->accumulate == 1 && ranks > 1);
    return copies * so->config->param_floats * (int64_t)sizeof(float);
}

/* The device's sum and kept gradients, as tlm_trainer_join's host ones. */
static bool join_device(tlm_trainer *t, tlm_err *err) {
    tlm_device *dev = t->model->gpu->gpu.dev;
    size_t bytes = (size_t)t->model->param_floats * sizeof(float);
    int nkeep = (int)kept_copies(&t->settings, t->chain->rank, t->chain->ranks);
    if (!t->dev_sum && !(t->dev_sum = tlm_device_alloc(dev, bytes, err))) return false;
    if (nkeep && !(t->dev_keep = calloc((size_t)nkeep, sizeof *t->dev_keep)))
        return tlm_fail(err, "out of memory for the gradients");
    for (; t->nkeep < nkeep; t->nkeep++)
        if (!(t->dev_keep[t->nkeep] = tlm_device_alloc(dev, bytes, err))) return false;
    if (!(t->dev_mine = calloc((size_t)nkeep + 2, sizeof *t->dev_mine)))
        return tlm_fail(err, "out of memory for the gradients");
    return (t->grads_done = tlm_device_event_create(dev, err)) && (t->chain_done = tlm_device_event_create(dev, err));
}

bool tlm_trainer_join(tlm_trainer *t, const tlm_grad_chain *chain, tlm_err *err) {
    const tlm_abi_train *s = &t->settings;
    if (t->model->gpu && !chain->device_start)
        return tlm_fail(err, "this build cannot reduce gradients across ranks on a device (no NCCL)");
    if (s->accumulate % chain->ranks != 0)
        return tlm_fail(err, "%lld micro-batches a step cannot be shared by %d ranks", (long long)s->accumulate,
                        chain->ranks);
    size_t n = (size_t)t->model->param_floats;
    t->chain = chain;
    if (t->model->gpu) return join_device(t, err);
    if (!t->sum && !(t->sum = malloc(n * sizeof *t->sum))) return tlm_fail(err, "out of memory for the gradients");
    int nkeep = (int)kept_copies(s, chain->rank, chain->ranks);
    if ((nkeep && !(t->keep = calloc((size_t)nkeep, sizeof *t->keep))) ||
        !(t->mine = calloc((size_t)nkeep + 2, sizeof *t->mine)))
        return tlm_fail(err, "out of memory for the gradients");
    for (; t->nkeep < nkeep; t->nkeep++)
        if (!(t->keep[t->nkeep] = malloc(n * sizeof(float)))) return tlm_fail(err, "out of memory for the gradients");
    return true;
}

void tlm_trainer_destroy(tlm_trainer *t) {
    if (t->model && t->model->gpu) {
        tlm_device *dev = t->model->gpu->gpu.dev;
        if (t->dev_m) tlm_device_free(dev, t->dev_m);
        if (t->dev_v) tlm_device_free(dev, t->dev_v);
        if (t->dev_grad_sum) tlm_device_free(dev, t->dev_grad_sum);
        if (t->dev_sum) tlm_device_free(dev, t->dev_sum);
        for (int i = 0; t->dev_keep && i < t->nkeep; i++)
            if (t->dev_keep[i]) tlm_device_free(dev, t->dev_keep[i]);
        tlm_device_event_destroy(dev, t->grads_done);
        tlm_device_event_destroy(dev, t->chain_done);
    }
    free(t->dev_keep);
    free(t->dev_mine);
    free(t->m);
    free(t->v);
    free(t->spans);
    free(t->slow);
    free(t->grad_sum);
    free(t->sum);
    free(t->losses);
    for (int i = 0; t->keep && i < t->nkeep; i++) free(t->keep[i]);
    free(t->keep);
    free(t->mine);
    memset(t, 0, sizeof *t);
}

/* The state's host copies and the device's, one direction or the other. */
static bool move_state(tlm_trainer *t, bool to_host, tlm_err *err) {
    tlm_model *model = t->model;
    if (!model->gpu) return true;
    tlm_device *dev = model->gpu->gpu.dev;
    size_t bytes = (size_t)model->param_floats * sizeof(float);
    float *host[3] = {t->m, t->v, t->grad_sum};
    tlm_dptr device[3] = {t->dev_m, t->dev_v, t->dev_grad_sum};
    if (!(to_host ? tlm_model_params_to_host(model, err) : tlm_model_params_to_device(model, err))) return false;
    for (int i = 0; i < 3; i++) {
        if (!host[i]) continue;
        bool ok = to_host ? tlm_device_download(dev, host[i], device[i], bytes, err)
                          : tlm_device_upload(dev, device[i], host[i], bytes, err);
        if (!ok) return false;
    }
    return true;
}
bool tlm_trainer_to_host(tlm_trainer *t, tlm_err *err) { return move_state(t, true, err); }
bool tlm_trainer_to_device(tlm_trainer *t, tlm_err *err) { return move_state(t, false, err); }

static tlm_dptr floats_at(tlm_dptr p, int64_t n) { return p + (tlm_dptr)n * sizeof(float); }

/* The device's half of a step: the gradient norm, the update (the
 * clipping's scale handed to it, as the host's below) and the slow
 * parameters. A failure is the model's. */
static bool device_norm(tlm_trainer *t, tlm_dptr grads, double *norm, tlm_err *err) {
    tlm_gpu_model *g = t->model->gpu;
    *norm = tlm_gpu_grad_norm(&g->gpu, grads, (size_t)t->model->param_floats, err);
    return !(*norm < 0); /* -1: a device failure; NaN is the step's to report */
}

static bool device_update(tlm_trainer *t, tlm_dptr grads, float grad_scale, const tlm_param_span *spans, int nspans,
                          float lr, long step, tlm_err *err) {
    tlm_gpu_model *g = t->model->gpu;
    if (t->settings.optimizer == TLM_OPT_ADAMW)
        return tlm_gpu_adamw_update_spans(&g->gpu, &t->adamw, g->params, grads, grad_scale, t->dev_m, t->dev_v, spans,
                                          nspans, lr, step, err);
    return tlm_gpu_sgd_update_spans(&g->gpu, &t->sgd, g->params, grads, grad_scale, t->dev_m, spans, nspans, lr, step,
                                    err);
}

static bool device_slow(tlm_trainer *t, tlm_dptr grads, float grad_scale, float lr, tlm_err *err) {
    tlm_gpu_model *g = t->model->gpu;
    for (int i = 0; i < t->nslow; i++) {
        const tlm_abi_param *p = &t->model->so->params[t->slow[i]];
        tlm_dptr sum = floats_at(t->dev_grad_sum, p->offset);
        if (!tlm_gpu_add(&g->gpu, sum, floats_at(grads, p->offset), grad_scale, (size_t)p->count, err)) return false;
        if (t->step % p->period != 0) continue;
        bool decay = p->decay || (t->decay_embeddings && p->role == TLM_P_EMBED);
        tlm_param_span span = {(size_t)p->offset, (size_t)p->count, decay};
        if (!device_update(t, t->dev_grad_sum, 1.0f, &span, 1, lr, t->step / p->period, err) ||
            !tlm_device_zero(g->gpu.dev, sum, (size_t)p->count * sizeof(float), err))
            return false;
    }
    return true;
}

/* The update with the gradients times grad_scale (the clipping's). */
static void update(tlm_trainer *t, const float *grads, float grad_scale, const tlm_param_span *spans, int nspans,
                   float lr, long step) {
    tlm_model *model = t->model;
    if (t->settings.optimizer == TLM_OPT_ADAMW)
        tlm_adamw_update_spans(&t->adamw, model->params, grads, grad_scale, t->m, t->v, spans, nspans, lr, step);
    else tlm_sgd_update_spans(&t->sgd, model->params, grads, grad_scale, t->m, spans, nspans, lr, step);
}

/* sum += g scale, element by element: the one addition every rank and a
 * single process make, so their sums round alike. The product is rounded
 * first (not fused: this file is built with -ffp-contract=off), as when the
 * clipping scaled g in place; times 1 is exact. */
static void add_into(float *restrict sum, const float *restrict g, float scale, size_t n) {
    for (size_t i = 0; i < n; i++) sum[i] += g[i] * scale;
}

/* The chain's additions: on the device's comm stream, in the chain's
 * order there. */
static bool device_add(void *actx, tlm_dptr sum, tlm_dptr g, size_t n, tlm_err *err) {
    tlm_trainer *t = actx;
    tlm_device *dev = t->model->gpu->gpu.dev;
    tlm_stream before = tlm_device_launch_stream(dev, TLM_STREAM_COMM);
    bool ok = tlm_gpu_add(&t->model->gpu->gpu, sum, g, 1.0f, n, err);
    tlm_device_launch_stream(dev, before);
    return ok;
}

/* The comm stream waits for the compute work issued so far (the
 * gradients it made final). */
static bool comm_after_compute(tlm_trainer *t, tlm_err *err) {
    tlm_device *dev = t->model->gpu->gpu.dev;
    return tlm_device_event_record(dev, t->grads_done, TLM_STREAM_COMPUTE, err) &&
           tlm_device_stream_wait(dev, TLM_STREAM_COMM, t->grads_done, err);
}

/* The device's counterpart of grads_final below: the buckets above lo go
 * on the comm stream behind the backward's ops queued so far. A failure
 * is kept for the end of the backward (the executor cannot be told). */
static void device_grads_final(void *ctx, int64_t lo, int64_t hi) {
    tlm_trainer *t = ctx;
    (void)hi; /* the ranges come down to lo from the block's end */
    if (t->chain_failed) return;
    t->chain_failed =
        !comm_after_compute(t, &t->chain_err) || !t->chain->device_ready(t->chain->ctx, (size_t)lo, &t->chain_err);
}

/* Starts the step's chain on the device with what this rank adds, in
 * order, as start_chain below: a rank r > 0 its kept micro-batches, rank
 * 0 the sum of those before the last (sum itself), then the last,
 * last_grads. */
static bool device_start_chain(tlm_trainer *t, tlm_dptr sum, int64_t a, tlm_dptr last_grads, tlm_err *err) {
    const tlm_grad_chain *chain = t->chain;
    int n = 0;
    if (chain->rank > 0)
        for (int64_t i = 0; i + 1 < a; i++) t->dev_mine[n++] = t->dev_keep[i];
    else if (a > 1) t->dev_mine[n++] = sum;
    t->dev_mine[n++] = last_grads;
    return chain->device_start(chain->ctx, t->model->gpu->gpu.dev, sum, t->dev_mine, n, (size_t)t->model->param_floats,
                               device_add, t, err);
}

/* The rest of the chain; then the compute stream waits for it, unless
 * the test hook chain_no_wait moves that wait after the optimizer (the
 * negative check of tests/dist: the emulated device's deferred comm
 * stream must then change the result). */
static bool device_finish_chain(tlm_trainer *t, tlm_err *err) {
    tlm_device *dev = t->model->gpu->gpu.dev;
    if (!comm_after_compute(t, err) || !t->chain->device_finish(t->chain->ctx, err) ||
        !tlm_device_event_record(dev, t->chain_done, TLM_STREAM_COMM, err))
        return false;
    t->chain_wait_late = tlm_test_hook("chain_no_wait");
    return t->chain_wait_late || tlm_device_stream_wait(dev, TLM_STREAM_COMPUTE, t->chain_done, err);
}

/* This rank's micro-batches on a device, as host_micro_batches below;
 * returns where the step's gradient is. With a chain, its buckets go on
 * the comm stream during the last micro-batch's backward, and the compute
 * stream waits for the total before it returns. A device failure is the
 * model's. */
static tlm_dptr device_micro_batches(tlm_trainer *t, const int32_t *tokens, const int32_t *targets, int64_t T) {
    tlm_model *model = t->model;
    tlm_gpu_model *g = model->gpu;
    const tlm_grad_chain *chain = t->chain;
    int64_t k = t->settings.accumulate, micro = t->settings.batch / k;
    int rank = chain ? chain->rank : 0, ranks = chain ? chain->ranks : 1;
    int64_t a = k / ranks, first = rank * a;
    size_t n = (size_t)model->param_floats, bytes = n * sizeof(float);
    tlm_dptr sum = t->dev_sum ? t->dev_sum : g->grads;
    /* Rank 0's one micro-batch: the chain sums into its gradients. */
    if (chain && rank == 0 && a == 1) sum = g->grads;
    bool chained = false;
    tlm_err e;
    t->chain_failed = false;
    for (int64_t i = 0; i < a; i++) t->losses[first + i] = NAN;
    for (int64_t i = 0; i < a; i++) {
        const int32_t *x = tokens + (first + i) * micro * T, *y = targets + (first + i) * micro * T;
        tlm_model_zero_grads(model);
        double loss = tlm_model_forward(model, x, y, micro, T);
        if (tlm_test_hook("nan_loss")) loss = NAN;
        t->losses[first + i] = loss;
        if (!isfinite(loss)) break;
        chained = chain && i == a - 1;
        if (chained) {
            if (!device_start_chain(t, sum, a, g->grads, &e)) {
                tlm_gpu_model_fail(model, &e);
                return sum;
            }
            model->grads_final = device_grads_final;
            model->grads_final_ctx = t;
        }
        tlm_model_backward(model, 1.0f / (float)k);
        model->grads_final = NULL;
        if (chained || sum == g->grads) continue;
        bool ok = rank > 0 ? tlm_device_copy(g->gpu.dev, t->dev_keep[i], g->grads, bytes, &e)
                  : i == 0 ? tlm_device_copy(g->gpu.dev, sum, g->grads, bytes, &e)
                           : tlm_gpu_add(&g->gpu, sum, g->grads, 1.0f, n, &e);
        if (!ok) {
            tlm_gpu_model_fail(model, &e);
            break;
        }
    }
    if (!chain) return sum;
    /* A loss that was not finite ended this rank's micro-batches early:
     * the others' transfers still wait on its chain, whose sum the step
     * then throws away. */
    if (t->chain_failed) tlm_gpu_model_fail(model, &t->chain_err);
    else if ((!chained && !device_start_chain(t, sum, a, rank > 0 ? t->dev_keep[a - 1] : g->grads, &e)) ||
             !device_finish_chain(t, &e))
        tlm_gpu_model_fail(model, &e);
    return sum;
}

/* The chain's hook in the executor (model.h: grads_final): during the
 * last micro-batch's backward, the buckets above lo start on their way. */
static void grads_final(void *ctx, int64_t lo, int64_t hi) {
    const tlm_grad_chain *chain = ctx;
    (void)hi; /* the ranges come down to lo from the block's end */
    chain->ready(chain->ctx, (size_t)lo);
}

/* Starts the step's chain with what this rank adds, in order: a rank r > 0
 * its kept micro-batches, rank 0 the sum of those before the last (in g);
 * then the last, last_grads (the model's gradients when the chain starts
 * in its backward, else what is already in keep or g). */
static void start_chain(tlm_trainer *t, float *g, int64_t a, float *last_grads) {
    const tlm_grad_chain *chain = t->chain;
    int n = 0;
    if (chain->rank > 0)
        for (int64_t i = 0; i + 1 < a; i++) t->mine[n++] = t->keep[i];
    else if (a > 1) t->mine[n++] = g;
    t->mine[n++] = last_grads;
    chain->start(chain->ctx, g, t->mine, n, (size_t)t->model->param_floats);
}

/* This rank's micro-batches on the CPU, each into zeroed gradients; returns
 * where the step's gradient is (the model's own when the step has one
 * micro-batch and one rank). With a chain, the step's gradient on every
 * rank: the chain starts in the last micro-batch's backward, each bucket
 * as soon as it is final there. */
static float *host_micro_batches(tlm_trainer *t, const int32_t *tokens, const int32_t *targets, int64_t T) {
    tlm_model *model = t->model;
    const tlm_grad_chain *chain = t->chain;
    int64_t k = t->settings.accumulate, micro = t->settings.batch / k;
    int rank = chain ? chain->rank : 0, ranks = chain ? chain->ranks : 1;
    int64_t a = k / ranks, first = rank * a;
    size_t n = (size_t)model->param_floats;
    float *g = t->sum ? t->sum : model->grads;
    bool chained = false;
    for (int64_t i = 0; i < a; i++) t->losses[first + i] = NAN;
    for (int64_t i = 0; i < a; i++) {
        const int32_t *x = tokens + (first + i) * micro * T, *y = targets + (first + i) * micro * T;
        tlm_model_zero_grads(model);
        double loss = tlm_model_forward(model, x, y, micro, T);
        if (tlm_test_hook("nan_loss")) loss = NAN; /* test-only: a NaN on this rank */
        t->losses[first + i] = loss;
        if (!isfinite(loss)) break;
        chained = chain && i == a - 1;
        if (chained) {
            start_chain(t, g, a, model->grads);
            model->grads_final = grads_final;
            model->grads_final_ctx = (void *)chain;
        }
        /* Each micro-batch's loss is a mean over its tokens; scaling its
         * gradient by 1/k makes the step's gradient the mean of the
         * micro-batch means (the mean over all tokens, as every micro-batch
         * has B·T targets; with ignored targets it would weight
         * micro-batches equally). */
        tlm_model_backward(model, 1.0f / (float)k);
        model->grads_final = NULL;
        if (chained || g == model->grads) continue;
        if (rank > 0) memcpy(t->keep[i], model->grads, n * sizeof(float));
        else if (i == 0) memcpy(g, model->grads, n * sizeof(float));
        else add_into(g, model->grads, 1.0f, n);
    }
    if (!chain) return g;
    /* A loss that was not finite ended this rank's micro-batches early:
     * the others' transfers still wait on its chain, whose sum the step
     * then throws away. */
    if (!chained) start_chain(t, g, a, rank > 0 ? t->keep[a - 1] : model->grads);
    chain->finish(chain->ctx);
    return g;
}

/* The step's loss from every micro-batch's, in order (r->bad_rank: the
 * rank of the first that was not finite). */
static void step_loss(tlm_trainer *t, tlm_step_result *r) {
    const tlm_grad_chain *chain = t->chain;
    int64_t k = t->settings.accumulate;
    if (chain)
        chain->gather_losses(chain->ctx, t->losses + chain->rank * (k / chain->ranks), (int)(k / chain->ranks),
                             t->losses);
    for (int64_t i = 0; i < k; i++) {
        r->loss += t->losses[i] / (double)k;
        if (!isfinite(t->losses[i])) {
            if (chain) r->bad_rank = (int)(i / (k / chain->ranks));
            break;
        }
    }
}

static tlm_step_result device_step_in_order(tlm_trainer *t, const int32_t *tokens, const int32_t *targets, int64_t T) {
    tlm_model *model = t->model;
    tlm_step_result r = {.bad_rank = -1};
    tlm_err e;
    tlm_dptr g = device_micro_batches(t, tokens, targets, T);
    step_loss(t, &r);
    r.lr = tlm_lr_at(&t->schedule, t->step);
    r.finite = isfinite(r.loss) && !tlm_model_device_error(model);
    if (!r.finite) return r;
    if (!device_norm(t, g, &r.grad_norm, &e)) tlm_gpu_model_fail(model, &e);
    r.finite = isfinite(r.grad_norm) && !tlm_model_device_error(model);
    if (!r.finite) return r;
    const float scale = tlm_clip_scale(r.grad_norm, (float)t->settings.grad_clip);
    tlm_test_kill_at("step");
    t->step++;
    tlm_gpu_model_params_changed(model);
    if (!device_update(t, g, scale, t->spans, t->nspans, r.lr, t->step, &e) || !device_slow(t, g, scale, r.lr, &e)) {
        tlm_gpu_model_fail(model, &e);
        r.finite = false;
    }
    return r;
}

/* A profile with a device table (--profile-kernels) has the device time
 * the step's launches and GEMMs, its ops' and the optimizer's; the
 * validations run outside a step and are not timed. */
static tlm_step_result device_step(tlm_trainer *t, const int32_t *tokens, const int32_t *targets, int64_t T) {
    tlm_device *dev = t->model->gpu->gpu.dev;
    const tlm_profile *profile = t->model->profile;
    tlm_device_time_kernels(dev, profile ? profile->kernels : NULL);
    t->chain_wait_late = false;
    tlm_step_result r = device_step_in_order(t, tokens, targets, T);
    tlm_err e;
    /* test-only (chain_no_wait): the wait the optimizer should have had */
    if (t->chain_wait_late && !tlm_device_stream_wait(dev, TLM_STREAM_COMPUTE, t->chain_done, &e)) {
        tlm_gpu_model_fail(t->model, &e);
        r.finite = false;
    }
    tlm_device_time_kernels(dev, NULL);
    return r;
}

tlm_step_result tlm_trainer_step(tlm_trainer *t, const int32_t *tokens, const int32_t *targets, int64_t T) {
    if (t->model->gpu) return device_step(t, tokens, targets, T);
    tlm_model *model = t->model;
    tlm_step_result r = {.bad_rank = -1};
    float *g = host_micro_batches(t, tokens, targets, T);
    step_loss(t, &r);
    size_t n = (size_t)model->param_floats;
    r.lr = tlm_lr_at(&t->schedule, t->step);
    if (!isfinite(r.loss)) return r; /* every rank saw the same losses, so every rank stops here */
    /* The clipping's scale goes to the update, which multiplies each
     * gradient as it reads it: the same products as scaling g in place
     * first, without that pass's read and write of every gradient. */
    r.grad_norm = tlm_grad_norm(g, n);
    const float scale = tlm_clip_scale(r.grad_norm, (float)t->settings.grad_clip);
    r.finite = isfinite(r.loss) && isfinite(r.grad_norm);
    if (!r.finite) return r;           /* the parameters keep their last good values */
    tlm_test_kill_at("step");          /* test-only: a crash between backward and update */
    t->step++;
    update(t, g, scale, t->spans, t->nspans, r.lr, t->step);
    /* A slow parameter collects its gradients and is updated once every
     * `period` steps with their sum; its optimizer counts its own updates. */
    for (int i = 0; i < t->nslow; i++) {
        const tlm_abi_param *p = &model->so->params[t->slow[i]];
        float *sum = t->grad_sum + p->offset;
        add_into(sum, g + p->offset, scale, (size_t)p->count);
        if (t->step % p->period != 0) continue;
        bool decay = p->decay || (t->decay_embeddings && p->role == TLM_P_EMBED);
        tlm_param_span span = {(size_t)p->offset, (size_t)p->count, decay};
        update(t, t->grad_sum, 1.0f, &span, 1, r.lr, t->step / p->period);
        memset(sum, 0, (size_t)p->count * sizeof *sum);
    }
    return r;
}
