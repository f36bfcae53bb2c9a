// One new token's causal attention over the KV cache (sampling), per head:
// the row n - 1 of the training attention, with the keys and values of
// positions [0, n) read from the cache (rows `stride` elements apart):
//   s_u = q . k_u / sqrt(D),  P = softmax(s),  y = sum_u P_u v_u.
// One block per head (blocks stride over heads). The keys go by tiles of
// blockDim.x: each thread scores one key, the tile's scores sit in shared
// memory, and a running max and sum rescale what was accumulated before
// (the online softmax), so any n runs in fixed shared memory. Thread i owns
// y's elements i, i + blockDim.x, ... (D <= 4 blockDim.x). Every sum runs in
// a fixed order: the same bits for any grid.
constexpr int ATTENTION_DECODE_BLOCK = 256;
constexpr int ATTENTION_DECODE_PER_THREAD = 4;

// --precision bf16 (attention.cu's storage types): q, k, v (X: the new
// token's row of qkv and the cache's rows) fp32 or bf16, widened exactly as
// they are read; y (Y) fp32 or bf16, rounded once as it is stored. The
// same sums in the same order either way: the fp32 kernel's bits on the
// same (rounded) inputs.
template <typename X, typename Y>
__device__ void attention_decode(Y *y, const X *q, const X *k, const X *v, int n, int H, int D, int stride) {
  __shared__ float p[ATTENTION_DECODE_BLOCK];
  const float scale = 1.0f / sqrtf((float)D);
  const int tid = threadIdx.x, threads = blockDim.x;
  for (int h = blockIdx.x; h < H; h += gridDim.x) {
    const X *qh = q + (long long)h * D, *kh = k + (long long)h * D, *vh = v + (long long)h * D;
    float running_max = -INFINITY, running_sum = 0.0f, acc[ATTENTION_DECODE_PER_THREAD];
    for (int i = 0; i < ATTENTION_DECODE_PER_THREAD; i++) acc[i] = 0.0f;
    for (int u0 = 0; u0 < n; u0 += threads) {
      const int count = n - u0 < threads ? n - u0 : threads;
      float score = -INFINITY;
      if (tid < count) {
        const X *ku = kh + (long long)(u0 + tid) * stride;
        float dot = 0.0f;
        for (int d = 0; d < D; d++) dot += tlm::load(qh + d) * tlm::load(ku + d);
        score = dot * scale;
      }
      const float new_max = fmaxf(running_max, tlm::block_max(score));
      const float e = tid < count ? expf(score - new_max) : 0.0f;
      p[tid] = e;
      const float tile_sum = tlm::block_sum(e);           // its barriers also publish p
      const float rescale = expf(running_max - new_max);  // 0 on the first tile
      running_sum = running_sum * rescale + tile_sum;
      for (int i = 0; i < ATTENTION_DECODE_PER_THREAD; i++) {
        const int d = tid + i * threads;
        if (d >= D) break;
        float a = acc[i] * rescale;
        for (int j = 0; j < count; j++) a += p[j] * tlm::load(vh + (long long)(u0 + j) * stride + d);
        acc[i] = a;
      }
      running_max = new_max;
      __syncthreads();  // p is rewritten by the next tile
    }
    for (int i = 0; i < ATTENTION_DECODE_PER_THREAD; i++) {
      const int d = tid + i * threads;
      if (d < D) tlm::store(y + (long long)h * D + d, acc[i] / running_sum);
    }
  }
}

extern "C" __global__ void tlm_attention_decode(float *y, const float *q, const float *k, const float *v, int n, int H,
                                                int D, int stride) {
  attention_decode(y, q, k, v, n, H, D, stride);
}
// q, k, v and y in bf16 (the cache in bf16)
extern "C" __global__ void tlm_attention_decode_bf16(unsigned short *y, const unsigned short *q,
                                                     const unsigned short *k, const unsigned short *v, int n, int H,
                                                     int D, int stride) {
  attention_decode(y, q, k, v, n, H, D, stride);
}
// q, k, v in bf16, y fp32 (gated attention)
extern "C" __global__ void tlm_attention_decode_qkv_bf16(float *y, const unsigned short *q, const unsigned short *k,
                                                         const unsigned short *v, int n, int H, int D, int stride) {
  attention_decode(y, q, k, v, n, H, D, stride);
}
