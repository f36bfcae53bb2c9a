/* Which implementation the CPU runs for a width's MLP: a fixed rule, so a
 * model.so always runs the same code (and a resumed run the same numerics)
 * whatever machine or thread count; it is recorded in model.so with its
 * reason (tlm-run info prints both).
 *
 * The rule comes from bench/mlp_bench's "fused" column, which times the
 * generated entries against what runtime/ops/mlp.c runs instead (OpenBLAS's
 * GEMMs plus the activation passes), at d_model 32..1024 and widths 8..4224
 * on the AVX2 and AVX-512 paths, one thread, OpenBLAS at its own best
 * kernels (docs/performance.md). Below 16 columns (one register panel on
 * AVX2, half of one on AVX-512) a tile computes mostly padding, and the
 * generated kernels measured 0.75-0.94x at width 8 for every d_model from
 * 32 to 128 on both paths; from width 16 up they were ahead at those
 * sizes but for one pair (AVX-512, d_model 128, width 16: 0.93x). */
#include "codegen.h"

enum { NARROW_WIDTH = 16 };

tlm_mlp_impl tlm_cpu_mlp_choice(const tlm_kernel_spec *s, int forced, const char **why) {
    if (forced >= 0) {
        *why = "asked for with tlmc --cpu-mlp";
        return (tlm_mlp_impl)forced;
    }
    if (s->width < NARROW_WIDTH) {
        *why = "tlmc's rule: a width under 16, where the generated kernels measured slower";
        return TLM_MLP_IMPL_BLAS;
    }
    *why = "tlmc's rule: the generated kernels measured faster at this size";
    return TLM_MLP_IMPL_GENERATED;
}
