/* gpu.mixers: every wrapper of gpu_mixers.h against its CPU op (tlm_rt/ops.h)
 * on the device that "cuda" opens (the emulated one under the suite's
 * TLM_TEST_DEVICE=emulated), on random inputs of every combination of
 * B in {1, 2}, T in {1, 5, 19}, H in {1, 3}, head size D in {2, 6, 16}, and
 * for the memory chunk in {1, 4, T + 3} (T = 19 with chunk 1 or 4 spans two
 * saved segments of 16 tokens; chunk 4 ends on a short chunk), plus one
 * larger case each for the kernels' loops past a tile, a block or a warp
 * (large_attention, large_titans), and two for the memory's blocks of at
 * most 64 tokens and its 64 x 64 tiles of products (heads of 70 and 130,
 * chunks of 64, 70 and 130). q, k, v come packed [B,T,3,H,D] (stride
 * 3HD) and as separate tensors (stride HD) in turn.
 *
 * Each backward gets the CPU forward's saved tensors (att and y, the
 * memory's `saved`, rnorm), so it is checked on its own; the forwards'
 * saved tensors are compared too (the same layout on both devices is part
 * of the contract). Outputs start as NaN on the device, so an element a
 * kernel fails to write fails the check.
 *
 * Bound, per element: |gpu - cpu| <= 1e-5 |cpu| + 1e-6 max|cpu|, the max
 * taken over the tensor. The floor covers float32 sums that cancel: an
 * output is a sum of n products at the tensor's scale (n up to 2D + T), and
 * the device adds them in another order than the CPU's SIMD loops, which
 * moves the sum by about sqrt(n) 2^-24 (a random walk of roundings; at most
 * n 2^-24) of the terms' size, so an element far below its terms (a
 * near-cancelled dq, a gradient of alpha) loses relative accuracy without
 * being wrong. The Titans recurrences do not amplify this: M and S decay by
 * (1 - alpha) and eta < 1, and an error of M0 feeds back through
 * e = M0 k - v at most 2 theta |k|^2 <= 0.2 per token, so the errors of
 * each token add up about linearly and stay near the per-step size
 * sqrt(D T) 2^-24 ~ 1e-6 of the scale at these sizes. The backward's
 * Frobenius products (deta, dalpha) sum D^2 terms in double on both
 * devices, in another order. The worst error of each op is
 * printed, as a fraction of max|cpu| and of the bound (all below 0.2 of it
 * when written).
 *
 * --precision bf16's attention kernels (q, k, v in bf16; y in bf16 or
 * not) are checked bit for bit against the fp32 kernels on the same
 * rounded inputs, in every attention case (attention_bf16_case), the
 * presets' head sizes 64 and 128 included. So are Titans' (titans_bf16_case,
 * activations_bf16_case): the memory's forward and backward with q, k, v
 * in bf16, and the memory activation with qkv, act and mem_qkv in bf16, in
 * every Titans case and the large one.
 *
 * Also: each kernel gives the same bits with 1 and 2 blocks as with the
 * wrappers' grid (grid_case).
 *
 * A dropped term (the chunk start's dM0 in the memory's backward gives
 * errors of 1e-2 to 1, checked once by hand) or an unwritten slice is far
 * outside the bound. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "gemm_reference.h"
#include "gpu.h"
#include "gpu_mixers.h"
#include "tlm_rt/ops.h"
#include "tlm_rt/rng.h"

#define REL_TOL 1e-5
#define SCALE_FLOOR 1e-6

static tlm_device *g_dev;
static tlm_gpu g_gpu;
static tlm_rng g_rng;
static int g_failures;

/* The worst error of each op over all cases, printed at the end: the
 * largest |gpu - cpu| / max|cpu| and the largest fraction of the bound. */
enum {
    OP_ATT_FWD,
    OP_ATT_BWD,
    OP_TITANS_FWD,
    OP_TITANS_BWD,
    OP_QKV_FWD,
    OP_QKV_BWD,
    OP_GATES_FWD,
    OP_GATES_BWD,
    N_OPS
};
static const char *const op_names[N_OPS] = {"attention_forward",    "attention_backward",   "titans_forward",
                                            "titans_backward",      "titans_qkv_forward",   "titans_qkv_backward",
                                            "titans_gates_forward", "titans_gates_backward"};
static double worst_scaled[N_OPS], worst_bound[N_OPS];

static void die(const char *what, const tlm_err *err) {
    printf("FAIL %s: %s\n", what, err->msg);
    exit(1);
}

static float *host(size_t n) {
    float *p = calloc(n ? n : 1, sizeof(float));
    if (!p) {
        printf("FAIL out of host memory\n");
        exit(1);
    }
    return p;
}

static float *uniform(size_t n, float lo, float hi) {
    float *p = host(n);
    tlm_rng_fill_uniform(&g_rng, p, n, lo, hi);
    return p;
}

/* A device copy of x (n floats). */
static tlm_dptr put(const float *x, size_t n) {
    tlm_err err = {{0}};
    tlm_dptr p = tlm_device_alloc(g_dev, (n ? n : 1) * sizeof(float), &err);
    if (!p) die("alloc", &err);
    if (n && !tlm_device_upload(g_dev, p, x, n * sizeof(float), &err)) die("upload", &err);
    return p;
}

/* A device buffer of n NaNs: what a kernel does not write stays NaN. */
static tlm_dptr nans(size_t n) {
    float *x = host(n);
    for (size_t i = 0; i < n; i++) x[i] = NAN;
    tlm_dptr p = put(x, n);
    free(x);
    return p;
}

static float *get(tlm_dptr p, size_t n) {
    tlm_err err = {{0}};
    float *x = host(n);
    if (!tlm_device_sync(g_dev, &err)) die("sync", &err);
    if (n && !tlm_device_download(g_dev, x, p, n * sizeof(float), &err)) die("download", &err);
    return x;
}

static tlm_dptr at(tlm_dptr base, size_t floats) { return base + floats * sizeof(float); }

/* Compares the device's n floats at p with the CPU's want; frees nothing. */
static void check(int op, const char *tensor, const char *shape, tlm_dptr p, const float *want, size_t n) {
    float *got = get(p, n);
    double scale = 0.0;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs((double)want[i]));
    const double floor_ = SCALE_FLOOR * scale;
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        double bound = REL_TOL * fabs((double)want[i]) + floor_;
        if (!(d <= bound)) { /* NaN fails too */
            if (!bad++) first = i;
            continue;
        }
        if (bound > 0) worst_bound[op] = fmax(worst_bound[op], d / bound);
        if (scale > 0) worst_scaled[op] = fmax(worst_scaled[op], d / scale);
    }
    if (bad) {
        printf("FAIL %s %s (%s): %zu of %zu elements outside the bound, first [%zu] gpu %.9g cpu %.9g\n", op_names[op],
               tensor, shape, bad, n, first, (double)got[first], (double)want[first]);
        g_failures++;
    }
    free(got);
}

