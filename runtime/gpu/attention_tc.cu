// Causal multi-head softmax attention on the tensor cores (--precision
// bf16), FlashAttention-2 style: q, k, v in bf16, every matrix product an
// mma.sync m16n8k16 (mma.cuh) with fp32 accumulation, the softmax in fp32.
// The same equations, layouts and saved tensor as attention.cu: q, k, v
// (and dq, dk, dv) head slices at ((b T + t) stride + h D), y and dy
// [B,T,H,D], y in bf16 (what tlm_attention_fwd_bf16 writes), and one
// log-sum-exp per token and head, lse [B,T,H] in fp32.
//
// Forward: a block per (b, h, tile of attention_tc_BQ = 64 query rows),
// striding over them; each warp owns 16 query rows (4 warps), or at head
// size 64 from sm_90 on 32 (2 warps: attention_tc_row_groups), whose Q
// fragments it keeps in registers for the whole walk over the key tiles (64
// keys each, up to the diagonal). Per key tile, the block stages K and V in
// shared memory by cp.async (rows padded by 16 bytes so that ldmatrix's
// eight rows fall in different banks; in two stages, the next tile's copies
// in flight while this one's products run: dynamic shared memory, 36 KiB at
// head size 64 and 68 KiB at 128), then each
// warp (attention_tc_fwd_tile):
//   S = Q K^T        B fragments of K by ldmatrix (K is n-major: k = the
//                    head dimension is contiguous): attention_tc_products
//   online softmax   each lane holds 2 rows x 16 columns of S a group of
//                    16 rows: the row max over the row's 4 lanes by
//                    shuffles, P = 2^(S c - m c) in fp32 (c = log2(e) /
//                    sqrt(D)), the lane's share of the row sum in fp32
//   Y += P V         P's accumulator fragments are, two key blocks at a
//                    time, exactly the A fragments of the next mma (the
//                    FlashAttention-2 register reuse), rounded to bf16; B
//                    fragments of V by ldmatrix.trans (V is k-major):
//                    attention_tc_accumulate
// and at the end y = Y / l, rounded once to bf16, and lse = (m c + log2 l)
// ln 2.
// The row sum l is of the fp32 P, P V of P rounded to bf16: that rounding
// is the main difference from the fp32 kernel (gpu.attention_tc's bound).
//
// Backward, three kernels without atomics as attention.cu's, recomputing
// P = exp(S - lse) tile by tile, with D_t = dy_t . y_t (dy rounded to bf16,
// as the products take it; bf16 y) and dS = P (dP - D) / sqrt(D), dP = dY
// V^T; dy is rounded to bf16 for the products:
//   prep: a warp per (b, t, h) row: dy rounded to bf16 (dy16) and D_t
//       (dot), once per row, into the caller's scratch (FlashAttention-2's
//       preprocessing): the other two read them, and stage dy16 by cp.async
//   dq: a block per query tile, each warp 16 query rows (32 at D = 64 on
//       sm_90: attention_tc_row_groups) with Q and dY in registers, K and V
//       staged as the forward stages them: S = Q K^T, dP = dY V^T, dQ +=
//       dS K (K by ldmatrix.trans); at D = 128 a key tile in two halves,
//       with 32 rows a warp in quarters
//   dk, dv: a block per key tile, each warp 16 keys with K and V in
//       registers, over the query tiles from the diagonal on, Q and dY
//       staged in shared memory by cp.async in two stages as the forward
//       stages K and V (lse and D by plain loads): S^T = K Q^T,
//       dP^T = V dY^T, dV += P^T dY, dK += dS^T Q; at D = 128 a block of 8
//       warps, dV's 4 and dK's 4 (attention_tc_bwd_dkv), a query tile in
//       two halves
//
// Deterministic: every value has one owner lane and a fixed order (the
// mma's, the tiles', the shuffles' butterfly), whatever the grid.
// Supported: head sizes 64 and 128 (the presets'), 16-byte aligned q, k, v,
// y, dy and a stride a multiple of 8 (attention_tc.c checks before
// launching).

constexpr int attention_tc_BQ = 64;  // query rows per tile: 16 per warp
constexpr int attention_tc_BK = 64;  // keys per tile
constexpr int attention_tc_PAD = 8;  // bf16 after each shared row
constexpr int attention_tc_NS = 8;   // n-blocks of 8 in a tile of 64 (BQ and BK alike)
static_assert(attention_tc_BQ == 64 && attention_tc_BK == 64 && attention_tc_NS == 8,
              "the tiles of queries and of keys are both 64 rows (the staging, the items, the diagonal)");
// The dk, dv kernel's block: 4 warps at D = 64, 8 at 128 (two roles,
// attention_tc_bwd_dkv); the forward's and dq's 2 at D = 64 on sm_90 (32
// rows each: attention_tc_row_groups, attention_tc_query_threads) and 4
// otherwise; at D = 64 the _rows16 kernels keep 16 rows a warp (4 warps)
// on sm_90 too, to time the two there (TLM_GPU_ATTENTION_ROWS, attention_tc.h).
// attention_tc.c's tlm_gpu_attention_tc_block says the same.
constexpr int attention_tc_dkv_threads(int D) { return D > 64 ? 256 : 128; }

// Rows row0 .. row0 + 63 of x (row r at x + r rs, D bf16) into a shared
// tile, rows D + PAD apart, by cp.async: the copies are in flight when it
// returns (the caller commits and waits); zeros from row n on (0 times 0:
// never NaN where P is 0). The whole block calls it.
template <int D>
__device__ __forceinline__ void attention_tc_stage_async(unsigned short* tile, const unsigned short* x, long long rs,
                                                         int row0, int n) {
  for (int e = threadIdx.x; e < 64 * (D / 8); e += blockDim.x) {
    const int row = e / (D / 8), c8 = e % (D / 8) * 8;
    const bool in = row0 + row < n;
    tlm::cp_async_16(tile + row * (D + attention_tc_PAD) + c8, in ? x + (row0 + row) * rs + c8 : x, in ? 16u : 0u);
  }
}

