/* The executor's hook for the data-parallel chain (model.h: grads_final):
 * during one CPU backward it tells every gradient float final exactly
 * once, in ranges from the block's end down to offset 0, and a range told
 * final is final: no later op of the backward changes it. Two backwards in
 * a row tell the same ranges; a model whose parameters fill several 1 MiB
 * buckets has some told before the backward's last op. The device's
 * backward (gpu_executor.c, on the emulated device, whose ops have run by
 * the time they are told) tells the very same ranges, each final too.
 *
 *   test_grads_final MODEL.so...   (tests/dist/models.tlm, compiled by dist.compile;
 *                                   TLM_TEST_DEVICE=emulated for the device's part) */
#include <stdint.h>

#include "model_util.h"

#define MAX_CALLS 4096

typedef struct seen {
    const tlm_model *m;
    float *snapshot;      /* each float's gradient when told final */
    unsigned char *count; /* times each float was told final */
    int64_t lo[MAX_CALLS], hi[MAX_CALLS];
    int calls;
    bool in_order; /* each range ends where the one before began */
    bool device;   /* m's gradients live on a device: brought to m->grads first */
} seen;

static void record(void *ctx, int64_t lo, int64_t hi) {
    seen *s = ctx;
    tlm_err err;
    if (s->device && !tlm_model_grads_to_host((tlm_model *)s->m, &err)) s->in_order = false;
    if (s->calls < MAX_CALLS) {
        s->lo[s->calls] = lo;
        s->hi[s->calls] = hi;
    }
    int64_t expected_hi = s->calls ? s->lo[s->calls - 1] : s->m->param_floats;
    if (s->calls >= MAX_CALLS || hi != expected_hi || lo >= hi) s->in_order = false;
    s->calls++;
    for (int64_t i = lo; i < hi && i >= 0 && i < s->m->param_floats; i++) {
        s->count[i]++;
        s->snapshot[i] = s->m->grads[i];
    }
}

/* The same model on the device, the same parameters and batch: the same
 * ranges as the CPU's (cpu), each unchanged after it was told final. */
static void check_device(const char *path, tlm_device *dev, const tlm_model *cpu_model, const seen *cpu,
                         const int32_t *tokens, const int32_t *targets, int64_t B, int64_t T) {
    tlm_model m;
    tlm_err err = {""};
    if (!tlm_model_create_on(&m, cpu_model->so, dev, TLM_PRECISION_FP32, B, T, true, 0, &err)) {
        CHECK(false, "%s: the model on the device: %s", path, err.msg);
        return;
    }
    size_t n = (size_t)m.param_floats;
    memcpy(m.params, cpu_model->params, n * sizeof(float));
    CHECK(tlm_model_params_to_device(&m, &err), "%s: %s", path, err.msg);
    seen *s = xcalloc(1, sizeof *s);
    s->m = &m;
    s->snapshot = xcalloc(n, sizeof(float));
    s->count = xcalloc(n, 1);
    s->in_order = true;
    s->device = true;
    m.grads_final = record;
    m.grads_final_ctx = s;
    tlm_model_zero_grads(&m);
    CHECK(isfinite(tlm_model_forward(&m, tokens, targets, B, T)), "%s: the device's forward", path);
    tlm_model_backward(&m, 1.0f);
    m.grads_final = NULL;
    CHECK(!tlm_model_device_error(&m) && tlm_model_grads_to_host(&m, &err), "%s: the device's backward: %s", path,
          tlm_model_device_error(&m) ? tlm_model_device_error(&m) : err.msg);
    bool same = s->in_order && s->calls == cpu->calls;
    for (int i = 0; same && i < s->calls && i < MAX_CALLS; i++) same = s->lo[i] == cpu->lo[i] && s->hi[i] == cpu->hi[i];
    CHECK(same, "%s: the device tells the CPU's ranges (%d calls, the CPU %d)", path, s->calls, cpu->calls);
    CHECK(memcmp(s->snapshot, m.grads, n * sizeof(float)) == 0,
          "%s: on the device every range unchanged after it was told final", path);
    printf("%s: the device told the same %d ranges\n", path, s->calls);
    free(s->snapshot);
    free(s->count);
    free(s);
    tlm_model_destroy(&m);
}

