#include "gemm_emit.h"

#include <stdio.h>

#include "vec_math.h"

#define MAX_MR GEMM_MAX_MR
#define MAX_NV 4
#define MAX_VL 16

gemm_blocking gemm_default_blocking(int vl, bool wide_tile) {
    gemm_blocking bk;
  /* AVX-512 has 32 vector registers: a 12 x 32 tile keeps 24 accumulators,
   * two B vectors and a broadcast live. With 16 registers (AVX2, SSE) the
   * classic 6 x 2-vector tile leaves 3 spare. */
    bk.mr = vl >= 16 ? 12 : 6;
    bk.nv = 2;
  /* A KC x NR panel of B is 32 KiB at KC=256, NR=32: it stays in L1. */
    bk.kc = 256;
  /* The wide tile, 6 x 4 vectors (6 x 64), also keeps 24 accumulators but
   * loads 10 vectors or broadcasts a step instead of 14, and at KC=128 its
   * B panel is 32 KiB as well. On an Intel Xeon with two 512-bit FMA units
   * (docs/performance.md) it ran bwd_data 7-18% and bwd_weight 8-9% faster
   * at d_model 1024 (fwd -4% to +7%), and tiny's training step 3-7% faster
   * at one thread. On an AMD Zen 5 (two 512-bit FMA units too) it ran all
   * three entries 4.1-4.8% faster at d_model 768, 1024 and 2048, and 0.7%
   * slower at 512, 0.7-1.4% at tiny's 256: cpu_target.wide_tile_from
   * chooses it by d_model there. On a Zen 4 (family 25, model 17: its
   * 512-bit operations run as two 256-bit halves) it ran the three entries
   * 1.6-3.5% faster (2.3-3.0% over all) at d_model 768, 1024 and 2048,
   * the same at 512 and 1.4% slower at 256, so Zen 4 takes the same rule;
   * the generic x86-64-v4 keeps the 12 x 32 tile. Intel's other AVX-512 parts follow
   * the one Xeon measured, unmeasured themselves: the client ones (Ice
   * Lake, Tiger Lake, Rocket Lake) have one 512-bit FMA unit, not two.
   * The tile and KC never change which products are summed in which order:
   * results are bit for bit the same (tests/codegen/test_cpu_blocking.c). */
    if (vl >= 16 && wide_tile) {
        bk.mr = 6;
        bk.nv = 4;
        bk.kc = 128;
    }
  /* A packed MC x KC block of A, 384 KiB, in L2 on the CPUs measured (1 MiB
   * on Zen 5; OpenBLAS's Haswell blocking, 768 x 384, is larger still).
   * Each packed B panel serves MC rows: with 120 rows, repacking B took
   * 3-8% of bwd_weight's time at one thread (bench/mlp_bench, both paths;
   * then bwd_weight also recomputed h while packing, once per block of
   * d_model rows). */
    bk.mc = bk.mr * (384 / bk.mr);
    return bk;
}

/* A tile's packed A panel: KC slots of MR floats, then room for what the
 * last slot's whole-vector stores spill (store_transposed, pack_a_cols). */
static long long a_panel_floats(int vl, const gemm_blocking *bk) { return (long long)bk->kc * bk->mr + vl * 4LL; }

/* The packed A block: MC / MR panels (MC is a multiple of MR). */
static long long a_pack_floats(int vl, const gemm_blocking *bk) { return bk->mc / bk->mr * a_panel_floats(vl, bk); }

/* The panel of the tile whose first row is block row t (a multiple of MR). */
static LLVMValueRef a_panel(ir *g, const gemm_blocking *bk, LLVMValueRef a_pack, LLVMValueRef t) {
    LLVMValueRef index = LLVMBuildSDiv(g->b, t, ir_i64(g, bk->mr), "");
    return ir_gep(g, a_pack, ir_mul(g, index, ir_i64(g, a_panel_floats(g->vl, bk))));
}

long long gemm_scratch_bytes(int vl, const gemm_blocking *bk) {
    return 4 * ((long long)bk->kc * bk->nv * vl + a_pack_floats(vl, bk));
}

gemm_scratch gemm_alloc_scratch(ir *g, const gemm_blocking *bk) {
    gemm_scratch s;
    s.b_pack = ir_stack_floats(g, (long long)bk->kc * bk->nv * g->vl, "b_pack");
    s.a_pack = ir_stack_floats(g, a_pack_floats(g->vl, bk), "a_pack");
    return s;
}

static LLVMValueRef param(ir *g, int i) { return LLVMGetParam(g->fn, (unsigned)i); }

/* Loads n vectors, all plain when `full` holds and all masked otherwise, with
 * one branch for the group. Plain loads matter where masked ones are slow or
 * scalarised (SSE2, vmaskmov on older AMD). */
static void load_group(ir *g, LLVMValueRef *addrs, int n, LLVMValueRef full, LLVMValueRef *masks, LLVMValueRef *out) {
    LLVMValueRef vars[2 * MAX_VL];
    for (int i = 0; i < n; i++) vars[i] = ir_var(g, g->vf32, "lv");
    ir_if s;
    ir_if_begin(g, &s, full);
    for (int i = 0; i < n; i++) LLVMBuildStore(g->b, ir_load_v(g, addrs[i]), vars[i]);
    ir_if_else(g, &s);
    for (int i = 0; i < n; i++) LLVMBuildStore(g->b, ir_load_v_masked(g, addrs[i], masks[i]), vars[i]);
    ir_if_end(g, &s);
    for (int i = 0; i < n; i++) out[i] = LLVMBuildLoad2(g->b, g->vf32, vars[i], "");
}

/* In-register transpose of vl x vl floats by log2(vl) rounds of perfect
 * shuffles: rows 2i and 2i+1 of a round interleave the low and high halves
 * of rows i and i + vl/2 of the previous round. */
static void transpose(ir *g, LLVMValueRef *rows) {
    int n = g->vl, lo[MAX_VL], hi[MAX_VL];
    for (int t = 0; t < n; t++) {
        lo[t] = (t % 2 ? n : 0) + t / 2;
        hi[t] = lo[t] + n / 2;
    }
    for (int width = 1; width < n; width *= 2) {
        LLVMValueRef out[MAX_VL];
        for (int i = 0; i < n / 2; i++) {
            out[2 * i] = ir_shuffle(g, rows[i], rows[i + n / 2], lo, n);
            out[2 * i + 1] = ir_shuffle(g, rows[i], rows[i + n / 2], hi, n);
        }
        for (int i = 0; i < n; i++) rows[i] = out[i];
    }
}

