/* Reference MLPs: the plain C/BLAS twins of the generated per-width kernels
 * (contract in ops.h and codegen/codegen.h).
 *
 * SwiGLU, per row x [C]:
 *   g = x Wg^T, u = x Wu^T      [F]   saved as pre_gate, pre_up
 *   h = silu(g) * u             [F]   never stored
 *   out += h Wd^T               [C]   residual fused
 * GELU: u = x Wu^T; h = gelu(u); out += h Wd^T.
 *
 * The projections and dx are single GEMMs (for one row, sampling's decode,
 * matrix-vector products: matvec.c). The products with h are tiled:
 * a tile of h is formed on the stack from pre_gate/pre_up and fed
 * to a GEMM, tile after tile, so nothing is allocated and no [N,F] buffer
 * is needed for h. Tiles run in a fixed order: deterministic.
 */
#include "tlm_rt/ops.h"

#include <cblas.h>

/* h tiles of 128 x 128 (64 KiB of stack): measured with OpenBLAS, square
 * tiles keep both tiled GEMMs within ~1.3x of one dense GEMM, where thin
 * ones (32 wide) cost 2-3x. */
enum { FWD_R = 128, FWD_J = 128, BWD_R = 128, BWD_J = 128 };

#define ROW(p, r, width) ((p) + (size_t)(r) * (width))

/* tile[i, jj] = act(rows r0+i, columns j+jj) for i < nr, jj < nj; the
 * inputs are [N,F] row-major. gelu: g is unused. */
static void h_tile(float *tile, bool gelu, const float *g, const float *u, int F, int r0, int nr, int j, int nj) {
    for (int i = 0; i < nr; i++) {
        size_t at = (size_t)(r0 + i) * F + j;
        if (gelu) tlm_gelu_forward(tile + (size_t)i * nj, u + at, (size_t)nj);
        else tlm_swiglu_forward(tile + (size_t)i * nj, g + at, u + at, (size_t)nj);
    }
}

/* out[r0:r1] += h[r0:r1] Wd^T, h tiled */
static void down_forward(bool gelu, int C, int F, int r0, int r1, const float *g, const float *u, const float *w_down,
                         float *out) {
    float tile[FWD_R * FWD_J];
    /* One row (sampling with a KV cache): h in strips as wide as the whole
     * tile, so that Wd is read in one matrix-vector product, not one a
     * 128-column strip. */
    const int strip = r1 - r0 == 1 ? FWD_R * FWD_J : FWD_J;
    for (int r = r0; r < r1; r += FWD_R) {
        int nr = r1 - r < FWD_R ? r1 - r : FWD_R;
        for (int j = 0; j < F; j += strip) {
            int nj = F - j < strip ? F - j : strip;
            h_tile(tile, gelu, g, u, F, r, nr, j, nj);
            /* one row: a matrix-vector product, without packing Wd as a
             * GEMM would */
            if (nr == 1) {
                tlm_matvec(ROW(out, r, C), w_down + j, tile, C, nj, F, true);
                continue;
            }
            /* out[r:r+nr, :] += tile [nr,nj] . Wd[:, j:j+nj]^T */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, C, nj, 1.0f, tile, nj, w_down + j, F, 1.0f,
                        ROW(out, r, C), C);
        }
    }
}

/* dWd[:, j0:j1] += dout[0:rows]^T h[0:rows, j0:j1], h tiled */
static void down_backward_weight(bool gelu, int C, int F, int rows, int j0, int j1, const float *g, const float *u,
                                 const float *dout, float *dw_down) {
    float tile[BWD_R * BWD_J];
    for (int j = j0; j < j1; j += BWD_J) {
        int nj = j1 - j < BWD_J ? j1 - j : BWD_J;
        for (int r = 0; r < rows; r += BWD_R) {
            int nr = rows - r < BWD_R ? rows - r : BWD_R;
            h_tile(tile, gelu, g, u, F, r, nr, j, nj);
            /* dWd[:, j:j+nj] += dout[r:r+nr, :]^T . tile [nr,nj] */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, C, nj, nr, 1.0f, ROW(dout, r, C), C, tile, nj, 1.0f,
                        dw_down + j, F);
        }
    }
}

/* dW[j0:j1, :] += d_pre[0:rows, j0:j1]^T x[0:rows] */
static void proj_backward_weight(int C, int F, int rows, int j0, int j1, const float *d_pre, const float *x,
                                 float *dw) {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, j1 - j0, C, rows, 1.0f, d_pre + j0, F, x, C, 1.0f,
                ROW(dw, j0, C), C);
}

/* ---- SwiGLU ------------------------------------------------------------ */

void tlm_mlp_swiglu_forward(int C, int F, int r0, int r1, const float *x, const float *w_gate, const float *w_up,
                            const float *w_down, float *pre_gate, float *pre_up, float *out) {
    int n = r1 - r0;
    if (n <= 0) return;
    if (n == 1) { /* one token (sampling): both products in one parallel region */
        tlm_matvec_pair(ROW(pre_gate, r0, F), w_gate, ROW(pre_up, r0, F), w_up, ROW(x, r0, C), F, C);
    } else {
        tlm_linear_forward(ROW(pre_gate, r0, F), ROW(x, r0, C), w_gate, n, C, F, false);
        tlm_linear_forward(ROW(pre_up, r0, F), ROW(x, r0, C), w_up, n, C, F, false);
    }
    down_forward(false, C, F, r0, r1, pre_gate, pre_up, w_down, out);
}

