// The tensor cores' warp-matrix instructions, and the asynchronous copy that
// stages their tiles, as device functions: on a GPU (sm_80 and later) each
// is one PTX instruction of inline assembly. On the emulated device
// (TLM_CUDA_EMULATED, cuda_emu.h) mma and ldmatrix are collectives of the
// warp's 32 lanes that build the matrices from every lane's registers by
// the PTX ISA's fragment layouts, so a kernel that puts an element in the
// wrong lane's register gets a wrong product in CI, as it would on the GPU;
// every lane of the warp must call them together (.sync.aligned), with the
// same arguments' kinds, and the emulator reports a missing lane. cp.async
// is per thread (below).
//
// The runtime's source has this file right after common.cuh (it uses
// tlm::to_bf16), before every .cu file (runtime/CMakeLists.txt).
//
// Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16 with
// floating point type"), with g = lane / 4 and t = lane % 4; a .b32
// register holds two bf16, the lower index in the lower 16 bits:
//   A, 16x16 row-major, 4 registers: a[0] = A[g][2t, 2t+1],
//     a[1] = A[g+8][2t, 2t+1], a[2] = A[g][2t+8, 2t+9], a[3] = A[g+8][2t+8, 2t+9];
//   B, 16x8 (k x n) "col", 2 registers: b[0] = B[2t, 2t+1][g],
//     b[1] = B[2t+8, 2t+9][g];
//   C and D, 16x8 fp32, 4 floats: c[0], c[1] = C[g][2t, 2t+1],
//     c[2], c[3] = C[g+8][2t, 2t+1].
// ldmatrix m8n8.x4 (PTX ISA, "Warp-level matrix load instruction:
// ldmatrix"): lane 8i + r gives the shared-memory address of row r of the
// 8x8 matrix i (16 bytes, 16-byte aligned); register i of each lane gets
// matrix i's row g, columns 2t and 2t+1, or with .trans its column g, rows
// 2t and 2t+1. So a non-transposed load of a row-major tile gives A
// fragments, and of a matrix stored n-major (k contiguous) B fragments; the
// transposed load gives B fragments of a k-major matrix.

namespace tlm {

// Two floats as one register of two bf16 (rounded to nearest even), lo in
// the lower half: how a kernel builds an A or B fragment from fp32 values.
// On a GPU one cvt.rn.bf16x2.f32 (the upper half from its first operand),
// the bits to_bf16 gives for every number; to_bf16's integer rounding took
// about 14 instructions a pair (attention_tc.cu packs P and dS this way,
// 16 pairs a lane a tile). A NaN may come out as another NaN.
__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
#if !defined(TLM_CUDA_EMULATED) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return (unsigned)to_bf16(lo) | (unsigned)to_bf16(hi) << 16;
#endif
}

// 2^x on the special-function unit: ex2.approx.ftz.f32 (within 2 ulp;
// subnormal results flushed to 0; 2^-inf is +0), one instruction where
// expf is about eight. exp2f on the emulated device.
__device__ __forceinline__ float exp2_approx(float x) {
#if !defined(TLM_CUDA_EMULATED) && defined(__CUDA_ARCH__)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return exp2f(x);
#endif
}

// d = A B + c over the warp: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32.
// d may be c (accumulating in place).
__device__ __forceinline__ void mma_m16n8k16_bf16(float d[4], const unsigned a[4], const unsigned b[2],
                                                  const float c[4]) {
#if defined(TLM_CUDA_EMULATED)
  tlm_emu_mma_m16n8k16_bf16(d, a, b, c);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
#else
  // bf16 mma needs sm_80; the host calls refuse older GPUs before launching.
  __trap();
#endif
}

#if !defined(TLM_CUDA_EMULATED)
// A generic address of shared memory as the .shared state space's 32-bit
// address, which ldmatrix takes.
__device__ __forceinline__ unsigned shared_address(const void *p) {
  unsigned a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}
#endif

// Four 8x8 bf16 matrices from shared memory, each lane giving one row's
// address: ldmatrix.sync.aligned.m8n8.x4{.trans}.shared.b16.
template <bool Trans>
__device__ __forceinline__ void ldmatrix_x4(unsigned r[4], const unsigned short *row) {
#if defined(TLM_CUDA_EMULATED)
  tlm_emu_ldmatrix_x4(r, row, Trans);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if (Trans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(row))
                 : "memory");
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(row))
                 : "memory");
#else
  __trap();
#endif
}

// cp.async (sm_80): copies 16 bytes from global to shared memory without
// the registers, src_bytes of them from src and zeros after (0: all zeros,
// src not read), in the background: the copies a thread issued since its
// last cp_async_commit form a group, and cp_async_wait<N> waits until at
// most the N newest of its committed groups are still in flight. A copy is
// visible to the thread after that wait, and to the other threads after a
// __syncthreads that follows their waits. dst and src 16-byte aligned.
// On the emulated device each copy is made at the wait that covers it, so a
// read before that wait sees the shared memory as it was.
__device__ __forceinline__ void cp_async_16(void *dst, const void *src, unsigned src_bytes) {
#if defined(TLM_CUDA_EMULATED)
  tlm_emu_cp_async_16(dst, src, src_bytes);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)), "l"(src), "r"(src_bytes)
               : "memory");
#else
  __trap();
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#if defined(TLM_CUDA_EMULATED)
  tlm_emu_cp_async_commit();
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#else
  __trap();
#endif
}

template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(TLM_CUDA_EMULATED)
  tlm_emu_cp_async_wait(N);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#else
  __trap();
#endif
}

}  // namespace tlm
