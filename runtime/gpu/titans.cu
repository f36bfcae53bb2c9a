// The Titans neural memory on the device: the CPU op's equations, saved
// layout and segment recomputation (runtime/ops/titans.c, whose comment
// derives the backward), one block per (batch, head) walking the tokens.
//
// Per (b, h): a D x D memory M and momentum S, and per token t
//   e_t = M0 k_t - v_t   (M0: the memory at the start of t's chunk)
//   S_t = eta_t S_{t-1} - 2 theta_t e_t k_t^T,   M_t = (1 - alpha_t) M_{t-1} + S_t,   y_t = M_t q_t
// Given the chunk's e, the rows of M and S evolve independently, so within a
// block a token's update is elementwise; each row's dot products (e, y, and
// the backward's dS k) are a warp's (lanes over columns, then the warp's
// fixed butterfly), each column's sums over rows (the backward's dq, dk) one
// thread's in row order, and the Frobenius products one block_sum of
// per-thread sums in element order. The block size is fixed by the
// wrappers, so the bits do not depend on the grid.
//
// saved (as on the CPU): [B,H, nseg, 2, D, D] the (M, S) after each segment of
// K = chunk*ceil(16/chunk) tokens (the forward's running state lives in its
// segment's slot), then [B,H,T,D] the errors e_t.
// The backward's scratch, per (b, h), is the CPU op's per-thread scratch
// (tlm_titans_scratch_floats(D, chunk) floats, the same layout): the
// segment's K+1 states of M and S, dM, dS, dM0, then u and de (D each).

__device__ __forceinline__ int titans_segment_len(int chunk) { return chunk * ((16 + chunk - 1) / chunk); }

// One element of one token's update, the same operations in the forward and
// in the backward's recomputation (fmaf pins them: no contraction choice
// differs between the two), so the backward sees the forward's states.
__device__ __forceinline__ void titans_step_element(float* M, float* S, float M_in, float S_in, float c, float kj,
                                                    float eta, float keep) {
  const float s = fmaf(eta, S_in, -(c * kj));
  *S = s;
  *M = fmaf(keep, M_in, s);
}

// The dot of row i of the D x D matrix A with x (a row of q or k, fp32 or
// bf16 widened), by one warp: lanes over columns in order, then the
// butterfly (every lane gets the same bits).
template <typename X>
__device__ __forceinline__ float titans_row_dot(const float* A, long long i, const X* x, int D) {
  float s = 0.0f;
  for (int j = threadIdx.x % 32; j < D; j += 32) s += A[i * D + j] * tlm::load(x + j);
  return tlm::warp_sum(s);
}

// One block per (b, h): the states, y and the errors, segment by segment.
// q, k and v (mem_qkv) and the read-out y are fp32, or bf16 in --precision
// bf16: q, k, v read widened exactly, y rounded once as it is stored. The
// one template runs the same fp32 arithmetic in the same order, so on the
// same rounded q, k, v the bf16 instantiation gives the fp32 kernel's saved
// bit for bit and its y rounded (the memory, its checkpoints and the errors
// stay fp32 in either precision).
template <typename X>
__device__ void titans_forward(X* y, float* saved, const X* q, const X* k, const X* v, int stride, const float* theta,
                               const float* eta, const float* alpha, int B, int T, int H, int D, int chunk) {
  const int K = titans_segment_len(chunk), nseg = (T + K - 1) / K;
  const long long DD = (long long)D * D;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  float* e_all = saved + (long long)B * H * nseg * 2 * DD;
  for (long long bh = blockIdx.x; bh < (long long)B * H; bh += gridDim.x) {
    const int b = (int)(bh / H), h = (int)(bh % H);
    const long long base = (long long)b * T * stride + (long long)h * D;
    const X *qb = q + base, *kb = k + base, *vb = v + base;
    float* ck = saved + bh * nseg * 2 * DD;
    float* eb = e_all + bh * T * D;
    for (int j = 0; j < nseg; j++) {
      float *M = ck + (long long)j * 2 * DD, *S = M + DD;
      for (long long x = threadIdx.x; x < 2 * DD; x += blockDim.x) M[x] = j == 0 ? 0.0f : M[x - 2 * DD];
      __syncthreads();
      const int s1 = (j + 1) * K < T ? (j + 1) * K : T;
      for (int t = j * K; t < s1; t++) {
        if (t % chunk == 0) {  // the chunk's errors, from the memory at its start
          const int c1 = t + chunk < T ? t + chunk : T;
          for (long long p = warp; p < (long long)(c1 - t) * D; p += warps) {
            const int u = t + (int)(p / D), i = (int)(p % D);
            const X* ku = kb + (long long)u * stride;
            const float e = titans_row_dot(M, i, ku, D) - tlm::load(vb + (long long)u * stride + i);
            if (lane == 0) eb[(long long)u * D + i] = e;
          }
          __syncthreads();
        }
        const long long th = ((long long)b * T + t) * H + h;
        const float tt = theta[th], et = eta[th], keep = 1.0f - alpha[th];
        const X *kt = kb + (long long)t * stride, *qt = qb + (long long)t * stride;
        const float* e = eb + (long long)t * D;
        X* yt = y + ((long long)b * T + t) * H * D + (long long)h * D;
        // a warp per row: the row's update, then its y (the lane that wrote
        // an element is the one that reads it)
        for (int i = warp; i < D; i += warps) {
          const float c = 2.0f * tt * e[i];
          for (int jj = lane; jj < D; jj += 32) {
            const long long x = (long long)i * D + jj;
            titans_step_element(M + x, S + x, M[x], S[x], c, tlm::load(kt + jj), et, keep);
          }
          const float yi = titans_row_dot(M, i, qt, D);
          if (lane == 0) tlm::store(yt + i, yi);
        }
        __syncthreads();  // the next chunk's errors read every row
      }
    }
  }
}
extern "C" __global__ void tlm_titans_fwd(float* y, float* saved, const float* q, const float* k, const float* v,
                                          int stride, const float* theta, const float* eta, const float* alpha, int B,
                                          int T, int H, int D, int chunk) {
  titans_forward(y, saved, q, k, v, stride, theta, eta, alpha, B, T, H, D, chunk);
}
extern "C" __global__ void tlm_titans_fwd_bf16(unsigned short* y, float* saved, const unsigned short* q,
                                               const unsigned short* k, const unsigned short* v, int stride,
                                               const float* theta, const float* eta, const float* alpha, int B, int T,
                                               int H, int D, int chunk) {
  titans_forward(y, saved, q, k, v, stride, theta, eta, alpha, B, T, H, D, chunk);
}

