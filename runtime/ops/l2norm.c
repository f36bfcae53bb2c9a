/* L2 normalisation of rows (Titans normalises q and k per head):
 *
 *   y = x * r,   r = (sum(x^2) + eps)^(-1/2)
 *
 * eps sits inside the square root (as in the usual Titans / linear-attention
 * kernels), so the op is smooth at x = 0, unlike torch's
 * F.normalize = x / max(|x|, eps); for |x|^2 >> eps both agree.
 *
 * Backward: dx_i = r g_i - r^3 x_i (sum_j g_j x_j)
 */
#include "tlm_rt/ops.h"

#include <math.h>

void tlm_l2norm_forward(float *out, float *rnorm, const float *x, int R, int D, float eps) {
    TLM_PARALLEL_FOR_IF((size_t)R * D >= TLM_PAR_MIN_NORM, for (int r = 0; r < R; r++) {
        const float *xr = x + (size_t)r * D;
        float *yr = out + (size_t)r * D;
        double ss = 0.0;
        for (int i = 0; i < D; i++) ss += (double)xr[i] * xr[i];
        float rs = (float)(1.0 / sqrt(ss + eps));
        rnorm[r] = rs;
        for (int i = 0; i < D; i++) yr[i] = xr[i] * rs;
    });
}

void tlm_l2norm_backward(float *dx, const float *dout, const float *x, const float *rnorm, int R, int D) {
    TLM_PARALLEL_FOR_IF((size_t)R * D >= TLM_PAR_MIN_NORM, for (int r = 0; r < R; r++) {
        const float *xr = x + (size_t)r * D;
        const float *gr = dout + (size_t)r * D;
        float *dxr = dx + (size_t)r * D;
        float rs = rnorm[r];
        double dot = 0.0;
        for (int i = 0; i < D; i++) dot += (double)gr[i] * xr[i];
        float k = (float)dot * rs * rs * rs;
        for (int i = 0; i < D; i++) dxr[i] = rs * gr[i] - k * xr[i];
    });
}