/* ---- packing helpers ----------------------------------------------------
 * A packed B panel is kcn rows of NR floats; columns past nrn are zero so
 * the tile's k loop never needs a mask. */

/* The packing routines read rows of A or B that are often in no cache: the
 * block's first touch of a [rows, width] activation or gradient, each row
 * a short run at a large stride that the hardware prefetchers pick up late
 * or not at all, and the packing is a phase of its own with no arithmetic
 * to hide the misses behind. So each asks for the run PACK_AHEAD rows on
 * (past the block's end it fetches the next block's rows, which are read
 * soon after). */
#define PACK_AHEAD 8
#define PACK_ROWS_AHEAD 64

/* Prefetches the lines of a run of at most `len` floats (NR, a compile-time
 * constant: a B panel's row, or a tile's row of C) at base + off, for
 * reading or (write) for writing: one hint per 16 floats, and one for the
 * last, as an unaligned run spans one line more. */
static void prefetch_run(ir *g, LLVMValueRef base, LLVMValueRef off, int len, int write) {
    for (int c = 0; c < len; c += 16) ir_prefetch(g, ir_gep(g, base, ir_add(g, off, ir_i64(g, c))), write);
    ir_prefetch(g, ir_gep(g, base, ir_add(g, off, ir_i64(g, len - 1))), write);
}

/* One vector of a packed row: lanes [c, c+vl) of the run at `from`. */
static LLVMValueRef pack_vector(ir *g, LLVMValueRef src, LLVMValueRef from, LLVMValueRef c, LLVMValueRef cols,
                                LLVMValueRef full) {
    LLVMValueRef mask = ir_lane_mask(g, cols, c), off = ir_add(g, from, c), val;
    LLVMValueRef addr = ir_gep(g, src, off);
    load_group(g, &addr, 1, full, &mask, &val);
    return val;
}

/* pack_rows(src, src_ld, rows, cols, dst): copies `rows` runs of `cols` <=
 * NR contiguous floats (src_ld apart) to dst (NR apart), zero-filling each
 * run up to NR. A whole panel (cols == NR, all but a matrix's
 * last) takes straight-line code with no masks: the general loop spent more
 * on its mask and branch per vector than on the copy. */
static LLVMValueRef emit_pack_rows(ir *g, int nr, LLVMTypeRef type) {
    LLVMValueRef fn = ir_begin_function(g, "tlm_pack_rows", type, 1);
    LLVMValueRef src = param(g, 0), src_ld = param(g, 1);
    LLVMValueRef rows = param(g, 2), cols = param(g, 3), dst = param(g, 4);
    LLVMValueRef whole = ir_eq(g, cols, ir_i64(g, nr)), yes = LLVMConstInt(g->i1, 1, 0);
    ir_if s;
    ir_if_begin(g, &s, whole);
    for (int path = 0; path < 2; path++) {
        if (path == 1) ir_if_else(g, &s);
        ir_loop lr, lc;
        LLVMValueRef r = ir_loop_begin(g, &lr, ir_i64(g, 0), rows, ir_i64(g, 1), "row");
        LLVMValueRef from = ir_mul(g, r, src_ld), to = ir_mul(g, r, ir_i64(g, nr));
      /* A row is a few cycles' work: fetch far enough ahead to cover a
       * miss to memory, but not past the panel's rows. */
        LLVMValueRef ahead_row = ir_min(g, ir_add(g, r, ir_i64(g, PACK_ROWS_AHEAD)), ir_sub(g, rows, ir_i64(g, 1)));
        LLVMValueRef ahead = ir_mul(g, ahead_row, src_ld);
        prefetch_run(g, src, ahead, nr, 0);
        if (path == 0) {
            for (int c = 0; c < nr; c += g->vl) {
                LLVMValueRef val = pack_vector(g, src, from, ir_i64(g, c), cols, yes);
                ir_store_v(g, val, ir_gep(g, dst, ir_add(g, to, ir_i64(g, c))));
            }
        } else {
            LLVMValueRef c = ir_loop_begin(g, &lc, ir_i64(g, 0), ir_i64(g, nr), ir_i64(g, g->vl), "col");
            LLVMValueRef full = LLVMBuildICmp(g->b, LLVMIntSLE, ir_add(g, c, ir_i64(g, g->vl)), cols, "");
            ir_store_v(g, pack_vector(g, src, from, c, cols, full), ir_gep(g, dst, ir_add(g, to, c)));
            ir_loop_end(g, &lc);
        }
        ir_loop_end(g, &lr);
    }
    ir_if_end(g, &s);
    LLVMBuildRetVoid(g->b);
    return fn;
}

/* The transpose of up to MAX_MR rows of 8 floats (row i = lanes k..k+7
 * of tile row i), stored as 8 slots of `rows` floats, `stride` apart from
 * dst: slot j holds lane j of every row. For AVX CPUs that split 256-bit
 * operations (ir.split_256): each quad of rows is transposed within the
 * 128-bit halves (two rounds of unpacks and shuffles, 2 micro-ops each
 * there) and its halves stored as four floats each, where transpose() ends
 * with lane-crossing vperm2f128s, 8 micro-ops each. The stores are
 * volatile so that LLVM keeps them four floats wide: it merges a slot's
 * adjacent halves (pack_b_nk's, or any whole quads') back into one
 * 8-float store assembled with vperm2f128. On the Zen 1 measured
 * (mlp_bench --versus, one thread) fwd gained 1-3%, bwd_data 1-2.5%. Stores
 * go in increasing addresses, slot by slot, so a last quad's lanes past
 * `rows` spill into the next slot before that slot's own stores overwrite
 * them (the packed A panel has room past its last slot). */
