// RMSNorm on the device, the model norm (rows of C) and the per-head one
// (rows of D inside [N,H,D]) alike, as in runtime/ops/rmsnorm.c:
//   y = x r w,  r = (mean(x^2) + eps)^(-1/2)
//   dx_i = r g_i - r^3 x_i (sum_j g_j x_j) / D,  g = dy w
//   dw_i += sum over rows of dy_i x_i r
// R rows of length D; the weight of element i of row r is w[(r % H) D + i]
// (H = 1 for the model norm); w may be null (no scale).

// The sum of a double over the block, in tlm::block_sum's fixed order (each
// warp, then warp 0 over the warps' sums); every thread must call it and
// gets the result. The row sums are in double as in the CPU op, so rstd and
// the backward's k round once, from nearly the CPU's value: a float sum of
// g x cancels (mixed signs) and its error would reach every dx of the row.
__device__ __forceinline__ double rmsnorm_block_sum(double v) {
  __shared__ double rmsnorm_warp_sums[32];
  __shared__ double rmsnorm_total;
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(tlm::FULL_MASK, v, m);
  if (lane == 0) rmsnorm_warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    double w = lane < warps ? rmsnorm_warp_sums[lane] : 0.0;
    for (int m = 16; m > 0; m >>= 1) w += __shfl_xor_sync(tlm::FULL_MASK, w, m);
    if (lane == 0) rmsnorm_total = w;
  }
  __syncthreads();
  double r = rmsnorm_total;
  __syncthreads();
  return r;
}

// One block per row (blocks stride over rows). rstd[r] is written. x is
// float, or bf16 bits widened exactly (Titans' memory read-out, which the
// per-head norm reads in --precision bf16); out is float, or bf16 bits (the
// model norm's rows, only read by GEMMs, and the per-head norm's, read by
// Titans' SiLU gate: runtime/model/gpu_model.c): the same value, rounded
// once to nearest even as it is stored. One template, so on the same
// rounded x every instantiation runs the fp32 kernel's arithmetic in its
// order and gives its rstd and y (y then rounded where it is bf16).
template <typename In, typename Out>
__device__ void rmsnorm_rows_forward(Out *out, float *rstd, const In *x, const float *w, int R, int H, int D,
                                     float eps) {
  for (int r = blockIdx.x; r < R; r += gridDim.x) {
    const In *xr = x + (long long)r * D;
    Out *yr = out + (long long)r * D;
    const float *wr = w ? w + (long long)(r % H) * D : nullptr;
    double ss = 0.0;
    for (int i = threadIdx.x; i < D; i += blockDim.x) ss += (double)tlm::load(xr + i) * tlm::load(xr + i);
    ss = rmsnorm_block_sum(ss);
    float rs = (float)(1.0 / sqrt(ss / D + eps));
    if (threadIdx.x == 0) rstd[r] = rs;
    for (int i = threadIdx.x; i < D; i += blockDim.x) {
      float v = tlm::load(xr + i) * rs;
      tlm::store(yr + i, wr ? v * wr[i] : v);
    }
  }
}

extern "C" __global__ void tlm_rmsnorm_rows_forward(float *out, float *rstd, const float *x, const float *w, int R,
                                                    int H, int D, float eps) {
  rmsnorm_rows_forward(out, rstd, x, w, R, H, D, eps);
}
extern "C" __global__ void tlm_rmsnorm_rows_forward_bf16(unsigned short *out, float *rstd, const float *x,
                                                         const float *w, int R, int H, int D, float eps) {
  rmsnorm_rows_forward(out, rstd, x, w, R, H, D, eps);
}
// x and out in bf16: the per-head norm of a bf16 memory read-out
extern "C" __global__ void tlm_rmsnorm_rows_forward_bf16_x(unsigned short *out, float *rstd, const unsigned short *x,
                                                           const float *w, int R, int H, int D, float eps) {
  rmsnorm_rows_forward(out, rstd, x, w, R, H, D, eps);
}