// The pairs of tiles the kernels stage in dynamic shared memory by
// cp.async, in two stages (the next pair's copies in flight while this
// one's products run): the forward's and dq's K and V, the dk, dv kernel's
// Q and dY. The first matrix's two stages, then the second's, each
// attention_tc_tile_elems bf16: at head size 128 68 KiB, past the 48 KiB a
// block may have without opting in, which dynamic shared memory does
// (device.h). attention_tc.c's tlm_gpu_attention_tc_shared gives the
// launches the same bytes; the kernels trap when given fewer.
constexpr int attention_tc_tile_elems(int D) { return attention_tc_BK * (D + attention_tc_PAD); }
constexpr unsigned attention_tc_staged_bytes(int D) { return 2u * 2u * attention_tc_tile_elems(D) * 2u; }

// The staged tiles' place in the block's dynamic shared memory: the first
// matrix's two stages at as, the second's at bs. Traps when the launch gave
// too little.
template <int D>
__device__ __forceinline__ void attention_tc_staged_tiles(unsigned short*& as, unsigned short*& bs) {
  if (tlm::dynamic_shared_size() < attention_tc_staged_bytes(D)) __trap();
  as = (unsigned short*)tlm::dynamic_shared();
  bs = as + 2 * attention_tc_tile_elems(D);
}

// The tiles of 64 rows from row first to row last of one item, of two bf16
// matrices a and b (rows a_rs and b_rs elements apart, n rows in all),
// staged in shared memory by cp.async in two stages: tile(at, bt, r0) is
// called for each by every thread (the caller's warps skip what they do
// not need, but all reach the barriers) while the next pair's copies are in
// flight. as and bs hold the two stages' tiles (attention_tc_staged_tiles).
template <int D, typename Tile>
__device__ __forceinline__ void attention_tc_walk(unsigned short* as, unsigned short* bs, const unsigned short* a,
                                                  long long a_rs, const unsigned short* b, long long b_rs, int first,
                                                  int last, int n, Tile tile) {
  constexpr int ROWS = attention_tc_BK, TILE = attention_tc_tile_elems(D);
  static_assert(attention_tc_BK == attention_tc_BQ, "one tile size for keys and queries");
  // the pair of tiles from row r0 into stage `stage`, one commit group
  auto stage_pair = [&](int stage, int r0) {
    attention_tc_stage_async<D>(as + stage * TILE, a, a_rs, r0, n);
    attention_tc_stage_async<D>(bs + stage * TILE, b, b_rs, r0, n);
    tlm::cp_async_commit();
  };
  __syncthreads();  // the previous item's readers are done
  stage_pair(0, first);
  for (int r0 = first; r0 <= last; r0 += ROWS) {
    const int buf = (r0 - first) / ROWS % 2;
    if (r0 + ROWS <= last)
      stage_pair(1 - buf, r0 + ROWS);
    else
      tlm::cp_async_commit();  // an empty group past the last tile: the wait below counts groups
    tlm::cp_async_wait<1>();   // this thread's copies of this tile
    __syncthreads();           // and every thread's
    tile(as + buf * TILE, bs + buf * TILE, r0);
    __syncthreads();  // this tile's readers are done before its buffer is filled again
  }
}

// The warp's A fragments of rows row0 .. row0 + 16 RG - 1 of x (row r at x
// + r rs), one per k-step of 16 over D, group after group of 16 rows (group
// gr's at a + gr D/16), in bf16; zeros from row n on.
template <int D, int RG = 1, typename X>
__device__ __forceinline__ void attention_tc_rows(unsigned (*a)[4], const X* x, long long rs, int row0, int n) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  for (int gr = 0; gr < RG; gr++)
    for (int s = 0; s < D / 16; s++)
      for (int j = 0; j < 4; j++) {
        const int row = row0 + 16 * gr + g + 8 * (j % 2), col = 16 * s + 2 * t + 8 * (j / 2);
        a[gr * (D / 16) + s][j] =
            row < n ? tlm::pack_bf16x2(tlm::load(x + row * rs + col), tlm::load(x + row * rs + col + 1)) : 0u;
      }
}

// Row r of the lane's 2 RG rows of a warp's groups from r0: lane g (its lane / 4) holds
// rows g and g + 8 of each group of 16 (the accumulators' layout).
__device__ __forceinline__ int attention_tc_lane_row(int r0, int r, int g) {
  return r0 + 16 * (r / 2) + g + 8 * (r % 2);
}

// s = A T^T for the warp: A its RG groups of 16 rows (fragments over D:
// group g's at a + g D/16), T NB * 8 rows of a shared tile (n-major: each
// row's D elements contiguous), 64 by default; n-block n of group g's s,
// s[g NB + n], holds T's rows 8n .. 8n + 7. Each ldmatrix of T serves the
// RG groups' products.
template <int D, int NB = attention_tc_NS, int RG = 1>
__device__ __forceinline__ void attention_tc_products(float (*s)[4], const unsigned (*a)[4],
                                                      const unsigned short* tile) {
  static_assert(NB % 2 == 0 && NB <= attention_tc_NS, "n-blocks in pairs (one ldmatrix_x4 each), within a tile");
  const int lane = threadIdx.x % 32;
  for (int n = 0; n < RG * NB; n++)
    for (int i = 0; i < 4; i++) s[n][i] = 0.0f;
  for (int kk = 0; kk < D / 16; kk++)
    for (int np = 0; np < NB / 2; np++) {
      // matrices: rows 16np + 0..7 / + 8..15 (lane / 16), columns 16kk + 0..7 / + 8..15 (lane / 8 % 2):
      // registers 0, 1 are n-block 2np's b[0], b[1]; 2, 3 n-block 2np + 1's
      unsigned b[4];
      const int row = 16 * np + lane / 16 * 8 + lane % 8, col = 16 * kk + lane / 8 % 2 * 8;
      tlm::ldmatrix_x4<false>(b, tile + row * (D + attention_tc_PAD) + col);
      for (int g = 0; g < RG; g++) {
        float(*sg)[4] = s + g * NB;
        tlm::mma_m16n8k16_bf16(sg[2 * np], a[g * (D / 16) + kk], b, sg[2 * np]);
        tlm::mma_m16n8k16_bf16(sg[2 * np + 1], a[g * (D / 16) + kk], b + 2, sg[2 * np + 1]);
      }
    }
}

