/* The C side of the basic ops (gpu_basic.h): each call picks the grid and
 * launches the kernels of runtime/gpu/{embedding,rmsnorm,rope,crossentropy,
 * gates}.cu. Every kernel strides over its work, so the grid only sets how
 * much runs at once; the block size is fixed here, since it (never the grid)
 * sets the order of the block-wide sums. */
#include "gpu_basic.h"

enum { BLOCK = TLM_GPU_BASIC_BLOCK };

/* One block per row, up to tlm_gpu_blocks' bound (blocks stride past it). */
static unsigned blocks_per_row(int64_t rows) { return tlm_gpu_blocks(rows, 1); }

/* ---- embedding ------------------------------------------------------- */

bool tlm_gpu_embedding_forward(tlm_gpu *g, tlm_dptr out, tlm_dptr ids, tlm_dptr table, int N, int C, tlm_err *err) {
    void *args[] = {&out, &ids, &table, &N, &C};
    return tlm_gpu_launch(g, "tlm_embedding_gather", tlm_gpu_blocks((int64_t)N * C, BLOCK), BLOCK, args, err);
}

bool tlm_gpu_embedding_backward(tlm_gpu *g, tlm_dptr dtable, tlm_dptr dout, tlm_dptr ids, int N, int C, tlm_err *err) {
    /* Spread the table's columns over enough id classes for about 32k work
     * items (each walks all N ids), at most 64 classes; any count gives the
     * same bits. */
    int classes = C > 0 ? (32768 + C - 1) / C : 1;
    if (classes > 64) classes = 64;
    void *args[] = {&dtable, &dout, &ids, &N, &C, &classes};
    return tlm_gpu_launch(g, "tlm_embedding_scatter_add", tlm_gpu_blocks((int64_t)classes * C, BLOCK), BLOCK, args,
                          err);
}

/* ---- rmsnorm: R rows of D, weight row r % H -------------------------- */

/* The storage of the norm's x and out: fp32 both; fp32 x and bf16 out (the
 * model norm's rows in --precision bf16); or bf16 both (the per-head norm
 * of Titans' bf16 memory read-out). The backward reads x as the forward
 * did; its gradients are fp32. */
typedef enum { RMS_FP32, RMS_BF16_OUT, RMS_BF16_X } rms_storage;

static bool rms_forward(tlm_gpu *g, tlm_dptr out, tlm_dptr rstd, tlm_dptr x, tlm_dptr w, int R, int H, int D, float eps,
                        rms_storage storage, tlm_err *err) {
    void *args[] = {&out, &rstd, &x, &w, &R, &H, &D, &eps};
    static const char *const kernel[] = {[RMS_FP32] = "tlm_rmsnorm_rows_forward",
                                         [RMS_BF16_OUT] = "tlm_rmsnorm_rows_forward_bf16",
                                         [RMS_BF16_X] = "tlm_rmsnorm_rows_forward_bf16_x"};
    return tlm_gpu_launch(g, kernel[storage], blocks_per_row(R), BLOCK, args, err);
}

static bool rms_backward(tlm_gpu *g, tlm_dptr dx, tlm_dptr dw, tlm_dptr dout, tlm_dptr x, tlm_dptr w, tlm_dptr rstd,
                         int R, int H, int D, bool accumulate, bool x_bf16, tlm_err *err) {
    /* dw first (one block per 32 weight entries): it reads dout, which the
     * rows may overwrite when dx is dout itself */
    if (dw && w) {
        void *weight_args[] = {&dw, &dout, &x, &rstd, &R, &H, &D};
        const char *weight_kernel = x_bf16 ? "tlm_rmsnorm_weight_backward_bf16_x" : "tlm_rmsnorm_weight_backward";
        if (!tlm_gpu_launch(g, weight_kernel, tlm_gpu_blocks((int64_t)H * D, 32), TLM_GPU_RMSNORM_WEIGHT_BLOCK,
                            weight_args, err))
            return false;
    }
    int acc = accumulate;
    void *row_args[] = {&dx, &dout, &x, &w, &rstd, &R, &H, &D, &acc};
    const char *row_kernel = x_bf16 ? "tlm_rmsnorm_rows_backward_bf16_x" : "tlm_rmsnorm_rows_backward";
    return tlm_gpu_launch(g, row_kernel, blocks_per_row(R), BLOCK, row_args, err);
}

