/* CUDA graphs in the device executor (docs/gpu.md, "CUDA graphs"), on the
 * emulated device: for each model.so given, in fp32 and in bf16, two
 * copies of the model train the same batches from the same parameters,
 * one op by op (TLM_CUDA_GRAPHS=0) and one from graphs, and every loss,
 * gradient norm and parameter must be the same bits. The graphs must have
 * been used: the forward and the backward captured once each and replayed
 * from the third step on (the first run of a shape is its warm-up, the
 * second its capture). Micro-batches of 2 (dloss = 1/2, which only the
 * loss's backward, run outside the graphs, reads) and hope_attention's
 * slow CMS level (updated every third step by the trainer) are in it.
 * Evaluation-shaped forwards (another batch size; no targets) follow, the
 * same on both, and so are the gradients of backwards with a dloss that
 * changes each time.
 *
 * usage: test_gpu_graphs MODEL.so... */
#include <stdlib.h>

#include "gpu_model.h"
#include "graph_cache.h"
#include "model_util.h"
#include "tlm_train_settings.h"
#include "trainer.h"

enum { B = 2, ACCUMULATE = 2, STEPS = 6 };

/* The trainer's batch is ACCUMULATE micro-batches of B sequences. */

/* Runs one trainer step with graphs on or off. */
static tlm_step_result step_with(bool graphs, tlm_trainer *t, const int32_t *tokens, const int32_t *targets,
                                 int64_t T) {
    if (graphs) unsetenv("TLM_CUDA_GRAPHS");
    else setenv("TLM_CUDA_GRAPHS", "0", 1);
    tlm_step_result r = tlm_trainer_step(t, tokens, targets, T);
    unsetenv("TLM_CUDA_GRAPHS");
    return r;
}

static double forward_with(bool graphs, tlm_model *m, const int32_t *tokens, const int32_t *targets, int64_t b,
                           int64_t T) {
    if (!graphs) setenv("TLM_CUDA_GRAPHS", "0", 1);
    double loss = tlm_model_forward(m, tokens, targets, b, T);
    unsetenv("TLM_CUDA_GRAPHS");
    return loss;
}

static bool same_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

