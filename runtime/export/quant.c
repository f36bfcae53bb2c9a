#include "quant.h"

#include <math.h>
#include <string.h>

uint16_t tlm_f32_to_f16(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    uint32_t sign = (u >> 16) & 0x8000u, e = (u >> 23) & 0xff, m = u & 0x7fffffu;
    if (e == 0xff) return (uint16_t)(sign | 0x7c00u | (m ? 0x200u | (m >> 13) : 0)); /* inf, NaN (quiet) */
    int32_t E = (int32_t)e - 127 + 15;
    if (E >= 0x1f) return (uint16_t)(sign | 0x7c00u); /* overflow: inf */
    if (E <= 0) {                                      /* a subnormal half, or zero */
        if (E < -10) return (uint16_t)sign;
        m |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - E), half = m >> shift, rest = m & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rest > mid || (rest == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t h = ((uint32_t)E << 10) | (m >> 13), rest = m & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1))) h++; /* a carry into the exponent is right, up to inf */
    return (uint16_t)(sign | h);
}

float tlm_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ffu;
    float v;
    if (e == 0) v = ldexpf((float)m, -24);
    else if (e == 0x1f) v = m ? NAN : INFINITY;
    else v = ldexpf((float)(m | 0x400u), (int)e - 25);
    uint32_t u;
    memcpy(&u, &v, 4);
    u |= sign;
    memcpy(&v, &u, 4);
    return v;
}

size_t tlm_ggml_nbytes(enum tlm_ggml_type t, size_t n) {
    switch (t) {
    case TLM_GGML_F32: return 4 * n;
    case TLM_GGML_F16: return 2 * n;
    case TLM_GGML_Q8_0: return n / TLM_Q8_0_BLOCK * TLM_Q8_0_BYTES;
    }
    return 0;
}

static void put16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

/* ggml's quantize_row_q8_0_ref: the scale rounded to fp16 is stored, the
 * values are divided by the unrounded one. */
static void q8_0_block(const float *x, uint8_t *out) {
    float amax = 0;
    for (int j = 0; j < TLM_Q8_0_BLOCK; j++) amax = fmaxf(amax, fabsf(x[j]));
    const float d = amax / 127, id = d ? 1.0f / d : 0.0f;
    put16(out, tlm_f32_to_f16(d));
    for (int j = 0; j < TLM_Q8_0_BLOCK; j++) out[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
}

void tlm_ggml_encode(enum tlm_ggml_type t, const float *x, size_t n, uint8_t *out) {
    switch (t) {
    case TLM_GGML_F32:
        for (size_t i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, &x[i], 4);
            put16(out + 4 * i, (uint16_t)u);
            put16(out + 4 * i + 2, (uint16_t)(u >> 16));
        }
        return;
    case TLM_GGML_F16:
        for (size_t i = 0; i < n; i++) put16(out + 2 * i, tlm_f32_to_f16(x[i]));
        return;
    case TLM_GGML_Q8_0:
        for (size_t b = 0; b < n / TLM_Q8_0_BLOCK; b++) q8_0_block(x + b * TLM_Q8_0_BLOCK, out + b * TLM_Q8_0_BYTES);
        return;
    }
}

static bool f16_finite(float x) { return (tlm_f32_to_f16(x) & 0x7c00u) != 0x7c00u; }

bool tlm_ggml_holds(enum tlm_ggml_type t, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]) || (t == TLM_GGML_F16 && !f16_finite(x[i]))) return false;
    if (t == TLM_GGML_Q8_0)
        for (size_t b = 0; b < n / TLM_Q8_0_BLOCK; b++) {
            float amax = 0; /* as q8_0_block takes it */
            for (int j = 0; j < TLM_Q8_0_BLOCK; j++) amax = fmaxf(amax, fabsf(x[b * TLM_Q8_0_BLOCK + j]));
            if (!f16_finite(amax / 127)) return false;
        }
    return true;
}

const char *tlm_ggml_type_name(enum tlm_ggml_type t) {
    switch (t) {
    case TLM_GGML_F32: return "f32";
    case TLM_GGML_F16: return "f16";
    case TLM_GGML_Q8_0: return "q8_0";
    }
    return "?";
}
