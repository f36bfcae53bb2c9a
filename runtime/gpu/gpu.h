/* The runtime's GPU kernels as C calls: each tlm_gpu_<op> launches the
 * kernels of runtime/gpu/<op>.cu with the same arguments, semantics and
 * preconditions as the CPU op of the same name (tlm_rt/ops.h, tlm_rt/optim.h)
 * but with device addresses, so the GPU executor reads like the CPU one and
 * each kernel is tested against its CPU op on the emulated device.
 *
 * The kernels come in two modules, each a source embedded into the binary at
 * build time (a build product: runtime/gpu/common.cuh, then .cu files in
 * name order) and compiled once per device through the module cache, each
 * on its own (tlm_gpu_modules):
 *   - the runtime's kernels: every .cu but attention_tc.cu; tlm_gpu_open
 *     loads them;
 *   - the tensor-core attention: mma.cuh and attention_tc.cu, loaded by
 *     tlm_gpu_load_module only where a run uses them (bf16 attention on an
 *     sm_80+ GPU, head size 64 or 128: attention_tc.h), so that the runs that
 *     do not never compile them.
 * A kernel's module follows from its name (tlm_gpu_kernel_module): the
 * module whose prefix the name starts with, and the runtime's module for
 * the rest. */
#ifndef TLM_GPU_H
#define TLM_GPU_H

#include "device.h"

extern const char tlm_gpu_kernel_source[];       /* the runtime's kernels */
extern const char tlm_gpu_attention_tc_source[]; /* the tensor-core attention */

typedef enum tlm_gpu_module_id {
    TLM_GPU_MODULE_RUNTIME,
    TLM_GPU_MODULE_ATTENTION_TC,
    TLM_GPU_MODULE_COUNT
} tlm_gpu_module_id;

typedef struct tlm_gpu_module_def {
    const char *name;   /* "runtime": its label in info --device */
    const char *what;   /* "the runtime's kernels": the module's errors */
    const char *source; /* the embedded CUDA source */
    /* the kernels whose names start with it (NULL: every kernel no other
     * module's prefix claims) */
    const char *prefix;
} tlm_gpu_module_def;

/* The modules, by id (one line each in gpu.c). */
extern const tlm_gpu_module_def tlm_gpu_modules[TLM_GPU_MODULE_COUNT];

/* The module that holds the kernel `name` (by the prefixes above). */
tlm_gpu_module_id tlm_gpu_kernel_module(const char *name);

/* The next kernel a CUDA source declares at or after p: its name (len
 * characters, followed by its parenthesis) after `extern "C" __global__
 * void `, or NULL when there is none. The comments that quote those words
 * have no name and parenthesis after them. Walk a source with
 * for (p = tlm_gpu_next_kernel(src, &len); p; p = tlm_gpu_next_kernel(p + len, &len)). */
const char *tlm_gpu_next_kernel(const char *p, size_t *len);

struct tlm_bf16_gemm;

typedef struct tlm_gpu {
    tlm_device *dev;
    tlm_module *modules[TLM_GPU_MODULE_COUNT]; /* NULL: not loaded */
    tlm_module_report reports[TLM_GPU_MODULE_COUNT]; /* how each was loaded (cache hit, compile time) */
    /* NULL: GEMMs in fp32; else their bf16 operands (bf16_gemm.h) */
    const struct tlm_bf16_gemm *bf16;
    /* the tensor-core attention's forward and dq kernels take 16 query rows
     * a warp at head size 64 where they would take 32 (sm_90 on): the same
     * bits, to time the two (TLM_GPU_ATTENTION_ROWS=16; attention_tc.h) */
    bool attention_rows16;
    /* a small buffer the C calls reuse (the gradient norm's partial sums),
     * so that a step allocates nothing on the device */
    tlm_dptr scratch;
    size_t scratch_bytes;
} tlm_gpu;

/* Loads the runtime's module on dev (compiling it, or from the cache). */
bool tlm_gpu_open(tlm_gpu *g, tlm_device *dev, tlm_err *err);
/* Unloads every module loaded. */
void tlm_gpu_close(tlm_gpu *g);

/* Loads module id (compiling it, or from the cache) unless it is loaded. */
bool tlm_gpu_load_module(tlm_gpu *g, tlm_gpu_module_id id, tlm_err *err);

/* Launches the kernel `name` with a 1-D grid and block, from the module that
 * holds it (tlm_gpu_kernel_module); args as tlm_device_launch takes them.
 * False with err, launching nothing, when that module is not loaded. */
bool tlm_gpu_launch(tlm_gpu *g, const char *name, unsigned grid, unsigned block, void **args, tlm_err *err);
/* The same with shared_bytes of dynamic shared memory per block (device.h). */
bool tlm_gpu_launch_shared(tlm_gpu *g, const char *name, unsigned grid, unsigned block, unsigned shared_bytes,
                           void **args, tlm_err *err);

/* g->scratch holding at least bytes (grown as needed, kept until close);
 * 0 with err when the device has no room. */
tlm_dptr tlm_gpu_scratch(tlm_gpu *g, size_t bytes, tlm_err *err);

/* The runtime's one way to run a GEMM: the description as given (fp32),
 * or with bf16 operands when g->bf16 is set. */
bool tlm_gpu_gemm(tlm_gpu *g, const tlm_gemm *d, tlm_err *err);

/* A grid of ceil(n / per_block) blocks, at least 1 and at most 65535·16
 * (the kernels stride over the rest). */
unsigned tlm_gpu_blocks(int64_t n, int64_t per_block);

#endif
