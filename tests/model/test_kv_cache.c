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
 * With --bf16 (and --device), both sides are the device in --precision
 * bf16: the cached model, whose cache holds bf16 rows of qkv where the plan
 * stores qkv in bf16 (every attention model here; Titans keeps its fp32
 * state), against the full forward recomputed on the device in bf16. They
 * read the same bf16 weights and, row for row, the same rounded
 * activations, except where an fp32 sum before a rounding runs in another
 * order (the decode kernel's online softmax over the cache against the
 * training kernel's tiles; on a GPU, cuBLASLt may also sum a one-row GEMM
 * in another order): there a stored bf16 value can round to its
 * neighbour, one rounding of u = 2^-8 relative. The bound is that
 * rounding's size on the row's scale, u max|full row| per element, next to
 * the fp32 bound's few float roundings; a cache read at the wrong rows or
 * in the wrong storage is off by the logits' own size. The cache's bytes
 * are checked to be half the fp32 cache's.
 *
 * Titans in bf16 is never bit for bit: the walk's token steps and the
 * forward's chunk-parallel kernel sum the memory's read-out y in another
 * order (a few float roundings apart, the fp32 bound above), and y reaches
 * the logits through values stored in bf16 (y itself, its norm, the gated
 * output, then the next layers' activations, and the logits themselves).
 * Where the two sides' y differ, such a value can round to its neighbour:
 * one ulp, up to 2u of the value (bf16 keeps 8 significant bits). At the
 * logits that is up to 2u max|row|; a neighbour upstream moves a logit by
 * that value's ulp times its weight in the logit, a fraction of the
 * logit's own ulp for the small values the flips hit. The bound for Titans
 * is 4u max|row| per element: the logit's own neighbour, and as much again
 * for the flips before it (measured on tiny_titans: 1.86 u; 1.79 u with
 * its memory's read-out y kept in fp32, 2.87 u with q, k, v too). A cache read at the wrong rows, or a
 * state walked with another token's q, k, v, is off by the logits' size.
 *
 * usage: test_kv_cache [--device [--bf16]] MODEL.so... */
#include "gpu_model.h"
#include "kv_bound.h"
#include "model_util.h"

static const double ABS_FLOOR = 1e-5, BF16_FLOOR = 1.0 / 256, BF16_FLOOR_TITANS = 4.0 / 256;

/* The reference: the full forward, on the CPU, or (bf16) on the device in
 * bf16 from the same parameters. */
static bool create_full(tlm_model *full, const tlm_so *so, tlm_device *dev, bool bf16, int64_t T, tlm_err *err) {
    if (!bf16) {
        create_model(full, so, 1, T, false);
        return true;
    }
    return tlm_model_create_on(full, so, dev, TLM_PRECISION_BF16, 1, T, false, 0, err);
}

/* bf16: the cache's storage and bytes, from the device's count of what
 * opening it allocated. */
static void check_cache_bytes(const tlm_model *kv, const char *name, uint64_t bytes) {
    const tlm_abi_config *c = kv->so->config;
    if (c->mixer == TLM_MIXER_TITANS) {
        CHECK(!kv->gpu->kv_bf16 && bytes >= tlm_kv_state_floats(c) * sizeof(float), "%s: titans' state: %llu bytes",
              name, (unsigned long long)bytes);
        return;
    }
    const uint64_t elems = (uint64_t)c->layers * (uint64_t)kv->T * 3 * (uint64_t)(c->heads * c->head_dim);
    CHECK(kv->gpu->kv_bf16 && bytes >= elems * 2 && bytes < elems * 2 + 256,
          "%s: a KV cache of %llu bf16 elements took %llu bytes (%s)", name, (unsigned long long)elems,
          (unsigned long long)bytes, kv->gpu->kv_bf16 ? "bf16" : "fp32");
    printf("%-20s KV cache %llu bytes in bf16 (fp32: %llu)\n", name, (unsigned long long)bytes,
           (unsigned long long)(elems * 4));
}

static void run_model(const char *path, tlm_device *dev, bool bf16) {
    tlm_so so;
    open_so(path, &so);
    const char *name = tlm_so_str(&so, so.config->name);
    const int64_t T = so.config->context < 24 ? so.config->context : 24, V = so.config->vocab;
    tlm_model full, kv;
    tlm_err err = {""};
    if (!create_full(&full, &so, dev, bf16, T, &err)) {
        CHECK(false, "%s: %s", name, err.msg);
        tlm_so_close(&so);
        return;
    }
    tlm_precision precision = bf16 ? TLM_PRECISION_BF16 : TLM_PRECISION_FP32;
    if (!tlm_model_create_on(&kv, &so, dev, precision, 1, T, false, 0, &err)) {
        CHECK(false, "%s: %s", name, err.msg);
        tlm_model_destroy(&full);
        tlm_so_close(&so);
        return;
    }
    init_test_params(&full, 3, 5.0, 0.2);
    memcpy(kv.params, full.params, (size_t)full.param_floats * sizeof(float));
    CHECK(tlm_model_params_to_device(&kv, &err), "%s", err.msg);
    CHECK(!bf16 || tlm_model_params_to_device(&full, &err), "%s", err.msg);
    const uint64_t before = dev ? tlm_device_memory_in_use(dev) : 0;
    const bool opened = tlm_model_cache_open(&kv, &err);
    if (opened && bf16) check_cache_bytes(&kv, name, tlm_device_memory_in_use(dev) - before);
    const bool titans = so.config->mixer == TLM_MIXER_TITANS;
    const double floor = !bf16 ? ABS_FLOOR : titans ? BF16_FLOOR_TITANS : BF16_FLOOR;
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
            worst = fmax(worst, kv_row_ratio(got + t * V, tlm_model_logits(&full) + t * V, V, floor));
        for (int64_t pos = prefix; ok && pos < T; pos++) {
            ok = tlm_model_decode(&kv, tokens[pos], pos);
            CHECK(ok, "%s decode at %lld: %s", name, (long long)pos,
                  tlm_model_device_error(&kv) ? tlm_model_device_error(&kv) : "refused");
            if (!ok || !(got = tlm_model_logits(&kv))) break;
            tlm_model_forward(&full, tokens, NULL, 1, pos + 1);
            worst = fmax(worst, kv_row_ratio(got, tlm_model_logits(&full) + pos * V, V, floor));
        }
        CHECK(worst <= 1.0, "%s: decoded logits %.2f of the bound from the full forward's", name, worst);
        CHECK(!tlm_model_decode(&kv, tokens[0], T), "%s: a decode past the context was accepted", name);
        printf("%-20s %s%lld positions (%lld prefilled), worst logit %.3g of the bound\n", name, bf16 ? "bf16: " : "",
               (long long)T, (long long)prefix, worst);
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
    const bool on_device = argc > 1 && !strcmp(argv[1], "--device");
    const bool bf16 = on_device && argc > 2 && !strcmp(argv[2], "--bf16");
    first += on_device + bf16;
    if (argc <= first) {
        fprintf(stderr, "usage: test_kv_cache [--device [--bf16]] MODEL.so...\n");
        return 2;
    }
    if (on_device && !(dev = tlm_device_open("cuda", &err))) {
        printf("FAIL: cannot open the device: %s\n", err.msg);
        return 1;
    }
    tlm_set_num_threads(2);
    for (int i = first; i < argc; i++) run_model(argv[i], dev, bf16);
    if (dev) tlm_device_close(dev);
    return test_finish("test_kv_cache");
}
