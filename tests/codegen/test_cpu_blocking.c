/* The register tile and the cache blocking never change a result: kernels
 * built with other blockings (TLM_CODEGEN_BLOCKING: the wide AVX-512 tile
 * of Intel's CPUs, 6 x 4 vectors at KC 128, and an odd one, 5 x 3 vectors
 * at KC and MC that split these shapes unevenly) give bit for bit what the
 * default blocking gives, on every output of every entry (and the builds
 * differ: their IR is compared, so that a setting which stopped reaching
 * the code generator fails here). Each output
 * element's sum runs over k in the same order whatever the blocking, which
 * is why tlmc may pick the tile per CPU (codegen/cpu_targets.c) without a
 * model's numbers depending on it. Runs on any x86-64 host: the blockings
 * are forced on the host's own vector width. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mlp_buffers.h"
#include "mlp_check.h"

enum { ROWS = 101 };

/* fwd, bwd_data and bwd_weight over all rows and the whole width, in
 * that order, on b (inputs in place, outputs accumulated or written) */
static void run_entries(kernel_lib *lib, const tlm_kernel_spec *s, float **b) {
    mlp_run_entry(lib, s, MLP_ENTRY_FWD, ROWS, 0, ROWS, b);
    mlp_run_entry(lib, s, MLP_ENTRY_BWD_DATA, ROWS, 0, ROWS, b);
    mlp_run_entry(lib, s, MLP_ENTRY_BWD_WEIGHT, ROWS, 0, s->width, b);
}

/* Builds the kernels under `blocking` (NULL: the default), their
 * optimised IR dumped to ir_path. */
static bool build(kernel_lib *lib, const tlm_kernel_spec *specs, int n, const char *blocking, const char *ir_path) {
    if (blocking) setenv("TLM_CODEGEN_BLOCKING", blocking, 1);
    else unsetenv("TLM_CODEGEN_BLOCKING");
    setenv("TLM_CODEGEN_DUMP_IR", ir_path, 1);
    char *err = NULL;
    bool ok = kernel_lib_build(lib, specs, n, NULL, &err);
    unsetenv("TLM_CODEGEN_BLOCKING");
    unsetenv("TLM_CODEGEN_DUMP_IR");
    if (!ok) {
        printf("FAIL building kernels with blocking %s: %s\n", blocking ? blocking : "(default)", err);
        free(err);
    }
    return ok;
}

/* Whether two files hold the same bytes (false if either cannot be read). */
static bool same_file(const char *p, const char *q) {
    FILE *f = fopen(p, "rb"), *g = fopen(q, "rb");
    bool same = f && g;
    while (same) {
        int c = getc(f), d = getc(g);
        if (c != d) same = false;
        if (c == EOF || d == EOF) break;
    }
    if (f) fclose(f);
    if (g) fclose(g);
    return same;
}

/* Whether lib's entries give the bits base's give, on the same inputs. */
static int compare(kernel_lib *base, kernel_lib *lib, const tlm_kernel_spec *s, const char *blocking, uint64_t *rng) {
    float *a[MLP_N_BUFS], *b[MLP_N_BUFS];
    mlp_bufs_twins(s, ROWS, rng, a, b);
    run_entries(base, s, a);
    run_entries(lib, s, b);
    char how[64];
    snprintf(how, sizeof how, "from the default blocking's (blocking %s)", blocking);
    int fails = mlp_bufs_diff_free(s, ROWS, a, b, how);
    if (!fails)
        printf("ok   %s D=%d W=%d, blocking %s: every output the same bits\n",
               s->kind == TLM_MLP_SWIGLU ? "swiglu" : "gelu", s->d_model, s->width, blocking);
    return fails;
}

int main(void) {
    uint64_t rng = test_seed();
  /* d_model 300 > KC: the projections take more than one k block; rows
   * 101 span partial tiles of every blocking here */
    const tlm_kernel_spec specs[] = {{TLM_MLP_SWIGLU, 300, 200}, {TLM_MLP_GELU, 72, 97}};
  /* AVX-512's two tiles (the default may be either, by CPU) and an odd one */
    const char *const blockings[] = {"12,2,256,384", "6,4,128,384", "5,3,64,40"};
    char base_ir[4096], ir[4096];
    if (!test_temp_file(base_ir, sizeof base_ir, "tlm_blocking_base")) return 1;
    if (!test_temp_file(ir, sizeof ir, "tlm_blocking_ir")) {
        unlink(base_ir);
        return 1;
    }
    kernel_lib base;
    int fails = 0, differing = 0;
    if (build(&base, specs, 2, NULL, base_ir)) {
        for (size_t k = 0; k < sizeof blockings / sizeof blockings[0]; k++) {
            kernel_lib lib;
            if (!build(&lib, specs, 2, blockings[k], ir)) {
                fails++;
                continue;
            }
            bool same = same_file(base_ir, ir);
            printf("     blocking %s: %s\n", blockings[k], same ? "the default's own code" : "other code");
            differing += !same;
            for (int s = 0; s < 2; s++) fails += compare(&base, &lib, &specs[s], blockings[k], &rng);
            kernel_lib_close(&lib);
        }
        kernel_lib_close(&base);
    } else {
        fails++;
    }
  /* the default is at most one of them: the others must build other code */
    if (differing < (int)(sizeof blockings / sizeof blockings[0]) - 1) {
        printf("FAIL only %d of the blockings built code other than the default's: "
               "TLM_CODEGEN_BLOCKING did not reach the code generator\n",
               differing);
        fails++;
    }
    unlink(base_ir);
    unlink(ir);
    printf("%s\n", fails ? "FAIL" : "PASS");
    return fails != 0;
}
