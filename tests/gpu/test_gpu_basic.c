/* gpu.basic: every basic GPU op (gpu_basic.h) against its CPU op
 * (tlm_rt/ops.h) on the same random inputs of odd sizes (rows and widths
 * that are not multiples of a warp, one-element cases, ignored targets,
 * accumulating outputs that start non-zero, in-place calls), on the device
 * "cuda" opens: the emulated one under TLM_TEST_DEVICE=emulated (ctest), or
 * a real GPU.
 *
 * Tolerance, per element: |gpu - cpu| <= 1e-5 max(|cpu|, floor) with
 * floor = 5e-2 times the scale of the terms the element is formed from (the
 * tensor's largest |cpu|, or for a tensor formed by cancellation, a bound on
 * its terms: rmsnorm's r g, k x and the starting dx, the sigmoid gate's sum
 * of dout y). An element much smaller than its terms comes from their
 * cancellation, and the GPU rounds those terms differently (block-wide sums
 * in another order, fused multiply-adds, which the emulator leaves out): a
 * few ulps of the terms, an ulp being up to 1.2e-7 of a float, so the floor
 * allows 5e-7 of the terms' scale there, and nothing larger. (Run with the
 * emulated module built with -O2 -mfma, fused multiply-adds everywhere,
 * the worst error was 1e-6 with this floor and 5e-6 with 1e-2.)
 * The embedding is compared exactly (a copy, and adds in the CPU's row
 * order).  * The worst error of each op is printed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_reference.h"
#include "gpu_basic.h"
#include "tlm_rt/ops.h"
#include "tlm_rt/rng.h"

#define RELATIVE 1e-5
#define FLOOR_FRACTION 5e-2
/* compare's `terms`: bit for bit, or the compared tensor's own scale */
#define EXACT (-1.0)
#define OWN_SCALE 0.0

static tlm_device *dev;
static tlm_gpu gpu;
static tlm_rng rng;
static int failures;

static void die(const char *what, const tlm_err *err) {
    fprintf(stderr, "gpu.basic: %s: %s\n", what, err->msg);
    exit(1);
}

/* ---- host and device buffers ----------------------------------------- */

static void *host_alloc(size_t bytes) {
    void *p = calloc(bytes ? bytes : 1, 1);
    if (!p) {
        fprintf(stderr, "gpu.basic: out of memory\n");
        exit(2);
    }
    return p;
}

static float *random_floats(size_t n, float lo, float hi) {
    float *x = host_alloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * (float)tlm_rng_uniform(&rng);
    return x;
}

static float *copy_floats(const float *x, size_t n) {
    float *y = host_alloc(n * sizeof(float));
    memcpy(y, x, n * sizeof(float));
    return y;
}

static tlm_dptr to_device(const void *src, size_t bytes) {
    tlm_err err;
    tlm_dptr p = tlm_device_alloc(dev, bytes ? bytes : 4, &err);
    if (!p) die("alloc", &err);
    if (bytes && !tlm_device_upload(dev, p, src, bytes, &err)) die("upload", &err);
    return p;
}

static tlm_dptr device_zeros(size_t bytes) {
    tlm_err err;
    tlm_dptr p = tlm_device_alloc(dev, bytes ? bytes : 4, &err);
    if (!p) die("alloc", &err);
    return p;
}

/* Waits for the launches so far, then copies src back. */
static void from_device(void *dst, tlm_dptr src, size_t bytes) {
    tlm_err err;
    if (!tlm_device_sync(dev, &err)) die("sync", &err);
    if (bytes && !tlm_device_download(dev, dst, src, bytes, &err)) die("download", &err);
}

/* Frees a device buffer; 0 (an absent one) is skipped. */
static void release(tlm_dptr p) {
    if (p) tlm_device_free(dev, p);
}

static void launched(bool ok, const char *op, const tlm_err *err) {
    if (!ok) die(op, err);
}

/* ---- comparison, the worst error per op ------------------------------- */

typedef struct op_record {
    const char *op;
    double worst;
    int tensors;
    char where[128]; /* the tensor and configuration of the worst error */
} op_record;
static op_record records[32];
static int n_records;

static op_record *record_of(const char *op) {
    for (int i = 0; i < n_records; i++)
        if (!strcmp(records[i].op, op)) return &records[i];
    if (n_records == (int)(sizeof records / sizeof records[0])) {
        fprintf(stderr, "gpu.basic: more ops than records\n");
        exit(2);
    }
    records[n_records] = (op_record){op, 0.0, 0, "-"};
    return &records[n_records++];
}

static double max_abs(const float *x, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)x[i]));
    return m;
}

/* Compares n GPU values with the CPU's: bit for bit (terms EXACT), or within
 * the tolerance with `terms` the scale of the terms (OWN_SCALE: the tensor's
 * largest |cpu|). */
static void compare(const char *op, const char *tensor, const char *config, const float *gpu_v, const float *cpu_v,
                    size_t n, double terms) {
    bool exact = terms == EXACT;
    double scale = fmax(max_abs(cpu_v, n), terms);
    double floor = FLOOR_FRACTION * scale;
    double worst = 0.0;
    size_t worst_at = 0;
    for (size_t i = 0; i < n; i++) {
        double diff = fabs((double)gpu_v[i] - cpu_v[i]);
        double e = exact ? (memcmp(&gpu_v[i], &cpu_v[i], sizeof(float)) ? INFINITY : 0.0)
                         : (diff == 0.0 ? 0.0 : diff / fmax(fabs((double)cpu_v[i]), floor));
        if (!(e <= worst)) {
            worst = isnan(e) ? INFINITY : e;
            worst_at = i;
        }
    }
    op_record *r = record_of(op);
    r->tensors++;
    if (worst > r->worst) {
        r->worst = worst;
        snprintf(r->where, sizeof r->where, "%s, %s", tensor, config);
    }
    if (worst > (exact ? 0.0 : RELATIVE)) {
        printf("FAIL %s %s (%s): element %zu: gpu %.9g cpu %.9g, error %.3g\n", op, tensor, config, worst_at,
               gpu_v[worst_at], cpu_v[worst_at], worst);
        failures++;
    }
}

static void compare_device(const char *op, const char *tensor, const char *config, tlm_dptr gpu_v, const float *cpu_v,
                           size_t n, double terms) {
    float *got = host_alloc(n * sizeof(float));
    from_device(got, gpu_v, n * sizeof(float));
    compare(op, tensor, config, got, cpu_v, n, terms);
    free(got);
}

/* A bf16 kernel's n results (at d_bf16) against its fp32 twin's (at d_fp32)
 * rounded to nearest even, bit for bit. */
static void compare_rounded(const char *op, const char *tensor, const char *config, tlm_dptr d_bf16, tlm_dptr d_fp32,
                            size_t n) {
    float *want = host_alloc(n * sizeof(float)), *got = host_alloc(n * sizeof(float));
    uint16_t *got16 = host_alloc(n * 2);
    from_device(want, d_fp32, n * sizeof(float));
    from_device(got16, d_bf16, n * 2);
    for (size_t i = 0; i < n; i++) {
        want[i] = tlm_bf16_to_f32(tlm_f32_to_bf16(want[i]));
        got[i] = tlm_bf16_to_f32(got16[i]);
    }
    compare(op, tensor, config, got, want, n, EXACT);
    free(want), free(got), free(got16);
}

/* ---- embedding -------------------------------------------------------- */

static void check_embedding(int N, int C, int V) {
    char config[64];
    snprintf(config, sizeof config, "N=%d C=%d V=%d", N, C, V);
    int32_t *ids = host_alloc((size_t)N * sizeof(int32_t));
    /* ids repeat (V small next to N in some cases): the scatter-add's order */
    for (int n = 0; n < N; n++) ids[n] = (int32_t)tlm_rng_below(&rng, (uint64_t)V);
    size_t nt = (size_t)V * C, no = (size_t)N * C;
    float *table = random_floats(nt, -1, 1), *dout = random_floats(no, -1, 1);
    float *dtable = random_floats(nt, -1, 1); /* accumulates onto this */
    float *out = host_alloc(no * sizeof(float));
    tlm_dptr d_ids = to_device(ids, (size_t)N * sizeof(int32_t)), d_table = to_device(table, nt * sizeof(float));
    tlm_dptr d_dout = to_device(dout, no * sizeof(float)), d_dtable = to_device(dtable, nt * sizeof(float));
    tlm_dptr d_out = device_zeros(no * sizeof(float));
    tlm_err err;

    tlm_embedding_forward(out, ids, table, N, C);
    launched(tlm_gpu_embedding_forward(&gpu, d_out, d_ids, d_table, N, C, &err), "embedding_forward", &err);
    compare_device("embedding_forward", "out", config, d_out, out, no, EXACT);

    tlm_embedding_backward(dtable, dout, ids, N, C);
    launched(tlm_gpu_embedding_backward(&gpu, d_dtable, d_dout, d_ids, N, C, &err), "embedding_backward", &err);
    compare_device("embedding_backward", "dtable", config, d_dtable, dtable, nt, EXACT);

    release(d_ids), release(d_table), release(d_dout);
    release(d_dtable), release(d_out);
    free(ids), free(table), free(dout), free(dtable), free(out);
}

