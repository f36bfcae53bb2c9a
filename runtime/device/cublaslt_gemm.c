/* tlm_gemm through cuBLASLt, with a plan per shape (cublaslt_gemm.h). */
#include "cublaslt_gemm.h"

#ifdef TLM_HAVE_CUDA

#include <stdlib.h>
#include <string.h>

#include "cuda_toolkit.h"

/* What a plan depends on. Zero-filled before it is set (it is compared
 * with memcmp). Without C, C's fields are D's (cuBLASLt reads no C when
 * beta is 0, but still wants a layout for it). */
typedef struct gemm_shape {
    int64_t m, n, k, lda, ldb, ldc, ldd, batch, stride_a, stride_b, stride_c, stride_d;
    int32_t trans_a, trans_b, a_type, b_type, cd_type;
    uint32_t align_a, align_b, align_c, align_d;
    uint32_t reserved; /* zero: the struct has no padding, so memcmp compares values only */
} gemm_shape;
_Static_assert(sizeof(gemm_shape) == 12 * 8 + 10 * 4, "gemm_shape has padding, which memcmp would compare");

typedef struct gemm_plan {
    gemm_shape shape;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, c, d;
    cublasLtMatmulAlgo_t algo;
} gemm_plan;

struct tlm_cublaslt {
    const tlm_cuda_driver *drv;
    const tlm_cublaslt_api *lt;
    cublasLtHandle_t handle;
    CUdeviceptr workspace;
    gemm_plan *plans;
    size_t nplans, cap;
};

static bool blas_ok(const tlm_cublaslt_api *lt, cublasStatus_t s, tlm_err *err, const char *call) {
    if (s == CUBLAS_STATUS_SUCCESS) return true;
    return tlm_fail(err, "%s: %s (%s)", call, lt->cublasLtGetStatusName(s), lt->cublasLtGetStatusString(s));
}

tlm_cublaslt *tlm_cublaslt_open(const tlm_cuda_driver *drv, tlm_err *err) {
    const tlm_cublaslt_api *lt = tlm_cublaslt_api_get(err);
    if (!lt) return NULL;
    tlm_cublaslt *b = calloc(1, sizeof *b);
    if (!b) {
        tlm_fail(err, "out of memory");
        return NULL;
    }
    b->drv = drv;
    b->lt = lt;
    cublasStatus_t s = lt->cublasLtCreate(&b->handle);
    if (s != CUBLAS_STATUS_SUCCESS) {
        size_t v = lt->cublasLtGetVersion();
        tlm_fail(err, "cuBLASLt %zu.%zu could not start with the driver of CUDA %d.%d: %s (%s)", v / 10000,
                 v / 100 % 100, drv->version / 1000, drv->version % 1000 / 10, lt->cublasLtGetStatusName(s),
                 lt->cublasLtGetStatusString(s));
        free(b);
        return NULL;
    }
    if (!tlm_cuda_ok(drv, drv->cuMemAlloc(&b->workspace, TLM_CUBLASLT_WORKSPACE_BYTES), err,
                     "cuMemAlloc(cuBLASLt's %zu-byte workspace)", TLM_CUBLASLT_WORKSPACE_BYTES)) {
        lt->cublasLtDestroy(b->handle);
        free(b);
        return NULL;
    }
    return b;
}

static void destroy_plan(const tlm_cublaslt_api *lt, gemm_plan *p) {
    if (p->a) lt->cublasLtMatrixLayoutDestroy(p->a);
    if (p->b) lt->cublasLtMatrixLayoutDestroy(p->b);
    if (p->c) lt->cublasLtMatrixLayoutDestroy(p->c);
    if (p->d) lt->cublasLtMatrixLayoutDestroy(p->d);
    if (p->op) lt->cublasLtMatmulDescDestroy(p->op);
}

void tlm_cublaslt_close(tlm_cublaslt *b) {
    if (!b) return;
    for (size_t i = 0; i < b->nplans; i++) destroy_plan(b->lt, &b->plans[i]);
    free(b->plans);
    b->drv->cuMemFree(b->workspace);
    b->lt->cublasLtDestroy(b->handle);
    free(b);
}

static cudaDataType cuda_type(tlm_gemm_type t) { return t == TLM_GEMM_BF16 ? CUDA_R_16BF : CUDA_R_32F; }
static int64_t type_bytes(tlm_gemm_type t) { return t == TLM_GEMM_BF16 ? 2 : 4; }

/* The largest power of two up to 256 dividing the address of every batch
 * member: cuBLASLt's fastest kernels want 16-byte aligned operands, and an
 * algorithm chosen for an aligned call must not run on a misaligned one. */
