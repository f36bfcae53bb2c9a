/* Plain float64 reference of the MLP kernels' contract (codegen.h): the
 * obviously-correct loops the generated code is judged against. Arrays are
 * row-major doubles with the kernels' layouts; rows [0, rows) throughout. */
#ifndef TLM_MLP_REFERENCE_H
#define TLM_MLP_REFERENCE_H

#include "codegen.h"

double ref_activation(tlm_mlp kind, double gate, double up);
/* Partial derivatives of the activation w.r.t. gate and up. */
void ref_activation_grad(tlm_mlp kind, double gate, double up, double *d_gate, double *d_up);

/* pre_gate = x Wg^T, pre_up = x Wu^T, out += h Wd^T. pre_gate may be NULL
 * for GELU. */
void ref_fwd(tlm_mlp kind, int D, int W, int rows, const double *x, const double *w_gate, const double *w_up,
             const double *w_down, double *pre_gate, double *pre_up, double *out);

/* d_pre_gate, d_pre_up and dx are written. */
void ref_bwd_data(tlm_mlp kind, int D, int W, int rows, const double *w_gate, const double *w_up, const double *w_down,
                  const double *pre_gate, const double *pre_up, const double *dout, double *d_pre_gate,
                  double *d_pre_up, double *dx);

/* dw_gate, dw_up, dw_down are accumulated into (all width indices). */
void ref_bwd_weight(tlm_mlp kind, int D, int W, int rows, const double *x, const double *pre_gate, const double *pre_up,
                    const double *dout, const double *d_pre_gate, const double *d_pre_up, double *dw_gate,
                    double *dw_up, double *dw_down);

#endif
