// Causal multi-head softmax attention on the device, flash style: the CPU
// op's equations and saved tensors (runtime/ops/attention.c: y and one
// log-sum-exp per token and head, lse [B,T,H]), so a checkpoint or an op
// table does not depend on where it ran.
//
// For one (batch b, head h), q_t, k_u, v_u the head slices (size D):
//   s_tu = q_t . k_u / sqrt(D)  (u <= t),  lse_t = log sum_u exp(s_tu),
//   P_tu = exp(s_tu - lse_t),   y_t = sum_u P_tu v_u
// Forward: a block per (b, h, query tile of attention_TQ rows) walks the key
// tiles up to its diagonal with an online softmax (running max and sum per
// row in shared memory; y_t, accumulated in place, rescaled when the max
// grows). Backward, recomputing P tile by tile from lse, with
// D_t = dy_t . y_t and dS_tu = P_tu (dy_t . v_u - D_t):
//   dq_t = sum_u dS_tu k_u / sqrt(D)   a block per query tile
//   dk_u = sum_t dS_tu q_t / sqrt(D)   a block per key tile, which also
//   dv_u = sum_t P_tu dy_t             sums over the query tiles t >= u in order
// Every output element has one owner thread per tile (the same thread for
// every tile of a block) that adds the tile's terms in a fixed order, so the
// bits do not depend on the grid size; no atomics. Scalar fp32, no T x T
// matrix: a few tiles of attention_TQ x attention_TK floats in shared memory.
//
// --precision bf16 stores q, k and v in bf16 (the qkv GEMM writes them so,
// RoPE rotates them in bf16) and, where no gate reads it, y too (out_proj's
// GEMMs and the backward's D_t read it). Every kernel is one template over
// the two storage types X (q, k, v) and Y (y): a bf16 element is widened
// exactly to fp32 as it is read (tlm::load), and everything else is the fp32
// kernel's arithmetic in its order, so a bf16 kernel gives the fp32 kernel's
// bits on the same (rounded) inputs. A bf16 y is accumulated in an fp32
// buffer `acc` of y's shape and stored rounded once at the end (the fp32
// kernels accumulate in y itself: the same arithmetic). The gradients dq,
// dk, dv stay fp32 (dk and dv are sums over the query tiles, accumulated in
// place in the output). Kernels: _bf16 (q, k, v and y in bf16) and
// _qkv_bf16 (q, k, v in bf16, y fp32: gated attention's gate reads y).
// Strides are in elements, so a packed qkv of 3 H D elements has the same
// stride in either type.

constexpr int attention_TQ = 32;  // query rows per tile
constexpr int attention_TK = 32;  // key rows per tile

// The offset of the head slice of token t: tensors of [B,T,H,D] with tokens
// `stride` elements apart.
__device__ __forceinline__ long long attention_token(int b, int t, int h, int T, int D, int stride) {
  return ((long long)b * T + t) * stride + (long long)h * D;
}

// a . b over D elements, each fp32 or bf16 (widened exactly).
template <typename A, typename B>
__device__ __forceinline__ float attention_dot(const A* a, const B* b, int D) {
  float s = 0.0f;
  for (int i = 0; i < D; i++) s += tlm::load(a + i) * tlm::load(b + i);
  return s;
}

