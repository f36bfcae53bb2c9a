/* The register-blocked product kernel of attention.c's block products
 * (S = Q K^T, dP = dY V^T, P V, dS K, P^T dY, dS^T Q):
 *
 *   c_rj = scale * (c0_rj + sum_{k0 <= k < k1} a_rk b_kj)   r < mr <= GEMM_MR, j < n
 *
 * with c_rj at c[r*ldc + j], a_rk at a[r*ars + k*aks] (any layout: a row of
 * P, or a column of it for P^T), b_kj at b[k*ldb + j] (rows contiguous) and
 * c0 = 0 (fresh) or c's value before.
 *
 * A tile of GEMM_MR rows x 16 columns lives in twelve vector registers
 * across the k terms: each term loads two vectors of b's row and
 * broadcasts GEMM_MR scalars of a, 12 fused multiply-adds for 8 loads
 * (a rank-1 row kernel does one load per multiply-add). Then 8 columns,
 * then the last n % 8 in one narrow tile. Every element's sum runs over k in ascending order
 * (a product and an add per term, or one fused), whatever the tile. */
#ifndef TLM_BLOCK_GEMM_H
#define TLM_BLOCK_GEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "vec8.h"

enum { GEMM_MR = 6 };

/* One tile: mr rows (a constant after inlining) x ncols columns, 16 or 8
 * (constants after inlining: two vectors or one) or 1..7 (one vector whose
 * lanes past ncols are zeros going in and are dropped coming out). The
 * narrow tile is the same vector arithmetic as the full ones on purpose: a
 * scalar loop for the last columns would be free to differ from it (at -O3
 * gcc vectorizes `s += a * b` over k as vector products and in-order
 * adds, unfused, where the tile fuses them), and the attention tests ask
 * every tile shape for the same bits. */
V8_ALWAYS_INLINE void gemm_tile(float *c, size_t ldc, const int mr, const int ncols, const float *a, size_t ars,
                                size_t aks, const float *b, size_t ldb, int k0, int k1, bool fresh, float scale) {
    const int nv = ncols > 8 ? 2 : 1;
    const size_t narrow_bytes = sizeof(float) * (size_t)(ncols < 8 ? ncols : 8);
    v8f c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0};
    v8f c30 = {0}, c31 = {0}, c40 = {0}, c41 = {0}, c50 = {0}, c51 = {0};
#define GEMM_ROW(i, load_or_store)                           \
    if (mr > i) {                                            \
        load_or_store(c##i##0, c + i * ldc);                 \
        if (nv > 1) load_or_store(c##i##1, c + i * ldc + 8); \
    }
#define GEMM_LOAD(v, p)                                 \
    do {                                                \
        if (ncols < 8) memcpy(&(v), (p), narrow_bytes); \
        else V8_LOAD(v, p);                             \
    } while (0)
    if (!fresh) {
        GEMM_ROW(0, GEMM_LOAD) GEMM_ROW(1, GEMM_LOAD) GEMM_ROW(2, GEMM_LOAD);
        GEMM_ROW(3, GEMM_LOAD) GEMM_ROW(4, GEMM_LOAD) GEMM_ROW(5, GEMM_LOAD);
    }
    for (int k = k0; k < k1; k++) {
        const float *bk = b + (size_t)k * ldb, *ak = a + (size_t)k * aks;
        v8f b0 = {0}, b1 = {0};
        GEMM_LOAD(b0, bk);
        if (nv > 1) V8_LOAD(b1, bk + 8);
#define GEMM_TERM(i)                         \
    if (mr > i) {                            \
        const v8f x = V8_SPLAT(ak[i * ars]); \
        c##i##0 += x * b0;                   \
        if (nv > 1) c##i##1 += x * b1;       \
    }
        GEMM_TERM(0) GEMM_TERM(1) GEMM_TERM(2) GEMM_TERM(3) GEMM_TERM(4) GEMM_TERM(5)
#undef GEMM_TERM
    }
    if (scale != 1.0f) {
        const v8f s = V8_SPLAT(scale);
        c00 *= s, c01 *= s, c10 *= s, c11 *= s, c20 *= s, c21 *= s;
        c30 *= s, c31 *= s, c40 *= s, c41 *= s, c50 *= s, c51 *= s;
    }
#define GEMM_STORE(v, p)                                \
    do {                                                \
        if (ncols < 8) memcpy((p), &(v), narrow_bytes); \
        else V8_STORE(p, v);                            \
    } while (0)
    GEMM_ROW(0, GEMM_STORE) GEMM_ROW(1, GEMM_STORE) GEMM_ROW(2, GEMM_STORE);
    GEMM_ROW(3, GEMM_STORE) GEMM_ROW(4, GEMM_STORE) GEMM_ROW(5, GEMM_STORE);
#undef GEMM_STORE
#undef GEMM_LOAD
#undef GEMM_ROW
}

/* All n columns of mr rows: 16-column tiles, an 8-column one, then one
 * narrow tile for the last n % 8 columns. */
V8_ALWAYS_INLINE void gemm_rows_of(float *c, size_t ldc, const int mr, int n, const float *a, size_t ars, size_t aks,
                                   const float *b, size_t ldb, int k0, int k1, bool fresh, float scale) {
    int j = 0;
    for (; j + 16 <= n; j += 16) gemm_tile(c + j, ldc, mr, 16, a, ars, aks, b + j, ldb, k0, k1, fresh, scale);
    if (j + 8 <= n) gemm_tile(c + j, ldc, mr, 8, a, ars, aks, b + j, ldb, k0, k1, fresh, scale), j += 8;
    if (j < n) gemm_tile(c + j, ldc, mr, n - j, a, ars, aks, b + j, ldb, k0, k1, fresh, scale);
}

/* Any 1 <= mr <= GEMM_MR rows, each count its own unrolled tile. */
V8_ALWAYS_INLINE void gemm_rows_any(float *c, size_t ldc, int mr, int n, const float *a, size_t ars, size_t aks,
                                    const float *b, size_t ldb, int k0, int k1, bool fresh, float scale) {
    switch (mr) {
    case 6: gemm_rows_of(c, ldc, 6, n, a, ars, aks, b, ldb, k0, k1, fresh, scale); break;
    case 5: gemm_rows_of(c, ldc, 5, n, a, ars, aks, b, ldb, k0, k1, fresh, scale); break;
    case 4: gemm_rows_of(c, ldc, 4, n, a, ars, aks, b, ldb, k0, k1, fresh, scale); break;
    case 3: gemm_rows_of(c, ldc, 3, n, a, ars, aks, b, ldb, k0, k1, fresh, scale); break;
    case 2: gemm_rows_of(c, ldc, 2, n, a, ars, aks, b, ldb, k0, k1, fresh, scale); break;
    default: gemm_rows_of(c, ldc, 1, n, a, ars, aks, b, ldb, k0, k1, fresh, scale); break;
    }
}

/* The kernel (the contract at the top), compiled for the CPU. */
V8_CLONES static void gemm_rows(float *c, size_t ldc, int mr, int n, const float *a, size_t ars, size_t aks,
                                const float *b, size_t ldb, int k0, int k1, bool fresh, float scale) {
    gemm_rows_any(c, ldc, mr, n, a, ars, aks, b, ldb, k0, k1, fresh, scale);
}

#endif
