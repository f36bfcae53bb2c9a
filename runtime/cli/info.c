/* tlm-run info: what a compiled model holds — settings, training defaults,
 * the layer table, kernels and memory plans; with --params and --buffers the
 * parameter and buffer tables. The tables are printed by abi/'s printer
 * (model_so_print.c), the one behind tlmc --emit-ir. */
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "device_flag.h"
#include "load.h"
#include "gpu.h"
#include "gpu_model.h"
#include "graph_cache.h"
#include "model_so.h"
#include "tlm_rt/cpu_level.h"
#include "tlm_rt/ops.h"
#include "tlm_train_settings.h"

static void usage(FILE *out) {
    fputs("usage: tlm-run info MODEL.so [--params] [--buffers] [--device cuda[:N]]\n"
          "\n"
          "Prints the model's settings, training defaults, per-layer widths and kernels,\n"
          "parameter count and memory plans.\n"
          "  --params    list every parameter tensor\n"
          "  --buffers   list every activation buffer, and where each plan puts it\n"
          "  --device D  the GPU (cuda, cuda:N): its driver and compute capability, the\n"
          "              kernels a run compiles for it and whether they are cached\n"
          "\n"
          "Exit status: 0 ok, 1 error (model, device), 2 bad usage.\n",
          out);
}

enum { OPT_PARAMS = 256, OPT_BUFFERS, OPT_DEVICE };
static const struct option long_options[] = {
    {"help", no_argument, NULL, 'h'},
    {"params", no_argument, NULL, OPT_PARAMS},
    {"buffers", no_argument, NULL, OPT_BUFFERS},
    {"device", required_argument, NULL, OPT_DEVICE},
    {NULL, 0, NULL, 0},
};

/* The kernels a CUDA source declares. */
static int count_kernels(const char *source) {
    int n = 0;
    size_t len;
    for (const char *p = tlm_gpu_next_kernel(source, &len); p; p = tlm_gpu_next_kernel(p + len, &len)) n++;
    return n;
}

static void print_module(tlm_device *dev, const char *what, const char *source) {
    char path[512], why[200] = "", state[300];
    int cached = tlm_device_module_cached(dev, source, path, sizeof path, why, sizeof why);
    if (cached > 0) snprintf(state, sizeof state, "cached");
    else if (cached < 0)
        snprintf(state, sizeof state, "cache entry damaged (%s): the next run compiles them again", why);
    else if (path[0]) snprintf(state, sizeof state, "not cached: the first run compiles them");
    else snprintf(state, sizeof state, "no usable cache: compiled in memory");
    printf("  %-22s %3d kernels, %s%s%s\n", what, count_kernels(source), state, path[0] ? "\n      " : "", path);
}

/* --device: the GPU (opened by the caller) and what a run would compile for
 * it. Closes dev. */
static void print_device(const char *name, tlm_device *dev, const tlm_so *so) {
    const tlm_device_info *i = tlm_device_get_info(dev);
    printf("\ndevice %s: %s\n", name, i->name);
    if (i->emulated) printf("  emulated on the CPU (TLM_TEST_DEVICE=emulated, a test switch)\n");
    else printf("  driver %d.%d\n", i->driver_version / 1000, i->driver_version % 1000 / 10);
    printf("  compute capability %d.%d (%s), %d SMs, %.1f GiB\n", i->cc_major, i->cc_minor, i->arch, i->sm_count,
           (double)i->memory_total / 1073741824.0);
    char kernels[400];
    device_kernels_describe(so, dev, TLM_PRECISION_BF16, tlm_graphs_enabled() ? NULL : "TLM_CUDA_GRAPHS=0", kernels,
                            sizeof kernels);
    printf("  in bf16 (the default): %s\n", kernels);
    printf("kernels for %s:\n", i->arch);
    const tlm_gpu_module_def *runtime = &tlm_gpu_modules[TLM_GPU_MODULE_RUNTIME],
                             *tc = &tlm_gpu_modules[TLM_GPU_MODULE_ATTENTION_TC];
    print_module(dev, runtime->name, runtime->source);
    /* a module of its own, compiled only by the runs that use it */
    char why[160];
    if (tlm_gpu_attention_on_tensor_cores(so, i, TLM_PRECISION_BF16, why, sizeof why))
        print_module(dev, tc->name, tc->source);
    if (so->header->nkernels) print_module(dev, "model MLP (per width)", so->cuda_source);
    for (uint32_t k = 0; k < so->header->nkernels; k++) {
        int stem;
        const char *symbol = tlm_so_kernel_stem(so, k, &stem);
        printf("      %.*s_act, and its _act_grad (each with a _bf16 twin)\n", stem, symbol);
    }
    tlm_device_close(dev);
}

