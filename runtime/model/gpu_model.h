/* A model on a device: the parameter block, its gradients and the
 * activation arena in device memory with the very offsets of the host
 * plan, the runtime's kernels and the model's generated MLP kernels loaded,
 * and host copies of buffers made on demand (eval, sample and probe read
 * buffers by role). The host tlm_model keeps the sizes, the plan and the
 * fp32 master copy of the parameters that checkpoints read and write;
 * tlm_model_params_to_device / _to_host move them.
 *
 * A device failure in the middle of a step (a launch, a copy) cannot be
 * returned through tlm_model_forward's loss: it is kept here, the forward
 * returns NaN, and tlm_model_device_error says what happened. */
#ifndef TLM_GPU_MODEL_H
#define TLM_GPU_MODEL_H

#include "bf16_gemm.h"
#include "device.h"
#include "gpu.h"
#include "model.h"

typedef struct tlm_gpu_model {
    tlm_gpu gpu;               /* the device and the runtime's kernels */
    tlm_module *mlp;           /* the model's generated MLP kernels (NULL: none) */
    tlm_module_report mlp_report;
    tlm_kernel **act, **act_grad; /* per kernel of the model.so: its width's elementwise activation */
    /* bf16: their twins, reading bf16 pre-activations (act writes h in bf16) */
    tlm_kernel **act_bf16, **act_grad_bf16;
    tlm_dptr mlp_scratch;      /* [B·T, the widest W]: h (bf16 in bf16), or dh (fp32) in the backward */
    tlm_dptr params, grads, arena, rope_cos, rope_sin, tokens, targets;
    tlm_dptr loss;             /* one double: the loss op's mean */
    tlm_dptr titans_scratch;   /* the memory's backward (0 otherwise) */
    /* bf16: the parameters' bf16 copy and the GEMMs' rounded activations
     * (gpu.bf16 points here; both 0 in fp32) */
    tlm_precision precision;
    tlm_bf16_gemm bf16;
    /* bf16: per buffer, whether it is stored in bf16 (2 bytes an element;
     * the arena planned for that); NULL in fp32 */
    bool *bf16_buffers;
    /* bf16, where some y is bf16: attention's scratch (0: none): the scalar
     * forward's fp32 accumulator of y, or on the tensor cores the backward's
     * dy in bf16 and D_t (attention_tc.h; training only) */
    tlm_dptr attention_scratch;
    /* attention with a bf16 y runs on the tensor cores (attention_tc.h);
     * their module is loaded only then */
    bool attention_tc;
    bool weights_stale;        /* params changed since the bf16 copy was made */
    tlm_dptr kv_cache;         /* sampling's KV cache (model.h), 0 until opened */
    bool kv_bf16;              /* its rows of qkv are bf16 (tlm_gpu_kv_cache_bf16), 2 bytes an element */
    float **host_copies;       /* per buffer: its last download (lazily allocated) */
    struct tlm_graph_cache *graphs; /* the executor's CUDA graphs (graph_cache.h), made at first use */
    bool failed;
    tlm_err err;               /* the first device failure */
} tlm_gpu_model;

/* Puts m (created with tlm_model_create_on(..., dev, ...)) on dev: device
 * memory, kernels, RoPE tables; refused up front when that and
 * extra_bytes (the optimizer's state, counted in the same check) exceed the
 * device's memory. The parameters stay on the host until
 * tlm_model_params_to_device. */
bool tlm_gpu_model_create(tlm_model *m, tlm_device *dev, tlm_precision precision, int64_t extra_bytes, tlm_err *err);
void tlm_gpu_model_destroy(tlm_model *m);

/* --precision bf16 stores in bf16 each activation buffer that the executor
 * can write in bf16 (the model norm's and the per-head norm's y,
 * tlm_gpu_rmsnorm_forward_bf16 and _heads_forward_bf16; attention's y,
 * tlm_gpu_attention_forward_bf16; the sigmoid gate's out,
 * tlm_gpu_sigmoid_gate_forward_bf16; Titans' SiLU gate's out,
 * tlm_gpu_swiglu_forward_bf16, and its memory activation's act and
 * mem_qkv, tlm_gpu_titans_qkv_forward_bf16, and its memory's read-out y,
 * tlm_gpu_titans_forward_bf16; the MLP's pre-activations, qkv,
 * the logits and a linear map's y, GEMMs with a bf16 D; RoPE rewrites q and
 * k in place in bf16, tlm_gpu_rope_forward_bf16, and the cross-entropy's
 * backward writes dlogits over bf16 logits in bf16) and that every op
 * reading it can read in bf16 (the x of qkv, mlp, head and linear, forward
 * and backward, the y of the output projection and dlogits in the head's
 * backward: GEMM operands; attention's qkv, forward, backward and
 * decoding, and its y in the backward; the sigmoid gate's y and gate_pre
 * and the SiLU gate's x and gate_pre, forward and backward; Titans' qkv
 * and act in its memory activation, mem_qkv in its memory, forward,
 * backward and decoding, the memory's read-out in the per-head norm,
 * forward and backward; the pre-activations in the MLP's backward, the
 * activation kernels' bf16 twins; the logits in the cross-entropy, forward
 * and backward): bf16_buffers[i] for buffer i, for the ops [0, nops). Kept
 * in one storage: an MLP's gate and up; the logits and dlogits;
 * attention's y bf16 only with its qkv bf16, and every attention's qkv
 * alike (one KV cache); the sigmoid gate's y, gate_pre and out; the SiLU
 * gate's x, gate_pre and out; the memory activation's qkv, act and
 * mem_qkv; the memory's mem_qkv and read-out y; the per-head norm's x (that
 * read-out) and y. The buffers not chosen (Titans' saved state, norms and
 * gates among them), the residual stream and the other gradients stay
 * fp32. A buffer eval, sample or probe reads by role reaches the host
 * as fp32 either way (tlm_model_buffer widens a bf16 one: the logits). */
