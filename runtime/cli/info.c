/* tlm-run info: what a compiled model holds — settings, training defaults,
 * the layer table, kernels and memory plans; with --params and --buffers the
 * parameter and buffer tables. The tables are printed by abi/'s printer
 * (model_so_print.c), the one behind tlmc --emit-ir. */
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "model_so.h"
#include "tlm_train_settings.h"

static void usage(FILE *out) {
    fputs("usage: tlm-run info MODEL.so [--params] [--buffers]\n"
          "\n"
          "Prints the model's settings, training defaults, per-layer widths and kernels,\n"
          "parameter count and memory plans.\n"
          "  --params    list every parameter tensor\n"
          "  --buffers   list every activation buffer, and where each plan puts it\n",
          out);
}

enum { OPT_PARAMS = 256, OPT_BUFFERS };
static const struct option long_options[] = {
    {"help", no_argument, NULL, 'h'},
    {"params", no_argument, NULL, OPT_PARAMS},
    {"buffers", no_argument, NULL, OPT_BUFFERS},
    {NULL, 0, NULL, 0},
};

int cmd_info(int argc, char **argv) {
    const char *path = NULL;
    bool list_params = false, list_buffers = false;
    cli_args a = {.cmd = "info", .argc = argc, .argv = argv};
    int opt;
    while ((opt = cli_getopt(&a, "h", long_options)) != -1) {
        switch (opt) {
        case 'h': usage(stdout); return 0;
        case OPT_PARAMS: list_params = true; break;
        case OPT_BUFFERS: list_buffers = true; break;
        case 1:
            if (!cli_model_path(&a, &path)) return 2;
            break;
        default: return 2;   /* reported by cli_getopt */
        }
    }
    if (!path) {
        usage(stderr);
        return 2;
    }
    tlm_so so;
    tlm_err err = {""};
    if (!tlm_so_open(path, &so, &err)) {
        fprintf(stderr, "tlm-run: %s\n", err.msg);
        return 1;
    }
    printf("%s: ABI version %u\n", path, so.header->version);
    tlm_so_print_config(stdout, &so.tables);
    tlm_train_print(stdout, "train defaults", so.train);

    putchar('\n');
    tlm_so_print_layers(stdout, &so.tables);
    putchar('\n');
    tlm_so_print_kernels(stdout, &so.tables);
    putchar('\n');
    for (int p = 0; p < TLM_PLAN_COUNT; p++) tlm_so_print_plan(stdout, &so.tables, p, false);
    printf("CUDA source: %zu bytes (generated for a GPU backend; this tlm-run runs on the CPU)\n",
           strlen(so.cuda_source));
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