static void run_model(const char *path, tlm_device *dev, tlm_precision precision) {
    tlm_so so;
    open_so(path, &so);
    const int64_t T = so.config->context < 12 ? so.config->context : 12;
    const char *model = tlm_so_str(&so, so.config->name);
    const char *prec = precision == TLM_PRECISION_BF16 ? "bf16" : "fp32";
    tlm_model plain, graphed;
    tlm_err err = {""};
    if (!tlm_model_create_on(&plain, &so, dev, precision, B, T, true, 0, &err) ||
        !tlm_model_create_on(&graphed, &so, dev, precision, B, T, true, 0, &err)) {
        printf("FAIL %s %s: cannot create the model on the device: %s\n", model, prec, err.msg);
        g_failures++;
        tlm_so_close(&so);
        return;
    }
    init_test_params(&plain, 7, 5.0, 0.2);
    memcpy(graphed.params, plain.params, (size_t)plain.param_floats * sizeof(float));
    CHECK(tlm_model_params_to_device(&plain, &err) && tlm_model_params_to_device(&graphed, &err), "%s", err.msg);

    const size_t n = (size_t)(ACCUMULATE * B * T);
    int32_t *tokens = xcalloc(n, sizeof *tokens), *targets = xcalloc(n, sizeof *targets);
    tlm_rng rng;
    tlm_rng_seed(&rng, 11);
    tlm_abi_train s = *so.train;
    tlm_train_resolve_defaults(&s);
    s.batch = ACCUMULATE * B, s.accumulate = ACCUMULATE, s.context = T, s.steps = 10, s.warmup = 1, s.grad_clip = 1.0;
    tlm_trainer tp, tg;
    bool made = tlm_trainer_create(&tp, &plain, &s, false, &err) && tlm_trainer_create(&tg, &graphed, &s, false, &err);
    CHECK(made, "%s: %s", model, err.msg);
    int differing = 0;
    if (made) {
        CHECK(tlm_trainer_to_device(&tp, &err) && tlm_trainer_to_device(&tg, &err), "%s", err.msg);
        for (int k = 0; k < STEPS; k++) {
            draw_batch(&rng, so.config->vocab, ACCUMULATE * B, T, 2, tokens, targets);
            tlm_step_result rp = step_with(false, &tp, tokens, targets, T);
            tlm_step_result rg = step_with(true, &tg, tokens, targets, T);
            CHECK(rg.finite && !tlm_model_device_error(&graphed), "%s %s step %d: %s", model, prec, k + 1,
                  tlm_model_device_error(&graphed) ? tlm_model_device_error(&graphed) : "not finite");
            CHECK(same_bits(rg.loss, rp.loss) && same_bits(rg.grad_norm, rp.grad_norm),
                  "%s %s step %d: loss %.17g norm %.17g with graphs, %.17g %.17g without", model, prec, k + 1, rg.loss,
                  rg.grad_norm, rp.loss, rp.grad_norm);
        }
        CHECK(tlm_trainer_to_host(&tp, &err) && tlm_trainer_to_host(&tg, &err), "%s", err.msg);
        for (int64_t i = 0; i < plain.param_floats; i++)
            differing += memcmp(&plain.params[i], &graphed.params[i], sizeof(float)) != 0;
        CHECK(differing == 0, "%s %s: %d of %lld parameters differ with graphs", model, prec, differing,
              (long long)plain.param_floats);
        tlm_trainer_destroy(&tp);
        tlm_trainer_destroy(&tg);
    }
    tlm_graph_stats st = tlm_graph_cache_stats(graphed.gpu->graphs);
    /* forward and backward captured at step 2 (the micro-batches of step 1
     * warm up), then launched for every later micro-batch */
    CHECK(st.captures == 2 && st.launches == 2 * (uint64_t)(ACCUMULATE * STEPS - 1) && !st.disabled,
          "%s %s: %llu graphs captured, %llu launched (expected 2 and %d)", model, prec,
          (unsigned long long)st.captures, (unsigned long long)st.launches, 2 * (ACCUMULATE * STEPS - 1));
    CHECK(tlm_graph_cache_stats(plain.gpu->graphs).launches == 0, "%s %s: graphs launched with TLM_CUDA_GRAPHS=0",
          model, prec);

    /* dloss changing from one backward to the next (a caller other than
     * the trainer may do that): loss_backward reads it as an argument, so
     * it stays outside the graphs, and the gradients follow it */
    static const float dlosses[] = {0.5f, 0.25f, 2.0f, 3.0f};
    for (int r = 0; r < 4; r++) {
        tlm_model_zero_grads(&plain);
        tlm_model_zero_grads(&graphed);
        forward_with(false, &plain, tokens, targets, B, T);
        forward_with(true, &graphed, tokens, targets, B, T);
        setenv("TLM_CUDA_GRAPHS", "0", 1);
        tlm_model_backward(&plain, dlosses[r]);
        unsetenv("TLM_CUDA_GRAPHS");
        tlm_model_backward(&graphed, dlosses[r]);
        CHECK(tlm_model_grads_to_host(&plain, &err) && tlm_model_grads_to_host(&graphed, &err), "%s", err.msg);
        int64_t first = -1;
        for (int64_t i = 0; i < plain.param_floats && first < 0; i++)
            if (memcmp(&plain.grads[i], &graphed.grads[i], sizeof(float)) != 0) first = i;
        CHECK(first < 0, "%s %s: dloss %g: gradient %lld differs with graphs (%g, %g without)", model, prec, dlosses[r],
              (long long)first, first < 0 ? 0.0 : graphed.grads[first], first < 0 ? 0.0 : plain.grads[first]);
    }

    /* evaluation shapes: batch 1 with targets, batch 2 without (three runs
     * each: warm-up, capture, launch) */
    for (int r = 0; r < 3; r++) {
        double lp = forward_with(false, &plain, tokens, targets, 1, T);
        double lg = forward_with(true, &graphed, tokens, targets, 1, T);
        CHECK(same_bits(lp, lg), "%s %s eval %d: loss %.17g with graphs, %.17g without", model, prec, r, lg, lp);
        forward_with(false, &plain, tokens, NULL, B, T);
        forward_with(true, &graphed, tokens, NULL, B, T);
        CHECK(!tlm_model_device_error(&graphed), "%s", tlm_model_device_error(&graphed));
        const float *xp = tlm_model_logits(&plain), *xg = tlm_model_logits(&graphed);
        const size_t logits = (size_t)(B * T) * (size_t)so.config->vocab * sizeof(float);
        CHECK(xp && xg && memcmp(xp, xg, logits) == 0, "%s %s: logits without targets differ with graphs", model, prec);
    }
    CHECK(tlm_graph_cache_stats(graphed.gpu->graphs).captures == 4,
          "%s %s: the evaluation shapes were not captured (%llu)", model, prec,
          (unsigned long long)tlm_graph_cache_stats(graphed.gpu->graphs).captures);
    printf("%-16s %s: %d steps bit-identical with graphs (%llu graph launches), %d parameters differ\n", model, prec,
           STEPS, (unsigned long long)tlm_graph_cache_stats(graphed.gpu->graphs).launches, differing);
    free(tokens);
    free(targets);
    tlm_model_destroy(&graphed);
    tlm_model_destroy(&plain);
    tlm_so_close(&so);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_gpu_graphs MODEL.so...\n");
        return 2;
    }
    tlm_set_num_threads(1);
    tlm_device *dev = open_test_device();
    for (int i = 1; i < argc; i++) {
        run_model(argv[i], dev, TLM_PRECISION_FP32);
        run_model(argv[i], dev, TLM_PRECISION_BF16);
    }
    tlm_device_close(dev);
    return test_finish("test_gpu_graphs");
}
