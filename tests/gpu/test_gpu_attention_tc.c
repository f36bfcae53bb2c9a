/* gpu.attention_tc: the tensor-core attention (runtime/gpu/attention_tc.cu
 * through attention_tc.h) on the device "cuda" opens (the emulated one under
 * the suite's TLM_TEST_DEVICE=emulated, where mma.sync and ldmatrix are warp
 * collectives with the PTX ISA's fragment layouts), against today's scalar
 * fp32 kernel (tlm_gpu_attention_forward, itself held to the CPU op by
 * gpu.mixers) run on the same bf16-rounded q, k, v widened to fp32.
 *
 * Cases: head sizes 64 and 128 (the presets'); T in {1, 5, 37, 64, 65, 130}
 * (one key, a tile's inside, the 64-row block's edge and past it, three
 * blocks); B = 2, H = 3 (B = 1, H = 2 at T = 130, for time); q, k, v packed
 * [B,T,3,H,D] (stride 3HD) and as three [B,T,H,D] tensors in turn. Outputs
 * start as NaN, so an element the kernel does not write fails.
 *
 * Bound, per element, derived from the differences between the two kernels
 * (u = 2^-8, bf16's unit roundoff; A_td = sum_u P_tu |v_ud| and the
 * softmax P computed in float64 here):
 *   - P is rounded to bf16 before P V (l sums the fp32 P): y moves by at
 *     most u A_td. This is the main term;
 *   - S = q.k scale: each kernel within D 2^-23 scale sum_i |q_i k_i| =: e_s
 *     of the exact score (any fp32 order, rounding or truncating, as tensor
 *     cores may); s and lse each move by at most 2 e_s between the kernels,
 *     so P = exp(s - lse) by a factor within 1 +- 4 e_s (to first order);
 *   - the sums over at most T keys of P v and of P (l), in fp32 in each
 *     kernel: 2 (T + 2) 2^-23 A_td each, 4 (T + 2) 2^-23 A_td for both;
 *   - expf and logf, a few ulps: 2^-21 A_td;
 *   - y stored in bf16: u |y|.
 *   |y_tc - y_ref| <= (u + 4 e_s + 4 (T + 2) 2^-23 + 2^-21) (1 + u) A_td + u |y_ref|
 *   |lse_tc - lse_ref| <= 4 e_s + 4 (T + 2) 2^-23 + 2^-21 (1 + |lse_ref|)
 * (e_s the row's largest over its keys). The worst error is printed as a
 * fraction of the bound. A fragment in the wrong lane, a key past the
 * diagonal, or a missed rescale moves y by O(A_td), hundreds of times u A_td.
 *
 * The backward (tlm_gpu_attention_tc_backward) against the scalar bf16
 * backward (tlm_gpu_attention_backward_bf16, on the same bf16 q, k, v), both
 * given the tensor-core forward's y and lse and the same fp32 dy. With P,
 * dP = dy . v, D_t = dy_t . y_t and dS = P (dP - D) scale in float64:
 *   - dy is rounded to bf16 for the products: dP moves by u sum_d |dy v|
 *     (plus 2 D 2^-23 of it for the two fp32 dot products), D_t by
 *     2 D 2^-23 sum_d |dy y| (another order only);
 *   - P moves by a factor within 1 +- (2 e_s + 2^-21) (the scores; lse is
 *     the same input for both);
 *   so dS by at most dSerr = scale P ((u + 2 D 2^-23) sum|dy v| +
 *   2 D 2^-23 sum|dy y| + (2 e_s + 2^-21) |dP - D|), and rounding dS (and
 *   P) to bf16 before the products adds u of it;
 *   |ddq_td| <= (1 + u) sum_u (dSerr_tu + (u + 4 (T + 2) 2^-23) |dS_tu|) |k_ud|
 *   |ddk_ud| <= (1 + u) sum_t (dSerr_tu + (u + 4 (T + 2) 2^-23) |dS_tu|) |q_td|
 *   |ddv_ud| <= (1 + u) sum_t P_tu |dy_td| (2u + 2 e_s + 2^-21 + 4 (T + 2) 2^-23)
 * (2u: dy and P both rounded). A dropped D_t, or D_t of the wrong query,
 * fails it (tried by hand).
 *
 * Also: the kernels give the same bits with 1 and 2 blocks as with their grid
 * (the backward at both head sizes: at 128 the dk, dv kernel's 8 warps in
 * two roles and both backward kernels' tiles in halves), the dk, dv kernel
 * at head size 128 traps on a block of 128 threads (its dK role would be
 * left out; emulated device only), and unsupported cases (head size 32, a stride not a multiple of 8, a
 * misaligned q) fail with one line before launching.
 *
 * The kernels' module (gpu.h): tlm_gpu_open does not load it, and a launch
 * before tlm_gpu_load_module fails with one line naming it; every kernel
 * declared in each module's source is, by tlm_gpu_kernel_module's rule, in
 * that module (so a launch finds it), and the ten kernels
 * tlm_gpu_attention_tc_kernel names are in the tensor-core source and not
 * in the runtime's.
 *
 * At head size 64, the forward and dq kernels whose warps take 16 query rows
 * (tlm_gpu.attention_rows16, TLM_GPU_ATTENTION_ROWS=16) give the same bits
 * as the default ones, which take 32 on the emulated device (an sm_90). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_tc.h"
#include "device.h"
#include "tc_test.h"
#include "gemm_reference.h"
#include "gpu.h"
#include "gpu_mixers.h"
#include "tlm_rt/rng.h"

static tlm_gpu g_gpu;
static tlm_rng g_rng;
static double g_worst_y, g_worst_lse, g_worst_y_over_a, g_worst_grad[3];

typedef struct {
    int B, T, H, D, stride;
    size_t qo, ko, vo, n; /* elements */
} shape;