/* ---- rmsnorm: the model norm (H = 0) or per head ----------------------- */

/* The bf16 variants (--precision bf16) of the model norm (H = 0, x fp32)
 * and of the per-head norm (Titans' read-out, H > 0, x in bf16 at d_x):
 * rstd bit for bit the fp32 kernel's, each y the fp32 kernel's y (d_out, on
 * the same x, rounded for the per-head norm) rounded to nearest even
 * (tlm_f32_to_bf16's bits), and so, against the CPU op's c on that x (the
 * fp32 kernel is within e = 1e-5 M of it, M = max(|c|, floor) as
 * compare's):
 *   |bf(g) - c| <= |bf(g) - g| + |g - c| <= u |g| + e M
 *               <= (u (1 + 1e-5) + 1e-5) M,   u = 2^-8. */
static void check_rmsnorm_bf16(const char *config, tlm_dptr d_x, tlm_dptr d_w, tlm_dptr d_out, tlm_dptr d_rstd,
                               const float *cpu_out, int N_tokens, int H, int D, float eps) {
    const int N = H > 0 ? N_tokens * H : N_tokens; /* rows */
    const char *op = H > 0 ? "rmsnorm_heads_forward_bf16" : "rmsnorm_forward_bf16";
    size_t n = (size_t)N * D;
    tlm_dptr d_out16 = device_zeros(n * 2), d_rstd16 = device_zeros((size_t)N * sizeof(float));
    tlm_err err;
    launched(H > 0 ? tlm_gpu_rmsnorm_heads_forward_bf16(&gpu, d_out16, d_rstd16, d_x, d_w, N_tokens, H, D, eps, &err)
                   : tlm_gpu_rmsnorm_forward_bf16(&gpu, d_out16, d_rstd16, d_x, d_w, N, D, eps, &err),
             op, &err);
    float *g = host_alloc(n * sizeof(float)), *r = host_alloc((size_t)N * sizeof(float));
    float *r16 = host_alloc((size_t)N * sizeof(float));
    uint16_t *y16 = host_alloc(n * 2);
    from_device(g, d_out, n * sizeof(float)), from_device(r, d_rstd, (size_t)N * sizeof(float));
    from_device(r16, d_rstd16, (size_t)N * sizeof(float)), from_device(y16, d_out16, n * 2);
    const double u = 1.0 / 256, bound = u * (1 + RELATIVE) + RELATIVE;
    const double floor = FLOOR_FRACTION * max_abs(cpu_out, n);
    double worst = 0;
    size_t bits_off = 0;
    for (size_t i = 0; i < n; i++) {
        bits_off += y16[i] != tlm_f32_to_bf16(g[i]);
        double e = fabs((double)tlm_bf16_to_f32(y16[i]) - cpu_out[i]) / fmax(fabs((double)cpu_out[i]), floor);
        worst = isnan(e) || e > worst ? (isnan(e) ? INFINITY : e) : worst;
    }
    if (bits_off || memcmp(r, r16, (size_t)N * sizeof(float)) || worst > bound) {
        printf("FAIL %s (%s): %zu of %zu y not the fp32 kernel's rounded, rstd %s, worst %.3g "
               "(bound %.3g)\n",
               op, config, bits_off, n, memcmp(r, r16, (size_t)N * sizeof(float)) ? "differs" : "same", worst, bound);
        failures++;
    }
    op_record *rec = record_of(op);
    rec->tensors++;
    if (worst > rec->worst) {
        rec->worst = worst;
        snprintf(rec->where, sizeof rec->where, "y, %s", config);
    }
    release(d_out16), release(d_rstd16);
    free(g), free(r), free(r16), free(y16);
}

static void check_rmsnorm(int N, int H, int D, bool with_weight) {
    bool heads = H > 0;
    int rows = heads ? N * H : N, groups = heads ? H : 1;
    char config[80];
    snprintf(config, sizeof config, "%s N=%d H=%d D=%d%s", heads ? "heads" : "model", N, groups, D,
             with_weight ? "" : " no weight");
    size_t n = (size_t)rows * D, nw = (size_t)groups * D;
    const float eps = 1e-5f;
    float *x = random_floats(n, -2, 2), *w = random_floats(nw, 0.5f, 1.5f), *dout = random_floats(n, -1, 1);
    /* the model norm's dx accumulates (start non-zero); dw does in both */
    float *dx = heads ? host_alloc(n * sizeof(float)) : random_floats(n, -1, 1), *dw = random_floats(nw, -1, 1);
    double dx_start = max_abs(dx, n), dw_start = max_abs(dw, nw);
    float *out = host_alloc(n * sizeof(float)), *rstd = host_alloc((size_t)rows * sizeof(float));
    tlm_dptr d_x = to_device(x, n * sizeof(float)), d_w = with_weight ? to_device(w, nw * sizeof(float)) : 0;
    tlm_dptr d_dout = to_device(dout, n * sizeof(float)), d_dx = to_device(dx, n * sizeof(float));
    tlm_dptr d_dw = to_device(dw, nw * sizeof(float));
    tlm_dptr d_out = device_zeros(n * sizeof(float)), d_rstd = device_zeros((size_t)rows * sizeof(float));
    const float *wp = with_weight ? w : NULL;
    tlm_err err;

    bool ok;
    if (heads) {
        tlm_rmsnorm_heads_forward(out, rstd, x, wp, N, H, D, eps);
        ok = tlm_gpu_rmsnorm_heads_forward(&gpu, d_out, d_rstd, d_x, d_w, N, H, D, eps, &err);
    } else {
        tlm_rmsnorm_forward(out, rstd, x, wp, N, D, eps);
        ok = tlm_gpu_rmsnorm_forward(&gpu, d_out, d_rstd, d_x, d_w, N, D, eps, &err);
    }
    const char *fwd = heads ? "rmsnorm_heads_forward" : "rmsnorm_forward";
    const char *bwd = heads ? "rmsnorm_heads_backward" : "rmsnorm_backward";
    launched(ok, fwd, &err);
    compare_device(fwd, "out", config, d_out, out, n, OWN_SCALE);
    compare_device(fwd, "rstd", config, d_rstd, rstd, (size_t)rows, OWN_SCALE);
    if (!heads) check_rmsnorm_bf16(config, d_x, d_w, d_out, d_rstd, out, N, 0, D, eps);

    /* the backward reads the CPU's rstd on both sides, so each half is
     * checked on its own */
    tlm_dptr d_rstd_cpu = to_device(rstd, (size_t)rows * sizeof(float));
    if (heads) {
        tlm_rmsnorm_heads_backward(dx, with_weight ? dw : NULL, dout, x, wp, rstd, N, H, D);
        ok = tlm_gpu_rmsnorm_heads_backward(&gpu, d_dx, with_weight ? d_dw : 0, d_dout, d_x, d_w, d_rstd_cpu, N, H, D,
                                            &err);
    } else {
        tlm_rmsnorm_backward(dx, with_weight ? dw : NULL, dout, x, wp, rstd, N, D);
        ok = tlm_gpu_rmsnorm_backward(&gpu, d_dx, with_weight ? d_dw : 0, d_dout, d_x, d_w, d_rstd_cpu, N, D, &err);
    }
    launched(ok, bwd, &err);
    /* dx cancels r g against k x, both about r |dout| |w|, and adds its
     * starting value; dw adds the terms dout x r to its own */
    double r_max = max_abs(rstd, (size_t)rows), w_max = with_weight ? max_abs(w, nw) : 1.0;
    compare_device(bwd, "dx", config, d_dx, dx, n, r_max * max_abs(dout, n) * w_max + dx_start);
    compare_device(bwd, "dw", config, d_dw, dw, nw, r_max * max_abs(dout, n) * max_abs(x, n) + dw_start);

    release(d_x), release(d_w), release(d_dout), release(d_dx);
    release(d_dw), release(d_out), release(d_rstd);
    release(d_rstd_cpu);
    free(x), free(w), free(dout), free(dx), free(dw), free(out), free(rstd);
}