// o += p T for the warp: p its RG groups' 16 x (NB * 8) accumulator
// fragments (group g's at p + g NB; rounded to bf16 as A fragments), T NB *
// 8 rows of a shared tile (k-major: the rows are p's columns), 64 by
// default; group g's o, at o + g D/8, has in n-block n columns 8n .. 8n + 7
// of D. Each element of o adds p's k-blocks of 16 in order, so two calls on
// the two halves of a tile sum in the same order as one on the whole. Each
// ldmatrix of T serves the RG groups' products.
template <int D, int NB = attention_tc_NS, int RG = 1>
__device__ __forceinline__ void attention_tc_accumulate(float (*o)[4], const float (*p)[4],
                                                        const unsigned short* tile) {
  static_assert(NB % 2 == 0 && NB <= attention_tc_NS, "k-blocks of 16: n-blocks in pairs, within a tile");
  const int lane = threadIdx.x % 32;
  for (int j = 0; j < NB / 2; j++) {
    unsigned pa[RG][4];
    for (int g = 0; g < RG; g++) {
      const float(*pg)[4] = p + g * NB;
      pa[g][0] = tlm::pack_bf16x2(pg[2 * j][0], pg[2 * j][1]);
      pa[g][1] = tlm::pack_bf16x2(pg[2 * j][2], pg[2 * j][3]);
      pa[g][2] = tlm::pack_bf16x2(pg[2 * j + 1][0], pg[2 * j + 1][1]);
      pa[g][3] = tlm::pack_bf16x2(pg[2 * j + 1][2], pg[2 * j + 1][3]);
    }
    for (int dp = 0; dp < D / 16; dp++) {
      // matrices (transposed): rows 16j + 0..7 / + 8..15 (lane / 8 % 2), columns 16dp + 0..7 / + 8..15
      // (lane / 16): registers 0, 1 are column block 2dp's b[0], b[1]; 2, 3 column block 2dp + 1's
      unsigned b[4];
      const int row = 16 * j + lane / 8 % 2 * 8 + lane % 8, col = 16 * dp + lane / 16 * 8;
      tlm::ldmatrix_x4<true>(b, tile + row * (D + attention_tc_PAD) + col);
      for (int g = 0; g < RG; g++) {
        float(*og)[4] = o + g * (D / 8);
        tlm::mma_m16n8k16_bf16(og[2 * dp], pa[g], b, og[2 * dp]);
        tlm::mma_m16n8k16_bf16(og[2 * dp + 1], pa[g], b + 2, og[2 * dp + 1]);
      }
    }
  }
}

// The warp's 16 rows x D of accumulator fragments (the rows row0 + g and
// row0 + g + 8 of each lane), into fp32 rows of out (row r at out + r rs),
// rows from n on not written.
template <int D>
__device__ __forceinline__ void attention_tc_store(float* out, long long rs, const float (*o)[4], int row0, int n) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  for (int r = 0; r < 2; r++) {
    const int row = row0 + g + 8 * r;
    if (row >= n) continue;
    for (int c = 0; c < D / 8; c++) {
      out[row * rs + 8 * c + 2 * t] = o[c][2 * r];
      out[row * rs + 8 * c + 2 * t + 1] = o[c][2 * r + 1];
    }
  }
}

// D_t = dy_t . y_t over the warp (every lane gets the same bits): the
// lanes' strided partial sums, then the butterfly. dy is taken rounded to
// bf16, as dP = dY V^T takes it: sum_u P_tu dP_tu is then dy16 . y_t, the
// identity dS relies on, and a row whose softmax is one key (y_t = v_u)
// gets D_t = dP_tu up to fp32 rounding. From the fp32 dy, they differed by
// dy's rounding, 2^-9 of |dy||v|, which saturated scores' huge keys turn
// into large dq and dk where the gradient is 0.
template <int D>
__device__ __forceinline__ float attention_tc_rowdot(const unsigned short* dy16, const unsigned short* y) {
  float s = 0.0f;
  for (int d = threadIdx.x % 32; d < D; d += 32) s += tlm::load(dy16 + d) * tlm::load(y + d);
  return tlm::warp_sum(s);
}

// One item of a kernel's grid-stride loop: (b, h, tile of 64 rows: query
// rows for the forward and dq, keys for dk and dv), and where (b, h)'s token
// 0 lies in q, k, v, dq, dk, dv (tokens stride apart) and in y, dy (H D).
struct attention_tc_item {
  int b, h, row0;
  long long base, ybase;
};
__device__ __forceinline__ long long attention_tc_items(int B, int T, int H) {
  return (long long)B * H * ((T + attention_tc_BQ - 1) / attention_tc_BQ);
}
__device__ __forceinline__ attention_tc_item attention_tc_item_at(long long item, int T, int H, int D, int stride) {
  const int tiles = (T + attention_tc_BQ - 1) / attention_tc_BQ;
  attention_tc_item it;
  it.row0 = (int)(item % tiles) * attention_tc_BQ;
  it.h = (int)(item / tiles % H);
  it.b = (int)(item / ((long long)tiles * H));
  it.base = (long long)it.b * T * stride + (long long)it.h * D;
  it.ybase = (long long)it.b * T * H * D + (long long)it.h * D;
  return it;
}