/* q, k, v (and their gradients) in one block of 3*B*T*H*D floats: packed
 * [B,T,3,H,D] or three [B,T,H,D] tensors one after another. */
typedef struct {
    int stride;
    size_t qo, ko, vo, n;
} qkv_layout;

static qkv_layout layout(int B, int T, int H, int D, bool packed) {
    size_t one = (size_t)B * T * H * D, A = (size_t)H * D;
    if (packed) return (qkv_layout){3 * H * D, 0, A, 2 * A, 3 * one};
    return (qkv_layout){H * D, 0, one, 2 * one, 3 * one};
}

/* bf16 copies on the device: n elements of 2 bytes. */
static tlm_dptr put16(const uint16_t *x, size_t n) {
    tlm_err err = {{0}};
    tlm_dptr p = tlm_device_alloc(g_dev, (n ? n : 1) * 2, &err);
    if (!p) die("alloc", &err);
    if (n && !tlm_device_upload(g_dev, p, x, n * 2, &err)) die("upload", &err);
    return p;
}
static uint16_t *get16(tlm_dptr p, size_t n) {
    tlm_err err = {{0}};
    uint16_t *x = calloc(n ? n : 1, 2);
    if (!x) die("host memory", &err);
    if (!tlm_device_sync(g_dev, &err) || (n && !tlm_device_download(g_dev, x, p, n * 2, &err))) die("download", &err);
    return x;
}
static tlm_dptr at16(tlm_dptr base, size_t elems) { return base + elems * 2; }

/* The device's n floats at p against want, bit for bit (NaN, the unwritten,
 * never equal). */
static void same_bits(const char *what, const char *shape, tlm_dptr p, const float *want, size_t n) {
    float *got = get(p, n);
    size_t off = 0;
    for (size_t i = 0; i < n; i++) off += memcmp(&got[i], &want[i], sizeof(float)) != 0 || got[i] != got[i];
    if (off) {
        printf("FAIL %s (%s): %zu of %zu elements not the fp32 kernel's bits\n", what, shape, off, n);
        g_failures++;
    }
    free(got);
}

/* --precision bf16's attention: q, k, v stored in bf16, and y too unless a
 * gate reads it. Each bf16 kernel is its fp32 twin's arithmetic on the
 * values widened, so on inputs rounded to bf16 (x16, and xr widened for the
 * fp32 kernels) it must give the fp32 kernel's bits: the forwards y (then
 * rounded to nearest even where stored in bf16) and lse; the backwards dq,
 * dk, dv from the same lse and the same y (the bf16 y widened). The fp32
 * backward on those rounded inputs is held to the CPU's too (the fp32
 * bound), so the bf16 path is anchored to the CPU on the very numbers it
 * reads. */
static void attention_bf16_case(const char *shape, int B, int T, int H, int D, qkv_layout L, const float *x,
                                const float *dy, tlm_dptr DY) {
    size_t ny = (size_t)B * T * H * D, nlse = (size_t)B * T * H;
    tlm_err err = {{0}};
    uint16_t *x16 = calloc(L.n, 2);
    float *xr = host(L.n), *yw = host(ny), *dx = host(L.n);
    if (!x16) die("host memory", &err);
    for (size_t i = 0; i < L.n; i++) xr[i] = tlm_bf16_to_f32(x16[i] = tlm_f32_to_bf16(x[i]));
    tlm_dptr XR = put(xr, L.n), X16 = put16(x16, L.n);
    tlm_dptr q = at(XR, L.qo), k = at(XR, L.ko), v = at(XR, L.vo);
    tlm_dptr q16 = at16(X16, L.qo), k16 = at16(X16, L.ko), v16 = at16(X16, L.vo);
    tlm_dptr YR = nans(ny), LSER = nans(nlse), Y16 = nans((ny + 1) / 2), ACC = nans(ny), LSE16 = nans(nlse);
    tlm_dptr Y32 = nans(ny), LSE32 = nans(nlse);
    if (!tlm_gpu_attention_forward(&g_gpu, YR, LSER, q, k, v, B, T, H, D, L.stride, &err) ||
        !tlm_gpu_attention_forward_bf16(&g_gpu, Y16, ACC, LSE16, q16, k16, v16, B, T, H, D, L.stride, &err) ||
        !tlm_gpu_attention_forward_qkv_bf16(&g_gpu, Y32, LSE32, q16, k16, v16, B, T, H, D, L.stride, &err))
        die("attention_forward on rounded inputs", &err);
    float *yr = get(YR, ny), *lser = get(LSER, nlse);
    uint16_t *y16 = get16(Y16, ny);
    size_t off = 0;
    for (size_t i = 0; i < ny; i++) {
        off += y16[i] != tlm_f32_to_bf16(yr[i]);
        yw[i] = tlm_bf16_to_f32(y16[i]);
    }
    if (off) {
        printf("FAIL attention_forward_bf16 (%s): %zu of %zu y not the fp32 kernel's y rounded\n", shape, off, ny);
        g_failures++;
    }
    same_bits("attention_forward_bf16 lse", shape, LSE16, lser, nlse);
    same_bits("attention_forward_qkv_bf16 y", shape, Y32, yr, ny);
    same_bits("attention_forward_qkv_bf16 lse", shape, LSE32, lser, nlse);

    tlm_dptr YW = put(yw, ny), DXR = nans(L.n), DX16 = nans(L.n), DXQ = nans(L.n);
    if (!tlm_gpu_attention_backward(&g_gpu, at(DXR, L.qo), at(DXR, L.ko), at(DXR, L.vo), DY, YW, LSER, q, k, v, B, T, H,
                                    D, L.stride, &err) ||
        !tlm_gpu_attention_backward_bf16(&g_gpu, at(DX16, L.qo), at(DX16, L.ko), at(DX16, L.vo), DY, Y16, LSER, q16,
                                         k16, v16, B, T, H, D, L.stride, &err) ||
        !tlm_gpu_attention_backward_qkv_bf16(&g_gpu, at(DXQ, L.qo), at(DXQ, L.ko), at(DXQ, L.vo), DY, YW, LSER, q16,
                                             k16, v16, B, T, H, D, L.stride, &err))
        die("attention_backward on rounded inputs", &err);
    tlm_attention_backward(dx + L.qo, dx + L.ko, dx + L.vo, dy, yw, lser, xr + L.qo, xr + L.ko, xr + L.vo, B, T, H, D,
                           L.stride);
    check(OP_ATT_BWD, "dq dk dv on bf16 inputs", shape, DXR, dx, L.n);
    float *dxr = get(DXR, L.n);
    same_bits("attention_backward_bf16 dq dk dv", shape, DX16, dxr, L.n);
    same_bits("attention_backward_qkv_bf16 dq dk dv", shape, DXQ, dxr, L.n);

    tlm_dptr bufs[] = {XR, X16, YR, LSER, Y16, ACC, LSE16, Y32, LSE32, YW, DXR, DX16, DXQ};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) tlm_device_free(g_dev, bufs[i]);
    free(x16), free(xr), free(yw), free(dx), free(yr), free(lser), free(y16), free(dxr);
}

