// The Titans neural memory on the device: the CPU op's chunk-parallel form
// (runtime/ops/titans.c, whose comment derives it and its backward), its
// saved layout and segment recomputation, one block per (batch, head).
//
// Per (b, h): a D x D memory M and momentum S, and per token t
//   e_t = M0 k_t - v_t   (M0: the memory at the start of t's chunk)
//   S_t = eta_t S_{t-1} - 2 theta_t e_t k_t^T,   M_t = (1 - alpha_t) M_{t-1} + S_t,   y_t = M_t q_t
// Taken a block of n <= 64 tokens at a time (a chunk, or a piece of a
// longer one), the recurrence unrolls into matrix products of the block's
// q, k, e and dy rows with the state at the block's start and with decay
// products (ops/titans.c): six matrix products a block forward (and one a
// chunk for its errors) and seventeen backward (and two more a block the
// backward recomputes), instead of a D x D update and two barriers a token.
// A product is a 64 x 64 tile at a time from shared memory, 4 x 4 elements
// a thread (titans_products); every element's sum runs in one thread in a
// fixed order, every reduction over threads in a fixed order too, and the
// decays and the gates' walk in double, as ops/titans.c's, so the bits
// depend on nothing but the inputs (not on the grid).
//
// saved (as on the CPU): [B,H, nseg, 2, D, D] the (M, S) after each segment of
// K = chunk*ceil(16/chunk) tokens (the forward's running state lives in its
// segment's slot), then [B,H,T,D] the errors e_t.
// The backward's scratch, per (b, h): the CPU op's per-thread scratch
// (tlm_titans_scratch_floats(D, chunk) floats, the same layout: the states
// at the segment's block starts, the running gradients Gm, Gs, dM0, then
// the block's n x n and n x D products), rounded up to an even count, then
// two n x n doubles of the gates' walk (mixer_ops.c's per-head size).

constexpr int TITANS_BLK = 64;       // most tokens per block (ops/titans.c's BLK)
constexpr int TITANS_THREADS = 256;  // TLM_GPU_TITANS_BLOCK: a 64 x 64 tile, 4 x 4 a thread
constexpr int TITANS_TK = 16;        // the k of one staged slice of the factors
static_assert(TITANS_THREADS == 256, "titans_products' 64 x 64 tile is 16 x 16 threads of 4 x 4");

__device__ __forceinline__ int titans_segment_len(int chunk) { return chunk * ((16 + chunk - 1) / chunk); }
__device__ __forceinline__ int titans_block_len(int chunk) { return chunk < TITANS_BLK ? chunk : TITANS_BLK; }
// The end of the block starting at t, within the segment ending at s1: the
// chunk's end, at most 64 tokens on.
__device__ __forceinline__ int titans_block_end(int t, int s1, int chunk) {
  const int c1 = (t / chunk + 1) * chunk, t1 = t + TITANS_BLK < c1 ? t + TITANS_BLK : c1;
  return t1 < s1 ? t1 : s1;
}

// A 16 x 64 slice of each factor of a product (padded: no bank conflicts).
struct titans_tiles {
  float a[TITANS_TK][TITANS_BLK + 1];
  float b[TITANS_TK][TITANS_BLK + 1];
};

// One product of a sum: sum over kk < k of A(i, kk) B(kk, j), A and B read
// through functions of the indices (which may scale or mask what they read).
// a_k_fastest: A's consecutive kk are adjacent in memory (else its
// consecutive i are); b_j_fastest: B's consecutive j are. They choose which
// index consecutive threads take when staging, so a warp reads adjacent
// words.
template <typename LA, typename LB>
struct titans_term {
  int k;
  LA a;
  bool a_k_fastest;
  LB b;
  bool b_j_fastest;
};
template <typename LA, typename LB>
__device__ __forceinline__ titans_term<LA, LB> titans_product(int k, LA a, bool a_k_fastest, LB b, bool b_j_fastest) {
  return titans_term<LA, LB>{k, a, a_k_fastest, b, b_j_fastest};
}

