/* The precision a model computes in: fp32 everywhere (the CPU, and the
 * GPU's checking mode), or bf16 GEMM operands and bf16 storage of the
 * activations whose writers and readers all have a bf16 form (the GEMMs'
 * inputs, the MLP's pre-activations, attention's q, k, v and the KV
 * cache), with fp32 master weights, optimizer state, accumulation,
 * gradients, residual stream and arithmetic everywhere else (the GPU's
 * default; runtime/gpu/bf16_gemm.h, runtime/model/gpu_model.h,
 * docs/gpu.md "Precision"). Not a trajectory setting: a resume in another precision
 * continues from the fp32 master weights. */
#ifndef TLM_PRECISION_H
#define TLM_PRECISION_H

#include <stdbool.h>
#include <string.h>

typedef enum tlm_precision { TLM_PRECISION_FP32, TLM_PRECISION_BF16 } tlm_precision;

static inline const char *tlm_precision_name(tlm_precision p) { return p == TLM_PRECISION_BF16 ? "bf16" : "fp32"; }

/* "fp32" or "bf16"; false for anything else. */
static inline bool tlm_precision_parse(const char *s, tlm_precision *p) {
    if (strcmp(s, "fp32") == 0) *p = TLM_PRECISION_FP32;
    else if (strcmp(s, "bf16") == 0) *p = TLM_PRECISION_BF16;
    else return false;
    return true;
}

#endif