static void attention_case(int B, int T, int H, int D, bool packed) {
    char shape[96];
    snprintf(shape, sizeof shape, "B %d T %d H %d D %d %s", B, T, H, D, packed ? "packed" : "separate");
    qkv_layout L = layout(B, T, H, D, packed);
    size_t ny = (size_t)B * T * H * D, nlse = (size_t)B * T * H;
    float *x = uniform(L.n, -1.0f, 1.0f), *dy = uniform(ny, -1.0f, 1.0f);
    float *y = host(ny), *lse = host(nlse), *dx = host(L.n);
    tlm_attention_forward(y, lse, x + L.qo, x + L.ko, x + L.vo, B, T, H, D, L.stride);
    tlm_attention_backward(dx + L.qo, dx + L.ko, dx + L.vo, dy, y, lse, x + L.qo, x + L.ko, x + L.vo, B, T, H, D,
                           L.stride);

    tlm_err err = {{0}};
    tlm_dptr X = put(x, L.n), Y = nans(ny), LSE = nans(nlse);
    if (!tlm_gpu_attention_forward(&g_gpu, Y, LSE, at(X, L.qo), at(X, L.ko), at(X, L.vo), B, T, H, D, L.stride, &err))
        die("attention_forward", &err);
    check(OP_ATT_FWD, "y", shape, Y, y, ny);
    check(OP_ATT_FWD, "lse", shape, LSE, lse, nlse);

    /* the backward from the CPU's y and lse: the comparison is of the
     * backward alone */
    tlm_dptr DY = put(dy, ny), Yc = put(y, ny), LSEc = put(lse, nlse), DX = nans(L.n);
    if (!tlm_gpu_attention_backward(&g_gpu, at(DX, L.qo), at(DX, L.ko), at(DX, L.vo), DY, Yc, LSEc, at(X, L.qo),
                                    at(X, L.ko), at(X, L.vo), B, T, H, D, L.stride, &err))
        die("attention_backward", &err);
    check(OP_ATT_BWD, "dq dk dv", shape, DX, dx, L.n);

    attention_bf16_case(shape, B, T, H, D, L, x, dy, DY);

    tlm_dptr bufs[] = {X, Y, LSE, DY, Yc, LSEc, DX};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) tlm_device_free(g_dev, bufs[i]);
    free(x), free(dy), free(y), free(lse), free(dx);
}

/* Unit rows of D floats (the memory expects l2-normalised q and k). */
static void normalise_rows(float *x, size_t rows, int D, int stride) {
    for (size_t r = 0; r < rows; r++) {
        float *v = x + r * (size_t)stride;
        double ss = 0.0;
        for (int i = 0; i < D; i++) ss += (double)v[i] * v[i];
        float s = (float)(1.0 / sqrt(ss + 1e-12));
        for (int i = 0; i < D; i++) v[i] *= s;
    }
}

/* Rounds x to bf16: x16 the bits, xr (if not NULL) the values widened. */
static uint16_t *rounded(const float *x, size_t n, float *xr) {
    uint16_t *x16 = calloc(n ? n : 1, 2);
    if (!x16) {
        printf("FAIL out of host memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) {
        x16[i] = tlm_f32_to_bf16(x[i]);
        if (xr) xr[i] = tlm_bf16_to_f32(x16[i]);
    }
    return x16;
}

/* The device's n bf16 elements at p against want rounded to nearest even,
 * bit for bit. */
static void same_rounded(const char *what, const char *shape, tlm_dptr p, const float *want, size_t n) {
    uint16_t *got = get16(p, n);
    size_t off = 0;
    for (size_t i = 0; i < n; i++) off += got[i] != tlm_f32_to_bf16(want[i]);
    if (off) {
        printf("FAIL %s (%s): %zu of %zu elements not the fp32 kernel's, rounded\n", what, shape, off, n);
        g_failures++;
    }
    free(got);
}

/* --precision bf16's memory: q, k, v (mem_qkv) and the forward's read-out
 * y in bf16, everything else in fp32. The bf16 kernels are the fp32 ones'
 * arithmetic on the values widened, so on x rounded (xr widened for the
 * fp32 kernels) saved and every gradient must be the fp32 kernels' bits,
 * and y the fp32 kernel's y rounded to nearest even. The backward gets the
 * fp32 forward's saved tensor (the bf16 forward's is checked equal to it). */
static void titans_bf16_case(const char *shape, int B, int T, int H, int D, int chunk, qkv_layout L, const float *x,
                             tlm_dptr G, tlm_dptr DY) {
    size_t ny = (size_t)B * T * H * D, BTH = (size_t)B * T * H;
    size_t nsaved = tlm_titans_saved_floats(B, T, H, D, chunk);
    float *xr = host(L.n);
    uint16_t *x16 = rounded(x, L.n, xr);
    tlm_err err = {{0}};
    tlm_dptr XR = put(xr, L.n), X16 = put16(x16, L.n), TH = G, ETA = at(G, BTH), AL = at(G, 2 * BTH);
    tlm_dptr Y = nans(ny), SAVED = nans(nsaved), Y16 = nans(ny), SAVED16 = nans(nsaved);
    if (!tlm_gpu_titans_forward(&g_gpu, Y, SAVED, at(XR, L.qo), at(XR, L.ko), at(XR, L.vo), L.stride, TH, ETA, AL, B, T,
                                H, D, chunk, &err) ||
        !tlm_gpu_titans_forward_bf16(&g_gpu, Y16, SAVED16, at16(X16, L.qo), at16(X16, L.ko), at16(X16, L.vo), L.stride,
                                     TH, ETA, AL, B, T, H, D, chunk, &err))
        die("titans_forward on rounded inputs", &err);
    float *y = get(Y, ny), *saved = get(SAVED, nsaved);
    same_rounded("titans_forward_bf16 y", shape, Y16, y, ny);
    same_bits("titans_forward_bf16 saved", shape, SAVED16, saved, nsaved);

    size_t scratch_floats = tlm_gpu_titans_scratch_bytes(B, H, D, chunk) / sizeof(float);
    tlm_dptr DX = nans(L.n), DG = nans(3 * BTH), DX16 = nans(L.n), DG16 = nans(3 * BTH);
    tlm_dptr SCRATCH = nans(scratch_floats);
    if (!tlm_gpu_titans_backward(&g_gpu, at(DX, L.qo), at(DX, L.ko), at(DX, L.vo), DG, at(DG, BTH), at(DG, 2 * BTH), DY,
                                 SAVED, at(XR, L.qo), at(XR, L.ko), 0, L.stride, TH, ETA, AL, B, T, H, D, chunk,
                                 SCRATCH, &err) ||
        !tlm_gpu_titans_backward_bf16(&g_gpu, at(DX16, L.qo), at(DX16, L.ko), at(DX16, L.vo), DG16, at(DG16, BTH),
                                      at(DG16, 2 * BTH), DY, SAVED, at16(X16, L.qo), at16(X16, L.ko), 0, L.stride, TH,
                                      ETA, AL, B, T, H, D, chunk, SCRATCH, &err))
        die("titans_backward on rounded inputs", &err);
    float *dx = get(DX, L.n), *dg = get(DG, 3 * BTH);
    same_bits("titans_backward_bf16 dq dk dv", shape, DX16, dx, L.n);
    same_bits("titans_backward_bf16 dtheta deta dalpha", shape, DG16, dg, 3 * BTH);

    tlm_dptr bufs[] = {XR, X16, Y, SAVED, Y16, SAVED16, DX, DG, DX16, DG16, SCRATCH};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) tlm_device_free(g_dev, bufs[i]);
    free(xr), free(x16), free(y), free(saved), free(dx), free(dg);
}

