// Softmax cross-entropy on the device (runtime/ops/crossentropy.c):
//   lse_n  = m + log sum_v exp(logit[n,v] - m),  m = max_v logit[n,v]
//   loss_n = lse_n - logit[n, target_n]  (0 for an ignored row, target < 0)
//   dlogit = dloss / n_valid * (exp(logit - lse) - onehot(target))
//
// --precision bf16 stores the logits in bf16 (the head GEMM's D, rounded
// once), and their gradient in place over them. Each kernel is one template
// over the logits' storage (float, or bf16 bits: unsigned short): it reads
// each logit widened exactly (tlm::load), computes in fp32 in the fp32
// kernel's order, and the backward rounds each dlogit once as it stores it
// (tlm::store). So on the same rounded logits the _bf16 kernels give the
// fp32 kernels' lse, losses and mean, and the fp32 kernel's dlogits rounded
// to nearest even (gpu.basic checks both bit for bit).

// The sum of an int over the block, exact (every thread must call it; every
// thread gets the result). Thread 0 adds the threads' values in thread order.
__device__ __forceinline__ int crossentropy_block_count(int v) {
  __shared__ int crossentropy_counts[1024];
  __shared__ int crossentropy_total;
  crossentropy_counts[threadIdx.x] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    int total = 0;
    for (unsigned t = 0; t < blockDim.x; t++) total += crossentropy_counts[t];
    crossentropy_total = total;
  }
  __syncthreads();
  int r = crossentropy_total;
  __syncthreads();
  return r;
}

// lse[n] and, when losses is not null, losses[n]: one block per row.
template <typename L>
__device__ void crossentropy_rows(float *losses, float *lse, const L *logits, const int *targets, int N, int V) {
  for (int n = blockIdx.x; n < N; n += gridDim.x) {
    const L *z = logits + (long long)n * V;
    float m = -INFINITY;
    for (int v = threadIdx.x; v < V; v += blockDim.x) m = fmaxf(m, tlm::load(z + v));
    m = tlm::block_max(m);
    // every term is at most 1 and the largest is exactly 1: no overflow, and
    // the sum never underflows to 0
    float s = 0.0f;
    for (int v = threadIdx.x; v < V; v += blockDim.x) s += expf(tlm::load(z + v) - m);
    s = tlm::block_sum(s);
    if (threadIdx.x == 0) {
      double l = (double)m + log((double)s);
      lse[n] = (float)l;
      int target = targets[n];
      if (losses) losses[n] = target < 0 ? 0.0f : (float)(l - tlm::load(z + target));
    }
  }
}

extern "C" __global__ void tlm_crossentropy_rows(float *losses, float *lse, const float *logits, const int *targets,
                                                 int N, int V) {
  crossentropy_rows(losses, lse, logits, targets, N, V);
}
extern "C" __global__ void tlm_crossentropy_rows_bf16(float *losses, float *lse, const unsigned short *logits,
                                                      const int *targets, int N, int V) {
  crossentropy_rows(losses, lse, logits, targets, N, V);
}

// *loss_out = the mean loss over the rows that are not ignored (0 if none),
// in double, recomputed from lse like the CPU op (so losses may be absent).
// The order is fixed by the block size alone: block 0's thread t adds the
// rows [t c, (t + 1) c) in row order, c = ceil(N / blockDim.x), and thread 0
// then adds the threads' sums in thread order. Other blocks have no work.
template <typename L>
__device__ void crossentropy_mean(double *loss_out, const float *lse, const L *logits, const int *targets, int N,
                                  int V) {
  __shared__ double crossentropy_sums[1024];
  if (blockIdx.x != 0) return;
  int chunk = (int)(((long long)N + blockDim.x - 1) / blockDim.x);
  long long first = (long long)threadIdx.x * chunk, last = first + chunk < N ? first + chunk : N;
  double total = 0.0;
  int valid = 0;
  for (long long n = first; n < last; n++) {
    int target = targets[n];
    if (target < 0) continue;
    total += (double)lse[n] - tlm::load(logits + n * V + target);
    valid++;
  }
  crossentropy_sums[threadIdx.x] = total;
  valid = crossentropy_block_count(valid);  // its barrier also publishes the sums
  if (threadIdx.x == 0) {
    double sum = 0.0;
    for (unsigned t = 0; t < blockDim.x; t++) sum += crossentropy_sums[t];
    *loss_out = valid ? sum / valid : 0.0;
  }
}

extern "C" __global__ void tlm_crossentropy_mean(double *loss_out, const float *lse, const float *logits,
                                                 const int *targets, int N, int V) {
  crossentropy_mean(loss_out, lse, logits, targets, N, V);
}
extern "C" __global__ void tlm_crossentropy_mean_bf16(double *loss_out, const float *lse, const unsigned short *logits,
                                                      const int *targets, int N, int V) {
  crossentropy_mean(loss_out, lse, logits, targets, N, V);
}

// dlogits (written; may be logits itself: each element is read before it is
// written, by the same thread), one block per row. Every block first counts
// the valid targets itself (an exact integer count, so the same in every
// block): the C wrapper keeps the grid small, so the repeated count costs
// little next to the rows.
template <typename L>
__device__ void crossentropy_rows_backward(L *dlogits, const L *logits, const float *lse, const int *targets, int N,
                                           int V, float dloss) {
  int valid = 0;
  for (int n = threadIdx.x; n < N; n += blockDim.x) valid += targets[n] >= 0;
  valid = crossentropy_block_count(valid);
  float scale = valid ? dloss / (float)valid : 0.0f;
  for (int n = blockIdx.x; n < N; n += gridDim.x) {
    const L *z = logits + (long long)n * V;
    L *dz = dlogits + (long long)n * V;
    int target = targets[n];
    if (target < 0) {
      for (int v = threadIdx.x; v < V; v += blockDim.x) tlm::store(dz + v, 0.0f);
      continue;
    }
    float l = lse[n];
    for (int v = threadIdx.x; v < V; v += blockDim.x) {
      float p = expf(tlm::load(z + v) - l);
      tlm::store(dz + v, scale * (p - (v == target ? 1.0f : 0.0f)));
    }
  }
}

extern "C" __global__ void tlm_crossentropy_rows_backward(float *dlogits, const float *logits, const float *lse,
                                                          const int *targets, int N, int V, float dloss) {
  crossentropy_rows_backward(dlogits, logits, lse, targets, N, V, dloss);
}
// dlogits in bf16 too: the gradient of bf16 logits, in place over them
// (runtime/model/gpu_model.c keeps the two in one storage).
extern "C" __global__ void tlm_crossentropy_rows_backward_bf16(unsigned short *dlogits, const unsigned short *logits,
                                                               const float *lse, const int *targets, int N, int V,
                                                               float dloss) {
  crossentropy_rows_backward(dlogits, logits, lse, targets, N, V, dloss);
}