static uint32_t alignment(tlm_dptr p, int64_t batch, int64_t stride, tlm_gemm_type t) {
    uint64_t bits = p | 256u;
    if (batch > 1) bits |= (uint64_t)(stride * type_bytes(t));
    return (uint32_t)(bits & (~bits + 1));
}

static gemm_shape shape_of(const tlm_gemm *g) {
    gemm_shape s;
    memset(&s, 0, sizeof s);
    bool has_c = g->c != 0, batched = g->batch > 1;
    s.m = g->m, s.n = g->n, s.k = g->k;
    s.lda = g->lda, s.ldb = g->ldb, s.ldd = g->ldd;
    s.ldc = has_c ? g->ldc : g->ldd;
    s.batch = g->batch;
    if (batched) {
        s.stride_a = g->stride_a, s.stride_b = g->stride_b, s.stride_d = g->stride_d;
        s.stride_c = has_c ? g->stride_c : g->stride_d;
    }
    s.trans_a = g->trans_a, s.trans_b = g->trans_b;
    s.a_type = g->a_type, s.b_type = g->b_type, s.cd_type = g->cd_type;
    s.align_a = alignment(g->a, g->batch, g->stride_a, g->a_type);
    s.align_b = alignment(g->b, g->batch, g->stride_b, g->b_type);
    s.align_d = alignment(g->d, g->batch, g->stride_d, g->cd_type);
    s.align_c = has_c ? alignment(g->c, g->batch, g->stride_c, g->cd_type) : s.align_d;
    return s;
}

static bool make_layout(const tlm_cublaslt_api *lt, cublasLtMatrixLayout_t *l, tlm_gemm_type t, int64_t rows,
                        int64_t cols, int64_t ld, int64_t batch, int64_t stride, tlm_err *err) {
    if (!blas_ok(lt, lt->cublasLtMatrixLayoutCreate(l, cuda_type(t), (uint64_t)rows, (uint64_t)cols, ld), err,
                 "cublasLtMatrixLayoutCreate"))
        return false;
    if (batch <= 1) return true;
    int32_t count = (int32_t)batch;
    return blas_ok(lt,
                   lt->cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
                   err, "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)") &&
           blas_ok(lt,
                   lt->cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                        sizeof stride),
                   err, "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)");
}

static bool choose_algorithm(tlm_cublaslt *b, gemm_plan *p, tlm_err *err) {
    const gemm_shape *s = &p->shape;
    cublasLtMatmulPreference_t pref = NULL;
    if (!blas_ok(b->lt, b->lt->cublasLtMatmulPreferenceCreate(&pref), err, "cublasLtMatmulPreferenceCreate"))
        return false;
    uint64_t workspace = TLM_CUBLASLT_WORKSPACE_BYTES;
    struct {
        cublasLtMatmulPreferenceAttributes_t attr;
        const void *value;
        size_t size;
    } prefs[] = {
        {CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &s->align_a, sizeof s->align_a},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &s->align_b, sizeof s->align_b},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &s->align_c, sizeof s->align_c},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &s->align_d, sizeof s->align_d},
    };
    bool ok = true;
    for (size_t i = 0; ok && i < sizeof prefs / sizeof prefs[0]; i++)
        ok = blas_ok(b->lt,
                     b->lt->cublasLtMatmulPreferenceSetAttribute(pref, prefs[i].attr, prefs[i].value, prefs[i].size),
                     err, "cublasLtMatmulPreferenceSetAttribute");
    cublasLtMatmulHeuristicResult_t result;
    memset(&result, 0, sizeof result);
    int found = 0;
    if (ok)
        ok = blas_ok(
            b->lt,
            b->lt->cublasLtMatmulAlgoGetHeuristic(b->handle, p->op, p->a, p->b, p->c, p->d, pref, 1, &result, &found),
            err, "cublasLtMatmulAlgoGetHeuristic");
    b->lt->cublasLtMatmulPreferenceDestroy(pref);
    if (!ok) return false;
    if (found < 1 || result.state != CUBLAS_STATUS_SUCCESS)
        return tlm_fail(err,
                        "cuBLASLt has no algorithm for this GEMM (m %lld, n %lld, k %lld, batch %lld, types %s/%s/%s, "
                        "alignment %u/%u/%u/%u bytes)",
                        (long long)s->m, (long long)s->n, (long long)s->k, (long long)s->batch,
                        s->a_type == TLM_GEMM_BF16 ? "bf16" : "f32", s->b_type == TLM_GEMM_BF16 ? "bf16" : "f32",
                        s->cd_type == TLM_GEMM_BF16 ? "bf16" : "f32", s->align_a, s->align_b, s->align_c, s->align_d);
    p->algo = result.algo;
    return true;
}

