/* Builds the IR of one spec's three kernels (fwd, bwd_data, bwd_weight)
 * into a module, each a sequence of blocked GEMMs (gemm_emit.h) sharing the
 * module's GEMM helpers. */
#ifndef TLM_MLP_KERNELS_H
#define TLM_MLP_KERNELS_H

#include "codegen.h"
#include "gemm_emit.h"
#include "ir_builder.h"

void mlp_emit_kernels(ir *g, const gemm_blocking *bk, const gemm_helpers *h, const tlm_kernel_spec *s);

#endif
