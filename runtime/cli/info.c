/* tlm-run info: what a compiled model holds — settings, training defaults,
 * the layer table, kernels, parameters and memory plans. */
#include <stdio.h>
#include <string.h>

#include "arena_plan.h"
#include "commands.h"
#include "model_so.h"
#include "tlm_train_settings.h"

static const char *mixer_name(uint32_t m) {
    static const char *names[] = {"attention", "gated_attention", "titans", "hope_attention"};
    return m < 4 ? names[m] : "?";
}

static void commas(char *buf, size_t n, long long v) {
    char digits[32];
    int k = snprintf(digits, sizeof digits, "%lld", v < 0 ? -v : v), j = 0, out = 0;
    if (v < 0 && out + 1 < (int)n) buf[out++] = '-';
    for (int i = 0; i < k && out + 2 < (int)n; i++) {
        buf[out++] = digits[i];
        j = k - i - 1;
        if (j > 0 && j % 3 == 0) buf[out++] = ',';
    }
    buf[out] = '\0';
}

static void usage(FILE *out) {
    fputs("usage: tlm-run info MODEL.so [--params] [--buffers]\n"
          "\n"
          "Prints the model's settings, training defaults, per-layer widths and kernels,\n"
          "parameter count and memory plans.\n"
          "  --params    list every parameter tensor\n"
          "  --buffers   list every activation buffer of the plans\n", out);
}

int cmd_info(int argc, char **argv) {
    const char *path = NULL;
    bool list_params = false, list_buffers = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(stdout); return 0; }
        else if (!strcmp(argv[i], "--params")) list_params = true;
        else if (!strcmp(argv[i], "--buffers")) list_buffers = true;
        else if (argv[i][0] == '-') { fprintf(stderr, "tlm-run info: unknown option `%s`\n", argv[i]); usage(stderr); return 2; }
        else if (path) { fprintf(stderr, "tlm-run info: more than one model given\n"); return 2; }
        else path = argv[i];
    }
    if (!path) { usage(stderr); return 2; }
    tlm_so so;
    char err[512];
    if (!tlm_so_open(path, &so, err, sizeof err)) {
        fprintf(stderr, "tlm-run: %s\n", err);
        return 1;
    }
    const tlm_abi_config *m = so.config;
    const tlm_abi_train *t = so.train;
    char a[32], b[32];
    printf("model %s (%s), ABI version %u\n", tlm_so_str(&so, m->name), path, so.header->version);
    printf("  mixer %s, mlp %s, vocab %lld, context %lld, d_model %lld, layers %lld, heads %lld x %lld\n",
           mixer_name(m->mixer), m->mlp == TLM_MLP_SWIGLU ? "swiglu" : "gelu", (long long)m->vocab,
           (long long)m->context, (long long)m->d_model, (long long)m->layers, (long long)m->heads,
           (long long)m->head_dim);
    printf("  norm_eps %g, rope_base %g, tied embeddings %s, quantum %lld\n", m->norm_eps, m->rope_base,
           m->tie_embeddings ? "yes" : "no", (long long)m->quantum);
    if (m->mixer == TLM_MIXER_GATED_ATTENTION)
        printf("  output gate: %s\n", m->gate ? "one per head" : "one per channel (elementwise)");
    if (m->mixer == TLM_MIXER_TITANS)
        printf("  memory: chunk %lld, inner learning rate bound %g\n", (long long)m->chunk, m->inner_lr);
    if (m->mixer == TLM_MIXER_HOPE_ATTENTION) {
        printf("  CMS: %u levels, updated every", m->ncms);
        for (uint32_t i = 0; i < m->ncms; i++) printf(" %lld", (long long)m->cms[i]);
        printf(" steps\n");
    }
    if (m->budget_width) printf("  budget: uniform(%lld), met exactly\n", (long long)m->budget_width);
    else printf("  budget: none\n");
    int64_t params = 0;
    for (uint32_t i = 0; i < so.header->nparams; i++) params += so.params[i].count;
    commas(a, sizeof a, params);
    commas(b, sizeof b, m->param_floats * 4);
    printf("  parameters: %s in %u tensors (%s bytes in the block)\n", a, so.header->nparams, b);
    tlm_train_print(stdout, "train defaults", t);

    printf("layers:\n  layer    d_ff      exact  kernel\n");
    for (uint32_t l = 0; l < so.header->nlayers; l++)
        printf("  %5u %7lld %10.2f  k%u\n", l, (long long)so.layers[l].width, so.layers[l].exact_width,
               so.layers[l].kernel);
    printf("kernels (%u specialisations, one per distinct width):\n", so.header->nkernels);
    for (uint32_t k = 0; k < so.header->nkernels; k++)
        printf("  k%-3u %s d_model %lld width %lld  %s\n", k, so.kernels[k].mlp == TLM_MLP_SWIGLU ? "swiglu" : "gelu",
               (long long)so.kernels[k].d_model, (long long)so.kernels[k].width,
               tlm_so_str(&so, so.kernels[k].symbol));
    printf("memory plans:\n");
    for (uint32_t p = 0; p < so.header->nplans; p++) {
        const tlm_abi_plan *pl = &so.plans[p];
        commas(a, sizeof a, pl->arena_bytes);
        printf("  %-6s B %lld, T %lld: arena %s bytes (%.1f MiB), ops 0..%u\n",
               pl->kind == TLM_PLAN_TRAIN ? "train" : "infer", (long long)pl->batch, (long long)pl->seq, a,
               (double)pl->arena_bytes / 1048576.0, pl->nops - 1);
    }
    printf("CUDA source: %zu bytes (compiled with NVRTC when run on a GPU)\n", strlen(so.cuda_source));
    if (list_params) {
        printf("parameters:\n");
        for (uint32_t i = 0; i < so.header->nparams; i++) {
            const tlm_abi_param *p = &so.params[i];
            char shape[48];
            if (p->ndim == 2) snprintf(shape, sizeof shape, "[%lld, %lld]", (long long)p->shape[0], (long long)p->shape[1]);
            else snprintf(shape, sizeof shape, "[%lld]", (long long)p->shape[0]);
            printf("  %-48s %-14s @%lld\n", tlm_so_str(&so, p->name), shape, (long long)p->offset);
        }
    }
    if (list_buffers) {
        const int64_t *off = tlm_so_plan_offsets(&so, TLM_PLAN_TRAIN);
        printf("buffers (train plan offsets):\n");
        for (uint32_t i = 0; i < so.header->nbuffers; i++)
            printf("  %-16s %12lld bytes @%lld\n", tlm_so_str(&so, so.buffers[i].name),
                   (long long)tlm_buffer_bytes(&so.buffers[i], so.plans[0].batch, so.plans[0].seq),
                   (long long)off[i]);
    }
    tlm_so_close(&so);
    return 0;
}
