// gpu.mma's kernels: the warp-matrix device functions of runtime/gpu/mma.cuh
// alone, with fragments loaded by hand from the PTX ISA's layouts (the
// comment at the top of mma.cuh), and through ldmatrix. The test compiles
// common.cuh, mma.cuh and this file as one source, for the emulated device
// and with NVRTC.

namespace mma_test {

// Problem w's matrices: A 16x16 row-major bf16, B 16x8 (k x n) row-major
// bf16, C and D 16x8 row-major fp32.
__device__ __forceinline__ unsigned bf16_pair(const unsigned short* m, int i0, int i1) {
  return (unsigned)m[i0] | (unsigned)m[i1] << 16;
}

// Every warp's ldmatrix.x4 (trans or not) of the four 8x8 matrices in
// tile (rows 32 bytes apart); warp 0's registers to out[4 lane + i].
__device__ __forceinline__ void ldmatrix_out(unsigned* out, const unsigned short* tile, int trans) {
  const int lane = threadIdx.x % 32;
  unsigned r[4];
  if (trans)
    tlm::ldmatrix_x4<true>(r, tile + lane * 16);
  else
    tlm::ldmatrix_x4<false>(r, tile + lane * 16);
  if (threadIdx.x < 32)
    for (int i = 0; i < 4; i++) out[4 * lane + i] = r[i];
}

}  // namespace mma_test

// D = A B + C for `count` problems, one per warp (blocks of 2 warps striding
// over them); transpose_a loads A's fragment from A^T instead: a layout
// mistake the test must see.
extern "C" __global__ void mma_test_product(float* d, const unsigned short* a, const unsigned short* b, const float* c,
                                            int count, int transpose_a) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4, warps = blockDim.x / 32;
  for (int w = blockIdx.x * warps + threadIdx.x / 32; w < count; w += gridDim.x * warps) {
    const unsigned short *A = a + 256 * w, *Bm = b + 128 * w;
    unsigned ar[4], br[2];
    for (int j = 0; j < 4; j++) {
      const int row = g + 8 * (j % 2), col = 2 * t + 8 * (j / 2);
      ar[j] = transpose_a ? mma_test::bf16_pair(A, col * 16 + row, (col + 1) * 16 + row)
                          : mma_test::bf16_pair(A, row * 16 + col, row * 16 + col + 1);
    }
    for (int j = 0; j < 2; j++) {
      const int k = 2 * t + 8 * j;
      br[j] = mma_test::bf16_pair(Bm, k * 8 + g, (k + 1) * 8 + g);
    }
    float cr[4], dr[4];
    for (int i = 0; i < 4; i++) cr[i] = c[128 * w + (g + 8 * (i / 2)) * 8 + 2 * t + i % 2];
    tlm::mma_m16n8k16_bf16(dr, ar, br, cr);
    for (int i = 0; i < 4; i++) d[128 * w + (g + 8 * (i / 2)) * 8 + 2 * t + i % 2] = dr[i];
  }
}

// ldmatrix.x4 (trans or not) of four 8x8 matrices m (matrix i at m + 64 i,
// row-major), staged in shared memory with rows 32 bytes apart; out[4 lane
// + i] is register i of the lane.
extern "C" __global__ void mma_test_ldmatrix(unsigned* out, const unsigned short* m, int trans) {
  __shared__ __align__(16) unsigned short tile[32 * 16];
  for (int e = threadIdx.x; e < 256; e += blockDim.x) tile[e / 8 * 16 + e % 8] = m[e];
  __syncthreads();
  mma_test::ldmatrix_out(out, tile, trans);
}

