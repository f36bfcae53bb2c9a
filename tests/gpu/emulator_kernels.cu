// Kernels that exercise the CUDA emulator (runtime/device/cuda_emu.h), run by
// tests/gpu/test_emulator.c. Plain CUDA: only what common.cuh allows, plus
// the deliberately wrong kernels whose errors the emulator must report.

namespace emu_test {

constexpr unsigned FULL = 0xffffffffu;

// Warp butterflies, then warp 0 over the warps' sums (common.cuh's block_sum).
__device__ __forceinline__ float warp_sum(float v) {
  for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(FULL, v, m);
  return v;
}
// A tree down the warp with __shfl_down_sync: lane 0 has the sum.
__device__ __forceinline__ float warp_sum_down(float v) {
  for (unsigned d = 16; d > 0; d >>= 1) v += __shfl_down_sync(FULL, v, d);
  return v;
}
__device__ float block_sum(float v, bool down) {
  __shared__ float warp_sums[32];
  __shared__ float total;
  unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = down ? warp_sum_down(v) : warp_sum(v);
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float w = lane < warps ? warp_sums[lane] : 0.0f;
    w = down ? warp_sum_down(w) : warp_sum(w);
    if (lane == 0) total = w;
  }
  __syncthreads();
  float r = total;
  __syncthreads();
  return r;
}

}  // namespace emu_test

// out[r] = the sum of row r of x (rows x n); blocks stride over the rows.
extern "C" __global__ void emu_row_sums(const float *__restrict__ x, int rows, int n, int down, float *out) {
  for (int r = blockIdx.x; r < rows; r += gridDim.x) {
    float v = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) v += x[(long long)r * n + i];
    float s = emu_test::block_sum(v, down != 0);
    if (threadIdx.x == 0) out[r] = s;
  }
}

// Every shuffle and vote, per lane: EMU_SHUFFLE_RESULTS ints per thread.
extern "C" __global__ void emu_shuffles(int *out) {
  using emu_test::FULL;
  unsigned t = threadIdx.x, lane = t % 32, warp = t / 32;
  int v = (int)(lane * 10 + warp * 1000 + blockIdx.x * 100000);
  float f = (float)v;
  unsigned u = (unsigned)v;
  long long l = (long long)v << 33;
  int *o = out + (blockIdx.x * blockDim.x + t) * 16;
  o[0] = __shfl_xor_sync(FULL, v, 1);
  o[1] = (int)__shfl_xor_sync(FULL, f, 16);
  o[2] = __shfl_down_sync(FULL, v, 1);
  o[3] = (int)__shfl_down_sync(FULL, f, 5);
  o[4] = (int)__shfl_up_sync(FULL, u, 1);
  o[5] = __shfl_up_sync(FULL, v, 7);
  o[6] = __shfl_sync(FULL, v, (int)((lane * 7 + 3) % 32));
  o[7] = (int)__shfl_sync(FULL, u, (int)(31 - lane));
  o[8] = __shfl_down_sync(FULL, v, 3, 8);
  o[9] = (int)__shfl_up_sync(FULL, f, 2, 8);
  o[10] = __shfl_xor_sync(FULL, v, 4, 4);
  o[11] = __shfl_sync(FULL, v, 5, 16);
  o[12] = (int)__ballot_sync(FULL, lane % 3 == 0);
  o[13] = __any_sync(FULL, lane == 17) + 2 * __all_sync(FULL, lane < 31);
  o[14] = (int)(__shfl_xor_sync(FULL, l, 8) >> 33);
  o[15] = __shfl_down_sync(FULL, v, 40);
}

// Every thread records its indices and the launch's dimensions.
extern "C" __global__ void emu_indices(unsigned *out) {
  unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  unsigned *o = out + 12ull * (b * (blockDim.x * blockDim.y * blockDim.z) + t);
  dim3 block = blockDim, grid = gridDim;
  o[0] = threadIdx.x, o[1] = threadIdx.y, o[2] = threadIdx.z;
  o[3] = blockIdx.x, o[4] = blockIdx.y, o[5] = blockIdx.z;
  o[6] = block.x, o[7] = block.y, o[8] = block.z;
  o[9] = grid.x, o[10] = grid.y, o[11] = grid.z;
}

// y = 2x + y over n elements, whatever the grid (a grid-stride loop).
extern "C" __global__ void emu_axpy(const float *x, float *y, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x)
    y[i] = 2.0f * x[i] + y[i];
}

// order[block] = the how-manieth block it ran as (counter starts at 0).
extern "C" __global__ void emu_block_order(int *counter, int *order) {
  if (threadIdx.x == 0) order[blockIdx.x] = (*counter)++;
}

