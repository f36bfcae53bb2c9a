/* Runs AdamW and SGD for several steps, with global-norm clipping, a
 * per-parameter decay mask and learning-rate schedules, and writes every
 * intermediate to a safetensors file for tests/reference/check_optim.py to
 * replay with torch.optim.
 *
 * The parameter block holds three tensors: A [6,5] (decay), n [5] (no
 * decay), M [4,3] (decay). Gradients are random, with a scale that changes
 * per step so that clipping is active on some steps and not on others.
 *
 * usage: dump_optim OUT.safetensors */
#include "test_util.h"

enum { NP = 6 * 5 + 5 + 4 * 3, S = 12, LR_STEPS = 25 };

static const tlm_param_span spans[3] = {{0, 30, true}, {30, 5, false}, {35, 12, true}};

static tlm_st_tensor g_t[32];
static int g_n;

static void put(const char *name, const float *data, int ndim, int64_t d0, int64_t d1) {
    g_t[g_n++] = (tlm_st_tensor){name, TLM_F32, ndim, {d0, d1}, data, 0};
}

/* Runs one optimiser; fills params_after [S,NP], lrs [S], norms [S]. */
static void run(bool adam, const tlm_lr_schedule *sched, float max_norm, const float *p0, const float *grads,
                float *after, float *lrs, float *norms) {
    float p[NP], g[NP], m[NP] = {0}, v[NP] = {0};
    memcpy(p, p0, sizeof p);
    const tlm_adamw aw = {0.9f, 0.95f, 1e-8f, 0.1f};
    const tlm_sgd sgd = {0.9f, 0.1f, 0.01f, false};
    for (int s = 0; s < S; s++) {
        memcpy(g, grads + s * NP, sizeof g);
        norms[s] = (float)tlm_clip_grad_norm(g, NP, max_norm);
        float lr = tlm_lr_at(sched, s);
        lrs[s] = lr;
        if (adam) tlm_adamw_update_spans(&aw, p, g, 1.0f, m, v, spans, 3, lr, s + 1);
        else tlm_sgd_update_spans(&sgd, p, g, 1.0f, m, spans, 3, lr, s + 1);
        memcpy(after + s * NP, p, sizeof p);
    }
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: dump_optim OUT.safetensors\n");
        return 2;
    }
    tlm_rng rng;
    tlm_rng_seed(&rng, 99);
    static float p0[NP], grads[S * NP];
    tlm_rng_fill_normal(&rng, p0, NP, 0.0f, 1.0f);
    for (int s = 0; s < S; s++) {
        float scale = (s % 3 == 0) ? 2.0f : 0.05f; /* clip on every third step */
        tlm_rng_fill_normal(&rng, grads + s * NP, NP, 0.0f, scale);
    }
    const float max_norm = 1.0f;
    tlm_lr_schedule cosine = {TLM_LR_COSINE, 1e-2f, 1e-3f, 3, 10};
    tlm_lr_schedule linear = {TLM_LR_LINEAR, 5e-2f, 5e-3f, 2, 9};

    static float adam_after[S * NP], adam_lr[S], adam_norm[S];
    static float sgd_after[S * NP], sgd_lr[S], sgd_norm[S];
    run(true, &cosine, max_norm, p0, grads, adam_after, adam_lr, adam_norm);
    run(false, &linear, max_norm, p0, grads, sgd_after, sgd_lr, sgd_norm);

    /* the three schedule kinds, warm-up 5, total 20, past the end */
    static float lr_kind[3][LR_STEPS];
    for (int k = 0; k < 3; k++) {
        tlm_lr_schedule s = {(tlm_lr_kind)k, 3e-3f, 3e-4f, 5, 20};
        for (int i = 0; i < LR_STEPS; i++) lr_kind[k][i] = tlm_lr_at(&s, i);
    }

    put("p0", p0, 1, NP, 0);
    put("grads", grads, 2, S, NP);
    put("adamw.after", adam_after, 2, S, NP);
    put("adamw.lr", adam_lr, 1, S, 0);
    put("adamw.norm", adam_norm, 1, S, 0);
    put("sgd.after", sgd_after, 2, S, NP);
    put("sgd.lr", sgd_lr, 1, S, 0);
    put("sgd.norm", sgd_norm, 1, S, 0);
    put("lr.constant", lr_kind[TLM_LR_CONSTANT], 1, LR_STEPS, 0);
    put("lr.cosine", lr_kind[TLM_LR_COSINE], 1, LR_STEPS, 0);
    put("lr.linear", lr_kind[TLM_LR_LINEAR], 1, LR_STEPS, 0);
    static const tlm_st_meta meta[] = {
        {"adamw", "{\"betas\":[0.9,0.95],\"eps\":1e-8,\"weight_decay\":0.1}"},
        {"adamw.schedule", "{\"kind\":\"cosine\",\"max_lr\":1e-2,\"min_lr\":1e-3,\"warmup\":3,\"total\":10}"},
        {"sgd", "{\"momentum\":0.9,\"dampening\":0.1,\"weight_decay\":0.01,\"nesterov\":false}"},
        {"sgd.schedule", "{\"kind\":\"linear\",\"max_lr\":5e-2,\"min_lr\":5e-3,\"warmup\":2,\"total\":9}"},
        {"lr.schedule", "{\"max_lr\":3e-3,\"min_lr\":3e-4,\"warmup\":5,\"total\":20}"},
        {"max_norm", "1.0"},
        {"spans", "[[0,30,true],[30,5,false],[35,12,true]]"},
    };
    tlm_err err;
    if (tlm_st_write(argv[1], g_t, g_n, meta, 7, &err) != 0) {
        fprintf(stderr, "dump_optim: %s\n", err.msg);
        return 1;
    }
    printf("dump_optim: wrote %d tensors to %s\n", g_n, argv[1]);
    return 0;
}