// A compile-time bool as a value, for a generic lambda's two versions.
template <bool B>
struct attention_tc_bool {
  static constexpr bool value = B;
};

// The exponentials are powers of 2 (tlm::exp2_approx, one instruction):
// e^(x scale - c) = 2^(x scale log2(e) - c log2(e)), the scale and log2(e)
// folded into one multiply-add a score, as FlashAttention-2 does. lse
// stays a natural logarithm (the scalar kernels and the CPU op read it);
// the backwards take it times log2(e). P rebuilt from lse then carries a
// few roundings of |lse| (about 5e-5 relative at |scores| of 1e3, 4e-4 at
// 1e4), far inside bf16's 2^-8 that P is rounded to.
constexpr float attention_tc_LOG2E = 1.44269504088896340736f, attention_tc_LN2 = 0.69314718055994530942f;

// Whether 64 keys from k0 need the causal mask against queries from r0 on
// (a warp's 16 rows, or the dk, dv kernel's query tile): some key follows
// the first query. Tiles below the diagonal skip the mask's compares and
// selects, which every score paid for before. Such a tile has no key past
// T either (its keys precede r0, and a warp or tile from r0 >= T takes no
// tiles); queries past T need no mask of their own (each kernel says why).
// bench/attention_sass.py counts each version's instructions by making
// this false, then true.
__device__ __forceinline__ bool attention_tc_masked(int k0, int r0) { return k0 + attention_tc_BK - 1 > r0; }

// The forward's and dq's rows a warp: RG groups of 16 (a block of 128 / RG
// threads takes a query tile of 64). Each K and V fragment a warp loads by
// ldmatrix then feeds RG groups' products: at head size 64 on sm_90, two
// groups halve the shared-memory reads a product (a 64-key tile: 32
// ldmatrix.x4 of 512 bytes for 128 HMMAs, not for 64), as
// FlashAttention-2's 32 rows a warp at that size do. At 128 the second
// group's Q, Y and S (128 more registers a lane) would spill, and on sm_80
// (half sm_90's tensor rate an SM against the same shared-memory bandwidth)
// two groups spilled 60 bytes a thread at 255 registers. Every row is
// computed as with one group (the same tiles, products and order): the same
// bits. The emulated device is an sm_90 (device_emu.c).
#if defined(TLM_CUDA_EMULATED) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900)
constexpr int attention_tc_row_groups(int D) { return D == 64 ? 2 : 1; }
#else
constexpr int attention_tc_row_groups(int D) { return 1; }
#endif
// The block of a forward or dq kernel whose warps take RG groups of rows
// (attention_tc.c's tlm_gpu_attention_tc_block says the same).
constexpr int attention_tc_query_threads(int RG) { return 128 / RG; }

// One key tile of the forward for the warp's RG groups of 16 rows from r0:
// S = Q K^T, the online softmax (m, l: each lane's two rows a group, their
// running max of the unscaled scores and share of the sum), Y += P V; ks
// and vs the tile's K and V in shared memory. Masked: keys past a row (or
// past T) get -inf, whose 2^x is 0.
template <int D, int RG, bool Masked>
__device__ __forceinline__ void attention_tc_fwd_tile(float (*o)[4], float* m, float* l, const unsigned (*qa)[4],
                                                      const unsigned short* ks, const unsigned short* vs, int j0,
                                                      int r0, float scale_log2, int T) {
  constexpr int NS = attention_tc_NS, DN = D / 8;
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  float s[RG * NS][4];
  attention_tc_products<D, NS, RG>(s, qa, ks);
  for (int rg = 0; rg < RG; rg++) {
    float(*sg)[4] = s + rg * NS;
    float *mg = m + 2 * rg, *lg = l + 2 * rg;
    // the causal mask, and each row's new max over its 4 lanes
    float mx[2] = {mg[0], mg[1]};
    for (int n = 0; n < NS; n++)
      for (int i = 0; i < 4; i++) {
        if (Masked) {
          const int key = j0 + 8 * n + 2 * t + i % 2, row = attention_tc_lane_row(r0, 2 * rg + i / 2, g);
          if (!(key <= row && key < T)) sg[n][i] = -INFINITY;
        }
        mx[i / 2] = fmaxf(mx[i / 2], sg[n][i]);
      }
    float alpha[2], shift[2], sum[2] = {0.0f, 0.0f};
    for (int r = 0; r < 2; r++) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      // finite: every row sees key 0 in the first tile; alpha is 0 there (m = -inf)
      alpha[r] = tlm::exp2_approx((mg[r] - mx[r]) * scale_log2);
      mg[r] = mx[r];
      shift[r] = mx[r] * scale_log2;
    }
    for (int n = 0; n < NS; n++)
      for (int i = 0; i < 4; i++) {
        const float p = tlm::exp2_approx(fmaf(sg[n][i], scale_log2, -shift[i / 2]));
        sg[n][i] = p;
        sum[i / 2] += p;
      }
    for (int r = 0; r < 2; r++) lg[r] = lg[r] * alpha[r] + sum[r];  // the lane's share of the row sum
    float(*og)[4] = o + rg * DN;
    for (int n = 0; n < DN; n++)
      for (int i = 0; i < 4; i++) og[n][i] *= alpha[i / 2];
  }
  attention_tc_accumulate<D, NS, RG>(o, s, vs);
}