static shape make_shape(int B, int T, int H, int D, bool packed) {
    size_t one = (size_t)B * T * H * D, A = (size_t)H * D;
    if (packed) return (shape){B, T, H, D, 3 * H * D, 0, A, 2 * A, 3 * one};
    return (shape){B, T, H, D, H * D, 0, one, 2 * one, 3 * one};
}

static size_t at(const shape *s, size_t base, int b, int t, int h) {
    return base + ((size_t)b * s->T + t) * s->stride + (size_t)h * s->D;
}

/* Holds the device's y (bf16 bits) and lse against the scalar kernel's, per
 * element within the bound of the header. */
static void compare(const shape *s, const float *x, const float *yref, const float *lseref, const uint16_t *y16,
                    const float *lse16, const char *label) {
    const int B = s->B, T = s->T, H = s->H, D = s->D;
    const double u = ldexp(1.0, -8), scale = 1.0 / sqrt((double)D), ulp = ldexp(1.0, -23);
    double *p = xalloc((size_t)T * sizeof(double));
    size_t bad_y = 0, bad_lse = 0, first = 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const float *q = x + at(s, s->qo, b, t, h);
                double mx = -INFINITY, es = 0.0;
                for (int j = 0; j <= t; j++) {
                    const float *k = x + at(s, s->ko, b, j, h);
                    double dot = 0.0, mag = 0.0;
                    for (int i = 0; i < D; i++) {
                        dot += (double)q[i] * k[i];
                        mag += fabs((double)q[i] * k[i]);
                    }
                    p[j] = dot * scale;
                    mx = fmax(mx, p[j]);
                    es = fmax(es, D * ulp * scale * mag);
                }
                double l = 0.0;
                for (int j = 0; j <= t; j++) l += (p[j] = exp(p[j] - mx));
                const double rel = u + 4 * es + 4 * (T + 2) * ulp + ldexp(1.0, -21);
                const size_t row = ((size_t)b * T + t) * H * D + (size_t)h * D, li = ((size_t)b * T + t) * H + h;
                for (int d = 0; d < D; d++) {
                    double a = 0.0;
                    for (int j = 0; j <= t; j++) a += p[j] / l * fabs((double)x[at(s, s->vo, b, j, h) + d]);
                    const double want = yref[row + d], got = tlm_bf16_to_f32(y16[row + d]);
                    const double bound = rel * (1 + u) * a + u * fabs(want), e = fabs(got - want);
                    if (!(e <= bound)) {
                        if (!bad_y++) first = row + d;
                    } else if (bound > 0) {
                        g_worst_y = fmax(g_worst_y, e / bound);
                        if (a > 0) g_worst_y_over_a = fmax(g_worst_y_over_a, e / a);
                    }
                }
                const double lb = 4 * es + 4 * (T + 2) * ulp + ldexp(1.0, -21) * (1 + fabs(lseref[li]));
                const double le = fabs((double)lse16[li] - lseref[li]);
                if (!(le <= lb)) bad_lse++;
                else g_worst_lse = fmax(g_worst_lse, le / lb);
            }
    char what[300];
    snprintf(what, sizeof what, "%s: y %zu of %zu outside the bound, lse %zu of %zu", label, bad_y,
             (size_t)B * T * H * D, bad_lse, (size_t)B * T * H);
    if (bad_y)
        printf("     first bad y [%zu]: tensor cores %.9g, scalar %.9g\n", first, (double)tlm_bf16_to_f32(y16[first]),
               (double)yref[first]);
    check(bad_y == 0 && bad_lse == 0, what);
    free(p);
}

/* One gradient's elements against the scalar kernel's within bound[] (as
 * compare's); records the worst fraction of the bound. */
static size_t check_grad(const shape *s, size_t base, const float *got, const float *want, const double *bound,
                         double *worst, size_t *first) {
    size_t bad = 0;
    for (int b = 0; b < s->B; b++)
        for (int t = 0; t < s->T; t++)
            for (int h = 0; h < s->H; h++)
                for (int d = 0; d < s->D; d++) {
                    const size_t i = at(s, base, b, t, h) + d;
                    const double e = fabs((double)got[i] - want[i]);
                    if (!(e <= bound[i])) {
                        if (!bad++) *first = i;
                    } else if (bound[i] > 0) {
                        *worst = fmax(*worst, e / bound[i]);
                    }
                }
    return bad;
}

/* The bounds of dq, dk, dv (in x's layout: bound[at(.., qo, ..)] is dq's)
 * of the header, from the inputs in float64: q, k, v in x, y and lse (the
 * forward's, the same for both kernels), dy. */
