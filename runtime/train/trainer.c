#include "trainer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_model.h"
#include "gpu_optim.h"
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
    return copies * so->config->param_floats * (int64_t)sizeof(float);
}

void tlm_trainer_destroy(tlm_trainer *t) {
    if (t->model && t->model->gpu) {
        tlm_device *dev = t->model->gpu->gpu.dev;
        if (t->dev_m) tlm_device_free(dev, t->dev_m);
        if (t->dev_v) tlm_device_free(dev, t->dev_v);
        if (t->dev_grad_sum) tlm_device_free(dev, t->dev_grad_sum);
    }
    free(t->m);
    free(t->v);
    free(t->spans);
    free(t->slow);
    free(t->grad_sum);
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

/* The device's half of a step: the gradient norm, clipping, the update and
 * the slow parameters, as the host's below. A failure is the model's. */
static bool device_norm(tlm_trainer *t, double *norm, tlm_err *err) {
    tlm_gpu_model *g = t->model->gpu;
    size_t n = (size_t)t->model->param_floats;
    float max_norm = (float)t->settings.grad_clip;
    *norm = max_norm > 0 ? tlm_gpu_clip_grad_norm(&g->gpu, g->grads, n, max_norm, err)
                         : tlm_gpu_grad_norm(&g->gpu, g->grads, n, err);
    return !(*norm < 0); /* -1: a device failure; NaN is the step's to report */
}

static bool device_update(tlm_trainer *t, tlm_dptr grads, const tlm_param_span *spans, int nspans, float lr, long step,
                          tlm_err *err) {
    tlm_gpu_model *g = t->model->gpu;
    if (t->settings.optimizer == TLM_OPT_ADAMW)
        return tlm_gpu_adamw_update_spans(&g->gpu, &t->adamw, g->params, grads, t->dev_m, t->dev_v, spans, nspans, lr,
                                          step, err);
    return tlm_gpu_sgd_update_spans(&g->gpu, &t->sgd, g->params, grads, t->dev_m, spans, nspans, lr, step, err);
}

static bool device_slow(tlm_trainer *t, float lr, tlm_err *err) {
    tlm_gpu_model *g = t->model->gpu;
    for (int i = 0; i < t->nslow; i++) {
        const tlm_abi_param *p = &t->model->so->params[t->slow[i]];
        tlm_dptr sum = floats_at(t->dev_grad_sum, p->offset);
        if (!tlm_gpu_add(&g->gpu, sum, floats_at(g->grads, p->offset), (size_t)p->count, err)) return false;
        if (t->step % p->period != 0) continue;
        bool decay = p->decay || (t->decay_embeddings && p->role == TLM_P_EMBED);
        tlm_param_span span = {(size_t)p->offset, (size_t)p->count, decay};
        if (!device_update(t, t->dev_grad_sum, &span, 1, lr, t->step / p->period, err) ||
            !tlm_device_zero(g->gpu.dev, sum, (size_t)p->count * sizeof(float), err))
            return false;
    }
    return true;
}

static void update(tlm_trainer *t, const float *grads, const tlm_param_span *spans, int nspans, float lr, long step) {
    tlm_model *model = t->model;
    if (t->settings.optimizer == TLM_OPT_ADAMW)
        tlm_adamw_update_spans(&t->adamw, model->params, grads, t->m, t->v, spans, nspans, lr, step);
    else tlm_sgd_update_spans(&t->sgd, model->params, grads, t->m, spans, nspans, lr, step);
}

tlm_step_result tlm_trainer_step(tlm_trainer *t, const int32_t *tokens, const int32_t *targets, int64_t T) {
    tlm_model *model = t->model;
    int64_t k = t->settings.accumulate, micro = t->settings.batch / k;
    tlm_step_result r = {0};
    tlm_model_zero_grads(model);
    /* Each micro-batch's loss is a mean over its tokens; scaling its
     * gradient by 1/k makes the step's gradient the mean of the micro-batch
     * means (the mean over all tokens, as every micro-batch has B·T targets;
     * with ignored targets it would weight micro-batches equally). */
    for (int64_t i = 0; i < k; i++) {
        const int32_t *x = tokens + i * micro * T, *y = targets + i * micro * T;
        double loss = tlm_model_forward(model, x, y, micro, T);
        r.loss += loss / (double)k;
        if (!isfinite(loss)) break;
        tlm_model_backward(model, 1.0f / (float)k);
    }
    if (model->gpu) {
        tlm_err e;
        r.finite = isfinite(r.loss) && !tlm_model_device_error(model);
        if (r.finite && !device_norm(t, &r.grad_norm, &e)) tlm_gpu_model_fail(model, &e);
        r.lr = tlm_lr_at(&t->schedule, t->step);
        r.finite = r.finite && isfinite(r.grad_norm) && !tlm_model_device_error(model);
        if (!r.finite) return r;
        tlm_test_kill_at("step");
        t->step++;
        tlm_gpu_model_params_changed(model);
        if (!device_update(t, model->gpu->grads, t->spans, t->nspans, r.lr, t->step, &e) || !device_slow(t, r.lr, &e)) {
            tlm_gpu_model_fail(model, &e);
            r.finite = false;
        }
        return r;
    }
    size_t n = (size_t)model->param_floats;
    r.grad_norm = t->settings.grad_clip > 0 ? tlm_clip_grad_norm(model->grads, n, (float)t->settings.grad_clip)
                                            : tlm_grad_norm(model->grads, n);
    r.lr = tlm_lr_at(&t->schedule, t->step);
    r.finite = isfinite(r.loss) && isfinite(r.grad_norm);
    if (!r.finite) return r;           /* the parameters keep their last good values */
    tlm_test_kill_at("step");          /* test-only: a crash between backward and update */
    t->step++;
    update(t, model->grads, t->spans, t->nspans, r.lr, t->step);
    /* A slow parameter collects its gradients and is updated once every
     * `period` steps with their sum; its optimizer counts its own updates. */
    for (int i = 0; i < t->nslow; i++) {
        const tlm_abi_param *p = &model->so->params[t->slow[i]];
        float *sum = t->grad_sum + p->offset;
        const float *g = model->grads + p->offset;
        for (int64_t j = 0; j < p->count; j++) sum[j] += g[j];
        if (t->step % p->period != 0) continue;
        bool decay = p->decay || (t->decay_embeddings && p->role == TLM_P_EMBED);
        tlm_param_span span = {(size_t)p->offset, (size_t)p->count, decay};
        update(t, t->grad_sum, &span, 1, r.lr, t->step / p->period);
        memset(sum, 0, (size_t)p->count * sizeof *sum);
    }
    return r;
}