template <int D, int RG = attention_tc_row_groups(D)>
__device__ void attention_tc_fwd(unsigned short* y, float* lse, const unsigned short* q, const unsigned short* k,
                                 const unsigned short* v, int B, int T, int H, int stride) {
  constexpr int DN = D / 8, ROWS = 16 * RG;
  static_assert(attention_tc_query_threads(RG) / 32 * ROWS == attention_tc_BQ, "the block's warps take the query tile");
  if (blockDim.x != attention_tc_query_threads(RG)) __trap();  // another block size would leave rows out
  unsigned short *ks, *vs;
  attention_tc_staged_tiles<D>(ks, vs);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const float scale = 1.0f / sqrtf((float)D), scale_log2 = scale * attention_tc_LOG2E;
  for (long long item = blockIdx.x; item < attention_tc_items(B, T, H); item += gridDim.x) {
    const attention_tc_item it = attention_tc_item_at(item, T, H, D, stride);
    const long long base = it.base;
    const int r0 = it.row0 + warp * ROWS, last = min(it.row0 + attention_tc_BQ, T) - 1;
    const bool idle = r0 >= T;  // a warp past the last row loads and waits with the others
    unsigned qa[RG * (D / 16)][4];
    attention_tc_rows<D, RG>(qa, q + base, stride, r0, T);
    float o[RG * DN][4], m[2 * RG], l[2 * RG];
    for (int r = 0; r < 2 * RG; r++) m[r] = -INFINITY, l[r] = 0.0f;
    for (int n = 0; n < RG * DN; n++)
      for (int i = 0; i < 4; i++) o[n][i] = 0.0f;
    attention_tc_walk<D>(ks, vs, k + base, stride, v + base, stride, 0, last, T,
                         [&](const unsigned short* kt, const unsigned short* vt, int j0) {
                           if (idle || j0 > r0 + ROWS - 1) return;
                           // rows past T (in the last query tile) need no mask: not stored, they mix with no row
                           if (attention_tc_masked(j0, r0))
                             attention_tc_fwd_tile<D, RG, true>(o, m, l, qa, kt, vt, j0, r0, scale_log2, T);
                           else
                             attention_tc_fwd_tile<D, RG, false>(o, m, l, qa, kt, vt, j0, r0, scale_log2, T);
                         });
    if (idle) continue;
    for (int r = 0; r < 2 * RG; r++) {
      l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
      l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    }
    for (int r = 0; r < 2 * RG; r++) {
      const int row = attention_tc_lane_row(r0, r, g);
      if (row >= T) continue;
      const float inv = 1.0f / l[r];
      const float(*og)[4] = o + r / 2 * DN;
      unsigned* yr = (unsigned*)(y + it.ybase + (long long)row * H * D);
      for (int n = 0; n < DN; n++)
        yr[4 * n + t] = tlm::pack_bf16x2(og[n][2 * (r % 2)] * inv, og[n][2 * (r % 2) + 1] * inv);
      // the base-2 log-sum-exp of the very exponents summed (m c + log2 l), as a natural logarithm: at head size 128
      // c = scale log2(e) is rounded, and m scale + log l would differ from it by m times that rounding
      if (t == 0) lse[((long long)it.b * T + row) * H + it.h] = (m[r] * scale_log2 + log2f(l[r])) * attention_tc_LN2;
    }
  }
}

extern "C" __global__ void tlm_attention_tc_fwd_d64(unsigned short* y, float* lse, const unsigned short* q,
                                                    const unsigned short* k, const unsigned short* v, int B, int T,
                                                    int H, int stride) {
  attention_tc_fwd<64>(y, lse, q, k, v, B, T, H, stride);
}
// 16 rows a warp where tlm_attention_tc_fwd_d64 takes 32 (sm_90 on): the same
// bits, for timing the two on a GPU (TLM_GPU_ATTENTION_ROWS=16, attention_tc.h).
extern "C" __global__ void tlm_attention_tc_fwd_d64_rows16(unsigned short* y, float* lse, const unsigned short* q,
                                                           const unsigned short* k, const unsigned short* v, int B,
                                                           int T, int H, int stride) {
  attention_tc_fwd<64, 1>(y, lse, q, k, v, B, T, H, stride);
}
extern "C" __global__ void tlm_attention_tc_fwd_d128(unsigned short* y, float* lse, const unsigned short* q,
                                                     const unsigned short* k, const unsigned short* v, int B, int T,
                                                     int H, int stride) {
  attention_tc_fwd<128>(y, lse, q, k, v, B, T, H, stride);
}

// The backward's preparation, a warp per (b, t, h) row (row r = (b T + t) H
// + h of dy and y, D elements each): dy rounded to bf16 into dy16 (laid out
// as dy), the bits the products take, and D_t = dy_t . y_t into dot
// ([B,H,T]: a (b, h)'s tokens contiguous). The dk, dv kernel needs every
// query tile's D_t once per key tile: computed here once per row, not in
// every block that meets the row.
// D_t's place in dot, [B,H,T]: a (b, h)'s tokens contiguous.
__device__ __forceinline__ long long attention_tc_dot_at(int b, int h, int t, int T, int H) {
  return ((long long)b * H + h) * T + t;
}

template <int D>
__device__ void attention_tc_bwd_prep(unsigned short* dy16, float* dot, const float* dy, const unsigned short* y, int B,
                                      int T, int H) {
  const int lane = threadIdx.x % 32, warps = blockDim.x / 32;
  const long long rows = (long long)B * T * H;
  for (long long r = (long long)blockIdx.x * warps + threadIdx.x / 32; r < rows; r += (long long)gridDim.x * warps) {
    const long long o = r * D;
    for (int d = lane; d < D; d += 32) dy16[o + d] = tlm::to_bf16(dy[o + d]);
    const float d_t = attention_tc_rowdot<D>(dy16 + o, y + o);  // each lane reads only what it wrote
    const long long bt = r / H;
    if (lane == 0) dot[attention_tc_dot_at((int)(bt / T), (int)(r % H), (int)(bt % T), T, H)] = d_t;
  }
}

