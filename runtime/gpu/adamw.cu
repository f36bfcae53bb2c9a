// AdamW on the device, element by element as runtime/optim/adamw.c (torch's
// single-tensor AdamW):
//   p = p shrink - step_size m / (sqrt(v) / bias2_sqrt + eps)
// with m and v updated first. The step's scalars (shrink = 1 - lr wd, or 1
// without decay; step_size = lr / (1 - beta1^t); bias2_sqrt =
// sqrt(1 - beta2^t)) are formed on the host in double and rounded to float
// once, exactly as the CPU op forms them; the per-element arithmetic is
// float in the CPU op's order. Each gradient is read times grad_scale (the
// clipping's; 1 without), the product rounded before any other use as the
// CPU's (__fmul_rn: never fused into what follows). One thread per element;
// blocks stride.
extern "C" __global__ void tlm_adamw_update(float *p, const float *g, float grad_scale, float *m, float *v, long long n,
                                            float beta1, float beta2, float one_minus_beta1, float one_minus_beta2,
                                            float step_size, float bias2_sqrt, float eps, float shrink) {
  long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    float gi = __fmul_rn(g[i], grad_scale);
    float mi = m[i] * beta1 + one_minus_beta1 * gi;
    float vi = v[i] * beta2 + one_minus_beta2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    float denom = sqrtf(vi) / bias2_sqrt + eps;
    p[i] = p[i] * shrink - step_size * (mi / denom);
  }
}