static void store_transposed_halves(ir *g, const LLVMValueRef *rows_in, int rows, LLVMValueRef dst, long long stride) {
    static const int lo[] = {0, 8, 1, 9, 4, 12, 5, 13}, hi[] = {2, 10, 3, 11, 6, 14, 7, 15};
    static const int pairs_lo[] = {0, 1, 8, 9, 4, 5, 12, 13}, pairs_hi[] = {2, 3, 10, 11, 6, 7, 14, 15};
    static const int half[2][4] = {{0, 1, 2, 3}, {4, 5, 6, 7}};
    int quads = (rows + 3) / 4;
    LLVMValueRef s[MAX_MR / 4][4];
    for (int q = 0; q < quads; q++) {
        LLVMValueRef r[4];
        for (int i = 0; i < 4; i++) r[i] = 4 * q + i < rows ? rows_in[4 * q + i] : ir_vf32(g, 0);
      /* t: pairs of rows interleaved; s[q][j]: lane j of the quad's four
       * rows in the low half, lane j + 4 in the high one */
        LLVMValueRef t0 = ir_shuffle(g, r[0], r[1], lo, 8), t1 = ir_shuffle(g, r[0], r[1], hi, 8);
        LLVMValueRef t2 = ir_shuffle(g, r[2], r[3], lo, 8), t3 = ir_shuffle(g, r[2], r[3], hi, 8);
        s[q][0] = ir_shuffle(g, t0, t2, pairs_lo, 8), s[q][1] = ir_shuffle(g, t0, t2, pairs_hi, 8);
        s[q][2] = ir_shuffle(g, t1, t3, pairs_lo, 8), s[q][3] = ir_shuffle(g, t1, t3, pairs_hi, 8);
    }
    for (int j = 0; j < 8; j++)
        for (int q = 0; q < quads; q++) {
            LLVMValueRef v = ir_shuffle(g, s[q][j % 4], s[q][j % 4], half[j / 4], 4);
            LLVMValueRef addr = ir_gep(g, dst, ir_i64(g, (long long)j * stride + 4 * q));
            LLVMValueRef st = LLVMBuildStore(g->b, v, addr);
            LLVMSetAlignment(st, 4);
            LLVMSetVolatile(st, 1);
        }
}

/* pack_b_nk(b = &B(kb,nb), ldb, kcn, nrn, dst): B(k,n) = b[n*ldb + k], an
 * nn.Linear weight used as W^T. Reads vl x vl blocks along k and transposes
 * them in registers. Rows past nrn read as zero; a k chunk past kcn is
 * masked, and the packed rows it fills beyond kcn are never read (they fit:
 * kc is a multiple of vl). */
static LLVMValueRef emit_pack_b_nk(ir *g, const gemm_blocking *bk, LLVMTypeRef type) {
    LLVMValueRef fn = ir_begin_function(g, "tlm_pack_b_nk", type, 1);
    int vl = g->vl, nr = bk->nv * vl;
    LLVMValueRef b = param(g, 0), ldb = param(g, 1), kcn = param(g, 2), nrn = param(g, 3);
    LLVMValueRef dst = param(g, 4);
    LLVMValueRef last_row = ir_sub(g, nrn, ir_i64(g, 1));
    ir_loop lv, lk;
    LLVMValueRef n0 = ir_loop_begin(g, &lv, ir_i64(g, 0), ir_i64(g, nr), ir_i64(g, vl), "n");
    LLVMValueRef kk = ir_loop_begin(g, &lk, ir_i64(g, 0), kcn, ir_i64(g, vl), "k");
    LLVMValueRef kfull = LLVMBuildICmp(g->b, LLVMIntSLE, ir_add(g, kk, ir_i64(g, vl)), kcn, "");
    LLVMValueRef kmask = ir_lane_mask(g, kcn, kk);
    LLVMValueRef addrs[MAX_VL], masks[MAX_VL], rows[MAX_VL];
    for (int t = 0; t < vl; t++) {
        LLVMValueRef row = ir_min(g, ir_add(g, n0, ir_i64(g, t)), last_row);
        addrs[t] = ir_gep(g, b, ir_add(g, ir_mul(g, row, ldb), kk));
        masks[t] = kmask;
    }
    load_group(g, addrs, vl, kfull, masks, rows);
    for (int t = 0; t < vl; t++) {
        LLVMValueRef valid = ir_lt(g, ir_add(g, n0, ir_i64(g, t)), nrn);
        rows[t] = LLVMBuildSelect(g->b, valid, rows[t], ir_vf32(g, 0), "");
    }
    if (g->split_256) {
        store_transposed_halves(g, rows, 8, ir_gep(g, dst, ir_add(g, ir_mul(g, kk, ir_i64(g, nr)), n0)), nr);
    } else {
        transpose(g, rows);
        for (int j = 0; j < vl; j++) {
            LLVMValueRef out = ir_add(g, ir_mul(g, ir_add(g, kk, ir_i64(g, j)), ir_i64(g, nr)), n0);
            ir_store_v(g, rows[j], ir_gep(g, dst, out));
        }
    }
    ir_loop_end(g, &lk);
    ir_loop_end(g, &lv);
    LLVMBuildRetVoid(g->b);
    return fn;
}

/* prefetch_rows(base, ld, r0, r1, cols): the lines of rows [r0, r1) of
 * `cols` floats each, ld apart. */
static LLVMValueRef emit_prefetch_rows(ir *g, LLVMTypeRef type) {
    LLVMValueRef fn = ir_begin_function(g, "tlm_prefetch_rows", type, 1);
    LLVMValueRef base = param(g, 0), ld = param(g, 1), r0 = param(g, 2), r1 = param(g, 3), cols = param(g, 4);
    ir_loop lr, lc;
    LLVMValueRef r = ir_loop_begin(g, &lr, r0, r1, ir_i64(g, 1), "row");
    LLVMValueRef row = ir_gep(g, base, ir_mul(g, r, ld));
    LLVMValueRef c = ir_loop_begin(g, &lc, ir_i64(g, 0), cols, ir_i64(g, 16), "line");
    ir_prefetch(g, ir_gep(g, row, c), 0);
    ir_loop_end(g, &lc);
    ir_prefetch(g, ir_gep(g, row, ir_sub(g, cols, ir_i64(g, 1))), 0);
    ir_loop_end(g, &lr);
    LLVMBuildRetVoid(g->b);
    return fn;
}

/* ---- packing A ------------------------------------------------------
 * An MC x KC block of A is packed tile by tile: the tile of block rows
 * [t, t + MR) has a panel of KC slots of MR floats (a_panel), A(t+i, k) at
 * [k*MR + i].
 * The register tile then broadcasts consecutive floats at constant offsets,
 * one stream, whatever A's strides were (a power-of-two stride read in
 * place maps every k step to the same L1 set). Rows past `rows` repeat row
 * rows-1: the tile's partial-row rule (below). */

static int row_groups(ir *g, const gemm_blocking *bk) { return (bk->mr + g->vl - 1) / g->vl; }

