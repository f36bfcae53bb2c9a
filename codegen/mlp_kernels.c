#include "mlp_kernels.h"

#include <string.h>

typedef struct {
    ir *g;
    const gemm_blocking *bk;
    const gemm_helpers *h;
    const tlm_kernel_spec *s;
} mlp;

static LLVMValueRef begin_kernel(mlp *m, const char *entry, int n_i64, int n_ptr, const char **names) {
    ir *g = m->g;
    LLVMTypeRef params[16];
    for (int i = 0; i < n_i64 + n_ptr; i++) params[i] = i < n_i64 ? g->i64 : g->ptr;
    char sym[128];
    tlm_kernel_symbol(m->s, entry, sym, sizeof sym);
    LLVMTypeRef type = LLVMFunctionType(g->void_t, params, (unsigned)(n_i64 + n_ptr), 0);
    LLVMValueRef fn = ir_begin_function(g, sym, type, 0);
  /* A kernel is block loops with constant bounds around calls of the shared
   * helpers (gemm_emit.h), where all the time goes. Optimising those loops
   * measurably bought nothing, while it cost ~3x the codegen time: at O3
   * LLVM unrolls and unswitches them into many copies, and even under
   * optsize the per-function pass work dominated for 24-width models. */
    ir_add_function_attr(g, "optnone");
    ir_add_function_attr(g, "noinline");
    for (int i = 0; i < n_i64 + n_ptr; i++)
        LLVMSetValueName2(LLVMGetParam(fn, (unsigned)i), names[i], strlen(names[i]));
    return fn;
}

static LLVMValueRef param(mlp *m, int i) { return LLVMGetParam(m->g->fn, (unsigned)i); }
static LLVMValueRef lit(mlp *m, long long v) { return ir_i64(m->g, v); }
static int swiglu(mlp *m) { return m->s->kind == TLM_MLP_SWIGLU; }

/* Row blocks at this level keep pre_gate/pre_up (fwd) or d_pre_* (bwd_data)
 * of a block in cache between the GEMMs that produce and consume them. */
static LLVMValueRef row_block_begin(mlp *m, ir_loop *l, LLVMValueRef r0, LLVMValueRef r1, LLVMValueRef *block_end) {
    long long rows = m->bk->mc;
    LLVMValueRef b0 = ir_loop_begin(m->g, l, r0, r1, lit(m, rows), "rowblock");
    *block_end = ir_min(m->g, ir_add(m->g, b0, lit(m, rows)), r1);
    return b0;
}

/* pre_gate = x Wg^T, pre_up = x Wu^T, out += act(pre_gate, pre_up) Wd^T. */
static void emit_fwd(mlp *m) {
    static const char *names[] = {"r0", "r1", "x", "w_gate", "w_up", "w_down", "pre_gate", "pre_up", "out"};
    ir *g = m->g;
    begin_kernel(m, TLM_ENTRY_FWD, 2, 7, names);
    long long D = m->s->d_model, W = m->s->width;
    gemm_scratch scratch = gemm_alloc_scratch(g, m->bk);
    LLVMValueRef x = param(m, 2), wg = param(m, 3), wu = param(m, 4), wd = param(m, 5);
    LLVMValueRef pg = param(m, 6), pu = param(m, 7), out = param(m, 8);

    ir_loop rows;
    LLVMValueRef b1, b0 = row_block_begin(m, &rows, param(m, 0), param(m, 1), &b1);
    gemm_desc up = {.kind = m->s->kind,
                    .m0 = b0,
                    .m1 = b1,
                    .n0 = lit(m, 0),
                    .n1 = lit(m, W),
                    .k = lit(m, D),
                    .a_kind = GEMM_A_PLAIN,
                    .a = x,
                    .a_sm = D,
                    .a_sk = 1,
                    .b_kind = GEMM_B_NK,
                    .b = wu,
                    .ldb = D,
                    .c_kind = GEMM_C_WRITE,
                    .c = pu,
                    .ldc = W};
    if (swiglu(m)) {
        gemm_desc gate = up;
        gate.b = wg;
        gate.c = pg;
        gemm_emit(g, m->bk, m->h, &scratch, &gate);
    }
    gemm_emit(g, m->bk, m->h, &scratch, &up);
    gemm_desc down = {.kind = m->s->kind,
                      .m0 = b0,
                      .m1 = b1,
                      .n0 = lit(m, 0),
                      .n1 = lit(m, D),
                      .k = lit(m, W),
                      .a_kind = GEMM_A_ACTIVATION,
                      .a = pu,
                      .a_gate = pg,
                      .a_sm = W,
                      .a_sk = 1,
                      .b_kind = GEMM_B_NK,
                      .b = wd,
                      .ldb = W,
                      .c_kind = GEMM_C_ACCUMULATE,
                      .c = out,
                      .ldc = D};
    gemm_emit(g, m->bk, m->h, &scratch, &down);
    ir_loop_end(g, &rows);
    LLVMBuildRetVoid(g->b);
}

/* dh = dout Wd (held in d_pre_up until its epilogue turns it into the
 * activation gradients, and pre_up into h), then dx = d_pre_gate Wg +
 * d_pre_up Wu. */