// Wrong on a GPU: block b reads what block b - 1 wrote.
extern "C" __global__ void emu_block_chain(int *out) {
  if (threadIdx.x == 0) out[blockIdx.x] = blockIdx.x == 0 ? 1 : out[blockIdx.x - 1] + 1;
}

// Threads from `alive` on return at once; the others go on through barriers
// (the returned threads count as arrived), and warp 0, all alive, shuffles.
extern "C" __global__ void emu_early_exit(int alive, float *out) {
  __shared__ float s[1024];
  unsigned t = threadIdx.x;
  if ((int)t >= alive) return;
  s[t] = (float)(t + 1);
  __syncthreads();
  float v = s[(t + 1) % alive];
  __syncthreads();
  s[t] = 2.0f * v;
  if (t < 32) v = __shfl_xor_sync(emu_test::FULL, v, 1);
  int odd = __syncthreads_count(t % 2);
  out[blockIdx.x * blockDim.x + t] = s[(t + 3) % alive] + (float)odd + 1000.0f * v;
}

// 8 barriers over a ring in shared memory (two buffers, so that a step's
// writes never meet the previous step's reads): the emulator's switch cost.
extern "C" __global__ void emu_barriers(float *out) {
  __shared__ float s[2][1024];
  float v = (float)threadIdx.x;
  for (int k = 0; k < 8; k++) {
    s[k % 2][threadIdx.x] = v;
    __syncthreads();
    v = s[k % 2][(threadIdx.x + 1) % blockDim.x];
  }
  out[threadIdx.x] = v;
}

// Errors the emulator must report, not hang on.
// Lane 7 of warp 1 returns while its warp shuffles.
extern "C" __global__ void emu_exit_then_shuffle(float *out) {
  if (threadIdx.x == 39) return;
  out[threadIdx.x] = __shfl_xor_sync(emu_test::FULL, (float)threadIdx.x, 1);
}
// Lane 5 of each warp waits at a barrier while the rest of its warp shuffles.
extern "C" __global__ void emu_barrier_in_shuffle(float *out) {
  float v = (float)threadIdx.x;
  if (threadIdx.x % 32 == 5)
    __syncthreads();
  else
    v = __shfl_xor_sync(emu_test::FULL, v, 1);
  out[threadIdx.x] = v;
}
// Half a warp at __syncwarp, the other half at a shuffle.
extern "C" __global__ void emu_split_warp(float *out) {
  float v = (float)threadIdx.x;
  if (threadIdx.x % 32 < 16)
    __syncwarp();
  else
    v = __shfl_xor_sync(emu_test::FULL, v, 1);
  out[threadIdx.x] = v;
}
extern "C" __global__ void emu_trap(float *out) {
  if (blockIdx.x == 1 && threadIdx.x == 33) __trap();
  out[threadIdx.x] = 1.0f;
}

// bf16 conversions of n floats: bits of __float2bfloat16, of the
// constructor, of the pair's halves, and the values back as floats.
extern "C" __global__ void emu_bf16(const float *in, int n, unsigned short *bits, unsigned short *ctor_bits,
                                    float *back, float *low, float *high) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    __nv_bfloat16 b = __float2bfloat16(in[i]);
    __nv_bfloat16 c = in[i];
    bits[i] = __bfloat16_as_ushort(b);
    ctor_bits[i] = __bfloat16_as_ushort(c) ^ __bfloat16_as_ushort(__float2bfloat16_rn(in[i]));
    back[i] = __bfloat162float(b);
    __nv_bfloat162 pair = __floats2bfloat162_rn(in[i], -in[i]);
    low[i] = __low2float(pair);
    high[i] = __high2float(pair);
  }
}

// bf16 arithmetic on pairs: the bits of a + b, a * b, a - b, -a, and a < b.
extern "C" __global__ void emu_bf16_ops(const float *a, const float *b, int n, unsigned short *out) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    __nv_bfloat16 x = __float2bfloat16(a[i]), y = __float2bfloat16(b[i]);
    __nv_bfloat16 s = x + y, p = x * y, d = x;
    d -= y;
    out[5 * i + 0] = __bfloat16_as_ushort(s);
    out[5 * i + 1] = __bfloat16_as_ushort(p);
    out[5 * i + 2] = __bfloat16_as_ushort(d);
    out[5 * i + 3] = __bfloat16_as_ushort(-x);
    out[5 * i + 4] = x < y;
  }
}

__constant__ float emu_table[4] = {0.25f, 0.5f, 2.5f, -3.5f};