bool tlm_gpu_rmsnorm_forward(tlm_gpu *g, tlm_dptr out, tlm_dptr rstd, tlm_dptr x, tlm_dptr w, int N, int C, float eps,
                             tlm_err *err) {
    return rms_forward(g, out, rstd, x, w, N, 1, C, eps, RMS_FP32, err);
}

bool tlm_gpu_rmsnorm_forward_bf16(tlm_gpu *g, tlm_dptr out_bf16, tlm_dptr rstd, tlm_dptr x, tlm_dptr w, int N, int C,
                                  float eps, tlm_err *err) {
    return rms_forward(g, out_bf16, rstd, x, w, N, 1, C, eps, RMS_BF16_OUT, err);
}

bool tlm_gpu_rmsnorm_backward(tlm_gpu *g, tlm_dptr dx, tlm_dptr dw, tlm_dptr dout, tlm_dptr x, tlm_dptr w,
                              tlm_dptr rstd, int N, int C, tlm_err *err) {
    return rms_backward(g, dx, dw, dout, x, w, rstd, N, 1, C, true, false, err);
}

bool tlm_gpu_rmsnorm_heads_forward(tlm_gpu *g, tlm_dptr out, tlm_dptr rstd, tlm_dptr x, tlm_dptr w, int N, int H, int D,
                                   float eps, tlm_err *err) {
    return rms_forward(g, out, rstd, x, w, N * H, H, D, eps, RMS_FP32, err);
}

bool tlm_gpu_rmsnorm_heads_forward_bf16(tlm_gpu *g, tlm_dptr out_bf16, tlm_dptr rstd, tlm_dptr x_bf16, tlm_dptr w,
                                        int N, int H, int D, float eps, tlm_err *err) {
    return rms_forward(g, out_bf16, rstd, x_bf16, w, N * H, H, D, eps, RMS_BF16_X, err);
}

bool tlm_gpu_rmsnorm_heads_backward(tlm_gpu *g, tlm_dptr dx, tlm_dptr dw, tlm_dptr dout, tlm_dptr x, tlm_dptr w,
                                    tlm_dptr rstd, int N, int H, int D, tlm_err *err) {
    return rms_backward(g, dx, dw, dout, x, w, rstd, N * H, H, D, false, false, err);
}

bool tlm_gpu_rmsnorm_heads_backward_bf16(tlm_gpu *g, tlm_dptr dx, tlm_dptr dw, tlm_dptr dout, tlm_dptr x_bf16,
                                         tlm_dptr w, tlm_dptr rstd, int N, int H, int D, tlm_err *err) {
    return rms_backward(g, dx, dw, dout, x_bf16, w, rstd, N * H, H, D, false, true, err);
}

/* ---- rope ------------------------------------------------------------ */

static bool rope_rotate(tlm_gpu *g, const char *kernel, tlm_dptr out, tlm_dptr x, tlm_dptr cos_t, tlm_dptr sin_t, int B,
                        int T, int H, int D, int stride, float sign, tlm_err *err) {
    void *args[] = {&out, &x, &cos_t, &sin_t, &B, &T, &H, &D, &stride, &sign};
    int64_t pairs = (int64_t)B * T * H * (D / 2);
    return tlm_gpu_launch(g, kernel, tlm_gpu_blocks(pairs, BLOCK), BLOCK, args, err);
}

bool tlm_gpu_rope_forward(tlm_gpu *g, tlm_dptr out, tlm_dptr x, tlm_dptr cos_t, tlm_dptr sin_t, int B, int T, int H,
                          int D, int stride, tlm_err *err) {
    return rope_rotate(g, "tlm_rope_rotate", out, x, cos_t, sin_t, B, T, H, D, stride, 1.0f, err);
}

bool tlm_gpu_rope_forward_bf16(tlm_gpu *g, tlm_dptr out, tlm_dptr x, tlm_dptr cos_t, tlm_dptr sin_t, int B, int T,
                               int H, int D, int stride, tlm_err *err) {
    return rope_rotate(g, "tlm_rope_rotate_bf16", out, x, cos_t, sin_t, B, T, H, D, stride, 1.0f, err);
}

bool tlm_gpu_rope_backward(tlm_gpu *g, tlm_dptr dx, tlm_dptr dout, tlm_dptr cos_t, tlm_dptr sin_t, int B, int T, int H,
                           int D, int stride, tlm_err *err) {
    return rope_rotate(g, "tlm_rope_rotate", dx, dout, cos_t, sin_t, B, T, H, D, stride, -1.0f, err);
}