/* Two device tensors of n floats, bit for bit: a bf16 kernel's fp32
 * results against its fp32 twin's on the same rounded inputs. */
static void compare_twins(const char *op, const char *tensor, const char *config, tlm_dptr d_got, tlm_dptr d_want,
                          size_t n) {
    float *got = host_alloc(n * sizeof(float)), *want = host_alloc(n * sizeof(float));
    from_device(got, d_got, n * sizeof(float)), from_device(want, d_want, n * sizeof(float));
    compare(op, tensor, config, got, want, n, EXACT);
    free(got), free(want);
}

/* The per-head norm with x in bf16 (--precision bf16's Titans, whose
 * memory stores its read-out in bf16): x is drawn, rounded, and the CPU op
 * and the fp32 kernels run on the rounded x. The bf16 forward gives the
 * fp32 kernel's rstd and its y rounded (check_rmsnorm_bf16, which bounds
 * it against the CPU op); the bf16 backward the fp32 kernels' dx and dw bit
 * for bit, and so within compare's tolerance of the CPU op (as
 * check_rmsnorm derives it; checked here too). */
static void check_rmsnorm_heads_bf16(int N, int H, int D, bool with_weight) {
    const int rows = N * H;
    char config[80];
    snprintf(config, sizeof config, "heads N=%d H=%d D=%d%s, x in bf16", N, H, D, with_weight ? "" : " no weight");
    size_t n = (size_t)rows * D, nw = (size_t)H * D;
    const float eps = 1e-5f;
    float *x = random_floats(n, -2, 2), *w = random_floats(nw, 0.5f, 1.5f), *dout = random_floats(n, -1, 1);
    uint16_t *x16 = host_alloc(n * 2);
    for (size_t i = 0; i < n; i++) x16[i] = tlm_f32_to_bf16(x[i]), x[i] = tlm_bf16_to_f32(x16[i]);
    float *dw = random_floats(nw, -1, 1), *dx = host_alloc(n * sizeof(float)); /* dw accumulates */
    double dw_start = max_abs(dw, nw);
    float *out = host_alloc(n * sizeof(float)), *rstd = host_alloc((size_t)rows * sizeof(float));
    const float *wp = with_weight ? w : NULL;
    tlm_dptr d_x = to_device(x, n * sizeof(float)), d_x16 = to_device(x16, n * 2);
    tlm_dptr d_w = with_weight ? to_device(w, nw * sizeof(float)) : 0, d_dout = to_device(dout, n * sizeof(float));
    tlm_dptr d_out = device_zeros(n * sizeof(float)), d_rstd = device_zeros((size_t)rows * sizeof(float));
    tlm_dptr d_dx = device_zeros(n * sizeof(float)), d_dx16 = device_zeros(n * sizeof(float));
    tlm_dptr d_dw = to_device(dw, nw * sizeof(float)), d_dw16 = to_device(dw, nw * sizeof(float));
    tlm_err err;

    tlm_rmsnorm_heads_forward(out, rstd, x, wp, N, H, D, eps);
    launched(tlm_gpu_rmsnorm_heads_forward(&gpu, d_out, d_rstd, d_x, d_w, N, H, D, eps, &err), "rmsnorm_heads_forward",
             &err);
    check_rmsnorm_bf16(config, d_x16, d_w, d_out, d_rstd, out, N, H, D, eps);

    const char *op = "rmsnorm_heads_backward_bf16";
    tlm_dptr d_rstd_cpu = to_device(rstd, (size_t)rows * sizeof(float));
    tlm_rmsnorm_heads_backward(dx, with_weight ? dw : NULL, dout, x, wp, rstd, N, H, D);
    launched(
        tlm_gpu_rmsnorm_heads_backward(&gpu, d_dx, with_weight ? d_dw : 0, d_dout, d_x, d_w, d_rstd_cpu, N, H, D, &err),
        "rmsnorm_heads_backward", &err);
    launched(tlm_gpu_rmsnorm_heads_backward_bf16(&gpu, d_dx16, with_weight ? d_dw16 : 0, d_dout, d_x16, d_w, d_rstd_cpu,
                                                 N, H, D, &err),
             op, &err);
    compare_twins(op, "dx against the fp32 kernel's", config, d_dx16, d_dx, n);
    compare_twins(op, "dw against the fp32 kernel's", config, d_dw16, d_dw, nw);
    double r_max = max_abs(rstd, (size_t)rows), w_max = with_weight ? max_abs(w, nw) : 1.0;
    compare_device(op, "dx", config, d_dx16, dx, n, r_max * max_abs(dout, n) * w_max);
    compare_device(op, "dw", config, d_dw16, dw, nw, r_max * max_abs(dout, n) * max_abs(x, n) + dw_start);

    release(d_x), release(d_x16), release(d_w), release(d_dout), release(d_out), release(d_rstd);
    release(d_dx), release(d_dx16), release(d_dw), release(d_dw16), release(d_rstd_cpu);
    free(x), free(w), free(dout), free(x16), free(dw), free(dx), free(out), free(rstd);
}

/* ---- rope: a plain tensor, or q and k rotated in place in a packed qkv --- */

static void check_rope(int B, int T, int H, int D, bool packed) {
    char config[80];
    snprintf(config, sizeof config, "B=%d T=%d H=%d D=%d %s", B, T, H, D, packed ? "packed qkv in place" : "plain");
    int stride = packed ? 3 * H * D : H * D;
    size_t n = (size_t)B * T * stride, nt = (size_t)T * (D / 2);
    float *cos_t = host_alloc(nt * sizeof(float)), *sin_t = host_alloc(nt * sizeof(float));
    tlm_rope_init(cos_t, sin_t, T, D, 10000.0);
    float *x = random_floats(n, -1, 1), *cpu = copy_floats(x, n);
    tlm_dptr d_cos = to_device(cos_t, nt * sizeof(float)), d_sin = to_device(sin_t, nt * sizeof(float));
    tlm_dptr d_x = to_device(x, n * sizeof(float)), d_out = packed ? d_x : device_zeros(n * sizeof(float));
    tlm_err err;

    if (packed) {
        /* as the executor: q and k of the packed qkv in place, one launch
         * over their 2H heads (v untouched); the reference turns q and k
         * apart */
        tlm_rope_forward(cpu, cpu, cos_t, sin_t, B, T, H, D, stride);
        tlm_rope_forward(cpu + (size_t)H * D, cpu + (size_t)H * D, cos_t, sin_t, B, T, H, D, stride);
        launched(tlm_gpu_rope_forward(&gpu, d_x, d_x, d_cos, d_sin, B, T, 2 * H, D, stride, &err), "rope_forward",
                 &err);
    } else {
        tlm_rope_forward(cpu, x, cos_t, sin_t, B, T, H, D, stride);
        launched(tlm_gpu_rope_forward(&gpu, d_out, d_x, d_cos, d_sin, B, T, H, D, stride, &err), "rope_forward", &err);
    }
    compare_device("rope_forward", "out", config, d_out, cpu, n, OWN_SCALE);

    /* the backward, from the CPU's forward output on both sides */
    float *dout = copy_floats(cpu, n);
    tlm_dptr d_dout = to_device(dout, n * sizeof(float)), d_dx = packed ? d_dout : device_zeros(n * sizeof(float));
    if (packed) {
        tlm_rope_backward(cpu, cpu, cos_t, sin_t, B, T, H, D, stride);
        tlm_rope_backward(cpu + (size_t)H * D, cpu + (size_t)H * D, cos_t, sin_t, B, T, H, D, stride);
        launched(tlm_gpu_rope_backward(&gpu, d_dout, d_dout, d_cos, d_sin, B, T, 2 * H, D, stride, &err),
                 "rope_backward", &err);
    } else {
        tlm_rope_backward(cpu, dout, cos_t, sin_t, B, T, H, D, stride);
        launched(tlm_gpu_rope_backward(&gpu, d_dx, d_dout, d_cos, d_sin, B, T, H, D, stride, &err), "rope_backward",
                 &err);
    }
    compare_device("rope_backward", "dx", config, d_dx, cpu, n, OWN_SCALE);

    release(d_cos), release(d_sin), release(d_x), release(d_dout);
    if (!packed) release(d_out), release(d_dx);
    free(cos_t), free(sin_t), free(x), free(cpu), free(dout);
}

