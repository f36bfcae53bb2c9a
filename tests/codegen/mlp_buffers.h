/* Test helper: the fourteen buffers of one MLP spec's three entries, as
 * one array indexed by name, and a call of an entry on them (the thread
 * and blocking tests compare whole buffer sets bit for bit). */
#ifndef TLM_MLP_BUFFERS_H
#define TLM_MLP_BUFFERS_H

#include <stddef.h>
#include <stdint.h>

#include "kernel_loader.h"

enum {
    MLP_X,
    MLP_WG,
    MLP_WU,
    MLP_WD,
    MLP_PG,
    MLP_PU,
    MLP_OUT,
    MLP_DOUT,
    MLP_DPG,
    MLP_DPU,
    MLP_DX,
    MLP_DWG,
    MLP_DWU,
    MLP_DWD,
    MLP_N_BUFS
};

/* The buffer's name as the entries' parameters spell it. */
extern const char *const mlp_buf_names[MLP_N_BUFS];

/* Floats in buffer `buf` for `rows` rows of spec s. */
size_t mlp_buf_len(const tlm_kernel_spec *s, int rows, int buf);

/* a and b: two identical sets of buffers for `rows` rows of s, uniform
 * in [-1, 1]. */
void mlp_bufs_twins(const tlm_kernel_spec *s, int rows, uint64_t *rng, float **a, float **b);

/* Compares the sets bit for bit, printing "FAIL <spec>: <buffer> differs
 * <how>" for each buffer that differs, frees both, and returns how many
 * differed. */
int mlp_bufs_diff_free(const tlm_kernel_spec *s, int rows, float **a, float **b, const char *how);

enum { MLP_ENTRY_FWD, MLP_ENTRY_BWD_DATA, MLP_ENTRY_BWD_WEIGHT };

/* Runs one entry of s on b: fwd and bwd_data over rows [lo, hi);
 * bwd_weight summing over `rows` rows, for widths [lo, hi). */
void mlp_run_entry(kernel_lib *lib, const tlm_kernel_spec *s, int entry, int rows, int64_t lo, int64_t hi, float **b);

#endif
