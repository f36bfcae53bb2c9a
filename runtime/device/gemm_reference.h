/* The plain GEMM: a tlm_gemm description (device.h) executed on host
 * memory with loops, as the emulated device's GEMM and as the check of
 * every layout the real device hands cuBLASLt.
 *
 * Column-major, as cuBLAS: element (i, j) of a matrix stored with leading
 * dimension ld is at i + j·ld. op(A)(i, l) is A[i + l·lda], or A[l + i·lda]
 * when trans_a; op(B)(l, j) is B[l + j·ldb], or B[j + l·ldb] when trans_b.
 * Product p of a batch reads and writes its operands at base + p·stride.
 *
 * Each D(i, j) = alpha·acc + beta·C(i, j), where acc is the fp32 sum of
 * op(A)(i, l)·op(B)(l, j) for l = 0, 1, ..., k-1 in that order, one rounding
 * per multiply and per add. C is read only when c != 0 and beta != 0 (as
 * cuBLAS: beta = 0 ignores whatever C holds, NaN included). C may equal D:
 * each element is read before it is written and by that element alone.
 *
 * bf16 operands are the upper 16 bits of an fp32 (exact widening); a bf16
 * D is rounded from fp32 to nearest, ties to even (NaN stays NaN).
 *
 * The addresses in the description are host pointers (the emulated device's
 * tlm_dptr). The description must pass tlm_gemm_problem. */
#ifndef TLM_GEMM_REFERENCE_H
#define TLM_GEMM_REFERENCE_H

#include <stdint.h>

#include "device.h"

void tlm_gemm_reference(const tlm_gemm *g);

/* The bf16 conversions the GEMM uses (exposed for the tests). */
float tlm_bf16_to_f32(uint16_t h);
uint16_t tlm_f32_to_bf16(float f);

#endif