/* --precision bf16's RoPE: q and k of a packed bf16 qkv rotated in place,
 * as the executor does. On inputs rounded to bf16, each element must be the
 * fp32 kernel's result on them widened, rounded to nearest even (v, not
 * rotated, keeps its bits). */
static void check_rope_bf16(int B, int T, int H, int D) {
    char config[80];
    snprintf(config, sizeof config, "B=%d T=%d H=%d D=%d packed bf16 qkv in place", B, T, H, D);
    int stride = 3 * H * D;
    size_t n = (size_t)B * T * stride, nt = (size_t)T * (D / 2);
    float *cos_t = host_alloc(nt * sizeof(float)), *sin_t = host_alloc(nt * sizeof(float));
    tlm_rope_init(cos_t, sin_t, T, D, 10000.0);
    float *x = random_floats(n, -1, 1);
    uint16_t *x16 = host_alloc(n * 2);
    for (size_t i = 0; i < n; i++) x[i] = tlm_bf16_to_f32(x16[i] = tlm_f32_to_bf16(x[i]));
    tlm_dptr d_cos = to_device(cos_t, nt * sizeof(float)), d_sin = to_device(sin_t, nt * sizeof(float));
    tlm_dptr d_x = to_device(x, n * sizeof(float)), d_x16 = to_device(x16, n * 2);
    tlm_err err;
    for (int part = 0; part < 2; part++) { /* the fp32 reference: q, then k */
        size_t at = (size_t)part * H * D;
        launched(tlm_gpu_rope_forward(&gpu, d_x + at * 4, d_x + at * 4, d_cos, d_sin, B, T, H, D, stride, &err),
                 "rope_forward", &err);
    }
    /* bf16 as the executor: q's and k's 2H heads in one launch */
    launched(tlm_gpu_rope_forward_bf16(&gpu, d_x16, d_x16, d_cos, d_sin, B, T, 2 * H, D, stride, &err),
             "rope_forward_bf16", &err);
    compare_rounded("rope_forward_bf16", "q k v", config, d_x16, d_x, n);
    release(d_cos), release(d_sin), release(d_x), release(d_x16);
    free(cos_t), free(sin_t), free(x), free(x16);
}

/* ---- cross-entropy ---------------------------------------------------- */

/* ignored: every `ignored`-th target is -1 (0: none; 1: all). */
static void check_crossentropy(int N, int V, int ignored, bool with_losses, bool in_place) {
    char config[96];
    snprintf(config, sizeof config, "N=%d V=%d ignored 1/%d%s%s", N, V, ignored, with_losses ? "" : " no losses",
             in_place ? " in place" : "");
    size_t n = (size_t)N * V;
    float *logits = random_floats(n, -4, 4);
    int32_t *targets = host_alloc((size_t)N * sizeof(int32_t));
    for (int i = 0; i < N; i++)
        targets[i] = ignored && i % ignored == 0 ? -1 : (int32_t)tlm_rng_below(&rng, (uint64_t)V);
    float *losses = host_alloc((size_t)N * sizeof(float)), *lse = host_alloc((size_t)N * sizeof(float));
    float *dlogits = host_alloc(n * sizeof(float));
    tlm_dptr d_logits = to_device(logits, n * sizeof(float)), d_targets = to_device(targets, (size_t)N * 4);
    tlm_dptr d_losses = with_losses ? device_zeros((size_t)N * sizeof(float)) : 0;
    tlm_dptr d_lse = device_zeros((size_t)N * sizeof(float)), d_loss = device_zeros(sizeof(double));
    tlm_err err;

    double loss = tlm_crossentropy_forward(with_losses ? losses : NULL, lse, logits, targets, N, V);
    launched(tlm_gpu_crossentropy_forward(&gpu, d_losses, d_lse, d_logits, d_targets, N, V, d_loss, &err),
             "crossentropy_forward", &err);
    compare_device("crossentropy_forward", "lse", config, d_lse, lse, (size_t)N, OWN_SCALE);
    if (with_losses) compare_device("crossentropy_forward", "losses", config, d_losses, losses, (size_t)N, OWN_SCALE);
    double gpu_loss;
    from_device(&gpu_loss, d_loss, sizeof gpu_loss);
    float loss_pair[2] = {(float)gpu_loss, (float)loss};
    compare("crossentropy_forward", "mean loss", config, &loss_pair[0], &loss_pair[1], 1, OWN_SCALE);
    if (loss == 0.0 && gpu_loss != 0.0) {
        printf("FAIL crossentropy_forward mean loss (%s): %g with no valid row\n", config, gpu_loss);
        failures++;
    }

    /* the backward, from the CPU's lse on both sides */
    const float dloss = 0.75f;
    tlm_dptr d_lse_cpu = to_device(lse, (size_t)N * sizeof(float));
    tlm_dptr d_dlogits = in_place ? d_logits : device_zeros(n * sizeof(float));
    tlm_crossentropy_backward(dlogits, logits, lse, targets, N, V, dloss);
    launched(tlm_gpu_crossentropy_backward(&gpu, d_dlogits, d_logits, d_lse_cpu, d_targets, N, V, dloss, &err),
             "crossentropy_backward", &err);
    compare_device("crossentropy_backward", "dlogits", config, d_dlogits, dlogits, n, OWN_SCALE);

    release(d_logits), release(d_targets), release(d_losses);
    release(d_lse), release(d_loss), release(d_lse_cpu);
    if (!in_place) release(d_dlogits);
    free(logits), free(targets), free(losses), free(lse), free(dlogits);
}

/* --precision bf16's cross-entropy: the logits stored in bf16, and dlogits
 * in bf16 in place over them (as the executor runs it) or in a buffer of
 * its own. On logits rounded to bf16, the _bf16 kernels must give the fp32
 * kernels' results on the widened logits bit for bit: the same lse, losses
 * and mean loss (each computed from the same floats in the same order), and
 * each dlogit the fp32 kernel's rounded to nearest even (tlm_f32_to_bf16).
 * Each backward reads its own forward's lse (the same bits, checked first). */
static void check_crossentropy_bf16(int N, int V, int ignored, bool in_place) {
    char config[96];
    snprintf(config, sizeof config, "N=%d V=%d ignored 1/%d bf16%s", N, V, ignored, in_place ? " in place" : "");
    size_t n = (size_t)N * V;
    float *logits = random_floats(n, -4, 4), *lse = host_alloc((size_t)N * 4), *lse16 = host_alloc((size_t)N * 4);
    float *losses = host_alloc((size_t)N * 4), *losses16 = host_alloc((size_t)N * 4);
    float *dlogits = host_alloc(n * 4), *want = host_alloc(n * 4), *got = host_alloc(n * 4);
    uint16_t *x16 = host_alloc(n * 2), *d16 = host_alloc(n * 2);
    for (size_t i = 0; i < n; i++) logits[i] = tlm_bf16_to_f32(x16[i] = tlm_f32_to_bf16(logits[i]));
    int32_t *targets = host_alloc((size_t)N * sizeof(int32_t));
    for (int i = 0; i < N; i++)
        targets[i] = ignored && i % ignored == 0 ? -1 : (int32_t)tlm_rng_below(&rng, (uint64_t)V);
    tlm_dptr d_logits = to_device(logits, n * 4), d_x16 = to_device(x16, n * 2);
    tlm_dptr d_targets = to_device(targets, (size_t)N * 4), d_dlogits = device_zeros(n * 4);
    tlm_dptr d_d16 = in_place ? d_x16 : device_zeros(n * 2);
    tlm_dptr d_lse = device_zeros((size_t)N * 4), d_lse16 = device_zeros((size_t)N * 4);
    tlm_dptr d_losses = device_zeros((size_t)N * 4), d_losses16 = device_zeros((size_t)N * 4);
    tlm_dptr d_loss = device_zeros(8), d_loss16 = device_zeros(8);
    const float dloss = 0.75f;
    tlm_err err;
    launched(tlm_gpu_crossentropy_forward(&gpu, d_losses, d_lse, d_logits, d_targets, N, V, d_loss, &err),
             "crossentropy_forward", &err);
    launched(tlm_gpu_crossentropy_forward_bf16(&gpu, d_losses16, d_lse16, d_x16, d_targets, N, V, d_loss16, &err),
             "crossentropy_forward_bf16", &err);
    launched(tlm_gpu_crossentropy_backward(&gpu, d_dlogits, d_logits, d_lse, d_targets, N, V, dloss, &err),
             "crossentropy_backward", &err);
    launched(tlm_gpu_crossentropy_backward_bf16(&gpu, d_d16, d_x16, d_lse16, d_targets, N, V, dloss, &err),
             "crossentropy_backward_bf16", &err);
    double loss, loss16;
    from_device(lse, d_lse, (size_t)N * 4), from_device(lse16, d_lse16, (size_t)N * 4);
    from_device(losses, d_losses, (size_t)N * 4), from_device(losses16, d_losses16, (size_t)N * 4);
    from_device(&loss, d_loss, 8), from_device(&loss16, d_loss16, 8);
    from_device(dlogits, d_dlogits, n * 4), from_device(d16, d_d16, n * 2);
    for (size_t i = 0; i < n; i++) {
        want[i] = tlm_bf16_to_f32(tlm_f32_to_bf16(dlogits[i]));
        got[i] = tlm_bf16_to_f32(d16[i]);
    }
    compare("crossentropy_forward_bf16", "lse", config, lse16, lse, (size_t)N, EXACT);
    compare("crossentropy_forward_bf16", "losses", config, losses16, losses, (size_t)N, EXACT);
    record_of("crossentropy_forward_bf16")->tensors++;
    if (memcmp(&loss16, &loss, sizeof loss)) {
        printf("FAIL crossentropy_forward_bf16 mean loss (%s): %.17g, the fp32 kernel's %.17g\n", config, loss16, loss);
        record_of("crossentropy_forward_bf16")->worst = INFINITY;
        failures++;
    }
    compare("crossentropy_backward_bf16", "dlogits", config, got, want, n, EXACT);

    release(d_logits), release(d_x16), release(d_targets), release(d_dlogits), release(d_lse), release(d_lse16);
    release(d_losses), release(d_losses16), release(d_loss), release(d_loss16);
    if (!in_place) release(d_d16);
    free(logits), free(lse), free(lse16), free(losses), free(losses16), free(dlogits), free(want), free(got);
    free(x16), free(d16), free(targets);
}