static double *backward_bounds(const shape *s, const float *x, const float *y, const float *lse, const float *dy) {
    const int B = s->B, T = s->T, H = s->H, D = s->D;
    const double u = ldexp(1.0, -8), scale = 1.0 / sqrt((double)D), ulp = ldexp(1.0, -23);
    const double sums = 4 * (T + 2) * ulp, expf_ulps = ldexp(1.0, -21);
    double *bound = xalloc(s->n * sizeof(double));
    double *P = xalloc((size_t)T * T * sizeof(double)), *dS = xalloc((size_t)T * T * sizeof(double));
    double *dSerr = xalloc((size_t)T * T * sizeof(double)), *Perr = xalloc((size_t)T * T * sizeof(double));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            for (int t = 0; t < T; t++) {
                const float *q = x + at(s, s->qo, b, t, h), *dyt = dy + ((size_t)b * T + t) * H * D + (size_t)h * D;
                const float *yt = y + ((size_t)b * T + t) * H * D + (size_t)h * D;
                double Dt = 0.0, magD = 0.0;
                for (int i = 0; i < D; i++) {
                    Dt += (double)dyt[i] * yt[i];
                    magD += fabs((double)dyt[i] * yt[i]);
                }
                for (int j = 0; j <= t; j++) {
                    const float *k = x + at(s, s->ko, b, j, h), *v = x + at(s, s->vo, b, j, h);
                    double dot = 0.0, mag = 0.0, dp = 0.0, magdp = 0.0;
                    for (int i = 0; i < D; i++) {
                        dot += (double)q[i] * k[i];
                        mag += fabs((double)q[i] * k[i]);
                        dp += (double)dyt[i] * v[i];
                        magdp += fabs((double)dyt[i] * v[i]);
                    }
                    const double p = exp(dot * scale - lse[((size_t)b * T + t) * H + h]);
                    const double es = D * ulp * scale * mag; /* one kernel's score error */
                    const size_t tj = (size_t)t * T + j;
                    P[tj] = p;
                    Perr[tj] = 2 * es + expf_ulps; /* P's relative difference between the kernels */
                    dS[tj] = p * (dp - Dt) * scale;
                    dSerr[tj] = scale * p * ((u + 2 * D * ulp) * magdp + 2 * D * ulp * magD + Perr[tj] * fabs(dp - Dt));
                }
            }
            for (int t = 0; t < T; t++)
                for (int d = 0; d < D; d++) {
                    double a = 0.0; /* dq */
                    for (int j = 0; j <= t; j++) {
                        const size_t tj = (size_t)t * T + j;
                        a += (dSerr[tj] + (u + sums) * fabs(dS[tj])) * fabs((double)x[at(s, s->ko, b, j, h) + d]);
                    }
                    bound[at(s, s->qo, b, t, h) + d] = a * (1 + u);
                }
            for (int j = 0; j < T; j++)
                for (int d = 0; d < D; d++) {
                    double ak = 0.0, av = 0.0; /* dk, dv */
                    for (int t = j; t < T; t++) {
                        const size_t tj = (size_t)t * T + j;
                        const double dyd = dy[((size_t)b * T + t) * H * D + (size_t)h * D + d];
                        ak += (dSerr[tj] + (u + sums) * fabs(dS[tj])) * fabs((double)x[at(s, s->qo, b, t, h) + d]);
                        av += P[tj] * fabs(dyd) * (2 * u + Perr[tj] + sums);
                    }
                    bound[at(s, s->ko, b, j, h) + d] = ak * (1 + u);
                    bound[at(s, s->vo, b, j, h) + d] = av * (1 + u);
                }
        }
    free(P), free(dS), free(dSerr), free(Perr);
    return bound;
}

/* The backward of both kernels from the same y (bf16), lse and bf16 q, k,
 * v (the scalar one gives what its fp32 twin gives them widened); and the
 * same bits with 1 and 2 blocks when grids is set. */