/* rows[i], lanes k..k+vl-1 of tile row i, stored as vl slots of MR floats
 * at dst_k: transposed vl x vl in registers, each output vector stored
 * whole, in increasing addresses (on split_256 CPUs in halves instead:
 * store_transposed_halves). Lanes past a slot's MR floats spill into
 * the next slot, which the next store overwrites, or past the last slot,
 * into the panel's spare room. */
static void store_transposed(ir *g, const gemm_blocking *bk, const LLVMValueRef *rows, LLVMValueRef dst_k) {
    if (g->split_256) {
        store_transposed_halves(g, rows, bk->mr, dst_k, bk->mr);
        return;
    }
    int vl = g->vl, mr = bk->mr, groups = row_groups(g, bk);
    LLVMValueRef t[MAX_MR][MAX_VL];
    for (int gi = 0; gi < groups; gi++) {
        for (int i = 0; i < vl; i++) t[gi][i] = gi * vl + i < mr ? rows[gi * vl + i] : ir_vf32(g, 0);
        transpose(g, t[gi]);
    }
    for (int j = 0; j < vl; j++)
        for (int gi = 0; gi < groups; gi++)
            ir_store_v(g, t[gi][j], ir_gep(g, dst_k, ir_i64(g, (long long)j * mr + gi * vl)));
}

/* pack_a_rows(src = &A(m0,kb), gate, src_ld, rows, kcn, dst): A with k
 * contiguous, A(m,k) = src[m*src_ld + k]; with kind >= 0 the activation of
 * (gate, src) instead. Reads vl along k from each of the MR rows (masked
 * past kcn) and transposes. */
static LLVMValueRef emit_pack_a_rows(ir *g, const gemm_blocking *bk, int kind, const char *name, LLVMTypeRef type) {
    LLVMValueRef fn = ir_begin_function(g, name, type, 1);
    LLVMValueRef src = param(g, 0), gate = param(g, 1), src_ld = param(g, 2);
    LLVMValueRef rows = param(g, 3), kcn = param(g, 4), dst = param(g, 5);
    int mr = bk->mr, vl = g->vl, swiglu = kind == TLM_MLP_SWIGLU;
    LLVMValueRef last_row = ir_sub(g, rows, ir_i64(g, 1));
    ir_loop lt, lk;
    LLVMValueRef t = ir_loop_begin(g, &lt, ir_i64(g, 0), rows, ir_i64(g, mr), "tile");
    LLVMValueRef dst_t = a_panel(g, bk, dst, t);
    LLVMValueRef kk = ir_loop_begin(g, &lk, ir_i64(g, 0), kcn, ir_i64(g, vl), "k");
    LLVMValueRef kfull = LLVMBuildICmp(g->b, LLVMIntSLE, ir_add(g, kk, ir_i64(g, vl)), kcn, "");
    LLVMValueRef kmask = ir_lane_mask(g, kcn, kk);
    LLVMValueRef addrs[2 * MAX_MR], masks[2 * MAX_MR], vals[2 * MAX_MR], rowv[MAX_MR];
    int n = 0;
    for (int i = 0; i < mr; i++) {
        LLVMValueRef r = ir_min(g, ir_add(g, t, ir_i64(g, i)), last_row);
        LLVMValueRef off = ir_add(g, ir_mul(g, r, src_ld), kk);
      /* The next tile's rows, a tile's packing ahead. */
        LLVMValueRef ahead = ir_add(g, ir_mul(g, ir_add(g, t, ir_i64(g, mr + i)), src_ld), kk);
        ir_prefetch(g, ir_gep(g, src, ahead), 0);
        if (swiglu) ir_prefetch(g, ir_gep(g, gate, ahead), 0);
        addrs[n] = ir_gep(g, src, off);
        masks[n++] = kmask;
        if (swiglu) {
            addrs[n] = ir_gep(g, gate, off);
            masks[n++] = kmask;
        }
    }
    load_group(g, addrs, n, kfull, masks, vals);
    for (int i = 0; i < mr; i++)
        rowv[i] = kind < 0 ? vals[i]
                  : swiglu ? vm_activation(g, TLM_MLP_SWIGLU, vals[2 * i + 1], vals[2 * i])
                           : vm_activation(g, (tlm_mlp)kind, NULL, vals[i]);
    store_transposed(g, bk, rowv, ir_gep(g, dst_t, ir_mul(g, kk, ir_i64(g, mr))));
    ir_loop_end(g, &lk);
    ir_loop_end(g, &lt);
    LLVMBuildRetVoid(g->b);
    return fn;
}

/* pack_a_cols(src = &A(m0,kb), gate (unused), src_ld, rows, kcn, dst): A
 * with m contiguous, A(m,k) = src[m + k*src_ld]. Each k step reads the
 * block's `rows` contiguous floats once and hands each tile its MR as
 * vl-lane vectors (lanes past `rows` masked off, then given row rows-1's
 * value); walking the tiles inside the k loop, not outside it, keeps the
 * reads sequential: with a large power-of-two src_ld every k step is a new
 * page, and a tile-at-a-time walk took one TLB miss per MR floats. */
static LLVMValueRef emit_pack_a_cols(ir *g, const gemm_blocking *bk, LLVMTypeRef type) {
    LLVMValueRef fn = ir_begin_function(g, "tlm_pack_a_cols", type, 1);
    LLVMValueRef src = param(g, 0), src_ld = param(g, 2);
    LLVMValueRef rows = param(g, 3), kcn = param(g, 4), dst = param(g, 5);
    int mr = bk->mr, vl = g->vl, groups = row_groups(g, bk);
    LLVMValueRef last_row = ir_sub(g, rows, ir_i64(g, 1));
    ir_loop lt, lk;
    LLVMValueRef k = ir_loop_begin(g, &lk, ir_i64(g, 0), kcn, ir_i64(g, 1), "k");
    LLVMValueRef col = ir_gep(g, src, ir_mul(g, k, src_ld));
    LLVMValueRef col_ahead = ir_gep(g, src, ir_mul(g, ir_add(g, k, ir_i64(g, PACK_AHEAD)), src_ld));
    LLVMValueRef repeat = ir_broadcast_load(g, ir_gep(g, col, last_row));
    LLVMValueRef slot = ir_mul(g, k, ir_i64(g, mr));
    LLVMValueRef t = ir_loop_begin(g, &lt, ir_i64(g, 0), rows, ir_i64(g, mr), "tile");
    LLVMValueRef dst_k = ir_gep(g, a_panel(g, bk, dst, t), slot);
    ir_prefetch(g, ir_gep(g, col_ahead, t), 0);
  /* Plain loads where all of a tile's lanes are rows of the block (the
   * lanes past MR read the next tile's rows, spilled and overwritten). */
    LLVMValueRef full = LLVMBuildICmp(g->b, LLVMIntSLE, ir_add(g, t, ir_i64(g, groups * vl)), rows, "");
    LLVMValueRef addrs[MAX_MR], valid[MAX_MR], v[MAX_MR];
    for (int gi = 0; gi < groups; gi++) {
        LLVMValueRef first = ir_add(g, t, ir_i64(g, gi * vl));
        addrs[gi] = ir_gep(g, col, first);
        valid[gi] = ir_lane_mask(g, rows, first);
    }
    load_group(g, addrs, groups, full, valid, v);
    for (int gi = 0; gi < groups; gi++) {
        LLVMValueRef w = LLVMBuildSelect(g->b, valid[gi], v[gi], repeat, "");
        ir_store_v(g, w, ir_gep(g, dst_k, ir_i64(g, gi * vl)));
    }
    ir_loop_end(g, &lt);
    ir_loop_end(g, &lk);
    LLVMBuildRetVoid(g->b);
    return fn;
}