/* ---- sigmoid gate and SwiGLU ------------------------------------------ */

/* which: 3 both gradients, 1 dy only, 2 dg only */
static void check_sigmoid_gate(int R, int D, int which) {
    char config[64];
    snprintf(config, sizeof config, "R=%d D=%d%s", R, D, which == 1 ? " dy only" : which == 2 ? " dg only" : "");
    size_t n = (size_t)R * D;
    float *y = random_floats(n, -2, 2), *gate = random_floats((size_t)R, -4, 4), *dout = random_floats(n, -1, 1);
    float *out = host_alloc(n * sizeof(float)), *dy = host_alloc(n * sizeof(float));
    float *dg = host_alloc((size_t)R * sizeof(float));
    tlm_dptr d_y = to_device(y, n * sizeof(float)), d_gate = to_device(gate, (size_t)R * sizeof(float));
    tlm_dptr d_dout = to_device(dout, n * sizeof(float)), d_out = device_zeros(n * sizeof(float));
    tlm_dptr d_dy = which & 1 ? device_zeros(n * sizeof(float)) : 0;
    tlm_dptr d_dg = which & 2 ? device_zeros((size_t)R * sizeof(float)) : 0;
    tlm_err err;

    tlm_sigmoid_gate_forward(out, y, gate, R, D);
    launched(tlm_gpu_sigmoid_gate_forward(&gpu, d_out, d_y, d_gate, R, D, &err), "sigmoid_gate_forward", &err);
    compare_device("sigmoid_gate_forward", "out", config, d_out, out, n, OWN_SCALE);

    tlm_sigmoid_gate_backward(which & 1 ? dy : NULL, which & 2 ? dg : NULL, dout, y, gate, R, D);
    launched(tlm_gpu_sigmoid_gate_backward(&gpu, d_dy, d_dg, d_dout, d_y, d_gate, R, D, &err), "sigmoid_gate_backward",
             &err);
    if (which & 1) compare_device("sigmoid_gate_backward", "dy", config, d_dy, dy, n, OWN_SCALE);
    if (which & 2) { /* dg[r] cancels the terms s (1 - s) dout y of its row */
        double terms = 0.0;
        for (int r = 0; r < R; r++) {
            double s = 1.0 / (1.0 + exp(-(double)gate[r])), row = 0.0;
            for (int d = 0; d < D; d++) row += fabs((double)dout[(size_t)r * D + d] * y[(size_t)r * D + d]);
            terms = fmax(terms, s * (1.0 - s) * row);
        }
        compare_device("sigmoid_gate_backward", "dg", config, d_dg, dg, (size_t)R, terms);
    }

    release(d_y), release(d_gate), release(d_dout), release(d_out);
    release(d_dy), release(d_dg);
    free(y), free(gate), free(dout), free(out), free(dy), free(dg);
}

/* --precision bf16's sigmoid gate (gated attention): y, gate and out in
 * bf16, dout, dy and dgate in fp32. On y and gate rounded to bf16, the bf16
 * kernels must give the fp32 kernels' results on the widened values: out
 * rounded once to nearest even, dy and dgate bit for bit (the same fp32
 * arithmetic in the same order; the fp32 kernels are held to the CPU op
 * by check_sigmoid_gate). */
static void check_sigmoid_gate_bf16(int R, int D) {
    char config[64];
    snprintf(config, sizeof config, "R=%d D=%d bf16 y, gate, out", R, D);
    size_t n = (size_t)R * D;
    float *y = random_floats(n, -2, 2), *gate = random_floats((size_t)R, -4, 4), *dout = random_floats(n, -1, 1);
    uint16_t *y16 = host_alloc(n * 2), *gate16 = host_alloc((size_t)R * 2);
    for (size_t i = 0; i < n; i++) y[i] = tlm_bf16_to_f32(y16[i] = tlm_f32_to_bf16(y[i]));
    for (int r = 0; r < R; r++) gate[r] = tlm_bf16_to_f32(gate16[r] = tlm_f32_to_bf16(gate[r]));
    float *want = host_alloc(n * sizeof(float)), *got = host_alloc(n * sizeof(float));
    tlm_dptr d_y = to_device(y, n * sizeof(float)), d_gate = to_device(gate, (size_t)R * sizeof(float));
    tlm_dptr d_y16 = to_device(y16, n * 2), d_gate16 = to_device(gate16, (size_t)R * 2);
    tlm_dptr d_dout = to_device(dout, n * sizeof(float)), d_out = device_zeros(n * sizeof(float));
    tlm_dptr d_out16 = device_zeros(n * 2), d_dy = device_zeros(n * sizeof(float));
    tlm_dptr d_dy16 = device_zeros(n * sizeof(float)), d_dg = device_zeros((size_t)R * sizeof(float));
    tlm_dptr d_dg16 = device_zeros((size_t)R * sizeof(float));
    tlm_err err;

    launched(tlm_gpu_sigmoid_gate_forward(&gpu, d_out, d_y, d_gate, R, D, &err), "sigmoid_gate_forward", &err);
    launched(tlm_gpu_sigmoid_gate_forward_bf16(&gpu, d_out16, d_y16, d_gate16, R, D, &err), "sigmoid_gate_forward_bf16",
             &err);
    compare_rounded("sigmoid_gate_forward_bf16", "out", config, d_out16, d_out, n);

    launched(tlm_gpu_sigmoid_gate_backward(&gpu, d_dy, d_dg, d_dout, d_y, d_gate, R, D, &err), "sigmoid_gate_backward",
             &err);
    launched(tlm_gpu_sigmoid_gate_backward_bf16(&gpu, d_dy16, d_dg16, d_dout, d_y16, d_gate16, R, D, &err),
             "sigmoid_gate_backward_bf16", &err);
    from_device(want, d_dy, n * sizeof(float));
    from_device(got, d_dy16, n * sizeof(float));
    compare("sigmoid_gate_backward_bf16", "dy", config, got, want, n, EXACT);
    from_device(want, d_dg, (size_t)R * sizeof(float));
    from_device(got, d_dg16, (size_t)R * sizeof(float));
    compare("sigmoid_gate_backward_bf16", "dgate", config, got, want, (size_t)R, EXACT);

    release(d_y), release(d_gate), release(d_y16), release(d_gate16), release(d_dout), release(d_out);
    release(d_out16), release(d_dy), release(d_dy16), release(d_dg), release(d_dg16);
    free(y), free(gate), free(dout), free(y16), free(gate16), free(want), free(got);
}

/* --precision bf16's Titans SiLU gate (out = x silu(gate_pre), the SwiGLU
 * kernels with h, g = gate_pre and u = x in bf16; dh, dg, du fp32). On g
 * and u rounded to bf16, the bf16 kernels must give the fp32 kernels'
 * results on the widened values: h rounded once to nearest even, dg and du
 * bit for bit (the same fp32 arithmetic in the same order; the fp32
 * kernels are held to the CPU op by check_swiglu). */
