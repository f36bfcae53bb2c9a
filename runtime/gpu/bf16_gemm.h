/* GEMMs in bf16 (--precision bf16): the executor describes every GEMM as
 * in fp32 mode, except that an activation a kernel stored in bf16 (the
 * normalised rows, the MLP's h: runtime/model/gpu_model.h) is described as
 * the TLM_GEMM_BF16 operand it is, and tlm_gpu_gemm_bf16 runs it with bf16
 * operands throughout. An fp32 operand inside the parameter block is read
 * from the block's bf16 working copy (same element offsets, same strides);
 * any other fp32 operand (a gradient, or an activation no bf16 kernel
 * writes) is rounded to bf16 into a scratch first. The product is
 * accumulated in fp32 (CUBLAS_COMPUTE_32F) into fp32 C and D, so gradients
 * and the residual stream stay fp32, or into a bf16 D (rounded once, at the
 * end) where the executor stores the result in bf16: the MLP's
 * pre-activations.
 *
 * Rounding: to nearest even, both for the weights' copy and for the
 * activations. The master weights stay fp32 and the optimizer updates them
 * there, so a small update is never lost to rounding; that is why there is
 * no stochastic rounding (docs/gpu.md, "Precision"). */
#ifndef TLM_GPU_BF16_GEMM_H
#define TLM_GPU_BF16_GEMM_H

#include "gpu.h"

typedef struct tlm_bf16_gemm {
    tlm_dptr weights;        /* the fp32 parameter block */
    int64_t weight_floats;
    tlm_dptr weights_bf16;   /* its bf16 copy, element for element */
    tlm_dptr scratch;        /* bf16 copies of a GEMM's activation operands */
    int64_t scratch_elems;
} tlm_bf16_gemm;

/* Scratch elements for GEMMs whose activation operands each span at most
 * `widest` elements, when one GEMM rounds at most `items` of them (two
 * operands, one of them a batch of two: 3). */
int64_t tlm_bf16_gemm_scratch_elems(int64_t widest, int items);

/* Runs g (A and B fp32 or already bf16; C and D as described) with bf16 A
 * and B. */
bool tlm_gpu_gemm_bf16(tlm_gpu *gpu, const tlm_bf16_gemm *b, const tlm_gemm *g, tlm_err *err);

/* dst[0, n) = bf16(src[0, n)), rounded to nearest even. */
bool tlm_gpu_to_bf16(tlm_gpu *gpu, tlm_dptr dst, tlm_dptr src, int64_t n, tlm_err *err);

#endif