/* ---- the register tile --------------------------------------------------
 * tile(a = the tile's packed A, b_pack, c = &C(mb,nb), ldc, mrn, nrn, kcn,
 *      load_c, last, pre_gate, pre_up, d_gate)
 * MR x NR of C over depth kcn. C starts from memory when load_c, else 0.
 * With a gradient epilogue and `last`, C then holds dh, which the tile turns
 * into the activation gradients (d_gate, and d_up into C); pre_gate, pre_up
 * and d_gate point at the tile's origin and share C's layout.
 *
 * Rows past mrn repeat row mrn-1: they load, compute and store exactly what
 * that row does, so partial tiles need neither branches nor other code. */

enum { EPI_NONE, EPI_SWIGLU_GRAD, EPI_GELU_GRAD };

typedef struct {
    ir *g;
    const gemm_blocking *bk;
    LLVMValueRef acc[MAX_MR][MAX_NV]; /* allocas; SROA turns them into registers */
    LLVMValueRef c_off[MAX_MR];       /* element offset of row i from c */
    LLVMValueRef masks[MAX_NV];
    LLVMValueRef c, pre_gate, pre_up, d_gate;
    tlm_mlp kind;
} tile;

static LLVMValueRef acc_get(tile *t, int i, int v) { return LLVMBuildLoad2(t->g->b, t->g->vf32, t->acc[i][v], ""); }
static LLVMValueRef c_index(tile *t, int i, int v) { return ir_add(t->g, t->c_off[i], ir_i64(t->g, v * t->g->vl)); }

static void store_v(ir *g, LLVMValueRef val, LLVMValueRef addr, int masked, LLVMValueRef mask) {
    if (masked) ir_store_v_masked(g, val, addr, mask);
    else ir_store_v(g, val, addr);
}

static void store_c(tile *t, int masked) {
    for (int i = 0; i < t->bk->mr; i++)
        for (int v = 0; v < t->bk->nv; v++)
            store_v(t->g, acc_get(t, i, v), ir_gep(t->g, t->c, c_index(t, i, v)), masked, t->masks[v]);
}

/* After the tile is stored, rows [0, mrn) of C hold dh: turn them into the
 * activation gradients in place (d_up into C, d_gate alongside), and leave
 * h = act(pre_gate, pre_up) over pre_up for bwd_weight's dW_down: the
 * activation is then taken once a backward, its exponential shared with
 * the gradient's, where bwd_weight took it again from two arrays (read
 * from memory) while packing. A loop over
 * the rows, reading dh back from L1, rather than straight-line code on the
 * accumulators: that would need more than the 32 registers and spill. Only
 * valid rows: a repeated row would read back d_up instead of dh. */
static void emit_grad_rows(tile *t, LLVMValueRef ldc, LLVMValueRef mrn, int masked) {
    ir *g = t->g;
    ir_loop l;
    LLVMValueRef i = ir_loop_begin(g, &l, ir_i64(g, 0), mrn, ir_i64(g, 1), "grad_row");
    LLVMValueRef row = ir_mul(g, i, ldc);
    for (int v = 0; v < t->bk->nv; v++) {
        LLVMValueRef off = ir_add(g, row, ir_i64(g, v * g->vl)), mask = t->masks[v];
        LLVMValueRef ptrs[3] = {ir_gep(g, t->c, off), ir_gep(g, t->pre_up, off), ir_gep(g, t->pre_gate, off)};
        LLVMValueRef vals[3];
        int n = t->kind == TLM_MLP_SWIGLU ? 3 : 2;
        for (int k = 0; k < n; k++) vals[k] = masked ? ir_load_v_masked(g, ptrs[k], mask) : ir_load_v(g, ptrs[k]);
        LLVMValueRef d_gate, d_up, h;
        vm_activation_grad(g, t->kind, n == 3 ? vals[2] : NULL, vals[1], vals[0], &d_gate, &d_up, &h);
        if (d_gate) store_v(g, d_gate, ir_gep(g, t->d_gate, off), masked, mask);
        store_v(g, d_up, ptrs[0], masked, mask);
        store_v(g, h, ptrs[1], masked, mask);
    }
    ir_loop_end(g, &l);
}

static void store_tile(tile *t, LLVMValueRef full, void (*store)(tile *, int)) {
    ir_if s;
    ir_if_begin(t->g, &s, full);
    store(t, 0);
    ir_if_else(t->g, &s);
    store(t, 1);
    ir_if_end(t->g, &s);
}

/* One k step of the tile: NR floats of the B panel, MR broadcasts of A,
 * MR x NV fused multiply-adds. */
static void emit_tile_step(tile *t, LLVMValueRef a, LLVMValueRef bp, LLVMValueRef k) {
    ir *g = t->g;
    int mr = t->bk->mr, nv = t->bk->nv, nr = nv * g->vl;
    LLVMValueRef bv[MAX_NV];
    LLVMValueRef b_row = ir_mul(g, k, ir_i64(g, nr));
    for (int v = 0; v < nv; v++) bv[v] = ir_load_v(g, ir_gep(g, bp, ir_add(g, b_row, ir_i64(g, v * g->vl))));
    LLVMValueRef a_k = ir_gep(g, a, ir_mul(g, k, ir_i64(g, mr)));
    for (int i = 0; i < mr; i++) {
        LLVMValueRef av = ir_broadcast_load(g, ir_gep(g, a_k, ir_i64(g, i)));
        for (int v = 0; v < nv; v++) LLVMBuildStore(g->b, ir_fma(g, av, bv[v], acc_get(t, i, v)), t->acc[i][v]);
    }
}