static void titans_case(int B, int T, int H, int D, int chunk, bool packed) {
    char shape[112];
    snprintf(shape, sizeof shape, "B %d T %d H %d D %d chunk %d %s", B, T, H, D, chunk, packed ? "packed" : "separate");
    qkv_layout L = layout(B, T, H, D, packed);
    size_t ny = (size_t)B * T * H * D, BTH = (size_t)B * T * H;
    size_t nsaved = tlm_titans_saved_floats(B, T, H, D, chunk);
    float *x = uniform(L.n, -1.0f, 1.0f), *dy = uniform(ny, -1.0f, 1.0f);
    /* head rows of q and k, in either layout: B*T*H rows of D at the token
     * stride, one head apart */
    for (size_t bt = 0; bt < (size_t)B * T; bt++)
        for (int h = 0; h < H; h++) {
            normalise_rows(x + L.qo + bt * L.stride + (size_t)h * D, 1, D, L.stride);
            normalise_rows(x + L.ko + bt * L.stride + (size_t)h * D, 1, D, L.stride);
        }
    float *gates = host(3 * BTH); /* theta, eta, alpha at a model's scales */
    tlm_rng_fill_uniform(&g_rng, gates, BTH, 0.001f, 0.1f);
    tlm_rng_fill_uniform(&g_rng, gates + BTH, 2 * BTH, 0.05f, 0.95f);
    const float *theta = gates, *eta = gates + BTH, *alpha = gates + 2 * BTH;
    float *y = host(ny), *saved = host(nsaved), *dx = host(L.n), *dg = host(3 * BTH);
    float *scratch = host(tlm_titans_scratch_floats(D, chunk));
    tlm_titans_forward(y, saved, x + L.qo, x + L.ko, x + L.vo, L.stride, theta, eta, alpha, B, T, H, D, chunk);
    tlm_titans_backward(dx + L.qo, dx + L.ko, dx + L.vo, dg, dg + BTH, dg + 2 * BTH, dy, saved, x + L.qo, x + L.ko,
                        x + L.vo, L.stride, theta, eta, alpha, B, T, H, D, chunk, scratch, 1);

    tlm_err err = {{0}};
    tlm_dptr X = put(x, L.n), G = put(gates, 3 * BTH), Y = nans(ny), SAVED = nans(nsaved);
    tlm_dptr TH = G, ETA = at(G, BTH), AL = at(G, 2 * BTH);
    if (!tlm_gpu_titans_forward(&g_gpu, Y, SAVED, at(X, L.qo), at(X, L.ko), at(X, L.vo), L.stride, TH, ETA, AL, B, T, H,
                                D, chunk, &err))
        die("titans_forward", &err);
    check(OP_TITANS_FWD, "y", shape, Y, y, ny);
    check(OP_TITANS_FWD, "saved", shape, SAVED, saved, nsaved);

    size_t scratch_floats = tlm_gpu_titans_scratch_bytes(B, H, D, chunk) / sizeof(float);
    tlm_dptr DY = put(dy, ny), SAVEDc = put(saved, nsaved), DX = nans(L.n), DG = nans(3 * BTH);
    tlm_dptr SCRATCH = nans(scratch_floats); /* the kernel must not read it before writing */
    if (!tlm_gpu_titans_backward(&g_gpu, at(DX, L.qo), at(DX, L.ko), at(DX, L.vo), DG, at(DG, BTH), at(DG, 2 * BTH), DY,
                                 SAVEDc, at(X, L.qo), at(X, L.ko), 0, L.stride, TH, ETA, AL, B, T, H, D, chunk, SCRATCH,
                                 &err))
        die("titans_backward", &err);
    check(OP_TITANS_BWD, "dq dk dv", shape, DX, dx, L.n);
    check(OP_TITANS_BWD, "dtheta deta dalpha", shape, DG, dg, 3 * BTH);
    titans_bf16_case(shape, B, T, H, D, chunk, L, x, G, DY);

    tlm_dptr bufs[] = {X, G, Y, SAVED, DY, SAVEDc, DX, DG, SCRATCH};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) tlm_device_free(g_dev, bufs[i]);
    free(x), free(dy), free(gates), free(y), free(saved), free(dx), free(dg), free(scratch);
}