// dx of each row, one block per row; dx accumulates when `accumulate` is
// non-zero (the model norm: x is the residual stream) and is written
// otherwise (the per-head norm). x as in the forward: float, or bf16
// widened (the gradients are fp32 either way).
template <typename In>
__device__ void rmsnorm_rows_backward(float *dx, const float *dout, const In *x, const float *w, const float *rstd,
                                      int R, int H, int D, int accumulate) {
  for (int r = blockIdx.x; r < R; r += gridDim.x) {
    const In *xr = x + (long long)r * D;
    const float *gr = dout + (long long)r * D;
    const float *wr = w ? w + (long long)(r % H) * D : nullptr;
    float *dxr = dx + (long long)r * D;
    double dot = 0.0;  // sum_j (dy_j w_j) x_j
    for (int i = threadIdx.x; i < D; i += blockDim.x) dot += (double)(wr ? gr[i] * wr[i] : gr[i]) * tlm::load(xr + i);
    dot = rmsnorm_block_sum(dot);
    float rs = rstd[r];
    float k = (float)(dot / D) * rs * rs * rs;
    for (int i = threadIdx.x; i < D; i += blockDim.x) {
      float g = wr ? gr[i] * wr[i] : gr[i];
      float v = rs * g - k * tlm::load(xr + i);
      dxr[i] = accumulate ? dxr[i] + v : v;
    }
  }
}
extern "C" __global__ void tlm_rmsnorm_rows_backward(float *dx, const float *dout, const float *x, const float *w,
                                                     const float *rstd, int R, int H, int D, int accumulate) {
  rmsnorm_rows_backward(dx, dout, x, w, rstd, R, H, D, accumulate);
}
extern "C" __global__ void tlm_rmsnorm_rows_backward_bf16_x(float *dx, const float *dout, const unsigned short *x,
                                                            const float *w, const float *rstd, int R, int H, int D,
                                                            int accumulate) {
  rmsnorm_rows_backward(dx, dout, x, w, rstd, R, H, D, accumulate);
}

// dw[h D + i] += sum over the rows r of head h (r = h, h + H, ...) of
// dout[r,i] x[r,i] rstd[r], in double like the CPU op. A block owns 32
// consecutive weight entries, one per lane; warp w of the block's W warps
// adds the head's rows w, w + W, w + 2W, ... in order, and warp 0 then adds
// the W partial sums in warp order. The order depends on the block size
// (which the C wrapper fixes: 1024 threads, 32 warps), never on the grid.
// Splitting the rows over blocks too would fill more of a large GPU, but
// adding the blocks' partial sums in a fixed order needs a scratch buffer
// (no atomics). x: float, or bf16 widened.
template <typename In>
__device__ void rmsnorm_weight_backward(float *dw, const float *dout, const In *x, const float *rstd, int R, int H,
                                        int D) {
  __shared__ double rmsnorm_partials[32][32];
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  long long entries = (long long)H * D;
  int rows_per_head = R / H;
  for (long long tile = blockIdx.x; tile * 32 < entries; tile += gridDim.x) {
    long long j = tile * 32 + lane;
    double acc = 0.0;
    if (j < entries) {
      int h = (int)(j / D), i = (int)(j - (long long)h * D);
      for (int m = warp; m < rows_per_head; m += warps) {
        long long r = (long long)m * H + h, at = r * D + i;
        acc += (double)dout[at] * tlm::load(x + at) * (double)rstd[r];
      }
    }
    rmsnorm_partials[warp][lane] = acc;
    __syncthreads();
    if (warp == 0 && j < entries) {
      double sum = 0.0;
      for (int v = 0; v < warps; v++) sum += rmsnorm_partials[v][lane];
      dw[j] += (float)sum;
    }
    __syncthreads();
  }
}
extern "C" __global__ void tlm_rmsnorm_weight_backward(float *dw, const float *dout, const float *x, const float *rstd,
                                                       int R, int H, int D) {
  rmsnorm_weight_backward(dw, dout, x, rstd, R, H, D);
}
extern "C" __global__ void tlm_rmsnorm_weight_backward_bf16_x(float *dw, const float *dout, const unsigned short *x,
                                                              const float *rstd, int R, int H, int D) {
  rmsnorm_weight_backward(dw, dout, x, rstd, R, H, D);
}
