// fp32 to bf16, rounded to nearest even (NaN stays a quiet NaN): the bits
// cuda_bf16.h's __float2bfloat16_rn and tlm_f32_to_bf16 (gemm_reference.c)
// give, written with integer operations so that the file needs no CUDA
// header. The bf16 GEMM path (bf16_gemm.c) feeds cuBLASLt with it: the
// weights' working copy after each update, the activations before each
// GEMM. One thread per element; blocks stride.
extern "C" __global__ void tlm_to_bf16(unsigned short *y, const float *x, long long n) {
  long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    unsigned bits = __float_as_uint(x[i]);
    unsigned short h;
    if ((bits & 0x7fffffffu) > 0x7f800000u) h = (unsigned short)((bits >> 16) | 0x0040u);
    else h = (unsigned short)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
    y[i] = h;
  }
}
