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
 * (a product and an add per term, or one fused), whatever the tile. On
 * AVX-512 CPUs the full tiles are 16-float vectors (below). */
#ifndef TLM_BLOCK_GEMM_H
#define TLM_BLOCK_GEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "vec8.h"

enum { GEMM_MR = 6 };

/* The 8-float tile (block_gemm_tile.h): gemm_tile(c, ldc, mr, ncols,
 * ...) for ncols 16, 8 or 1..7. */
#define TILE_NAME gemm_tile
#define TILE_VEC v8f
#define TILE_W 8
#define TILE_SPLAT(x) V8_SPLAT(x)
#define TILE_ATTRS V8_ALWAYS_INLINE
#include "block_gemm_tile.h"

/* All n columns of mr rows: 16-column tiles, an 8-column one, then one
 * narrow tile for the last n % 8 columns. */
V8_ALWAYS_INLINE void gemm_rows_of(float *c, size_t ldc, const int mr, int n, const float *a, size_t ars, size_t aks,
                                   const float *b, size_t ldb, int k0, int k1, bool fresh, float scale) {
    int j = 0;
    for (; j + 16 <= n; j += 16) gemm_tile(c + j, ldc, mr, 16, a, ars, aks, b + j, ldb, k0, k1, fresh, scale);
    if (j + 8 <= n) gemm_tile(c + j, ldc, mr, 8, a, ars, aks, b + j, ldb, k0, k1, fresh, scale), j += 8;
    if (j < n) gemm_tile(c + j, ldc, mr, n - j, a, ars, aks, b + j, ldb, k0, k1, fresh, scale);
}

/* rows_of(c, ldc, MR, ...) with MR the constant equal to mr, 1 <= mr <=
 * GEMM_MR: each row count its own unrolled tile. */
#define GEMM_BY_ROWS(rows_of, c, ldc, mr, ...)           \
    do {                                                 \
        switch (mr) {                                    \
        case 6: rows_of(c, ldc, 6, __VA_ARGS__); break;  \
        case 5: rows_of(c, ldc, 5, __VA_ARGS__); break;  \
        case 4: rows_of(c, ldc, 4, __VA_ARGS__); break;  \
        case 3: rows_of(c, ldc, 3, __VA_ARGS__); break;  \
        case 2: rows_of(c, ldc, 2, __VA_ARGS__); break;  \
        default: rows_of(c, ldc, 1, __VA_ARGS__); break; \
        }                                                \
    } while (0)

/* Any 1 <= mr <= GEMM_MR rows. */
V8_ALWAYS_INLINE void gemm_rows_any(float *c, size_t ldc, int mr, int n, const float *a, size_t ars, size_t aks,
                                    const float *b, size_t ldb, int k0, int k1, bool fresh, float scale) {
    GEMM_BY_ROWS(gemm_rows_of, c, ldc, mr, n, a, ars, aks, b, ldb, k0, k1, fresh, scale);
}

/* ---- AVX-512: the same tiles, sixteen floats a vector ----
 *
 * Where the CPU has AVX-512 (x86-64-v4), full tiles are GEMM_MR rows x 32
 * or 16 columns of 16-float vectors, twice the columns per multiply-add of
 * the 8-float tiles; the last n % 16 columns take the 8-float tiles above.
 * An element's value is the same either way: its lane runs the same fused
 * multiply-adds over k in the same order, so attention gives the same bits
 * on AVX2 and AVX-512 CPUs (test_attention_kernels compares the two paths).
 * Two conditions keep that true. The kernel is picked by hand
 * (vec8.h's v8_cpu_level), the AVX2 one too, as vec8.h's kernels are. And the
 * 16-float tiles exist in optimised builds only: clang -O0 fuses their
 * multiply-adds but not the 8-float tiles'. */
#if defined(V8_X86_LEVELS) && defined(__OPTIMIZE__)
#define GEMM_HAVE_V16 1
#endif