static void backward_case(const shape *s, const float *x, tlm_dptr X16, tlm_dptr Y16, tlm_dptr LSE16, const char *label,
                          bool grids) {
    const int B = s->B, T = s->T, H = s->H, D = s->D;
    size_t ny = (size_t)B * T * H * D, nlse = (size_t)B * T * H;
    float *dy = xalloc(ny * 4), *y = xalloc(ny * 4), *lse = xalloc(nlse * 4);
    uint16_t *y16 = xalloc(ny * 2);
    tlm_rng_fill_uniform(&g_rng, dy, ny, -1.0f, 1.0f);
    get(y16, Y16, ny * 2), get(lse, LSE16, nlse * 4);
    for (size_t i = 0; i < ny; i++) y[i] = tlm_bf16_to_f32(y16[i]);
    tlm_dptr DY = put(dy, ny * 4), REF = nans(s->n * 4), TC = nans(s->n * 4);
    tlm_dptr SCR = nans(tlm_gpu_attention_tc_scratch_bytes(B, T, H, D));
    tlm_err err = {{0}};
    if (!tlm_gpu_attention_backward_bf16(&g_gpu, REF + s->qo * 4, REF + s->ko * 4, REF + s->vo * 4, DY, Y16, LSE16,
                                         X16 + s->qo * 2, X16 + s->ko * 2, X16 + s->vo * 2, B, T, H, D, s->stride,
                                         &err))
        die("the scalar attention backward", &err);
    if (!tlm_gpu_attention_tc_backward(&g_gpu, TC + s->qo * 4, TC + s->ko * 4, TC + s->vo * 4, DY, Y16, LSE16,
                                       X16 + s->qo * 2, X16 + s->ko * 2, X16 + s->vo * 2, B, T, H, D, s->stride, SCR,
                                       &err))
        die("the tensor-core attention backward", &err);
    float *want = xalloc(s->n * 4), *got = xalloc(s->n * 4);
    get(want, REF, s->n * 4), get(got, TC, s->n * 4);
    double *bound = backward_bounds(s, x, y, lse, dy);
    static const char *const names[3] = {"dq", "dk", "dv"};
    const size_t bases[3] = {s->qo, s->ko, s->vo};
    for (int g = 0; g < 3; g++) {
        size_t first = 0, bad = check_grad(s, bases[g], got, want, bound, &g_worst_grad[g], &first);
        char what[300];
        snprintf(what, sizeof what, "%s backward: %s %zu of %zu outside the bound", label, names[g], bad, ny);
        if (bad)
            printf("     first bad %s [%zu]: tensor cores %.9g, scalar %.9g, bound %.3g\n", names[g], first,
                   (double)got[first], (double)want[first], bound[first]);
        check(bad == 0, what);
    }
    /* A sequence's first query sees only its own key: P is 1 and softmax
     * gives it no gradient, so its row of dq is exactly 0 in both kernels
     * (the tensor cores' D_t, from fp32 dy, less their dP, a bf16 product,
     * left a residue that AdamW turns into steps of q and k) */
    size_t nonzero[2] = {0, 0};
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < D; i++) {
                nonzero[0] += got[at(s, s->qo, b, 0, h) + (size_t)i] != 0.0f;
                nonzero[1] += want[at(s, s->qo, b, 0, h) + (size_t)i] != 0.0f;
            }
    char zero[300];
    snprintf(zero, sizeof zero,
             "%s backward: dq of every sequence's first token exactly 0 (tensor cores: %zu, scalar: %zu not)", label,
             nonzero[0], nonzero[1]);
    check(nonzero[0] == 0 && nonzero[1] == 0, zero);
    if (D == 64) { /* dq's 16-rows-a-warp kernel (rows16): the same bits */
        tlm_dptr R16 = nans(s->n * 4);
        g_gpu.attention_rows16 = true;
        bool ok = tlm_gpu_attention_tc_backward(&g_gpu, R16 + s->qo * 4, R16 + s->ko * 4, R16 + s->vo * 4, DY, Y16,
                                                LSE16, X16 + s->qo * 2, X16 + s->ko * 2, X16 + s->vo * 2, B, T, H, D,
                                                s->stride, SCR, &err);
        g_gpu.attention_rows16 = false;
        if (!ok) die("the tensor-core backward with 16 rows a warp", &err);
        float *got16 = xalloc(s->n * 4);
        get(got16, R16, s->n * 4);
        char what[300];
        snprintf(what, sizeof what, "%s backward with 16 rows a warp (rows16): the same bits", label);
        check(!memcmp(got16, got, s->n * 4), what);
        free(got16);
        tlm_device_free(g_dev, R16);
    }
    if (grids) {
        tlm_dptr q = X16 + s->qo * 2, k = X16 + s->ko * 2, v = X16 + s->vo * 2;
        int Bv = B, Tv = T, Hv = H, stride = s->stride;
        for (unsigned grid = 1; grid <= 2; grid++) {
            tlm_dptr G = nans(s->n * 4), dq = G + s->qo * 4, dk = G + s->ko * 4, dv = G + s->vo * 4;
            /* all three kernels on the small grid, the preparation's
             * output over the backward's own */
            tlm_dptr dy16 = SCR, dot = SCR + tlm_gpu_attention_tc_dot_offset(B, T, H, D);
            void *prep_args[] = {&dy16, &dot, &DY, &Y16, &Bv, &Tv, &Hv};
            void *dq_args[] = {&dq, &dy16, &dot, &LSE16, &q, &k, &v, &Bv, &Tv, &Hv, &stride};
            void *dkv_args[] = {&dk, &dv, &dy16, &dot, &LSE16, &q, &k, &v, &Bv, &Tv, &Hv, &stride};
            if (!tlm_gpu_attention_tc_launch(&g_gpu, TLM_ATTENTION_TC_BWD_PREP, D, grid, prep_args, &err) ||
                !tlm_gpu_attention_tc_launch(&g_gpu, TLM_ATTENTION_TC_BWD_DQ, D, grid, dq_args, &err) ||
                !tlm_gpu_attention_tc_launch(&g_gpu, TLM_ATTENTION_TC_BWD_DKV, D, grid, dkv_args, &err))
                die("the backward on a small grid", &err);
            float *gg = xalloc(s->n * 4);
            get(gg, G, s->n * 4);
            char what[256];
            snprintf(what, sizeof what, "%s backward with %u block(s): the same bits as its grid's", label, grid);
            check(!memcmp(gg, got, s->n * 4), what);
            free(gg);
            tlm_device_free(g_dev, G);
        }
        /* The dk, dv kernel at head size 128 on a block of 4 warps (the
         * other kernels' block) would leave its dK role out: it traps. On
         * the emulated device only: on a GPU a trap ends the context, and
         * the test after it (scripts/gpu_check.sh runs this one there). */
        if (D == 128 && tlm_device_get_info(g_dev)->emulated) {
            tlm_dptr G = nans(s->n * 4), dk = G + s->ko * 4, dv = G + s->vo * 4, dy16 = SCR;
            tlm_dptr dot = SCR + tlm_gpu_attention_tc_dot_offset(B, T, H, D);
            void *dkv_args[] = {&dk, &dv, &dy16, &dot, &LSE16, &q, &k, &v, &Bv, &Tv, &Hv, &stride};
            const char *kernel = tlm_gpu_attention_tc_kernel(TLM_ATTENTION_TC_BWD_DKV, D, false);
            tlm_err trap = {{0}};
            bool ran =
                tlm_gpu_launch_shared(&g_gpu, kernel, 1, 128, tlm_gpu_attention_tc_shared(TLM_ATTENTION_TC_BWD_DKV, D),
                                      dkv_args, &trap) &&
                tlm_device_sync(g_dev, &trap);
            char what[TLM_ERR_MSG_BYTES + 256];
            snprintf(what, sizeof what, "%s on a block of 128 threads traps: %s", kernel, ran ? "(it ran)" : trap.msg);
            check(!ran && strstr(trap.msg, "__trap") != NULL, what);
            /* and the dq kernel given 16 bytes less dynamic shared memory
             * than its two stages of K and V need */
            tlm_dptr dq = G + s->qo * 4;
            void *dq_args[] = {&dq, &dy16, &dot, &LSE16, &q, &k, &v, &Bv, &Tv, &Hv, &stride};
            kernel = tlm_gpu_attention_tc_kernel(TLM_ATTENTION_TC_BWD_DQ, D, false);
            unsigned bytes = tlm_gpu_attention_tc_shared(TLM_ATTENTION_TC_BWD_DQ, D);
            ran = tlm_gpu_launch_shared(&g_gpu, kernel, 1,
                                        tlm_gpu_attention_tc_block(TLM_ATTENTION_TC_BWD_DQ, D,
                                                                   tlm_device_get_info(g_dev)->cc_major, false),
                                        bytes - 16, dq_args, &trap) &&
                  tlm_device_sync(g_dev, &trap);
            snprintf(what, sizeof what, "%s with %u of its %u bytes of dynamic shared memory traps: %s", kernel,
                     bytes - 16, bytes, ran ? "(it ran)" : trap.msg);
            check(!ran && strstr(trap.msg, "__trap") != NULL && bytes == 69632, what);
            tlm_device_free(g_dev, G);
        }
        /* The forward and dq kernels at head size 64 are two layouts
         * each, not one: on the emulated sm_90 the default ones' warps
         * take 32 rows (a block of 2 warps) and the rows16 ones' 16 (4
         * warps); each traps on the other's block (the check that comes
         * first in both, so the arguments only need to be addresses). */
        if (D == 64 && tlm_device_get_info(g_dev)->emulated) {
            tlm_dptr G = nans(s->n * 4), dq = G + s->qo * 4, dy16 = SCR;
            tlm_dptr dot = SCR + tlm_gpu_attention_tc_dot_offset(B, T, H, D);
            void *dq_args[] = {&dq, &dy16, &dot, &LSE16, &q, &k, &v, &Bv, &Tv, &Hv, &stride};
            void *fwd_args[] = {&dy16, &dot, &q, &k, &v, &Bv, &Tv, &Hv, &stride};
            const int cc = tlm_device_get_info(g_dev)->cc_major;
            for (int i = 0; i < 4; i++) {
                const tlm_attention_tc_pass pass = i < 2 ? TLM_ATTENTION_TC_FWD : TLM_ATTENTION_TC_BWD_DQ;
                const bool rows16 = i % 2;
                const char *kernel = tlm_gpu_attention_tc_kernel(pass, D, rows16);
                unsigned block = tlm_gpu_attention_tc_block(pass, D, cc, rows16),
                         other = tlm_gpu_attention_tc_block(pass, D, cc, !rows16);
                tlm_err trap = {{0}};
                bool ran = tlm_gpu_launch_shared(&g_gpu, kernel, 1, other, tlm_gpu_attention_tc_shared(pass, D),
                                                 pass == TLM_ATTENTION_TC_FWD ? fwd_args : dq_args, &trap) &&
                           tlm_device_sync(g_dev, &trap);
                char what[TLM_ERR_MSG_BYTES + 256];
                snprintf(what, sizeof what, "%s (a block of %u) on a block of %u threads traps: %s", kernel, block,
                         other, ran ? "(it ran)" : trap.msg);
                check(!ran && strstr(trap.msg, "__trap") != NULL && block == (rows16 ? 128u : 64u), what);
            }
            tlm_device_free(g_dev, G);
        }
    }
    tlm_device_free(g_dev, DY), tlm_device_free(g_dev, REF), tlm_device_free(g_dev, TC), tlm_device_free(g_dev, SCR);
    free(dy), free(y), free(lse), free(y16), free(want), free(got), free(bound);
}