/* Steps k0 <= k < k1 of the tile, unrolled so that a trip of the loop
 * holds at least K_TRIP_FMAS multiply-adds: a trip's two pointer bumps,
 * count and branch are then a small share of its work. AVX2's 6 x 16 tile
 * (12 per step) gains 4.3% from two steps a trip, measured over tiny's
 * widths and all three entries (one thread, same-run A/B of the kernels;
 * four or eight steps gain no more); AVX-512's 12 x 32 tile (24 per step)
 * lost 1% with two, so it takes one. LLVM does not unroll this loop on its
 * own: the trip count is not known. */
enum { K_TRIP_FMAS = 24 };

static void emit_k_steps(tile *t, LLVMValueRef a, LLVMValueRef bp, LLVMValueRef k0, LLVMValueRef k1) {
    ir *g = t->g;
    int per_step = t->bk->mr * t->bk->nv;
    int unroll = per_step >= K_TRIP_FMAS ? 1 : (K_TRIP_FMAS + per_step - 1) / per_step;
    if (unroll > 1) {
        LLVMValueRef u = ir_i64(g, unroll);
        LLVMValueRef whole = ir_add(g, k0, ir_mul(g, LLVMBuildSDiv(g->b, ir_sub(g, k1, k0), u, ""), u));
        ir_loop lu;
        LLVMValueRef k = ir_loop_begin(g, &lu, k0, whole, u, "k_unrolled");
        for (int q = 0; q < unroll; q++) emit_tile_step(t, a, bp, ir_add(g, k, ir_i64(g, q)));
        ir_loop_end(g, &lu);
        k0 = whole;
    }
    ir_loop l;
    LLVMValueRef k = ir_loop_begin(g, &l, k0, k1, ir_i64(g, 1), "k");
    emit_tile_step(t, a, bp, k);
    ir_loop_end(g, &l);
}

/* Asks for the lines of `base` (C, or the epilogue's pre_gate, pre_up and
 * d_gate) in row `i` of the next tile down this panel, MR + i rows on. The
 * k loop takes over a thousand cycles, time enough for them to arrive.
 * Without it each tile began and ended waiting: C, reloaded every k block
 * (bwd_weight) or wider than L2 (dh's rows of `width` floats), came from L3
 * or memory, and the hardware prefetchers do not follow a walk down 384
 * rows several arrays at once. */
static void prefetch_row(tile *t, LLVMValueRef base, LLVMValueRef i, LLVMValueRef ldc, int write) {
    ir *g = t->g;
    LLVMValueRef row = ir_mul(g, ir_add(g, i, ir_i64(g, t->bk->mr)), ldc);
    prefetch_run(g, base, row, t->bk->nv * g->vl, write);
}

/* Row i's prefetches: C's, and the epilogue's arrays only in the last k
 * block, the one that reads them (a prefetch that misses holds a miss
 * buffer, and needless ones stalled the earlier blocks' tiles: d_model 1024
 * has four). */
static void prefetch_next_row(tile *t, LLVMValueRef i, LLVMValueRef ldc, LLVMValueRef last, int epilogue) {
    prefetch_row(t, t->c, i, ldc, 1);
    if (!epilogue) return;
    ir_if s;
    ir_if_begin(t->g, &s, last);
    prefetch_row(t, t->pre_up, i, ldc, 0);
    if (t->kind == TLM_MLP_SWIGLU) {
        prefetch_row(t, t->pre_gate, i, ldc, 0);
        prefetch_row(t, t->d_gate, i, ldc, 1);
    }
    ir_if_end(t->g, &s);
}

static LLVMValueRef emit_tile(ir *g, const gemm_blocking *bk, int epi, LLVMTypeRef type) {
    static const char *names[] = {"tlm_tile", "tlm_tile_swiglu_grad", "tlm_tile_gelu_grad"};
    LLVMValueRef fn = ir_begin_function(g, names[epi], type, 1);
    int mr = bk->mr, nv = bk->nv, nr = nv * g->vl;
    LLVMValueRef a = param(g, 0), bp = param(g, 1);
    LLVMValueRef ldc = param(g, 3), mrn = param(g, 4), nrn = param(g, 5), kcn = param(g, 6);
    LLVMValueRef load_c = param(g, 7), last = param(g, 8);
    tile t = {.g = g,
              .bk = bk,
              .c = param(g, 2),
              .pre_gate = param(g, 9),
              .pre_up = param(g, 10),
              .d_gate = param(g, 11),
              .kind = epi == EPI_GELU_GRAD ? TLM_MLP_GELU : TLM_MLP_SWIGLU};
    LLVMValueRef last_row = ir_sub(g, mrn, ir_i64(g, 1));
    for (int i = 0; i < mr; i++) {
        LLVMValueRef row = ir_min(g, ir_i64(g, i), last_row);
        t.c_off[i] = ir_mul(g, row, ldc);
        for (int v = 0; v < nv; v++) t.acc[i][v] = ir_var(g, g->vf32, "acc");
    }
    for (int v = 0; v < nv; v++) t.masks[v] = ir_lane_mask(g, nrn, ir_i64(g, v * g->vl));
    LLVMValueRef full = ir_eq(g, nrn, ir_i64(g, nr));

    ir_if init;
    ir_if_begin(g, &init, load_c);
    for (int i = 0; i < mr; i++) {
        LLVMValueRef addrs[MAX_NV], masks[MAX_NV], vals[MAX_NV];
        for (int v = 0; v < nv; v++) {
            addrs[v] = ir_gep(g, t.c, c_index(&t, i, v));
            masks[v] = t.masks[v];
        }
        load_group(g, addrs, nv, full, masks, vals);
        for (int v = 0; v < nv; v++) LLVMBuildStore(g->b, vals[v], t.acc[i][v]);
    }
    ir_if_else(g, &init);
    for (int i = 0; i < mr; i++)
        for (int v = 0; v < nv; v++) LLVMBuildStore(g->b, ir_vf32(g, 0), t.acc[i][v]);
    ir_if_end(g, &init);

  /* The k loop in MR stretches, each starting with one row's prefetches:
   * all of them at once, up to 96 lines on AVX-512, overran the core's
   * miss buffers and stalled it; spread out, each arrives in time. The
   * stretches are straight-line code, each with its own k loop: as one loop
   * over the rows (each trip's k bounds a division of kcn by MR), the Xeon
   * of docs/performance.md spent 8% of the tile at the stretches' starts,
   * and the three entries together ran 4.5-7% slower on its AVX2 path, 1%
   * on AVX-512 (mlp_bench --versus). The k steps and their order are the
   * same. */
    LLVMValueRef k0 = ir_i64(g, 0);
    for (int r = 0; r < mr; r++) {
        LLVMValueRef k1 = r + 1 == mr ? kcn : LLVMBuildSDiv(g->b, ir_mul(g, kcn, ir_i64(g, r + 1)), ir_i64(g, mr), "");
        prefetch_next_row(&t, ir_i64(g, r), ldc, last, epi != EPI_NONE);
        emit_k_steps(&t, a, bp, k0, k1);
        k0 = k1;
    }

    store_tile(&t, full, store_c);
    if (epi != EPI_NONE) {
        ir_if s, f;
        ir_if_begin(g, &s, last);
        ir_if_begin(g, &f, full);
        emit_grad_rows(&t, ldc, mrn, 0);
        ir_if_else(g, &f);
        emit_grad_rows(&t, ldc, mrn, 1);
        ir_if_end(g, &f);
        ir_if_end(g, &s);
    }
    LLVMBuildRetVoid(g->b);
    return fn;
}