// Adds one term's products to this thread's 4 x 4 elements (rows tr + 16 r,
// columns tc + 16 c of the tile at (i0, j0)) of an m x n result.
template <typename LA, typename LB>
__device__ void titans_accumulate(float (&acc)[4][4], titans_tiles& s, int i0, int j0, int m, int n,
                                  const titans_term<LA, LB>& term) {
  const int tid = threadIdx.x, tr = tid / 16, tc = tid % 16;
  for (int k0 = 0; k0 < term.k; k0 += TITANS_TK) {
    for (int x = tid; x < TITANS_TK * TITANS_BLK; x += TITANS_THREADS) {
      int kk = term.a_k_fastest ? x % TITANS_TK : x / TITANS_BLK;
      const int i = term.a_k_fastest ? x / TITANS_TK : x % TITANS_BLK;
      s.a[kk][i] = i0 + i < m && k0 + kk < term.k ? term.a(i0 + i, k0 + kk) : 0.0f;
      kk = term.b_j_fastest ? x / TITANS_BLK : x % TITANS_TK;
      const int j = term.b_j_fastest ? x % TITANS_BLK : x / TITANS_TK;
      s.b[kk][j] = j0 + j < n && k0 + kk < term.k ? term.b(k0 + kk, j0 + j) : 0.0f;
    }
    __syncthreads();
    const int kn = term.k - k0 < TITANS_TK ? term.k - k0 : TITANS_TK;
    for (int kk = 0; kk < kn; kk++) {
      float av[4], bv[4];
      for (int r = 0; r < 4; r++) av[r] = s.a[kk][tr + 16 * r];
      for (int c = 0; c < 4; c++) bv[c] = s.b[kk][tc + 16 * c];
      for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++) acc[r][c] = fmaf(av[r], bv[c], acc[r][c]);
    }
    __syncthreads();
  }
}

// out(i, j, sum) once for every element of an m x n sum of products, the
// terms in order, each over its k in order, in the one thread that owns
// the element (the same thread for the same m, n: an out may read back
// what an earlier call's out wrote to the same element). Every thread of
// the block calls it; it ends with a barrier, so what out wrote is
// visible to the block after.
template <typename Out, typename... Terms>
__device__ void titans_products(titans_tiles& s, int m, int n, Out out, const Terms&... terms) {
  const int tr = threadIdx.x / 16, tc = threadIdx.x % 16;
  for (int i0 = 0; i0 < m; i0 += TITANS_BLK) {
    for (int j0 = 0; j0 < n; j0 += TITANS_BLK) {
      float acc[4][4] = {};
      (titans_accumulate(acc, s, i0, j0, m, n, terms), ...);
      for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++) {
          const int i = i0 + tr + 16 * r, j = j0 + tc + 16 * c;
          if (i < m && j < n) out(i, j, acc[r][c]);
        }
    }
  }
  __syncthreads();
}

// One block's gates and decay products (ops/titans.c's block_gates and
// decays): eta, keep = 1 - alpha and g = -2 theta of its tokens; A, Bk, Ab
// (one thread's running products), and the columns of a and W (thread u
// walks column u down the block in double, as the CPU's running rows do:
// the same operations on the same values).
struct titans_block {
  float et[TITANS_BLK], kp[TITANS_BLK], g[TITANS_BLK];
  float A[TITANS_BLK], Bk[TITANS_BLK], Ab[TITANS_BLK], al[TITANS_BLK], wl[TITANS_BLK];
};
__device__ void titans_gates(titans_block& v, const float* theta, const float* eta, const float* alpha, long long th0,
                             int H, int n) {
  for (int t = threadIdx.x; t < n; t += blockDim.x) {
    const long long th = th0 + (long long)t * H;
    v.et[t] = eta[th];
    v.kp[t] = 1.0f - alpha[th];
    v.g[t] = -2.0f * theta[th];
  }
  __syncthreads();
}
// W (and a, when not null) [n, n], row t, zero above the diagonal.
__device__ void titans_decays(titans_block& v, float* W, float* a, int n) {
  const int u = threadIdx.x;
  if (u < n) {
    double ar = 1.0, wr = 1.0;
    for (int t = 0; t < n; t++) {
      if (t > u) {
        ar *= v.et[t];
        wr = v.kp[t] * wr + ar;
      }
      W[t * n + u] = t >= u ? (float)wr : 0.0f;
      if (a) a[t * n + u] = t >= u ? (float)ar : 0.0f;
    }
    v.al[u] = (float)ar;
    v.wl[u] = (float)wr;
  }
  if (threadIdx.x == TITANS_THREADS - 1) {
    double Ar = 1.0, Br = 1.0, Abr = 0.0;
    for (int t = 0; t < n; t++) {
      Ar *= v.et[t];
      Br *= v.kp[t];
      Abr = v.kp[t] * Abr + Ar;
      v.A[t] = (float)Ar;
      v.Bk[t] = (float)Br;
      v.Ab[t] = (float)Abr;
    }
  }
  __syncthreads();
}