static void run_case(int B, int T, int H, int D, bool packed) {
    shape s = make_shape(B, T, H, D, packed);
    size_t ny = (size_t)B * T * H * D, nlse = (size_t)B * T * H;
    float *x = xalloc(s.n * sizeof(float));
    uint16_t *x16 = xalloc(s.n * sizeof(uint16_t));
    tlm_rng_fill_uniform(&g_rng, x, s.n, -2.0f, 2.0f);
    for (size_t i = s.vo; i < s.n; i++) x[i] *= 0.5f; /* v in [-1, 1] */
    for (size_t i = 0; i < s.n; i++) x[i] = tlm_bf16_to_f32(x16[i] = tlm_f32_to_bf16(x[i]));
    tlm_dptr X = put(x, s.n * sizeof(float)), X16 = put(x16, s.n * sizeof(uint16_t));
    tlm_dptr Y = nans(ny * 4), LSE = nans(nlse * 4), Y16 = nans(ny * 2), LSE16 = nans(nlse * 4);
    tlm_err err = {{0}};
    if (!tlm_gpu_attention_forward(&g_gpu, Y, LSE, X + s.qo * 4, X + s.ko * 4, X + s.vo * 4, B, T, H, D, s.stride,
                                   &err))
        die("the scalar attention forward", &err);
    if (!tlm_gpu_attention_tc_forward(&g_gpu, Y16, LSE16, X16 + s.qo * 2, X16 + s.ko * 2, X16 + s.vo * 2, B, T, H, D,
                                      s.stride, &err))
        die("the tensor-core attention forward", &err);
    float *yref = xalloc(ny * 4), *lseref = xalloc(nlse * 4), *lse16 = xalloc(nlse * 4);
    uint16_t *y16 = xalloc(ny * 2);
    get(yref, Y, ny * 4), get(lseref, LSE, nlse * 4), get(y16, Y16, ny * 2), get(lse16, LSE16, nlse * 4);
    char label[160];
    snprintf(label, sizeof label, "B=%d T=%d H=%d D=%d %s", B, T, H, D, packed ? "packed" : "separate");
    compare(&s, x, yref, lseref, y16, lse16, label);
    if (D == 64) { /* the forward's 16-rows-a-warp kernel (rows16): the same bits */
        tlm_dptr Yr = nans(ny * 2), Lr = nans(nlse * 4);
        g_gpu.attention_rows16 = true;
        bool ok = tlm_gpu_attention_tc_forward(&g_gpu, Yr, Lr, X16 + s.qo * 2, X16 + s.ko * 2, X16 + s.vo * 2, B, T, H,
                                               D, s.stride, &err);
        g_gpu.attention_rows16 = false;
        if (!ok) die("the tensor-core forward with 16 rows a warp", &err);
        uint16_t *yr = xalloc(ny * 2);
        float *lr = xalloc(nlse * 4);
        get(yr, Yr, ny * 2), get(lr, Lr, nlse * 4);
        char what[256];
        snprintf(what, sizeof what, "%s with 16 rows a warp (rows16): the same bits", label);
        check(!memcmp(yr, y16, ny * 2) && !memcmp(lr, lse16, nlse * 4), what);
        free(yr), free(lr);
        tlm_device_free(g_dev, Yr), tlm_device_free(g_dev, Lr);
    }

    /* The same bits with 1 and 2 blocks as with the launch's grid. */
    if (T == 37 && D == 64) {
        tlm_dptr q = X16 + s.qo * 2, k = X16 + s.ko * 2, v = X16 + s.vo * 2;
        for (unsigned grid = 1; grid <= 2; grid++) {
            tlm_dptr Yg = nans(ny * 2), Lg = nans(nlse * 4);
            void *args[] = {&Yg, &Lg, &q, &k, &v, &B, &T, &H, &s.stride};
            if (!tlm_gpu_attention_tc_launch(&g_gpu, TLM_ATTENTION_TC_FWD, D, grid, args, &err))
                die("the tensor-core forward on a small grid", &err);
            uint16_t *yg = xalloc(ny * 2);
            float *lg = xalloc(nlse * 4);
            get(yg, Yg, ny * 2), get(lg, Lg, nlse * 4);
            char what[256];
            snprintf(what, sizeof what, "%s with %u block(s): the same bits as its grid's", label, grid);
            check(!memcmp(yg, y16, ny * 2) && !memcmp(lg, lse16, nlse * 4), what);
            free(yg), free(lg);
            tlm_device_free(g_dev, Yg), tlm_device_free(g_dev, Lg);
        }
    }
    backward_case(&s, x, X16, Y16, LSE16, label, T == 37);
    tlm_dptr bufs[] = {X, X16, Y, LSE, Y16, LSE16};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) tlm_device_free(g_dev, bufs[i]);
    free(x), free(x16), free(yref), free(lseref), free(lse16), free(y16);
}

