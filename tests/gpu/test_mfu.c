/* The two halves of MFU: the FLOPs of a training token (runtime/model/
 * flops.c) against a count by hand from each model's shapes, and the peak
 * table (runtime/device/gpu_peaks.c): known names, variants before their
 * family, an unknown GPU giving 0 (no MFU shown).
 *
 * usage: test_mfu MODEL.so...  (transformer or gated models, untied or
 * tied; titans models for the memory term) */
#include <math.h>
#include <stdio.h>

#include "flops.h"
#include "gpu_peaks.h"

static int failures;

static void expect_peak(const char *name, double want) {
    double got = tlm_gpu_peak_bf16_tflops(name);
    if (got != want) {
        printf("FAIL peak of \"%s\": %g, wanted %g\n", name, got, want);
        failures++;
    }
}

/* 6 N + the mixer term, N from the layer table's widths. */
static double by_hand(const tlm_so *so, int64_t T) {
    const tlm_abi_config *c = so->config;
    double D = (double)c->d_model, A = (double)(c->heads * c->head_dim), V = (double)c->vocab, n = V * D;
    for (int64_t l = 0; l < c->layers; l++) {
        double W = (double)so->layers[l].width;
        n += 4 * A * D + (c->mlp == TLM_MLP_SWIGLU ? 3 : 2) * W * D;
        if (c->mixer == TLM_MIXER_GATED_ATTENTION) n += (c->gate == TLM_GATE_HEADWISE ? (double)c->heads : A) * D;
        if (c->mixer == TLM_MIXER_TITANS) n += A * D + 3 * (double)c->heads * D; /* output gate, theta/eta/alpha */
    }
    double hd = (double)c->head_dim, H = (double)c->heads;
    double mixer = c->mixer == TLM_MIXER_TITANS ? 24 * H * hd * hd : 12 * A * (double)T;
    return 6 * n + (double)c->layers * mixer;
}

int main(int argc, char **argv) {
    expect_peak("NVIDIA H200", 989);
    expect_peak("NVIDIA H100 80GB HBM3", 989);
    expect_peak("NVIDIA H100 PCIe", 756);
    expect_peak("NVIDIA H800 PCIe", 756);
    expect_peak("NVIDIA H800", 989);
    expect_peak("NVIDIA A100-SXM4-80GB", 312);
    expect_peak("NVIDIA L40S", 362);
    expect_peak("NVIDIA L40", 181);
    expect_peak("NVIDIA L4", 121);
    expect_peak("NVIDIA H200 NVL", 835);
    expect_peak("NVIDIA GH200 480GB", 989);
    expect_peak("NVIDIA A10G", 70);
    expect_peak("NVIDIA A10", 125);
    expect_peak("NVIDIA RTX A1000", 0); /* not an A100 */
    expect_peak("NVIDIA RTX A1000 6GB Laptop GPU", 0);
    expect_peak("NVIDIA GeForce GTX 1080", 0);
    expect_peak("emulated CUDA device (CPU)", 0);
    for (int i = 1; i < argc; i++) {
        tlm_so so;
        tlm_err err = {""};
        if (!tlm_so_open(argv[i], &so, &err)) {
            printf("FAIL %s: %s\n", argv[i], err.msg);
            failures++;
            continue;
        }
        int64_t T = so.config->context;
        double got = tlm_train_flops_per_token(&so, T), want = by_hand(&so, T);
        bool ok = fabs(got - want) <= 1e-12 * want;
        printf("%s %s: %.6g FLOPs per token (by hand %.6g)\n", ok ? "ok" : "FAIL", tlm_so_str(&so, so.config->name),
               got, want);
        failures += !ok;
        tlm_so_close(&so);
    }
    return failures != 0;
}
