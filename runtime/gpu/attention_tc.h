/* Causal attention on the tensor cores (runtime/gpu/attention_tc.cu, mma.sync
 * through mma.cuh), for --precision bf16 with q, k and v stored in bf16: what
 * the executor runs there on sm_80 and later at head sizes 64 and 128 (the
 * scalar kernels of gpu_mixers.h elsewhere, or with
 * TLM_GPU_ATTENTION=scalar; docs/gpu.md, "Tensor cores").
 *
 * The semantics and layouts of tlm_gpu_attention_forward_bf16 and
 * tlm_gpu_attention_backward_bf16 with bf16 inputs: q, k, v the bf16 head
 * slices at ((b T + t) stride + h D), dq, dk, dv fp32 at the same places,
 * y_bf16 [B,T,H,D] in bf16, dy [B,T,H,D] in fp32, lse [B,T,H] in fp32 (the
 * saved tensor the backwards read). No fp32 accumulator buffer: y
 * accumulates in registers. */
#ifndef TLM_GPU_ATTENTION_TC_H
#define TLM_GPU_ATTENTION_TC_H

#include "gpu.h"

enum {
    TLM_GPU_ATTENTION_TC_ROWS = 64, /* rows (queries or keys) per block: attention_tc_BQ, attention_tc_BK */
};

/* The kernels: the forward, and the backward's three (its preparation:
 * dy in bf16 and D_t once per row; dq; dk and dv). */
typedef enum tlm_attention_tc_pass {
    TLM_ATTENTION_TC_FWD,
    TLM_ATTENTION_TC_BWD_PREP,
    TLM_ATTENTION_TC_BWD_DQ,
    TLM_ATTENTION_TC_BWD_DKV,
    TLM_ATTENTION_TC_PASSES
} tlm_attention_tc_pass;

/* Whether the kernels take this shape on this device (head size, stride,
 * sm_80+), before any buffer exists: how a model chooses them; if not, false
 * with the reason in err. */
bool tlm_gpu_attention_tc_applies(const tlm_device_info *info, int H, int D, int stride, tlm_err *err);

/* Whether the tensor-core kernels take this case; if not, false with the
 * reason in err (one line): a head size other than 64 or 128, a stride not a
 * multiple of 8 elements or below H·D, a bf16 buffer (y, q, k, v) not
 * 16-byte aligned, or a GPU before sm_80 (bf16 mma). Launches nothing. */
bool tlm_gpu_attention_tc_supported(tlm_gpu *g, tlm_dptr y_bf16, tlm_dptr q, tlm_dptr k, tlm_dptr v, int H, int D,
                                    int stride, tlm_err *err);

/* The forward: checks tlm_gpu_attention_tc_supported, then launches; false
 * with err when the case is not supported or the launch fails. */
bool tlm_gpu_attention_tc_forward(tlm_gpu *g, tlm_dptr y_bf16, tlm_dptr lse, tlm_dptr q, tlm_dptr k, tlm_dptr v, int B,
                                  int T, int H, int D, int stride, tlm_err *err);

/* The backward's scratch: dy rounded to bf16 ([B,T,H,D]) and D_t
 * ([B,H,T] fp32), which its preparation kernel writes once per row and the
 * other two read (bytes; a multiple of 256). */
size_t tlm_gpu_attention_tc_scratch_bytes(int B, int T, int H, int D);
/* Where D_t starts in it (bytes; dy16 at its start). */
size_t tlm_gpu_attention_tc_dot_offset(int B, int T, int H, int D);

/* The backward: dq, dk, dv (fp32, overwritten) from dy (fp32), the
 * forward's y_bf16 and lse, and q, k, v; scratch holds
 * tlm_gpu_attention_tc_scratch_bytes (256-byte aligned); the same checks. */
bool tlm_gpu_attention_tc_backward(tlm_gpu *g, tlm_dptr dq, tlm_dptr dk, tlm_dptr dv, tlm_dptr dy, tlm_dptr y_bf16,
                                   tlm_dptr lse, tlm_dptr q, tlm_dptr k, tlm_dptr v, int B, int T, int H, int D,
                                   int stride, tlm_dptr scratch, tlm_err *err);

/* Whether the forward's and dq's default kernels take 32 query rows a warp
 * (two groups of 16: attention_tc.cu's attention_tc_row_groups) at head
 * size D on a GPU of compute capability cc_major: at 64 from sm_90 on.
 * Where they do, rows16 (tlm_gpu.attention_rows16) chooses the kernels
 * that take 16. */
bool tlm_gpu_attention_tc_two_groups(int D, int cc_major);

/* A pass's kernel for head size D (64 or 128; NULL otherwise), for a test
 * that launches it on a grid of its own. rows16: at head size 64, the
 * forward's and dq's kernels whose warps take 16 query rows on every GPU
 * (tlm_gpu.attention_rows16), not 32 from sm_90 on. */
const char *tlm_gpu_attention_tc_kernel(tlm_attention_tc_pass pass, int D, bool rows16);

/* The threads of that kernel's block on a GPU of compute capability
 * cc_major (0 where it has none): 128 (4 warps of 16 rows; the
 * preparation's 4 warps a row each), except the forward and dq at head
 * size 64 on sm_90 and later without rows16, 64 (2 warps of 32 rows: each
 * K and V fragment serves two groups of rows), and the dk, dv kernel at
 * head size 128, 256 (8 warps: dV's 4 and dK's 4 over the same 64 keys, so
 * that no warp holds both accumulators; attention_tc_bwd_dkv). The
 * forward, dq and dk, dv kernels trap on another. */
unsigned tlm_gpu_attention_tc_block(tlm_attention_tc_pass pass, int D, int cc_major, bool rows16);

/* The dynamic shared memory that kernel's block needs (bytes; 0 for the
 * preparation): the tiles staged in two stages, the forward's and dq's K
 * and V, dk and dv's Q and dY, 2 x 2 x 64 rows of D + 8 bf16 (36 KiB at
 * head size 64, 68 KiB at 128: attention_tc_staged_bytes). The kernels trap
 * on less. */
unsigned tlm_gpu_attention_tc_shared(tlm_attention_tc_pass pass, int D);

/* Launches that kernel on `grid` blocks of its block size with its shared
 * memory (args as the kernel takes them); how every launch of them is made,
 * the tests' own grids included. */
bool tlm_gpu_attention_tc_launch(tlm_gpu *g, tlm_attention_tc_pass pass, int D, unsigned grid, void **args,
                                 tlm_err *err);

#endif