/* ---- cross-entropy --------------------------------------------------- */

static bool crossentropy_forward(tlm_gpu *g, bool bf16, tlm_dptr losses, tlm_dptr lse, tlm_dptr logits,
                                 tlm_dptr targets, int N, int V, tlm_dptr loss_out, tlm_err *err) {
    void *row_args[] = {&losses, &lse, &logits, &targets, &N, &V};
    const char *rows = bf16 ? "tlm_crossentropy_rows_bf16" : "tlm_crossentropy_rows";
    if (!tlm_gpu_launch(g, rows, blocks_per_row(N), BLOCK, row_args, err)) return false;
    void *mean_args[] = {&loss_out, &lse, &logits, &targets, &N, &V};
    const char *mean = bf16 ? "tlm_crossentropy_mean_bf16" : "tlm_crossentropy_mean";
    return tlm_gpu_launch(g, mean, 1, BLOCK, mean_args, err);
}

static bool crossentropy_backward(tlm_gpu *g, bool bf16, tlm_dptr dlogits, tlm_dptr logits, tlm_dptr lse,
                                  tlm_dptr targets, int N, int V, float dloss, tlm_err *err) {
    /* Every block counts the N targets again (the kernel has nowhere to keep
     * one count), so the grid stays at 512 blocks: enough to fill the GPU,
     * few enough that the counts cost little next to N*V. */
    unsigned grid = blocks_per_row(N);
    if (grid > 512) grid = 512;
    void *args[] = {&dlogits, &logits, &lse, &targets, &N, &V, &dloss};
    const char *kernel = bf16 ? "tlm_crossentropy_rows_backward_bf16" : "tlm_crossentropy_rows_backward";
    return tlm_gpu_launch(g, kernel, grid, BLOCK, args, err);
}

bool tlm_gpu_crossentropy_forward(tlm_gpu *g, tlm_dptr losses, tlm_dptr lse, tlm_dptr logits, tlm_dptr targets, int N,
                                  int V, tlm_dptr loss_out, tlm_err *err) {
    return crossentropy_forward(g, false, losses, lse, logits, targets, N, V, loss_out, err);
}
bool tlm_gpu_crossentropy_forward_bf16(tlm_gpu *g, tlm_dptr losses, tlm_dptr lse, tlm_dptr logits, tlm_dptr targets,
                                       int N, int V, tlm_dptr loss_out, tlm_err *err) {
    return crossentropy_forward(g, true, losses, lse, logits, targets, N, V, loss_out, err);
}
bool tlm_gpu_crossentropy_backward(tlm_gpu *g, tlm_dptr dlogits, tlm_dptr logits, tlm_dptr lse, tlm_dptr targets, int N,
                                   int V, float dloss, tlm_err *err) {
    return crossentropy_backward(g, false, dlogits, logits, lse, targets, N, V, dloss, err);
}
bool tlm_gpu_crossentropy_backward_bf16(tlm_gpu *g, tlm_dptr dlogits, tlm_dptr logits, tlm_dptr lse, tlm_dptr targets,
                                        int N, int V, float dloss, tlm_err *err) {
    return crossentropy_backward(g, true, dlogits, logits, lse, targets, N, V, dloss, err);
}

/* ---- gates ----------------------------------------------------------- */

/* bf16: y, gate and out in bf16, the kernels' bf16 twins (gates.cu) */
static bool sigmoid_gate_forward(tlm_gpu *g, bool bf16, tlm_dptr out, tlm_dptr y, tlm_dptr gate, int R, int D,
                                 tlm_err *err) {
    void *args[] = {&out, &y, &gate, &R, &D};
    return tlm_gpu_launch(g, bf16 ? "tlm_sigmoid_gate_apply_bf16" : "tlm_sigmoid_gate_apply",
                          tlm_gpu_blocks((int64_t)R * D, BLOCK), BLOCK, args, err);
}