// CUDA's math helpers and min/max overloads, one result each.
extern "C" __global__ void emu_math(const float *x, float *out) {
  if (threadIdx.x != 0) return;
  long long big = 1ll << 40;
  unsigned u = 7u;
  out[0] = rsqrtf(__ldg(x + 0));                                          // x0 = 4
  out[1] = __expf(0.0f) + __logf(1.0f);                                   // 1
  out[2] = __fdividef(x[1], 2.0f);                                        // x1 = 3
  out[3] = (float)min(3, 5) + (float)max(3, 5);                           // 8
  out[4] = (float)(min(big, 3) + max(2, big));                            // 3 + 2^40
  out[5] = min(1.5f, x[1]) + max(1.5f, x[1]);                             // 4.5
  out[6] = (float)min(u, 9) + (float)max(-1, u);                          // 7 + 0xffffffff as unsigned
  out[7] = __int_as_float(__float_as_int(x[1]));                          // 3
  out[8] = fmaxf(-INFINITY, x[0]) + fminf(x[0], INFINITY);                // 8
  out[9] = (float)__popc(0xf0f0u) + (float)__clz(1) + __saturatef(2.0f);  // 8 + 31 + 1
  // 2 + (-4) + 0 + 2 + 3 + 2147483647 (saturated): round half to even, NaN to 0
  float nan = __int_as_float(0x7fc00000);
  out[10] = (float)(__float2int_rn(emu_table[2]) + __float2int_rn(emu_table[3]) + __float2int_rn(nan)) +
            (float)__float2int_rz(emu_table[2]) + __fmul_rn(emu_table[1], 6.0f) + (float)__float2int_rn(3e10f);
  out[11] = __fadd_rn(emu_table[0], 1.0f) - __fsub_rn(1.0f, 0.5f) + __fdiv_rn(1.0f, 4.0f);  // 1.25 - 0.5 + 0.25
}

// Barrier votes among the threads that arrive (from 48 on they return).
extern "C" __global__ void emu_barrier_votes(int *out) {
  unsigned t = threadIdx.x;
  if (t >= 48) return;
  int r = __syncthreads_and(t < 1000);
  r |= __syncthreads_or(t == 5) << 1;
  r |= __syncthreads_and(t != 7) << 2;
  r |= __syncthreads_count(t % 3 == 0) << 3;
  out[t] = r;
}

// Wrong on a GPU: reads a neighbour's shared value without a barrier.
extern "C" __global__ void emu_missing_barrier(int step, float *out) {
  __shared__ float s[1024];
  unsigned t = threadIdx.x, n = blockDim.x;
  s[t] = (float)(t + 1000 * blockIdx.x);
  out[blockIdx.x * n + t] = s[(t + n + step) % n];
}

// Wrong on a GPU: reads shared memory before the block writes it (then
// writes it, which the next block must not see either).
extern "C" __global__ void emu_uninit_shared(float *out) {
  __shared__ float s[64];
  __shared__ int count;
  unsigned t = threadIdx.x, b = blockIdx.x;
  out[b * 128 + t] = s[t];
  out[b * 128 + 64 + t] = (float)count;
  __syncthreads();
  s[t] = 5.0f;
  count = 7;
}

// A race only a warp running ahead exposes: warp 0 fills x, a barrier,
// then warp 0 does four warp operations and refills x without the barrier
// that would end warp 1's reads of the first contents. Taking turns
// round-robin, warp 1 reads before warp 0 gets that far; warp by warp in
// ascending order it reads the refill. out[b * 32 + lane]: what warp 1 read.
extern "C" __global__ void emu_warp_ahead(float *out) {
  __shared__ float x[32];
  unsigned t = threadIdx.x, lane = t % 32;
  if (t < 32) x[lane] = 1.0f + lane;
  __syncthreads();
  if (t < 32) {
    float v = x[lane];
    for (int k = 0; k < 4; k++) v += 0.0f * __shfl_xor_sync(0xffffffffu, v, 1 << k);
    x[lane] = -v;
  } else {
    out[blockIdx.x * 32 + lane] = x[lane];
  }
}

// Dynamic shared memory: each thread reads the word at its place from the
// buffer's far end before anything is written (the poison), writes its
// block and thread there, then reads the mirrored thread's word, and the
// buffer's size: out[b * 3 T ..] (T threads a block).
extern "C" __global__ void emu_dynamic_shared(float *out) {
  float *s = (float *)tlm_emu_dynamic_shared();
  unsigned T = blockDim.x, t = threadIdx.x, b = blockIdx.x, last = tlm_emu_dynamic_shared_size() / 4 - 1;
  float *o = out + b * 3 * T;
  o[t] = s[last - t];
  __syncthreads();
  s[last - t] = (float)(b * 1000 + t);
  __syncthreads();
  o[T + t] = s[last - (T - 1 - t)];
  o[2 * T + t] = (float)tlm_emu_dynamic_shared_size();
}