void tlm_gpu_bf16_buffers(const tlm_so *so, int nops, bool *bf16_buffers);

/* Whether sampling's KV cache holds bf16 rows: the model has attention and
 * bf16_buffers (NULL: fp32) stores its qkv in bf16. */
bool tlm_gpu_kv_cache_bf16(const tlm_so *so, int nops, const bool *bf16_buffers);

/* The activation arena with the buffers bf16_buffers marks at 2 bytes an
 * element (NULL: all fp32, the host plan's arena): bytes, and each
 * buffer's offset in offsets; -1 on overflow. */
int64_t tlm_gpu_plan_arena(const tlm_so *so, int nops, const bool *bf16_buffers, int64_t B, int64_t T,
                           int64_t *offsets);

/* The bf16 GEMMs' scratch for the rounded operands, in bf16 elements
 * (tlm_bf16_gemm's scratch_elems), for the ops [0, nops) over rows = B·T
 * tokens with bf16_buffers' storage: sized from the fp32 buffers a GEMM
 * reads and the MLP's width (docs/gpu.md, "Memory"). */
int64_t tlm_gpu_bf16_scratch_elems(const tlm_so *so, int nops, const bool *bf16_buffers, int64_t rows);

/* The device executor (gpu_executor.c): the op list on the device. */
double tlm_gpu_model_forward(tlm_model *m, const int32_t *tokens, const int32_t *targets, int64_t B, int64_t T);
void tlm_gpu_model_backward(tlm_model *m, float dloss);

/* Allocates the KV cache of `floats` elements (tlm_model_cache_open): 4
 * bytes each, or 2 where its rows are bf16 (kv_bf16). */
bool tlm_gpu_model_cache_open(tlm_model *m, size_t floats, tlm_err *err);

/* The parameters on the device changed (an update, an upload): the bf16
 * copy is remade before the next forward. */
void tlm_gpu_model_params_changed(tlm_model *m);

/* Whether the GPU's switches hold values a run takes: TLM_GPU_ATTENTION
 * unset, empty, auto or scalar, TLM_GPU_ATTENTION_ROWS unset, empty, auto
 * or 16, and TLM_CUDA_GRAPHS unset, empty, 0 or 1 (a misspelt switch that
 * changed nothing would make a comparison of two identical runs); false
 * with the one line a run would fail with. */
bool tlm_gpu_settings_ok(tlm_err *err);

/* Whether TLM_GPU_ATTENTION_ROWS=16 changes the tensor-core kernels so
 * runs on a device like info: their forward's and dq's warps then take 16
 * query rows at head size 64 where they take 32 from sm_90 on
 * (tlm_gpu.attention_rows16), the same bits, to time the two. */
bool tlm_gpu_attention_rows16(const tlm_so *so, const tlm_device_info *info);

/* What a run's header says about the kernels it runs (tlm-run info, the
 * train banner; docs/gpu.md "Using it"):
 * Whether attention runs on the tensor cores for so on a device like info
 * in precision p (choose_attention's rule: bf16 q, k, v and y, head size 64
 * or 128, sm_80+, TLM_GPU_ATTENTION not "scalar"); false with why saying
 * why not in a few words ("fp32", "head size 32; tensor cores: 64 or 128",
 * "sm_75; tensor cores: sm_80+", "TLM_GPU_ATTENTION=scalar", ...). Writes
 * "no attention" when so has none. A bad TLM_GPU_ATTENTION value is
 * refused when the model is created, not here. */
bool tlm_gpu_attention_on_tensor_cores(const tlm_so *so, const tlm_device_info *info, tlm_precision p, char *why,
                                       size_t n);

/* Why the executor runs m's steps op by op rather than from CUDA graphs
 * ("--profile", "sampling", "data-parallel", "TLM_CUDA_GRAPHS=0", or the
 * driver having refused a graph); NULL when graphs are on. */
const char *tlm_gpu_graphs_off_reason(const tlm_model *m);

/* Records the first device failure (later ones are consequences). */
void tlm_gpu_model_fail(tlm_model *m, const tlm_err *e);

#endif