/* Saturated softmax: each query a power of two times one earlier key (its
 * score hundreds above the others'), so P is one-hot and dq, dk are 0 in
 * exact arithmetic. The scalar kernel sums D_t and dP in one loop: exactly
 * 0. The tensor cores' D_t and dP differ in their order of summation only
 * (both from dy rounded to bf16): within fp32 rounding, 1e-5 of the scale
 * below. With D_t from the fp32 dy they differed by dy's bf16 rounding, and
 * huge keys made that a large dq and dk (as on the CPU before 2c2b7e4). */
static void saturated_case(int D) {
    const int B = 1, T = 70, H = 2;
    shape s = make_shape(B, T, H, D, true);
    size_t ny = (size_t)B * T * H * D, nlse = (size_t)B * T * H;
    float *x = xalloc(s.n * sizeof(float)), *dy = xalloc(ny * 4);
    uint16_t *x16 = xalloc(s.n * sizeof(uint16_t));
    tlm_rng_fill_uniform(&g_rng, x, s.n, -1.0f, 1.0f);
    tlm_rng_fill_uniform(&g_rng, dy, ny, -1.0f, 1.0f);
    for (size_t i = 0; i < s.n; i++) x[i] = tlm_bf16_to_f32(tlm_f32_to_bf16(x[i]));
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++) { /* q_t = 256 k_m: exact in bf16 */
            int m = (int)(tlm_rng_uniform(&g_rng) * (t + 1));
            m = m > t ? t : m;
            for (int d = 0; d < D; d++) x[at(&s, s.qo, 0, t, h) + d] = 256.0f * x[at(&s, s.ko, 0, m, h) + d];
        }
    double kmax = 0;
    for (size_t i = 0; i < s.n; i++) {
        x16[i] = tlm_f32_to_bf16(x[i]);
        if (i >= s.ko && i < s.vo) kmax = fmax(kmax, fabs(x[i]));
    }
    tlm_dptr X16 = put(x16, s.n * 2), Y16 = nans(ny * 2), LSE16 = nans(nlse * 4), DY = put(dy, ny * 4);
    tlm_dptr REF = nans(s.n * 4), TC = nans(s.n * 4), SCR = nans(tlm_gpu_attention_tc_scratch_bytes(B, T, H, D));
    tlm_err err = {{0}};
    tlm_dptr q = X16 + s.qo * 2, k = X16 + s.ko * 2, v = X16 + s.vo * 2;
    if (!tlm_gpu_attention_tc_forward(&g_gpu, Y16, LSE16, q, k, v, B, T, H, D, s.stride, &err) ||
        !tlm_gpu_attention_backward_bf16(&g_gpu, REF + s.qo * 4, REF + s.ko * 4, REF + s.vo * 4, DY, Y16, LSE16, q, k,
                                         v, B, T, H, D, s.stride, &err) ||
        !tlm_gpu_attention_tc_backward(&g_gpu, TC + s.qo * 4, TC + s.ko * 4, TC + s.vo * 4, DY, Y16, LSE16, q, k, v, B,
                                       T, H, D, s.stride, SCR, &err))
        die("the saturated case", &err);
    float *want = xalloc(s.n * 4), *got = xalloc(s.n * 4);
    get(want, REF, s.n * 4), get(got, TC, s.n * 4);
    double worst[2] = {0, 0}; /* scalar, tensor cores: max |dq|, |dk| */
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++)
            for (int d = 0; d < D; d++) {
                size_t iq = at(&s, s.qo, 0, t, h) + d, ik = at(&s, s.ko, 0, t, h) + d;
                worst[0] = fmax(worst[0], fmax(fabs(want[iq]), fabs(want[ik])));
                worst[1] = fmax(worst[1], fmax(fabs(got[iq]), fabs(got[ik])));
            }
    /* |dy||v| per row at most D (both within 1), times the keys' and the
     * queries' size and the scale */
    const double scale = 1.0 / sqrt((double)D), unit = D * 256.0 * kmax * scale;
    char what[300];
    snprintf(what, sizeof what,
             "saturated softmax, head size %d: dq, dk exactly 0 from the scalar kernel (max %.3g), within 1e-5 of %.3g "
             "from the tensor cores (max %.3g)",
             D, worst[0], unit, worst[1]);
    check(worst[0] == 0 && worst[1] <= 1e-5 * unit, what);
    tlm_dptr bufs[] = {X16, Y16, LSE16, DY, REF, TC, SCR};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) tlm_device_free(g_dev, bufs[i]);
    free(x), free(dy), free(x16), free(want), free(got);
}

