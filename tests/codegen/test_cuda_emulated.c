/* The emitted CUDA kernels, run on the CPU through cuda_emu.h (each block's
 * 256 threads as fibers), against the float64 reference with the same
 * checks as the CPU kernels. Grids are deliberately smaller than the tile
 * count so the blocks' grid-stride loops are exercised. Exits 77 (ctest:
 * skipped) without a C++ compiler. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlp_check.h"

#ifndef TLM_TEST_CXX
#define TLM_TEST_CXX ""
#endif
#ifndef TLM_TEST_SOURCE_DIR
#define TLM_TEST_SOURCE_DIR "."
#endif

static const char *fwd_params = "long long r0, long long r1, const float *x, const float *w_gate, const float *w_up, "
                                "const float *w_down, float *pre_gate, float *pre_up, float *out";
static const char *fwd_args = "r0, r1, x, w_gate, w_up, w_down, pre_gate, pre_up, out";
static const char *bwd_data_params =
    "long long r0, long long r1, const float *x, const float *w_gate, const float *w_up, "
    "const float *w_down, const float *pre_gate, float *pre_up, const float *dout, "
    "float *d_pre_gate, float *d_pre_up, float *dx";
static const char *bwd_data_args = "r0, r1, x, w_gate, w_up, w_down, pre_gate, pre_up, dout, d_pre_gate, d_pre_up, dx";
static const char *bwd_weight_params =
    "long long rows, long long j0, long long j1, const float *x, const float *pre_gate, "
    "const float *pre_up, const float *dout, const float *d_pre_gate, const float *d_pre_up, "
    "float *dw_gate, float *dw_up, float *dw_down";
static const char *bwd_weight_args =
    "rows, j0, j1, x, pre_gate, pre_up, dout, d_pre_gate, d_pre_up, dw_gate, dw_up, dw_down";

/* emu_<symbol>(same parameters) launches <symbol> on `grid` emulated blocks
 * of 256 threads through the emulator's entry point (TLM_EMU_EXPORT), which
 * takes a pointer to each parameter's value. A failed launch aborts: the
 * check would otherwise compare stale outputs. */
static void write_wrapper(FILE *f, const tlm_kernel_spec *s, const char *entry, const char *params, const char *args,
                          int grid) {
    char sym[128];
    tlm_kernel_symbol(s, entry, sym, sizeof sym);
    fprintf(f, "TLM_EMU_EXPORT(%s)\nextern \"C\" void emu_%s(%s) {\n  void *args[] = {", sym, sym, params);
    for (const char *a = args; *a;) { /* "r0, r1, x" -> "&r0, &r1, &x" */
        size_t n = strcspn(a, ",");
        fprintf(f, "&%.*s%s", (int)n, a, a[n] ? ", " : "");
        a += n;
        a += strspn(a, ", ");
    }
    fprintf(f,
            "};\n  const unsigned grid[3] = {%d, 1, 1}, block[3] = {256, 1, 1};\n  char err[256];\n"
            "  if (tlm_emu_launch_%s(grid, block, 0, args, err, sizeof err)) {\n"
            "    fprintf(stderr, \"FAIL: %%s\\n\", err);\n    abort();\n  }\n}\n",
            grid, sym);
}

/* A spec's three entries, with the grids that exercise their strides. */
static void tile_wrappers(FILE *f, const tlm_kernel_spec *s) {
    write_wrapper(f, s, TLM_ENTRY_FWD, fwd_params, fwd_args, 1);
    write_wrapper(f, s, TLM_ENTRY_BWD_DATA, bwd_data_params, bwd_data_args, 1);
    write_wrapper(f, s, TLM_ENTRY_BWD_WEIGHT, bwd_weight_params, bwd_weight_args, 3);
}

int main(void) {
    if (!*TLM_TEST_CXX) {
        printf("SKIP: no C++ compiler found when configuring\n");
        return 77;
    }
    uint64_t rng = test_seed();
    const tlm_kernel_spec specs[] = {
        {TLM_MLP_SWIGLU, 72, 40},
        {TLM_MLP_SWIGLU, 72, 200},
        {TLM_MLP_GELU, 72, 40},
        {TLM_MLP_GELU, 72, 200},
    };
    const mlp_case cases[] = {
        {5, 0, 5, 0, 0}, {70, 3, 69, 7, -5}, /* two row tiles, partial ranges */
    };
    int n_specs = (int)(sizeof specs / sizeof specs[0]);
    char *src = tlm_codegen_cuda_tile_source(specs, n_specs), *err = NULL;
    kernel_lib lib;
    bool built = src && kernel_lib_build_emulated(&lib, TLM_TEST_CXX, TLM_TEST_SOURCE_DIR, src, specs, n_specs,
                                                  tile_wrappers, &err);
    free(src);
    if (!built) {
        printf("FAIL: %s\n", err ? err : "no CUDA source");
        return 1;
    }
    strcpy(lib.prefix, "emu_");
    int fails = 0;
    for (int i = 0; i < n_specs; i++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
            fails += mlp_check_spec(&lib, &specs[i], &cases[c], &rng);
    kernel_lib_close(&lib);
    printf("%s: %d failed comparisons\n", fails ? "FAIL" : "PASS", fails);
    return fails != 0;
}