static void emit_bwd_data(mlp *m) {
    static const char *names[] = {"r0",       "r1",     "x",    "w_gate",     "w_up",     "w_down",
                                  "pre_gate", "pre_up", "dout", "d_pre_gate", "d_pre_up", "dx"};
    ir *g = m->g;
    begin_kernel(m, TLM_ENTRY_BWD_DATA, 2, 10, names);
    long long D = m->s->d_model, W = m->s->width;
    gemm_scratch scratch = gemm_alloc_scratch(g, m->bk);
    LLVMValueRef wg = param(m, 3), wu = param(m, 4), wd = param(m, 5);
    LLVMValueRef pg = param(m, 6), pu = param(m, 7), dout = param(m, 8);
    LLVMValueRef dpg = param(m, 9), dpu = param(m, 10), dx = param(m, 11);

    ir_loop rows;
    LLVMValueRef b1, b0 = row_block_begin(m, &rows, param(m, 0), param(m, 1), &b1);
    gemm_desc dh = {.kind = m->s->kind,
                    .m0 = b0,
                    .m1 = b1,
                    .n0 = lit(m, 0),
                    .n1 = lit(m, W),
                    .k = lit(m, D),
                    .a_kind = GEMM_A_PLAIN,
                    .a = dout,
                    .a_sm = D,
                    .a_sk = 1,
                    .b_kind = GEMM_B_KN,
                    .b = wd,
                    .ldb = W,
                    .c_kind = GEMM_C_WRITE,
                    .c = dpu,
                    .ldc = W,
                    .grad_epilogue = 1,
                    .pre_gate = pg,
                    .pre_up = pu,
                    .d_gate = dpg};
    gemm_emit(g, m->bk, m->h, &scratch, &dh);
    gemm_desc dx_up = {.kind = m->s->kind,
                       .m0 = b0,
                       .m1 = b1,
                       .n0 = lit(m, 0),
                       .n1 = lit(m, D),
                       .k = lit(m, W),
                       .a_kind = GEMM_A_PLAIN,
                       .a = dpu,
                       .a_sm = W,
                       .a_sk = 1,
                       .b_kind = GEMM_B_KN,
                       .b = wu,
                       .ldb = D,
                       .c_kind = GEMM_C_WRITE,
                       .c = dx,
                       .ldc = D};
    gemm_emit(g, m->bk, m->h, &scratch, &dx_up);
    if (swiglu(m)) {
        gemm_desc dx_gate = dx_up;
        dx_gate.a = dpg;
        dx_gate.b = wg;
        dx_gate.c_kind = GEMM_C_ACCUMULATE;
        gemm_emit(g, m->bk, m->h, &scratch, &dx_gate);
    }
    ir_loop_end(g, &rows);
    LLVMBuildRetVoid(g->b);
}

/* dWg[j,:] += d_pre_gate[:,j]^T x, dWu likewise, dWd[:,j] += dout^T h[:,j]
 * with h in pre_up (bwd_data's), for j in [j0, j1): each call owns whole
 * rows of dWg/dWu and whole columns of dWd. */
static void emit_bwd_weight(mlp *m) {
    static const char *names[] = {"rows", "j0",         "j1",       "x",       "pre_gate", "pre_up",
                                  "dout", "d_pre_gate", "d_pre_up", "dw_gate", "dw_up",    "dw_down"};
    ir *g = m->g;
    begin_kernel(m, TLM_ENTRY_BWD_WEIGHT, 3, 9, names);
    long long D = m->s->d_model, W = m->s->width;
    gemm_scratch scratch = gemm_alloc_scratch(g, m->bk);
    LLVMValueRef rows = param(m, 0), j0 = param(m, 1), j1 = param(m, 2);
  /* pre_gate (param 4) is not read: pre_up holds h, left by bwd_data */
    LLVMValueRef x = param(m, 3), h = param(m, 5), dout = param(m, 6);
    LLVMValueRef dpg = param(m, 7), dpu = param(m, 8);
    LLVMValueRef dwg = param(m, 9), dwu = param(m, 10), dwd = param(m, 11);

    gemm_desc dw_up = {.kind = m->s->kind,
                       .m0 = j0,
                       .m1 = j1,
                       .n0 = lit(m, 0),
                       .n1 = lit(m, D),
                       .k = rows,
                       .a_kind = GEMM_A_PLAIN,
                       .a = dpu,
                       .a_sm = 1,
                       .a_sk = W,
                       .b_kind = GEMM_B_KN,
                       .b = x,
                       .ldb = D,
                       .c_kind = GEMM_C_ACCUMULATE,
                       .c = dwu,
                       .ldc = D};
    if (swiglu(m)) {
        gemm_desc dw_gate = dw_up;
        dw_gate.a = dpg;
        dw_gate.c = dwg;
        gemm_emit(g, m->bk, m->h, &scratch, &dw_gate);
    }
    gemm_emit(g, m->bk, m->h, &scratch, &dw_up);
    gemm_desc dw_down = {.kind = m->s->kind,
                         .m0 = lit(m, 0),
                         .m1 = lit(m, D),
                         .n0 = j0,
                         .n1 = j1,
                         .k = rows,
                         .a_kind = GEMM_A_PLAIN,
                         .a = dout,
                         .a_sm = 1,
                         .a_sk = D,
                         .b_kind = GEMM_B_KN,
                         .b = h,
                         .ldb = W,
                         .c_kind = GEMM_C_ACCUMULATE,
                         .c = dwd,
                         .ldc = W};
    gemm_emit(g, m->bk, m->h, &scratch, &dw_down);
    LLVMBuildRetVoid(g->b);
}

void mlp_emit_kernels(ir *g, const gemm_blocking *bk, const gemm_helpers *h, const tlm_kernel_spec *s) {
    mlp m = {g, bk, h, s};
    emit_fwd(&m);
    emit_bwd_data(&m);
    emit_bwd_weight(&m);
}
