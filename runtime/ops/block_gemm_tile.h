/* block_gemm.h's register tile, written once for every vector width:
 * block_gemm.h includes this file once per width (8 floats, and 16 on
 * AVX-512 CPUs) with
 *
 *   TILE_NAME      the function's name
 *   TILE_VEC       the vector type, of TILE_W floats
 *   TILE_SPLAT(x)  a TILE_VEC holding x in every lane
 *   TILE_ATTRS     the function's specifiers (static, inline, target)
 *
 * defined, and this file undefines them. No include guard, on purpose.
 *
 * One tile: mr rows (a constant after inlining) x ncols columns, 2 TILE_W
 * or TILE_W (constants after inlining: two vectors or one) or fewer (one
 * vector whose lanes past ncols are zeros going in and are dropped coming
 * out). The narrow tile is the same vector arithmetic as the full ones on
 * purpose: a scalar loop for the last columns would be free to differ
 * from it (at -O3 gcc vectorizes `s += a * b` over k as vector products
 * and in-order adds, unfused, where the tile fuses them), and the
 * attention tests ask every tile shape, and every width, for the same
 * bits. */
TILE_ATTRS void TILE_NAME(float *c, size_t ldc, const int mr, const int ncols, const float *a, size_t ars, size_t aks,
                          const float *b, size_t ldb, int k0, int k1, bool fresh, float scale) {
    const int nv = ncols > TILE_W ? 2 : 1;
    const size_t narrow_bytes = sizeof(float) * (size_t)(ncols < TILE_W ? ncols : TILE_W);
    TILE_VEC c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0};
    TILE_VEC c30 = {0}, c31 = {0}, c40 = {0}, c41 = {0}, c50 = {0}, c51 = {0};
#define TILE_ROW(i, load_or_store)                                \
    if (mr > i) {                                                 \
        load_or_store(c##i##0, c + i * ldc);                      \
        if (nv > 1) load_or_store(c##i##1, c + i * ldc + TILE_W); \
    }
#define TILE_LOAD(v, p)                                      \
    do {                                                     \
        if (ncols < TILE_W) memcpy(&(v), (p), narrow_bytes); \
        else memcpy(&(v), (p), sizeof(v));                   \
    } while (0)
    if (!fresh) {
        TILE_ROW(0, TILE_LOAD) TILE_ROW(1, TILE_LOAD) TILE_ROW(2, TILE_LOAD);
        TILE_ROW(3, TILE_LOAD) TILE_ROW(4, TILE_LOAD) TILE_ROW(5, TILE_LOAD);
    }
    for (int k = k0; k < k1; k++) {
        const float *bk = b + (size_t)k * ldb, *ak = a + (size_t)k * aks;
        TILE_VEC b0 = {0}, b1 = {0};
        TILE_LOAD(b0, bk);
        if (nv > 1) memcpy(&b1, bk + TILE_W, sizeof b1);
#define TILE_TERM(i)                                \
    if (mr > i) {                                   \
        const TILE_VEC x = TILE_SPLAT(ak[i * ars]); \
        c##i##0 += x * b0;                          \
        if (nv > 1) c##i##1 += x * b1;              \
    }
        TILE_TERM(0) TILE_TERM(1) TILE_TERM(2) TILE_TERM(3) TILE_TERM(4) TILE_TERM(5)
#undef TILE_TERM
    }
    if (scale != 1.0f) {
        const TILE_VEC s = TILE_SPLAT(scale);
        c00 *= s, c01 *= s, c10 *= s, c11 *= s, c20 *= s, c21 *= s;
        c30 *= s, c31 *= s, c40 *= s, c41 *= s, c50 *= s, c51 *= s;
    }
#define TILE_STORE(v, p)                                     \
    do {                                                     \
        if (ncols < TILE_W) memcpy((p), &(v), narrow_bytes); \
        else memcpy((p), &(v), sizeof(v));                   \
    } while (0)
    TILE_ROW(0, TILE_STORE) TILE_ROW(1, TILE_STORE) TILE_ROW(2, TILE_STORE);
    TILE_ROW(3, TILE_STORE) TILE_ROW(4, TILE_STORE) TILE_ROW(5, TILE_STORE);
#undef TILE_STORE
#undef TILE_LOAD
#undef TILE_ROW
}

#undef TILE_NAME
#undef TILE_VEC
#undef TILE_W
#undef TILE_SPLAT
#undef TILE_ATTRS
