#include "mlp_buffers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlp_check.h"

const char *const mlp_buf_names[MLP_N_BUFS] = {
    "x",    "w_gate",     "w_up",     "w_down", "pre_gate", "pre_up", "out",
    "dout", "d_pre_gate", "d_pre_up", "dx",     "dw_gate",  "dw_up",  "dw_down",
};

size_t mlp_buf_len(const tlm_kernel_spec *s, int rows, int buf) {
    size_t D = (size_t)s->d_model, W = (size_t)s->width, R = (size_t)rows;
    switch (buf) {
    case MLP_X:
    case MLP_OUT:
    case MLP_DOUT:
    case MLP_DX: return R * D;
    case MLP_PG:
    case MLP_PU:
    case MLP_DPG:
    case MLP_DPU: return R * W;
    default: return W * D;
    }
}

void mlp_bufs_twins(const tlm_kernel_spec *s, int rows, uint64_t *rng, float **a, float **b) {
    for (int i = 0; i < MLP_N_BUFS; i++) {
        size_t n = mlp_buf_len(s, rows, i);
        a[i] = malloc((n ? n : 1) * sizeof(float));
        b[i] = malloc((n ? n : 1) * sizeof(float));
        for (size_t k = 0; k < n; k++) a[i][k] = (float)test_uniform(rng, -1, 1);
        memcpy(b[i], a[i], n * sizeof(float));
    }
}

int mlp_bufs_diff_free(const tlm_kernel_spec *s, int rows, float **a, float **b, const char *how) {
    int differ = 0;
    for (int i = 0; i < MLP_N_BUFS; i++) {
        if (memcmp(a[i], b[i], mlp_buf_len(s, rows, i) * sizeof(float)) != 0) {
            printf("FAIL %s D=%d W=%d: %s differs %s\n", s->kind == TLM_MLP_SWIGLU ? "swiglu" : "gelu", s->d_model,
                   s->width, mlp_buf_names[i], how);
            differ++;
        }
        free(a[i]);
        free(b[i]);
    }
    return differ;
}

void mlp_run_entry(kernel_lib *lib, const tlm_kernel_spec *s, int entry, int rows, int64_t lo, int64_t hi, float **b) {
    if (entry == MLP_ENTRY_FWD) {
        tlm_mlp_fwd_fn f = (tlm_mlp_fwd_fn)kernel_lib_sym(lib, s, TLM_ENTRY_FWD);
        f(lo, hi, b[MLP_X], b[MLP_WG], b[MLP_WU], b[MLP_WD], b[MLP_PG], b[MLP_PU], b[MLP_OUT]);
    } else if (entry == MLP_ENTRY_BWD_DATA) {
        tlm_mlp_bwd_data_fn f = (tlm_mlp_bwd_data_fn)kernel_lib_sym(lib, s, TLM_ENTRY_BWD_DATA);
        f(lo, hi, b[MLP_X], b[MLP_WG], b[MLP_WU], b[MLP_WD], b[MLP_PG], b[MLP_PU], b[MLP_DOUT], b[MLP_DPG], b[MLP_DPU],
          b[MLP_DX]);
    } else {
        tlm_mlp_bwd_weight_fn f = (tlm_mlp_bwd_weight_fn)kernel_lib_sym(lib, s, TLM_ENTRY_BWD_WEIGHT);
        f(rows, lo, hi, b[MLP_X], b[MLP_PG], b[MLP_PU], b[MLP_DOUT], b[MLP_DPG], b[MLP_DPU], b[MLP_DWG], b[MLP_DWU],
          b[MLP_DWD]);
    }
}
