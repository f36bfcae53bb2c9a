/* The decode attention kernel (attention_decode.cu) against the CPU's
 * tlm_attention_decode on the emulated device: odd head sizes, one key, a
 * tile and a half, several tiles (the online softmax's rescaling), rows of
 * the packed cache's stride. Bound per element: 1e-5 |cpu| + 1e-6
 * max|cpu|: the same sums, in tiles on the device, a few float roundings
 * apart. The bf16 variants (--precision bf16 stores q, k, v, the cache,
 * and attention's output unless a gate reads it, in bf16), on the cache
 * and q rounded to bf16: bit for bit the fp32 kernel on the same values
 * widened, y rounded to nearest even where it is stored in bf16.
 *
 * Titans' decode kernel (titans_decode.cu), token after token over two
 * chunks and a part: the fp32 kernel against the CPU's tlm_titans_decode
 * (y and the state M, S, M0, same bound), and the bf16 variant (q, k, v
 * in bf16: --precision bf16's mem_qkv) bit for bit the fp32 kernel on the
 * same values widened, y and state alike. */
#include "gemm_reference.h"
#include "gpu_decode.h"
#include "test_util.h"

static tlm_device *dev;
static tlm_gpu gpu;

/* The bf16 kernels on the cache and q rounded to bf16 against the fp32
 * kernel on them widened. */
static void bf16_case(const float *cache, const float *q, int n, int H, int D) {
    const int A = H * D, stride = 3 * A;
    const size_t cache_elems = (size_t)n * stride, bytes16 = (cache_elems + (size_t)A) * 2;
    uint16_t *in16 = calloc(cache_elems + (size_t)A, 2), *y16 = calloc((size_t)A, 2); /* the cache, then q */
    float *in = falloc(cache_elems + (size_t)A), *y = falloc((size_t)A), *y32 = falloc((size_t)A);
    CHECK(in16 && y16, "out of memory");
    if (!in16 || !y16) return;
    for (size_t i = 0; i < cache_elems + (size_t)A; i++) {
        in16[i] = tlm_f32_to_bf16(i < cache_elems ? cache[i] : q[i - cache_elems]);
        in[i] = tlm_bf16_to_f32(in16[i]);
    }
    tlm_err err = {""};
    tlm_dptr d_in = tlm_device_alloc(dev, (cache_elems + (size_t)A) * 4, &err);
    tlm_dptr d_in16 = tlm_device_alloc(dev, bytes16, &err), d_y = tlm_device_alloc(dev, (size_t)A * 4, &err);
    tlm_dptr d_y16 = tlm_device_alloc(dev, (size_t)A * 2, &err), d_y32 = tlm_device_alloc(dev, (size_t)A * 4, &err);
    const tlm_dptr k = d_in + (tlm_dptr)A * 4, v = d_in + (tlm_dptr)2 * A * 4, qf = d_in + cache_elems * 4;
    const tlm_dptr k16 = d_in16 + (tlm_dptr)A * 2, v16 = d_in16 + (tlm_dptr)2 * A * 2, q16 = d_in16 + cache_elems * 2;
    bool ok = d_in && d_in16 && d_y && d_y16 && d_y32 &&
              tlm_device_upload(dev, d_in, in, (cache_elems + (size_t)A) * 4, &err) &&
              tlm_device_upload(dev, d_in16, in16, bytes16, &err) &&
              tlm_gpu_attention_decode(&gpu, d_y, qf, k, v, n, H, D, stride, &err) &&
              tlm_gpu_attention_decode_bf16(&gpu, d_y16, q16, k16, v16, n, H, D, stride, &err) &&
              tlm_gpu_attention_decode_qkv_bf16(&gpu, d_y32, q16, k16, v16, n, H, D, stride, &err) &&
              tlm_device_download(dev, y, d_y, (size_t)A * 4, &err) &&
              tlm_device_download(dev, y16, d_y16, (size_t)A * 2, &err) &&
              tlm_device_download(dev, y32, d_y32, (size_t)A * 4, &err);
    CHECK(ok, "bf16 n=%d H=%d D=%d: %s", n, H, D, err.msg);
    int off = 0;
    for (int i = 0; ok && i < A; i++) off += y16[i] != tlm_f32_to_bf16(y[i]);
    CHECK(off == 0, "bf16 n=%d H=%d D=%d: %d of %d y not the fp32 kernel's rounded", n, H, D, off, A);
    CHECK(!ok || memcmp(y32, y, (size_t)A * 4) == 0, "qkv_bf16 n=%d H=%d D=%d: y not the fp32 kernel's", n, H, D);
    tlm_device_free(dev, d_in), tlm_device_free(dev, d_in16), tlm_device_free(dev, d_y);
    tlm_device_free(dev, d_y16), tlm_device_free(dev, d_y32);
    free(in16), free(y16), free(in), free(y), free(y32);
}

