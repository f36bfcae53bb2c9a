// The activations around the Titans memory on the device (the CPU's
// runtime/ops/titans_gates.c, executor ops memory_act and memory_gates):
//   act = silu(qkv)  [N, 3, H, D];  mem_qkv = l2norm(q), l2norm(k), v of act
//   (per head, rnorm [N, 2H] the 1/norms saved for the backward);
//   gates = inner_lr sigmoid, sigmoid, sigmoid of pre [N, 3H], as three
//   [N, H] blocks (theta, eta, alpha).
// One thread per head row of D elements (its sums in order, in double like
// the CPU's l2norm), or per gate.

constexpr float titans_act_L2NORM_EPS = 1e-6f;  // the CPU's TLM_L2NORM_EPS

__device__ __forceinline__ float titans_act_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// Row (n, part, h) of the packed [N, 3, H, D] tensors: part 0 q, 1 k, 2 v.
// qkv, act and mem_qkv share one storage, fp32 or bf16 (--precision bf16:
// tlm::load widens exactly, tlm::store rounds once): the bf16
// instantiation runs the fp32 one's arithmetic in the same order, so on the
// same rounded qkv it gives the fp32 kernel's rnorm bit for bit and its act
// and mem_qkv rounded once. mem_qkv is computed from the activation in
// fp32, recomputed rather than read back from act (the same bits in fp32; a
// bf16 act read back would round it twice).
template <typename X>
__device__ void titans_act_qkv_forward(X* act, X* mem_qkv, float* rnorm, const X* qkv, int N, int H, int D) {
  const long long rows = (long long)N * 3 * H;
  for (long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x; row < rows;
       row += (long long)gridDim.x * blockDim.x) {
    const long long n = row / (3 * H);
    const int part = (int)(row / H % 3), h = (int)(row % H);
    const long long o = row * D;
    double ss = 0.0;
    for (int i = 0; i < D; i++) {
      const float x = tlm::load(qkv + o + i);
      const float a = x * titans_act_sigmoid(x);
      tlm::store(act + o + i, a);
      ss += (double)a * a;
    }
    float rs = 1.0f;
    if (part != 2) {
      rs = (float)(1.0 / sqrt(ss + (double)titans_act_L2NORM_EPS));
      rnorm[n * 2 * H + (long long)part * H + h] = rs;
    }
    for (int i = 0; i < D; i++) {
      const float x = tlm::load(qkv + o + i);
      const float a = x * titans_act_sigmoid(x);
      tlm::store(mem_qkv + o + i, part == 2 ? a : a * rs);
    }
  }
}
extern "C" __global__ void tlm_titans_act_qkv_fwd(float* act, float* mem_qkv, float* rnorm, const float* qkv, int N,
                                                  int H, int D) {
  titans_act_qkv_forward(act, mem_qkv, rnorm, qkv, N, H, D);
}
extern "C" __global__ void tlm_titans_act_qkv_fwd_bf16(unsigned short* act, unsigned short* mem_qkv, float* rnorm,
                                                       const unsigned short* qkv, int N, int H, int D) {
  titans_act_qkv_forward(act, mem_qkv, rnorm, qkv, N, H, D);
}

// dqkv = silu'(qkv) times: for q and k the l2norm's backward
// (dx = r g - r^3 x (g . x), x the activation), for v the incoming gradient.
// qkv and act in one storage, fp32 or bf16 (widened); the gradients fp32.
template <typename X>
__device__ void titans_act_qkv_backward(float* dqkv, const float* d_mem_qkv, const X* qkv, const X* act,
                                        const float* rnorm, int N, int H, int D) {
  const long long rows = (long long)N * 3 * H;
  for (long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x; row < rows;
       row += (long long)gridDim.x * blockDim.x) {
    const long long n = row / (3 * H);
    const int part = (int)(row / H % 3), h = (int)(row % H);
    const long long o = row * D;
    float rs = 1.0f, kk = 0.0f;
    if (part != 2) {
      rs = rnorm[n * 2 * H + (long long)part * H + h];
      double dot = 0.0;
      for (int i = 0; i < D; i++) dot += (double)d_mem_qkv[o + i] * tlm::load(act + o + i);
      kk = (float)dot * rs * rs * rs;
    }
    for (int i = 0; i < D; i++) {
      const float g = part == 2 ? d_mem_qkv[o + i] : rs * d_mem_qkv[o + i] - kk * tlm::load(act + o + i);
      const float x = tlm::load(qkv + o + i), s = titans_act_sigmoid(x);
      dqkv[o + i] = g * s * (1.0f + x * (1.0f - s));
    }
  }
}
extern "C" __global__ void tlm_titans_act_qkv_bwd(float* dqkv, const float* d_mem_qkv, const float* qkv,
                                                  const float* act, const float* rnorm, int N, int H, int D) {
  titans_act_qkv_backward(dqkv, d_mem_qkv, qkv, act, rnorm, N, H, D);
}
extern "C" __global__ void tlm_titans_act_qkv_bwd_bf16(float* dqkv, const float* d_mem_qkv, const unsigned short* qkv,
                                                       const unsigned short* act, const float* rnorm, int N, int H,
                                                       int D) {
  titans_act_qkv_backward(dqkv, d_mem_qkv, qkv, act, rnorm, N, H, D);
}

// One thread per (n, h): its three gates.
extern "C" __global__ void tlm_titans_act_gates_fwd(float* gates, const float* pre, int N, int H, float inner_lr) {
  const long long NH = (long long)N * H;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < NH; i += (long long)gridDim.x * blockDim.x) {
    const float* p = pre + i / H * 3 * H;
    const int h = (int)(i % H);
    gates[i] = inner_lr * titans_act_sigmoid(p[h]);
    gates[NH + i] = titans_act_sigmoid(p[H + h]);
    gates[2 * NH + i] = titans_act_sigmoid(p[2 * H + h]);
  }
}

// From the saved gates: theta = inner_lr s, so its sigmoid s is theta / inner_lr.
extern "C" __global__ void tlm_titans_act_gates_bwd(float* dpre, const float* dgates, const float* gates, int N, int H,
                                                    float inner_lr) {
  const long long NH = (long long)N * H;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < NH; i += (long long)gridDim.x * blockDim.x) {
    float* d = dpre + i / H * 3 * H;
    const int h = (int)(i % H);
    const float s = gates[i] / inner_lr, e = gates[NH + i], a = gates[2 * NH + i];
    d[h] = dgates[i] * inner_lr * s * (1 - s);
    d[H + h] = dgates[NH + i] * e * (1 - e);
    d[2 * H + h] = dgates[2 * NH + i] * a * (1 - a);
  }
}
