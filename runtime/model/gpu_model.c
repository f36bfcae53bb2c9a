#include "gpu_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_mixers.h"
#include "tlm_rt/ops.h"

void tlm_gpu_model_fail(tlm_model *m, const tlm_err *e) {
    tlm_gpu_model *g = m->gpu;
    if (g->failed) return;
    g->failed = true;
    g->err = *e;
}

/* The model's MLP kernels for the GPU's GEMM path: the per-width
 * activation and its gradient, named after the fwd entry's symbol
 * (tlm_mlp_<kind>_d<D>_w<W>_fwd -> ..._act, ..._act_grad; codegen.h). */
static bool load_mlp_kernels(tlm_model *m, tlm_err *err) {
    tlm_gpu_model *g = m->gpu;
    const tlm_so *so = m->so;
    uint32_t n = so->header->nkernels;
    if (n == 0) return true;
    if (!so->cuda_source || !*so->cuda_source) return tlm_fail(err, "the model.so carries no CUDA source");
    g->act = calloc(n, sizeof *g->act);
    g->act_grad = calloc(n, sizeof *g->act_grad);
    if (!g->act || !g->act_grad) return tlm_fail(err, "out of memory");
    g->mlp = tlm_device_module_load(g->gpu.dev, "the model's MLP kernels", so->cuda_source, &g->mlp_report, err);
    if (!g->mlp) return false;
    for (uint32_t i = 0; i < n; i++) {
        const char *fwd = tlm_so_str(so, so->kernels[i].symbol);
        size_t len = strlen(fwd);
        if (len < 4 || len > 200 || strcmp(fwd + len - 4, "_fwd") != 0)
            return tlm_fail(err, "the model's kernel symbol %.60s does not end in _fwd", fwd);
        char name[256];
        snprintf(name, sizeof name, "%.*s_act", (int)(len - 4), fwd);
        if (!(g->act[i] = tlm_device_kernel(g->gpu.dev, g->mlp, name, err))) return false;
        snprintf(name, sizeof name, "%.*s_act_grad", (int)(len - 4), fwd);
        if (!(g->act_grad[i] = tlm_device_kernel(g->gpu.dev, g->mlp, name, err))) return false;
    }
    return true;
}

/* The widest MLP of the model (0: none). */
static int64_t widest_mlp(const tlm_so *so) {
    int64_t w = 0;
    for (uint32_t i = 0; i < so->header->nkernels; i++)
        if (so->kernels[i].width > w) w = so->kernels[i].width;
    return w;
}

/* The bf16 GEMMs' scratch: the executor's GEMMs round at most two
 * activation operands, each within one buffer (at most the widest
 * per-token buffer's B·T rows), or x and the pair of MLP gradients
 * (gate and up): at most 2 of the widest and one more of the MLP's. */
static int64_t bf16_scratch_elems(const tlm_model *m) {
    int64_t widest = widest_mlp(m->so);
    for (uint32_t i = 0; i < m->so->header->nbuffers; i++)
        if (m->so->buffers[i].per_token > widest) widest = m->so->buffers[i].per_token;
    const int64_t rows = m->B * m->T;
    return tlm_bf16_gemm_scratch_elems(rows * widest, 2) + tlm_bf16_gemm_scratch_elems(rows * widest_mlp(m->so), 1);
}

static tlm_dptr alloc(tlm_model *m, size_t bytes, tlm_err *err) {
    return tlm_device_alloc(m->gpu->gpu.dev, bytes ? bytes : 4, err);
}

/* What the model takes on the device, beside `extra` (the optimizer's
 * state), against the device's memory: refused before anything is
 * allocated, with the sizes, rather than by a failing allocation halfway. */
static bool fits(const tlm_model *m, tlm_device *dev, size_t rope_bytes, size_t titans_bytes, size_t bf16_bytes,
                 int64_t extra, tlm_err *err) {
    const size_t rows = (size_t)(m->B * m->T), param_bytes = (size_t)m->param_floats * sizeof(float);
    double need = (double)param_bytes * (m->training ? 2 : 1) + (double)m->arena_bytes + 2.0 * (double)rope_bytes +
                  (double)rows * (2 * sizeof(int32_t) + (double)widest_mlp(m->so) * sizeof(float)) +
                  (double)titans_bytes + (double)bf16_bytes + (double)(extra > 0 ? extra : 0);
    const tlm_device_info *i = tlm_device_get_info(dev);
    /* What the device still has (on a GPU the driver's count: the CUDA
     * context and other processes already taken off), less a GiB on a GPU
     * for what is loaded later: cuBLASLt's kernels and its workspace. */
    double reserve = i->emulated ? 0 : 1073741824.0;
    double have = (double)tlm_device_memory_free(dev) - reserve;
    if (need <= have) return true;
    return tlm_fail(err,
                    "out of device memory: batch %lld × %lld tokens needs %.2f GiB on cuda:%d, which has %.2f GiB; "
                    "lower the batch (--accumulate keeps the step's tokens) or the context",
                    (long long)m->B, (long long)m->T, need / 1073741824.0, i->ordinal, have / 1073741824.0);
}