// One block per (b, h, query tile): y and lse of its rows, y accumulated in
// acc (y itself in fp32).
template <typename X, typename Y>
__device__ void attention_fwd(Y* y, float* acc, float* lse, const X* q, const X* k, const X* v, int B, int T, int H,
                              int D, int stride) {
  __shared__ float p[attention_TQ][attention_TK + 1];
  __shared__ float m[attention_TQ], l[attention_TQ], alpha[attention_TQ];
  const float scale = 1.0f / sqrtf((float)D);
  const int tiles = (T + attention_TQ - 1) / attention_TQ, C = H * D;
  const long long items = (long long)B * H * tiles;
  for (long long item = blockIdx.x; item < items; item += gridDim.x) {
    const int qt = (int)(item % tiles), h = (int)(item / tiles % H), b = (int)(item / ((long long)tiles * H));
    const int i0 = qt * attention_TQ, rn = T - i0 < attention_TQ ? T - i0 : attention_TQ;
    const long long row0 = ((long long)b * T + i0) * C + (long long)h * D;
    float* yb = acc + row0;  // row r at yb + r*C
    for (int r = threadIdx.x; r < rn; r += blockDim.x) m[r] = -INFINITY, l[r] = 0.0f;
    for (int e = threadIdx.x; e < rn * D; e += blockDim.x) yb[(long long)(e / D) * C + e % D] = 0.0f;
    __syncthreads();
    for (int j0 = 0; j0 < i0 + rn; j0 += attention_TK) {
      const int kn = i0 + rn - j0 < attention_TK ? i0 + rn - j0 : attention_TK;
      for (int e = threadIdx.x; e < rn * attention_TK; e += blockDim.x) {
        const int r = e / attention_TK, c = e % attention_TK;
        float s = -INFINITY;
        if (c < kn && j0 + c <= i0 + r)
          s = attention_dot(q + attention_token(b, i0 + r, h, T, D, stride),
                            k + attention_token(b, j0 + c, h, T, D, stride), D) *
              scale;
        p[r][c] = s;
      }
      __syncthreads();
      // one thread per row: the new max, the rescale of what came before,
      // the tile's probabilities (unnormalised) and their sum
      for (int r = threadIdx.x; r < rn; r += blockDim.x) {
        float mx = m[r];
        for (int c = 0; c < kn; c++) mx = fmaxf(mx, p[r][c]);
        float sum = 0.0f;
        for (int c = 0; c < kn; c++) {
          const float e = p[r][c] == -INFINITY ? 0.0f : expf(p[r][c] - mx);
          p[r][c] = e;
          sum += e;
        }
        // a row that sees no key of this tile keeps m = -inf only on a
        // first tile, which always holds key 0: mx is finite here
        alpha[r] = expf(m[r] - mx);
        l[r] = l[r] * alpha[r] + sum;
        m[r] = mx;
      }
      __syncthreads();
      const X* vb = v + attention_token(b, j0, h, T, D, stride);
      for (int e = threadIdx.x; e < rn * D; e += blockDim.x) {
        const int r = e / D, d = e % D;
        float* yt = yb + (long long)r * C + d;
        float acc = *yt * alpha[r];
        for (int c = 0; c < kn; c++) acc += p[r][c] * tlm::load(vb + (long long)c * stride + d);
        *yt = acc;
      }
      __syncthreads();  // p, alpha are the next tile's
    }
    for (int e = threadIdx.x; e < rn * D; e += blockDim.x) {
      const long long o = (long long)(e / D) * C + e % D;
      tlm::store(y + row0 + o, yb[o] * (1.0f / l[e / D]));
    }
    for (int r = threadIdx.x; r < rn; r += blockDim.x) lse[((long long)b * T + i0 + r) * H + h] = m[r] + logf(l[r]);
    __syncthreads();  // m, l are the next item's
  }
}

extern "C" __global__ void tlm_attention_fwd(float* y, float* lse, const float* q, const float* k, const float* v,
                                             int B, int T, int H, int D, int stride) {
  attention_fwd(y, y, lse, q, k, v, B, T, H, D, stride);
}
extern "C" __global__ void tlm_attention_fwd_bf16(unsigned short* y, float* acc, float* lse, const unsigned short* q,
                                                  const unsigned short* k, const unsigned short* v, int B, int T, int H,
                                                  int D, int stride) {
  attention_fwd(y, acc, lse, q, k, v, B, T, H, D, stride);
}
extern "C" __global__ void tlm_attention_fwd_qkv_bf16(float* y, float* lse, const unsigned short* q,
                                                      const unsigned short* k, const unsigned short* v, int B, int T,
                                                      int H, int D, int stride) {
  attention_fwd(y, y, lse, q, k, v, B, T, H, D, stride);
}

