/* Sampling with a KV cache (model.h: tlm_model_cache_open, _prefill,
 * _decode) against full recomputation: for each model, random parameters
 * and tokens, a prefill of the first tokens, then one decoded token at a
 * time up to the context; every logit of every position against the CPU's
 * full forward over the same prefix. On the CPU, and with --device on the
 * device (the emulated one under TLM_TEST_DEVICE=emulated) in fp32.
 *
 * Bound per element: 1e-5 |full| + 1e-5 max|full row|. The two compute the
 * same sums (the decode attention is the row n - 1 of the training one; on
 * the device an online softmax over tiles of keys), in another order for
 * the attention's and the GEMMs' sums: a few float roundings apart.
 * Titans keeps its memory's state instead (M, S and the chunk's M0 per
 * head), walked token by token; the prefix of 5 tokens ends mid-chunk, so
 * the decoded tokens cross chunk boundaries from both states.
 *
 * usage: test_kv_cache [--device] MODEL.so... */
#include "model_util.h"

static const double REL = 1e-5, ABS_FLOOR = 1e-5;

/* The worst |a - b| / bound over one row of logits. */
static double row_ratio(const float *got, const float *want, int64_t V) {
    double scale = 0, worst = 0;
    for (int64_t i = 0; i < V; i++) scale = fmax(scale, fabs((double)want[i]));
    for (int64_t i = 0; i < V; i++) {
        double r = fabs((double)got[i] - want[i]) / (REL * fabs((double)want[i]) + ABS_FLOOR * scale);
        if (!(r <= worst)) worst = r;
    }
    return worst;
}

static void run_model(const char *path, tlm_device *dev) {
    tlm_so so;
    open_so(path, &so);
    const char *name = tlm_so_str(&so, so.config->name);
    const int64_t T = so.config->context < 24 ? so.config->context : 24, V = so.config->vocab;
    tlm_model full, kv;
    tlm_err err = {""};
    create_model(&full, &so, 1, T, false);
    if (!tlm_model_create_on(&kv, &so, dev, TLM_PRECISION_FP32, 1, T, false, 0, &err)) {
        CHECK(false, "%s: %s", name, err.msg);
        tlm_model_destroy(&full);
        tlm_so_close(&so);
        return;
    }
    init_test_params(&full, 3, 5.0, 0.2);
    memcpy(kv.params, full.params, (size_t)full.param_floats * sizeof(float));
    CHECK(tlm_model_params_to_device(&kv, &err), "%s", err.msg);
    const bool opened = tlm_model_cache_open(&kv, &err);
    if (!opened) {
        CHECK(false, "%s: %s", name, err.msg);
    } else {
        int32_t *tokens = xcalloc((size_t)T, sizeof *tokens);
        tlm_rng rng;
        tlm_rng_seed(&rng, 5);
        for (int64_t i = 0; i < T; i++) tokens[i] = (int32_t)tlm_rng_below(&rng, (uint64_t)V);
        const int64_t prefix = 5 < T ? 5 : T;
        double worst = 0;
        bool ok = tlm_model_prefill(&kv, tokens, prefix);
        CHECK(ok, "%s prefill: %s", name, tlm_model_device_error(&kv) ? tlm_model_device_error(&kv) : "refused");
        const float *got = ok ? tlm_model_logits(&kv) : NULL;
        tlm_model_forward(&full, tokens, NULL, 1, prefix);
        for (int64_t t = 0; got && t < prefix; t++)
            worst = fmax(worst, row_ratio(got + t * V, tlm_model_logits(&full) + t * V, V));
        for (int64_t pos = prefix; ok && pos < T; pos++) {
            ok = tlm_model_decode(&kv, tokens[pos], pos);
            CHECK(ok, "%s decode at %lld: %s", name, (long long)pos,
                  tlm_model_device_error(&kv) ? tlm_model_device_error(&kv) : "refused");
            if (!ok || !(got = tlm_model_logits(&kv))) break;
            tlm_model_forward(&full, tokens, NULL, 1, pos + 1);
            worst = fmax(worst, row_ratio(got, tlm_model_logits(&full) + pos * V, V));
        }
        CHECK(worst <= 1.0, "%s: decoded logits %.2f of the bound from the full forward's", name, worst);
        CHECK(!tlm_model_decode(&kv, tokens[0], T), "%s: a decode past the context was accepted", name);
        printf("%-20s %lld positions (%lld prefilled), worst logit %.3f of the bound\n", name, (long long)T,
               (long long)prefix, worst);
        free(tokens);
    }
    tlm_model_destroy(&kv);
    tlm_model_destroy(&full);
    tlm_so_close(&so);
}

int main(int argc, char **argv) {
    int first = 1;
    tlm_device *dev = NULL;
    tlm_err err = {""};
    if (argc > 1 && !strcmp(argv[1], "--device")) {
        first = 2;
        if (!(dev = tlm_device_open("cuda", &err))) {
            printf("FAIL: cannot open the device: %s\n", err.msg);
            return 1;
        }
    }
    if (argc <= first) {
        fprintf(stderr, "usage: test_kv_cache [--device] MODEL.so...\n");
        return 2;
    }
    tlm_set_num_threads(2);
    for (int i = first; i < argc; i++) run_model(argv[i], dev);
    if (dev) tlm_device_close(dev);
    return test_finish("test_kv_cache");
}