int cmd_info(int argc, char **argv) {
    const char *path = NULL, *device = NULL;
    bool list_params = false, list_buffers = false;
    cli_args a = {.cmd = "info", .argc = argc, .argv = argv};
    int opt;
    while ((opt = cli_getopt(&a, "h", long_options)) != -1) {
        switch (opt) {
        case 'h': usage(stdout); return 0;
        case OPT_PARAMS: list_params = true; break;
        case OPT_BUFFERS: list_buffers = true; break;
        case OPT_DEVICE:
            device = a.val;
            if (device_flag_check("info", device)) return 2;
            break;
        case 1:
            if (!cli_model_path(&a, &path)) return 2;
            break;
        default: return 2;   /* reported by cli_getopt */
        }
    }
    if (!path) return cli_usage_error("info", "no MODEL.so given");
    tlm_so so;
    tlm_err err = {""};
    if (!tlm_so_open(path, &so, &err)) {
        fprintf(stderr, "tlm-run info: %s\n", err.msg);
        return 1;
    }
    /* The device first, so that a machine without a driver (or a bad
     * cuda:N) gets the one line every command gives and nothing else, as
     * docs/gpu.md "Using it" says, not the whole report and then an error. */
    tlm_device *dev = NULL;
    if (device) {
        int rc = device_flag_open("info", device, &dev);
        if (rc) { /* dev stays NULL for --device cpu */
            tlm_so_close(&so);
            return rc;
        }
    }
    /* a setting train would refuse would make the report's kernels a guess */
    if (dev && !tlm_gpu_settings_ok(&err)) {
        fprintf(stderr, "tlm-run info: %s\n", err.msg);
        tlm_device_close(dev);
        tlm_so_close(&so);
        return 1;
    }
    printf("%s: ABI version %u\n", path, so.header->version);
    tlm_so_print_config(stdout, &so.tables);
    tlm_abi_train defaults = *so.train;
    tlm_train_resolve_defaults(&defaults);
    tlm_train_print(stdout, "train defaults", &defaults);

    putchar('\n');
    tlm_so_print_layers(stdout, &so.tables);
    putchar('\n');
    if (so.cpu_needs) { /* a model.so of an older tlmc records none */
        tlm_err why = {""};
        bool runs = tlm_so_cpu_ok(&so, &why);
        printf("the CPU kernels use: %s%s\n", *so.cpu_needs ? so.cpu_needs : "x86-64's baseline (SSE2)",
               runs ? "" : " (not all on this CPU: train, eval, sample, probe, bench and export refuse them here)");
    }
#if defined(__x86_64__)
    char level[128];
    tlm_cpu_level_describe(level, sizeof level);
    printf("the runtime's CPU kernels (attention, norms, RoPE, AdamW) run at: %s\n", level);
#endif
    char blas[160];
    tlm_blas_kernels_describe(blas, sizeof blas);
    printf("the linear maps' GEMMs run: %s\n", blas);
    tlm_so_print_kernels(stdout, &so.tables);
    putchar('\n');
    for (int p = 0; p < TLM_PLAN_COUNT; p++) tlm_so_print_plan(stdout, &so.tables, p, false);
    printf("CUDA source: %zu bytes (compiled for the GPU at the first --device cuda run; see info --device cuda)\n",
           strlen(so.cuda_source));
    if (dev) print_device(device, dev, &so);
    if (list_params) {
        putchar('\n');
        tlm_so_print_params(stdout, &so.tables);
    }
    bool ok = true;
    if (list_buffers) {
        putchar('\n');
        tlm_so_print_buffers(stdout, &so.tables);
        for (int p = 0; ok && p < TLM_PLAN_COUNT; p++) {
            putchar('\n');
            ok = tlm_so_print_plan(stdout, &so.tables, p, true);
        }
    }
    tlm_so_close(&so);
    if (!ok) return cli_error("info", "out of memory");
    return 0;
}
