// The prelude of the runtime's CUDA kernels (the runtime/gpu/<name>.cu files are
// concatenated after it into one source, compiled by NVRTC for the device,
// or by the host C++ compiler against cuda_emu.h for the emulated device).
//
// Rules every kernel follows (docs/gpu.md, "Kernels"):
//   - extern "C" __global__ void tlm_<name>(...): scalar parameters are int,
//     long long or float; pointers are float*, const float*, const int*, or
//     unsigned short* (const or not) for bf16 bits (convert.cu and the
//     _bf16 variants: tlm::to_bf16, store and load below).
//   - blockDim.x a multiple of 32 (at most 1024); static __shared__ arrays
//     of at most 48 KiB per block, or dynamic shared memory through
//     tlm::dynamic_shared (below) with the launch's shared_bytes (device.h:
//     up to the device's opt-in limit, 227 KiB on sm_90), which the kernel
//     checks with tlm::dynamic_shared_size.
//   - deterministic: no atomics, every reduction in a fixed order that
//     does not depend on the grid size, so a --resume is bit-exact.
//   - blocks stride over their work (any grid size is correct), and
//     threads guard their indices (odd sizes).
//   - only what cuda_emu.h provides: threadIdx, blockIdx, blockDim, gridDim,
//     __syncthreads, __shfl_xor_sync, __shfl_down_sync, __shfl_sync, the C
//     math functions (expf, logf, sqrtf, tanhf, fmaxf, ...), rsqrtf. No
//     CUDA headers: the file compiles with NVRTC and with a host compiler.
// Names private to one .cu file carry its name as a prefix (the files share
// one translation unit).
// NVRTC has no <cmath>, so no INFINITY; the host compiler's <cmath> (through
// cuda_emu.h) has it.
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif

namespace tlm {

constexpr unsigned FULL_MASK = 0xffffffffu;

// The sum of v over the 32 lanes of a warp, in a fixed butterfly order: every
// lane gets the same bits.
__device__ __forceinline__ float warp_sum(float v) {
  for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(FULL_MASK, v, m);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int m = 16; m > 0; m >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, m));
  return v;
}

// The sum of v over the block (every thread must call it; blockDim.x a
// multiple of 32, at most 1024). Fixed order: warps, then warp 0 over the
// warps' sums. Every thread gets the result. Uses 33 floats of shared memory;
// safe to call twice in a row (the trailing barrier).
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float warp_sums[32];
  __shared__ float total;
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_sum(v);
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float w = lane < warps ? warp_sums[lane] : 0.0f;
    w = warp_sum(w);
    if (lane == 0) total = w;
  }
  __syncthreads();
  float r = total;
  __syncthreads();
  return r;
}
__device__ __forceinline__ float block_max(float v) {
  __shared__ float warp_maxes[32];
  __shared__ float total;
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_max(v);
  if (lane == 0) warp_maxes[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float w = lane < warps ? warp_maxes[lane] : -INFINITY;
    w = warp_max(w);
    if (lane == 0) total = w;
  }
  __syncthreads();
  float r = total;
  __syncthreads();
  return r;
}

// fp32 to bf16 bits, rounded to nearest even (NaN stays a quiet NaN): the
// bits cuda_bf16.h's __float2bfloat16_rn and tlm_f32_to_bf16
// (gemm_reference.c) give, with integer operations so that the file needs
// no CUDA header. Every kernel that writes bf16 (convert.cu, the bf16
// variants of the kernels writing GEMM inputs) rounds with it, so a tensor
// written in bf16 holds the bits the rounding pass would have made of it.
__device__ __forceinline__ unsigned short to_bf16(float v) {
  unsigned bits = __float_as_uint(v);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((bits >> 16) | 0x0040u);
  return (unsigned short)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

// A kernel's output element, fp32 or bf16 (--precision bf16's GEMM inputs):
// one templated kernel body serves both, and the fp32 one stores the very
// value it stored before.
__device__ __forceinline__ void store(float *p, float v) { *p = v; }
__device__ __forceinline__ void store(unsigned short *p, float v) { *p = to_bf16(v); }
// The reverse: a kernel input that is fp32, or bf16 widened exactly.
__device__ __forceinline__ float load(const float *p) { return *p; }
__device__ __forceinline__ float load(const unsigned short *p) { return __uint_as_float((unsigned)*p << 16); }

// The block's dynamic shared memory: the launch's shared_bytes (device.h),
// 16-byte aligned, and its size. The host computes the bytes the kernel
// needs, so a kernel checks dynamic_shared_size() and traps when it is
// short (its launch then fails, on a GPU and on the emulated device alike).
__device__ __forceinline__ unsigned char *dynamic_shared() {
#if defined(TLM_CUDA_EMULATED)
  return tlm_emu_dynamic_shared();
#else
  extern __shared__ __align__(16) unsigned char tlm_dynamic_shared_bytes[];
  return tlm_dynamic_shared_bytes;
#endif
}
__device__ __forceinline__ unsigned dynamic_shared_size() {
#if defined(TLM_CUDA_EMULATED)
  return tlm_emu_dynamic_shared_size();
#else
  unsigned bytes;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(bytes));
  return bytes;
#endif
}

}  // namespace tlm