static void one_case(int n, int H, int D, unsigned seed) {
    const int A = H * D, stride = 3 * A;
    const size_t cache_floats = (size_t)n * stride;
    float *cache = falloc(cache_floats), *q = falloc((size_t)A), *y = falloc((size_t)A), *got = falloc((size_t)A);
    float *scratch = falloc((size_t)H * (size_t)n);
    tlm_rng rng;
    tlm_rng_seed(&rng, seed);
    fill_uniform(&rng, cache, cache_floats, -2.0f, 2.0f);
    fill_uniform(&rng, q, (size_t)A, -2.0f, 2.0f);
    tlm_attention_decode(y, q, cache + A, cache + 2 * A, n, H, D, stride, scratch);
    tlm_err err = {""};
    tlm_dptr dc = tlm_device_alloc(dev, cache_floats * 4, &err), dq = tlm_device_alloc(dev, (size_t)A * 4, &err);
    tlm_dptr dy = tlm_device_alloc(dev, (size_t)A * 4, &err);
    bool ok =
        dc && dq && dy && tlm_device_upload(dev, dc, cache, cache_floats * 4, &err) &&
        tlm_device_upload(dev, dq, q, (size_t)A * 4, &err) &&
        tlm_gpu_attention_decode(&gpu, dy, dq, dc + (tlm_dptr)A * 4, dc + (tlm_dptr)2 * A * 4, n, H, D, stride, &err) &&
        tlm_device_download(dev, got, dy, (size_t)A * 4, &err);
    CHECK(ok, "n=%d H=%d D=%d: %s", n, H, D, err.msg);
    if (ok) {
        double scale = max_abs(y, (size_t)A), worst = 0;
        for (int i = 0; i < A; i++)
            worst = fmax(worst, fabs((double)got[i] - y[i]) / (1e-5 * fabs(y[i]) + 1e-6 * scale));
        CHECK(worst <= 1.0, "n=%d H=%d D=%d: %.2f of the bound", n, H, D, worst);
    }
    tlm_device_free(dev, dc), tlm_device_free(dev, dq), tlm_device_free(dev, dy);
    bf16_case(cache, q, n, H, D);
    free(cache), free(q), free(y), free(got), free(scratch);
}

/* Titans: T tokens of H heads of size D, chunk 3; q, k of unit norm and
 * v, all rounded to bf16 (the CPU and the fp32 kernel read them widened).
 * The bf16 kernel's y is bf16: the fp32 kernel's y rounded, bit for bit;
 * its state the fp32 kernel's. */
