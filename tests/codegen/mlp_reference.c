#include "mlp_reference.h"

#include <math.h>
#include <stdlib.h>

#define GELU_K0 0.7978845608028654 /* sqrt(2/pi) */
#define GELU_K1 0.044715

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

double ref_activation(tlm_mlp kind, double gate, double up) {
    if (kind == TLM_MLP_SWIGLU) return gate * sigmoid(gate) * up;
    return 0.5 * up * (1.0 + tanh(GELU_K0 * (up + GELU_K1 * up * up * up)));
}

void ref_activation_grad(tlm_mlp kind, double gate, double up, double *d_gate, double *d_up) {
    if (kind == TLM_MLP_SWIGLU) {
        double s = sigmoid(gate);
        *d_gate = up * (s + gate * s * (1.0 - s));
        *d_up = gate * s;
        return;
    }
    double t = tanh(GELU_K0 * (up + GELU_K1 * up * up * up));
    *d_gate = 0.0;
    *d_up = 0.5 * (1.0 + t) + 0.5 * up * (1.0 - t * t) * GELU_K0 * (1.0 + 3.0 * GELU_K1 * up * up);
}

void ref_fwd(tlm_mlp kind, int D, int W, int rows, const double *x, const double *w_gate, const double *w_up,
             const double *w_down, double *pre_gate, double *pre_up, double *out) {
    double *h = malloc(sizeof(double) * (size_t)W);
    for (int r = 0; r < rows; r++) {
        const double *xr = x + (size_t)r * D;
        for (int j = 0; j < W; j++) {
            double g = 0, u = 0;
            for (int k = 0; k < D; k++) {
                if (kind == TLM_MLP_SWIGLU) g += xr[k] * w_gate[(size_t)j * D + k];
                u += xr[k] * w_up[(size_t)j * D + k];
            }
            if (pre_gate) pre_gate[(size_t)r * W + j] = g;
            pre_up[(size_t)r * W + j] = u;
            h[j] = ref_activation(kind, g, u);
        }
        for (int i = 0; i < D; i++) {
            double s = 0;
            for (int j = 0; j < W; j++) s += h[j] * w_down[(size_t)i * W + j];
            out[(size_t)r * D + i] += s;
        }
    }
    free(h);
}

void ref_bwd_data(tlm_mlp kind, int D, int W, int rows, const double *w_gate, const double *w_up, const double *w_down,
                  const double *pre_gate, const double *pre_up, const double *dout, double *d_pre_gate,
                  double *d_pre_up, double *dx) {
    for (int r = 0; r < rows; r++) {
        for (int j = 0; j < W; j++) {
            double dh = 0;
            for (int i = 0; i < D; i++) dh += dout[(size_t)r * D + i] * w_down[(size_t)i * W + j];
            size_t rj = (size_t)r * W + j;
            double dg, du;
            ref_activation_grad(kind, pre_gate ? pre_gate[rj] : 0.0, pre_up[rj], &dg, &du);
            if (d_pre_gate) d_pre_gate[rj] = dh * dg;
            d_pre_up[rj] = dh * du;
        }
        for (int k = 0; k < D; k++) {
            double s = 0;
            for (int j = 0; j < W; j++) {
                size_t rj = (size_t)r * W + j;
                if (kind == TLM_MLP_SWIGLU) s += d_pre_gate[rj] * w_gate[(size_t)j * D + k];
                s += d_pre_up[rj] * w_up[(size_t)j * D + k];
            }
            dx[(size_t)r * D + k] = s;
        }
    }
}

void ref_bwd_weight(tlm_mlp kind, int D, int W, int rows, const double *x, const double *pre_gate, const double *pre_up,
                    const double *dout, const double *d_pre_gate, const double *d_pre_up, double *dw_gate,
                    double *dw_up, double *dw_down) {
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < W; j++) {
            size_t rj = (size_t)r * W + j;
            double h = ref_activation(kind, pre_gate ? pre_gate[rj] : 0.0, pre_up[rj]);
            for (int k = 0; k < D; k++) {
                double xk = x[(size_t)r * D + k];
                if (kind == TLM_MLP_SWIGLU) dw_gate[(size_t)j * D + k] += d_pre_gate[rj] * xk;
                dw_up[(size_t)j * D + k] += d_pre_up[rj] * xk;
                dw_down[(size_t)k * W + j] += dout[(size_t)r * D + k] * h;
            }
        }
}
