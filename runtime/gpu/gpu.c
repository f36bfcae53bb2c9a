#include "gpu.h"

#include "bf16_gemm.h"

#include <string.h>

const tlm_gpu_module_def tlm_gpu_modules[TLM_GPU_MODULE_COUNT] = {
    [TLM_GPU_MODULE_RUNTIME] = {"runtime", "the runtime's kernels", tlm_gpu_kernel_source, NULL},
    [TLM_GPU_MODULE_ATTENTION_TC] = {"tensor-core attention", "the tensor-core attention kernels",
                                     tlm_gpu_attention_tc_source, "tlm_attention_tc_"},
};

tlm_gpu_module_id tlm_gpu_kernel_module(const char *name) {
    for (int id = 0; id < TLM_GPU_MODULE_COUNT; id++) {
        const char *prefix = tlm_gpu_modules[id].prefix;
        if (prefix && strncmp(name, prefix, strlen(prefix)) == 0) return (tlm_gpu_module_id)id;
    }
    return TLM_GPU_MODULE_RUNTIME;
}

const char *tlm_gpu_next_kernel(const char *p, size_t *len) {
    static const char decl[] = "extern \"C\" __global__ void ";
    while ((p = strstr(p, decl)) != NULL) {
        p += sizeof decl - 1;
        *len = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
        if (*len > 0 && p[*len] == '(') return p;
    }
    return NULL;
}

bool tlm_gpu_open(tlm_gpu *g, tlm_device *dev, tlm_err *err) {
    memset(g, 0, sizeof *g);
    g->dev = dev;
    return tlm_gpu_load_module(g, TLM_GPU_MODULE_RUNTIME, err);
}

bool tlm_gpu_load_module(tlm_gpu *g, tlm_gpu_module_id id, tlm_err *err) {
    if ((unsigned)id >= TLM_GPU_MODULE_COUNT) return tlm_fail(err, "no runtime module %d", (int)id);
    if (g->modules[id]) return true;
    const tlm_gpu_module_def *m = &tlm_gpu_modules[id];
    g->modules[id] = tlm_device_module_load(g->dev, m->what, m->source, &g->reports[id], err);
    return g->modules[id] != NULL;
}

void tlm_gpu_close(tlm_gpu *g) {
    for (int id = 0; id < TLM_GPU_MODULE_COUNT; id++)
        if (g->modules[id]) tlm_device_module_unload(g->dev, g->modules[id]);
    if (g->scratch) tlm_device_free(g->dev, g->scratch);
    memset(g, 0, sizeof *g);
}

bool tlm_gpu_launch(tlm_gpu *g, const char *name, unsigned grid, unsigned block, void **args, tlm_err *err) {
    return tlm_gpu_launch_shared(g, name, grid, block, 0, args, err);
}

bool tlm_gpu_launch_shared(tlm_gpu *g, const char *name, unsigned grid, unsigned block, unsigned shared_bytes,
                           void **args, tlm_err *err) {
    if (!name) return tlm_fail(err, "no kernel name");
    tlm_gpu_module_id id = tlm_gpu_kernel_module(name);
    if (!g->modules[id])
        return tlm_fail(err, "kernel %s is one of %s, which are not loaded (tlm_gpu_load_module)", name,
                        tlm_gpu_modules[id].what);
    tlm_kernel *k = tlm_device_kernel(g->dev, g->modules[id], name, err);
    if (!k) return false;
    tlm_launch dims = {{grid, 1, 1}, {block, 1, 1}, shared_bytes};
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
