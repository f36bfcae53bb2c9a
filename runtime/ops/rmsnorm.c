/* RMSNorm, the model norm (rows of C) and the per-head variant (rows of D
 * inside [N,H,D]) share one implementation.
 *
 *   y = x * r * w,   r = (mean(x^2) + eps)^(-1/2)
 *
 * Backward, for one row with g = dy * w:
 *   dx_i = r g_i - r^3 x_i (sum_j g_j x_j) / D
 *   dw_i += sum over rows of dy_i x_i r
 */
#include "tlm_rt/ops.h"

#include <math.h>
#include <string.h>

#include "vec8.h"

typedef double v4d __attribute__((vector_size(32)));

/* *v = the n <= 8 floats at p, zeros after them. (Vectors go by pointer
 * and macro: a function taking or returning one by value changes its ABI
 * with AVX, which gcc flags, in the baseline clone.) */
V8_ALWAYS_INLINE void load_upto8(v8f *v, const float *p, int n) {
    if (n == 8) {
        V8_LOAD(*v, p);
        return;
    }
    memset(v, 0, sizeof *v);
    memcpy(v, p, sizeof(float) * (size_t)n);
}

/* the low and high four lanes of a v8f, in double */
#define LO_F64(v) __builtin_convertvector(__builtin_shufflevector((v), (v), 0, 1, 2, 3), v4d)
#define HI_F64(v) __builtin_convertvector(__builtin_shufflevector((v), (v), 4, 5, 6, 7), v4d)

/* sum_i g_i x_i in double, g_i = a_i w_i (float) or a_i when w is NULL.
 * Double, so that rstd matches a float64 reference to float precision for
 * any D. Element i goes to partial sum p_(i mod 8), and the total is
 * ((p0 + p4) + (p1 + p5)) + ((p2 + p6) + (p3 + p7)): a fixed order (the
 * row's own, whatever the thread or CPU: both clones do the same double
 * operations, none fused) that a vector unit can run, where a single
 * running sum could not be vectorised. */
V8_ALWAYS_INLINE double row_dot(const float *a, const float *w, const float *x, int D) {
    v4d s0 = {0}, s1 = {0};
    for (int i = 0; i < D; i += 8) {
        const int n = D - i < 8 ? D - i : 8;
        v8f g, xv;
        load_upto8(&g, a + i, n), load_upto8(&xv, x + i, n);
        if (w) {
            v8f wv;
            load_upto8(&wv, w + i, n);
            g *= wv;
        }
        s0 += LO_F64(g) * LO_F64(xv);
        s1 += HI_F64(g) * HI_F64(xv);
    }
    const v4d s = s0 + s1;
    return (s[0] + s[1]) + (s[2] + s[3]);
}

/* y = x r w (w NULL: x r), D floats */
V8_KERNEL(forward_row, (float *y, const float *x, const float *w, int D, float eps, float *rstd),
          (y, x, w, D, eps, rstd)) {
    const double ss = row_dot(x, NULL, x, D);
    const float rs = (float)(1.0 / sqrt(ss / D + eps));
    *rstd = rs;
    const v8f r = V8_SPLAT(rs);
    int i = 0;
    for (; i + 8 <= D; i += 8) {
        v8f v;
        V8_LOAD(v, x + i);
        v *= r;
        if (w) {
            v8f wv;
            V8_LOAD(wv, w + i);
            v *= wv;
        }
        V8_STORE(y + i, v);
    }
    for (; i < D; i++) {
        const float v = x[i] * rs;
        y[i] = w ? v * w[i] : v;
    }
}

/* dx (= or +=) r g - r^3 x (g . x) / D, g = dy w (w NULL: dy) */
V8_ALWAYS_INLINE void backward_row(float *dx, const float *dy, const float *x, const float *w, float rs, int D,
                                   bool accumulate) {
    const double dot = row_dot(dy, w, x, D);
    const float k = (float)(dot / D) * rs * rs * rs;
    const v8f r = V8_SPLAT(rs), kv = V8_SPLAT(k);
    int i = 0;
    for (; i + 8 <= D; i += 8) {
        v8f g, xv, v;
        V8_LOAD(g, dy + i), V8_LOAD(xv, x + i);
        if (w) {
            v8f wv;
            V8_LOAD(wv, w + i);
            g *= wv;
        }
        v = r * g - kv * xv;
        if (accumulate) {
            v8f d;
            V8_LOAD(d, dx + i);
            v = d + v;
        }
        V8_STORE(dx + i, v);
    }
    for (; i < D; i++) {
        const float g = w ? dy[i] * w[i] : dy[i];
        const float v = rs * g - k * x[i];
        dx[i] = accumulate ? dx[i] + v : v;
    }
}

/* dw's entries go in blocks of 64 consecutive entries of one head, each
 * summed in double over its rows in row order: four cache lines of a row
 * (with 16, one line a row, rows 1 KiB apart, the backward ran 1.2 times as
 * long at tiny's sizes, one thread, the same sums). A sweep over the rows
 * holds the sums of up to DW_GROUP blocks (16 KiB); more take more sweeps. */
enum { DW_BLOCK = 64, DW_GROUP = 32 };

/* acc += (dy_i x_i) r for the n <= DW_BLOCK entries of one row at g and
 * x, four entries a vector, as a scalar loop would (the accumulators live
 * in L1, not registers: 16 vectors of doubles a block). */