// mma_test_ldmatrix through dynamic shared memory: the four matrices staged
// by cp.async (rows 32 bytes apart) at the far end of the launch's dynamic
// shared memory, past 48 KiB when the launch opts in; out[128] its size.
extern "C" __global__ void mma_test_dynamic_shared(unsigned* out, const unsigned short* m, int trans) {
  const unsigned size = tlm::dynamic_shared_size();
  if (size < 1024 || size % 16) __trap();
  unsigned short* tile = (unsigned short*)(tlm::dynamic_shared() + size - 1024);
  if (threadIdx.x < 32) tlm::cp_async_16(tile + threadIdx.x * 16, m + threadIdx.x * 8, 16u);
  tlm::cp_async_commit();
  tlm::cp_async_wait<0>();
  __syncthreads();
  mma_test::ldmatrix_out(out, tile, trans);
  if (threadIdx.x == 0) out[128] = size;
}

// D (16x16) = A B + 0 by the attention kernel's path: A (16x16 row-major)
// by ldmatrix, B (16x16, k x n row-major, so k-major) by ldmatrix.trans,
// one warp.
extern "C" __global__ void mma_test_ldmatrix_product(float* d, const unsigned short* a, const unsigned short* b) {
  __shared__ __align__(16) unsigned short as[16 * 24], bs[16 * 24];
  for (int e = threadIdx.x; e < 256; e += blockDim.x) {
    as[e / 16 * 24 + e % 16] = a[e];
    bs[e / 16 * 24 + e % 16] = b[e];
  }
  __syncthreads();
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  unsigned ar[4], br[4];
  // A: matrix i = rows 8 (i % 2).., columns 8 (i / 2)..: registers a[0..3]
  tlm::ldmatrix_x4<false>(ar, as + (lane % 8 + lane / 8 % 2 * 8) * 24 + lane / 16 * 8);
  // B: matrix i = k rows 8 (i % 2).., n columns 8 (i / 2)..: b[0], b[1] of n-block 0, then of n-block 1
  tlm::ldmatrix_x4<true>(br, bs + (lane % 8 + lane / 8 % 2 * 8) * 24 + lane / 16 * 8);
  const float zero[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int nb = 0; nb < 2; nb++) {
    float dr[4];
    tlm::mma_m16n8k16_bf16(dr, ar, br + 2 * nb, zero);
    if (threadIdx.x < 32)
      for (int i = 0; i < 4; i++) d[(g + 8 * (i / 2)) * 16 + 8 * nb + 2 * t + i % 2] = dr[i];
  }
}

// The conversions the attention kernels use: out[i] = pack_bf16x2(x[2i],
// x[2i + 1]) (cvt.rn.bf16x2.f32 on a GPU) and e[i] = exp2_approx(y[i])
// (ex2.approx.ftz.f32), i < n.
extern "C" __global__ void mma_test_conversions(unsigned* out, float* e, const float* x, const float* y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    out[i] = tlm::pack_bf16x2(x[2 * i], x[2 * i + 1]);
    e[i] = tlm::exp2_approx(y[i]);
  }
}

