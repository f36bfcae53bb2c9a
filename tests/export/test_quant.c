/* f16 and q8_0 of runtime/export/quant.c against their definitions:
 * every finite half converts to the float its bits define and back; every
 * midpoint between two neighbouring halves rounds to the even one, and the
 * floats just beside it to the nearer one; overflow, underflow, infinities
 * and NaN; a q8_0 block worked out by hand. Exit 0, or 1 with a line per
 * failure. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "quant.h"

static int failures;
#define CHECK(cond, ...)                              \
    do {                                              \
        if (!(cond)) {                                \
            if (failures++ < 20) printf(__VA_ARGS__); \
        }                                             \
    } while (0)

/* The value of half h from its fields (IEEE 754 binary16), in double. */
static double half_value(unsigned h) {
    unsigned s = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, (int)e - 25);
    return s ? -v : v;
}

int main(void) {
    for (unsigned h = 0; h < 0x10000; h++) {
        double v = half_value(h);
        if (isnan(v)) {
            CHECK(isnan(tlm_f16_to_f32((uint16_t)h)), "f16 %04x: not NaN\n", h);
            continue;
        }
        float f = tlm_f16_to_f32((uint16_t)h);
        CHECK((double)f == v && !signbit(f) == !signbit(v), "f16 %04x: %g, expected %g\n", h, f, v);
        CHECK(tlm_f32_to_f16((float)v) == h, "f32 %g: f16 %04x, expected %04x\n", v, tlm_f32_to_f16((float)v), h);
        unsigned up = h + 1;
        if ((h & 0x7fff) >= 0x7c00 || (up & 0x7fff) > 0x7c00 || (up & 0x8000) != (h & 0x8000)) continue;
        /* the midpoint to the next half away from zero (inf: 65520) */
        double next = (up & 0x7fff) == 0x7c00 ? (h & 0x8000 ? -65536.0 : 65536.0) : half_value(up);
        float mid = (float)((v + next) / 2);
        unsigned even = (h & 1) ? up : h;
        CHECK(tlm_f32_to_f16(mid) == even, "midpoint %.9g: f16 %04x, expected %04x\n", mid, tlm_f32_to_f16(mid), even);
        float beyond = nextafterf(mid, (float)next * 2), before = nextafterf(mid, (float)v);
        CHECK(tlm_f32_to_f16(beyond) == up, "%.9g: f16 %04x, expected %04x\n", beyond, tlm_f32_to_f16(beyond), up);
        CHECK(tlm_f32_to_f16(before) == h, "%.9g: f16 %04x, expected %04x\n", before, tlm_f32_to_f16(before), h);
    }
    CHECK(tlm_f32_to_f16(1e6f) == 0x7c00 && tlm_f32_to_f16(-INFINITY) == 0xfc00, "overflow, -inf\n");
    CHECK(tlm_f32_to_f16(1e-9f) == 0 && tlm_f32_to_f16(-1e-9f) == 0x8000, "underflow keeps the sign\n");
    CHECK((tlm_f32_to_f16(NAN) & 0x7c00) == 0x7c00 && (tlm_f32_to_f16(NAN) & 0x3ff), "NaN stays NaN\n");

    /* q8_0: x_j = j - 16 -> amax 16, d = 16/127, q_j = round((j - 16) * 127 / 16) */
    float x[32];
    uint8_t block[TLM_Q8_0_BYTES];
    for (int j = 0; j < 32; j++) x[j] = (float)(j - 16);
    tlm_ggml_encode(TLM_GGML_Q8_0, x, 32, block);
    uint16_t d = (uint16_t)(block[0] | block[1] << 8);
    CHECK(d == tlm_f32_to_f16(16.0f / 127), "q8_0 scale %04x\n", d);
    for (int j = 0; j < 32; j++) {
        int want = (int)lround((j - 16) * 127.0 / 16);
        CHECK((int8_t)block[2 + j] == want, "q8_0 q[%d] = %d, expected %d\n", j, (int8_t)block[2 + j], want);
    }
    memset(x, 0, sizeof x);
    tlm_ggml_encode(TLM_GGML_Q8_0, x, 32, block);
    for (int j = 0; j < TLM_Q8_0_BYTES; j++) CHECK(block[j] == 0, "q8_0 of zeros: byte %d is %d\n", j, block[j]);
    CHECK(tlm_ggml_nbytes(TLM_GGML_Q8_0, 64) == 68 && tlm_ggml_nbytes(TLM_GGML_F16, 3) == 6, "sizes\n");
    /* what each type holds: f16 up to 65504 once rounded (65519.99 rounds
     * down to it, the midpoint 65520 to infinity); q8_0 a block whose
     * scale max|x| / 127 does; f32 any finite value; none NaN or inf */
    const float f16_ok[] = {65504.0f, 65519.99f, -65519.99f, 1e-9f}, f16_bad[] = {65520.0f, -1e6f, NAN, INFINITY};
    for (int i = 0; i < 4; i++) {
        CHECK(tlm_ggml_holds(TLM_GGML_F16, &f16_ok[i], 1), "f16 holds %.9g\n", f16_ok[i]);
        CHECK(!tlm_ggml_holds(TLM_GGML_F16, &f16_bad[i], 1), "f16 does not hold %.9g\n", f16_bad[i]);
        CHECK(tlm_ggml_holds(TLM_GGML_F32, &f16_bad[i], 1) == (i < 2), "f32 and %.9g\n", f16_bad[i]);
    }
    for (int j = 0; j < 32; j++) x[j] = 1.0f;
    x[7] = 127.0f * 65504.0f;
    CHECK(tlm_ggml_holds(TLM_GGML_Q8_0, x, 32), "q8_0 holds a block of max 127 x 65504\n");
    x[7] = 127.0f * 65520.0f;
    CHECK(!tlm_ggml_holds(TLM_GGML_Q8_0, x, 32), "q8_0: a scale beyond float16\n");
    x[7] = 1.0f, x[31] = NAN;
    CHECK(!tlm_ggml_holds(TLM_GGML_Q8_0, x, 32), "q8_0: a NaN\n");
    printf("%s: f16 (all 65536 halves, every midpoint), q8_0, what each type holds\n", failures ? "FAIL" : "ok");
    return failures ? 1 : 0;
}