// P and dS (scaled by 1/sqrt(D)) of the tile (query rows i0.., key rows
// j0..) into shared memory, zeros where masked or past the ends; rowdot and
// rowlse hold D_t and lse_t of the query rows. Ends with a barrier.
template <typename X>
__device__ __forceinline__ void attention_tile(float (*p)[attention_TK + 1], float (*ds)[attention_TK + 1],
                                               const float* rowdot, const float* rowlse, const X* q, const X* k,
                                               const X* v, const float* dy, int b, int h, int i0, int rn, int j0,
                                               int kn, int T, int H, int D, int stride, float scale) {
  for (int e = threadIdx.x; e < attention_TQ * attention_TK; e += blockDim.x) {
    const int r = e / attention_TK, c = e % attention_TK;
    float P = 0.0f, dS = 0.0f;
    if (r < rn && c < kn && j0 + c <= i0 + r) {
      const long long ko = attention_token(b, j0 + c, h, T, D, stride);
      const float s = attention_dot(q + attention_token(b, i0 + r, h, T, D, stride), k + ko, D) * scale;
      P = expf(s - rowlse[r]);
      const float dp = attention_dot(dy + ((long long)b * T + i0 + r) * H * D + (long long)h * D, v + ko, D);
      dS = P * (dp - rowdot[r]) * scale;
    }
    p[r][c] = P;
    ds[r][c] = dS;
  }
  __syncthreads();
}

// D_t = dy_t . y_t and lse_t of the query tile's rows.
template <typename Y>
__device__ __forceinline__ void attention_rows(float* rowdot, float* rowlse, const float* dy, const Y* y,
                                               const float* lse, int b, int h, int i0, int rn, int T, int H, int D) {
  for (int r = threadIdx.x; r < rn; r += blockDim.x) {
    const long long yo = ((long long)b * T + i0 + r) * H * D + (long long)h * D;
    rowdot[r] = attention_dot(dy + yo, y + yo, D);
    rowlse[r] = lse[((long long)b * T + i0 + r) * H + h];
  }
  __syncthreads();
}

// One block per (b, h, query tile): dq of its rows over the key tiles in order.
template <typename X, typename Y>
__device__ void attention_bwd_dq(float* dq, const float* dy, const Y* y, const float* lse, const X* q, const X* k,
                                 const X* v, int B, int T, int H, int D, int stride) {
  __shared__ float p[attention_TQ][attention_TK + 1], ds[attention_TQ][attention_TK + 1];
  __shared__ float rowdot[attention_TQ], rowlse[attention_TQ];
  const float scale = 1.0f / sqrtf((float)D);
  const int tiles = (T + attention_TQ - 1) / attention_TQ;
  const long long items = (long long)B * H * tiles;
  for (long long item = blockIdx.x; item < items; item += gridDim.x) {
    const int qt = (int)(item % tiles), h = (int)(item / tiles % H), b = (int)(item / ((long long)tiles * H));
    const int i0 = qt * attention_TQ, rn = T - i0 < attention_TQ ? T - i0 : attention_TQ;
    float* dqb = dq + attention_token(b, i0, h, T, D, stride);
    attention_rows(rowdot, rowlse, dy, y, lse, b, h, i0, rn, T, H, D);
    for (int e = threadIdx.x; e < rn * D; e += blockDim.x) dqb[(long long)(e / D) * stride + e % D] = 0.0f;
    for (int j0 = 0; j0 < i0 + rn; j0 += attention_TK) {
      const int kn = i0 + rn - j0 < attention_TK ? i0 + rn - j0 : attention_TK;
      attention_tile(p, ds, rowdot, rowlse, q, k, v, dy, b, h, i0, rn, j0, kn, T, H, D, stride, scale);
      const X* kb = k + attention_token(b, j0, h, T, D, stride);
      for (int e = threadIdx.x; e < rn * D; e += blockDim.x) {
        const int r = e / D, d = e % D;
        float* o = dqb + (long long)r * stride + d;
        float acc = *o;
        for (int c = 0; c < kn; c++) acc += ds[r][c] * tlm::load(kb + (long long)c * stride + d);
        *o = acc;
      }
      __syncthreads();  // p, ds are the next tile's
    }
  }
}

extern "C" __global__ void tlm_attention_bwd_dq(float* dq, const float* dy, const float* y, const float* lse,
                                                const float* q, const float* k, const float* v, int B, int T, int H,
                                                int D, int stride) {
  attention_bwd_dq(dq, dy, y, lse, q, k, v, B, T, H, D, stride);
}
extern "C" __global__ void tlm_attention_bwd_dq_bf16(float* dq, const float* dy, const unsigned short* y,
                                                     const float* lse, const unsigned short* q, const unsigned short* k,
                                                     const unsigned short* v, int B, int T, int H, int D, int stride) {
  attention_bwd_dq(dq, dy, y, lse, q, k, v, B, T, H, D, stride);
}
extern "C" __global__ void tlm_attention_bwd_dq_qkv_bf16(float* dq, const float* dy, const float* y, const float* lse,
                                                         const unsigned short* q, const unsigned short* k,
                                                         const unsigned short* v, int B, int T, int H, int D,
                                                         int stride) {
  attention_bwd_dq(dq, dy, y, lse, q, k, v, B, T, H, D, stride);
}

