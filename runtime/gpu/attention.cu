// Causal multi-head softmax attention on the device: the CPU op's equations
// and saved tensors (runtime/ops/attention.c), so a checkpoint or an op table
// does not depend on where it ran.
//
// For one (batch b, head h), q_t, k_u, v_u the head slices (size D):
//   s_tu = q_t . k_u / sqrt(D)  (u <= t),  P_t = softmax_u(s_t),  y_t = sum_u P_tu v_u
// Backward (dS_tu = P_tu (dy_t . v_u - dy_t . y_t), the CPU's row identity):
//   dq_t = sum_u dS_tu k_u / sqrt(D)   one block per query row t
//   dk_u = sum_t dS_tu q_t / sqrt(D)   one block per key row u, which also
//   dv_u = sum_t P_tu dy_t             sums over the query rows t >= u in order
// Every output element has one owner thread that sums its terms in a fixed
// order (tiles of attention_TILE rows, each walked in order), so the bits
// do not depend on the grid size. Straightforward rather than fast: the
// probabilities are kept (B*H*T*T floats), as on the CPU.

// Rows of scores (or of dS) held in shared memory at a time.
constexpr int attention_TILE = 256;

// The pointer to the head slice of token t: tensors of [B,T,H,D] with tokens
// `stride` floats apart.
__device__ __forceinline__ long long attention_token(int b, int t, int h, int T, int D, int stride) {
  return ((long long)b * T + t) * stride + (long long)h * D;
}

__device__ __forceinline__ float attention_dot(const float* a, const float* b, int D) {
  float s = 0.0f;
  for (int i = 0; i < D; i++) s += a[i] * b[i];
  return s;
}

// One block per row (b, h, t) of att: the scores, their softmax (written to
// att, zeros past t), then y_t.
extern "C" __global__ void tlm_attention_fwd_rows(float* y, float* att, const float* q, const float* k,
                                                  const float* v, int B, int T, int H, int D, int stride) {
  const float scale = 1.0f / sqrtf((float)D);
  const long long rows = (long long)B * H * T;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const int t = (int)(row % T), h = (int)(row / T % H), b = (int)(row / ((long long)T * H));
    const float* qt = q + attention_token(b, t, h, T, D, stride);
    float* p = att + row * T;
    float mx = -INFINITY;
    for (int u = threadIdx.x; u <= t; u += blockDim.x) {
      float s = attention_dot(qt, k + attention_token(b, u, h, T, D, stride), D) * scale;
      p[u] = s;
      mx = fmaxf(mx, s);
    }
    mx = tlm::block_max(mx);
    float sum = 0.0f;
    for (int u = threadIdx.x; u <= t; u += blockDim.x) {
      float e = expf(p[u] - mx);
      p[u] = e;
      sum += e;
    }
    const float inv = 1.0f / tlm::block_sum(sum);
    for (int u = threadIdx.x; u < T; u += blockDim.x) p[u] = u <= t ? p[u] * inv : 0.0f;
    __syncthreads();  // every probability of the row is written before y reads them
    float* yt = y + ((long long)b * T + t) * H * D + (long long)h * D;
    const float* vb = v + attention_token(b, 0, h, T, D, stride);
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
      float acc = 0.0f;
      for (int u = 0; u <= t; u++) acc += p[u] * vb[(long long)u * stride + d];
      yt[d] = acc;
    }
    __syncthreads();  // the next row's block_max reuses shared memory; p is this row's only
  }
}

// One block per query row (b, h, t): dq_t = sum_u dS_tu k_u / sqrt(D), the
// dS of a tile of key rows first (one thread each), then the tile's terms in
// u order (one thread per element of dq_t).
extern "C" __global__ void tlm_attention_bwd_dq(float* dq, const float* dy, const float* y, const float* att,
                                                const float* k, const float* v, int B, int T, int H, int D,
                                                int stride) {
  __shared__ float ds[attention_TILE];
  const float scale = 1.0f / sqrtf((float)D);
  const long long rows = (long long)B * H * T;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const int t = (int)(row % T), h = (int)(row / T % H), b = (int)(row / ((long long)T * H));
    const long long yo = ((long long)b * T + t) * H * D + (long long)h * D;
    const float* dyt = dy + yo;
    const float* p = att + row * T;
    const float rowdot = attention_dot(dyt, y + yo, D);
    const long long kv0 = attention_token(b, 0, h, T, D, stride);
    float* dqt = dq + attention_token(b, t, h, T, D, stride);
    // thread d owns dq_t[d] (block strided: D may exceed the block)
    for (int d0 = 0; d0 < D; d0 += blockDim.x) {
      const int d = d0 + threadIdx.x;
      float acc = 0.0f;
      for (int u0 = 0; u0 <= t; u0 += attention_TILE) {
        const int n = t + 1 - u0 < attention_TILE ? t + 1 - u0 : attention_TILE;
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
          const long long uo = kv0 + (long long)(u0 + i) * stride;
          ds[i] = p[u0 + i] * (attention_dot(dyt, v + uo, D) - rowdot) * scale;
        }
        __syncthreads();
        if (d < D)
          for (int i = 0; i < n; i++) acc += ds[i] * k[kv0 + (long long)(u0 + i) * stride + d];
        __syncthreads();
      }
      if (d < D) dqt[d] = acc;
    }
  }
}

// One block per key row (b, h, u): dk_u and dv_u over the query rows
// t = u .. T-1 in order, a tile of dS_tu and P_tu at a time.
extern "C" __global__ void tlm_attention_bwd_dkv(float* dk, float* dv, const float* dy, const float* y,
                                                 const float* att, const float* q, const float* v, int B, int T,
                                                 int H, int D, int stride) {
  __shared__ float ds[attention_TILE];
  __shared__ float pt[attention_TILE];
  const float scale = 1.0f / sqrtf((float)D);
  const long long rows = (long long)B * H * T;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
    const int u = (int)(row % T), h = (int)(row / T % H), b = (int)(row / ((long long)T * H));
    const long long uo = attention_token(b, u, h, T, D, stride);
    const float* vu = v + uo;
    const float* pb = att + (row - u) * T;  // att[b, h, 0, 0]
    const long long q0 = attention_token(b, 0, h, T, D, stride);
    const long long y0 = (long long)b * T * H * D + (long long)h * D;
    for (int d0 = 0; d0 < D; d0 += blockDim.x) {
      const int d = d0 + threadIdx.x;
      float acc_k = 0.0f, acc_v = 0.0f;
      for (int t0 = u; t0 < T; t0 += attention_TILE) {
        const int n = T - t0 < attention_TILE ? T - t0 : attention_TILE;
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
          const int t = t0 + i;
          const float* dyt = dy + y0 + (long long)t * H * D;
          const float P = pb[(long long)t * T + u];
          pt[i] = P;
          ds[i] = P * (attention_dot(dyt, vu, D) - attention_dot(dyt, y + y0 + (long long)t * H * D, D)) * scale;
        }
        __syncthreads();
        if (d < D)
          for (int i = 0; i < n; i++) {
            const int t = t0 + i;
            acc_k += ds[i] * q[q0 + (long long)t * stride + d];
            acc_v += pt[i] * dy[y0 + (long long)t * H * D + d];
          }
        __syncthreads();
      }
      if (d < D) {
        dk[uo + d] = acc_k;
        dv[uo + d] = acc_v;
      }
    }
  }
}
