// One token of Titans' memory for sampling: tlm_titans_decode (runtime/ops/
// titans.c) on the device. state [H][3][D][D] holds per head M, S and M0
// (the memory at the start of the token's chunk); chunk_start copies M into
// M0 first. Then, as the forward's token step:
//   e = M0 k - v,  S = eta S - 2 theta e k^T,  M = (1 - alpha) M + S,
//   y = M q  (when has_y).
// One block per head (blocks stride over heads); thread i owns rows i,
// i + blockDim.x, ... of M and S, so every element is written by one thread
// in a fixed order. e sits in shared memory (D <= 1024). q, k, v and y are
// fp32, or bf16 (--precision bf16's mem_qkv and mem_y: q, k, v widened
// exactly, y rounded once as the forward stores it): one template, so on
// the same rounded q, k, v the bf16 instantiation gives the fp32 kernel's
// state bit for bit and its y rounded (the state is fp32 in either).
constexpr int TITANS_DECODE_MAX_D = 1024;

template <typename X>
__device__ void titans_decode_token(X *y, float *state, const X *q, const X *k, const X *v, const float *theta,
                                    const float *eta, const float *alpha, int H, int D, int chunk_start, int has_y) {
  __shared__ float e[TITANS_DECODE_MAX_D];
  const long long DD = (long long)D * D;
  for (int h = blockIdx.x; h < H; h += gridDim.x) {
    float *M = state + (long long)h * 3 * DD, *S = M + DD, *M0 = S + DD;
    const X *qh = q + (long long)h * D, *kh = k + (long long)h * D, *vh = v + (long long)h * D;
    if (chunk_start)
      for (long long i = threadIdx.x; i < DD; i += blockDim.x) M0[i] = M[i];
    __syncthreads();
    for (int i = threadIdx.x; i < D; i += blockDim.x) {
      float dot = 0.0f;
      for (int j = 0; j < D; j++) dot += M0[(long long)i * D + j] * tlm::load(kh + j);
      e[i] = dot - tlm::load(vh + i);
    }
    __syncthreads();
    const float keep = 1.0f - alpha[h], th = theta[h], et = eta[h];
    for (int i = threadIdx.x; i < D; i += blockDim.x) {
      const long long r = (long long)i * D;
      const float c = 2.0f * th * e[i];
      float out = 0.0f;
      for (int j = 0; j < D; j++) {
        const float s = et * S[r + j] - c * tlm::load(kh + j);
        S[r + j] = s;
        const float m = keep * M[r + j] + s;
        M[r + j] = m;
        out += m * tlm::load(qh + j);
      }
      if (has_y) tlm::store(y + (long long)h * D + i, out);
    }
    __syncthreads();  // e is rewritten for the next head
  }
}
extern "C" __global__ void tlm_titans_decode(float *y, float *state, const float *q, const float *k, const float *v,
                                             const float *theta, const float *eta, const float *alpha, int H, int D,
                                             int chunk_start, int has_y) {
  titans_decode_token(y, state, q, k, v, theta, eta, alpha, H, D, chunk_start, has_y);
}
extern "C" __global__ void tlm_titans_decode_bf16(unsigned short *y, float *state, const unsigned short *q,
                                                  const unsigned short *k, const unsigned short *v, const float *theta,
                                                  const float *eta, const float *alpha, int H, int D, int chunk_start,
                                                  int has_y) {
  titans_decode_token(y, state, q, k, v, theta, eta, alpha, H, D, chunk_start, has_y);
}
