#include "gemm_reference.h"

#include <string.h>

float tlm_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t tlm_f32_to_bf16(float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x0040u); /* NaN: keep it quiet */
    /* Add half an ulp of bf16, less one unless the kept part is odd: ties go
     * to the even neighbour. Overflow to the next binade (or to infinity) is
     * the right rounding. */
    uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)((bits + rounding) >> 16);
}

/* Element e of an operand of type t at host address base. */
static float load(tlm_dptr base, tlm_gemm_type t, int64_t e) {
    if (t == TLM_GEMM_BF16) return tlm_bf16_to_f32(((const uint16_t *)(uintptr_t)base)[e]);
    return ((const float *)(uintptr_t)base)[e];
}

static void store(tlm_dptr base, tlm_gemm_type t, int64_t e, float v) {
    if (t == TLM_GEMM_BF16) ((uint16_t *)(uintptr_t)base)[e] = tlm_f32_to_bf16(v);
    else ((float *)(uintptr_t)base)[e] = v;
}

void tlm_gemm_reference(const tlm_gemm *g) {
    const bool read_c = g->c != 0 && g->beta != 0.0f;
    for (int64_t p = 0; p < g->batch; p++) {
        const int64_t a0 = p * g->stride_a, b0 = p * g->stride_b, c0 = p * g->stride_c, d0 = p * g->stride_d;
        for (int64_t j = 0; j < g->n; j++) {
            for (int64_t i = 0; i < g->m; i++) {
                float acc = 0.0f;
                for (int64_t l = 0; l < g->k; l++) {
                    int64_t ea = g->trans_a ? l + i * g->lda : i + l * g->lda;
                    int64_t eb = g->trans_b ? j + l * g->ldb : l + j * g->ldb;
                    float prod = load(g->a, g->a_type, a0 + ea) * load(g->b, g->b_type, b0 + eb);
                    acc = acc + prod;
                }
                float v = g->alpha * acc;
                if (read_c) {
                    float cv = g->beta * load(g->c, g->cd_type, c0 + i + j * g->ldc);
                    v = v + cv;
                }
                store(g->d, g->cd_type, d0 + i + j * g->ldd, v);
            }
        }
    }
}