static void check_swiglu_bf16(size_t n) {
    char config[64];
    snprintf(config, sizeof config, "n=%zu bf16 h, g, u", n);
    float *g = random_floats(n, -6, 6), *u = random_floats(n, -2, 2), *dh = random_floats(n, -1, 1);
    uint16_t *g16 = host_alloc(n * 2), *u16 = host_alloc(n * 2);
    for (size_t i = 0; i < n; i++) {
        g[i] = tlm_bf16_to_f32(g16[i] = tlm_f32_to_bf16(g[i]));
        u[i] = tlm_bf16_to_f32(u16[i] = tlm_f32_to_bf16(u[i]));
    }
    float *want = host_alloc(n * sizeof(float)), *got = host_alloc(n * sizeof(float));
    tlm_dptr d_g = to_device(g, n * sizeof(float)), d_u = to_device(u, n * sizeof(float));
    tlm_dptr d_g16 = to_device(g16, n * 2), d_u16 = to_device(u16, n * 2), d_dh = to_device(dh, n * sizeof(float));
    tlm_dptr d_h = device_zeros(n * sizeof(float)), d_h16 = device_zeros(n * 2);
    tlm_dptr d_dg = device_zeros(n * sizeof(float)), d_du = device_zeros(n * sizeof(float));
    tlm_dptr d_dg16 = device_zeros(n * sizeof(float)), d_du16 = device_zeros(n * sizeof(float));
    tlm_err err;

    launched(tlm_gpu_swiglu_forward(&gpu, d_h, d_g, d_u, n, &err), "swiglu_forward", &err);
    launched(tlm_gpu_swiglu_forward_bf16(&gpu, d_h16, d_g16, d_u16, n, &err), "swiglu_forward_bf16", &err);
    compare_rounded("swiglu_forward_bf16", "h", config, d_h16, d_h, n);

    launched(tlm_gpu_swiglu_backward(&gpu, d_dg, d_du, d_dh, d_g, d_u, n, &err), "swiglu_backward", &err);
    launched(tlm_gpu_swiglu_backward_bf16(&gpu, d_dg16, d_du16, d_dh, d_g16, d_u16, n, &err), "swiglu_backward_bf16",
             &err);
    from_device(want, d_dg, n * sizeof(float));
    from_device(got, d_dg16, n * sizeof(float));
    compare("swiglu_backward_bf16", "dg", config, got, want, n, EXACT);
    from_device(want, d_du, n * sizeof(float));
    from_device(got, d_du16, n * sizeof(float));
    compare("swiglu_backward_bf16", "du", config, got, want, n, EXACT);

    release(d_g), release(d_u), release(d_g16), release(d_u16), release(d_dh), release(d_h), release(d_h16);
    release(d_dg), release(d_du), release(d_dg16), release(d_du16);
    free(g), free(u), free(dh), free(g16), free(u16), free(want), free(got);
}

/* dh_alias: 0 a buffer of its own, 1 dh is dg, 2 dh is du */
static void check_swiglu(size_t n, int dh_alias) {
    char config[64];
    snprintf(config, sizeof config, "n=%zu%s", n, dh_alias == 1 ? " dh=dg" : dh_alias == 2 ? " dh=du" : "");
    float *g = random_floats(n, -6, 6), *u = random_floats(n, -2, 2), *dh = random_floats(n, -1, 1);
    float *h = host_alloc(n * sizeof(float)), *dg = host_alloc(n * sizeof(float)), *du = host_alloc(n * sizeof(float));
    tlm_dptr d_g = to_device(g, n * sizeof(float)), d_u = to_device(u, n * sizeof(float));
    tlm_dptr d_dh = to_device(dh, n * sizeof(float)), d_h = device_zeros(n * sizeof(float));
    tlm_dptr d_dg = dh_alias == 1 ? d_dh : device_zeros(n * sizeof(float));
    tlm_dptr d_du = dh_alias == 2 ? d_dh : device_zeros(n * sizeof(float));
    tlm_err err;

    tlm_swiglu_forward(h, g, u, n);
    launched(tlm_gpu_swiglu_forward(&gpu, d_h, d_g, d_u, n, &err), "swiglu_forward", &err);
    compare_device("swiglu_forward", "h", config, d_h, h, n, OWN_SCALE);

    tlm_swiglu_backward(dg, du, dh, g, u, n);
    launched(tlm_gpu_swiglu_backward(&gpu, d_dg, d_du, d_dh, d_g, d_u, n, &err), "swiglu_backward", &err);
    compare_device("swiglu_backward", "dg", config, d_dg, dg, n, OWN_SCALE);
    compare_device("swiglu_backward", "du", config, d_du, du, n, OWN_SCALE);

    release(d_g), release(d_u), release(d_dh), release(d_h);
    if (dh_alias != 1) release(d_dg);
    if (dh_alias != 2) release(d_du);
    free(g), free(u), free(dh), free(h), free(dg), free(du);
}

/* ---- the bits do not depend on the grid ----------------------------------
 * Each kernel launched by hand with the grid its call uses, then with 1 and
 * 2 blocks, so that blocks stride over many rows and reuse their shared
 * memory: the outputs (reset before each launch: to NaN, or to the starting
 * values of an output that accumulates) must be the same bits. This is what
 * makes a --resume bit-exact whatever grid a device picks. */
typedef struct output {
    tlm_dptr p;
    size_t n;           /* floats (a double counts as two) */
    const float *start; /* NULL: NaN */
} output;

typedef struct grid_spec {
    const char *kernel;
    void **args;
    unsigned grid, block; /* the call's */
    output out[2];        /* n == 0 ends */
} grid_spec;

static float *run_with_grid(const grid_spec *s, unsigned grid, size_t *total) {
    size_t n = 0;
    for (int o = 0; o < 2 && s->out[o].n; o++) {
        float *x = host_alloc(s->out[o].n * sizeof(float));
        for (size_t i = 0; i < s->out[o].n; i++) x[i] = s->out[o].start ? s->out[o].start[i] : NAN;
        tlm_err err;
        if (!tlm_device_upload(dev, s->out[o].p, x, s->out[o].n * sizeof(float), &err)) die("upload", &err);
        free(x);
        n += s->out[o].n;
    }
    tlm_err err;
    launched(tlm_gpu_launch(&gpu, s->kernel, grid, s->block, s->args, &err), s->kernel, &err);
    float *all = host_alloc(n * sizeof(float));
    size_t at = 0;
    for (int o = 0; o < 2 && s->out[o].n; o++) {
        from_device(all + at, s->out[o].p, s->out[o].n * sizeof(float));
        at += s->out[o].n;
    }
    *total = n;
    return all;
}

static void check_grids(const grid_spec *s) {
    size_t n = 0;
    float *want = run_with_grid(s, s->grid, &n);
    const unsigned grids[] = {1, 2};
    for (int i = 0; i < 2; i++) {
        float *got = run_with_grid(s, grids[i], &n);
        size_t bad = 0;
        for (size_t j = 0; j < n; j++) bad += memcmp(&got[j], &want[j], sizeof(float)) != 0;
        if (bad) {
            printf("FAIL %s: %zu of %zu output floats differ between %u and %u blocks\n", s->kernel, bad, n, grids[i],
                   s->grid);
            failures++;
        }
        free(got);
    }
    free(want);
}

