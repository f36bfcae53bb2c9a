// RMSNorm on the device, the model norm (rows of C) and the per-head one
// (rows of D inside [N,H,D]) alike, as in runtime/ops/rmsnorm.c:
//   y = x r w,  r = (mean(x^2) + eps)^(-1/2)
//   dx_i = r g_i - r^3 x_i (sum_j g_j x_j) / D,  g = dy w
//   dw_i += sum over rows of dy_i x_i r
// R rows of length D; the weight of element i of row r is w[(r % H) D + i]
// (H = 1 for the model norm); w may be null (no scale).

// One block per row (blocks stride over rows). rstd[r] is written.
extern "C" __global__ void tlm_rmsnorm_rows_forward(float *out, float *rstd, const float *x, const float *w, int R,
                                                    int H, int D, float eps) {
  for (int r = blockIdx.x; r < R; r += gridDim.x) {
    const float *xr = x + (long long)r * D;
    float *yr = out + (long long)r * D;
    const float *wr = w ? w + (long long)(r % H) * D : nullptr;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < D; i += blockDim.x) ss += xr[i] * xr[i];
    ss = tlm::block_sum(ss);
    // formed in double like the CPU op, so rstd rounds once
    float rs = (float)(1.0 / sqrt((double)ss / D + eps));
    if (threadIdx.x == 0) rstd[r] = rs;
    for (int i = threadIdx.x; i < D; i += blockDim.x) {
      float v = xr[i] * rs;
      yr[i] = wr ? v * wr[i] : v;
    }
  }
}

// dx of each row, one block per row; dx accumulates when `accumulate` is
// non-zero (the model norm: x is the residual stream) and is written
// otherwise (the per-head norm).
extern "C" __global__ void tlm_rmsnorm_rows_backward(float *dx, const float *dout, const float *x, const float *w,
                                                     const float *rstd, int R, int H, int D, int accumulate) {
  for (int r = blockIdx.x; r < R; r += gridDim.x) {
    const float *xr = x + (long long)r * D;
    const float *gr = dout + (long long)r * D;
    const float *wr = w ? w + (long long)(r % H) * D : nullptr;
    float *dxr = dx + (long long)r * D;
    float dot = 0.0f;  // sum_j (dy_j w_j) x_j
    for (int i = threadIdx.x; i < D; i += blockDim.x) dot += (wr ? gr[i] * wr[i] : gr[i]) * xr[i];
    dot = tlm::block_sum(dot);
    float rs = rstd[r];
    float k = (float)((double)dot / D) * rs * rs * rs;
    for (int i = threadIdx.x; i < D; i += blockDim.x) {
      float g = wr ? gr[i] * wr[i] : gr[i];
      float v = rs * g - k * xr[i];
      dxr[i] = accumulate ? dxr[i] + v : v;
    }
  }
}

// dw[h D + i] += sum over the rows r of head h (r = h, h + H, ...) of
// dout[r,i] x[r,i] rstd[r], in double like the CPU op. A block owns 32
// consecutive weight entries, one per lane; warp w of the block's W warps
// adds the head's rows w, w + W, w + 2W, ... in order, and warp 0 then adds
// the W partial sums in warp order. The order depends on the block size
// (which the C wrapper fixes), never on the grid.
extern "C" __global__ void tlm_rmsnorm_weight_backward(float *dw, const float *dout, const float *x, const float *rstd,
                                                       int R, int H, int D) {
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
        acc += (double)dout[at] * x[at] * (double)rstd[r];
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