// One block per (b, h, key tile): dk and dv of its rows over the query
// tiles from its own on, in order.
template <typename X, typename Y>
__device__ void attention_bwd_dkv(float* dk, float* dv, const float* dy, const Y* y, const float* lse, const X* q,
                                  const X* k, const X* v, int B, int T, int H, int D, int stride) {
  __shared__ float p[attention_TQ][attention_TK + 1], ds[attention_TQ][attention_TK + 1];
  __shared__ float rowdot[attention_TQ], rowlse[attention_TQ];
  const float scale = 1.0f / sqrtf((float)D);
  const int tiles = (T + attention_TK - 1) / attention_TK, C = H * D;
  const long long items = (long long)B * H * tiles;
  for (long long item = blockIdx.x; item < items; item += gridDim.x) {
    const int kt = (int)(item % tiles), h = (int)(item / tiles % H), b = (int)(item / ((long long)tiles * H));
    const int j0 = kt * attention_TK, kn = T - j0 < attention_TK ? T - j0 : attention_TK;
    const long long ko = attention_token(b, j0, h, T, D, stride);
    for (int e = threadIdx.x; e < kn * D; e += blockDim.x) {
      const long long o = ko + (long long)(e / D) * stride + e % D;
      dk[o] = 0.0f;
      dv[o] = 0.0f;
    }
    for (int i0 = j0 / attention_TQ * attention_TQ; i0 < T; i0 += attention_TQ) {
      const int rn = T - i0 < attention_TQ ? T - i0 : attention_TQ;
      attention_rows(rowdot, rowlse, dy, y, lse, b, h, i0, rn, T, H, D);
      attention_tile(p, ds, rowdot, rowlse, q, k, v, dy, b, h, i0, rn, j0, kn, T, H, D, stride, scale);
      const X* qb = q + attention_token(b, i0, h, T, D, stride);
      const float* dyb = dy + ((long long)b * T + i0) * C + (long long)h * D;
      for (int e = threadIdx.x; e < kn * D; e += blockDim.x) {
        const int c = e / D, d = e % D;
        const long long o = ko + (long long)c * stride + d;
        float acc_k = dk[o], acc_v = dv[o];
        for (int r = 0; r < rn; r++) {
          acc_k += ds[r][c] * tlm::load(qb + (long long)r * stride + d);
          acc_v += p[r][c] * dyb[(long long)r * C + d];
        }
        dk[o] = acc_k;
        dv[o] = acc_v;
      }
      __syncthreads();  // p, ds, rowdot, rowlse are the next tile's
    }
  }
}

extern "C" __global__ void tlm_attention_bwd_dkv(float* dk, float* dv, const float* dy, const float* y,
                                                 const float* lse, const float* q, const float* k, const float* v,
                                                 int B, int T, int H, int D, int stride) {
  attention_bwd_dkv(dk, dv, dy, y, lse, q, k, v, B, T, H, D, stride);
}
extern "C" __global__ void tlm_attention_bwd_dkv_bf16(float* dk, float* dv, const float* dy, const unsigned short* y,
                                                      const float* lse, const unsigned short* q,
                                                      const unsigned short* k, const unsigned short* v, int B, int T,
                                                      int H, int D, int stride) {
  attention_bwd_dkv(dk, dv, dy, y, lse, q, k, v, B, T, H, D, stride);
}
extern "C" __global__ void tlm_attention_bwd_dkv_qkv_bf16(float* dk, float* dv, const float* dy, const float* y,
                                                          const float* lse, const unsigned short* q,
                                                          const unsigned short* k, const unsigned short* v, int B,
                                                          int T, int H, int D, int stride) {
  attention_bwd_dkv(dk, dv, dy, y, lse, q, k, v, B, T, H, D, stride);
}
