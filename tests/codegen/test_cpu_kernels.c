/* Every generated CPU kernel (fwd, bwd_data, bwd_weight; SwiGLU and GELU)
 * for the host CPU at O3, at sizes that are not multiples of any vector
 * width or block size, over full and partial row / width ranges. */
#include <stdio.h>
#include <stdlib.h>

#include "mlp_check.h"

int main(void) {
    uint64_t rng = test_seed();
    const tlm_kernel_spec specs[] = {
        {TLM_MLP_SWIGLU, 72, 40},
        {TLM_MLP_SWIGLU, 72, 200},
        {TLM_MLP_SWIGLU, 72, 1000},
        {TLM_MLP_GELU, 72, 40},
        {TLM_MLP_GELU, 72, 200},
        {TLM_MLP_GELU, 72, 1000},
      /* d_model above the k-block size: split-k accumulation in the GEMMs
       * over d_model, and the activation-gradient epilogue's last block. */
        {TLM_MLP_SWIGLU, 300, 56},
        {TLM_MLP_GELU, 300, 56},
      /* degenerate sizes: a single element, sub-vector widths */
        {TLM_MLP_SWIGLU, 1, 1},
        {TLM_MLP_GELU, 17, 3},
      /* d_model == width, for mlp_check_h_bits too (tails at every vector
       * width and tile) */
        {TLM_MLP_SWIGLU, 200, 200},
        {TLM_MLP_GELU, 200, 200},
    };
    const mlp_case cases[] = {
        {1, 0, 1, 0, 0},      {5, 0, 5, 0, 0},
        {37, 0, 37, 0, 0},    {37, 3, 30, 7, -5},  /* partial ranges: r0 > 0, j0 > 0 */
        {300, 7, 290, 1, -1}, /* rows above the k-block */
        {800, 9, 795, 5, -3}  /* several row blocks (MC = 384) */
    };
    int n_specs = (int)(sizeof specs / sizeof specs[0]);
    kernel_lib lib;
    char *err = NULL;
    tlm_codegen_options opt = {NULL, 3};
    if (!kernel_lib_build(&lib, specs, n_specs, &opt, &err)) {
        printf("FAIL building kernels: %s\n", err);
        free(err);
        return 1;
    }
    printf("codegen of %d specs (host CPU, O3): %.2fs\n", n_specs, lib.codegen_seconds);
    int fails = 0;
    for (int i = 0; i < n_specs; i++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
            fails += mlp_check_spec(&lib, &specs[i], &cases[c], &rng);
    const int h_rows[] = {1, 37};
    for (int i = 0; i < n_specs; i++)
        for (int r = 0; r < 2 && specs[i].d_model == specs[i].width; r++)
            fails += mlp_check_h_bits(&lib, &specs[i], h_rows[r], &rng);
    kernel_lib_close(&lib);
    printf("%s: %d failed comparisons\n", fails ? "FAIL" : "PASS", fails);
    return fails != 0;
}