V8_ALWAYS_INLINE void dw_row(double acc[DW_BLOCK], const float *g, const float *x, double rs, int n) {
    const v4d rv = {rs, rs, rs, rs};
    for (int q = 0; q < n; q += 8) {
        const int m = n - q < 8 ? n - q : 8;
        v8f gv, xv;
        v4d lo, hi;
        load_upto8(&gv, g + q, m), load_upto8(&xv, x + q, m);
        memcpy(&lo, acc + q, sizeof lo), memcpy(&hi, acc + q + 4, sizeof hi);
        lo += LO_F64(gv) * LO_F64(xv) * rv;
        hi += HI_F64(gv) * HI_F64(xv) * rv;
        memcpy(acc + q, &lo, sizeof lo), memcpy(acc + q + 4, &hi, sizeof hi);
    }
}

/* One part of the backward: dx for rows [r0, r1), and dw's blocks [b0, b1)
 * (block b: head b / nblk, entries from (b % nblk) * DW_BLOCK) over all R
 * rows, in one sweep: the rows of dy and x that dx reads are still in L1
 * when their dw terms are added, where a second pass for dw read both
 * arrays again from memory. The rows of head h are h, h + H, ...; each dw
 * entry sums them in row order, so its bits depend neither on the parts
 * nor on the thread count. */
V8_KERNEL(backward_part,
          (float *dx, float *dw, const float *dy, const float *x, const float *w, const float *rstd, int R, int H,
           int D, bool accumulate, int r0, int r1, int b0, int b1),
          (dx, dw, dy, x, w, rstd, R, H, D, accumulate, r0, r1, b0, b1)) {
    const int nblk = (D + DW_BLOCK - 1) / DW_BLOCK;
    double acc[DW_GROUP][DW_BLOCK];
    int g0 = b0;
    do { /* once with no blocks: dx alone */
        const int g1 = b1 - g0 < DW_GROUP ? b1 : g0 + DW_GROUP;
        memset(acc, 0, sizeof acc[0] * (size_t)(g1 - g0));
        const bool dx_now = g0 == b0;
        const int from = g1 > g0 ? 0 : r0, to = g1 > g0 ? R : r1;
        for (int r = from; r < to; r++) {
            const float *dyr = dy + (size_t)r * D, *xr = x + (size_t)r * D;
            const int h = r % H;
            if (dx_now && r >= r0 && r < r1)
                backward_row(dx + (size_t)r * D, dyr, xr, w ? w + (size_t)h * D : NULL, rstd[r], D, accumulate);
            /* head h's blocks are [h nblk, (h + 1) nblk) */
            const int bh0 = h * nblk > g0 ? h * nblk : g0, bh1 = (h + 1) * nblk < g1 ? (h + 1) * nblk : g1;
            for (int b = bh0; b < bh1; b++) {
                const int i0 = (b - h * nblk) * DW_BLOCK;
                dw_row(acc[b - g0], dyr + i0, xr + i0, rstd[r], D - i0 < DW_BLOCK ? D - i0 : DW_BLOCK);
            }
        }
        for (int b = g0; b < g1; b++) {
            const int i0 = (b % nblk) * DW_BLOCK, n = D - i0 < DW_BLOCK ? D - i0 : DW_BLOCK;
            for (int i = 0; i < n; i++) dw[(size_t)(b / nblk) * D + i0 + i] += (float)acc[b - g0][i];
        }
        g0 = g1;
    } while (g0 < b1);
}

/* rows R of length D; the weight of element i of row r is
 * w[(r % H) * D + i] (H = 1 for the plain norm). */
static void rms_forward(float *out, float *rstd, const float *x, const float *w, int R, int H, int D, float eps) {
    TLM_PARALLEL_FOR_IF((size_t)R * D >= TLM_PAR_MIN_NORM,
                        for (int r = 0; r < R; r++) forward_row(out + (size_t)r * D, x + (size_t)r * D,
                                                                w ? w + (size_t)(r % H) * D : NULL, D, eps, &rstd[r]););
}

/* One part a thread: part p takes the p-th share of the rows for dx and of
 * dw's blocks, and sweeps every row for its blocks (backward_part). */
static void rms_backward(float *dx, float *dw, const float *dout, const float *x, const float *w, const float *rstd,
                         int R, int H, int D, bool accumulate) {
    const int blocks = dw && w ? H * ((D + DW_BLOCK - 1) / DW_BLOCK) : 0;
    const int parts = (size_t)R * D >= TLM_PAR_MIN_NORM && tlm_threads_can_split() ? tlm_get_num_threads() : 1;
    if (parts == 1) { /* no parallel construct: TLM_PARALLEL_FOR_IF says why */
        backward_part(dx, dw, dout, x, w, rstd, R, H, D, accumulate, 0, R, 0, blocks);
        return;
    }
#pragma omp parallel for schedule(static) num_threads(parts)
    for (int p = 0; p < parts; p++)
        backward_part(dx, dw, dout, x, w, rstd, R, H, D, accumulate, (int)((int64_t)R * p / parts),
                      (int)((int64_t)R * (p + 1) / parts), (int)((int64_t)blocks * p / parts),
                      (int)((int64_t)blocks * (p + 1) / parts));
}

void tlm_rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int N, int C, float eps) {
    rms_forward(out, rstd, x, w, N, 1, C, eps);
}

void tlm_rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x, const float *w, const float *rstd,
                          int N, int C) {
    rms_backward(dx, dw, dout, x, w, rstd, N, 1, C, true);
}

void tlm_rmsnorm_heads_forward(float *out, float *rstd, const float *x, const float *w, int N, int H, int D,
                               float eps) {
    rms_forward(out, rstd, x, w, N * H, H, D, eps);
}

void tlm_rmsnorm_heads_backward(float *dx, float *dw, const float *dout, const float *x, const float *w,
                                const float *rstd, int N, int H, int D) {
    rms_backward(dx, dw, dout, x, w, rstd, N * H, H, D, false);
}