void gemm_emit_helpers(ir *g, const gemm_blocking *bk, unsigned kinds, gemm_helpers *h) {
    LLVMTypeRef p = g->ptr, i = g->i64, b1 = g->i1;
    LLVMTypeRef tile_params[] = {p, p, p, i, i, i, i, b1, b1, p, p, p};
    LLVMTypeRef rows_params[] = {p, i, i, i, p};
    LLVMTypeRef a_params[] = {p, p, i, i, i, p};
    LLVMTypeRef nk_params[] = {p, i, i, i, p};
    h->tile_type = LLVMFunctionType(g->void_t, tile_params, 12, 0);
    h->pack_rows_type = LLVMFunctionType(g->void_t, rows_params, 5, 0);
    h->pack_a_type = LLVMFunctionType(g->void_t, a_params, 6, 0);
    h->pack_b_nk_type = LLVMFunctionType(g->void_t, nk_params, 5, 0);
    LLVMTypeRef prefetch_params[] = {p, i, i, i, i};
    h->prefetch_rows_type = LLVMFunctionType(g->void_t, prefetch_params, 5, 0);

    h->tile[EPI_NONE] = emit_tile(g, bk, EPI_NONE, h->tile_type);
    h->pack_rows = emit_pack_rows(g, bk->nv * g->vl, h->pack_rows_type);
    h->pack_a[0] = emit_pack_a_rows(g, bk, -1, "tlm_pack_a_rows", h->pack_a_type);
    h->pack_a_cols = emit_pack_a_cols(g, bk, h->pack_a_type);
    h->pack_b_nk = emit_pack_b_nk(g, bk, h->pack_b_nk_type);
    h->prefetch_rows = emit_prefetch_rows(g, h->prefetch_rows_type);
    static const char *act_a_names[] = {"tlm_pack_a_rows_swiglu", "tlm_pack_a_rows_gelu"};
    for (int kind = 0; kind < 2; kind++) {
        h->tile[1 + kind] = h->pack_a[1 + kind] = NULL;
        if (!(kinds & (1u << kind))) continue;
        h->tile[1 + kind] = emit_tile(g, bk, kind == TLM_MLP_SWIGLU ? EPI_SWIGLU_GRAD : EPI_GELU_GRAD, h->tile_type);
        h->pack_a[1 + kind] = emit_pack_a_rows(g, bk, kind, act_a_names[kind], h->pack_a_type);
    }
}

/* ---- the blocked loop nest, inline in the kernel ------------------------ */

static LLVMValueRef call(ir *g, LLVMTypeRef type, LLVMValueRef fn, LLVMValueRef *args, int n) {
    return LLVMBuildCall2(g->b, type, fn, args, (unsigned)n, "");
}

static LLVMValueRef or_null(ir *g, LLVMValueRef p) { return p ? p : LLVMConstNull(g->ptr); }

/* ceil(n / d) for d > 0 (n may be <= 0: empty ranges). */
static LLVMValueRef ceil_div(ir *g, LLVMValueRef n, LLVMValueRef d) {
    return LLVMBuildSDiv(g->b, ir_sub(g, ir_add(g, n, d), ir_i64(g, 1)), d, "");
}

/* The next B panel's source, which the panel's tiles prefetch a slice
 * each (next_panel_slice), so that panel is packed from cache: a weight or
 * activation wider than L2 is read from memory once per block of rows, and
 * packing is a phase with no arithmetic to hide its misses behind (at
 * d_model 1024 pack_b_nk and pack_rows took 5-7% of fwd and bwd_data). */
typedef struct {
    LLVMValueRef b, origin, ldb, rows, cols, per_tile, any;
} next_panel;

static next_panel next_panel_of(ir *g, const gemm_desc *d, LLVMValueRef kb, LLVMValueRef kcn, LLVMValueRef nb,
                                LLVMValueRef tiles, int nr) {
    next_panel p;
    LLVMValueRef next = ir_add(g, nb, ir_i64(g, nr));
    int nk = d->b_kind == GEMM_B_NK;
  /* NK: the panel is nr rows of kcn floats; KN: kcn rows of nr floats. */
    p.ldb = ir_i64(g, d->ldb);
    p.rows = nk ? ir_i64(g, nr) : kcn;
    p.cols = nk ? kcn : ir_i64(g, nr);
    p.origin = nk ? ir_add(g, ir_mul(g, next, p.ldb), kb) : ir_add(g, ir_mul(g, kb, p.ldb), next);
    p.per_tile = ceil_div(g, p.rows, tiles);
    p.any = ir_lt(g, next, d->n1);
    p.b = d->b;
    return p;
}

/* Tile ti's slice of the next panel's rows (none past the last panel). */
static void next_panel_slice(ir *g, const gemm_helpers *h, const next_panel *p, LLVMValueRef ti) {
    LLVMValueRef r0 = ir_mul(g, ti, p->per_tile);
    LLVMValueRef r1 = ir_min(g, ir_add(g, r0, p->per_tile), p->rows);
    ir_if s;
    ir_if_begin(g, &s, LLVMBuildAnd(g->b, p->any, ir_lt(g, r0, r1), ""));
    LLVMValueRef args[] = {ir_gep(g, p->b, p->origin), p->ldb, r0, r1, p->cols};
    call(g, h->prefetch_rows_type, h->prefetch_rows, args, 5);
    ir_if_end(g, &s);
}

