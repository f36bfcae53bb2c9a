// The gates on the device (runtime/ops/activations.c): the sigmoid gate of
// gated attention and the SiLU gate (SwiGLU) of the MLP and the titans
// memory. Elementwise kernels take one thread per element.

__device__ __forceinline__ float gates_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// Sigmoid gate: y [R,D], g [R] broadcast over D:  out[r,d] = y[r,d] sigmoid(g[r]).
// Each kernel is one template over the storage of y, g and out (fp32, or
// bf16 in --precision bf16: tlm::load widens exactly, tlm::store rounds
// once), so the bf16 instantiation runs the fp32 one's arithmetic in the
// same order: on the same rounded y and g it gives the fp32 kernel's bits
// (out rounded once where it is stored in bf16).
template <typename Out, typename Y, typename G>
__device__ void gates_sigmoid_apply(Out *out, const Y *y, const G *g, int R, int D) {
  long long total = (long long)R * D, step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step)
    tlm::store(out + i, tlm::load(y + i) * gates_sigmoid(tlm::load(g + i / D)));
}
extern "C" __global__ void tlm_sigmoid_gate_apply(float *out, const float *y, const float *g, int R, int D) {
  gates_sigmoid_apply(out, y, g, R, D);
}
extern "C" __global__ void tlm_sigmoid_gate_apply_bf16(unsigned short *out, const unsigned short *y,
                                                       const unsigned short *g, int R, int D) {
  gates_sigmoid_apply(out, y, g, R, D);
}

// dy[r,d] = dout[r,d] sigmoid(g[r]) (written; dout and dy are gradients,
// fp32 in either precision).
template <typename G>
__device__ void gates_sigmoid_dy(float *dy, const float *dout, const G *g, int R, int D) {
  long long total = (long long)R * D, step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step)
    dy[i] = dout[i] * gates_sigmoid(tlm::load(g + i / D));
}
extern "C" __global__ void tlm_sigmoid_gate_dy(float *dy, const float *dout, const float *g, int R, int D) {
  gates_sigmoid_dy(dy, dout, g, R, D);
}
extern "C" __global__ void tlm_sigmoid_gate_dy_bf16(float *dy, const float *dout, const unsigned short *g, int R,
                                                    int D) {
  gates_sigmoid_dy(dy, dout, g, R, D);
}

// dg[r] = s (1 - s) sum_d dout[r,d] y[r,d], s = sigmoid(g[r]) (written): one
// thread per row adds its D products in d order in float, as the CPU op does
// (D is 1 for the elementwise gate and a head size for the head-wise one).
template <typename Y, typename G>
__device__ void gates_sigmoid_dg(float *dg, const float *dout, const Y *y, const G *g, int R, int D) {
  int step = gridDim.x * blockDim.x;
  for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < R; r += step) {
    const float *dr = dout + (long long)r * D;
    const Y *yr = y + (long long)r * D;
    float acc = 0.0f;
    for (int d = 0; d < D; d++) acc += dr[d] * tlm::load(yr + d);
    float s = gates_sigmoid(tlm::load(g + r));
    dg[r] = acc * s * (1.0f - s);
  }
}
extern "C" __global__ void tlm_sigmoid_gate_dg(float *dg, const float *dout, const float *y, const float *g, int R,
                                               int D) {
  gates_sigmoid_dg(dg, dout, y, g, R, D);
}
extern "C" __global__ void tlm_sigmoid_gate_dg_bf16(float *dg, const float *dout, const unsigned short *y,
                                                    const unsigned short *g, int R, int D) {
  gates_sigmoid_dg(dg, dout, y, g, R, D);
}

// SwiGLU: h = silu(g) u, n elements. Titans' SiLU gate runs it (out =
// x silu(gate_pre)); in --precision bf16 h, g and u are bf16 there (one
// template over their storage: on the same rounded g and u the bf16
// instantiation gives the fp32 kernel's h rounded once).
template <typename H, typename G, typename U>
__device__ void gates_swiglu_apply(H *h, const G *g, const U *u, long long n) {
  long long step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
    float x = tlm::load(g + i);
    tlm::store(h + i, x * gates_sigmoid(x) * tlm::load(u + i));
  }
}
extern "C" __global__ void tlm_swiglu_apply(float *h, const float *g, const float *u, long long n) {
  gates_swiglu_apply(h, g, u, n);
}
extern "C" __global__ void tlm_swiglu_apply_bf16(unsigned short *h, const unsigned short *g, const unsigned short *u,
                                                 long long n) {
  gates_swiglu_apply(h, g, u, n);
}

// dg = dh u silu'(g), du = dh silu(g), silu'(x) = s (1 + x (1 - s)); both
// written. dh may be dg or du: dh[i] is read before either is written. g
// and u fp32 or bf16 (widened); the gradients fp32 in either precision.
template <typename G, typename U>
__device__ void gates_swiglu_grad(float *dg, float *du, const float *dh, const G *g, const U *u, long long n) {
  long long step = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
    float d = dh[i], x = tlm::load(g + i), up = tlm::load(u + i), s = gates_sigmoid(x);
    dg[i] = d * up * s * (1.0f + x * (1.0f - s));
    du[i] = d * x * s;
  }
}
extern "C" __global__ void tlm_swiglu_grad(float *dg, float *du, const float *dh, const float *g, const float *u,
                                           long long n) {
  gates_swiglu_grad(dg, du, dh, g, u, n);
}
extern "C" __global__ void tlm_swiglu_grad_bf16(float *dg, float *du, const float *dh, const unsigned short *g,
                                                const unsigned short *u, long long n) {
  gates_swiglu_grad(dg, du, dh, g, u, n);
}
