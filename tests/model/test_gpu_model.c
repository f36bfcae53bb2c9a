/* Whole models on the emulated device against the CPU runtime (fp32, and
 * bf16 with bounds of its own, see bf16_model): for
 * each model.so given, the same parameters and batch through both
 * executors, then the loss, every gradient, and the parameters after a few
 * optimizer steps (AdamW, clipping, the model's schedule; hope_attention's
 * slow CMS levels included) compared element by element.
 *
 * Bound: |gpu - cpu| <= REL |cpu| + ABS_FLOOR max|tensor| per element, per
 * tensor. The two sides differ only in summation order (OpenBLAS's GEMMs
 * and the CPU ops' loops against the emulated device's plain GEMM and the
 * kernels' block reductions), so the difference is a few float32 roundings
 * of the largest terms summed: ~1e-7 of the tensor's scale per rounding.
 * The floor is relative to the tensor's largest element because a small
 * element of a sum is the difference of large terms and carries their
 * rounding. The loss: |gpu - cpu| <= REL |cpu|.
 *
 * The optimizer steps use AdamW with eps = 1e-3 instead of 1e-8: with a
 * tiny eps the first update is lr sign(g) for every element, so an element
 * whose gradient is rounding noise (~1e-9) moves by a whole lr one way on
 * one side and the other way on the other. A larger eps keeps the update a
 * smooth function of the gradient, so the comparison tests the device's
 * optimizer path rather than the conditioning of Adam at eps 1e-8 (gpu.optim
 * checks the update kernels themselves bit for bit).
 *
 * The emulated device is selected by TLM_TEST_DEVICE=emulated (ctest sets
 * it); without it the test opens a real GPU when there is one.
 *
 * usage: test_gpu_model MODEL.so... */
#include "model_util.h"
#include "trainer.h"

static const double REL = 1e-5;
static const double ABS_FLOOR = 1e-5;
enum { B = 2, STEPS = 3 };

typedef struct worst {
    double ratio;  /* the largest |diff| / bound seen: <= 1 passes */
    double diff;
} worst;

/* Compares one tensor; returns the worst |diff| / bound. */
static double compare(const char *what, const char *name, const float *cpu, const float *gpu, int64_t n) {
    double scale = 0;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs((double)cpu[i]));
    double ratio = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)gpu[i] - (double)cpu[i]);
        double bound = REL * fabs((double)cpu[i]) + ABS_FLOOR * scale;
        double r = bound > 0 ? d / bound : (d > 0 ? INFINITY : 0);
        if (!(r <= ratio)) ratio = r, at = i;  /* NaN counts as worst */
    }
    CHECK(ratio <= 1.0, "%s %s[%lld]: gpu %.9g cpu %.9g (%.2f of the bound)", what, name, (long long)at, gpu[at],
          cpu[at], ratio);
    return ratio;
}

/* bf16 (the device's default) from the same parameters and batch: the
 * loss within BF16_LOSS of the CPU's fp32 loss, relative, and each
 * gradient within BF16_GRAD of the CPU's in norm, relative:
 * ||g_bf16 - g_cpu|| <= BF16_GRAD ||g_cpu||. Rounding a GEMM operand to
 * bf16 perturbs it by at most u = 2^-8 relative; a gradient is a chain of
 * a few GEMMs per layer, so its first-order error is a few u in the worst
 * case and, the roundings being independent, far less in norm. The bounds
 * (2^-10 for the loss, 8u = 2^-5 for gradients) leave room for the odd
 * sizes and titans' memory; docs/gpu.md gives the measured values. */
static const double BF16_LOSS = 1.0 / 1024, BF16_GRAD = 1.0 / 32;

static void bf16_model(const tlm_so *so, tlm_device *dev, const tlm_model *cpu, const int32_t *tokens,
                       const int32_t *targets, int64_t T, double cpu_loss) {
    const char *model = tlm_so_str(so, so->config->name);
    tlm_model g;
    tlm_err err = {""};
    if (!tlm_model_create_on(&g, so, dev, TLM_PRECISION_BF16, B, T, true, 0, &err)) {
        CHECK(false, "%s: cannot create the bf16 model: %s", model, err.msg);
        return;
    }
    memcpy(g.params, cpu->params, (size_t)cpu->param_floats * sizeof(float));
    CHECK(tlm_model_params_to_device(&g, &err), "%s", err.msg);
    tlm_model_zero_grads(&g);
    double loss = tlm_model_forward(&g, tokens, targets, B, T);
    tlm_model_backward(&g, 1.0f);
    CHECK(!tlm_model_device_error(&g), "%s bf16: %s", model, tlm_model_device_error(&g));
    CHECK(tlm_model_grads_to_host(&g, &err), "%s", err.msg);
    double dloss = fabs(loss - cpu_loss) / fabs(cpu_loss), worst = 0;
    CHECK(dloss <= BF16_LOSS, "%s bf16 loss %.9g, fp32 CPU %.9g: %.3g relative", model, loss, cpu_loss, dloss);
    CHECK(loss != cpu_loss, "%s bf16 loss equals fp32's: nothing was rounded", model);
    for (uint32_t i = 0; i < so->header->nparams; i++) {
        const float *a = tlm_model_grad(&g, (int)i), *b = tlm_model_grad(cpu, (int)i);
        double num = 0, den = 0;
        for (int64_t e = 0; e < so->params[i].count; e++)
            num += ((double)a[e] - b[e]) * ((double)a[e] - b[e]), den += (double)b[e] * b[e];
        double r = den > 0 ? sqrt(num / den) : sqrt(num);
        CHECK(r <= BF16_GRAD, "%s bf16 gradient %s: %.3g relative in norm", model, tlm_so_str(so, so->params[i].name),
              r);
        if (!(r <= worst)) worst = r;
    }
    printf("%-20s bf16: loss %.2g relative, worst gradient %.2g relative in norm\n", model, dloss, worst);
    tlm_model_destroy(&g);
}