/* --precision bf16's memory activation: qkv, act and mem_qkv in bf16. On qkv
 * rounded (qkvr widened for the fp32 kernel) the bf16 forward must give the
 * fp32 kernel's act and mem_qkv rounded once and its rnorm bit for bit; the
 * bf16 backward, from that bf16 act, the fp32 kernel's dqkv on the same
 * values widened, bit for bit. */
static void activations_bf16_case(const char *shape, int N, int H, int D, const float *qkv, tlm_dptr DMEM) {
    size_t n = (size_t)N * 3 * H * D, nr = (size_t)N * 2 * H;
    float *qkvr = host(n);
    uint16_t *qkv16 = rounded(qkv, n, qkvr);
    tlm_err err = {{0}};
    tlm_dptr QKVR = put(qkvr, n), QKV16 = put16(qkv16, n), ACT = nans(n), MEM = nans(n), RN = nans(nr);
    tlm_dptr ACT16 = nans((n + 1) / 2), MEM16 = nans((n + 1) / 2), RN16 = nans(nr);
    if (!tlm_gpu_titans_qkv_forward(&g_gpu, ACT, MEM, RN, QKVR, N, H, D, &err) ||
        !tlm_gpu_titans_qkv_forward_bf16(&g_gpu, ACT16, MEM16, RN16, QKV16, N, H, D, &err))
        die("titans_qkv_forward on rounded inputs", &err);
    float *act = get(ACT, n), *mem = get(MEM, n), *rnorm = get(RN, nr);
    same_rounded("titans_qkv_forward_bf16 act", shape, ACT16, act, n);
    same_rounded("titans_qkv_forward_bf16 mem_qkv", shape, MEM16, mem, n);
    same_bits("titans_qkv_forward_bf16 rnorm", shape, RN16, rnorm, nr);

    /* the backward reads act as stored: the bf16 one, widened for fp32 */
    uint16_t *act16 = get16(ACT16, n);
    float *actw = host(n);
    for (size_t i = 0; i < n; i++) actw[i] = tlm_bf16_to_f32(act16[i]);
    tlm_dptr ACTW = put(actw, n), DQKV = nans(n), DQKV16 = nans(n);
    if (!tlm_gpu_titans_qkv_backward(&g_gpu, DQKV, DMEM, QKVR, ACTW, RN, N, H, D, &err) ||
        !tlm_gpu_titans_qkv_backward_bf16(&g_gpu, DQKV16, DMEM, QKV16, ACT16, RN, N, H, D, &err))
        die("titans_qkv_backward on rounded inputs", &err);
    float *dqkv = get(DQKV, n);
    same_bits("titans_qkv_backward_bf16 dqkv", shape, DQKV16, dqkv, n);

    tlm_dptr bufs[] = {QKVR, QKV16, ACT, MEM, RN, ACT16, MEM16, RN16, ACTW, DQKV, DQKV16};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) tlm_device_free(g_dev, bufs[i]);
    free(qkvr), free(qkv16), free(act), free(mem), free(rnorm), free(act16), free(actw), free(dqkv);
}

/* memory_act and memory_gates over N = B*T tokens */
static void activations_case(int N, int H, int D) {
    char shape[64];
    snprintf(shape, sizeof shape, "N %d H %d D %d", N, H, D);
    size_t n = (size_t)N * 3 * H * D, nr = (size_t)N * 2 * H, ng = (size_t)N * 3 * H;
    const float inner_lr = 0.07f;
    float *qkv = uniform(n, -3.0f, 3.0f), *dmem = uniform(n, -1.0f, 1.0f);
    float *act = host(n), *mem = host(n), *rnorm = host(nr), *dqkv = host(n);
    tlm_titans_qkv_forward(act, mem, rnorm, qkv, N, H, D);
    tlm_titans_qkv_backward(dqkv, dmem, qkv, act, rnorm, N, H, D);
    float *pre = uniform(ng, -4.0f, 4.0f), *dgates = uniform(ng, -1.0f, 1.0f);
    float *gates = host(ng), *dpre = host(ng);
    tlm_titans_gates_forward(gates, pre, N, H, inner_lr);
    tlm_titans_gates_backward(dpre, dgates, gates, N, H, inner_lr);

    tlm_err err = {{0}};
    tlm_dptr QKV = put(qkv, n), ACT = nans(n), MEM = nans(n), RN = nans(nr);
    if (!tlm_gpu_titans_qkv_forward(&g_gpu, ACT, MEM, RN, QKV, N, H, D, &err)) die("titans_qkv_forward", &err);
    check(OP_QKV_FWD, "act", shape, ACT, act, n);
    check(OP_QKV_FWD, "mem_qkv", shape, MEM, mem, n);
    check(OP_QKV_FWD, "rnorm", shape, RN, rnorm, nr);
    tlm_dptr DMEM = put(dmem, n), ACTc = put(act, n), RNc = put(rnorm, nr), DQKV = nans(n);
    if (!tlm_gpu_titans_qkv_backward(&g_gpu, DQKV, DMEM, QKV, ACTc, RNc, N, H, D, &err))
        die("titans_qkv_backward", &err);
    check(OP_QKV_BWD, "dqkv", shape, DQKV, dqkv, n);
    activations_bf16_case(shape, N, H, D, qkv, DMEM);

    tlm_dptr PRE = put(pre, ng), GATES = nans(ng);
    if (!tlm_gpu_titans_gates_forward(&g_gpu, GATES, PRE, N, H, inner_lr, &err)) die("titans_gates_forward", &err);
    check(OP_GATES_FWD, "gates", shape, GATES, gates, ng);
    tlm_dptr DG = put(dgates, ng), Gc = put(gates, ng), DPRE = nans(ng);
    if (!tlm_gpu_titans_gates_backward(&g_gpu, DPRE, DG, Gc, N, H, inner_lr, &err)) die("titans_gates_backward", &err);
    check(OP_GATES_BWD, "dpre", shape, DPRE, dpre, ng);

    tlm_dptr bufs[] = {QKV, ACT, MEM, RN, DMEM, ACTc, RNc, DQKV, PRE, GATES, DG, Gc, DPRE};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) tlm_device_free(g_dev, bufs[i]);
    free(qkv), free(dmem), free(act), free(mem), free(rnorm), free(dqkv);
    free(pre), free(dgates), free(gates), free(dpre);
}

/* ---- the bits do not depend on the grid ----
 * Each kernel launched by hand with the grid the wrappers use (one block or
 * thread per item), then with 1 and 2 blocks, so blocks stride over many
 * rows or heads and reuse their shared memory; the outputs (reset to NaN
 * before each launch) must be the same bits. This is what makes a --resume
 * bit-exact whatever grid a device picks. */
