#include "gpu_decode.h"

/* attention_decode.cu's block and the head_dim it covers */
enum { DECODE_BLOCK = 256, DECODE_MAX_D = 4 * DECODE_BLOCK };

static bool attention_decode(tlm_gpu *g, const char *kernel, tlm_dptr y, tlm_dptr q, tlm_dptr k, tlm_dptr v, int n,
                             int H, int D, int stride, tlm_err *err) {
    if (D > DECODE_MAX_D) return tlm_fail(err, "head_dim %d is above the decode kernel's %d", D, DECODE_MAX_D);
    void *args[] = {&y, &q, &k, &v, &n, &H, &D, &stride};
    return tlm_gpu_launch(g, kernel, tlm_gpu_blocks(H, 1), DECODE_BLOCK, args, err);
}

bool tlm_gpu_attention_decode(tlm_gpu *g, tlm_dptr y, tlm_dptr q, tlm_dptr k, tlm_dptr v, int n, int H, int D,
                              int stride, tlm_err *err) {
    return attention_decode(g, "tlm_attention_decode", y, q, k, v, n, H, D, stride, err);
}

bool tlm_gpu_attention_decode_bf16(tlm_gpu *g, tlm_dptr y_bf16, tlm_dptr q, tlm_dptr k, tlm_dptr v, int n, int H, int D,
                                   int stride, tlm_err *err) {
    return attention_decode(g, "tlm_attention_decode_bf16", y_bf16, q, k, v, n, H, D, stride, err);
}

bool tlm_gpu_attention_decode_qkv_bf16(tlm_gpu *g, tlm_dptr y, tlm_dptr q, tlm_dptr k, tlm_dptr v, int n, int H, int D,
                                       int stride, tlm_err *err) {
    return attention_decode(g, "tlm_attention_decode_qkv_bf16", y, q, k, v, n, H, D, stride, err);
}

static bool titans_decode(tlm_gpu *g, const char *kernel, tlm_dptr y, tlm_dptr state, tlm_dptr q, tlm_dptr k,
                          tlm_dptr v, tlm_dptr theta, tlm_dptr eta, tlm_dptr alpha, int H, int D, bool chunk_start,
                          tlm_err *err) {
    if (D > DECODE_MAX_D) return tlm_fail(err, "head_dim %d is above the decode kernel's %d", D, DECODE_MAX_D);
    int start = chunk_start, has_y = y != 0;
    void *args[] = {&y, &state, &q, &k, &v, &theta, &eta, &alpha, &H, &D, &start, &has_y};
    return tlm_gpu_launch(g, kernel, tlm_gpu_blocks(H, 1), DECODE_BLOCK, args, err);
}

bool tlm_gpu_titans_decode(tlm_gpu *g, tlm_dptr y, tlm_dptr state, tlm_dptr q, tlm_dptr k, tlm_dptr v, tlm_dptr theta,
                           tlm_dptr eta, tlm_dptr alpha, int H, int D, bool chunk_start, tlm_err *err) {
    return titans_decode(g, "tlm_titans_decode", y, state, q, k, v, theta, eta, alpha, H, D, chunk_start, err);
}

bool tlm_gpu_titans_decode_bf16(tlm_gpu *g, tlm_dptr y_bf16, tlm_dptr state, tlm_dptr q, tlm_dptr k, tlm_dptr v,
                                tlm_dptr theta, tlm_dptr eta, tlm_dptr alpha, int H, int D, bool chunk_start,
                                tlm_err *err) {
    return titans_decode(g, "tlm_titans_decode_bf16", y_bf16, state, q, k, v, theta, eta, alpha, H, D, chunk_start,
                         err);
}
