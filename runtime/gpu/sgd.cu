// SGD with momentum on the device, element by element as runtime/optim/sgd.c
// (torch.optim.SGD), g read times grad_scale (as adamw.cu):
//   d = g + weight_decay p            (weight_decay is 0 without decay)
//   buf = d on the first step, else momentum buf + (1 - dampening) d
//   d = nesterov ? d + momentum buf : buf     (only when momentum != 0)
//   p = p - lr d
// buf is not touched (and may be null) when momentum is 0. One thread per
// element; blocks stride.
extern "C" __global__ void tlm_sgd_update(float *p, const float *g, float grad_scale, float *buf, long long n, float lr,
                                          float weight_decay, float momentum, float one_minus_dampening, int first_step,
                                          int nesterov) {
  long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    float d = __fmul_rn(g[i], grad_scale);
    if (weight_decay != 0.0f) d = d + weight_decay * p[i];
    if (momentum != 0.0f) {
      float b = first_step ? d : buf[i] * momentum + one_minus_dampening * d;
      buf[i] = b;
      d = nesterov ? d + momentum * b : b;
    }
    p[i] = p[i] - lr * d;
  }
}