bool tlm_gpu_model_create(tlm_model *m, tlm_device *dev, tlm_precision precision, int64_t extra_bytes, tlm_err *err) {
    tlm_gpu_model *g = calloc(1, sizeof *g);
    if (!g) return tlm_fail(err, "out of memory");
    m->gpu = g;
    const tlm_abi_config *c = m->so->config;
    size_t param_bytes = (size_t)m->param_floats * sizeof(float), rows = (size_t)(m->B * m->T);
    size_t rope_bytes = (size_t)m->T * (size_t)(c->head_dim / 2) * sizeof(float);
    size_t titans_bytes = c->mixer == TLM_MIXER_TITANS && m->training
                              ? tlm_gpu_titans_scratch_bytes((int)m->B, (int)c->heads, (int)c->head_dim, (int)c->chunk)
                              : 0;
    g->precision = precision;
    const bool bf16 = precision == TLM_PRECISION_BF16;
    const int64_t scratch_elems = bf16 ? bf16_scratch_elems(m) : 0;
    size_t bf16_bytes = bf16 ? (size_t)(m->param_floats + scratch_elems) * 2 : 0;
    if (!fits(m, dev, rope_bytes, titans_bytes, bf16_bytes, extra_bytes, err)) {
        tlm_gpu_model_destroy(m);
        return false;
    }
    bool ok = tlm_gpu_open(&g->gpu, dev, err) && load_mlp_kernels(m, err) && (g->params = alloc(m, param_bytes, err)) &&
              (!m->training || (g->grads = alloc(m, param_bytes, err))) &&
              (g->arena = alloc(m, (size_t)m->arena_bytes, err)) && (g->rope_cos = alloc(m, rope_bytes, err)) &&
              (g->rope_sin = alloc(m, rope_bytes, err)) && (g->tokens = alloc(m, rows * sizeof(int32_t), err)) &&
              (g->targets = alloc(m, rows * sizeof(int32_t), err)) && (g->loss = alloc(m, sizeof(double), err)) &&
              (g->mlp_scratch = alloc(m, rows * (size_t)widest_mlp(m->so) * sizeof(float), err));
    if (ok && titans_bytes) ok = (g->titans_scratch = alloc(m, titans_bytes, err)) != 0;
    if (ok && bf16) {
        g->bf16 =
            (tlm_bf16_gemm){.weights = g->params, .weight_floats = m->param_floats, .scratch_elems = scratch_elems};
        ok = (g->bf16.weights_bf16 = alloc(m, (size_t)m->param_floats * 2, err)) &&
             (g->bf16.scratch = alloc(m, (size_t)scratch_elems * 2, err));
        g->gpu.bf16 = &g->bf16;
        g->weights_stale = true;
    }
    /* The RoPE tables: the host computed them in double (tlm_rope_init). */
    ok = ok && (g->host_copies = calloc(m->so->header->nbuffers + 1, sizeof *g->host_copies));
    if (ok) {
        float *cs = malloc(rope_bytes ? rope_bytes : 4), *sn = malloc(rope_bytes ? rope_bytes : 4);
        ok = cs && sn;
        if (ok) {
            tlm_rope_init(cs, sn, (int)m->T, (int)c->head_dim, c->rope_base);
            ok = tlm_device_upload(dev, g->rope_cos, cs, rope_bytes, err) &&
                 tlm_device_upload(dev, g->rope_sin, sn, rope_bytes, err);
        } else tlm_fail(err, "out of memory");
        free(cs);
        free(sn);
    }
    if (!ok) tlm_gpu_model_destroy(m);
    return ok;
}

bool tlm_gpu_model_cache_open(tlm_model *m, size_t floats, tlm_err *err) {
    /* zeros: titans' memory starts from M = S = 0 */
    m->gpu->kv_cache = alloc(m, floats * sizeof(float), err);
    return m->gpu->kv_cache != 0 && tlm_device_zero(m->gpu->gpu.dev, m->gpu->kv_cache, floats * sizeof(float), err);
}

void tlm_gpu_model_params_changed(tlm_model *m) {
    if (m->gpu) m->gpu->weights_stale = true;
}

void tlm_gpu_model_destroy(tlm_model *m) {
    tlm_gpu_model *g = m->gpu;
    if (!g) return;
    tlm_device *dev = g->gpu.dev;
    if (dev) {
        tlm_dptr all[] = {
            g->params,  g->grads, g->arena,          g->rope_cos,    g->rope_sin,          g->tokens,
            g->targets, g->loss,  g->titans_scratch, g->mlp_scratch, g->bf16.weights_bf16, g->bf16.scratch};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++)
            if (all[i]) tlm_device_free(dev, all[i]);
        if (g->mlp) tlm_device_module_unload(dev, g->mlp);
        tlm_gpu_close(&g->gpu);
    }
    if (g->host_copies)
        for (uint32_t i = 0; i < m->so->header->nbuffers; i++) free(g->host_copies[i]);
    free(g->host_copies);
    free(g->act);
    free(g->act_grad);
    free(g);
    m->gpu = NULL;
}
