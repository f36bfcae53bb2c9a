/* Each device kernel's and GEMM's own time over the profiled steps
 * (`tlm-run train --profile` and `bench` on a device): what the op table
 * cannot say, such as whether an MLP's time is in its GEMMs or in its
 * activation kernels, or how fast cuBLASLt runs a shape.
 *
 * While a table is attached (tlm_device_time_kernels), the device waits
 * for the work before each launch and GEMM on the compute stream and for
 * the launch or GEMM itself, and adds the wait to the row of (the op being
 * run, what ran). That wait costs throughput as the op table's does; the
 * shares are of the profiled steps' wall time. Rows are aggregated:
 *   - a kernel by its name, the MLP's per-width kernels as one
 *     (tlm_mlp_swiglu_d1024_w4224_act and its sisters of other widths are
 *     tlm_mlp_swiglu_d1024_w*_act);
 *   - a GEMM by its transposes, its types and whether it accumulates into
 *     C ("gemm TN bf16->f32 +C"), with its FLOPs (2 m n k a product);
 *   - the op by its kind's name, or none for work outside the ops (the
 *     optimizer, the gradient norm).
 * Past TLM_KERNEL_TIMES_MAX distinct rows the rest go in one row, op
 * "(any op)", kernel "(others)". */
#ifndef TLM_KERNEL_TIMES_H
#define TLM_KERNEL_TIMES_H

#include <stdbool.h>
#include <stdio.h>

enum { TLM_KERNEL_TIMES_MAX = 256, TLM_KERNEL_NAME_MAX = 96 };

typedef struct tlm_kernel_time {
    const char *op; /* an op kind's name (static), or NULL: outside the ops */
    char what[TLM_KERNEL_NAME_MAX];
    long long calls;
    double seconds, flops;
} tlm_kernel_time;

typedef struct tlm_kernel_times {
    const char *op; /* the op the next launches belong to (NULL: outside the ops) */
    int n;
    tlm_kernel_time rows[TLM_KERNEL_TIMES_MAX + 1]; /* the last: "(others)" once full */
} tlm_kernel_times;

/* Adds one launch or GEMM of the current op: `what` as the device names it
 * (a kernel's name is aggregated over widths here), its seconds and FLOPs
 * (0 for a kernel). */
void tlm_kernel_times_add(tlm_kernel_times *t, const char *what, double seconds, double flops);
/* The rows by time, longest first: the count written to order. */
int tlm_kernel_times_order(const tlm_kernel_times *t, int order[TLM_KERNEL_TIMES_MAX + 1]);
/* The table under the op table: the `shown` longest rows, then one line
 * for the rest; per step over `steps`, shares of `total` seconds. */
void tlm_kernel_times_print(const tlm_kernel_times *t, double steps, double total, int shown, FILE *out);
/* The rows as a JSON array, no newline; false when the write fails. */
bool tlm_kernel_times_write_json(const tlm_kernel_times *t, double total, FILE *out);

#endif