// One block per (b, h, query tile): dq of its rows over the key tiles up to
// the diagonal, in order.
template <int D, int RG = attention_tc_row_groups(D)>
__device__ void attention_tc_bwd_dq(float* dq, const unsigned short* dy16, const float* dot, const float* lse,
                                    const unsigned short* q, const unsigned short* k, const unsigned short* v, int B,
                                    int T, int H, int stride) {
  constexpr int NS = attention_tc_NS, DN = D / 8, ROWS = 16 * RG;
  // At D = 128 each key tile in two halves of 32 keys (S and dP 16 floats
  // a lane, not 32): without, ptxas spilled 12 bytes a thread on sm_80.
  // With two groups (attention_tc_row_groups) in four quarters of 16 keys
  // (S and dP 8 floats a lane a group): in halves ptxas spilled 12 bytes a
  // thread at 255 registers on sm_90; in quarters it takes 224. The same
  // order of summation (dS K's k-blocks of 16 keys in order), so the same
  // bits.
  constexpr int PARTS = RG > 1 ? 4 : D > 64 ? 2 : 1, NB = NS / PARTS, W = 8 * NB;
  static_assert(attention_tc_query_threads(RG) / 32 * ROWS == attention_tc_BQ, "the block's warps take the query tile");
  if (blockDim.x != attention_tc_query_threads(RG)) __trap();  // another block size would leave rows out
  unsigned short *ks, *vs;                                     // K and V staged as the forward stages them
  attention_tc_staged_tiles<D>(ks, vs);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const float scale = 1.0f / sqrtf((float)D), scale_log2 = scale * attention_tc_LOG2E;
  const int C = H * D;
  for (long long item = blockIdx.x; item < attention_tc_items(B, T, H); item += gridDim.x) {
    const attention_tc_item it = attention_tc_item_at(item, T, H, D, stride);
    const long long base = it.base, ybase = it.ybase;
    const int r0 = it.row0 + warp * ROWS, last = min(it.row0 + attention_tc_BQ, T) - 1;
    const bool idle = r0 >= T;
    unsigned qa[RG * (D / 16)][4], dya[RG * (D / 16)][4];
    attention_tc_rows<D, RG>(qa, q + base, stride, r0, T);
    attention_tc_rows<D, RG>(dya, dy16 + ybase, C, r0, T);
    // lse (times log2(e)) and D_t of the lane's rows r0 + 16 rg + g and r0 + 16 rg + g + 8
    float rlse[2 * RG], rdot[2 * RG];
    for (int r = 0; r < 2 * RG; r++) {
      const int row = attention_tc_lane_row(r0, r, g);
      rlse[r] = row < T ? lse[((long long)it.b * T + row) * H + it.h] * attention_tc_LOG2E : 0.0f;
      rdot[r] = row < T ? dot[attention_tc_dot_at(it.b, it.h, row, T, H)] : 0.0f;
    }
    float acc[RG * DN][4];
    for (int n = 0; n < RG * DN; n++)
      for (int i = 0; i < 4; i++) acc[n][i] = 0.0f;
    attention_tc_walk<D>(ks, vs, k + base, stride, v + base, stride, 0, last, T,
                         [&](const unsigned short* kt, const unsigned short* vt, int j0) {
                           if (idle || j0 > r0 + ROWS - 1) return;
                           for (int part = 0; part < PARTS; part++) {
                             const unsigned short *kp = kt + part * W * (D + attention_tc_PAD),
                                                  *vp = vt + part * W * (D + attention_tc_PAD);
                             float s[RG * NB][4], dp[RG * NB][4];
                             attention_tc_products<D, NB, RG>(s, qa, kp);
                             attention_tc_products<D, NB, RG>(dp, dya, vp);
                             // group rg's element (n, i)
                             auto dscore = [&](int rg, int n, int i) {
                               const int r = 2 * rg + i / 2;
                               const float p = tlm::exp2_approx(fmaf(s[rg * NB + n][i], scale_log2, -rlse[r]));
                               return p * (dp[rg * NB + n][i] - rdot[r]) * scale;
                             };
                             if (attention_tc_masked(j0, r0)) {
                               for (int rg = 0; rg < RG; rg++)
                                 for (int n = 0; n < NB; n++)
                                   for (int i = 0; i < 4; i++) {
                                     const int key = j0 + part * W + 8 * n + 2 * t + i % 2,
                                               row = attention_tc_lane_row(r0, 2 * rg + i / 2, g);
                                     // row 0 sees only its own key: P is 1 and its
                                     // dS exactly 0, which D_t less dP (summed in
                                     // another order) would give only up to rounding
                                     s[rg * NB + n][i] = key <= row && row < T && row > 0 ? dscore(rg, n, i) : 0.0f;
                                   }
                             } else {  // rows past T: q and dy rows of zeros, lse and D_t 0: dS is 0
                               for (int rg = 0; rg < RG; rg++)
                                 for (int n = 0; n < NB; n++)
                                   for (int i = 0; i < 4; i++) s[rg * NB + n][i] = dscore(rg, n, i);
                             }
                             attention_tc_accumulate<D, NB, RG>(acc, s, kp);
                           }
                         });
    if (!idle)
      for (int rg = 0; rg < RG; rg++) attention_tc_store<D>(dq + base, stride, acc + rg * DN, r0 + 16 * rg, T);
  }
}

