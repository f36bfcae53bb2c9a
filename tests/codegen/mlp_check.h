/* Test helper: runs one spec's generated fwd, bwd_data and bwd_weight on
 * fresh random inputs and compares them with the float64 reference.
 *
 * What is checked, per call:
 *   - norm-wise error <= MLP_CHECK_TOLERANCE relative to the norm of the
 *     summed terms' magnitudes (sum |a||b| per output, = the result's norm
 *     unless the sums cancel); the error relative to the result's norm and
 *     the max elementwise error are printed alongside. For accumulated
 *     outputs the error is that of the part the kernel added, beyond the
 *     half-ulp rounding of storing the sum;
 *   - written outputs are poisoned with a NaN first, so a missed element
 *     fails; accumulated outputs (out, dw_*) start from random values and
 *     must end at start + reference;
 *   - elements outside the requested row / width range are bit-identical
 *     to what they were before the call;
 *   - GELU kernels get NULL for every gate pointer. */
#ifndef TLM_MLP_CHECK_H
#define TLM_MLP_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernel_loader.h"

#define MLP_CHECK_TOLERANCE 1e-5

typedef struct {
    int rows;   /* rows in the buffers (and summed over by bwd_weight) */
    int r0, r1; /* row range for fwd / bwd_data */
    int j0, j1; /* width range for bwd_weight; j1 <= 0 means width + j1 */
} mlp_case;

uint64_t test_seed(void); /* TLM_TEST_SEED, by default 1; printed */
double test_uniform(uint64_t *rng, double lo, double hi);
/* A new empty file named `stem` plus a unique suffix in $TMPDIR (else
 * /tmp), its name in path[n]; false, with a FAIL line, if none could be
 * made. The caller unlinks it. */
bool test_temp_file(char *path, size_t n, const char *stem);

/* Returns the number of failed comparisons (0 = pass); prints a line each. */
int mlp_check_spec(kernel_lib *lib, const tlm_kernel_spec *s, const mlp_case *c, uint64_t *rng);

/* bwd_data leaves the bits of fwd's h over pre_up: a spec with d_model ==
 * width (w_down = I makes fwd's out h itself). 0 = pass. */
int mlp_check_h_bits(kernel_lib *lib, const tlm_kernel_spec *s, int rows, uint64_t *rng);

#endif
