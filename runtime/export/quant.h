/* The tensor types of an export, as ggml stores them: f32, f16 (IEEE
 * binary16, rounded to nearest even) and q8_0 (blocks of 32 values: one
 * fp16 scale d = max|x| / 127, then 32 int8 q = round(x / d); x ~ d q),
 * the layout and rounding of ggml's quantize_row_q8_0_ref. */
#ifndef TLM_EXPORT_QUANT_H
#define TLM_EXPORT_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ggml_type values (ORDER matters: they are stored in the file). */
enum tlm_ggml_type { TLM_GGML_F32 = 0, TLM_GGML_F16 = 1, TLM_GGML_Q8_0 = 8 };
enum { TLM_Q8_0_BLOCK = 32, TLM_Q8_0_BYTES = 34 }; /* values and bytes per block */

uint16_t tlm_f32_to_f16(float x);
float tlm_f16_to_f32(uint16_t h);

/* The bytes n values take in type t (q8_0: n a multiple of 32). */
size_t tlm_ggml_nbytes(enum tlm_ggml_type t, size_t n);
/* Encodes n floats as type t into out (tlm_ggml_nbytes(t, n) bytes),
 * little-endian. */
void tlm_ggml_encode(enum tlm_ggml_type t, const float *x, size_t n, uint8_t *out);
/* Whether type t holds the n values (q8_0: n a multiple of 32): every one
 * finite, and what t stores of it finite too (f16: at most 65504 once
 * rounded; q8_0: each block's scale max|x| / 127 as fp16). An infinite or
 * NaN weight would reach llama.cpp as such, and q8_0's int8 conversion of
 * a NaN is undefined. */
bool tlm_ggml_holds(enum tlm_ggml_type t, const float *x, size_t n);
/* The type's name: "f32", "f16", "q8_0". */
const char *tlm_ggml_type_name(enum tlm_ggml_type t);

#endif
