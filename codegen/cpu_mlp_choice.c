/* Which implementation the CPU runs for a width's MLP: a fixed rule, so a
 * model.so always runs the same code (and a resumed run the same numerics)
 * whatever machine or thread count; it is recorded in model.so with its
 * reason (tlm-run info prints both).
 *
 * The rule comes from bench/mlp_bench's "fused" column, which times the
 * generated entries against what runtime/ops/mlp.c runs instead (OpenBLAS's
 * GEMMs plus the activation passes), at d_model 16..1024 and widths 8..4112
 * on the AVX2 and AVX-512 paths (docs/performance.md). The generated kernels
 * won everywhere except below one register panel of columns (16) at
 * d_model >= 64, where a tile computes mostly padding: 0.76-0.92x. */
#include "codegen.h"

enum { NARROW_WIDTH = 16, NARROW_FROM_D_MODEL = 64 };

tlm_mlp_impl tlm_cpu_mlp_choice(const tlm_kernel_spec *s, int forced, const char **why) {
    if (forced >= 0) {
        *why = "asked for with tlmc --cpu-mlp";
        return (tlm_mlp_impl)forced;
    }
    if (s->width < NARROW_WIDTH && s->d_model >= NARROW_FROM_D_MODEL) {
        *why = "tlmc's rule: a width under 16 at d_model >= 64, where the generated kernels measured slower";
        return TLM_MLP_IMPL_BLAS;
    }
    *why = "tlmc's rule: the generated kernels measured faster at this size";
    return TLM_MLP_IMPL_GENERATED;
}