static void titans_case(int H, int D, int T, unsigned seed) {
    const int A = H * D, chunk = 3;
    const size_t nstate = (size_t)H * 3 * D * D;
    float *in = falloc((size_t)3 * A), *gates = falloc((size_t)3 * H), *state = falloc(nstate);
    float *y = falloc((size_t)A), *e = falloc((size_t)D), *got = falloc(nstate), *got16 = falloc(nstate);
    uint16_t *in16 = calloc((size_t)3 * A, 2);
    CHECK(in16, "out of memory");
    if (!in16) return;
    tlm_rng rng;
    tlm_rng_seed(&rng, seed);
    tlm_err err = {""};
    tlm_dptr d_in = tlm_device_alloc(dev, (size_t)3 * A * 4, &err),
             d_in16 = tlm_device_alloc(dev, (size_t)3 * A * 2, &err);
    tlm_dptr d_g = tlm_device_alloc(dev, (size_t)3 * H * 4, &err), d_y = tlm_device_alloc(dev, (size_t)A * 4, &err);
    tlm_dptr d_y16 = tlm_device_alloc(dev, (size_t)A * 4, &err), d_s = tlm_device_alloc(dev, nstate * 4, &err);
    tlm_dptr d_s16 = tlm_device_alloc(dev, nstate * 4, &err);
    bool ok = d_in && d_in16 && d_g && d_y && d_y16 && d_s && d_s16 && tlm_device_zero(dev, d_s, nstate * 4, &err) &&
              tlm_device_zero(dev, d_s16, nstate * 4, &err);
    double worst = 0;
    for (int t = 0; ok && t < T; t++) {
        fill_uniform(&rng, in, (size_t)3 * A, -1.0f, 1.0f);
        for (int r = 0; r < 2 * H; r++) { /* the rows of q and k: unit norm */
            double ss = 0;
            for (int i = 0; i < D; i++) ss += (double)in[r * D + i] * in[r * D + i];
            for (int i = 0; i < D; i++) in[r * D + i] = (float)(in[r * D + i] / sqrt(ss + 1e-12));
        }
        for (int i = 0; i < 3 * A; i++) in[i] = tlm_bf16_to_f32(in16[i] = tlm_f32_to_bf16(in[i]));
        fill_uniform(&rng, gates, (size_t)H, 0.001f, 0.1f);
        fill_uniform(&rng, gates + H, (size_t)2 * H, 0.05f, 0.95f);
        const bool start = t % chunk == 0;
        tlm_titans_decode(y, state, in, in + A, in + 2 * A, gates, gates + H, gates + 2 * H, H, D, start, e);
        const tlm_dptr g = d_g, ge = d_g + (tlm_dptr)H * 4, ga = d_g + (tlm_dptr)2 * H * 4;
        ok = tlm_device_upload(dev, d_in, in, (size_t)3 * A * 4, &err) &&
             tlm_device_upload(dev, d_in16, in16, (size_t)3 * A * 2, &err) &&
             tlm_device_upload(dev, d_g, gates, (size_t)3 * H * 4, &err) &&
             tlm_gpu_titans_decode(&gpu, d_y, d_s, d_in, d_in + (tlm_dptr)A * 4, d_in + (tlm_dptr)2 * A * 4, g, ge, ga,
                                   H, D, start, &err) &&
             tlm_gpu_titans_decode_bf16(&gpu, d_y16, d_s16, d_in16, d_in16 + (tlm_dptr)A * 2,
                                        d_in16 + (tlm_dptr)2 * A * 2, g, ge, ga, H, D, start, &err) &&
             tlm_device_download(dev, got, d_y, (size_t)A * 4, &err) &&
             tlm_device_download(dev, got16, d_y16, (size_t)A * 2, &err);
        if (!ok) break;
        /* the bf16 y (A elements at d_y16): the fp32 kernel's y rounded */
        const uint16_t *y16 = (const uint16_t *)got16;
        int off = 0;
        for (int i = 0; i < A; i++) off += y16[i] != tlm_f32_to_bf16(got[i]);
        CHECK(off == 0, "titans bf16 H=%d D=%d token %d: %d of %d y not the fp32 kernel's rounded", H, D, t, off, A);
        double scale = max_abs(y, (size_t)A);
        for (int i = 0; i < A; i++)
            worst = fmax(worst, fabs((double)got[i] - y[i]) / (1e-5 * fabs(y[i]) + 1e-6 * scale));
        ok = tlm_device_download(dev, got, d_s, nstate * 4, &err) &&
             tlm_device_download(dev, got16, d_s16, nstate * 4, &err);
        if (!ok) break;
        CHECK(memcmp(got, got16, nstate * 4) == 0, "titans bf16 H=%d D=%d token %d: state not the fp32 kernel's", H, D,
              t);
        scale = max_abs(state, nstate);
        for (size_t i = 0; i < nstate; i++)
            worst = fmax(worst, fabs((double)got[i] - state[i]) / (1e-5 * fabs(state[i]) + 1e-6 * scale));
    }
    CHECK(ok, "titans H=%d D=%d: %s", H, D, err.msg);
    CHECK(worst <= 1.0, "titans H=%d D=%d: %.2f of the bound", H, D, worst);
    tlm_dptr bufs[] = {d_in, d_in16, d_g, d_y, d_y16, d_s, d_s16};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) tlm_device_free(dev, bufs[i]);
    free(in), free(gates), free(state), free(y), free(e), free(got), free(got16), free(in16);
}

int main(void) {
    tlm_err err = {""};
    dev = tlm_device_open("cuda", &err);
    if (!dev || !tlm_gpu_open(&gpu, dev, &err)) {
        printf("FAIL: cannot open the device: %s\n", err.msg);
        return 1;
    }
    const int ns[] = {1, 37, 256, 383, 700}, shapes[][2] = {{1, 5}, {3, 33}, {2, 64}, {1, 128}, {1, 300}};
    int cases = 0;
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 5; j++, cases++) one_case(ns[i], shapes[j][0], shapes[j][1], 40u + (unsigned)cases);
    const int titans_shapes[][2] = {{1, 5}, {3, 33}, {2, 64}};
    for (int j = 0; j < 3; j++, cases++) titans_case(titans_shapes[j][0], titans_shapes[j][1], 8, 90u + (unsigned)j);
    tlm_err big = {""};
    CHECK(!tlm_gpu_attention_decode(&gpu, 0, 0, 0, 0, 1, 1, 2000, 6000, &big) && strstr(big.msg, "head_dim"),
          "a head_dim above the kernel's: %s", big.msg);
    tlm_gpu_close(&gpu);
    tlm_device_close(dev);
    printf("%d cases\n", cases);
    return test_finish("test_gpu_decode");
}
