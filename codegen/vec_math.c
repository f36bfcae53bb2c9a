#include "vec_math.h"

/* exp(x) after Cephes expf: x = n ln2 + r with |r| <= ln2/2, exp(r) by a
 * degree-6 polynomial, 2^n assembled in the exponent bits. Clamping x to
 * [-87.3, 88] keeps n within the normal exponent range, so no overflow or
 * denormal handling is needed; results saturate near FLT_MIN and 1.6e38,
 * which is harmless for sigmoid and tanh. */
LLVMValueRef vm_exp(ir *g, LLVMValueRef x) {
    x = ir_fmin(g, ir_fmax(g, x, ir_vf32(g, -87.3)), ir_vf32(g, 88.0));
  /* n = round(x log2 e): adding and subtracting 1.5*2^23 rounds to nearest
   * in the FPU itself, avoiding roundps (SSE4.1) so baseline x86-64 works. */
    LLVMValueRef magic = ir_vf32(g, 12582912.0);
    LLVMValueRef n = ir_fsub(g, ir_fma(g, x, ir_vf32(g, 1.44269504088896341), magic), magic);
  /* r = x - n ln2, with ln2 split in two so n*C1 is exact. */
    LLVMValueRef r = ir_fma(g, n, ir_vf32(g, -0.693359375), x);
    r = ir_fma(g, n, ir_vf32(g, 2.12194440e-4), r);
    LLVMValueRef p = ir_vf32(g, 1.9875691500e-4);
    static const double coef[] = {1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1};
    for (int i = 0; i < 5; i++) p = ir_fma(g, p, r, ir_vf32(g, coef[i]));
    LLVMValueRef rr = ir_fmul(g, r, r);
    p = ir_fadd(g, ir_fma(g, p, rr, r), ir_vf32(g, 1.0));
    LLVMValueRef ni = LLVMBuildFPToSI(g->b, n, g->vi32, "");
    LLVMValueRef bits = LLVMBuildShl(g->b, LLVMBuildAdd(g->b, ni, ir_vi32(g, 127), ""), ir_vi32(g, 23), "");
    return ir_fmul(g, p, LLVMBuildBitCast(g->b, bits, g->vf32, ""));
}

/* 1/x for x in [1, 2e38]. A division is the slowest op in the activation
 * gradients that bwd_data fuses into its GEMM, so on x86 use the hardware
 * estimate (14 or 12 bits) refined by one Newton step (to ~2^-23 relative). */
static LLVMValueRef vm_reciprocal(ir *g, LLVMValueRef x) {
    LLVMValueRef one = ir_vf32(g, 1.0);
    if (!g->x86) return ir_fdiv(g, one, x);
    LLVMValueRef r;
    if (g->vl == 16) {
        LLVMValueRef all = LLVMConstInt(LLVMInt16TypeInContext(g->ctx), 0xffff, 0);
        LLVMValueRef args[3] = {x, ir_vf32(g, 0.0), all};
        r = ir_intrinsic(g, "llvm.x86.avx512.rcp14.ps.512", NULL, 0, args, 3);
    } else {
        r = ir_intrinsic(g, g->vl == 8 ? "llvm.x86.avx.rcp.ps.256" : "llvm.x86.sse.rcp.ps", NULL, 0, &x, 1);
    }
    LLVMValueRef err = ir_fma(g, ir_fsub(g, ir_vf32(g, 0.0), x), r, one); /* 1 - x r */
    return ir_fma(g, r, err, r);
}

LLVMValueRef vm_sigmoid(ir *g, LLVMValueRef x) {
    LLVMValueRef e = vm_exp(g, ir_fsub(g, ir_vf32(g, 0.0), x));
    return vm_reciprocal(g, ir_fadd(g, ir_vf32(g, 1.0), e));
}

/* tanh(y) = 1 - 2 / (exp(2y) + 1): saturates cleanly at +-1 through the
 * clamped exp; near 0 its absolute error stays ~1e-7, which is what GELU,
 * 0.5 u (1 + tanh), needs. */