static void run_model(const char *path, tlm_device *dev) {
    tlm_so so;
    open_so(path, &so);
    const int64_t T = so.config->context < 12 ? so.config->context : 12;
    const char *model = tlm_so_str(&so, so.config->name);
    tlm_model cpu, gpu;
    tlm_err err = {""};
    create_model(&cpu, &so, B, T, true);
    if (!tlm_model_create_on(&gpu, &so, dev, TLM_PRECISION_FP32, B, T, true, 0, &err)) {
        printf("FAIL %s: cannot create the model on the device: %s\n", model, err.msg);
        g_failures++;
        tlm_model_destroy(&cpu);
        tlm_so_close(&so);
        return;
    }
    init_test_params(&cpu, 7, 5.0, 0.2);
    memcpy(gpu.params, cpu.params, (size_t)cpu.param_floats * sizeof(float));
    CHECK(tlm_model_params_to_device(&gpu, &err), "%s", err.msg);

    int32_t *tokens = xcalloc((size_t)(B * T), sizeof *tokens), *targets = xcalloc((size_t)(B * T), sizeof *targets);
    tlm_rng rng;
    tlm_rng_seed(&rng, 11);
    draw_batch(&rng, so.config->vocab, B, T, 2, tokens, targets);

    /* one forward and backward */
    tlm_model_zero_grads(&cpu);
    tlm_model_zero_grads(&gpu);
    double lc = tlm_model_forward(&cpu, tokens, targets, B, T);
    double lg = tlm_model_forward(&gpu, tokens, targets, B, T);
    tlm_model_backward(&cpu, 1.0f);
    tlm_model_backward(&gpu, 1.0f);
    CHECK(!tlm_model_device_error(&gpu), "%s: %s", model, tlm_model_device_error(&gpu));
    CHECK(fabs(lg - lc) <= REL * fabs(lc), "%s loss: gpu %.9g cpu %.9g", model, lg, lc);
    CHECK(tlm_model_grads_to_host(&gpu, &err), "%s", err.msg);
    double worst_grad = 0, worst_param = 0;
    for (uint32_t i = 0; i < so.header->nparams; i++)
        worst_grad =
            fmax(worst_grad, compare("gradient", tlm_so_str(&so, so.params[i].name), tlm_model_grad(&cpu, (int)i),
                                     tlm_model_grad(&gpu, (int)i), so.params[i].count));

    bf16_model(&so, dev, &cpu, tokens, targets, T, lc);

    /* a few optimizer steps from the same start */
    tlm_abi_train s = *so.train;
    s.batch = B, s.accumulate = 1, s.context = T, s.steps = 10, s.warmup = 1, s.grad_clip = 1.0;
    s.eps = 1e-3;
    tlm_trainer tc, tg;
    bool made = tlm_trainer_create(&tc, &cpu, &s, false, &err) && tlm_trainer_create(&tg, &gpu, &s, false, &err);
    CHECK(made, "%s: %s", model, err.msg);
    if (made) {
        CHECK(tlm_trainer_to_device(&tg, &err), "%s", err.msg);
        for (int k = 0; k < STEPS; k++) {
            draw_batch(&rng, so.config->vocab, B, T, 0, tokens, targets);
            tlm_step_result rc = tlm_trainer_step(&tc, tokens, targets, T);
            tlm_step_result rg = tlm_trainer_step(&tg, tokens, targets, T);
            CHECK(rg.finite && !tlm_model_device_error(&gpu), "%s step %d: %s", model, k + 1,
                  tlm_model_device_error(&gpu) ? tlm_model_device_error(&gpu) : "not finite");
            CHECK(fabs(rg.loss - rc.loss) <= REL * fabs(rc.loss), "%s step %d loss: gpu %.9g cpu %.9g", model, k + 1,
                  rg.loss, rc.loss);
            CHECK(fabs(rg.grad_norm - rc.grad_norm) <= REL * rc.grad_norm, "%s step %d norm: gpu %.9g cpu %.9g", model,
                  k + 1, rg.grad_norm, rc.grad_norm);
        }
        CHECK(tlm_trainer_to_host(&tg, &err), "%s", err.msg);
        for (uint32_t i = 0; i < so.header->nparams; i++)
            worst_param = fmax(worst_param,
                               compare("parameter", tlm_so_str(&so, so.params[i].name), tlm_model_param(&cpu, (int)i),
                                       tlm_model_param(&gpu, (int)i), so.params[i].count));
        tlm_trainer_destroy(&tc);
        tlm_trainer_destroy(&tg);
    }
    printf("%-20s loss %.7f (diff %.2g), worst gradient %.3f and parameter %.3f of the bound\n", model, lc,
           fabs(lg - lc), worst_grad, worst_param);
    free(tokens);
    free(targets);
    tlm_model_destroy(&gpu);
    tlm_model_destroy(&cpu);
    tlm_so_close(&so);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_gpu_model MODEL.so...\n");
        return 2;
    }
    tlm_set_num_threads(2);
    tlm_err err = {""};
    tlm_device *dev = tlm_device_open("cuda", &err);
    if (!dev) {
        printf("FAIL: cannot open the device: %s\n", err.msg);
        return 1;
    }
    for (int i = 1; i < argc; i++) run_model(argv[i], dev);
    tlm_device_close(dev);
    return test_finish("test_gpu_model");
}
