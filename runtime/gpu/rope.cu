// Rotary position embedding on the device (runtime/ops/rope.c): within each
// head of size D, element i pairs with i + D/2 and the pair turns by
// sign * angle(t, i), read from the tables cos_t, sin_t [T, D/2]:
//   out_i       = x_i cos - x_{i+D/2} sin
//   out_{i+D/2} = x_{i+D/2} cos + x_i sin
// x and out: [B,T,H,D] with tokens `stride` elements apart (3 H D inside a
// packed qkv). One thread per pair reads both elements before writing them,
// so out may equal x (the executor rotates q and k in place).
//
// --precision bf16 stores q and k in bf16: tlm_rope_rotate_bf16 reads x in
// bf16 (widened exactly), turns the pair in fp32 as the fp32 kernel does,
// and rounds each result once as it stores it: the fp32 kernel's output on
// the same inputs, rounded to nearest even.
template <typename X>
__device__ void rope_rotate(X *out, const X *x, const float *cos_t, const float *sin_t, int B, int T, int H, int D,
                            int stride, float sign) {
  int half = D / 2;
  long long pairs = (long long)B * T * H * half, step = (long long)gridDim.x * blockDim.x;
  for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < pairs; p += step) {
    long long q = p / half, bt = q / H;
    int i = (int)(p - q * half), h = (int)(q - bt * H), t = (int)(bt % T);
    long long at = bt * stride + (long long)h * D + i, angle = (long long)t * half + i;
    float c = cos_t[angle], sn = sign * sin_t[angle];
    float x1 = tlm::load(x + at), x2 = tlm::load(x + at + half);
    tlm::store(out + at, x1 * c - x2 * sn);
    tlm::store(out + at + half, x2 * c + x1 * sn);
  }
}

extern "C" __global__ void tlm_rope_rotate(float *out, const float *x, const float *cos_t, const float *sin_t, int B,
                                           int T, int H, int D, int stride, float sign) {
  rope_rotate(out, x, cos_t, sin_t, B, T, H, D, stride, sign);
}
extern "C" __global__ void tlm_rope_rotate_bf16(unsigned short *out, const unsigned short *x, const float *cos_t,
                                                const float *sin_t, int B, int T, int H, int D, int stride,
                                                float sign) {
  rope_rotate(out, x, cos_t, sin_t, B, T, H, D, stride, sign);
}