void gemm_emit(ir *g, const gemm_blocking *bk, const gemm_helpers *h, const gemm_scratch *s, const gemm_desc *d) {
    int nr = bk->nv * g->vl;
    ir_loop lm, lk, ln, lt;

  /* Blocks of at most MC rows, as even as whole tiles allow: 256 rows make
   * 96+96+64, not 120+120+16 (whose last block would mostly be padding). */
    LLVMValueRef m = ir_sub(g, d->m1, d->m0), one = ir_i64(g, 1);
    LLVMValueRef blocks = ceil_div(g, m, ir_i64(g, bk->mc));
    blocks = LLVMBuildSelect(g->b, ir_lt(g, blocks, one), one, blocks, "");
    LLVMValueRef mr = ir_i64(g, bk->mr);
    LLVMValueRef mc = ir_mul(g, ceil_div(g, ceil_div(g, m, blocks), mr), mr);
    LLVMValueRef mc0 = ir_loop_begin(g, &lm, d->m0, d->m1, mc, "mblock");
    LLVMValueRef mc1 = ir_min(g, ir_add(g, mc0, mc), d->m1);
    LLVMValueRef mcn = ir_sub(g, mc1, mc0);

  /* k blocks as even as KC allows: K = 1040 makes 5 x 208, not 4 x 256 + 16,
   * whose last block would load and store every tile of C for 16 steps.
   * The sums keep their order (a tile carries C from block to block). */
    LLVMValueRef kblocks = ceil_div(g, d->k, ir_i64(g, bk->kc));
    kblocks = LLVMBuildSelect(g->b, ir_lt(g, kblocks, one), one, kblocks, "");
    LLVMValueRef kc = ceil_div(g, d->k, kblocks);
    LLVMValueRef kb = ir_loop_begin(g, &lk, ir_i64(g, 0), d->k, kc, "kblock");
    LLVMValueRef kcn = ir_min(g, kc, ir_sub(g, d->k, kb));
    LLVMValueRef first = ir_eq(g, kb, ir_i64(g, 0));
    LLVMValueRef last = ir_eq(g, ir_add(g, kb, kcn), d->k);
    LLVMValueRef load_c = d->c_kind == GEMM_C_ACCUMULATE ? LLVMConstInt(g->i1, 1, 0) : LLVMBuildNot(g->b, first, "");
    {
      /* The A block, packed once and read by every panel of B. */
        int k_contiguous = d->a_sk == 1;
        LLVMValueRef off = k_contiguous ? ir_add(g, ir_mul(g, mc0, ir_i64(g, d->a_sm)), kb)
                                        : ir_add(g, mc0, ir_mul(g, kb, ir_i64(g, d->a_sk)));
        LLVMValueRef pack = h->pack_a_cols;
        LLVMValueRef gate = LLVMConstNull(g->ptr);
        if (k_contiguous) {
            int which = d->a_kind == GEMM_A_ACTIVATION ? 1 + (int)d->kind : 0;
            pack = h->pack_a[which];
            if (which && d->kind == TLM_MLP_SWIGLU) gate = ir_gep(g, d->a_gate, off);
        }
        LLVMValueRef args[] = {
            ir_gep(g, d->a, off), gate, ir_i64(g, k_contiguous ? d->a_sm : d->a_sk), mcn, kcn, s->a_pack};
        call(g, h->pack_a_type, pack, args, 6);
    }

    LLVMValueRef nb = ir_loop_begin(g, &ln, d->n0, d->n1, ir_i64(g, nr), "npanel");
    LLVMValueRef nrn = ir_min(g, ir_i64(g, nr), ir_sub(g, d->n1, nb));
    LLVMValueRef ldb = ir_i64(g, d->ldb);
    if (d->b_kind == GEMM_B_NK) {
        LLVMValueRef args[] = {ir_gep(g, d->b, ir_add(g, ir_mul(g, nb, ldb), kb)), ldb, kcn, nrn, s->b_pack};
        call(g, h->pack_b_nk_type, h->pack_b_nk, args, 5);
    } else {
        LLVMValueRef args[] = {ir_gep(g, d->b, ir_add(g, ir_mul(g, kb, ldb), nb)), ldb, kcn, nrn, s->b_pack};
        call(g, h->pack_rows_type, h->pack_rows, args, 5);
    }

    next_panel next = next_panel_of(g, d, kb, kcn, nb, ceil_div(g, mcn, ir_i64(g, bk->mr)), nr);
    LLVMValueRef mb = ir_loop_begin(g, &lt, mc0, mc1, ir_i64(g, bk->mr), "mtile");
    next_panel_slice(g, h, &next, LLVMBuildSDiv(g->b, ir_sub(g, mb, mc0), ir_i64(g, bk->mr), ""));
    LLVMValueRef mrn = ir_min(g, ir_i64(g, bk->mr), ir_sub(g, mc1, mb));
    LLVMValueRef a_tile = a_panel(g, bk, s->a_pack, ir_sub(g, mb, mc0));
    LLVMValueRef c_off = ir_add(g, ir_mul(g, mb, ir_i64(g, d->ldc)), nb);
    LLVMValueRef pre_gate = NULL, pre_up = NULL, d_gate = NULL;
    int epi = EPI_NONE;
    if (d->grad_epilogue) {
        epi = d->kind == TLM_MLP_SWIGLU ? EPI_SWIGLU_GRAD : EPI_GELU_GRAD;
        pre_up = ir_gep(g, d->pre_up, c_off);
        if (d->kind == TLM_MLP_SWIGLU) {
            pre_gate = ir_gep(g, d->pre_gate, c_off);
            d_gate = ir_gep(g, d->d_gate, c_off);
        }
    }
    LLVMValueRef args[] = {a_tile,
                           s->b_pack,
                           ir_gep(g, d->c, c_off),
                           ir_i64(g, d->ldc),
                           mrn,
                           nrn,
                           kcn,
                           load_c,
                           last,
                           or_null(g, pre_gate),
                           or_null(g, pre_up),
                           or_null(g, d_gate)};
    call(g, h->tile_type, h->tile[epi], args, 12);

    ir_loop_end(g, &lt);
    ir_loop_end(g, &ln);
    ir_loop_end(g, &lk);
    ir_loop_end(g, &lm);
}