// One block per (b, h, key tile): dk and dv of its keys over the query
// tiles from the diagonal on, in order.
//
// At D = 64 a block of 4 warps, each with 16 keys' dK and dV (64 fp32
// accumulators a lane) and their K and V fragments in registers. At D = 128
// that was 128 accumulators a lane, and ptxas spilled (312 bytes a thread on
// sm_90, 136 on sm_80, with K and V loaded again for each query tile; 760
// with them kept). So there the block has 8 warps in two roles over the same
// 64 keys: warps 0-3 sum dV += P^T dY (S^T, then P), warps 4-7 dK += dS^T Q
// (dP^T, then dS), each 64 accumulators a lane. Each dV warp hands its P to
// the dK warp 4 on (the same keys, the same fragment layout) through shared
// memory, as FlashAttention-2 shares P: two products a role per part, where
// the dK role once computed S^T and P itself (three). Each role also walks a
// query tile in two halves of 32 (S^T and dP^T 16 floats a lane each, not
// 32), each half with a buffer of its own, so one barrier a half. Neither
// changes an element's order of summation: the products' k-blocks of 16
// queries come in the same order, and P and dS are the same expressions, so
// the results are the 4-warp kernel's bit for bit. The registers are
// ptxas's (docs/gpu.md, "Tensor cores"; gpu.spills fails on a spill).
template <int D>
__device__ void attention_tc_bwd_dkv(float* dk, float* dv, const unsigned short* dy16, const float* dot,
                                     const float* lse, const unsigned short* q, const unsigned short* k,
                                     const unsigned short* v, int B, int T, int H, int stride) {
  constexpr int BQ = attention_tc_BQ, NS = attention_tc_NS, DN = D / 8;
  constexpr bool roles = D > 64;
  constexpr int WARPS = roles ? 8 : 4, NACC = roles ? 1 : 2;         // accumulator sets a warp holds
  constexpr int PARTS = roles ? 2 : 1, NB = NS / PARTS, W = 8 * NB;  // a query tile in PARTS parts of W
  static_assert(32 * WARPS == attention_tc_dkv_threads(D), "the block attention_tc.c launches");
  unsigned short *qs, *dys;  // Q and dY, staged in two stages
  attention_tc_staged_tiles<D>(qs, dys);
  __shared__ float tile_lse[BQ], tile_dot[BQ];
  // With the two roles, P handed from each dV warp to its dK partner: per
  // part of a query tile and pair of warps, NB * 4 floats a lane, stored
  // lane-minor (no bank conflicts). 16 KiB at D = 128; a float otherwise.
  __shared__ float p_shared[roles ? PARTS : 1][roles ? 4 : 1][roles ? NB * 4 * 32 : 1];
  if (blockDim.x != 32 * WARPS) __trap();  // another block size would leave keys or a role out
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const bool sums_dv = !roles || warp < 4, sums_dk = !roles || warp >= 4;
  const float scale = 1.0f / sqrtf((float)D), scale_log2 = scale * attention_tc_LOG2E;
  const int C = H * D;
  for (long long item = blockIdx.x; item < attention_tc_items(B, T, H); item += gridDim.x) {
    const attention_tc_item it = attention_tc_item_at(item, T, H, D, stride);  // BK == BQ: tiles of keys alike
    const long long base = it.base, ybase = it.ybase;
    const int j0 = it.row0, c0 = j0 + warp % 4 * 16;
    const bool idle = c0 >= T;
    // The warp's K and V fragments, kept for the walk (V by the dK role only).
    unsigned ka[D / 16][4], va[D / 16][4];
    attention_tc_rows<D>(ka, k + base, stride, c0, T);
    if (sums_dk) attention_tc_rows<D>(va, v + base, stride, c0, T);
    // acc[0] dV (or the role's sum), acc[NACC - 1] dK
    float acc[NACC][DN][4];
    for (int a = 0; a < NACC; a++)
      for (int n = 0; n < DN; n++)
        for (int i = 0; i < 4; i++) acc[a][n][i] = 0.0f;
    // BQ == BK: the query tile holding key j0 starts at j0
    attention_tc_walk<D>(
        qs, dys, q + base, stride, dy16 + ybase, C, j0, T - 1, T,
        [&](const unsigned short* qt, const unsigned short* dyt, int i0) {
          if (threadIdx.x < BQ) {  // lse (times log2(e)) and D_t of the tile's rows
            const int row = i0 + threadIdx.x;
            tile_lse[threadIdx.x] = row < T ? lse[((long long)it.b * T + row) * H + it.h] * attention_tc_LOG2E : 0.0f;
            tile_dot[threadIdx.x] = row < T ? dot[attention_tc_dot_at(it.b, it.h, row, T, H)] : 0.0f;
          }
          __syncthreads();
          // Only the diagonal tile has masked elements: past it
          // every query follows every key of the block, and no key lies past
          // T (the walk ends at T - 1). Queries past T need no mask there:
          // their Q and dY rows are staged as zeros and lse and D_t read as
          // 0, so P is 1 and dY, dP and dS are 0: they add exact zeros. The
          // whole block takes one version, so all reach the same barriers.
          auto parts = [&](auto diagonal) {
            constexpr bool MASKED = decltype(diagonal)::value;
            for (int part = 0; part < PARTS; part++) {
              const int offset = part * W * (D + attention_tc_PAD);
              // the lane's element (n, i): its query's column in the tile, and whether P is 0 there
              auto column = [&](int n, int i) { return part * W + 8 * n + 2 * t + i % 2; };
              auto masked = [&](int n, int i) {
                if (!MASKED) return false;
                const int query = i0 + column(n, i), key = c0 + g + 8 * (i / 2);
                return !(query >= key && query < T && key < T);
              };
              // P from S^T, dS from P and dP^T: one expression each, whichever warp computes them
              auto prob = [&](float s, int n, int i) {
                return tlm::exp2_approx(fmaf(s, scale_log2, -tile_lse[column(n, i)]));
              };
              // a sequence's first query (in the diagonal tile of keys 0 ..)
              // sees one key: its dS is exactly 0 (as in the dq kernel)
              auto dscore = [&](float p, float dp, int n, int i) {
                return MASKED && i0 + column(n, i) == 0 ? 0.0f : p * (dp - tile_dot[column(n, i)]) * scale;
              };
              if constexpr (roles) {
                // The dV role computes S^T and P and hands P to its dK partner
                // (the warp 4 on, the same keys and fragment layout) through
                // shared memory; the dK role computes dP^T meanwhile, then dS
                // from that P: two products a role, not two and three.
                float x[NB][4];  // dV: S^T, then P; dK: dP^T, then dS
                float* share = p_shared[part][warp % 4];
                if (!idle && sums_dv) {
                  attention_tc_products<D, NB>(x, ka, qt + offset);  // S^T: the warp's keys x the part's queries
                  for (int n = 0; n < NB; n++)
                    for (int i = 0; i < 4; i++) {
                      x[n][i] = masked(n, i) ? 0.0f : prob(x[n][i], n, i);
                      share[(4 * n + i) * 32 + lane] = x[n][i];
                    }
                } else if (!idle) {
                  attention_tc_products<D, NB>(x, va, dyt + offset);  // dP^T
                }
                __syncthreads();  // P handed over (each part its own buffer; the walk's barrier ends its readers)
                if (idle) continue;
                if (sums_dv) {
                  attention_tc_accumulate<D, NB>(acc[0], x, dyt + offset);
                } else {
                  for (int n = 0; n < NB; n++)
                    for (int i = 0; i < 4; i++)
                      x[n][i] = masked(n, i) ? 0.0f : dscore(share[(4 * n + i) * 32 + lane], x[n][i], n, i);
                  attention_tc_accumulate<D, NB>(acc[NACC - 1], x, qt + offset);
                }
                continue;
              }
              if (idle) continue;
              float s[NB][4], dp[NB][4];
              attention_tc_products<D, NB>(s, ka, qt + offset);    // S^T
              attention_tc_products<D, NB>(dp, va, dyt + offset);  // dP^T
              for (int n = 0; n < NB; n++)
                for (int i = 0; i < 4; i++) {
                  float p = 0.0f, ds = 0.0f;
                  if (!masked(n, i)) {
                    p = prob(s[n][i], n, i);
                    ds = dscore(p, dp[n][i], n, i);
                  }
                  s[n][i] = ds;
                  dp[n][i] = p;
                }
              attention_tc_accumulate<D, NB>(acc[0], dp, dyt + offset);
              attention_tc_accumulate<D, NB>(acc[NACC - 1], s, qt + offset);
            }
          };
          if (attention_tc_masked(j0, i0))  // the diagonal tile, i0 == j0
            parts(attention_tc_bool<true>{});
          else
            parts(attention_tc_bool<false>{});
        });
    if (idle) continue;
    if (sums_dk) attention_tc_store<D>(dk + base, stride, acc[NACC - 1], c0, T);
    if (sums_dv) attention_tc_store<D>(dv + base, stride, acc[0], c0, T);
  }
}

