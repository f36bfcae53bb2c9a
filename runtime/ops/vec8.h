/* Eight floats as one vector, for the hot loops of attention.c,
 * attention_decode.c, matvec.c, rmsnorm.c, rope.c and adamw.c: the type, loads and
 * stores, V8_KERNEL (a kernel built for AVX2 + FMA next to the baseline,
 * and the pick between them), and a row's max and e^x on eight lanes.
 *
 * The vector is GCC's and Clang's vector extension: two SSE registers on
 * x86-64's baseline, one AVX register in an x86-64-v3 build. Vectors never
 * cross a call (the psABI of 32-byte vectors depends on the target): the
 * helpers here take pointers and are always inlined, and loads and stores
 * are memcpys, so a kernel keeps its vectors in registers. */
#ifndef TLM_VEC8_H
#define TLM_VEC8_H

#include <stdint.h>
#include <string.h>

typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef uint32_t v8u __attribute__((vector_size(32)));

#define V8_LOAD(v, p) memcpy(&(v), (p), sizeof(v))
#define V8_STORE(p, v) memcpy((p), &(v), sizeof(v))
#define V8_SPLAT(x) ((v8f){(x), (x), (x), (x), (x), (x), (x), (x)})
#define V8_ALWAYS_INLINE static inline __attribute__((always_inline))

/* A kernel defined with V8_KERNEL is compiled twice on x86-64, for the
 * baseline and for x86-64-v3 (AVX2, FMA), and each call runs the one the
 * CPU has (v8_cpu_level). Its results never depend on the thread count,
 * and depend on the CPU only where its file lets the compiler fuse a
 * multiply and an add (a fused multiply-add rounds once): attention.c,
 * attention_decode.c and matvec.c do (-ffp-contract=fast), rmsnorm.c, rope.c and
 * adamw.c do not (-ffp-contract=off; runtime/CMakeLists.txt). Helpers
 * inlined into it take its target.
 *
 * The pick is by hand, not by target_clones' resolver: clang 14's never
 * picks an "arch=x86-64-v3" clone (on an AVX-512 Xeon its kernel ran the
 * baseline, unfused), and Debian 12's clang is 14.
 * tests/runtime/test_vec8_dispatch.c checks the pick.
 *
 *   V8_KERNEL(name, (float *out, int n), (out, n)) { ...body... }
 *
 * defines `static void name(float *out, int n)`; the body becomes the
 * always-inlined name_body, and name_v3 and name_base are its two builds. */
#if defined(__x86_64__) && defined(__has_attribute)
#if __has_attribute(target)
#define V8_X86_LEVELS 1
#endif
#endif

#ifdef V8_X86_LEVELS
#include "tlm_rt/cpu_level.h"

#define V8_TARGET_V3 __attribute__((target("arch=x86-64-v3")))

/* The x86-64 level the kernels run at, 0 (below v3), 3 or 4: every
 * extension a kernel of that level is compiled for. The CPU's, or lower
 * under TLM_CPU_CAPABILITY (tlm_rt/cpu_level.h). */
static inline int v8_cpu_level(void) { return tlm_cpu_level(); }

#define V8_KERNEL(name, params, args)                               \
    V8_ALWAYS_INLINE void name##_body params;                       \
    V8_TARGET_V3 static void name##_v3 params { name##_body args; } \
    static void name##_base params { name##_body args; }            \
    static void name params {                                       \
        if (v8_cpu_level() >= 3) name##_v3 args;                    \
        else name##_base args;                                      \
    }                                                               \
    V8_ALWAYS_INLINE void name##_body params
#else
#define V8_KERNEL(name, params, args)             \
    V8_ALWAYS_INLINE void name##_body params;     \
    static void name params { name##_body args; } \
    V8_ALWAYS_INLINE void name##_body params
#endif

/* out[i] = e^(in[i] - sub) for i < 8 (out may be in). Within 2 ulp of a
 * correctly rounded expf over the whole float range (tests/runtime/
 * test_vec_exp.c measures it): e^-inf = 0, e^0 = 1, NaN stays NaN, results
 * below 2^-126 come out subnormal and above FLT_MAX infinite.
 *
 * Cephes' expf on eight lanes: n = round(x log2 e) by the 1.5 * 2^23
 * trick, r = x - n ln 2 in two parts (ln 2's first part has 9 bits, so
 * n * it is exact), e^r by a degree-7 polynomial on |r| <= ln2 / 2, then
 * times 2^n as two powers of two of half the exponent each, so that 2^n
 * itself need not be a normal float (n runs from -150 to 128). */
V8_ALWAYS_INLINE void v8_exp(float *out, const float *in, float sub) {
    v8f x;
    V8_LOAD(x, in);
    x -= V8_SPLAT(sub);
    /* clamp where e^x is 0 or infinite in float; a NaN compares false and
     * passes through */
    const v8f lo = V8_SPLAT(-104.0f), hi = V8_SPLAT(89.0f);
    v8i below = x<lo, above = x> hi;
    x = (v8f)(((v8i)x & ~below) | ((v8i)lo & below));
    x = (v8f)(((v8i)x & ~above) | ((v8i)hi & above));

    const v8f magic = V8_SPLAT(12582912.0f); /* 1.5 * 2^23 */
    const v8f t = x * V8_SPLAT(1.44269504088896341f) + magic;
    const v8f n = t - magic;
    const v8i ni = (v8i)t - (v8i)magic;
    const v8f r = (x - n * V8_SPLAT(0.693359375f)) - n * V8_SPLAT(-2.12194440e-4f);

    v8f p = V8_SPLAT(1.9875691500e-4f);
    p = p * r + V8_SPLAT(1.3981999507e-3f);
    p = p * r + V8_SPLAT(8.3334519073e-3f);
    p = p * r + V8_SPLAT(4.1665795894e-2f);
    p = p * r + V8_SPLAT(1.6666665459e-1f);
    p = p * r + V8_SPLAT(5.0000001201e-1f);
    p = p * (r * r) + r + V8_SPLAT(1.0f);

    const v8i n1 = ni >> 1, n2 = ni - n1;
    const v8i bias = {127, 127, 127, 127, 127, 127, 127, 127};
    p = p * (v8f)((v8u)(n1 + bias) << 23); /* unsigned: a NaN's bits may shift out */
    p = p * (v8f)((v8u)(n2 + bias) << 23);
    V8_STORE(out, p);
}

/* The largest of init and p[i] for i < n (a max is exact: the order does
 * not matter), eight lanes at a time. */
V8_ALWAYS_INLINE float v8_max_row(const float *p, int n, float init) {
    v8f m = V8_SPLAT(init);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        v8f x;
        V8_LOAD(x, p + i);
        const v8i greater = x > m;
        m = (v8f)(((v8i)x & greater) | ((v8i)m & ~greater));
    }
    float best = init;
    for (int j = 0; j < 8; j++) best = m[j] > best ? m[j] : best;
    for (; i < n; i++) best = p[i] > best ? p[i] : best;
    return best;
}

/* p[i] = e^(p[i] - sub) for i < n, all by v8_exp (a short tail through a
 * padded copy), so an element's value does not depend on where it sits. */
V8_ALWAYS_INLINE void v8_exp_row(float *p, int n, float sub) {
    int i = 0;
    for (; i + 8 <= n; i += 8) v8_exp(p + i, p + i, sub);
    if (i < n) {
        float tail[8] = {0};
        memcpy(tail, p + i, (size_t)(n - i) * sizeof(float));
        v8_exp(tail, tail, sub);
        memcpy(p + i, tail, (size_t)(n - i) * sizeof(float));
    }
}

#endif
