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

/* rows R of length D; the weight of element i of row r is
 * w[(r % H) * D + i] (H = 1 for the plain norm). */
static void rms_forward(float *out, float *rstd, const float *x, const float *w, int R, int H, int D, float eps) {
#pragma omp parallel for schedule(static) if ((size_t)R * D >= TLM_PAR_MIN_NORM)
    for (int r = 0; r < R; r++) {
        const float *xr = x + (size_t)r * D;
        float *yr = out + (size_t)r * D;
        /* sum in double: exact enough that rstd matches a float64 reference
         * to float precision for any D */
        double ss = 0.0;
        for (int i = 0; i < D; i++) ss += (double)xr[i] * xr[i];
        float rs = (float)(1.0 / sqrt(ss / D + eps));
        rstd[r] = rs;
        const float *wr = w ? w + (size_t)(r % H) * D : NULL;
        for (int i = 0; i < D; i++) {
            float v = xr[i] * rs;
            yr[i] = wr ? v * wr[i] : v;
        }
    }
}

static void rms_backward(float *dx, float *dw, const float *dout, const float *x, const float *w, const float *rstd,
                         int R, int H, int D, bool accumulate) {
    /* dx: rows are independent */
#pragma omp parallel for schedule(static) if ((size_t)R * D >= TLM_PAR_MIN_NORM)
    for (int r = 0; r < R; r++) {
        const float *xr = x + (size_t)r * D;
        const float *gr = dout + (size_t)r * D;
        const float *wr = w ? w + (size_t)(r % H) * D : NULL;
        float *dxr = dx + (size_t)r * D;
        float rs = rstd[r];
        double dot = 0.0; /* sum_j (dy_j w_j) x_j */
        for (int i = 0; i < D; i++) {
            float g = wr ? gr[i] * wr[i] : gr[i];
            dot += (double)g * xr[i];
        }
        float k = (float)(dot / D) * rs * rs * rs;
        for (int i = 0; i < D; i++) {
            float g = wr ? gr[i] * wr[i] : gr[i];
            float v = rs * g - k * xr[i];
            dxr[i] = accumulate ? dxr[i] + v : v;
        }
    }
    if (!dw || !w) return;
    /* dw: a reduction over rows. Each task owns a block of up to 16
     * consecutive weight entries of one head and walks the rows in order, so
     * the sum does not depend on the thread count (a split over rows would
     * race or need a reduction) and each row access stays within a cache
     * line or two. */
    enum { BLK = 16 };
    int nblk = (D + BLK - 1) / BLK;
#pragma omp parallel for schedule(static) if ((size_t)R * D >= TLM_PAR_MIN_NORM)
    for (int b = 0; b < H * nblk; b++) {
        int h = b / nblk, i0 = (b % nblk) * BLK;
        int n = D - i0 < BLK ? D - i0 : BLK;
        double acc[BLK] = {0};
        for (int r = h; r < R; r += H) {
            const float *gr = dout + (size_t)r * D + i0;
            const float *xr = x + (size_t)r * D + i0;
            double rs = rstd[r];
            for (int i = 0; i < n; i++) acc[i] += (double)gr[i] * xr[i] * rs;
        }
        for (int i = 0; i < n; i++) dw[(size_t)h * D + i0 + i] += (float)acc[i];
    }
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