static void check_model(const char *path, tlm_device *dev) {
    tlm_so so;
    open_so(path, &so);
    tlm_model m;
    const int64_t B = 2, T = 16;
    create_model(&m, &so, B, T, true);
    m.threads = 1;
    init_test_params(&m, 7, 5.0, 0.2);
    size_t n = (size_t)m.param_floats;
    seen *s = xcalloc(1, sizeof *s);
    s->m = &m;
    s->snapshot = xcalloc(n, sizeof(float));
    s->count = xcalloc(n, 1);
    int32_t *tokens = xcalloc((size_t)(B * T), sizeof(int32_t)), *targets = xcalloc((size_t)(B * T), sizeof(int32_t));
    tlm_rng rng;
    tlm_rng_seed(&rng, 11);
    draw_batch(&rng, so.config->vocab, B, T, 0, tokens, targets);
    m.grads_final = record;
    m.grads_final_ctx = s;
    int64_t first_lo[2] = {0, 0};
    int calls[2] = {0, 0};
    for (int pass = 0; pass < 2; pass++) {
        s->calls = 0;
        s->in_order = true;
        memset(s->count, 0, n);
        tlm_model_zero_grads(&m);
        CHECK(isfinite(tlm_model_forward(&m, tokens, targets, B, T)), "%s: the forward", path);
        tlm_model_backward(&m, 1.0f);
        size_t once = 0;
        for (size_t i = 0; i < n; i++) once += s->count[i] == 1;
        CHECK(once == n, "%s: %zu of %zu gradient floats told final exactly once", path, once, n);
        CHECK(s->in_order && s->calls > 0 && s->lo[s->calls - 1] == 0,
              "%s: the ranges go down from the block's end to 0, each where the last began (%d calls)", path, s->calls);
        CHECK(memcmp(s->snapshot, m.grads, n * sizeof(float)) == 0, "%s: every range unchanged after it was told final",
              path);
        first_lo[pass] = s->lo[0];
        calls[pass] = s->calls;
    }
    CHECK(calls[0] == calls[1] && first_lo[0] == first_lo[1], "%s: a second backward tells the same ranges", path);
    if (dev) check_device(path, dev, &m, s, tokens, targets, B, T);
    /* The head's end is final after the head's backward, layer by layer
     * down, the embedding at the end: several ranges, the first not 0. */
    CHECK(calls[0] >= 3 && first_lo[0] > 0, "%s: the ranges come op by op, not all at the end (%d calls)", path,
          calls[0]);
    printf("%s: %zu floats in %d ranges, the first [%lld, %zu)\n", path, n, calls[0], (long long)first_lo[0], n);
    /* Without the hook the backward gives the same gradients. */
    float *with = xcalloc(n, sizeof(float));
    memcpy(with, m.grads, n * sizeof(float));
    m.grads_final = NULL;
    tlm_model_zero_grads(&m);
    tlm_model_forward(&m, tokens, targets, B, T);
    tlm_model_backward(&m, 1.0f);
    CHECK(memcmp(with, m.grads, n * sizeof(float)) == 0, "%s: the hook changes no gradient", path);
    free(with);
    free(tokens);
    free(targets);
    free(s->snapshot);
    free(s->count);
    free(s);
    tlm_model_destroy(&m);
    tlm_so_close(&so);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_grads_final MODEL.so...\n");
        return 2;
    }
    tlm_device *dev = NULL;
    if (getenv("TLM_TEST_DEVICE")) {
        tlm_err err;
        dev = tlm_device_open("cuda", &err);
        CHECK(dev != NULL, "the emulated device: %s", err.msg);
    }
    for (int i = 1; i < argc; i++) check_model(argv[i], dev);
    tlm_device_close(dev);
    return test_finish("grads_final");
}
