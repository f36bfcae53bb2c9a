/* A compiled model in memory: the parameter block, its gradients, and the
 * activation arena laid out by the memory plan (the stored one, or the same
 * planner for other sizes). executor.c runs the ops over them. */
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/mman.h>

#include "arena_plan.h"
#include "errmsg.h"
#include "gemm_reference.h"
#include "gpu_model.h"
#include "tlm_rt/memory_limit.h"
#include "numfmt.h"
#include "tlm_rt/ops.h"
#include "tlm_rt/rng.h"

/* Zeroed memory on a cache line; from 2 MiB on, whole 2 MiB pages (the
 * size rounded up, less than 2 MiB more) in transparent huge pages where
 * the kernel gives them on request (Debian's default, "madvise"). A decoded
 * token streams every weight once: tiny's 19 MB in 4 KiB pages is 4,700
 * pages, past the TLB's reach, and the KV cache took a page fault every
 * 4 KiB as it filled. */
static void *alloc_aligned(size_t bytes) {
    enum { HUGE_PAGE = 2 << 20 };
    void *p = NULL;
    const bool huge = bytes >= HUGE_PAGE;
    const size_t size = huge ? (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE : bytes ? bytes : 64;
    if (posix_memalign(&p, huge ? HUGE_PAGE : 64, size) != 0) return NULL;
#ifdef MADV_HUGEPAGE
    if (huge) (void)madvise(p, size, MADV_HUGEPAGE); /* a hint: refused, the pages are 4 KiB */
#endif
    memset(p, 0, bytes);
    return p;
}

/* Titans: the checkpoint buffer must hold what the memory saves at these
 * sizes (the compiler sized it for any B and T), and the backward's
 * per-thread scratch is allocated here, so no op fails later. */
static bool titans_memory(tlm_model *m, size_t scratch_floats, tlm_err *err) {
    const tlm_abi_config *c = m->so->config;
    size_t need = tlm_titans_saved_floats((int)m->B, (int)m->T, (int)c->heads, (int)c->head_dim, (int)c->chunk);
    for (uint32_t i = 0; i < m->so->header->nops; i++) {
        const tlm_abi_op *op = &m->so->ops[i];
        if (op->kind != TLM_OP_TITANS) continue;
        int64_t have = tlm_buffer_bytes(&m->so->buffers[op->titans.out_saved], m->B, m->T) / 4;
        if (have < 0 || (size_t)have < need)
            return tlm_fail(err,
                            "the model's memory checkpoint buffer holds %lld floats, the memory needs %zu "
                            "(recompile the model with this tlmc)",
                            (long long)have, need);
    }
    if (!m->training) return true;
    m->titans_scratch = alloc_aligned(scratch_floats * sizeof(float));
    if (!m->titans_scratch)
        return tlm_fail(err, "out of memory: the memory's backward needs %.0f MiB of scratch",
                        (double)scratch_floats * 4 / 1048576.0);
    return true;
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* The ops take int sizes and the executor forms row counts from them
 * (N = B·T, N·H, N·A): every one must fit in TLM_OPS_MAX_INDEX (ops.h).
 * The widest row a step has is the largest per-token width of a buffer,
 * an op or a model setting; N times it must fit. */
static bool sizes_fit(const tlm_so *so, int64_t B, int64_t T, tlm_err *err) {
    const tlm_abi_config *c = so->config;
    const int64_t limit = TLM_OPS_MAX_INDEX;
    int64_t setting = max64(max64(c->d_model, c->vocab), max64(max64(c->heads, c->head_dim), c->chunk));
    if (setting > limit / 3 || c->heads * c->head_dim > limit / 3)
        return tlm_fail(err, "model descriptor: a model size (d_model, vocab, heads, head_dim, chunk) is larger "
                             "than the runtime's ops can index");
    char n1[32], n2[32];
    if (B > limit / T)
        return tlm_fail(err,
                        "batch %lld × %lld tokens = %s tokens at once, more than the %s the runtime's ops "
                        "can index; lower the batch or the context",
                        (long long)B, (long long)T, B > INT64_MAX / T ? "over 2^63" : fmt_int(n1, sizeof n1, B * T, 0),
                        fmt_int(n2, sizeof n2, limit, 0));
    int64_t N = B * T, widest = max64(max64(c->d_model, c->vocab), 3 * c->heads * c->head_dim);
    const char *what = "a model size";
    bool named = false; /* a tensor's name before a setting's, and the first of the widest (a forward one, which
                           eval has too, before its gradient) */
    for (uint32_t i = 0; i < so->header->nbuffers; i++)
        if (so->buffers[i].per_token > widest || (so->buffers[i].per_token == widest && !named)) {
            widest = so->buffers[i].per_token;
            what = tlm_so_str(so, so->buffers[i].name);
            named = true;
        }
    for (uint32_t i = 0; i < so->header->nkernels; i++)
        if (so->kernels[i].width > widest) widest = so->kernels[i].width, what = "an MLP width";
    for (uint32_t i = 0; i < so->header->nops; i++) {
        const tlm_abi_op *op = &so->ops[i];
        if (op->kind != TLM_OP_LINEAR && op->kind != TLM_OP_LINEAR_DW && op->kind != TLM_OP_LINEAR_DX) continue;
        int64_t rows = 0, cols = so->params[op->param[0]].shape[1];
        for (int j = 0; j < 3 && op->param[j] >= 0; j++) /* each row count capped: the sum cannot overflow */
            rows += so->params[op->param[j]].shape[0] < limit ? so->params[op->param[j]].shape[0] : limit;
        if (max64(rows, cols) > widest) widest = max64(rows, cols), what = "a linear map's weight";
    }
    if (widest > limit / N)
        return tlm_fail(err,
                        "batch %lld × %lld tokens is too large: %s has %lld values per token, %s in all, "
                        "more than the %s the runtime's ops can index; lower the batch or the context",
                        (long long)B, (long long)T, what, (long long)widest,
                        widest > INT64_MAX / N ? "over 2^63" : fmt_int(n1, sizeof n1, widest * N, 0),
                        fmt_int(n2, sizeof n2, limit, 0));
    return true;
}

/* bytes += n, saturating (every term is at most 2^62) */
static void add_bytes(int64_t *bytes, int64_t n) { *bytes = n > INT64_MAX - *bytes ? INT64_MAX : *bytes + n; }

bool tlm_model_create(tlm_model *m, const tlm_so *so, int64_t B, int64_t T, bool training, int64_t extra_bytes,
                      tlm_err *err) {
    return tlm_model_create_on(m, so, NULL, TLM_PRECISION_FP32, B, T, training, extra_bytes, err);
}

bool tlm_model_create_on(tlm_model *m, const tlm_so *so, tlm_device *dev, tlm_precision precision, int64_t B, int64_t T,
                         bool training, int64_t extra_bytes, tlm_err *err) {
    memset(m, 0, sizeof *m);
    if (!dev && precision != TLM_PRECISION_FP32)
        return tlm_fail(err, "%s runs on a GPU only (--device cuda); the CPU computes in fp32",
                        tlm_precision_name(precision));
    const tlm_blob_header *h = so->header;
    const tlm_abi_config *am = so->config;
    if (B < 1 || T < 1) return tlm_fail(err, "batch and sequence length must be positive");
    /* on the CPU, the generated kernels must be able to run here */
    bool generated = false;
    for (uint32_t k = 0; k < h->nkernels; k++) generated = generated || so->kernels[k].cpu_impl != TLM_MLP_IMPL_BLAS;
    if (!dev && generated && !tlm_so_cpu_ok(so, err)) return false;
    if (T > am->context)
        return tlm_fail(err, "sequence length %lld is longer than the model's context %lld", (long long)T,
                        (long long)am->context);
    if (!sizes_fit(so, B, T, err)) return false;
    m->so = so;
    m->B = B;
    m->T = T;
    m->training = training;
    m->nops = (int)h->nops;
    m->nforward = (int)so->plans[TLM_PLAN_INFER].nops;
    if (!training) m->nops = m->nforward;
    m->param_floats = am->param_floats;
    m->offsets = calloc(h->nbuffers + 1, sizeof *m->offsets);
    if (!m->offsets) return tlm_fail(err, "out of memory");
    /* The stored plan when the sizes match it, else the same planner now. */
    int kind = training ? TLM_PLAN_TRAIN : TLM_PLAN_INFER;
    const tlm_abi_plan *stored = &so->plans[kind];
    if (stored->batch == B && stored->seq == T) {
        memcpy(m->offsets, tlm_so_plan_offsets(so, kind), h->nbuffers * sizeof *m->offsets);
        m->arena_bytes = stored->arena_bytes;
    } else {
        m->arena_bytes = tlm_plan_arena(so->buffers, (int)h->nbuffers, so->ops, m->nops, B, T, m->offsets, NULL, NULL);
        if (m->arena_bytes < 0) {
            tlm_model_destroy(m);
            return tlm_fail(err,
                            "the activations for batch %lld × %lld tokens need more than 2^50 bytes; lower the "
                            "batch or the context",
                            (long long)B, (long long)T);
        }
    }
    /* Everything allocated below, checked against what the process may
     * still take before any of it is allocated and zero-filled. */
    m->threads = tlm_get_num_threads();
    size_t scratch_floats = 0;
    /* On a device the host holds no activations: only the parameters (the
     * master copy) and their gradients' copy. */
    int64_t host_arena = dev ? 0 : m->arena_bytes;
    if (am->mixer == TLM_MIXER_TITANS && training && !dev)
        scratch_floats =
            tlm_titans_scratch_floats((int)am->head_dim, (int)am->chunk) * (size_t)(m->threads < 1 ? 1 : m->threads);
    int64_t half = am->head_dim / 2, need = 0;
    size_t param_bytes = (size_t)m->param_floats * sizeof(float);
    add_bytes(&need, (int64_t)param_bytes * (training ? 2 : 1));
    add_bytes(&need, host_arena);
    add_bytes(&need, 2 * T * half * (int64_t)sizeof(float));
    add_bytes(&need, 2 * B * T * (int64_t)sizeof(int32_t));
    add_bytes(&need, (int64_t)(scratch_floats * sizeof(float)));
    add_bytes(&need, extra_bytes < 0 ? 0 : extra_bytes);
    tlm_memory_budget budget;
    if (!tlm_memory_budget_read(&budget, err)) {
        tlm_model_destroy(m);
        return false;
    }
    int64_t fixed = 0; /* what no batch or context lowers */
    add_bytes(&fixed, (int64_t)param_bytes * (training ? 2 : 1));
    add_bytes(&fixed, extra_bytes < 0 ? 0 : extra_bytes);
    if (fixed > budget.bytes) {
        char n1[32], n2[32], n3[32];
        tlm_model_destroy(m);
        return tlm_fail(err,
                        "out of memory: batch %lld × %lld tokens needs %s, %s available (%s); the parameters%s "
                        "alone need %s: a smaller model, or a machine with more memory",
                        (long long)B, (long long)T, tlm_fmt_bytes(n1, sizeof n1, need),
                        tlm_fmt_bytes(n2, sizeof n2, budget.bytes), budget.source,
                        training ? ", gradients and optimizer state" : "", tlm_fmt_bytes(n3, sizeof n3, fixed));
    }
    if (need > budget.bytes) {
        char n1[32], n2[32];
        tlm_model_destroy(m);
        return tlm_fail(err,
                        "out of memory: batch %lld × %lld tokens needs %s, %s available (%s); lower the batch or "
                        "the context",
                        (long long)B, (long long)T, tlm_fmt_bytes(n1, sizeof n1, need),
                        tlm_fmt_bytes(n2, sizeof n2, budget.bytes), budget.source);
    }
    m->params = alloc_aligned(param_bytes);
    m->grads = training ? alloc_aligned(param_bytes) : NULL;
    m->arena = dev ? NULL : alloc_aligned((size_t)m->arena_bytes);
    m->rope_cos = alloc_aligned((size_t)(T * half) * sizeof(float));
    m->rope_sin = alloc_aligned((size_t)(T * half) * sizeof(float));
    m->tokens = alloc_aligned((size_t)(B * T) * sizeof(int32_t));
    m->targets = alloc_aligned((size_t)(B * T) * sizeof(int32_t));
    if (!m->params || (training && !m->grads) || (!dev && !m->arena) || !m->rope_cos || !m->rope_sin || !m->tokens ||
        !m->targets) {
        char n1[32];
        tlm_model_destroy(m);
        return tlm_fail(err, "out of memory: batch %lld × %lld tokens needs %s; lower the batch or the context",
                        (long long)B, (long long)T, tlm_fmt_bytes(n1, sizeof n1, need));
    }
    tlm_rope_init(m->rope_cos, m->rope_sin, (int)T, (int)am->head_dim, am->rope_base);
    if (am->mixer == TLM_MIXER_TITANS && !titans_memory(m, scratch_floats, err)) {
        tlm_model_destroy(m);
        return false;
    }
    if (dev && !tlm_gpu_model_create(m, dev, precision, extra_bytes, err)) {
        tlm_model_destroy(m);
        return false;
    }
    return true;
}

bool tlm_model_params_to_device(tlm_model *m, tlm_err *err) {
    if (!m->gpu) return true;
    tlm_gpu_model_params_changed(m);
    return tlm_device_upload(m->gpu->gpu.dev, m->gpu->params, m->params, (size_t)m->param_floats * sizeof(float), err);
}

bool tlm_model_params_to_host(tlm_model *m, tlm_err *err) {
    if (!m->gpu) return true;
    return tlm_device_download(m->gpu->gpu.dev, m->params, m->gpu->params, (size_t)m->param_floats * sizeof(float),
                               err);
}

bool tlm_model_grads_to_host(tlm_model *m, tlm_err *err) {
    if (!m->gpu || !m->grads) return true;
    return tlm_device_download(m->gpu->gpu.dev, m->grads, m->gpu->grads, (size_t)m->param_floats * sizeof(float), err);
}

const char *tlm_model_device_error(const tlm_model *m) { return m->gpu && m->gpu->failed ? m->gpu->err.msg : NULL; }

/* Whether the KV cache is open, on the host or the device. */
static bool cache_is_open(const tlm_model *m) { return m->kv_cache || (m->gpu && m->gpu->kv_cache); }

bool tlm_model_cache_open(tlm_model *m, tlm_err *err) {
    const tlm_abi_config *c = m->so->config;
    if (m->training || m->B != 1) return tlm_fail(err, "a KV cache needs an inference model of batch 1");
    if (cache_is_open(m)) return true;
    /* attention: each layer's [T, 3A] rows of qkv; titans: each layer's
     * memory state, [H][3][hd][hd] (M, S, M0; executor.c) */
    const size_t floats = c->mixer == TLM_MIXER_TITANS
                              ? tlm_kv_state_floats(c)
                              : (size_t)c->layers * (size_t)m->T * 3 * (size_t)(c->heads * c->head_dim);
    if (m->gpu) return tlm_gpu_model_cache_open(m, floats, err);
    /* all of it resident at once (zeroed here), so checked against what the
     * process may still take, as tlm_model_create checks the model */
    tlm_memory_budget budget;
    if (!tlm_memory_budget_read(&budget, err)) return false;
    if ((double)floats * sizeof(float) > (double)budget.bytes) {
        char n1[32], n2[32];
        return tlm_fail(err, "out of memory for the KV cache: it needs %s, %s available (%s)",
                        tlm_fmt_bytes(n1, sizeof n1, (int64_t)(floats * sizeof(float))),
                        tlm_fmt_bytes(n2, sizeof n2, budget.bytes), budget.source);
    }
    m->kv_cache = alloc_aligned(floats * sizeof(float));
    /* attention: a head's scores, each head its own (tlm_attention_decode);
     * titans: a head's vector */
    m->kv_scratch = malloc((size_t)c->heads * (size_t)(m->T > c->head_dim ? m->T : c->head_dim) * sizeof(float));
    if (!m->kv_cache || !m->kv_scratch) {
        free(m->kv_cache), free(m->kv_scratch);
        m->kv_cache = m->kv_scratch = NULL;
        return tlm_fail(err, "out of memory for the KV cache (%.1f MiB)", (double)floats * 4 / 1048576.0);
    }
    return true;
}

/* A decoded token's products are matrix-vector products, short and bound
 * by memory, each a parallel region past TLM_PAR_MIN_MATVEC multiply-adds
 * (matvec.c), as is its attention over the cache past TLM_PAR_MIN_DECODE. Where OpenMP's idle threads
 * sleep (OMP_WAIT_POLICY=passive), each region wakes them with system
 * calls: 19 us a region on a Zen 5 VM against 3 us with spinning threads,
 * for products of a few microseconds (`bench/sample_bench.sh` of tiny at
 * two threads took 2.05 ms a byte against 0.99 on one thread, when OpenBLAS
 * ran the products). So the CPU decodes on one thread there. A row's sum
 * and a head's attention do not depend on the thread count: the bits are
 * the same. */
static bool decode_on_one_thread(const tlm_model *m, tlm_kv_mode mode) {
    return mode == TLM_KV_DECODE && !m->gpu && m->threads > 1 && tlm_threads_wait_passively();
}

static bool cached_forward(tlm_model *m, const int32_t *tokens, int64_t n, tlm_kv_mode mode, int64_t pos) {
    if (!cache_is_open(m)) return false;
    m->kv_mode = mode;
    m->kv_pos = pos;
    const bool single = decode_on_one_thread(m, mode);
    const tlm_thread_counts saved = single ? tlm_threads_single_begin() : (tlm_thread_counts){0, 0};
    tlm_model_forward(m, tokens, NULL, 1, n);
    if (single) tlm_threads_single_end(saved);
    m->kv_mode = TLM_KV_OFF;
    return !tlm_model_device_error(m);
}

bool tlm_model_prefill(tlm_model *m, const int32_t *tokens, int64_t n) {
    return n >= 1 && n <= m->T && cached_forward(m, tokens, n, TLM_KV_FILL, 0);
}

bool tlm_model_decode(tlm_model *m, int32_t token, int64_t pos) {
    return pos >= 0 && pos < m->T && cached_forward(m, &token, 1, TLM_KV_DECODE, pos);
}

void tlm_model_destroy(tlm_model *m) {
    tlm_gpu_model_destroy(m);
    free(m->kv_cache);
    free(m->kv_scratch);
    free(m->offsets);
    free(m->params);
    free(m->grads);
    free(m->arena);
    free(m->rope_cos);
    free(m->rope_sin);
    free(m->tokens);
    free(m->targets);
    free(m->titans_scratch);
    memset(m, 0, sizeof *m);
}

void tlm_model_init_params(tlm_model *m, uint64_t seed) {
    tlm_rng rng;
    tlm_rng_seed(&rng, seed);
    memset(m->params, 0, (size_t)m->param_floats * sizeof(float));
    for (uint32_t i = 0; i < m->so->header->nparams; i++) {
        const tlm_abi_param *p = &m->so->params[i];
        float *w = m->params + p->offset;
        if (p->init == TLM_INIT_NORMAL) tlm_rng_fill_normal(&rng, w, (size_t)p->count, 0.0f, (float)p->init_std);
        else if (p->init == TLM_INIT_ONES)
            for (int64_t k = 0; k < p->count; k++) w[k] = 1.0f;
    }
}

void tlm_model_zero_grads(tlm_model *m) {
    if (m->gpu) {
        tlm_err e;
        if (m->grads && !tlm_device_zero(m->gpu->gpu.dev, m->gpu->grads, (size_t)m->param_floats * sizeof(float), &e))
            tlm_gpu_model_fail(m, &e);
        return;
    }
    if (!m->grads) return;
    /* On every thread: one thread's memset took 1.7-2.0 ms of tiny's
     * 4.9 M floats, every micro-batch (docs/performance.md). */
    const size_t n = (size_t)m->param_floats, chunk = (size_t)1 << 16, chunks = (n + chunk - 1) / chunk;
    TLM_PARALLEL_FOR_IF(
        n >= TLM_PAR_MIN_ELEMENTS, for (size_t c = 0; c < chunks; c++) {
            const size_t lo = c * chunk, hi = lo + chunk < n ? lo + chunk : n;
            memset(m->grads + lo, 0, (hi - lo) * sizeof(float));
        });
}

float *tlm_model_param(const tlm_model *m, int i) { return m->params + m->so->params[i].offset; }
float *tlm_model_grad(const tlm_model *m, int i) { return m->grads ? m->grads + m->so->params[i].offset : NULL; }

/* A bf16 buffer's n elements, downloaded into the upper half of the n
 * floats at f (from byte 2n on), widened in place to fp32 (exactly: a bf16
 * is an fp32's upper 16 bits). Going up, element i is read before its float
 * is written, and that float (bytes 4i to 4i + 4) ends no later than
 * element i + 1 starts (byte 2n + 2i + 2), so nothing unread is
 * overwritten: no second host buffer for the largest tensor (the logits).
 * Bytes, through memcpy, so the compiler sees the overlap. */
static void widen_bf16(float *f, size_t n) {
    unsigned char *bytes = (unsigned char *)f;
    for (size_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, bytes + 2 * n + 2 * i, sizeof h);
        const float v = tlm_bf16_to_f32(h);
        memcpy(bytes + 4 * i, &v, sizeof v);
    }
}

/* On a device: the buffer downloaded into its host copy, as fp32 (a buffer
 * stored in bf16, such as the logits in --precision bf16, widened). */
static float *device_buf(const tlm_model *m, int32_t b) {
    tlm_gpu_model *g = m->gpu;
    size_t bytes = (size_t)tlm_buffer_bytes(&m->so->buffers[b], m->B, m->T);
    /* what the last forward wrote: its sizes' prefix (one row of logits
     * when sampling with a KV cache, not the whole window's) */
    size_t written = m->run_B > 0 ? (size_t)tlm_buffer_bytes(&m->so->buffers[b], m->run_B, m->run_T) : bytes;
    if (!g->host_copies[b] && !(g->host_copies[b] = malloc(bytes ? bytes : 4))) {
        tlm_err e;
        tlm_fail(&e, "out of memory for a host copy of %s", tlm_so_str(m->so, m->so->buffers[b].name));
        tlm_gpu_model_fail((tlm_model *)m, &e);
        return NULL;
    }
    const bool bf16 = g->bf16_buffers && g->bf16_buffers[b];
    const size_t n = written / sizeof(float);
    tlm_err e;
    float *host = g->host_copies[b];
    void *into = bf16 ? (unsigned char *)host + 2 * n : (void *)host;
    if (!tlm_device_download(g->gpu.dev, into, g->arena + (tlm_dptr)m->offsets[b], bf16 ? n * 2 : written, &e)) {
        tlm_gpu_model_fail((tlm_model *)m, &e);
        return NULL;
    }
    if (bf16) widen_bf16(host, n);
    return host;
}

static float *buf(const tlm_model *m, int32_t b) {
    if (b < 0 || m->offsets[b] < 0) return NULL;
    return m->gpu ? device_buf(m, b) : (float *)(m->arena + m->offsets[b]);
}

float *tlm_model_buffer(const tlm_model *m, uint32_t role, int layer) {
    for (uint32_t i = 0; i < m->so->header->nbuffers; i++)
        if (m->so->buffers[i].role == role && m->so->buffers[i].layer == layer) return buf(m, (int32_t)i);
    return NULL;
}

const float *tlm_model_logits(const tlm_model *m) { return tlm_model_buffer(m, TLM_B_LOGITS, -1); }