void tlm_mlp_swiglu_backward_data(int C, int F, int r0, int r1, const float *x, const float *w_gate, const float *w_up,
                                  const float *w_down, const float *pre_gate, const float *pre_up, const float *dout,
                                  float *d_pre_gate, float *d_pre_up, float *dx) {
    (void)x;
    int n = r1 - r0;
    if (n <= 0) return;
    float *dg = ROW(d_pre_gate, r0, F), *du = ROW(d_pre_up, r0, F);
    /* dh = dout Wd lands in d_pre_gate, which swiglu_backward reads and
     * overwrites element by element: no scratch */
    tlm_linear_backward(dg, NULL, ROW(dout, r0, C), NULL, w_down, n, F, C, false);
    tlm_swiglu_backward(dg, du, dg, ROW(pre_gate, r0, F), ROW(pre_up, r0, F), (size_t)n * F);
    float *dxr = ROW(dx, r0, C);
    tlm_linear_backward(dxr, NULL, dg, NULL, w_gate, n, C, F, false);
    tlm_linear_backward(dxr, NULL, du, NULL, w_up, n, C, F, true);
}

void tlm_mlp_swiglu_backward_weight(int C, int F, int rows, int j0, int j1, const float *x, const float *pre_gate,
                                    const float *pre_up, const float *dout, const float *d_pre_gate,
                                    const float *d_pre_up, float *dw_gate, float *dw_up, float *dw_down) {
    if (rows <= 0 || j1 <= j0) return;
    proj_backward_weight(C, F, rows, j0, j1, d_pre_gate, x, dw_gate);
    proj_backward_weight(C, F, rows, j0, j1, d_pre_up, x, dw_up);
    down_backward_weight(false, C, F, rows, j0, j1, pre_gate, pre_up, dout, dw_down);
}

void tlm_mlp_swiglu_backward(int C, int F, int N, const float *x, const float *w_gate, const float *w_up,
                             const float *w_down, const float *pre_gate, const float *pre_up, const float *dout,
                             float *d_pre_gate, float *d_pre_up, float *dx, float *dw_gate, float *dw_up,
                             float *dw_down) {
    tlm_mlp_swiglu_backward_data(C, F, 0, N, x, w_gate, w_up, w_down, pre_gate, pre_up, dout, d_pre_gate, d_pre_up, dx);
    tlm_mlp_swiglu_backward_weight(C, F, N, 0, F, x, pre_gate, pre_up, dout, d_pre_gate, d_pre_up, dw_gate, dw_up,
                                   dw_down);
}

/* ---- GELU -------------------------------------------------------------- */

void tlm_mlp_gelu_forward(int C, int F, int r0, int r1, const float *x, const float *w_up, const float *w_down,
                          float *pre_up, float *out) {
    int n = r1 - r0;
    if (n <= 0) return;
    tlm_linear_forward(ROW(pre_up, r0, F), ROW(x, r0, C), w_up, n, C, F, false);
    down_forward(true, C, F, r0, r1, NULL, pre_up, w_down, out);
}

void tlm_mlp_gelu_backward_data(int C, int F, int r0, int r1, const float *x, const float *w_up, const float *w_down,
                                const float *pre_up, const float *dout, float *d_pre_up, float *dx) {
    (void)x;
    int n = r1 - r0;
    if (n <= 0) return;
    float *du = ROW(d_pre_up, r0, F);
    tlm_linear_backward(du, NULL, ROW(dout, r0, C), NULL, w_down, n, F, C, false);
    tlm_gelu_backward(du, du, ROW(pre_up, r0, F), (size_t)n * F);
    tlm_linear_backward(ROW(dx, r0, C), NULL, du, NULL, w_up, n, C, F, false);
}

void tlm_mlp_gelu_backward_weight(int C, int F, int rows, int j0, int j1, const float *x, const float *pre_up,
                                  const float *dout, const float *d_pre_up, float *dw_up, float *dw_down) {
    if (rows <= 0 || j1 <= j0) return;
    proj_backward_weight(C, F, rows, j0, j1, d_pre_up, x, dw_up);
    down_backward_weight(true, C, F, rows, j0, j1, NULL, pre_up, dout, dw_down);
}

void tlm_mlp_gelu_backward(int C, int F, int N, const float *x, const float *w_up, const float *w_down,
                           const float *pre_up, const float *dout, float *d_pre_up, float *dx, float *dw_up,
                           float *dw_down) {
    tlm_mlp_gelu_backward_data(C, F, 0, N, x, w_up, w_down, pre_up, dout, d_pre_up, dx);
    tlm_mlp_gelu_backward_weight(C, F, N, 0, F, x, pre_up, dout, d_pre_up, dw_up, dw_down);
}