// The sums of one token's backward, written by thread 0.
__device__ __forceinline__ void titans_write_scalars(float* dtheta, float* deta, float* dalpha, long long th, float dth,
                                                     float dn, float da) {
  if (threadIdx.x == 0) {
    dtheta[th] = -2.0f * dth;
    deta[th] = dn;
    dalpha[th] = -da;
  }
}

// One block per (b, h): segments from the last, each recomputed forward from
// its starting checkpoint into the scratch, then walked in reverse. q and k
// as in the forward: fp32 or bf16 widened; the gradients fp32.
template <typename X>
__device__ void titans_backward(float* dq, float* dk, float* dv, float* dtheta, float* deta, float* dalpha,
                                const float* dy, const float* saved, const X* q, const X* k, int stride,
                                const float* theta, const float* eta, const float* alpha, int B, int T, int H, int D,
                                int chunk, float* scratch, long long scratch_per_head) {
  const int K = titans_segment_len(chunk), nseg = (T + K - 1) / K;
  const long long DD = (long long)D * D;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const float* e_all = saved + (long long)B * H * nseg * 2 * DD;
  for (long long bh = blockIdx.x; bh < (long long)B * H; bh += gridDim.x) {
    const int b = (int)(bh / H), h = (int)(bh % H);
    const long long base = (long long)b * T * stride + (long long)h * D;
    const X *qb = q + base, *kb = k + base;
    float *dqb = dq + base, *dkb = dk + base, *dvb = dv + base;
    const float* ck = saved + bh * nseg * 2 * DD;
    const float* eb = e_all + bh * T * D;
    float* Ms = scratch + bh * scratch_per_head;
    float* Ss = Ms + (long long)(K + 1) * DD;
    float *dM = Ss + (long long)(K + 1) * DD, *dS = dM + DD, *dM0 = dS + DD;
    float *u = dM0 + DD, *de = u + D;
    for (long long x = threadIdx.x; x < 3 * DD; x += blockDim.x) dM[x] = 0.0f;  // dM, dS, dM0
    for (int j = nseg - 1; j >= 0; j--) {
      const int s0 = j * K, n = T - s0 < K ? T - s0 : K;
      // the segment's states: Ms[i], Ss[i] after token s0 + i - 1, elementwise
      // (each element's thread is the same at every token)
      for (long long x = threadIdx.x; x < DD; x += blockDim.x) {
        Ms[x] = j == 0 ? 0.0f : ck[(long long)(j - 1) * 2 * DD + x];
        Ss[x] = j == 0 ? 0.0f : ck[(long long)(j - 1) * 2 * DD + DD + x];
      }
      for (int i = 1; i <= n; i++) {
        const int t = s0 + i - 1;
        const long long th = ((long long)b * T + t) * H + h;
        const float tt = theta[th], et = eta[th], keep = 1.0f - alpha[th];
        const X* kt = kb + (long long)t * stride;
        const float* e = eb + (long long)t * D;
        float *Mi = Ms + i * DD, *Si = Ss + i * DD;
        const float *Mp = Mi - DD, *Sp = Si - DD;
        for (long long x = threadIdx.x; x < DD; x += blockDim.x) {
          const int r = (int)(x / D), c = (int)(x % D);
          titans_step_element(Mi + x, Si + x, Mp[x], Sp[x], 2.0f * tt * e[r], tlm::load(kt + c), et, keep);
        }
      }
      __syncthreads();
      for (int t = s0 + n - 1; t >= s0; t--) {
        const int i = t - s0 + 1, c0 = t - t % chunk;
        const float *Mt = Ms + i * DD, *Mp = Mt - DD, *Sp = Ss + (i - 1) * DD;
        const float* M0 = Ms + (long long)(c0 - s0) * DD;  // M_{c0-1}
        const long long ts = (long long)t * stride, th = ((long long)b * T + t) * H + h;
        const X *qt = qb + ts, *kt = kb + ts;
        const float* et = eb + (long long)t * D;
        const float* dyt = dy + ((long long)b * T + t) * H * D + (long long)h * D;
        const float m2th = -2.0f * theta[th];
        // 1: the totals dM, dS at t (elementwise), and the Frobenius products
        float da = 0.0f, dn = 0.0f;
        for (long long x = threadIdx.x; x < DD; x += blockDim.x) {
          const int r = (int)(x / D), c = (int)(x % D);
          const float m = dM[x] + dyt[r] * tlm::load(qt + c);
          const float s = dS[x] + m;
          dM[x] = m;
          dS[x] = s;
          da += m * Mp[x];
          dn += s * Sp[x];
        }
        da = tlm::block_sum(da);  // its barriers also publish dM and dS
        dn = tlm::block_sum(dn);
        // 2: u = dS k_t (a warp per row), de = -2 theta u, dv = -de
        for (int r = warp; r < D; r += warps) {
          const float ur = titans_row_dot(dS, r, kt, D);
          if (lane == 0) {
            u[r] = ur;
            de[r] = m2th * ur;
            dvb[ts + r] = -(m2th * ur);
          }
        }
        __syncthreads();
        float dth = 0.0f;
        for (int r = threadIdx.x; r < D; r += blockDim.x) dth += et[r] * u[r];
        dth = tlm::block_sum(dth);
        titans_write_scalars(dtheta, deta, dalpha, th, dth, dn, da);
        // 3: dq = M_t^T dy, dk = -2 theta dS^T e + M0^T de (a thread per
        // column, rows in order)
        for (int c = threadIdx.x; c < D; c += blockDim.x) {
          float aq = 0.0f, ak = 0.0f;
          for (int r = 0; r < D; r++) {
            const long long x = (long long)r * D + c;
            aq += dyt[r] * Mt[x];
            ak += m2th * et[r] * dS[x];
          }
          for (int r = 0; r < D; r++) ak += de[r] * M0[(long long)r * D + c];
          dqb[ts + c] = aq;
          dkb[ts + c] = ak;
        }
        __syncthreads();  // dS is read above before it is scaled below
                          // 4: dM0 += de k^T, then the paths back to t-1 (and M0 = M_{t-1} at
                          // the chunk's first token)
        const float keep = 1.0f - alpha[th], etat = eta[th];
        const bool start = t == c0;
        for (long long x = threadIdx.x; x < DD; x += blockDim.x) {
          const int r = (int)(x / D), c = (int)(x % D);
          const float m0 = dM0[x] + de[r] * tlm::load(kt + c);
          float m = dM[x] * keep;
          dS[x] *= etat;
          if (start) {
            m += m0;
            dM0[x] = 0.0f;
          } else {
            dM0[x] = m0;
          }
          dM[x] = m;
        }
        // the next token's step 1 touches only this thread's elements; its
        // block_sum barriers come before anyone reads another's
      }
      __syncthreads();  // the next segment overwrites Ms, Ss
    }
  }
}
extern "C" __global__ void tlm_titans_bwd(float* dq, float* dk, float* dv, float* dtheta, float* deta, float* dalpha,
                                          const float* dy, const float* saved, const float* q, const float* k,
                                          int stride, const float* theta, const float* eta, const float* alpha, int B,
                                          int T, int H, int D, int chunk, float* scratch, long long scratch_per_head) {
  titans_backward(dq, dk, dv, dtheta, deta, dalpha, dy, saved, q, k, stride, theta, eta, alpha, B, T, H, D, chunk,
                  scratch, scratch_per_head);
}
extern "C" __global__ void tlm_titans_bwd_bf16(float* dq, float* dk, float* dv, float* dtheta, float* deta,
                                               float* dalpha, const float* dy, const float* saved,
                                               const unsigned short* q, const unsigned short* k, int stride,
                                               const float* theta, const float* eta, const float* alpha, int B, int T,
                                               int H, int D, int chunk, float* scratch, long long scratch_per_head) {
  titans_backward(dq, dk, dv, dtheta, deta, dalpha, dy, saved, q, k, stride, theta, eta, alpha, B, T, H, D, chunk,
                  scratch, scratch_per_head);
}
