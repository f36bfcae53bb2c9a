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

#include "vec8.h"

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

/* One head: out_i, out_{i+half} from x_i, x_{i+half}, eight pairs at a
 * time. Each element is the same two products and a sum as the scalar
 * tail's (none fused), so the bits do not depend on the clone. out may
 * equal x: a step reads its pairs before writing them. */
V8_KERNEL(rotate_head, (float *out, const float *x, const float *c, const float *s, int half, float sign),
          (out, x, c, s, half, sign)) {
    const v8f sg = V8_SPLAT(sign);
    int i = 0;
    for (; i + 8 <= half; i += 8) {
        v8f x1, x2, cv, sv;
        V8_LOAD(x1, x + i), V8_LOAD(x2, x + i + half), V8_LOAD(cv, c + i), V8_LOAD(sv, s + i);
        const v8f sn = sg * sv, o1 = x1 * cv - x2 * sn, o2 = x2 * cv + x1 * sn;
        V8_STORE(out + i, o1), V8_STORE(out + i + half, o2);
    }
    for (; i < half; i++) {
        float x1 = x[i], x2 = x[i + half];
        float sn = sign * s[i];
        out[i] = x1 * c[i] - x2 * sn;
        out[i + half] = x2 * c[i] + x1 * sn;
    }
}

/* Rotates every head of every token by `sign` * angle. x and out: [B,T,H,D]
 * with tokens `stride` floats apart; out may equal x. */
static void rope_rotate(float *out, const float *x, const float *cos_t, const float *sin_t, int B, int T, int H, int D,
                        int stride, float sign) {
    int half = D / 2;
    TLM_PARALLEL_FOR_IF((size_t)B * T * H * D >= TLM_PAR_MIN_NORM, for (int bt = 0; bt < B * T; bt++) {
        int t = bt % T;
        const float *c = cos_t + (size_t)t * half;
        const float *s = sin_t + (size_t)t * half;
        for (int h = 0; h < H; h++) {
            size_t at = (size_t)bt * stride + (size_t)h * D;
            rotate_head(out + at, x + at, c, s, half, sign);
        }
    });
}

void tlm_rope_forward(float *out, const float *x, const float *cos_t, const float *sin_t, int B, int T, int H, int D,
                      int stride) {
    rope_rotate(out, x, cos_t, sin_t, B, T, H, D, stride, 1.0f);
}

void tlm_rope_backward(float *dx, const float *dout, const float *cos_t, const float *sin_t, int B, int T, int H, int D,
                       int stride) {
    rope_rotate(dx, dout, cos_t, sin_t, B, T, H, D, stride, -1.0f);
}
