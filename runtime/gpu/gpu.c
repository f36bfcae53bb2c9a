#include "gpu.h"

#include "bf16_gemm.h"

#include <string.h>

bool tlm_gpu_open(tlm_gpu *g, tlm_device *dev, tlm_err *err) {
    memset(g, 0, sizeof *g);
    g->dev = dev;
    g->kernels = tlm_device_module_load(dev, "the runtime's kernels", tlm_gpu_kernel_source, &g->report, err);
    return g->kernels != NULL;
}

void tlm_gpu_close(tlm_gpu *g) {
    if (g->kernels) tlm_device_module_unload(g->dev, g->kernels);
    if (g->scratch) tlm_device_free(g->dev, g->scratch);
    memset(g, 0, sizeof *g);
}

bool tlm_gpu_launch(tlm_gpu *g, const char *name, unsigned grid, unsigned block, void **args, tlm_err *err) {
    tlm_kernel *k = tlm_device_kernel(g->dev, g->kernels, name, err);
    if (!k) return false;
    tlm_launch dims = {{grid, 1, 1}, {block, 1, 1}};
    return tlm_device_launch(g->dev, k, dims, args, err);
}

unsigned tlm_gpu_blocks(int64_t n, int64_t per_block) {
    int64_t b = per_block > 0 ? (n + per_block - 1) / per_block : 1;
    const int64_t most = 65535 * 16;
    return (unsigned)(b < 1 ? 1 : b > most ? most : b);
}

bool tlm_gpu_gemm(tlm_gpu *g, const tlm_gemm *d, tlm_err *err) {
    return g->bf16 ? tlm_gpu_gemm_bf16(g, g->bf16, d, err) : tlm_device_gemm(g->dev, d, err);
}

tlm_dptr tlm_gpu_scratch(tlm_gpu *g, size_t bytes, tlm_err *err) {
    if (g->scratch && g->scratch_bytes >= bytes) return g->scratch;
    if (g->scratch) tlm_device_free(g->dev, g->scratch);
    g->scratch_bytes = 0;
    if (!(g->scratch = tlm_device_alloc(g->dev, bytes, err))) return 0;
    g->scratch_bytes = bytes;
    return g->scratch;
}