// One block of n tokens from the state (Mc, Sc) at its start, its gates
// in v (titans_gates), e its errors [n, D] (from its chunk's M0), q, k its
// first rows (stride apart):
//   y_t = Bk_t Mc q_t + Ab_t Sc q_t + sum_{u<=t} W_{t,u} g_u (k_u . q_t) e_u
//   M' = Bk_{n-1} Mc + Ab_{n-1} Sc + E^T diag(wl g) K,   S' = A_{n-1} Sc + E^T diag(al g) K
// y (rows ldy apart) when not null, with P [n, n] for the middle sum; the
// end state to (M, S), which may be (Mc, Sc) (each element read and
// written by one thread, M before S). The forward and the backward's
// recomputation both step through here, so they agree bit for bit.
template <typename X>
__device__ void titans_block_forward(titans_tiles& s, titans_block& v, X* y, long long ldy, float* M, float* S,
                                     const float* Mc, const float* Sc, const X* q, const X* k, int stride,
                                     const float* e, float* W, float* P, int n, int D) {
  titans_decays(v, W, nullptr, n);
  auto q_row = [&](int t, int j) { return tlm::load(q + (long long)t * stride + j); };
  auto k_col = [&](int j, int u) { return tlm::load(k + (long long)u * stride + j); };
  if (y) {
    titans_products(
        s, n, n, [&](int t, int u, float qk) { P[t * n + u] = u <= t ? W[t * n + u] * v.g[u] * qk : 0.0f; },
        titans_product(D, q_row, true, k_col, false));
    titans_products(
        s, n, D, [&](int t, int i, float sum) { tlm::store(y + t * ldy + i, sum); },
        titans_product(
            D, [&](int t, int j) { return v.Bk[t] * q_row(t, j); }, true,
            [&](int j, int i) { return Mc[(long long)i * D + j]; }, false),
        titans_product(
            D, [&](int t, int j) { return v.Ab[t] * q_row(t, j); }, true,
            [&](int j, int i) { return Sc[(long long)i * D + j]; }, false),
        titans_product(
            n, [&](int t, int u) { return P[t * n + u]; }, true, [&](int u, int i) { return e[(long long)u * D + i]; },
            true));
  }
  const float Bn = v.Bk[n - 1], Abn = v.Ab[n - 1], An = v.A[n - 1];
  auto e_col = [&](int i, int u) { return e[(long long)u * D + i]; };
  titans_products(
      s, D, D,
      [&](int i, int j, float sum) {
        const long long x = (long long)i * D + j;
        M[x] = Bn * Mc[x] + Abn * Sc[x] + sum;
      },
      titans_product(
          n, e_col, false, [&](int u, int j) { return v.wl[u] * v.g[u] * tlm::load(k + (long long)u * stride + j); },
          true));
  titans_products(
      s, D, D,
      [&](int i, int j, float sum) {
        const long long x = (long long)i * D + j;
        S[x] = An * Sc[x] + sum;
      },
      titans_product(
          n, e_col, false, [&](int u, int j) { return v.al[u] * v.g[u] * tlm::load(k + (long long)u * stride + j); },
          true));
}