typedef struct {
    tlm_dptr p;
    size_t n;
} span;

typedef struct {
    const char *op;
    const char *kernels[2]; /* launched in order; NULL ends */
    unsigned full_grid, block;
    void **args[2];
    span out[3]; /* n == 0 ends */
} grid_spec;

static void reset_to_nan(span s) {
    tlm_err err = {{0}};
    float *x = host(s.n);
    for (size_t i = 0; i < s.n; i++) x[i] = NAN;
    if (!tlm_device_upload(g_dev, s.p, x, s.n * sizeof(float), &err)) die("upload", &err);
    free(x);
}

/* The outputs after launching the spec's kernels with `grid` blocks. */
static float *run_with_grid(const grid_spec *s, unsigned grid, size_t *total) {
    size_t n = 0;
    for (int o = 0; o < 3 && s->out[o].n; o++) {
        reset_to_nan(s->out[o]);
        n += s->out[o].n;
    }
    tlm_err err = {{0}};
    for (int k = 0; k < 2 && s->kernels[k]; k++)
        if (!tlm_gpu_launch(&g_gpu, s->kernels[k], grid, s->block, s->args[k], &err)) die(s->kernels[k], &err);
    float *all = host(n);
    size_t at_ = 0;
    for (int o = 0; o < 3 && s->out[o].n; o++) {
        float *x = get(s->out[o].p, s->out[o].n);
        memcpy(all + at_, x, s->out[o].n * sizeof(float));
        at_ += s->out[o].n;
        free(x);
    }
    *total = n;
    return all;
}

static void check_grids(const grid_spec *s) {
    size_t n = 0;
    float *want = run_with_grid(s, s->full_grid, &n);
    const unsigned grids[] = {1, 2};
    for (int i = 0; i < 2; i++) {
        float *got = run_with_grid(s, grids[i], &n);
        size_t bad = 0;
        for (size_t j = 0; j < n; j++) bad += memcmp(&got[j], &want[j], sizeof(float)) != 0;
        if (bad) {
            printf("FAIL %s: %zu of %zu output floats differ between %u and %u blocks\n", s->op, bad, n, grids[i],
                   s->full_grid);
            g_failures++;
        }
        free(got);
    }
    free(want);
}

