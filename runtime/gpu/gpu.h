/* The runtime's GPU kernels as C calls: each tlm_gpu_<op> launches the
 * kernels of runtime/gpu/<op>.cu with the same arguments, semantics and
 * preconditions as the CPU op of the same name (tlm_rt/ops.h, tlm_rt/optim.h)
 * but with device addresses, so the GPU executor reads like the CPU one and
 * each kernel is tested against its CPU op on the emulated device.
 *
 * The kernels' source is runtime/gpu/common.cuh followed by every
 * runtime/gpu/<name>.cu in name order, embedded into the binary at build time
 * (tlm_gpu_kernel_source, a build product) and compiled once per device
 * through the module cache. */
#ifndef TLM_GPU_H
#define TLM_GPU_H

#include "device.h"

extern const char tlm_gpu_kernel_source[];

struct tlm_bf16_gemm;

typedef struct tlm_gpu {
    tlm_device *dev;
    tlm_module *kernels;      /* the runtime's kernels */
    tlm_module_report report; /* how they were loaded (cache hit, compile time) */
    /* NULL: GEMMs in fp32; else their bf16 operands (bf16_gemm.h) */
    const struct tlm_bf16_gemm *bf16;
    /* a small buffer the C calls reuse (the gradient norm's partial sums),
     * so that a step allocates nothing on the device */
    tlm_dptr scratch;
    size_t scratch_bytes;
} tlm_gpu;

/* Loads the runtime's kernels on dev (compiling them, or from the cache). */
bool tlm_gpu_open(tlm_gpu *g, tlm_device *dev, tlm_err *err);
void tlm_gpu_close(tlm_gpu *g);

/* Launches the kernel `name` of the runtime's module with a 1-D grid and
 * block; args as tlm_device_launch takes them. */
bool tlm_gpu_launch(tlm_gpu *g, const char *name, unsigned grid, unsigned block, void **args, tlm_err *err);

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
