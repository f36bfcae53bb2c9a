/* The tensor-core attention kernels' launches (attention_tc.h). */
#include "attention_tc.h"

const char *tlm_gpu_attention_tc_kernel(tlm_attention_tc_pass pass, int D, bool rows16) {
    static const char *const names[][2] = {
        [TLM_ATTENTION_TC_FWD] = {"tlm_attention_tc_fwd_d64", "tlm_attention_tc_fwd_d128"},
        [TLM_ATTENTION_TC_BWD_PREP] = {"tlm_attention_tc_bwd_prep_d64", "tlm_attention_tc_bwd_prep_d128"},
        [TLM_ATTENTION_TC_BWD_DQ] = {"tlm_attention_tc_bwd_dq_d64", "tlm_attention_tc_bwd_dq_d128"},
        [TLM_ATTENTION_TC_BWD_DKV] = {"tlm_attention_tc_bwd_dkv_d64", "tlm_attention_tc_bwd_dkv_d128"},
    };
    if ((unsigned)pass >= TLM_ATTENTION_TC_PASSES) return NULL;
    if (rows16 && D == 64 && pass == TLM_ATTENTION_TC_FWD) return "tlm_attention_tc_fwd_d64_rows16";
    if (rows16 && D == 64 && pass == TLM_ATTENTION_TC_BWD_DQ) return "tlm_attention_tc_bwd_dq_d64_rows16";
    return D == 64 ? names[pass][0] : D == 128 ? names[pass][1] : NULL;
}

bool tlm_gpu_attention_tc_two_groups(int D, int cc_major) { return D == 64 && cc_major >= 9; }

unsigned tlm_gpu_attention_tc_block(tlm_attention_tc_pass pass, int D, int cc_major, bool rows16) {
    if (!tlm_gpu_attention_tc_kernel(pass, D, rows16)) return 0;
    /* attention_tc.cu: the forward's and dq's warps take 32 rows each at
     * head size 64 from sm_90 on (attention_tc_row_groups) but in the
     * _rows16 kernels, the dk, dv kernel has two roles at 128
     * (attention_tc_dkv_threads) */
    if (pass == TLM_ATTENTION_TC_FWD || pass == TLM_ATTENTION_TC_BWD_DQ)
        return tlm_gpu_attention_tc_two_groups(D, cc_major) && !rows16 ? 64 : 128;
    return pass == TLM_ATTENTION_TC_BWD_DKV && D == 128 ? 256 : 128;
}

unsigned tlm_gpu_attention_tc_shared(tlm_attention_tc_pass pass, int D) {
    if (!tlm_gpu_attention_tc_kernel(pass, D, false) || pass == TLM_ATTENTION_TC_BWD_PREP) return 0;
    return 2u * 2u * TLM_GPU_ATTENTION_TC_ROWS * (unsigned)(D + 8) * 2u;
}

bool tlm_gpu_attention_tc_launch(tlm_gpu *g, tlm_attention_tc_pass pass, int D, unsigned grid, void **args,
                                 tlm_err *err) {
    unsigned block = tlm_gpu_attention_tc_block(pass, D, tlm_device_get_info(g->dev)->cc_major, g->attention_rows16);
    return tlm_gpu_launch_shared(g, tlm_gpu_attention_tc_kernel(pass, D, g->attention_rows16), grid, block,
                                 tlm_gpu_attention_tc_shared(pass, D), args, err);
}

bool tlm_gpu_attention_tc_applies(const tlm_device_info *info, int H, int D, int stride, tlm_err *err) {
    if (D != 64 && D != 128)
        return tlm_fail(err, "tensor-core attention: head size %d is not supported (64 or 128, the presets' sizes)", D);
    /* The kernels move rows 16 bytes at a time. */
    if (stride % 8 || stride < H * D)
        return tlm_fail(err,
                        "tensor-core attention: a token stride of %d elements (needs a multiple of 8, at least %d)",
                        stride, H * D);
    if (info->cc_major < 8)
        return tlm_fail(err, "tensor-core attention needs sm_80 or later (bf16 mma.sync); %s is %s", info->name,
                        info->arch);
    return true;
}