static void grid_case(void) {
    int B = 2, T = 37, H = 3, D = 6, chunk = 4, N = B * T; /* T: two attention tiles */
    qkv_layout L = layout(B, T, H, D, true);
    int stride = L.stride;
    size_t ny = (size_t)B * T * H * D, natt = (size_t)B * T * H, BTH = (size_t)B * T * H; /* natt: the lse */
    size_t nsaved = tlm_titans_saved_floats(B, T, H, D, chunk), nact = (size_t)N * 3 * H * D;
    float *x = uniform(L.n, -1.0f, 1.0f), *r = uniform(ny, -1.0f, 1.0f), *gates = host(3 * BTH);
    tlm_rng_fill_uniform(&g_rng, gates, BTH, 0.001f, 0.1f);
    tlm_rng_fill_uniform(&g_rng, gates + BTH, 2 * BTH, 0.05f, 0.95f);
    tlm_dptr X = put(x, L.n), R = put(r, ny), G = put(gates, 3 * BTH);
    tlm_dptr q = at(X, L.qo), k = at(X, L.ko), v = at(X, L.vo), theta = G, eta = at(G, BTH), alpha = at(G, 2 * BTH);
    tlm_dptr Y = nans(ny), ATT = nans(natt), DX = nans(L.n), SAVED = nans(nsaved), DG = nans(3 * BTH);
    tlm_dptr dq = at(DX, L.qo), dk = at(DX, L.ko), dv = at(DX, L.vo), dth = DG, deta = at(DG, BTH),
             dal = at(DG, 2 * BTH);
    tlm_dptr SCRATCH = nans(tlm_gpu_titans_scratch_bytes(B, H, D, chunk) / sizeof(float));
    long long per_head = (long long)(tlm_gpu_titans_scratch_bytes(B, H, D, chunk) / sizeof(float) / (size_t)(B * H));
    tlm_dptr ACT = nans(nact), MEM = nans(nact), RN = nans((size_t)N * 2 * H), DQKV = nans(nact);
    tlm_dptr PRE = X, GATES = nans(3 * BTH), DPRE = nans(3 * BTH); /* x's first 3*N*H floats as pre-activations */
    float lr = 0.07f;
    unsigned att_tiles = (unsigned)(B * H * ((T + TLM_GPU_ATTENTION_TILE - 1) / TLM_GPU_ATTENTION_TILE)),
             heads = (unsigned)(B * H);
    unsigned act_rows = tlm_gpu_blocks((int64_t)N * 3 * H, TLM_GPU_TITANS_ACT_BLOCK);
    unsigned gate_rows = tlm_gpu_blocks((int64_t)N * H, TLM_GPU_TITANS_ACT_BLOCK);
    tlm_err err = {{0}};
    /* the inputs of the backwards: the forwards' outputs */
    if (!tlm_gpu_attention_forward(&g_gpu, Y, ATT, q, k, v, B, T, H, D, stride, &err) ||
        !tlm_gpu_titans_forward(&g_gpu, R, SAVED, q, k, v, stride, theta, eta, alpha, B, T, H, D, chunk, &err) ||
        !tlm_gpu_titans_qkv_forward(&g_gpu, ACT, MEM, RN, X, N, H, D, &err))
        die("forwards", &err);

    /* bf16 q, k, v: x rounded */
    uint16_t *x16 = calloc(L.n, 2);
    if (!x16) die("host memory", &err);
    for (size_t i = 0; i < L.n; i++) x16[i] = tlm_f32_to_bf16(x[i]);
    tlm_dptr X16 = put16(x16, L.n), q16 = at16(X16, L.qo), k16 = at16(X16, L.ko), v16 = at16(X16, L.vo);
    tlm_dptr Yb = nans(ny), ATTb = nans(natt), Y16 = nans(ny), ACC = nans(ny);
    void *att_fwd_b[] = {&Yb, &ATTb, &q, &k, &v, &B, &T, &H, &D, &stride};
    void *att_fwd_16[] = {&Y16, &ACC, &ATTb, &q16, &k16, &v16, &B, &T, &H, &D, &stride};
    void *att_fwd_q16[] = {&Yb, &ATTb, &q16, &k16, &v16, &B, &T, &H, &D, &stride};
    void *att_dq_16[] = {&dq, &R, &Y16, &ATT, &q16, &k16, &v16, &B, &T, &H, &D, &stride};
    void *att_dkv_16[] = {&dk, &dv, &R, &Y16, &ATT, &q16, &k16, &v16, &B, &T, &H, &D, &stride};
    void *att_dq_q16[] = {&dq, &R, &Y, &ATT, &q16, &k16, &v16, &B, &T, &H, &D, &stride};
    void *att_dkv_q16[] = {&dk, &dv, &R, &Y, &ATT, &q16, &k16, &v16, &B, &T, &H, &D, &stride};
    void *att_dq[] = {&dq, &R, &Y, &ATT, &q, &k, &v, &B, &T, &H, &D, &stride};
    void *att_dkv[] = {&dk, &dv, &R, &Y, &ATT, &q, &k, &v, &B, &T, &H, &D, &stride};
    tlm_dptr Yt = nans(ny), SAVEDb = nans(nsaved);
    void *tit_fwd[] = {&Yt, &SAVEDb, &q, &k, &v, &stride, &theta, &eta, &alpha, &B, &T, &H, &D, &chunk};
    void *tit_bwd[] = {&dq,    &dk,  &dv,    &dth, &deta, &dal, &R, &SAVED, &q,       &k,       &stride,
                       &theta, &eta, &alpha, &B,   &T,    &H,   &D, &chunk, &SCRATCH, &per_head};
    tlm_dptr ACTb = nans(nact), MEMb = nans(nact), RNb = nans((size_t)N * 2 * H);
    void *qkv_fwd[] = {&ACTb, &MEMb, &RNb, &X, &N, &H, &D};
    void *qkv_bwd[] = {&DQKV, &X, &X, &ACT, &RN, &N, &H, &D};
    /* the bf16 twins: q, k, v from X16 (packed, as X), the activation's
     * outputs into bf16 buffers of nact elements (nact / 2 floats) */
    tlm_dptr ACT16 = nans((nact + 1) / 2), MEM16 = nans((nact + 1) / 2);
    tlm_dptr Yt16 = nans((ny + 1) / 2); /* the bf16 forward's y: ny elements */
    void *tit_fwd16[] = {&Yt16, &SAVEDb, &q16, &k16, &v16, &stride, &theta, &eta, &alpha, &B, &T, &H, &D, &chunk};
    void *tit_bwd16[] = {&dq,    &dk,  &dv,    &dth, &deta, &dal, &R, &SAVED, &q16,     &k16,     &stride,
                         &theta, &eta, &alpha, &B,   &T,    &H,   &D, &chunk, &SCRATCH, &per_head};
    void *qkv_fwd16[] = {&ACT16, &MEM16, &RNb, &X16, &N, &H, &D};
    void *qkv_bwd16[] = {&DQKV, &X, &X16, &X16, &RN, &N, &H, &D};
    void *gates_fwd[] = {&GATES, &PRE, &N, &H, &lr};
    void *gates_bwd[] = {&DPRE, &R, &G, &N, &H, &lr};
    const grid_spec specs[] = {
        {"attention_forward",
         {"tlm_attention_fwd", NULL},
         att_tiles,
         TLM_GPU_ATTENTION_BLOCK,
         {att_fwd_b, NULL},
         {{Yb, ny}, {ATTb, natt}}},
        {"attention_backward",
         {"tlm_attention_bwd_dq", "tlm_attention_bwd_dkv"},
         att_tiles,
         TLM_GPU_ATTENTION_BLOCK,
         {att_dq, att_dkv},
         {{DX, L.n}}},
        /* bf16 q, k, v and y: ny elements of y, the first ny / 2 floats'
         * worth of bytes; the backward reads the bf16 y the forward left in
         * Y16 */
        {"attention_forward_bf16",
         {"tlm_attention_fwd_bf16", NULL},
         att_tiles,
         TLM_GPU_ATTENTION_BLOCK,
         {att_fwd_16, NULL},
         {{Y16, ny / 2}, {ACC, ny}, {ATTb, natt}}},
        {"attention_backward_bf16",
         {"tlm_attention_bwd_dq_bf16", "tlm_attention_bwd_dkv_bf16"},
         att_tiles,
         TLM_GPU_ATTENTION_BLOCK,
         {att_dq_16, att_dkv_16},
         {{DX, L.n}}},
        /* bf16 q, k, v, fp32 y (gated attention) */
        {"attention_forward_qkv_bf16",
         {"tlm_attention_fwd_qkv_bf16", NULL},
         att_tiles,
         TLM_GPU_ATTENTION_BLOCK,
         {att_fwd_q16, NULL},
         {{Yb, ny}, {ATTb, natt}}},
        {"attention_backward_qkv_bf16",
         {"tlm_attention_bwd_dq_qkv_bf16", "tlm_attention_bwd_dkv_qkv_bf16"},
         att_tiles,
         TLM_GPU_ATTENTION_BLOCK,
         {att_dq_q16, att_dkv_q16},
         {{DX, L.n}}},
        {"titans_forward",
         {"tlm_titans_fwd", NULL},
         heads,
         TLM_GPU_TITANS_BLOCK,
         {tit_fwd, NULL},
         {{Yt, ny}, {SAVEDb, nsaved}}},
        {"titans_backward",
         {"tlm_titans_bwd", NULL},
         heads,
         TLM_GPU_TITANS_BLOCK,
         {tit_bwd, NULL},
         {{DX, L.n}, {DG, 3 * BTH}}},
        {"titans_forward_bf16",
         {"tlm_titans_fwd_bf16", NULL},
         heads,
         TLM_GPU_TITANS_BLOCK,
         {tit_fwd16, NULL},
         {{Yt16, ny / 2}, {SAVEDb, nsaved}}},
        {"titans_backward_bf16",
         {"tlm_titans_bwd_bf16", NULL},
         heads,
         TLM_GPU_TITANS_BLOCK,
         {tit_bwd16, NULL},
         {{DX, L.n}, {DG, 3 * BTH}}},
        {"titans_qkv_forward_bf16",
         {"tlm_titans_act_qkv_fwd_bf16", NULL},
         act_rows,
         TLM_GPU_TITANS_ACT_BLOCK,
         {qkv_fwd16, NULL},
         {{ACT16, nact / 2}, {MEM16, nact / 2}, {RNb, (size_t)N * 2 * H}}},
        {"titans_qkv_backward_bf16",
         {"tlm_titans_act_qkv_bwd_bf16", NULL},
         act_rows,
         TLM_GPU_TITANS_ACT_BLOCK,
         {qkv_bwd16, NULL},
         {{DQKV, nact}}},
        {"titans_qkv_forward",
         {"tlm_titans_act_qkv_fwd", NULL},
         act_rows,
         TLM_GPU_TITANS_ACT_BLOCK,
         {qkv_fwd, NULL},
         {{ACTb, nact}, {MEMb, nact}, {RNb, (size_t)N * 2 * H}}},
        {"titans_qkv_backward",
         {"tlm_titans_act_qkv_bwd", NULL},
         act_rows,
         TLM_GPU_TITANS_ACT_BLOCK,
         {qkv_bwd, NULL},
         {{DQKV, nact}}},
        {"titans_gates_forward",
         {"tlm_titans_act_gates_fwd", NULL},
         gate_rows,
         TLM_GPU_TITANS_ACT_BLOCK,
         {gates_fwd, NULL},
         {{GATES, 3 * BTH}}},
        {"titans_gates_backward",
         {"tlm_titans_act_gates_bwd", NULL},
         gate_rows,
         TLM_GPU_TITANS_ACT_BLOCK,
         {gates_bwd, NULL},
         {{DPRE, 3 * BTH}}},
    };
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) check_grids(&specs[i]);
    /* the direct launches take the wrapper's arguments: the memory's
     * backward launched as above (its scratch per head given by hand) has
     * the bits of tlm_gpu_titans_backward's */
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        if (strcmp(specs[i].op, "titans_backward") != 0) continue;
        size_t n = 0;
        float *direct = run_with_grid(&specs[i], heads, &n);
        reset_to_nan(specs[i].out[0]);
        reset_to_nan(specs[i].out[1]);
        if (!tlm_gpu_titans_backward(&g_gpu, dq, dk, dv, dth, deta, dal, R, SAVED, q, k, v, stride, theta, eta, alpha,
                                     B, T, H, D, chunk, SCRATCH, &err))
            die("titans_backward", &err);
        float *dx = get(DX, L.n), *dg = get(DG, 3 * BTH);
        size_t bad = 0;
        for (size_t j = 0; j < L.n; j++) bad += memcmp(&dx[j], &direct[j], sizeof(float)) != 0;
        for (size_t j = 0; j < 3 * BTH; j++) bad += memcmp(&dg[j], &direct[L.n + j], sizeof(float)) != 0;
        if (bad) {
            printf("FAIL titans_backward: %zu of %zu output floats differ between the wrapper and a direct launch\n",
                   bad, n);
            g_failures++;
        }
        free(direct), free(dx), free(dg);
    }

    tlm_dptr bufs[] = {X,    R,  G,    Y,  ATT,    DX,   SAVED, DG,  SCRATCH, ACT, MEM, RN,    DQKV,  GATES,
                       DPRE, Yb, ATTb, Yt, SAVEDb, ACTb, MEMb,  RNb, Y16,     ACC, X16, ACT16, MEM16, Yt16};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) tlm_device_free(g_dev, bufs[i]);
    free(x), free(r), free(gates), free(x16);
}