// The errors of one chunk's n tokens, E [n, D] = K M0^T - V.
template <typename X>
__device__ void titans_chunk_errors(titans_tiles& s, float* e, const float* M0, const X* k, const X* v, int stride,
                                    int n, int D) {
  titans_products(
      s, n, D,
      [&](int u, int i, float sum) { e[(long long)u * D + i] = sum - tlm::load(v + (long long)u * stride + i); },
      titans_product(
          D, [&](int u, int j) { return tlm::load(k + (long long)u * stride + j); }, true,
          [&](int j, int i) { return M0[(long long)i * D + j]; }, false));
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
  if (blockDim.x != TITANS_THREADS) __trap();
  __shared__ titans_tiles s;
  __shared__ titans_block gv;
  __shared__ float W[TITANS_BLK * TITANS_BLK], P[TITANS_BLK * TITANS_BLK];
  const int K = titans_segment_len(chunk), nseg = (T + K - 1) / K;
  const long long DD = (long long)D * D;
  float* e_all = saved + (long long)B * H * nseg * 2 * DD;
  for (long long bh = blockIdx.x; bh < (long long)B * H; bh += gridDim.x) {
    const int b = (int)(bh / H), h = (int)(bh % H);
    const long long base = (long long)b * T * stride + (long long)h * D;
    const X *qb = q + base, *kb = k + base, *vb = v + base;
    float* ck = saved + bh * nseg * 2 * DD;
    float* eb = e_all + bh * T * D;
    for (int j = 0; j < nseg; j++) {
      // the running state lives in this segment's slot: the first block
      // reads the previous slot (or zeros), the others update it in place
      float *M = ck + (long long)j * 2 * DD, *S = M + DD;
      if (j == 0)
        for (long long x = threadIdx.x; x < 2 * DD; x += blockDim.x) M[x] = 0.0f;
      __syncthreads();
      const float* Mi = j == 0 ? M : M - 2 * DD;
      const float* Si = Mi + DD;
      const int s1 = (j + 1) * K < T ? (j + 1) * K : T;
      for (int t = j * K; t < s1;) {
        const long long ts = (long long)t * stride;
        if (t % chunk == 0) {
          const int c1 = t + chunk < T ? t + chunk : T;
          titans_chunk_errors(s, eb + (long long)t * D, Mi, kb + ts, vb + ts, stride, c1 - t, D);
        }
        const int t1 = titans_block_end(t, s1, chunk), n = t1 - t;
        titans_gates(gv, theta, eta, alpha, ((long long)b * T + t) * H + h, H, n);
        titans_block_forward(s, gv, y + ((long long)b * T + t) * H * D + (long long)h * D, (long long)H * D, M, S, Mi,
                             Si, qb + ts, kb + ts, stride, eb + (long long)t * D, W, P, n, D);
        Mi = M;
        Si = S;
        t = t1;
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

// The three Frobenius products <Gm, Mc>, <Gm, Sc>, <Gs, Sc> in double (as
// the CPU's): each thread's share in element order, then a fixed pairwise
// tree over the threads (eight barriers; one thread adding the 768 shares
// in a row would wait on each double add).
__device__ void titans_frobenius(double (&out)[3], const float* Gm, const float* Gs, const float* Mc, const float* Sc,
                                 long long DD) {
  __shared__ double part[3][TITANS_THREADS];
  double a = 0.0, b = 0.0, c = 0.0;
  for (long long x = threadIdx.x; x < DD; x += blockDim.x) {
    a += (double)Gm[x] * Mc[x];
    b += (double)Gm[x] * Sc[x];
    c += (double)Gs[x] * Sc[x];
  }
  part[0][threadIdx.x] = a;
  part[1][threadIdx.x] = b;
  part[2][threadIdx.x] = c;
  __syncthreads();
  for (int half = TITANS_THREADS / 2; half > 0; half /= 2) {
    if ((int)threadIdx.x < half)
      for (int r = 0; r < 3; r++) part[r][threadIdx.x] += part[r][threadIdx.x + half];
    __syncthreads();
  }
  for (int r = 0; r < 3; r++) out[r] = part[r][0];
  __syncthreads();
}

// The backward's per-block vectors besides the gates: e_u . Gm k_u,
// e_u . Gs k_u, dy_s . Mc q_s, dy_s . Sc q_s, and the gates' walk's terms
// in Mc and Sc per token (double).
struct titans_block_grads {
  float gm[TITANS_BLK], gs[TITANS_BLK], xm[TITANS_BLK], xs[TITANS_BLK];
  double da[TITANS_BLK], dn[TITANS_BLK];
};

// The per-block buffers of the backward (the scratch's, after Gm, Gs, dM0).
struct titans_work {
  float *QK, *dYE, *W, *a;         // n x n
  float *T1, *T2, *U, *KGm, *KGs;  // n x D
  double *cm, *cs;                 // n x n: the gates' walk's terms in the e_u k_u^T
};

// The backward of titans_block_forward for one block (ops/titans.c's
// block_backward; its header comment has the equations): Gm, Gs hold
// dL/dM, dL/dS at the block's end on entry and at its start on return;
// dM0 gathers dL/dM0 through the errors until the chunk's first block
// (chunk_start) adds it to Gm. Writes the block's rows of dq, dk, dv
// (stride apart) and its scalars (H apart).
template <typename X>
__device__ void titans_block_backward(titans_tiles& s, titans_block& v, titans_block_grads& bg, const titans_work& w,
                                      float* dq, float* dk, float* dv, int stride, float* dth, float* deta,
                                      float* dalpha, int H, const float* dy, long long ldy, const float* Mc,
                                      const float* Sc, const float* M0, float* Gm, float* Gs, float* dM0,
                                      bool chunk_start, const X* q, const X* k, const float* e, int n, int D) {
  const long long DD = (long long)D * D;
  float *QK = w.QK, *dYE = w.dYE, *W = w.W, *a = w.a, *U = w.U, *KGm = w.KGm, *KGs = w.KGs;
  titans_decays(v, W, a, n);
  auto q_row = [&](int t, int j) { return tlm::load(q + (long long)t * stride + j); };
  auto k_row = [&](int u, int j) { return tlm::load(k + (long long)u * stride + j); };
  auto k_col = [&](int j, int u) { return k_row(u, j); };
  auto dy_row = [&](int t, int i) { return dy[t * ldy + i]; };
  auto e_row = [&](int u, int i) { return e[(long long)u * D + i]; };
  auto mat_t = [&](const float* A) { return [=](int j, int i) { return A[(long long)i * D + j]; }; };  // A^T's (j, i)
  auto mat = [&](const float* A) { return [=](int r, int i) { return A[(long long)r * D + i]; }; };
  auto to = [&](float* X_, int ld) { return [=](int r, int c, float sum) { X_[r * ld + c] = sum; }; };
  // the block's products with the state and with each other
  titans_products(s, n, n, to(QK, n), titans_product(D, q_row, true, k_col, false));
  titans_products(s, n, n, to(dYE, n),
                  titans_product(D, dy_row, true, [&](int i, int u) { return e_row(u, i); }, false));
  titans_products(s, n, D, to(KGm, D), titans_product(D, k_row, true, mat_t(Gm), false));
  titans_products(s, n, D, to(KGs, D), titans_product(D, k_row, true, mat_t(Gs), false));
  titans_products(s, n, D, to(w.T1, D), titans_product(D, q_row, true, mat_t(Mc), false));
  titans_products(s, n, D, to(w.T2, D), titans_product(D, q_row, true, mat_t(Sc), false));
  // U_u = dS_u k_u = sum_{s>=u} W_{s,u} (q_s . k_u) dy_s + wl_u Gm k_u + al_u Gs k_u
  titans_products(
      s, n, D,
      [&](int u, int i, float sum) {
        const long long x = (long long)u * D + i;
        U[x] = sum + (v.wl[u] * KGm[x] + v.al[u] * KGs[x]);
      },
      titans_product(
          n, [&](int u, int t) { return t >= u ? W[t * n + u] * QK[t * n + u] : 0.0f; }, false, dy_row, true));
  // a warp per token (lanes over the row, then the warp's fixed
  // butterfly): dtheta_u = -2 e_u . U_u, the gates' walk's e_u . Gm k_u
  // and e_u . Gs k_u, and dy_s . Mc q_s, dy_s . Sc q_s
  const int lane = threadIdx.x % 32;
  for (int u = threadIdx.x / 32; u < n; u += blockDim.x / 32) {
    float d = 0.0f, m = 0.0f, c = 0.0f, xm = 0.0f, xs = 0.0f;
    for (int i = lane; i < D; i += 32) {
      const long long x = (long long)u * D + i;
      d += e[x] * U[x];
      m += e[x] * KGm[x];
      c += e[x] * KGs[x];
      xm += dy[u * ldy + i] * w.T1[x];
      xs += dy[u * ldy + i] * w.T2[x];
    }
    d = tlm::warp_sum(d);
    m = tlm::warp_sum(m);
    c = tlm::warp_sum(c);
    xm = tlm::warp_sum(xm);
    xs = tlm::warp_sum(xs);
    if (lane == 0) {
      dth[(long long)u * H] = -2.0f * d;
      bg.gm[u] = m;
      bg.gs[u] = c;
      bg.xm[u] = xm;
      bg.xs[u] = xs;
    }
  }
  __syncthreads();
  // U becomes de_u = g_u U_u; dv_u = -de_u
  for (int x = threadIdx.x; x < n * D; x += blockDim.x) {
    const int u = x / D, i = x % D;
    const float de = U[x] * v.g[u];
    U[x] = de;
    dv[(long long)u * stride + i] = -de;
  }
  __syncthreads();
  // dk_u = g_u [sum_{s>=u} W_{s,u} (dy_s . e_u) q_s + wl_u Gm^T e_u + al_u Gs^T e_u] + M0^T de_u
  auto p2 = [&](int t, int u) { return t >= u ? W[t * n + u] * dYE[t * n + u] : 0.0f; };
  titans_products(
      s, n, D, [&](int u, int i, float sum) { dk[(long long)u * stride + i] = v.g[u] * sum; },
      titans_product(
          n, [&](int u, int t) { return p2(t, u); }, false, q_row, true),
      titans_product(
          D, [&](int u, int r) { return v.wl[u] * e_row(u, r); }, true, mat(Gm), true),
      titans_product(D, [&](int u, int r) { return v.al[u] * e_row(u, r); }, true, mat(Gs), true));
  titans_products(
      s, n, D, [&](int u, int i, float sum) { dk[(long long)u * stride + i] += sum; },
      titans_product(D, [&](int u, int r) { return U[(long long)u * D + r]; }, true, mat(M0), true));
  // dq_t = Bk_t Mc^T dy_t + Ab_t Sc^T dy_t + sum_{u<=t} W_{t,u} g_u (e_u . dy_t) k_u
  titans_products(
      s, n, D, [&](int t, int i, float sum) { dq[(long long)t * stride + i] = sum; },
      titans_product(
          D, [&](int t, int r) { return v.Bk[t] * dy_row(t, r); }, true, mat(Mc), true),
      titans_product(
          D, [&](int t, int r) { return v.Ab[t] * dy_row(t, r); }, true, mat(Sc), true),
      titans_product(n, [&](int t, int u) { return p2(t, u) * v.g[u]; }, true, k_row, true));
  // the gates: deta_t = <dS_t, S_{t-1}>, dalpha_t = -<dM_t, M_{t-1}>,
  // walked back in the basis {Mc, Sc, e_u k_u^T}: thread u walks the
  // coordinates in e_u k_u^T (u < t), the last thread those in Mc and Sc,
  // each term kept in double; then a thread per token sums its row in u
  // order, as the CPU does
  double fro[3];
  titans_frobenius(fro, Gm, Gs, Mc, Sc, DD);
  const int u = threadIdx.x;
  if (u < n - 1) {
    double fm = 0.0, fs = 0.0;
    for (int t = n - 1; t > u; t--) {
      const double lq = (double)dYE[t * n + u] * QK[t * n + u];
      if (t == n - 1) {
        fm = lq + bg.gm[u];
        fs = fm + bg.gs[u];
      } else {
        fm = lq + (double)v.kp[t + 1] * fm;
        fs = fm + (double)v.et[t + 1] * fs;
      }
      w.cm[t * n + u] = (double)W[(t - 1) * n + u] * v.g[u] * fm;
      w.cs[t * n + u] = (double)a[(t - 1) * n + u] * v.g[u] * fs;
    }
  }
  if (threadIdx.x == TITANS_THREADS - 1) {
    double m0 = 0.0, m1 = 0.0, s1 = 0.0;
    for (int t = n - 1; t >= 0; t--) {
      if (t == n - 1) {
        m0 = bg.xm[t] + fro[0];
        m1 = bg.xs[t] + fro[1];
        s1 = m1 + fro[2];
      } else {
        const double kq = v.kp[t + 1], eq = v.et[t + 1];
        m0 = bg.xm[t] + kq * m0;
        m1 = bg.xs[t] + kq * m1;
        s1 = m1 + eq * s1;
      }
      bg.da[t] = t == 0 ? m0 : (double)v.Bk[t - 1] * m0 + (double)v.Ab[t - 1] * m1;
      bg.dn[t] = t == 0 ? s1 : (double)v.A[t - 1] * s1;
    }
  }
  __syncthreads();
  for (int t = threadIdx.x; t < n; t += blockDim.x) {
    double da = bg.da[t], dn = bg.dn[t];
    for (int uu = 0; uu < t; uu++) {
      da += w.cm[t * n + uu];
      dn += w.cs[t * n + uu];
    }
    dalpha[(long long)t * H] = (float)-da;
    deta[(long long)t * H] = (float)dn;
  }
  // to the block's start: dM0 += de^T K, dSc = A dS' + Ab dM' + dY^T diag(Ab) Q,
  // dMc = Bk dM' + dY^T diag(Bk) Q (+ the chunk's dM0 at its start)
  titans_products(
      s, D, D, [&](int i, int j, float sum) { dM0[(long long)i * D + j] += sum; },
      titans_product(n, [&](int i, int uu) { return U[(long long)uu * D + i]; }, false, k_row, true));
  const float Bn = v.Bk[n - 1], Abn = v.Ab[n - 1], An = v.A[n - 1];
  auto dy_col = [&](int i, int t) { return dy_row(t, i); };
  titans_products(
      s, D, D,
      [&](int i, int j, float sum) {
        const long long x = (long long)i * D + j;
        Gs[x] = An * Gs[x] + Abn * Gm[x] + sum;
      },
      titans_product(n, dy_col, false, [&](int t, int j) { return v.Ab[t] * q_row(t, j); }, true));
  titans_products(
      s, D, D,
      [&](int i, int j, float sum) {
        const long long x = (long long)i * D + j;
        float m = Bn * Gm[x] + sum;
        if (chunk_start) {
          m += dM0[x];
          dM0[x] = 0.0f;
        }
        Gm[x] = m;
      },
      titans_product(n, dy_col, false, [&](int t, int j) { return v.Bk[t] * q_row(t, j); }, true));
}

// One block per (b, h): segments from the last; each segment's block-start
// states recomputed forward from its checkpoint into the scratch (with the
// saved errors), then its blocks walked in reverse. q and k as in the
// forward: fp32 or bf16 widened; the gradients fp32.
template <typename X>
__device__ void titans_backward(float* dq, float* dk, float* dv, float* dtheta, float* deta, float* dalpha,
                                const float* dy, const float* saved, const X* q, const X* k, int stride,
                                const float* theta, const float* eta, const float* alpha, int B, int T, int H, int D,
                                int chunk, float* scratch, long long scratch_per_head) {
  if (blockDim.x != TITANS_THREADS) __trap();
  __shared__ titans_tiles s;
  __shared__ titans_block gv;
  __shared__ titans_block_grads bg;
  const int K = titans_segment_len(chunk), nseg = (T + K - 1) / K, nb = titans_block_len(chunk);
  const int per = (chunk + TITANS_BLK - 1) / TITANS_BLK;  // blocks per whole chunk
  const long long DD = (long long)D * D;
  const float* e_all = saved + (long long)B * H * nseg * 2 * DD;
  for (long long bh = blockIdx.x; bh < (long long)B * H; bh += gridDim.x) {
    const int b = (int)(bh / H), h = (int)(bh % H);
    const long long base = (long long)b * T * stride + (long long)h * D;
    const X *qb = q + base, *kb = k + base;
    float *dqb = dq + base, *dkb = dk + base, *dvb = dv + base;
    const float* ck = saved + bh * nseg * 2 * DD;
    const float* eb = e_all + bh * T * D;
    float* Ms = scratch + bh * scratch_per_head;  // Ms[i], Ss[i]: the state at the segment's block i's start
    float* Ss = Ms + (long long)(K + 1) * DD;
    float *Gm = Ss + (long long)(K + 1) * DD, *Gs = Gm + DD, *dM0 = Gs + DD;
    float* x = dM0 + DD + 2 * (long long)D;
    titans_work w;
    w.QK = x, w.dYE = x + nb * nb, w.W = x + 2 * nb * nb, w.a = x + 3 * nb * nb;
    x += 5 * nb * nb;
    w.T1 = x, w.T2 = x + nb * D, w.U = x + 2 * nb * D, w.KGm = x + 3 * nb * D, w.KGs = x + 4 * nb * D;
    const long long layout = (x - Ms) + 5LL * nb * D, doubles_at = (layout + 1) / 2 * 2;
    // mixer_ops.c's size (even, so the doubles are aligned), not the CPU's
    if (scratch_per_head % 2 || scratch_per_head < doubles_at + 4LL * nb * nb) __trap();
    w.cm = (double*)(Ms + doubles_at);
    w.cs = w.cm + nb * nb;
    for (long long i = threadIdx.x; i < 3 * DD; i += blockDim.x) Gm[i] = 0.0f;  // Gm, Gs, dM0
    for (int j = nseg - 1; j >= 0; j--) {
      const int s0 = j * K, s1 = T < s0 + K ? T : s0 + K;
      for (long long i = threadIdx.x; i < DD; i += blockDim.x) {
        Ms[i] = j == 0 ? 0.0f : ck[(long long)(j - 1) * 2 * DD + i];
        Ss[i] = j == 0 ? 0.0f : ck[(long long)(j - 1) * 2 * DD + DD + i];
      }
      __syncthreads();
      int nblk = 0;
      for (int t = s0; t < s1; nblk++) {
        const int t1 = titans_block_end(t, s1, chunk), n = t1 - t;
        if (t1 < s1) {
          const long long ts = (long long)t * stride;
          titans_gates(gv, theta, eta, alpha, ((long long)b * T + t) * H + h, H, n);
          titans_block_forward<X>(s, gv, nullptr, 0, Ms + (nblk + 1) * DD, Ss + (nblk + 1) * DD, Ms + nblk * DD,
                                  Ss + nblk * DD, qb + ts, kb + ts, stride, eb + (long long)t * D, w.W, nullptr, n, D);
        }
        t = t1;
      }
      for (int i = nblk - 1; i >= 0; i--) {  // block i is piece i % per of chunk i / per
        const int t = s0 + (i / per) * chunk + (i % per) * TITANS_BLK, i0 = i - i % per;
        const int t1 = titans_block_end(t, s1, chunk), n = t1 - t;
        const long long ts = (long long)t * stride, th0 = ((long long)b * T + t) * H + h;
        titans_gates(gv, theta, eta, alpha, th0, H, n);
        titans_block_backward(s, gv, bg, w, dqb + ts, dkb + ts, dvb + ts, stride, dtheta + th0, deta + th0,
                              dalpha + th0, H, dy + ((long long)b * T + t) * H * D + (long long)h * D, (long long)H * D,
                              Ms + i * DD, Ss + i * DD, Ms + i0 * DD, Gm, Gs, dM0, i == i0, qb + ts, kb + ts,
                              eb + (long long)t * D, n, D);
      }
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