// (Each kernel spelled out: the emulated device finds kernels by their
// `extern "C" __global__ void` text.)
extern "C" __global__ void tlm_attention_tc_bwd_prep_d64(unsigned short* dy16, float* dot, const float* dy,
                                                         const unsigned short* y, int B, int T, int H) {
  attention_tc_bwd_prep<64>(dy16, dot, dy, y, B, T, H);
}
extern "C" __global__ void tlm_attention_tc_bwd_prep_d128(unsigned short* dy16, float* dot, const float* dy,
                                                          const unsigned short* y, int B, int T, int H) {
  attention_tc_bwd_prep<128>(dy16, dot, dy, y, B, T, H);
}
extern "C" __global__ void tlm_attention_tc_bwd_dq_d64(float* dq, const unsigned short* dy16, const float* dot,
                                                       const float* lse, const unsigned short* q,
                                                       const unsigned short* k, const unsigned short* v, int B, int T,
                                                       int H, int stride) {
  attention_tc_bwd_dq<64>(dq, dy16, dot, lse, q, k, v, B, T, H, stride);
}
extern "C" __global__ void tlm_attention_tc_bwd_dq_d64_rows16(float* dq, const unsigned short* dy16, const float* dot,
                                                              const float* lse, const unsigned short* q,
                                                              const unsigned short* k, const unsigned short* v, int B,
                                                              int T, int H, int stride) {
  attention_tc_bwd_dq<64, 1>(dq, dy16, dot, lse, q, k, v, B, T, H, stride);
}
extern "C" __global__ void tlm_attention_tc_bwd_dq_d128(float* dq, const unsigned short* dy16, const float* dot,
                                                        const float* lse, const unsigned short* q,
                                                        const unsigned short* k, const unsigned short* v, int B, int T,
                                                        int H, int stride) {
  attention_tc_bwd_dq<128>(dq, dy16, dot, lse, q, k, v, B, T, H, stride);
}
extern "C" __global__ void tlm_attention_tc_bwd_dkv_d64(float* dk, float* dv, const unsigned short* dy16,
                                                        const float* dot, const float* lse, const unsigned short* q,
                                                        const unsigned short* k, const unsigned short* v, int B, int T,
                                                        int H, int stride) {
  attention_tc_bwd_dkv<64>(dk, dv, dy16, dot, lse, q, k, v, B, T, H, stride);
}
extern "C" __global__ void tlm_attention_tc_bwd_dkv_d128(float* dk, float* dv, const unsigned short* dy16,
                                                         const float* dot, const float* lse, const unsigned short* q,
                                                         const unsigned short* k, const unsigned short* v, int B, int T,
                                                         int H, int stride) {
  attention_tc_bwd_dkv<128>(dk, dv, dy16, dot, lse, q, k, v, B, T, H, stride);
}