/* Beyond the small sizes: several tiles of 32 query and key rows with a
 * part tile (the attention kernels' TLM_GPU_ATTENTION_TILE) and a head
 * larger than their block of 128 threads, no multiple of 4; a memory whose
 * D^2 state spans several passes of its block and whose rows span several
 * passes of a warp, over three segments of 18 tokens (chunk 3) and a last
 * short one. */
static const int large_attention[] = {1, 101, 2, 130}; /* B, T, H, D */
static const int large_titans[] = {1, 40, 2, 40, 3};   /* B, T, H, D, chunk */

int main(void) {
    tlm_err err = {{0}};
    g_dev = tlm_device_open("cuda", &err);
    if (!g_dev) die("device", &err);
    if (!tlm_gpu_open(&g_gpu, g_dev, &err)) die("kernels", &err);
    printf("device: %s\n", tlm_device_get_info(g_dev)->name);
    tlm_rng_seed(&g_rng, 20261202);

    static const int Bs[] = {1, 2}, Ts[] = {1, 5, 19}, Hs[] = {1, 3}, Ds[] = {2, 6, 16};
    int index = 0;
    for (int bi = 0; bi < 2; bi++)
        for (int ti = 0; ti < 3; ti++)
            for (int hi = 0; hi < 2; hi++)
                for (int di = 0; di < 3; di++, index++) {
                    const int B = Bs[bi], T = Ts[ti], H = Hs[hi], D = Ds[di];
                    attention_case(B, T, H, D, index % 2 == 0);
                    const int chunks[] = {1, 4, T + 3};
                    for (int c = 0; c < 3; c++) titans_case(B, T, H, D, chunks[c], (index + c) % 2 == 0);
                    activations_case(B * T, H, D);
                }
    /* attention across its tiles of 32 rows: a part tile, two and a part,
     * an odd head size, either layout */
    attention_case(2, 37, 3, 6, true);
    attention_case(1, 37, 2, 5, false);
    attention_case(2, 70, 1, 16, false);
    /* the paper presets' head sizes (440M: 64; 760M and 1.3B: 128), T past
     * a tile and not a multiple of one */
    attention_case(1, 45, 2, 64, true);
    attention_case(1, 37, 1, 128, false);
    const int *a = large_attention, *m = large_titans;
    attention_case(a[0], a[1], a[2], a[3], true);
    titans_case(m[0], m[1], m[2], m[3], m[4], false);
    /* the memory's blocks of tokens (titans.cu: at most 64, its tiles of
     * 64 x 64 products): a head past one tile and not a multiple of one,
     * chunks of 70 split into 64 + 6 with their errors over two tiles of
     * rows and a short last chunk; whole blocks of 64 */
    titans_case(1, 150, 1, 70, 70, true);
    titans_case(2, 130, 1, 8, 64, false);
    titans_case(1, 150, 1, 5, 130, false); /* chunks of 130: pieces of 64, 64, 2 */
    titans_case(1, 23, 2, 130, 5, true);   /* a head over three tiles */
    grid_case();

    for (int op = 0; op < N_OPS; op++)
        printf("%-22s worst |gpu-cpu| / max|cpu| %.2e, worst fraction of the bound %.3f\n", op_names[op],
               worst_scaled[op], worst_bound[op]);
    tlm_gpu_close(&g_gpu);
    tlm_device_close(g_dev);
    if (g_failures) {
        printf("gpu.mixers: %d failure(s)\n", g_failures);
        return 1;
    }
    printf("gpu.mixers: all checks passed\n");
    return 0;
}