static void check_grid_independence(void) {
    int N = 37, C = 67, H = 3, V = 131, R = N * H, classes = 64, accumulate = 1, B = 1, D_rope = 66;
    int stride = 3 * H * D_rope; /* a packed qkv */
    long long n_gate = (long long)N * C;
    size_t nc = (size_t)N * C, nv = (size_t)N * V, nr = (size_t)R * C, nw = (size_t)H * C;
    size_t nqkv = (size_t)N * stride, nt = (size_t)N * (D_rope / 2), most = nqkv > nr ? nqkv : nr;
    float eps = 1e-5f, sign = 1.0f, dloss = 1.0f;
    int32_t *ids = host_alloc((size_t)N * sizeof(int32_t)), *targets = host_alloc((size_t)N * sizeof(int32_t));
    for (int n = 0; n < N; n++) ids[n] = (int32_t)tlm_rng_below(&rng, 5); /* repeats */
    for (int n = 0; n < N; n++) targets[n] = n % 4 == 0 ? -1 : (int32_t)tlm_rng_below(&rng, (uint64_t)V);
    float *start = random_floats(most, -1, 1); /* where accumulating or in-place outputs start */
    float *a = random_floats(nr, -1, 1), *x = random_floats(nr, -2, 2), *w = random_floats(nr, 0.5f, 1.5f);
    float *logits = random_floats(nv, -4, 4);
    float *cos_t = host_alloc(nt * sizeof(float)), *sin_t = host_alloc(nt * sizeof(float));
    tlm_rope_init(cos_t, sin_t, N, D_rope, 10000.0);
    tlm_dptr d_ids = to_device(ids, (size_t)N * 4), d_targets = to_device(targets, (size_t)N * 4);
    tlm_dptr A = to_device(a, nr * 4), X = to_device(x, nr * 4), W = to_device(w, nr * 4);
    tlm_dptr L = to_device(logits, nv * 4), d_cos = to_device(cos_t, nt * 4), d_sin = to_device(sin_t, nt * 4);
    tlm_dptr O1 = device_zeros(most * 4), O2 = device_zeros(most * 4), QKV = device_zeros(nqkv * 4);
    tlm_dptr RSTD = device_zeros((size_t)R * 4), LSE = device_zeros((size_t)N * 4), LOSS = device_zeros(8);
    tlm_err err;
    /* the inputs the backwards read: rstd and lse from their forwards */
    launched(tlm_gpu_rmsnorm_heads_forward(&gpu, O1, RSTD, X, W, N, H, C, eps, &err), "rmsnorm", &err);
    launched(tlm_gpu_crossentropy_forward(&gpu, 0, LSE, L, d_targets, N, V, LOSS, &err), "crossentropy", &err);

    void *gather[] = {&O1, &d_ids, &A, &N, &C};
    void *scatter[] = {&O1, &A, &d_ids, &N, &C, &classes};
    void *rms_fwd[] = {&O1, &O2, &X, &W, &R, &H, &C, &eps};
    void *rms_bwd[] = {&O1, &A, &X, &W, &RSTD, &R, &H, &C, &accumulate};
    void *rms_dw[] = {&O1, &A, &X, &RSTD, &R, &H, &C};
    void *rope[] = {&QKV, &QKV, &d_cos, &d_sin, &B, &N, &H, &D_rope, &stride, &sign};
    /* bf16 qkv: nqkv elements, nqkv / 2 floats' worth of bytes, starting from
     * bf16 values (start's, rounded) */
    uint16_t *start16 = host_alloc(nqkv * 2);
    for (size_t i = 0; i < nqkv; i++) start16[i] = tlm_f32_to_bf16(start[i]);
    float *start16_bytes = host_alloc(nqkv * 2);
    memcpy(start16_bytes, start16, nqkv * 2);
    void *ce_rows[] = {&O1, &O2, &L, &d_targets, &N, &V};
    void *ce_mean[] = {&LOSS, &LSE, &L, &d_targets, &N, &V};
    void *ce_bwd[] = {&O1, &L, &LSE, &d_targets, &N, &V, &dloss};
    /* bf16 logits: nv elements, (nv + 1) / 2 floats' worth of bytes */
    uint16_t *logits16 = host_alloc(nv * 2);
    for (size_t i = 0; i < nv; i++) logits16[i] = tlm_f32_to_bf16(logits[i]);
    tlm_dptr L16 = to_device(logits16, nv * 2);
    void *ce_rows16[] = {&O1, &O2, &L16, &d_targets, &N, &V};
    void *ce_mean16[] = {&LOSS, &LSE, &L16, &d_targets, &N, &V};
    void *ce_bwd16[] = {&O1, &L16, &LSE, &d_targets, &N, &V, &dloss};
    void *gate_apply[] = {&O1, &A, &W, &R, &C};
    void *gate_dy[] = {&O1, &A, &W, &R, &C};
    void *gate_dg[] = {&O1, &A, &X, &W, &R, &C};
    /* the bf16 gate's y and gate: x and w rounded */
    uint16_t *x16 = host_alloc(nr * 2), *w16 = host_alloc(nr * 2);
    for (size_t i = 0; i < nr; i++) x16[i] = tlm_f32_to_bf16(x[i]), w16[i] = tlm_f32_to_bf16(w[i]);
    tlm_dptr X16 = to_device(x16, nr * 2), W16 = to_device(w16, nr * 2);
    void *rms_fwd16[] = {&O1, &O2, &X16, &W, &R, &H, &C, &eps}; /* the per-head norm's x in bf16 */
    void *rms_bwd16[] = {&O1, &A, &X16, &W, &RSTD, &R, &H, &C, &accumulate};
    void *rms_dw16[] = {&O1, &A, &X16, &RSTD, &R, &H, &C};
    void *gate_apply16[] = {&O1, &X16, &W16, &R, &C};
    void *gate_dy16[] = {&O1, &A, &W16, &R, &C};
    void *gate_dg16[] = {&O1, &A, &X16, &W16, &R, &C};
    void *swiglu[] = {&O1, &A, &W, &n_gate};
    void *swiglu_grad[] = {&O1, &O2, &A, &X, &W, &n_gate};
    void *swiglu16[] = {&O1, &X16, &W16, &n_gate}; /* the bf16 twins: g and u rounded */
    void *swiglu_grad16[] = {&O1, &O2, &A, &X16, &W16, &n_gate};
    const unsigned rows = (unsigned)R, per_elem = tlm_gpu_blocks((int64_t)nr, TLM_GPU_BASIC_BLOCK);
    const grid_spec specs[] = {
        {"tlm_embedding_gather",
         gather,
         tlm_gpu_blocks((int64_t)nc, TLM_GPU_BASIC_BLOCK),
         TLM_GPU_BASIC_BLOCK,
         {{O1, nc, NULL}}},
        {"tlm_embedding_scatter_add",
         scatter,
         tlm_gpu_blocks((int64_t)classes * C, TLM_GPU_BASIC_BLOCK),
         TLM_GPU_BASIC_BLOCK,
         {{O1, (size_t)5 * C, start}}},
        {"tlm_rmsnorm_rows_forward", rms_fwd, rows, TLM_GPU_BASIC_BLOCK, {{O1, nr, NULL}, {O2, (size_t)R, NULL}}},
        /* bf16 out: nr elements, the first nr / 2 floats' worth of bytes */
        {"tlm_rmsnorm_rows_forward_bf16",
         rms_fwd,
         rows,
         TLM_GPU_BASIC_BLOCK,
         {{O1, nr / 2, NULL}, {O2, (size_t)R, NULL}}},
        {"tlm_rmsnorm_rows_backward", rms_bwd, rows, TLM_GPU_BASIC_BLOCK, {{O1, nr, start}}},
        {"tlm_rmsnorm_weight_backward",
         rms_dw,
         tlm_gpu_blocks((int64_t)nw, 32),
         TLM_GPU_RMSNORM_WEIGHT_BLOCK,
         {{O1, nw, start}}},
        {"tlm_rmsnorm_rows_forward_bf16_x",
         rms_fwd16,
         rows,
         TLM_GPU_BASIC_BLOCK,
         {{O1, nr / 2, NULL}, {O2, (size_t)R, NULL}}},
        {"tlm_rmsnorm_rows_backward_bf16_x", rms_bwd16, rows, TLM_GPU_BASIC_BLOCK, {{O1, nr, start}}},
        {"tlm_rmsnorm_weight_backward_bf16_x",
         rms_dw16,
         tlm_gpu_blocks((int64_t)nw, 32),
         TLM_GPU_RMSNORM_WEIGHT_BLOCK,
         {{O1, nw, start}}},
        {"tlm_rope_rotate",
         rope,
         tlm_gpu_blocks((int64_t)N * H * (D_rope / 2), TLM_GPU_BASIC_BLOCK),
         TLM_GPU_BASIC_BLOCK,
         {{QKV, nqkv, start}}},
        {"tlm_rope_rotate_bf16",
         rope,
         tlm_gpu_blocks((int64_t)N * H * (D_rope / 2), TLM_GPU_BASIC_BLOCK),
         TLM_GPU_BASIC_BLOCK,
         {{QKV, nqkv / 2, start16_bytes}}},
        {"tlm_crossentropy_rows",
         ce_rows,
         (unsigned)N,
         TLM_GPU_BASIC_BLOCK,
         {{O1, (size_t)N, NULL}, {O2, (size_t)N, NULL}}},
        {"tlm_crossentropy_mean", ce_mean, 1, TLM_GPU_BASIC_BLOCK, {{LOSS, 2, NULL}}},
        {"tlm_crossentropy_rows_backward", ce_bwd, (unsigned)N, TLM_GPU_BASIC_BLOCK, {{O1, nv, NULL}}},
        {"tlm_crossentropy_rows_bf16",
         ce_rows16,
         (unsigned)N,
         TLM_GPU_BASIC_BLOCK,
         {{O1, (size_t)N, NULL}, {O2, (size_t)N, NULL}}},
        {"tlm_crossentropy_mean_bf16", ce_mean16, 1, TLM_GPU_BASIC_BLOCK, {{LOSS, 2, NULL}}},
        {"tlm_crossentropy_rows_backward_bf16", ce_bwd16, (unsigned)N, TLM_GPU_BASIC_BLOCK, {{O1, (nv + 1) / 2, NULL}}},
        {"tlm_sigmoid_gate_apply", gate_apply, per_elem, TLM_GPU_BASIC_BLOCK, {{O1, nr, NULL}}},
        {"tlm_sigmoid_gate_dy", gate_dy, per_elem, TLM_GPU_BASIC_BLOCK, {{O1, nr, NULL}}},
        {"tlm_sigmoid_gate_dg",
         gate_dg,
         tlm_gpu_blocks(R, TLM_GPU_BASIC_BLOCK),
         TLM_GPU_BASIC_BLOCK,
         {{O1, (size_t)R, NULL}}},
        {"tlm_sigmoid_gate_apply_bf16", gate_apply16, per_elem, TLM_GPU_BASIC_BLOCK, {{O1, (nr + 1) / 2, NULL}}},
        {"tlm_sigmoid_gate_dy_bf16", gate_dy16, per_elem, TLM_GPU_BASIC_BLOCK, {{O1, nr, NULL}}},
        {"tlm_sigmoid_gate_dg_bf16",
         gate_dg16,
         tlm_gpu_blocks(R, TLM_GPU_BASIC_BLOCK),
         TLM_GPU_BASIC_BLOCK,
         {{O1, (size_t)R, NULL}}},
        {"tlm_swiglu_apply",
         swiglu,
         tlm_gpu_blocks(n_gate, TLM_GPU_BASIC_BLOCK),
         TLM_GPU_BASIC_BLOCK,
         {{O1, nc, NULL}}},
        {"tlm_swiglu_grad",
         swiglu_grad,
         tlm_gpu_blocks(n_gate, TLM_GPU_BASIC_BLOCK),
         TLM_GPU_BASIC_BLOCK,
         {{O1, nc, NULL}, {O2, nc, NULL}}},
        {"tlm_swiglu_apply_bf16",
         swiglu16,
         tlm_gpu_blocks(n_gate, TLM_GPU_BASIC_BLOCK),
         TLM_GPU_BASIC_BLOCK,
         {{O1, (nc + 1) / 2, NULL}}},
        {"tlm_swiglu_grad_bf16",
         swiglu_grad16,
         tlm_gpu_blocks(n_gate, TLM_GPU_BASIC_BLOCK),
         TLM_GPU_BASIC_BLOCK,
         {{O1, nc, NULL}, {O2, nc, NULL}}},
    };
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) check_grids(&specs[i]);

    release(d_ids), release(d_targets), release(A), release(X), release(W), release(L), release(d_cos);
    release(d_sin), release(O1), release(O2), release(QKV), release(RSTD), release(LSE), release(LOSS), release(L16);
    free(ids), free(targets), free(start), free(a), free(x), free(w), free(logits), free(cos_t), free(sin_t);
    free(start16), free(start16_bytes), free(logits16);
    release(X16), release(W16);
    free(x16), free(w16);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* a timeout still shows how far it got */
    tlm_err err;
    dev = tlm_device_open("cuda", &err);
    if (!dev) die("open the device", &err);
    if (!tlm_gpu_open(&gpu, dev, &err)) die("load the runtime's kernels", &err);
    printf("gpu.basic on %s\n", tlm_device_get_info(dev)->name);
    tlm_rng_seed(&rng, 20261202);

    static const int rows[] = {1, 7, 33}, widths[] = {1, 5, 67, 130};
    for (int a = 0; a < 3; a++) {
        for (int b = 0; b < 4; b++) {
            check_embedding(rows[a], widths[b], 1 + rows[a] / 3); /* few ids: repeats */
            check_rmsnorm(rows[a], 0, widths[b], true);
            check_rmsnorm(rows[a], 3, widths[b], b % 2 == 0);
            check_rmsnorm_heads_bf16(rows[a], 3, widths[b], b % 2 == 1);
            check_sigmoid_gate(rows[a] * 3, widths[b], 1 + (a + b) % 3);
        }
    }
    check_embedding(300, 67, 257);
    check_rmsnorm(33, 0, 1500, true); /* rows longer than a block */
    check_rmsnorm(5, 2, 64, false);
    check_rmsnorm_heads_bf16(5, 2, 64, true);
    check_rmsnorm_heads_bf16(2, 1, 1500, true); /* rows longer than a block */

    static const int head_sizes[] = {2, 6, 66};
    for (int d = 0; d < 3; d++) {
        check_rope(1, 7, 1, head_sizes[d], false);
        check_rope(3, 11, 3, head_sizes[d], true);
        check_rope_bf16(3, 11, 3, head_sizes[d]);
    }
    check_rope_bf16(1, 37, 2, 64); /* the presets' head sizes */
    check_rope_bf16(2, 19, 1, 128);

    check_crossentropy(1, 1, 0, true, false);
    check_crossentropy(7, 67, 3, true, false);
    check_crossentropy(33, 300, 5, false, true);
    check_crossentropy(33, 257, 0, true, true);
    check_crossentropy(7, 67, 1, true, false); /* every target ignored: loss 0, zero gradient */
    check_crossentropy(600, 5, 7, true, false); /* more rows than a block's threads */
    static const int vocabs[] = {1, 5, 37, 257, 1000};
    for (int v = 0; v < 5; v++) {
        check_crossentropy_bf16(1 + 2 * v, vocabs[v], 0, v % 2 == 0);
        check_crossentropy_bf16(33, vocabs[v], 3, v % 2 == 1);
    }
    check_crossentropy_bf16(7, 37, 1, true);   /* every target ignored: loss 0, zero gradient */
    check_crossentropy_bf16(601, 5, 7, true); /* more rows than a block's threads */

    /* the elementwise gate (D 1) and the head-wise one at the presets'
     * head size 64 and an odd one */
    static const int gate_rows[] = {1, 5, 37}, gate_widths[] = {1, 64, 67};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++) check_sigmoid_gate_bf16(gate_rows[a], gate_widths[b]);

    check_swiglu(1, 0);
    check_swiglu(1000, 1);
    check_swiglu(4099, 2);
    check_swiglu(33 * 67, 0);
    static const size_t swiglu_bf16_sizes[] = {1, 7, 1000, 4099};
    for (int i = 0; i < 4; i++) check_swiglu_bf16(swiglu_bf16_sizes[i]);

    check_grid_independence();

    for (int i = 0; i < n_records; i++) {
        const char *limit = !strncmp(records[i].op, "embedding", 9)               ? "exact"
                            : !strcmp(records[i].op, "rope_forward_bf16")         ? "exact: the fp32 kernel's, rounded"
                            : !strcmp(records[i].op, "crossentropy_forward_bf16") ? "exact: the fp32 kernel's"
                            : !strcmp(records[i].op, "rmsnorm_heads_backward_bf16")
                                ? "exact: the fp32 kernel's; 1e-05 of the CPU's"
                            : !strcmp(records[i].op, "crossentropy_backward_bf16") ? "exact: the fp32 kernel's, rounded"
                            : !strncmp(records[i].op, "sigmoid_gate_", 13) && strstr(records[i].op, "bf16")
                                ? "exact: the fp32 kernel's (out rounded)"
                            : !strncmp(records[i].op, "swiglu_", 7) && strstr(records[i].op, "bf16")
                                ? "exact: the fp32 kernel's (h rounded)"
                            : strstr(records[i].op, "bf16") ? "2^-8 (1 + 1e-5) + 1e-5"
                                                            : "1e-05";
        printf("  %-27s worst error %.3g over %d tensors (limit %s; %s)\n", records[i].op, records[i].worst,
               records[i].tensors, limit, records[i].where);
    }
    tlm_gpu_close(&gpu);
    tlm_device_close(dev);
    if (failures) {
        printf("gpu.basic: %d failure(s)\n", failures);
        return 1;
    }
    printf("gpu.basic: all checks passed\n");
    return 0;
}
