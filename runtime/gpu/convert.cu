// fp32 to bf16, rounded to nearest even (tlm::to_bf16, common.cuh). The
// bf16 GEMM path (bf16_gemm.c) feeds cuBLASLt with it: the weights'
// working copy after each update, and the activation operands that are not
// already stored in bf16 (gradients, and what no bf16 kernel writes) before
// each GEMM. One thread per element; blocks stride.
extern "C" __global__ void tlm_to_bf16(unsigned short *y, const float *x, long long n) {
  long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) y[i] = tlm::to_bf16(x[i]);
}