LLVMValueRef vm_tanh(ir *g, LLVMValueRef y) {
    LLVMValueRef e = vm_exp(g, ir_fadd(g, y, y));
    LLVMValueRef q = vm_reciprocal(g, ir_fadd(g, e, ir_vf32(g, 1.0)));
    return ir_fma(g, ir_vf32(g, -2.0), q, ir_vf32(g, 1.0));
}

#define GELU_K0 0.7978845608028654 /* sqrt(2/pi) */
#define GELU_K1 0.044715

/* tanh(sqrt(2/pi) (u + 0.044715 u^3)), shared by GELU and its derivative. */
static LLVMValueRef gelu_tanh_term(ir *g, LLVMValueRef u, LLVMValueRef *u2) {
    *u2 = ir_fmul(g, u, u);
    LLVMValueRef poly = ir_fma(g, *u2, ir_vf32(g, GELU_K1), ir_vf32(g, 1.0));
    return vm_tanh(g, ir_fmul(g, ir_fmul(g, u, ir_vf32(g, GELU_K0)), poly));
}

/* h from the parts its gradient computes as well, one expression for
 * both: bwd_data's epilogue leaves this h for bwd_weight, which must read
 * the bits the forward's packing computed. */
static LLVMValueRef swiglu_h(ir *g, LLVMValueRef silu, LLVMValueRef up) { return ir_fmul(g, silu, up); }
static LLVMValueRef gelu_h(ir *g, LLVMValueRef up, LLVMValueRef t) {
    return ir_fmul(g, ir_fmul(g, up, ir_vf32(g, 0.5)), ir_fadd(g, t, ir_vf32(g, 1.0)));
}

LLVMValueRef vm_activation(ir *g, tlm_mlp kind, LLVMValueRef gate, LLVMValueRef up) {
    if (kind == TLM_MLP_SWIGLU) return swiglu_h(g, ir_fmul(g, gate, vm_sigmoid(g, gate)), up);
    LLVMValueRef u2;
    return gelu_h(g, up, gelu_tanh_term(g, up, &u2));
}

void vm_activation_grad(ir *g, tlm_mlp kind, LLVMValueRef gate, LLVMValueRef up, LLVMValueRef dh, LLVMValueRef *d_gate,
                        LLVMValueRef *d_up, LLVMValueRef *h) {
    LLVMValueRef one = ir_vf32(g, 1.0);
    if (kind == TLM_MLP_SWIGLU) {
    /* silu'(g) = s (1 + g (1 - s)) with s = sigmoid(g). */
        LLVMValueRef s = vm_sigmoid(g, gate);
        LLVMValueRef silu = ir_fmul(g, gate, s);
        LLVMValueRef dsilu = ir_fmul(g, s, ir_fma(g, gate, ir_fsub(g, one, s), one));
        *d_gate = ir_fmul(g, ir_fmul(g, dh, up), dsilu);
        *d_up = ir_fmul(g, dh, silu);
        *h = swiglu_h(g, silu, up);
        return;
    }
  /* gelu'(u) = 0.5 (1 + t) + 0.5 u (1 - t^2) k0 (1 + 3 k1 u^2). */
    LLVMValueRef u2;
    LLVMValueRef t = gelu_tanh_term(g, up, &u2);
    LLVMValueRef half = ir_vf32(g, 0.5);
    LLVMValueRef sech2 = ir_fsub(g, one, ir_fmul(g, t, t));
    LLVMValueRef dinner = ir_fmul(g, ir_vf32(g, GELU_K0), ir_fma(g, u2, ir_vf32(g, 3.0 * GELU_K1), one));
    LLVMValueRef grad =
        ir_fma(g, ir_fmul(g, ir_fmul(g, half, up), sech2), dinner, ir_fmul(g, half, ir_fadd(g, one, t)));
    *d_gate = NULL;
    *d_up = ir_fmul(g, dh, grad);
    *h = gelu_h(g, up, t);
}
