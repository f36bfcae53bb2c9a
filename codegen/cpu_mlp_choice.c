/* Which implementation the CPU runs for a width's MLP: a fixed rule, so a
 * model.so always runs the same code (and a resumed run the same numerics)
 * whatever machine or thread count; it is recorded in model.so with its
 * reason (tlm-run info prints both).
 *
 * The rule is measured against the alternative a model would really run,
 * the BLAS twin (runtime/ops/mlp.c: OpenBLAS's GEMMs with h formed in tiles
 * between them), not against bare GEMMs: bench/mlp_bench's "twin" column
 * and tlm-run bench of models compiled both ways (tlmc --cpu-mlp), at
 * d_model 32 to 1024 and widths 8 to 4224, on the AVX2 and AVX-512 paths,
 * at one and two threads (docs/performance.md). The generated kernels were
 * faster at every size measured, by 1.25x end to end for a model whose
 * widths are all 8 and 1.6x for bench/large.tlm, so every width runs them;
 * the twin stays the safety net a user can ask for, and the place a
 * measured exception would go. */
#include "codegen.h"

tlm_mlp_impl tlm_cpu_mlp_choice(const tlm_kernel_spec *s, int forced, const char **why) {
    (void)s; /* no size measured where the twin is faster */
    if (forced >= 0) {
        *why = "asked for with tlmc --cpu-mlp";
        return (tlm_mlp_impl)forced;
    }
    *why = "tlmc's rule: the generated kernels measured faster than the BLAS twin at every size";
    return TLM_MLP_IMPL_GENERATED;
}
