/* Vectorised transcendental math in IR (no libm calls), and the MLP
 * activations and their derivatives built from it. All take and return
 * <vl x float>. */
#ifndef TLM_VEC_MATH_H
#define TLM_VEC_MATH_H

#include "codegen.h"
#include "ir_builder.h"

LLVMValueRef vm_exp(ir *g, LLVMValueRef x);
LLVMValueRef vm_sigmoid(ir *g, LLVMValueRef x);
LLVMValueRef vm_tanh(ir *g, LLVMValueRef x);

/* h = silu(gate) * up for SwiGLU, gelu_tanh(up) for GELU (gate ignored). */
LLVMValueRef vm_activation(ir *g, tlm_mlp kind, LLVMValueRef gate, LLVMValueRef up);

/* Given dh = dL/dh, the gradients w.r.t. the pre-activations, and h itself
 * (the same bits as vm_activation's) from the exponential they share. For
 * GELU *d_gate is set to NULL. */
void vm_activation_grad(ir *g, tlm_mlp kind, LLVMValueRef gate, LLVMValueRef up, LLVMValueRef dh, LLVMValueRef *d_gate,
                        LLVMValueRef *d_up, LLVMValueRef *h);

#endif
