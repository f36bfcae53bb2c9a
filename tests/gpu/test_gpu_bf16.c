/* The bf16 path on the emulated device (runtime/gpu/bf16_gemm.h):
 *   - tlm_to_bf16 (convert.cu) gives tlm_f32_to_bf16's bits on special and
 *     random values, and tlm_f32_to_bf16 is the nearest bf16 (ties to
 *     even) computed independently in double;
 *   - GEMMs lowered to bf16: a weight inside the parameter block (at an odd
 *     offset) read from its bf16 copy, activations rounded into the scratch,
 *     a batch of two activation operands with a gap between them compacted,
 *     C and D fp32: against a double reference computed from the same
 *     bf16-rounded inputs. What remains is fp32 accumulation:
 *       |got - ref| <= gamma_(k+1) (sum_l |a_l b_l| + |beta c|),
 *       gamma_n = n u / (1 - n u), u = 2^-24;
 *     and the result must differ from the unrounded fp32 product somewhere
 *     (else the operands were not rounded);
 *   - an operand stored in bf16 already (TLM_GEMM_BF16, as the bf16
 *     kernels write the normalised rows and the MLP's h) is read as it is
 *     and gives the bits of the rounding pass, with no scratch for it;
 *   - a bf16 D: the fp32 accumulation rounded once to bf16, within
 *     u |D| + (1 + u) gamma_(k+1) sum |a b| of the reference, u = 2^-8;
 *   - a scratch too small is refused with a message. */
#include <float.h>
#include <stdint.h>
#include <string.h>

#include "bf16_gemm.h"
#include "gemm_reference.h"
#include "gpu_linear.h"
#include "test_util.h"

static tlm_device *dev;
static tlm_gpu gpu;

static tlm_dptr dalloc(size_t bytes) {
    tlm_err err = {""};
    tlm_dptr p = tlm_device_alloc(dev, bytes, &err);
    if (!p) {
        printf("FAIL: %s\n", err.msg);
        exit(1);
    }
    return p;
}
static void up(tlm_dptr d, const void *p, size_t bytes) {
    tlm_err err = {""};
    if (!tlm_device_upload(dev, d, p, bytes, &err)) printf("FAIL upload: %s\n", err.msg), exit(1);
}
static void down(void *p, tlm_dptr d, size_t bytes) {
    tlm_err err = {""};
    if (!tlm_device_download(dev, p, d, bytes, &err)) printf("FAIL download: %s\n", err.msg), exit(1);
}