// Errors the emulator must report: half the warp has returned before the
// mma; an ldmatrix row in global memory; one not 16-byte aligned.
extern "C" __global__ void mma_test_half_warp(float* d) {
  if (threadIdx.x % 32 >= 16) return;
  const unsigned a[4] = {0u, 0u, 0u, 0u}, b[2] = {0u, 0u};
  const float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  float r[4];
  tlm::mma_m16n8k16_bf16(r, a, b, c);
  d[threadIdx.x] = r[0];
}
extern "C" __global__ void mma_test_ldmatrix_global(unsigned* out, const unsigned short* m) {
  unsigned r[4];
  tlm::ldmatrix_x4<false>(r, m + threadIdx.x % 32 * 8);
  out[threadIdx.x] = r[0];
}
extern "C" __global__ void mma_test_ldmatrix_misaligned(unsigned* out) {
  __shared__ __align__(16) unsigned short tile[32 * 16 + 8];
  for (int e = threadIdx.x; e < 32 * 16 + 8; e += blockDim.x) tile[e] = (unsigned short)e;
  __syncthreads();
  unsigned r[4];
  tlm::ldmatrix_x4<false>(r, tile + 1 + threadIdx.x % 32 * 16);
  out[threadIdx.x] = r[0];
}
// Lanes that disagree: half the warp asks for .trans; half the warp at an
// mma while the other half shuffles.
extern "C" __global__ void mma_test_ldmatrix_mixed_trans(unsigned* out) {
  __shared__ __align__(16) unsigned short tile[32 * 16];
  for (int e = threadIdx.x; e < 32 * 16; e += blockDim.x) tile[e] = (unsigned short)e;
  __syncthreads();
  unsigned r[4];
  if (threadIdx.x % 32 < 16)
    tlm::ldmatrix_x4<true>(r, tile + threadIdx.x % 32 * 16);
  else
    tlm::ldmatrix_x4<false>(r, tile + threadIdx.x % 32 * 16);
  out[threadIdx.x] = r[0];
}
extern "C" __global__ void mma_test_mma_beside_shuffle(float* d) {
  const unsigned a[4] = {0u, 0u, 0u, 0u}, b[2] = {0u, 0u};
  const float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  float r[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  if (threadIdx.x % 32 < 16)
    tlm::mma_m16n8k16_bf16(r, a, b, c);
  else
    r[0] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
  d[threadIdx.x] = r[0];
}

// cp.async: thread i copies 16 bytes of src (4 words from word 4 i) into a
// shared tile, src_bytes 16, 8 or 0 by i % 3 (zeros after), in one group,
// then a second group into another tile; wait_group 1 (the first group's),
// a barrier, and each thread reads its neighbour's words (what another
// thread copied) into out[0 ..]; then wait_group 0, a barrier, and the
// second tile into out[4 blockDim.x ..]. With early, each thread reads its
// own first copy before any wait (the emulator: still the block's poison;
// a GPU: undefined, so only the emulated device runs it).
extern "C" __global__ void mma_test_cp_async(unsigned* out, const unsigned* src, int early) {
  __shared__ __align__(16) unsigned first[4 * 64], second[4 * 64];
  const int i = threadIdx.x, n = blockDim.x, next = (i + 1) % n;
  const unsigned bytes = i % 3 == 0 ? 16u : i % 3 == 1 ? 8u : 0u;
  tlm::cp_async_16(first + 4 * i, src + 4 * i, bytes);
  tlm::cp_async_commit();
  tlm::cp_async_16(second + 4 * i, src + 4 * (n + i), 16u);
  tlm::cp_async_commit();
  if (early) {
    for (int w = 0; w < 4; w++) out[4 * i + w] = first[4 * i + w];
    return;
  }
  tlm::cp_async_wait<1>();
  __syncthreads();
  for (int w = 0; w < 4; w++) out[4 * i + w] = first[4 * next + w];
  tlm::cp_async_wait<0>();
  __syncthreads();
  for (int w = 0; w < 4; w++) out[4 * (n + i) + w] = second[4 * next + w];
}
// Errors the emulator must report: a cp.async into global memory, and one
// from a misaligned source.
extern "C" __global__ void mma_test_cp_async_global(unsigned* out) {
  tlm::cp_async_16(out + 4 * threadIdx.x, out, 16u);
  tlm::cp_async_wait<0>();
}
// A cp.async just past the end of the dynamic shared memory.
extern "C" __global__ void mma_test_cp_async_past_dynamic(unsigned* out) {
  tlm::cp_async_16(tlm::dynamic_shared() + tlm::dynamic_shared_size() - 16 * threadIdx.x, out, 16u);
  tlm::cp_async_commit();
  tlm::cp_async_wait<0>();
}
extern "C" __global__ void mma_test_cp_async_misaligned(unsigned* out) {
  __shared__ __align__(16) unsigned tile[4 * 64];
  tlm::cp_async_16(tile + 4 * threadIdx.x, out + 1, 16u);
  tlm::cp_async_commit();
  tlm::cp_async_wait<0>();
}