bool tlm_gpu_attention_tc_supported(tlm_gpu *g, tlm_dptr y_bf16, tlm_dptr q, tlm_dptr k, tlm_dptr v, int H, int D,
                                    int stride, tlm_err *err) {
    if (!tlm_gpu_attention_tc_applies(tlm_device_get_info(g->dev), H, D, stride, err)) return false;
    if ((q | k | v | y_bf16) % 16) return tlm_fail(err, "tensor-core attention: q, k, v and y must be 16-byte aligned");
    return true;
}

/* A block per tile of 64 rows of each (b, h). */
static unsigned attention_tc_grid(int B, int T, int H) {
    return tlm_gpu_blocks((int64_t)B * H * ((T + TLM_GPU_ATTENTION_TC_ROWS - 1) / TLM_GPU_ATTENTION_TC_ROWS), 1);
}

bool tlm_gpu_attention_tc_forward(tlm_gpu *g, tlm_dptr y_bf16, tlm_dptr lse, tlm_dptr q, tlm_dptr k, tlm_dptr v, int B,
                                  int T, int H, int D, int stride, tlm_err *err) {
    if (!tlm_gpu_attention_tc_supported(g, y_bf16, q, k, v, H, D, stride, err)) return false;
    if (B <= 0 || T <= 0 || H <= 0) return true;
    void *args[] = {&y_bf16, &lse, &q, &k, &v, &B, &T, &H, &stride};
    return tlm_gpu_attention_tc_launch(g, TLM_ATTENTION_TC_FWD, D, attention_tc_grid(B, T, H), args, err);
}

/* Bytes rounded up to a multiple of 256: each part of the scratch aligned
 * as a device allocation is. */
static size_t round_256(size_t bytes) { return (bytes + 255) / 256 * 256; }

/* dy16's bytes, where dot starts. */
size_t tlm_gpu_attention_tc_dot_offset(int B, int T, int H, int D) {
    return round_256((size_t)B * (size_t)T * (size_t)H * (size_t)D * 2);
}

size_t tlm_gpu_attention_tc_scratch_bytes(int B, int T, int H, int D) {
    if (B <= 0 || T <= 0 || H <= 0 || D <= 0) return 0;
    return tlm_gpu_attention_tc_dot_offset(B, T, H, D) + round_256((size_t)B * (size_t)H * (size_t)T * sizeof(float));
}

bool tlm_gpu_attention_tc_backward(tlm_gpu *g, tlm_dptr dq, tlm_dptr dk, tlm_dptr dv, tlm_dptr dy, tlm_dptr y_bf16,
                                   tlm_dptr lse, tlm_dptr q, tlm_dptr k, tlm_dptr v, int B, int T, int H, int D,
                                   int stride, tlm_dptr scratch, tlm_err *err) {
    if (!tlm_gpu_attention_tc_supported(g, y_bf16, q, k, v, H, D, stride, err)) return false;
    if (B <= 0 || T <= 0 || H <= 0) return true;
    if (!scratch || scratch % 256)
        return tlm_fail(err, "tensor-core attention: the backward needs a 256-byte aligned scratch");
    tlm_dptr dy16 = scratch, dot = scratch + tlm_gpu_attention_tc_dot_offset(B, T, H, D);
    unsigned grid = attention_tc_grid(B, T, H);
    const int warps = (int)tlm_gpu_attention_tc_block(TLM_ATTENTION_TC_BWD_PREP, D, 0, false) / 32;
    void *prep_args[] = {&dy16, &dot, &dy, &y_bf16, &B, &T, &H};
    void *dq_args[] = {&dq, &dy16, &dot, &lse, &q, &k, &v, &B, &T, &H, &stride};
    void *dkv_args[] = {&dk, &dv, &dy16, &dot, &lse, &q, &k, &v, &B, &T, &H, &stride};
    return tlm_gpu_attention_tc_launch(g, TLM_ATTENTION_TC_BWD_PREP, D, tlm_gpu_blocks((int64_t)B * T * H, warps),
                                       prep_args, err) &&
           tlm_gpu_attention_tc_launch(g, TLM_ATTENTION_TC_BWD_DQ, D, grid, dq_args, err) &&
           tlm_gpu_attention_tc_launch(g, TLM_ATTENTION_TC_BWD_DKV, D, grid, dkv_args, err);
}