static float from_bits(uint32_t b) {
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}
static uint32_t bits_of(float f) {
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

/* The nearest bf16 of a finite f by value, in double: the two bf16
 * neighbours (truncation and the next one up in magnitude), the closer one,
 * on a tie the one with an even last bit. */
static uint16_t nearest_bf16(float f) {
    uint32_t b = bits_of(f);
    uint16_t lo = (uint16_t)(b >> 16), hi = (uint16_t)(lo + 1);
    double dl = fabs((double)f - (double)tlm_bf16_to_f32(lo)), dh = fabs((double)f - (double)tlm_bf16_to_f32(hi));
    if ((hi & 0x7f80) == 0x7f80 && (lo & 0x7f80) != 0x7f80) /* next is infinity: overflow rule */
        dh = fabs((double)f - ldexp(1.0, 128) * (f < 0 ? -1 : 1));
    if (dl < dh) return lo;
    if (dh < dl) return hi;
    return (lo & 1) ? hi : lo;
}

static void conversions(void) {
    enum { N = 20000 };
    float *x = falloc(N);
    const float special[] = {0.0f,
                             -0.0f,
                             1.0f,
                             -1.0f,
                             from_bits(0x3f808000u) /* 1 + 2^-8: tie, down */,
                             from_bits(0x3f818000u) /* tie, up */,
                             from_bits(0x3f808001u),
                             FLT_MIN,
                             FLT_MIN / 3,
                             from_bits(1),
                             FLT_MAX,
                             -FLT_MAX,
                             from_bits(0x7f7f8000u) /* tie to infinity */,
                             INFINITY,
                             -INFINITY,
                             NAN,
                             from_bits(0x7f800001u) /* signalling NaN */,
                             from_bits(0xffc00000u)};
    const int nspecial = (int)(sizeof special / sizeof *special);
    memcpy(x, special, sizeof special);
    uint32_t s = 12345;
    for (int i = nspecial; i < N; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = from_bits(s);
    }
    tlm_dptr dx = dalloc(N * sizeof(float)), dy = dalloc(N * 2);
    up(dx, x, N * sizeof(float));
    tlm_err err = {""};
    CHECK(tlm_gpu_to_bf16(&gpu, dy, dx, N, &err), "%s", err.msg);
    uint16_t *y = calloc(N, sizeof *y);
    down(y, dy, N * 2);
    int wrong = 0, wrong_ref = 0, nan_kept = 0;
    for (int i = 0; i < N; i++) {
        uint16_t want = tlm_f32_to_bf16(x[i]);
        if (y[i] != want && wrong++ < 5)
            printf("FAIL bits of %a (0x%08x): got 0x%04x want 0x%04x\n", x[i], bits_of(x[i]), y[i], want);
        if (isnan(x[i])) nan_kept += isnan(tlm_bf16_to_f32(want));
        else if (want != nearest_bf16(x[i]) && wrong_ref++ < 5)
            printf("FAIL tlm_f32_to_bf16(%a) = 0x%04x, nearest 0x%04x\n", x[i], want, nearest_bf16(x[i]));
    }
    CHECK(wrong == 0 && wrong_ref == 0, "%d device and %d reference conversions wrong", wrong, wrong_ref);
    CHECK(y[4] == 0x3f80 && y[5] == 0x3f82 && y[12] == 0x7f80, "ties: 0x%04x 0x%04x 0x%04x", y[4], y[5], y[12]);
    CHECK(nan_kept >= 3, "NaN stays NaN (%d)", nan_kept);
    tlm_device_free(dev, dx);
    tlm_device_free(dev, dy);
    free(x), free(y);
}

static float bf(float v) { return tlm_bf16_to_f32(tlm_f32_to_bf16(v)); }

static void fill(float *p, size_t n, uint32_t *s) {
    for (size_t i = 0; i < n; i++) {
        *s = *s * 1664525u + 1013904223u;
        p[i] = ((float)(*s >> 8) / 16777216.0f * 2.0f - 1.0f) * 1.7f;
    }
}

/* Compares got[n] with ref (from rounded inputs) and unrounded. */
static void compare(const char *what, const float *got, const double *ref, const double *abs_sum,
                    const double *unrounded, int64_t n, int64_t k) {
    const double u = ldexp(1.0, -24), gamma = (double)(k + 1) * u / (1 - (double)(k + 1) * u);
    double worst = 0, off = 0;
    for (int64_t i = 0; i < n; i++) {
        double r = fabs((double)got[i] - ref[i]) / (gamma * abs_sum[i] + 1e-30);
        if (!(r <= worst)) worst = r;
        off = fmax(off, fabs((double)got[i] - unrounded[i]) / (gamma * abs_sum[i] + 1e-30));
    }
    CHECK(worst <= 1.0, "%s: %.3f of the bound", what, worst);
    CHECK(off > 1.0, "%s: equals the unrounded fp32 product (%.3f of the bound): nothing was rounded", what, off);
}

/* y = x W^T (+ y), dx = dy W, dW += dy^T x with W at an odd offset of a
 * parameter block, in bf16. */
static void linear_case(int N, int in, int out, bool accumulate, uint32_t seed) {
    const int64_t offset = 3, nw = (int64_t)out * in, block = nw + 7;
    float *params = falloc((size_t)block), *x = falloc((size_t)N * in), *y = falloc((size_t)N * out);
    float *dy = falloc((size_t)N * out), *dw = falloc((size_t)nw);
    fill(params, (size_t)block, &seed), fill(x, (size_t)N * in, &seed), fill(y, (size_t)N * out, &seed);
    fill(dy, (size_t)N * out, &seed), fill(dw, (size_t)nw, &seed);
    const float *w = params + offset;
    tlm_dptr g_params = dalloc((size_t)block * 4), g_copy = dalloc((size_t)block * 2), g_x = dalloc((size_t)N * in * 4);
    tlm_dptr g_y = dalloc((size_t)N * out * 4), g_dy = dalloc((size_t)N * out * 4), g_dx = dalloc((size_t)N * in * 4);
    tlm_dptr g_dw = dalloc((size_t)nw * 4);
    int64_t widest = (int64_t)N * (in > out ? in : out);
    tlm_bf16_gemm b = {.weights = g_params,
                       .weight_floats = block,
                       .weights_bf16 = g_copy,
                       .scratch_elems = tlm_bf16_gemm_scratch_elems(widest, 2)};
    b.scratch = dalloc((size_t)b.scratch_elems * 2);
    up(g_params, params, (size_t)block * 4), up(g_x, x, (size_t)N * in * 4), up(g_y, y, (size_t)N * out * 4);
    up(g_dy, dy, (size_t)N * out * 4), up(g_dw, dw, (size_t)nw * 4);
    tlm_err err = {""};
    CHECK(tlm_gpu_to_bf16(&gpu, g_copy, g_params, block, &err), "%s", err.msg);
    gpu.bf16 = &b;
    tlm_dptr g_w = g_params + (tlm_dptr)offset * 4;
    bool ok = tlm_gpu_linear_forward(&gpu, g_y, g_x, g_w, N, in, out, accumulate, &err) &&
              tlm_gpu_linear_backward(&gpu, g_dx, g_dw, g_dy, g_x, g_w, N, in, out, false, &err);
    gpu.bf16 = NULL;
    CHECK(ok, "N=%d in=%d out=%d: %s", N, in, out, err.msg);
    char what[96];
    if (ok) {
        int64_t most = (int64_t)N * (in > out ? in : out) + nw;
        double *ref = calloc((size_t)most, sizeof *ref), *sum = calloc((size_t)most, sizeof *sum);
        double *raw = calloc((size_t)most, sizeof *raw);
        float *got = falloc((size_t)most);
        /* y */
        for (int n = 0; n < N; n++)
            for (int o = 0; o < out; o++) {
                double r = 0, a = 0, q = 0;
                for (int i = 0; i < in; i++) {
                    double t = (double)bf(x[n * in + i]) * bf(w[o * in + i]);
                    r += t, a += fabs(t), q += (double)x[n * in + i] * w[o * in + i];
                }
                double c = accumulate ? y[n * out + o] : 0;
                ref[n * out + o] = r + c, sum[n * out + o] = a + fabs(c), raw[n * out + o] = q + c;
            }
        down(got, g_y, (size_t)N * out * 4);
        snprintf(what, sizeof what, "y %s N=%d in=%d out=%d", accumulate ? "+=" : "=", N, in, out);
        compare(what, got, ref, sum, raw, (int64_t)N * out, in);
        /* dx */
        for (int n = 0; n < N; n++)
            for (int i = 0; i < in; i++) {
                double r = 0, a = 0, q = 0;
                for (int o = 0; o < out; o++) {
                    double t = (double)bf(dy[n * out + o]) * bf(w[o * in + i]);
                    r += t, a += fabs(t), q += (double)dy[n * out + o] * w[o * in + i];
                }
                ref[n * in + i] = r, sum[n * in + i] = a, raw[n * in + i] = q;
            }
        down(got, g_dx, (size_t)N * in * 4);
        snprintf(what, sizeof what, "dx N=%d in=%d out=%d", N, in, out);
        compare(what, got, ref, sum, raw, (int64_t)N * in, out);
        /* dW += dy^T x */
        for (int o = 0; o < out; o++)
            for (int i = 0; i < in; i++) {
                double r = dw[o * in + i], a = fabs(dw[o * in + i]), q = dw[o * in + i];
                for (int n = 0; n < N; n++) {
                    double t = (double)bf(dy[n * out + o]) * bf(x[n * in + i]);
                    r += t, a += fabs(t), q += (double)dy[n * out + o] * x[n * in + i];
                }
                ref[o * in + i] = r, sum[o * in + i] = a, raw[o * in + i] = q;
            }
        down(got, g_dw, (size_t)nw * 4);
        snprintf(what, sizeof what, "dW N=%d in=%d out=%d", N, in, out);
        compare(what, got, ref, sum, raw, nw, N);
        free(ref), free(sum), free(raw), free(got);
    }
    tlm_dptr all[] = {g_params, g_copy, g_x, g_y, g_dy, g_dx, g_dw, b.scratch};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tlm_device_free(dev, all[i]);
    free(params), free(x), free(y), free(dy), free(dw);
}

/* Two products D_p = A B_p (p = 0, 1) with the B_p activations two
 * segments apart (another buffer between them): the lowering rounds each
 * item into the scratch and compacts the stride. Also: a scratch one
 * element too small is refused with a message; a B stored in bf16
 * (TLM_GEMM_BF16) is read as it is; and D in bf16. */
static void batched_case(void) {
    const int m = 5, n = 7, k = 9;
    const int64_t seg = 100; /* elements per segment; an item spans (n-1)·k + k = 63 */
    uint32_t s = 77;
    float a[5 * 9], bseg[3 * 100], dout[2 * 5 * 7];
    fill(a, sizeof a / sizeof *a, &s), fill(bseg, sizeof bseg / sizeof *bseg, &s);
    tlm_dptr ga = dalloc(sizeof a), gb = dalloc(sizeof bseg), gd = dalloc(sizeof dout);
    up(ga, a, sizeof a), up(gb, bseg, sizeof bseg);
    tlm_bf16_gemm b = {.weights = 0,
                       .weight_floats = 0,
                       .scratch_elems = tlm_bf16_gemm_scratch_elems(m * k, 1) + tlm_bf16_gemm_scratch_elems(n * k, 2)};
    b.scratch = dalloc((size_t)b.scratch_elems * 2);
    tlm_gemm g = {.m = m,
                  .n = n,
                  .k = k,
                  .a = ga,
                  .lda = m,
                  .b = gb,
                  .ldb = k,
                  .d = gd,
                  .ldd = m,
                  .batch = 2,
                  .stride_b = 2 * seg,
                  .stride_d = (int64_t)m * n,
                  .alpha = 1.0f};
    tlm_err err = {""};
    CHECK(tlm_gpu_gemm_bf16(&gpu, &b, &g, &err), "batched: %s", err.msg);
    down(dout, gd, sizeof dout);
    double ref[70], sum[70], raw[70];
    float got[70];
    for (int p = 0; p < 2; p++)
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                double r = 0, q = 0, t = 0;
                for (int l = 0; l < k; l++) {
                    float av = a[i + l * m], bv = bseg[p * 2 * seg + l + j * k];
                    r += (double)bf(av) * bf(bv), t += fabs((double)bf(av) * bf(bv)), q += (double)av * bv;
                }
                int e = p * m * n + i + j * m;
                ref[e] = r, sum[e] = t, raw[e] = q, got[e] = dout[e];
            }
    compare("batched, items apart", got, ref, sum, raw, 70, k);
    tlm_bf16_gemm small = b;
    small.scratch_elems -= 1;
    CHECK(!tlm_gpu_gemm_bf16(&gpu, &small, &g, &err) && strstr(err.msg, "bf16 GEMM scratch"), "%s", err.msg);
    /* B stored in bf16 already (what a bf16 kernel writes: the same
     * rounding): described as a TLM_GEMM_BF16 operand it is read as it is,
     * with the same strides, and gives the very bits of the rounding pass;
     * only A needs the scratch now. */
    tlm_dptr gb16 = dalloc(sizeof bseg / 2);
    CHECK(tlm_gpu_to_bf16(&gpu, gb16, gb, (int64_t)(sizeof bseg / sizeof *bseg), &err), "%s", err.msg);
    tlm_gemm typed = g;
    typed.b = gb16, typed.b_type = TLM_GEMM_BF16;
    tlm_bf16_gemm a_only = b;
    a_only.scratch_elems = tlm_bf16_gemm_scratch_elems(m * k, 1);
    float dout16[2 * 5 * 7];
    CHECK(tlm_gpu_gemm_bf16(&gpu, &a_only, &typed, &err), "bf16-typed B: %s", err.msg);
    down(dout16, gd, sizeof dout16);
    CHECK(memcmp(dout16, dout, sizeof dout) == 0, "a B stored in bf16 gives other bits than B rounded before the GEMM");
    /* D in bf16 (the MLP's pre-activations): the fp32 accumulation rounded
     * once, so within u |D| + (1 + u) gamma_(k+1) sum |a b| of the double
     * reference, u = 2^-8; and it must not be the fp32 result's bits */
    tlm_dptr gd16 = dalloc(sizeof dout / 2);
    typed.d = gd16, typed.cd_type = TLM_GEMM_BF16;
    CHECK(tlm_gpu_gemm_bf16(&gpu, &a_only, &typed, &err), "bf16 D: %s", err.msg);
    uint16_t d16[2 * 5 * 7];
    down(d16, gd16, sizeof d16);
    const double u16 = 1.0 / 256, u32 = ldexp(1.0, -24), gamma = (k + 1) * u32 / (1 - (k + 1) * u32);
    double worst16 = 0;
    int rounded = 0;
    for (int e = 0; e < 70; e++) {
        double v = tlm_bf16_to_f32(d16[e]);
        double r = fabs(v - ref[e]) / (u16 * fabs(ref[e]) + (1 + u16) * gamma * sum[e] + 1e-30);
        if (!(r <= worst16)) worst16 = r;
        rounded += v != dout[e];
    }
    CHECK(worst16 <= 1.0, "bf16 D: %.3f of the bound", worst16);
    CHECK(rounded > 0, "bf16 D: every element equals the fp32 D: nothing was rounded");
    tlm_device_free(dev, ga), tlm_device_free(dev, gb), tlm_device_free(dev, gd), tlm_device_free(dev, b.scratch);
    tlm_device_free(dev, gb16), tlm_device_free(dev, gd16);
}

int main(void) {
    tlm_err err = {""};
    dev = tlm_device_open("cuda", &err);
    if (!dev || !tlm_gpu_open(&gpu, dev, &err)) {
        printf("FAIL: cannot open the device: %s\n", err.msg);
        return 1;
    }
    conversions();
    const int sizes[][3] = {{1, 3, 2}, {5, 17, 9}, {37, 40, 33}, {8, 64, 130}};
    for (int i = 0; i < 4; i++)
        for (int acc = 0; acc < 2; acc++) linear_case(sizes[i][0], sizes[i][1], sizes[i][2], acc, 900u + (uint32_t)i);
    batched_case();
    tlm_gpu_close(&gpu);
    tlm_device_close(dev);
    return test_finish("test_gpu_bf16");
}
