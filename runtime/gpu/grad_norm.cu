// The gradient as a whole on the device: its global L2 norm (as
// runtime/optim/clip.c), and adding it times a scale into a running sum
// (runtime/train/trainer.c: the micro-batches' and the chain's sums times
// 1, the slow parameters' times the clipping's coefficient). The clipping
// itself is the update's: it reads each gradient times the coefficient
// (adamw.cu, sgd.cu).

// Threads per block of tlm_grad_norm_partials: the C wrapper launches it with
// exactly this many, and the summation order below is written in terms of it.
constexpr int GRAD_NORM_THREADS = 256;

// Stage 1 of the norm: the sum of squares of each chunk. Chunk c covers
// elements [c chunk, min((c + 1) chunk, n)); the C wrapper picks `chunks`
// and `chunk` from n alone. One block per chunk (blocks stride over chunks):
// thread t adds the squares of elements lo + t, lo + t + 256, ... in that
// order, in double (a float's square is exact in double); then the 256 sums
// are added pairwise in a fixed tree (t += t + 128, then t + 64, ..., 1).
// The chunk's sum s = f 2^e (frexp, f in [0.5, 1)) is written as three
// floats: partials[3c] = hi = (float)f, partials[3c + 1] = (float)(f - hi),
// partials[3c + 2] = e, which hold s to 48 bits over double's whole range.
// Stage 2, on the host, adds the chunks' sums in chunk order in double. So
// the bits depend on n only, never on the grid.
extern "C" __global__ void tlm_grad_norm_partials(float *partials, const float *g, long long n, long long chunk,
                                                  int chunks) {
  __shared__ double grad_norm_sums[GRAD_NORM_THREADS];
  int t = threadIdx.x;
  for (int c = blockIdx.x; c < chunks; c += gridDim.x) {
    long long lo = (long long)c * chunk, hi = lo + chunk < n ? lo + chunk : n;
    double s = 0.0;
    for (long long i = lo + t; i < hi; i += GRAD_NORM_THREADS) {
      double x = g[i];
      s += x * x;
    }
    grad_norm_sums[t] = s;
    __syncthreads();
    for (int half = GRAD_NORM_THREADS / 2; half > 0; half >>= 1) {
      if (t < half) grad_norm_sums[t] += grad_norm_sums[t + half];
      __syncthreads();
    }
    if (t == 0) {
      int e = 0;
      double f = frexp(grad_norm_sums[0], &e);
      float f_hi = (float)f;
      partials[3LL * c] = f_hi;
      partials[3LL * c + 1] = (float)(f - (double)f_hi);
      partials[3LL * c + 2] = (float)e;
    }
    __syncthreads();  // grad_norm_sums is reused by the next chunk
  }
}

// sum += x s, element by element, the product rounded first (times 1 is
// exact): the trainer's add_into.
extern "C" __global__ void tlm_grad_add(float *sum, const float *x, long long n, float s) {
  long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) sum[i] += __fmul_rn(x[i], s);
}
