/* Rotary position embedding, Llama / Hugging Face "rotate_half" layout:
 * within a head of size D, element i pairs with element i + D/2 and the pair
 * turns by angle(t, i) = t * base^(-2i/D):
 *
 *   out_i       = x_i cos - x_{i+D/2} sin
 *   out_{i+D/2} = x_{i+D/2} cos + x_i sin
 *
 * A rotation is orthogonal, so the backward is the rotation by -angle. */
#include "tlm_rt/ops.h"

#include <math.h>

/* cos_t, sin_t: [T, D/2]. The angles are formed in double: HF forms them in
 * float32, which at t ~ 1000 is already ~1e-4 rad off the exact value. */
void tlm_rope_init(float *cos_t, float *sin_t, int T, int D, double base) {
    int half = D / 2;
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < half; i++) {
            double inv_freq = pow(base, -2.0 * i / D);
            double a = t * inv_freq;
            cos_t[(size_t)t * half + i] = (float)cos(a);
            sin_t[(size_t)t * half + i] = (float)sin(a);
        }
    }
}

/* Rotates every head of every token by `sign` * angle. x and out: [B,T,H,D]
 * with tokens `stride` floats apart; out may equal x. */
static void rope_rotate(float *out, const float *x, const float *cos_t, const float *sin_t, int B, int T, int H, int D,
                        int stride, float sign) {
    int half = D / 2;
#pragma omp parallel for schedule(static) if ((size_t)B * T * H * D >= TLM_PAR_MIN_NORM)
    for (int bt = 0; bt < B * T; bt++) {
        int t = bt % T;
        const float *c = cos_t + (size_t)t * half;
        const float *s = sin_t + (size_t)t * half;
        for (int h = 0; h < H; h++) {
            size_t at = (size_t)bt * stride + (size_t)h * D;
            const float *xh = x + at;
            float *oh = out + at;
            for (int i = 0; i < half; i++) {
                float x1 = xh[i], x2 = xh[i + half];
                float sn = sign * s[i];
                oh[i] = x1 * c[i] - x2 * sn;
                oh[i + half] = x2 * c[i] + x1 * sn;
            }
        }
    }
}

void tlm_rope_forward(float *out, const float *x, const float *cos_t, const float *sin_t, int B, int T, int H, int D,
                      int stride) {
    rope_rotate(out, x, cos_t, sin_t, B, T, H, D, stride, 1.0f);
}

void tlm_rope_backward(float *dx, const float *dout, const float *cos_t, const float *sin_t, int B, int T, int H, int D,
                       int stride) {
    rope_rotate(dx, dout, cos_t, sin_t, B, T, H, D, stride, -1.0f);
}