/* The kernels declared in source (tlm_gpu_next_kernel): each in module
 * `id` by tlm_gpu_kernel_module's rule. The count back. */
static int kernels_of_module(tlm_gpu_module_id id) {
    int n = 0;
    size_t len;
    for (const char *p = tlm_gpu_next_kernel(tlm_gpu_modules[id].source, &len); p;
         p = tlm_gpu_next_kernel(p + len, &len)) {
        char name[128], line[300];
        snprintf(name, sizeof name, "%.*s", (int)len, p);
        snprintf(line, sizeof line, "kernel %s of the %s module is found in it (tlm_gpu_kernel_module)", name,
                 tlm_gpu_modules[id].name);
        if (tlm_gpu_kernel_module(name) != id) check(false, line);
        n++;
    }
    return n;
}

/* Where the kernels are: the rule against the sources, and a launch of a
 * module that is not loaded. */
static void module_checks(void) {
    int counts[TLM_GPU_MODULE_COUNT];
    for (int id = 0; id < TLM_GPU_MODULE_COUNT; id++) counts[id] = kernels_of_module((tlm_gpu_module_id)id);
    char line[TLM_ERR_MSG_BYTES + 256];
    snprintf(line, sizeof line, "each module's kernels follow the rule: %d in the runtime's, %d in the tensor cores'",
             counts[TLM_GPU_MODULE_RUNTIME], counts[TLM_GPU_MODULE_ATTENTION_TC]);
    check(g_failures == 0 && counts[TLM_GPU_MODULE_RUNTIME] > 0, line);
    check(counts[TLM_GPU_MODULE_ATTENTION_TC] == 2 * TLM_ATTENTION_TC_PASSES + 2,
          "the tensor-core module declares 10 kernels (4 passes, 2 head sizes; the forward and dq at 64 with 16 rows "
          "a warp)");
    for (int pass = TLM_ATTENTION_TC_FWD; pass < TLM_ATTENTION_TC_PASSES; pass++)
        for (int i = 0; i < 3; i++) {
            const int D = i < 2 ? 64 : 128;
            const char *name = tlm_gpu_attention_tc_kernel((tlm_attention_tc_pass)pass, D, i == 1);
            char call[160];
            snprintf(call, sizeof call, "void %s(", name);
            snprintf(line, sizeof line, "%s: in the tensor-core source only, and its module by the rule", name);
            check(strstr(tlm_gpu_attention_tc_source, call) && !strstr(tlm_gpu_kernel_source, call) &&
                      tlm_gpu_kernel_module(name) == TLM_GPU_MODULE_ATTENTION_TC,
                  line);
        }

    check(g_gpu.modules[TLM_GPU_MODULE_RUNTIME] && !g_gpu.modules[TLM_GPU_MODULE_ATTENTION_TC],
          "tlm_gpu_open loads the runtime's module and not the tensor cores'");
    tlm_dptr buf = nans(1 << 16);
    tlm_err err = {{0}};
    bool ok = tlm_gpu_attention_tc_forward(&g_gpu, buf, buf, buf, buf, buf, 1, 3, 1, 64, 64, &err);
    snprintf(line, sizeof line, "a launch before the module is loaded is refused: %s", ok ? "(it ran)" : err.msg);
    check(!ok && strstr(err.msg, "tensor-core attention kernels, which are not loaded") && !strchr(err.msg, '\n'),
          line);
    tlm_device_free(g_dev, buf);
}

