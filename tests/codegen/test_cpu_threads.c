/* Parallel safety: threads calling a kernel concurrently on disjoint row
 * ranges (fwd, bwd_data) or width ranges (bwd_weight), split at awkward
 * boundaries, produce bit-for-bit what one call over the whole range does.
 * (Each output element's arithmetic does not depend on the split.) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlp_check.h"

enum { ROWS = 101, PARTS = 3, REPEATS = 4 };
static const int row_cuts[PARTS + 1] = {0, 37, 38, ROWS};

typedef struct {
    kernel_lib *lib;
    const tlm_kernel_spec *s;
    int entry; /* 0 fwd, 1 bwd_data, 2 bwd_weight */
    int64_t lo, hi;
    float **buf; /* x, wg, wu, wd, pg, pu, out, dout, dpg, dpu, dx, dwg, dwu, dwd */
} job;

enum { X, WG, WU, WD, PG, PU, OUT, DOUT, DPG, DPU, DX, DWG, DWU, DWD, N_BUFS };

static void run(const job *j) {
    float **b = j->buf;
    if (j->entry == 0) {
        tlm_mlp_fwd_fn f = (tlm_mlp_fwd_fn)kernel_lib_sym(j->lib, j->s, TLM_ENTRY_FWD);
        f(j->lo, j->hi, b[X], b[WG], b[WU], b[WD], b[PG], b[PU], b[OUT]);
    } else if (j->entry == 1) {
        tlm_mlp_bwd_data_fn f = (tlm_mlp_bwd_data_fn)kernel_lib_sym(j->lib, j->s, TLM_ENTRY_BWD_DATA);
        f(j->lo, j->hi, b[X], b[WG], b[WU], b[WD], b[PG], b[PU], b[DOUT], b[DPG], b[DPU], b[DX]);
    } else {
        tlm_mlp_bwd_weight_fn f = (tlm_mlp_bwd_weight_fn)kernel_lib_sym(j->lib, j->s, TLM_ENTRY_BWD_WEIGHT);
        f(ROWS, j->lo, j->hi, b[X], b[PG], b[PU], b[DOUT], b[DPG], b[DPU], b[DWG], b[DWU], b[DWD]);
    }
}

static void *run_thread(void *p) {
    run(p);
    return NULL;
}

static size_t buf_len(const tlm_kernel_spec *s, int i) {
    size_t D = (size_t)s->d_model, W = (size_t)s->width;
    switch (i) {
    case X:
    case OUT:
    case DOUT:
    case DX: return ROWS * D;
    case PG:
    case PU:
    case DPG:
    case DPU: return ROWS * W;
    default: return W * D;
    }
}

static int check(kernel_lib *lib, const tlm_kernel_spec *s, uint64_t *rng) {
    float *one[N_BUFS], *many[N_BUFS];
    for (int i = 0; i < N_BUFS; i++) {
        size_t n = buf_len(s, i);
        one[i] = malloc(n * sizeof(float));
        many[i] = malloc(n * sizeof(float));
        for (size_t k = 0; k < n; k++) one[i][k] = (float)test_uniform(rng, -1, 1);
        memcpy(many[i], one[i], n * sizeof(float));
    }
    int W = s->width, fails = 0;
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
    for (int i = 0; i < N_BUFS; i++) {
        if (memcmp(one[i], many[i], buf_len(s, i) * sizeof(float)) != 0) {
            printf("FAIL %s D=%d W=%d: buffer %d differs between one call and %d threads\n",
                   s->kind == TLM_MLP_SWIGLU ? "swiglu" : "gelu", s->d_model, W, i, PARTS);
            fails++;
        }
        free(one[i]);
        free(many[i]);
    }
    return fails;
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