#ifdef V8_X86_LEVELS
/* The 8-float kernel for AVX2 + FMA. */
V8_TARGET_V3 static void gemm_rows_v3(float *c, size_t ldc, int mr, int n, const float *a, size_t ars, size_t aks,
                                      const float *b, size_t ldb, int k0, int k1, bool fresh, float scale) {
    gemm_rows_any(c, ldc, mr, n, a, ars, aks, b, ldb, k0, k1, fresh, scale);
}
#endif

#ifdef GEMM_HAVE_V16
typedef float v16f __attribute__((vector_size(64)));

#define GEMM_V16 __attribute__((target("arch=x86-64-v4")))

/* The 16-float tile (block_gemm_tile.h), for ncols 32 or 16 only. */
#define TILE_NAME gemm_tile16
#define TILE_VEC v16f
#define TILE_W 16
#define TILE_SPLAT(x) ((v16f){(x), (x), (x), (x), (x), (x), (x), (x), (x), (x), (x), (x), (x), (x), (x), (x)})
#define TILE_ATTRS static inline __attribute__((always_inline)) GEMM_V16
#include "block_gemm_tile.h"

/* All n columns of mr rows: 32- and 16-column tiles, then the 8-float
 * tiles for the last n % 16. */
static inline __attribute__((always_inline)) GEMM_V16 void gemm16_rows_of(float *c, size_t ldc, const int mr, int n,
                                                                          const float *a, size_t ars, size_t aks,
                                                                          const float *b, size_t ldb, int k0, int k1,
                                                                          bool fresh, float scale) {
    int j = 0;
    for (; j + 32 <= n; j += 32) gemm_tile16(c + j, ldc, mr, 32, a, ars, aks, b + j, ldb, k0, k1, fresh, scale);
    if (j + 16 <= n) gemm_tile16(c + j, ldc, mr, 16, a, ars, aks, b + j, ldb, k0, k1, fresh, scale), j += 16;
    if (j < n) gemm_rows_of(c + j, ldc, mr, n - j, a, ars, aks, b + j, ldb, k0, k1, fresh, scale); /* < 16 left */
}

/* The kernel for AVX-512 CPUs. */
GEMM_V16 static void gemm_rows_v16(float *c, size_t ldc, int mr, int n, const float *a, size_t ars, size_t aks,
                                   const float *b, size_t ldb, int k0, int k1, bool fresh, float scale) {
    GEMM_BY_ROWS(gemm16_rows_of, c, ldc, mr, n, a, ars, aks, b, ldb, k0, k1, fresh, scale);
}

#endif

/* The 8-float kernel for the baseline (unfused: two SSE registers a
 * vector on x86-64). */
static void gemm_rows_base(float *c, size_t ldc, int mr, int n, const float *a, size_t ars, size_t aks, const float *b,
                           size_t ldb, int k0, int k1, bool fresh, float scale) {
    gemm_rows_any(c, ldc, mr, n, a, ars, aks, b, ldb, k0, k1, fresh, scale);
}

/* The kernel (the contract at the top): the widest the CPU has. */
static inline void gemm_rows(float *c, size_t ldc, int mr, int n, const float *a, size_t ars, size_t aks,
                             const float *b, size_t ldb, int k0, int k1, bool fresh, float scale) {
#ifdef V8_X86_LEVELS
    int level = v8_cpu_level();
#ifdef GEMM_HAVE_V16
    if (level >= 4) {
        gemm_rows_v16(c, ldc, mr, n, a, ars, aks, b, ldb, k0, k1, fresh, scale);
        return;
    }
#endif
    if (level >= 3) {
        gemm_rows_v3(c, ldc, mr, n, a, ars, aks, b, ldb, k0, k1, fresh, scale);
        return;
    }
#endif
    gemm_rows_base(c, ldc, mr, n, a, ars, aks, b, ldb, k0, k1, fresh, scale);
}

#endif
