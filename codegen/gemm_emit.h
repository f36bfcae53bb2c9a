/* Emits one blocked, register-tiled GEMM, C[m,n] (+)= sum_k A(m,k) B(k,n),
 * into the function being built (GotoBLAS/BLIS structure):
 *
 *   for each block of MC rows of C
 *     for each block of KC along k
 *       pack the A block (MC x KC; applying the MLP activation if asked;
 *       only when A is stored with k contiguous)
 *       for each panel of NR columns
 *         pack B panel (KC x NR, zero padded) into a stack buffer
 *         for each MR rows: MR x NR register tile, k loop of broadcast-FMAs
 *
 * The block loops, with the spec's sizes as constants, are emitted inline.
 * The register tile and the packing routines only need strides, so they are
 * emitted once per module as internal functions (gemm_helpers) and shared by
 * every spec: that keeps LLVM's work, hence codegen time, per spec small.
 *
 * Tails need no separate code: a partial row tile repeats its last valid row
 * (recomputing and re-storing identical values to memory it owns), and a
 * partial column panel uses masked loads/stores. */
#ifndef TLM_GEMM_EMIT_H
#define TLM_GEMM_EMIT_H

#include "codegen.h"
#include "ir_builder.h"

/* The most rows of C a tile may hold (TLM_CODEGEN_BLOCKING's mr). */
enum { GEMM_MAX_MR = 16 };

/* Register tile and cache blocking for one vector width. */
typedef struct {
    int mr; /* rows of C held in registers */
    int nv; /* vectors across the tile: NR = nv * vl columns */
    int kc; /* depth of a packed B panel (multiple of vl) */
    int mc; /* rows of C per block, i.e. of a packed A block */
} gemm_blocking;

/* The blocking for vl-float vectors; wide_tile: the 6 x 4-vector tile
 * (llvm_emit.c chooses it by cpu_target.wide_tile_from and d_model). */
gemm_blocking gemm_default_blocking(int vl, bool wide_tile);

typedef enum {
    GEMM_A_PLAIN,      /* A(m,k) = a[m*a_sm + k*a_sk]; a_sm or a_sk is 1 */
    GEMM_A_ACTIVATION, /* A(m,k) = act(a_gate[m*a_sm+k], a[m*a_sm+k]), a_sk = 1 */
} gemm_a_kind;

typedef enum {
    GEMM_B_KN, /* B(k,n) = b[k*ldb + n] */
    GEMM_B_NK, /* B(k,n) = b[n*ldb + k]: an nn.Linear weight used as W^T */
} gemm_b_kind;

typedef enum {
    GEMM_C_WRITE,      /* C = A B */
    GEMM_C_ACCUMULATE, /* C += A B */
} gemm_c_kind;

typedef struct {
    tlm_mlp kind; /* which activation GEMM_A_ACTIVATION and the epilogue apply */
  /* C rows [m0, m1), columns [n0, n1), depth k: i64 values. */
    LLVMValueRef m0, m1, n0, n1, k;
    gemm_a_kind a_kind;
    LLVMValueRef a, a_gate;
    long long a_sm, a_sk;
    gemm_b_kind b_kind;
    LLVMValueRef b;
    long long ldb;
    gemm_c_kind c_kind;
    LLVMValueRef c;
    long long ldc;
  /* Optional epilogue after the last k block: C holds dh; the activation
   * gradient is taken against pre_gate/pre_up (same layout as C) and written
   * to d_gate (SwiGLU only) and to C itself as d_up, and h = act(pre_gate,
   * pre_up) over pre_up. */
    int grad_epilogue;
    LLVMValueRef pre_gate, pre_up, d_gate;
} gemm_desc;

/* The shared internal functions; see gemm_emit_helpers. */
typedef struct {
    LLVMValueRef tile[3];      /* by epilogue: none, SwiGLU grad, GELU grad */
    LLVMValueRef pack_rows;    /* B with n contiguous: a plain copy */
    LLVMValueRef pack_a[3];    /* A with k contiguous: plain, SwiGLU, GELU activation */
    LLVMValueRef pack_a_cols;  /* A with m contiguous */
    LLVMValueRef pack_b_nk;
    LLVMValueRef prefetch_rows; /* a slice of the next B panel's source */
    LLVMTypeRef tile_type, pack_rows_type, pack_a_type, pack_b_nk_type, prefetch_rows_type;
} gemm_helpers;

/* Emits the helpers for the given kinds (bit 1 << kind set in kinds). Call
 * before building any kernel function. */
void gemm_emit_helpers(ir *g, const gemm_blocking *bk, unsigned kinds, gemm_helpers *h);

/* Stack buffers, allocated once per function and shared by its GEMMs. */
typedef struct {
    LLVMValueRef a_pack, b_pack;
} gemm_scratch;

gemm_scratch gemm_alloc_scratch(ir *g, const gemm_blocking *bk);
long long gemm_scratch_bytes(int vl, const gemm_blocking *bk);

void gemm_emit(ir *g, const gemm_blocking *bk, const gemm_helpers *h, const gemm_scratch *s, const gemm_desc *d);

#endif
