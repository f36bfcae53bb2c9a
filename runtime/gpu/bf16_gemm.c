#include "bf16_gemm.h"

/* Each rounded operand starts on a 256-byte boundary, as cuBLASLt's fastest
 * kernels want (its plan cache keys on the alignment). */
enum { ALIGN_ELEMS = 128, BLOCK = 256 };

static int64_t round_up(int64_t n) { return (n + ALIGN_ELEMS - 1) / ALIGN_ELEMS * ALIGN_ELEMS; }

int64_t tlm_bf16_gemm_scratch_elems(int64_t widest, int items) { return (int64_t)items * round_up(widest); }

bool tlm_gpu_to_bf16(tlm_gpu *gpu, tlm_dptr dst, tlm_dptr src, int64_t n, tlm_err *err) {
    long long count = n;
    void *args[] = {&dst, &src, &count};
    return n <= 0 || tlm_gpu_launch(gpu, "tlm_to_bf16", tlm_gpu_blocks(n, BLOCK), BLOCK, args, err);
}

/* One operand: stored rows × cols (column-major, leading dimension ld),
 * batch items `stride` elements apart. */
typedef struct operand {
    tlm_dptr *ptr;
    int64_t rows, cols, ld, *stride;
    tlm_gemm_type *type;
} operand;

static int64_t extent(const operand *o) { return o->rows && o->cols ? (o->cols - 1) * o->ld + o->rows : 0; }

/* Points o at bf16 data: the weights' copy, or a rounded copy in the
 * scratch from *used on. An operand described as bf16 is an activation a
 * kernel stored in bf16 already: read as it is. */
static bool lower(tlm_gpu *gpu, const tlm_bf16_gemm *b, const operand *o, int64_t batch, int64_t *used, tlm_err *err) {
    if (*o->type == TLM_GEMM_BF16) return true;
    const int64_t span = extent(o), items = *o->stride ? batch : 1;
    const int64_t last = (items - 1) * *o->stride + span; /* elements from the first to the end */
    *o->type = TLM_GEMM_BF16;
    tlm_dptr p = *o->ptr, w0 = b->weights, w1 = b->weights + (tlm_dptr)b->weight_floats * sizeof(float);
    if (p >= w0 && p < w1) {
        if ((p - w0) % sizeof(float) || p + (tlm_dptr)last * sizeof(float) > w1)
            return tlm_fail(err, "a GEMM operand straddles the parameter block");
        *o->ptr = b->weights_bf16 + (p - w0) / 2;
        return true;
    }
    const int64_t item_elems = round_up(span);
    if (*used + items * item_elems > b->scratch_elems)
        return tlm_fail(err, "the bf16 GEMM scratch holds %lld elements; this GEMM needs %lld more",
                        (long long)b->scratch_elems, (long long)(*used + items * item_elems - b->scratch_elems));
    tlm_dptr dst = b->scratch + (tlm_dptr)*used * 2;
    for (int64_t i = 0; i < items; i++)
        if (!tlm_gpu_to_bf16(gpu, dst + (tlm_dptr)(i * item_elems) * 2, p + (tlm_dptr)(i * *o->stride) * sizeof(float),
                             span, err))
            return false;
    *o->ptr = dst;
    if (*o->stride) *o->stride = item_elems;
    *used += items * item_elems;
    return true;
}

bool tlm_gpu_gemm_bf16(tlm_gpu *gpu, const tlm_bf16_gemm *b, const tlm_gemm *g, tlm_err *err) {
    /* the shape checked as the bf16 GEMM it becomes (A and B may differ in
     * type until lowered; the device checks the lowered one again) */
    tlm_gemm shape = *g;
    shape.a_type = shape.b_type = TLM_GEMM_BF16;
    const char *problem = tlm_gemm_problem(&shape);
    if (problem) return tlm_fail(err, "%s", problem);
    tlm_gemm l = *g;
    operand a = {&l.a, l.trans_a ? l.k : l.m, l.trans_a ? l.m : l.k, l.lda, &l.stride_a, &l.a_type};
    operand bb = {&l.b, l.trans_b ? l.n : l.k, l.trans_b ? l.k : l.n, l.ldb, &l.stride_b, &l.b_type};
    int64_t used = 0;
    return lower(gpu, b, &a, l.batch, &used, err) && lower(gpu, b, &bb, l.batch, &used, err) &&
           tlm_device_gemm(gpu->dev, &l, err);
}