/* A case the kernel does not take: refused with one line naming why. */
static void refused(int D, int stride, tlm_dptr q, const char *want, const char *what) {
    tlm_dptr buf = nans(1 << 16);
    tlm_err err = {{0}};
    bool ok = tlm_gpu_attention_tc_forward(&g_gpu, buf, buf, q ? q : buf, buf, buf, 1, 3, 1, D, stride, &err);
    char line[TLM_ERR_MSG_BYTES + 256];
    snprintf(line, sizeof line, "%s is refused: %s", what, ok ? "(it ran)" : err.msg);
    check(!ok && strstr(err.msg, want) && !strchr(err.msg, '\n'), line);
    tlm_device_free(g_dev, buf);
}

int main(void) {
    tlm_rng_seed(&g_rng, 7);
    tlm_err err = {{0}};
    g_dev = tlm_device_open("cuda", &err);
    if (!g_dev) die("open the device (is TLM_TEST_DEVICE=emulated set?)", &err);
    if (!tlm_gpu_open(&g_gpu, g_dev, &err)) die("load the runtime's kernels", &err);
    module_checks();
    if (!tlm_gpu_load_module(&g_gpu, TLM_GPU_MODULE_ATTENTION_TC, &err)) die("load the tensor-core kernels", &err);
    static const int Ts[] = {1, 5, 37, 64, 65, 130};
    int n = 0;
    for (int di = 0; di < 2; di++)
        for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
            int D = di ? 128 : 64, T = Ts[ti];
            if (D == 128 && (T == 64 || T == 65)) continue; /* the block edges once is enough */
            if (T == 130) run_case(1, T, 2, D, n++ % 2 == 0);
            else run_case(2, T, 3, D, n++ % 2 == 0);
        }
    saturated_case(64);
    saturated_case(128);
    printf("gpu.attention_tc: worst y error %.3g of its bound (%.3g of A_td = sum P |v|; u = %.3g), worst lse "
           "error %.3g of its bound\n",
           g_worst_y, g_worst_y_over_a, ldexp(1.0, -8), g_worst_lse);
    printf("gpu.attention_tc: backward, worst error as a fraction of its bound: dq %.3g, dk %.3g, dv %.3g\n",
           g_worst_grad[0], g_worst_grad[1], g_worst_grad[2]);

    tlm_dptr big = nans(1 << 16);
    refused(32, 96, 0, "head size 32", "head size 32");
    refused(64, 68, 0, "stride of 68", "a stride of 68 elements");
    refused(64, 64, big + 2, "16-byte aligned", "a q 2 bytes past an alignment");
    tlm_device_free(g_dev, big);

    tlm_gpu_close(&g_gpu);
    tlm_device_close(g_dev);
    if (g_failures) {
        printf("gpu.attention_tc: %d check(s) failed\n", g_failures);
        return 1;
    }
    printf("gpu.attention_tc: all checks passed\n");
    return 0;
}
