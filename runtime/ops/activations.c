/* Elementwise activations. Each loop is split over threads in fixed static
 * chunks (only for large n, where it pays), so results never depend on the
 * thread count. */
#include "tlm_rt/ops.h"

#include <math.h>

#include "vec_inline.h"

/* below TLM_PAR_MIN_ELEMENTS (ops.h) a parallel region costs more than it saves */
#define PAR_MIN TLM_PAR_MIN_ELEMENTS

/* ---- silu: x sigmoid(x);  silu'(x) = s (1 + x (1 - s)) ---------------- */

void tlm_silu_forward(float *out, const float *x, size_t n) {
    TLM_PARALLEL_FOR_IF(n >= PAR_MIN, for (size_t i = 0; i < n; i++) out[i] = x[i] * sigmoidf(x[i]););
}

void tlm_silu_backward(float *dx, const float *dout, const float *x, size_t n) {
    TLM_PARALLEL_FOR_IF(
        n >= PAR_MIN, for (size_t i = 0; i < n; i++) {
            float s = sigmoidf(x[i]);
            dx[i] = dout[i] * s * (1.0f + x[i] * (1.0f - s));
        });
}

/* ---- sigmoid: the backward uses the saved output s --------------------- */

void tlm_sigmoid_forward(float *out, const float *x, size_t n) {
    TLM_PARALLEL_FOR_IF(n >= PAR_MIN, for (size_t i = 0; i < n; i++) out[i] = sigmoidf(x[i]););
}

void tlm_sigmoid_backward(float *dx, const float *dout, const float *s, size_t n) {
    TLM_PARALLEL_FOR_IF(n >= PAR_MIN, for (size_t i = 0; i < n; i++) dx[i] = dout[i] * s[i] * (1.0f - s[i]););
}

/* ---- sigmoid gate: out[r,d] = y[r,d] sigmoid(g[r]) ----------------------
 * dy[r,d] = dout[r,d] s_r;   dg[r] = s_r (1 - s_r) sum_d dout[r,d] y[r,d] */

void tlm_sigmoid_gate_forward(float *out, const float *y, const float *g, int R, int D) {
    TLM_PARALLEL_FOR_IF((size_t)R * D >= PAR_MIN, for (int r = 0; r < R; r++) {
        float s = sigmoidf(g[r]);
        for (int d = 0; d < D; d++) {
            size_t i = (size_t)r * D + d;
            out[i] = y[i] * s;
        }
    });
}

void tlm_sigmoid_gate_backward(float *dy, float *dg, const float *dout, const float *y, const float *g, int R, int D) {
    TLM_PARALLEL_FOR_IF((size_t)R * D >= PAR_MIN, for (int r = 0; r < R; r++) {
        float s = sigmoidf(g[r]);
        float acc = 0.0f;
        for (int d = 0; d < D; d++) {
            size_t i = (size_t)r * D + d;
            acc += dout[i] * y[i];
            if (dy) dy[i] = dout[i] * s;
        }
        if (dg) dg[r] = acc * s * (1.0f - s);
    });
}

/* ---- swiglu: h = silu(g) u ----------------------------------------------
 * dg = dh u silu'(g), du = dh silu(g). dh[i] is read into a local before
 * dg[i] and du[i] are stored, which is what makes aliasing dh safe. */

void tlm_swiglu_forward(float *h, const float *g, const float *u, size_t n) {
    TLM_PARALLEL_FOR_IF(n >= PAR_MIN, for (size_t i = 0; i < n; i++) h[i] = g[i] * sigmoidf(g[i]) * u[i];);
}

void tlm_swiglu_backward(float *dg, float *du, const float *dh, const float *g, const float *u, size_t n) {
    TLM_PARALLEL_FOR_IF(
        n >= PAR_MIN, for (size_t i = 0; i < n; i++) {
            float d = dh[i], x = g[i], s = sigmoidf(x);
            float silu = x * s;
            float dsilu = s * (1.0f + x * (1.0f - s));
            dg[i] = d * u[i] * dsilu;
            du[i] = d * silu;
        });
}

/* ---- gelu, tanh approximation -------------------------------------------
 * gelu(x)  = 0.5 x (1 + tanh(z)),  z = c (x + a x^3)
 * gelu'(x) = 0.5 (1 + tanh z) + 0.5 x (1 - tanh^2 z) c (1 + 3 a x^2) */

#define GELU_C 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_A 0.044715f

void tlm_gelu_forward(float *out, const float *x, size_t n) {
    TLM_PARALLEL_FOR_IF(
        n >= PAR_MIN, for (size_t i = 0; i < n; i++) {
            float v = x[i];
            out[i] = 0.5f * v * (1.0f + tanhf(GELU_C * (v + GELU_A * v * v * v)));
        });
}

void tlm_gelu_backward(float *dx, const float *dout, const float *x, size_t n) {
    TLM_PARALLEL_FOR_IF(
        n >= PAR_MIN, for (size_t i = 0; i < n; i++) {
            float v = x[i];
            float th = tanhf(GELU_C * (v + GELU_A * v * v * v));
            float dz = GELU_C * (1.0f + 3.0f * GELU_A * v * v);
            float d = 0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * dz;
            dx[i] = dout[i] * d;
        });
}
