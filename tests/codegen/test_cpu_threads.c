/* Parallel safety: threads calling a kernel concurrently on disjoint row
 * ranges (fwd, bwd_data) or width ranges (bwd_weight), split at awkward
 * boundaries, produce bit-for-bit what one call over the whole range does.
 * (Each output element's arithmetic does not depend on the split.) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "mlp_buffers.h"
#include "mlp_check.h"

enum { ROWS = 101, PARTS = 3, REPEATS = 4 };
static const int row_cuts[PARTS + 1] = {0, 37, 38, ROWS};

typedef struct {
    kernel_lib *lib;
    const tlm_kernel_spec *s;
    int entry; /* MLP_ENTRY_* */
    int64_t lo, hi;
    float **buf; /* MLP_N_BUFS of them */
} job;

static void run(const job *j) { mlp_run_entry(j->lib, j->s, j->entry, ROWS, j->lo, j->hi, j->buf); }

static void *run_thread(void *p) {
    run(p);
    return NULL;
}

static int check(kernel_lib *lib, const tlm_kernel_spec *s, uint64_t *rng) {
    float *one[MLP_N_BUFS], *many[MLP_N_BUFS];
    mlp_bufs_twins(s, ROWS, rng, one, many);
    int W = s->width;
    int j_cuts[PARTS + 1] = {0, 17, W - 50, W};
    for (int entry = 0; entry < 3; entry++) {
        job whole = {lib, s, entry, 0, entry == 2 ? W : ROWS, one};
        run(&whole);
        pthread_t t[PARTS];
        job parts[PARTS];
        for (int p = 0; p < PARTS; p++) {
            const int *cuts = entry == 2 ? j_cuts : row_cuts;
            parts[p] = (job){lib, s, entry, cuts[p], cuts[p + 1], many};
            pthread_create(&t[p], NULL, run_thread, &parts[p]);
        }
        for (int p = 0; p < PARTS; p++) pthread_join(t[p], NULL);
    }
    char how[64];
    snprintf(how, sizeof how, "between one call and %d threads", PARTS);
    return mlp_bufs_diff_free(s, ROWS, one, many, how);
}

int main(void) {
    uint64_t rng = test_seed();
    const tlm_kernel_spec specs[] = {{TLM_MLP_SWIGLU, 72, 200}, {TLM_MLP_GELU, 300, 97}};
    kernel_lib lib;
    char *err = NULL;
    if (!kernel_lib_build(&lib, specs, 2, NULL, &err)) {
        printf("FAIL building kernels: %s\n", err);
        free(err);
        return 1;
    }
    int fails = 0;
    for (int s = 0; s < 2; s++) {
        int f = 0;
        for (int r = 0; r < REPEATS; r++) f += check(&lib, &specs[s], &rng);
        printf("%s %s D=%d W=%d: %d threads on rows {0,37,38,%d} / widths {0,17,W-50,W}, "
               "%d rounds\n",
               f ? "FAIL" : "ok  ", specs[s].kind == TLM_MLP_SWIGLU ? "swiglu" : "gelu", specs[s].d_model,
               specs[s].width, PARTS, ROWS, REPEATS);
        fails += f;
    }
    kernel_lib_close(&lib);
    printf("%s\n", fails ? "FAIL" : "PASS");
    return fails != 0;
}