static bool make_plan(tlm_cublaslt *b, const gemm_shape *s, gemm_plan *p, tlm_err *err) {
    memset(p, 0, sizeof *p);
    p->shape = *s;
    int32_t ta = s->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = s->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    bool ok = blas_ok(b->lt, b->lt->cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F), err,
                      "cublasLtMatmulDescCreate") &&
              blas_ok(b->lt, b->lt->cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta),
                      err, "cublasLtMatmulDescSetAttribute(TRANSA)") &&
              blas_ok(b->lt, b->lt->cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb),
                      err, "cublasLtMatmulDescSetAttribute(TRANSB)");
    /* Stored shapes: A is m×k, or k×m when transposed; B is k×n, or n×k. */
    ok = ok && make_layout(b->lt, &p->a, (tlm_gemm_type)s->a_type, s->trans_a ? s->k : s->m, s->trans_a ? s->m : s->k,
                           s->lda, s->batch, s->stride_a, err);
    ok = ok && make_layout(b->lt, &p->b, (tlm_gemm_type)s->b_type, s->trans_b ? s->n : s->k, s->trans_b ? s->k : s->n,
                           s->ldb, s->batch, s->stride_b, err);
    ok = ok && make_layout(b->lt, &p->c, (tlm_gemm_type)s->cd_type, s->m, s->n, s->ldc, s->batch, s->stride_c, err);
    ok = ok && make_layout(b->lt, &p->d, (tlm_gemm_type)s->cd_type, s->m, s->n, s->ldd, s->batch, s->stride_d, err);
    ok = ok && choose_algorithm(b, p, err);
    if (!ok) destroy_plan(b->lt, p);
    return ok;
}

/* The plan for s, made on first use. Linear search: a model has a few
 * hundred shapes at most, and a compare is one memcmp. */
static const gemm_plan *plan_for(tlm_cublaslt *b, const gemm_shape *s, tlm_err *err) {
    for (size_t i = 0; i < b->nplans; i++)
        if (memcmp(&b->plans[i].shape, s, sizeof *s) == 0) return &b->plans[i];
    if (b->nplans == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        gemm_plan *grown = realloc(b->plans, cap * sizeof *grown);
        if (!grown) {
            tlm_fail(err, "out of memory for cuBLASLt's plans");
            return NULL;
        }
        b->plans = grown, b->cap = cap;
    }
    if (!make_plan(b, s, &b->plans[b->nplans], err)) return NULL;
    return &b->plans[b->nplans++];
}

bool tlm_cublaslt_gemm(tlm_cublaslt *b, const tlm_gemm *g, CUstream stream, tlm_err *err) {
    /* cuBLASLt computes in place only when C and D are described alike. */
    if (g->c && g->c == g->d && (g->ldc != g->ldd || (g->batch > 1 && g->stride_c != g->stride_d)))
        return tlm_fail(err, "a GEMM with C = D needs ldc = ldd and equal batch strides (ldc %lld, ldd %lld)",
                        (long long)g->ldc, (long long)g->ldd);
    gemm_shape s = shape_of(g);
    const gemm_plan *p = plan_for(b, &s, err);
    if (!p) return false;
    float alpha = g->alpha, beta = g->c ? g->beta : 0.0f;
    tlm_dptr c = g->c ? g->c : g->d;
    cublasStatus_t st = b->lt->cublasLtMatmul(b->handle, p->op, &alpha, (const void *)(uintptr_t)g->a, p->a,
                                              (const void *)(uintptr_t)g->b, p->b, &beta, (const void *)(uintptr_t)c,
                                              p->c, (void *)(uintptr_t)g->d, p->d, &p->algo,
                                              (void *)(uintptr_t)b->workspace, TLM_CUBLASLT_WORKSPACE_BYTES, stream);
    if (st == CUBLAS_STATUS_SUCCESS) return true;
    return tlm_fail(err, "cublasLtMatmul (m %lld, n %lld, k %lld, batch %lld): %s (%s)", (long long)g->m,
                    (long long)g->n, (long long)g->k, (long long)g->batch, b->lt->cublasLtGetStatusName(st),
                    b->lt->cublasLtGetStatusString(st));
}

#else
/* Built without the CUDA toolkit: no cuBLASLt (device_cuda.c says so). */
typedef int tlm_cublaslt_gemm_unused;
#endif