static bool sigmoid_gate_backward(tlm_gpu *g, bool bf16, tlm_dptr dy, tlm_dptr dgate, tlm_dptr dout, tlm_dptr y,
                                  tlm_dptr gate, int R, int D, tlm_err *err) {
    /* dgate first: it reads dout, which dy may be */
    if (dgate) {
        void *args[] = {&dgate, &dout, &y, &gate, &R, &D};
        if (!tlm_gpu_launch(g, bf16 ? "tlm_sigmoid_gate_dg_bf16" : "tlm_sigmoid_gate_dg", tlm_gpu_blocks(R, BLOCK),
                            BLOCK, args, err))
            return false;
    }
    if (!dy) return true;
    void *args[] = {&dy, &dout, &gate, &R, &D};
    return tlm_gpu_launch(g, bf16 ? "tlm_sigmoid_gate_dy_bf16" : "tlm_sigmoid_gate_dy",
                          tlm_gpu_blocks((int64_t)R * D, BLOCK), BLOCK, args, err);
}

bool tlm_gpu_sigmoid_gate_forward(tlm_gpu *g, tlm_dptr out, tlm_dptr y, tlm_dptr gate, int R, int D, tlm_err *err) {
    return sigmoid_gate_forward(g, false, out, y, gate, R, D, err);
}
bool tlm_gpu_sigmoid_gate_forward_bf16(tlm_gpu *g, tlm_dptr out, tlm_dptr y, tlm_dptr gate, int R, int D,
                                       tlm_err *err) {
    return sigmoid_gate_forward(g, true, out, y, gate, R, D, err);
}
bool tlm_gpu_sigmoid_gate_backward(tlm_gpu *g, tlm_dptr dy, tlm_dptr dgate, tlm_dptr dout, tlm_dptr y, tlm_dptr gate,
                                   int R, int D, tlm_err *err) {
    return sigmoid_gate_backward(g, false, dy, dgate, dout, y, gate, R, D, err);
}
bool tlm_gpu_sigmoid_gate_backward_bf16(tlm_gpu *g, tlm_dptr dy, tlm_dptr dgate, tlm_dptr dout, tlm_dptr y,
                                        tlm_dptr gate, int R, int D, tlm_err *err) {
    return sigmoid_gate_backward(g, true, dy, dgate, dout, y, gate, R, D, err);
}

/* bf16: h, gate and u in bf16, the kernels' bf16 twins (gates.cu) */
static bool swiglu_forward(tlm_gpu *g, bool bf16, tlm_dptr h, tlm_dptr gate, tlm_dptr u, size_t n, tlm_err *err) {
    long long count = (long long)n;
    void *args[] = {&h, &gate, &u, &count};
    return tlm_gpu_launch(g, bf16 ? "tlm_swiglu_apply_bf16" : "tlm_swiglu_apply", tlm_gpu_blocks(count, BLOCK), BLOCK,
                          args, err);
}

static bool swiglu_backward(tlm_gpu *g, bool bf16, tlm_dptr dgate, tlm_dptr du, tlm_dptr dh, tlm_dptr gate, tlm_dptr u,
                            size_t n, tlm_err *err) {
    long long count = (long long)n;
    void *args[] = {&dgate, &du, &dh, &gate, &u, &count};
    return tlm_gpu_launch(g, bf16 ? "tlm_swiglu_grad_bf16" : "tlm_swiglu_grad", tlm_gpu_blocks(count, BLOCK), BLOCK,
                          args, err);
}

bool tlm_gpu_swiglu_forward(tlm_gpu *g, tlm_dptr h, tlm_dptr gate, tlm_dptr u, size_t n, tlm_err *err) {
    return swiglu_forward(g, false, h, gate, u, n, err);
}
bool tlm_gpu_swiglu_forward_bf16(tlm_gpu *g, tlm_dptr h, tlm_dptr gate, tlm_dptr u, size_t n, tlm_err *err) {
    return swiglu_forward(g, true, h, gate, u, n, err);
}
bool tlm_gpu_swiglu_backward(tlm_gpu *g, tlm_dptr dgate, tlm_dptr du, tlm_dptr dh, tlm_dptr gate, tlm_dptr u, size_t n,
                             tlm_err *err) {
    return swiglu_backward(g, false, dgate, du, dh, gate, u, n, err);
}
bool tlm_gpu_swiglu_backward_bf16(tlm_gpu *g, tlm_dptr dgate, tlm_dptr du, tlm_dptr dh, tlm_dptr gate, tlm_dptr u,
                                  size_t n, tlm_err *err) {
    return swiglu_backward(g, true, dgate, du, dh, gate, u, n, err);
}
