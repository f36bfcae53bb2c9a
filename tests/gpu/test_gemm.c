/* gpu.gemm: the GEMM description (tlm_gemm_problem), the plain GEMM of
 * gemm_reference.c against a float64 formula (every transpose combination,
 * odd sizes, batches with strides, alpha and beta, no C, C equal to D, bf16
 * operands and bf16 D, interleaved batch entries), and the same cases
 * through tlm_device_gemm on the emulated device. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "gemm_reference.h"
#include "test_util.h" /* CHECK, test_finish */

static void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fprintf(stderr, "test_gemm: out of memory\n");
        exit(2);
    }
    return p;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
/* uniform in [-1, 1) */
static float uniform(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((double)(rng_state >> 11) / 4503599627370496.0 - 1.0);
}

static float bits_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void test_bf16(void) {
    CHECK(tlm_f32_to_bf16(1.0f) == 0x3f80, "1.0");
    CHECK(tlm_bf16_to_f32(0x3f80) == 1.0f, "1.0 back");
    CHECK(tlm_bf16_to_f32(0xc040) == -3.0f, "-3.0");
    /* ties go to even: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7 */
    CHECK(tlm_f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80, "tie down to even: %04x", tlm_f32_to_bf16(1.0f + 0x1p-8f));
    CHECK(tlm_f32_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3f82, "tie up to even: %04x", tlm_f32_to_bf16(1.0f + 3 * 0x1p-8f));
    CHECK(tlm_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f) == 0x3f81, "above the tie: %04x",
          tlm_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f));
    CHECK(tlm_f32_to_bf16(-(1.0f + 0x1p-8f + 0x1p-20f)) == 0xbf81, "negative");
    CHECK(tlm_f32_to_bf16(bits_float(0x7f7fffffu)) == 0x7f80, "FLT_MAX rounds to infinity");
    CHECK(tlm_f32_to_bf16(INFINITY) == 0x7f80 && tlm_f32_to_bf16(-INFINITY) == 0xff80, "infinities");
    CHECK(isnan(tlm_bf16_to_f32(tlm_f32_to_bf16(bits_float(0x7f800001u)))), "a NaN whose payload is low stays NaN");
    CHECK(isnan(tlm_bf16_to_f32(tlm_f32_to_bf16(NAN))), "NaN");
    CHECK(tlm_f32_to_bf16(bits_float(0x00000001u)) == 0x0000, "the smallest subnormal rounds to 0");
}

/* ---- the description's checks ---- */

static tlm_gemm valid(void) {
    return (tlm_gemm){.m = 4,
                      .n = 3,
                      .k = 2,
                      .a = 256,
                      .b = 512,
                      .c = 0,
                      .d = 1024,
                      .lda = 4,
                      .ldb = 2,
                      .ldc = 4,
                      .ldd = 4,
                      .a_type = TLM_GEMM_F32,
                      .b_type = TLM_GEMM_F32,
                      .cd_type = TLM_GEMM_F32,
                      .batch = 1,
                      .alpha = 1};
}

static void refused(tlm_gemm g, const char *needle, const char *what) {
    const char *p = tlm_gemm_problem(&g);
    CHECK(p != NULL, "%s: accepted", what);
    if (p) CHECK(strstr(p, needle) != NULL, "%s: '%s' lacks '%s'", what, p, needle);
}

static void accepted(tlm_gemm g, const char *what) {
    const char *p = tlm_gemm_problem(&g);
    CHECK(p == NULL, "%s: refused: %s", what, p);
}

static void test_problems(void) {
    tlm_gemm g = valid();
    accepted(g, "the base case");
    CHECK(tlm_gemm_problem(NULL) != NULL, "NULL");

    g = valid(), g.m = 0, refused(g, "at least 1", "m = 0");
    g = valid(), g.n = -1, refused(g, "at least 1", "n < 0");
    g = valid(), g.k = 0, refused(g, "at least 1", "k = 0");
    g = valid(), g.batch = 0, refused(g, "batch", "batch = 0");
    g = valid(), g.batch = (int64_t)1 << 31, g.stride_d = 16, refused(g, "2^31", "batch >= 2^31");

    g = valid(), g.a_type = TLM_GEMM_BF16, refused(g, "share a type", "bf16 A, f32 B");
    g = valid(), g.cd_type = TLM_GEMM_BF16, refused(g, "unsupported", "f32 A, B with bf16 D");
    g = valid(), g.cd_type = (tlm_gemm_type)7, refused(g, "neither", "an unknown type");
    g = valid(), g.a_type = g.b_type = TLM_GEMM_BF16, accepted(g, "bf16, bf16 -> f32");
    g.cd_type = TLM_GEMM_BF16, accepted(g, "bf16, bf16 -> bf16");

    g = valid(), g.a = 0, refused(g, "not 0", "A = 0");
    g = valid(), g.b = 0, refused(g, "not 0", "B = 0");
    g = valid(), g.d = 0, refused(g, "not 0", "D = 0");

    g = valid(), g.lda = 3, refused(g, "lda", "lda < m");
    g = valid(), g.trans_a = true, g.lda = 2, accepted(g, "trans_a with lda = k");
    g = valid(), g.trans_a = true, g.lda = 1, refused(g, "lda", "trans_a with lda < k");
    g = valid(), g.ldb = 1, refused(g, "ldb", "ldb < k");
    g = valid(), g.trans_b = true, g.ldb = 2, refused(g, "ldb", "trans_b with ldb < n");
    g = valid(), g.trans_b = true, g.ldb = 3, accepted(g, "trans_b with ldb = n");
    g = valid(), g.ldd = 3, refused(g, "ldd", "ldd < m");
    g = valid(), g.c = 2048, g.ldc = 3, refused(g, "ldc", "ldc < m");
    g = valid(), g.ldc = 0, accepted(g, "no C: ldc is not looked at");

    g = valid(), g.stride_b = -1, refused(g, "negative", "a negative stride");
    g = valid(), g.batch = 2, g.stride_d = 0, refused(g, "overlap", "two D entries at one place");
    g = valid(), g.batch = 2, g.stride_d = 11, refused(g, "overlap", "D entries one element short");
    g = valid(), g.batch = 2, g.stride_d = 12, accepted(g, "D entries back to back");
    g = valid(), g.batch = 2, g.stride_a = g.stride_b = 0, g.stride_d = 12, accepted(g, "A and B shared by the batch");
    /* interleaved entries: 2 matrices of 4 rows side by side in 8-row columns */
    g = valid(), g.batch = 2, g.ldd = 8, g.stride_d = 4, accepted(g, "interleaved D entries");
    g = valid(), g.batch = 2, g.ldd = 8, g.stride_d = 3, refused(g, "overlap", "interleaved, a row short");
    g = valid(), g.batch = 2, g.ldd = 8, g.stride_d = 5,
    refused(g, "overlap", "interleaved, wrapping into the next column");
    /* entries 0 and 1 meet nowhere, entries 0 and 2 do */
    g = valid(), g.m = 1, g.n = 2, g.ldd = 4, g.batch = 3, g.stride_d = 2, refused(g, "overlap", "entries 0 and 2");
    g.batch = 2, accepted(g, "entries 0 and 1 alone");

    g = valid(), g.c = g.d, accepted(g, "C equal to D");
    g.beta = 1, g.ldc = 5, g.ldd = 5, accepted(g, "C equal to D with one ld");
    g.ldc = 4, refused(g, "C equals D", "C equal to D with another ldc");
    g = valid(), g.c = g.d, g.batch = 2, g.stride_d = 12, g.stride_c = 13, refused(g, "C equals D", "another stride_c");

    g = valid(), g.a = 258, refused(g, "aligned", "A off its float alignment");
    g = valid(), g.a_type = g.b_type = TLM_GEMM_BF16, g.a = 258, accepted(g, "bf16 A at an even address");
    g.d = 1026, refused(g, "aligned", "f32 D off its alignment");

    g = valid(), g.m = g.ldd = g.lda = (int64_t)1 << 40, g.n = (int64_t)1 << 30, refused(g, "overflows", "D too large");
    g = valid(), g.batch = 3, g.stride_a = INT64_MAX / 2, g.stride_d = 12, refused(g, "overflows", "a huge stride");
}

/* ---- products against float64 ---- */

typedef struct gemm_case {
    bool ta, tb;
    int64_t m, n, k, batch;
    tlm_gemm_type ab, cd;
    float alpha, beta;
    int c_mode;           /* 0: no C, 1: C of its own, 2: C is D */
    int pad;              /* added to each leading dimension and stride */
    bool interleave_d;    /* D entries side by side in one column (ldd = batch·m, stride_d = m) */
    bool shared_b;        /* stride_b = 0 */
} gemm_case;

static size_t type_size(tlm_gemm_type t) { return t == TLM_GEMM_BF16 ? 2 : 4; }

static float get(const void *p, tlm_gemm_type t, int64_t e) {
    return t == TLM_GEMM_BF16 ? tlm_bf16_to_f32(((const uint16_t *)p)[e]) : ((const float *)p)[e];
}

static void put(void *p, tlm_gemm_type t, int64_t e, float v) {
    if (t == TLM_GEMM_BF16) ((uint16_t *)p)[e] = tlm_f32_to_bf16(v);
    else ((float *)p)[e] = v;
}

static bool same_bits(const void *x, const void *y, tlm_gemm_type t, int64_t e) {
    size_t s = type_size(t);
    return memcmp((const char *)x + e * s, (const char *)y + e * s, s) == 0;
}

static char *describe(const gemm_case *c, char *buf, size_t size) {
    snprintf(buf, size, "%c%c m=%lld n=%lld k=%lld batch=%lld %s->%s alpha=%g beta=%g c_mode=%d pad=%d%s%s",
             c->ta ? 'T' : 'N', c->tb ? 'T' : 'N', (long long)c->m, (long long)c->n, (long long)c->k,
             (long long)c->batch, c->ab == TLM_GEMM_BF16 ? "bf16" : "f32", c->cd == TLM_GEMM_BF16 ? "bf16" : "f32",
             c->alpha, c->beta, c->c_mode, c->pad, c->interleave_d ? " interleaved-D" : "",
             c->shared_b ? " shared-B" : "");
    return buf;
}

/* Runs one case on the host (dev NULL) or through tlm_device_gemm, and
 * checks every D element against float64 and every other element of the D
 * buffer against its sentinel (nothing written out of place). */
static void run_case(const gemm_case *c, tlm_device *dev) {
    char what[256];
    describe(c, what, sizeof what);
    const int64_t a_rows = c->ta ? c->k : c->m, a_cols = c->ta ? c->m : c->k;
    const int64_t b_rows = c->tb ? c->n : c->k, b_cols = c->tb ? c->k : c->n;
    tlm_gemm g = {.trans_a = c->ta, .trans_b = c->tb, .m = c->m, .n = c->n, .k = c->k, .batch = c->batch};
    g.a_type = g.b_type = c->ab;
    g.cd_type = c->cd;
    g.alpha = c->alpha;
    g.beta = c->beta;
    g.lda = a_rows + c->pad;
    g.ldb = b_rows + c->pad;
    g.ldc = c->m + 2 * c->pad;
    g.ldd = c->c_mode == 2 ? g.ldc : c->m + c->pad;
    g.stride_a = g.lda * a_cols + c->pad;
    g.stride_b = c->shared_b ? 0 : g.ldb * b_cols + 3 * c->pad;
    g.stride_c = g.ldc * c->n + c->pad;
    g.stride_d = c->c_mode == 2 ? g.stride_c : g.ldd * c->n + 2 * c->pad;
    if (c->interleave_d) {
        g.ldd = c->batch * c->m + c->pad;
        g.stride_d = c->m;
    }
    const int64_t na = (c->batch - 1) * g.stride_a + (a_cols - 1) * g.lda + a_rows;
    const int64_t nb = (c->batch - 1) * g.stride_b + (b_cols - 1) * g.ldb + b_rows;
    const int64_t nc = (c->batch - 1) * g.stride_c + (c->n - 1) * g.ldc + c->m;
    const int64_t nd = (c->batch - 1) * g.stride_d + (c->n - 1) * g.ldd + c->m;
    void *a = xcalloc((size_t)na, type_size(c->ab)), *b = xcalloc((size_t)nb, type_size(c->ab));
    void *cm = xcalloc((size_t)nc, type_size(c->cd)), *d = xcalloc((size_t)nd, type_size(c->cd));
    void *d0 = xcalloc((size_t)nd, type_size(c->cd));
    for (int64_t e = 0; e < na; e++) put(a, c->ab, e, uniform());
    for (int64_t e = 0; e < nb; e++) put(b, c->ab, e, uniform());
    for (int64_t e = 0; e < nc; e++) put(cm, c->cd, e, 4 * uniform());
    /* D starts as a sentinel, or as C when C is D */
    for (int64_t e = 0; e < nd; e++) put(d, c->cd, e, c->c_mode == 2 ? get(cm, c->cd, e) : -12345.0f);
    memcpy(d0, d, (size_t)nd * type_size(c->cd));

    if (!dev) {
        g.a = (tlm_dptr)(uintptr_t)a;
        g.b = (tlm_dptr)(uintptr_t)b;
        g.c = c->c_mode == 1 ? (tlm_dptr)(uintptr_t)cm : 0;
        g.d = (tlm_dptr)(uintptr_t)d;
        if (c->c_mode == 2) g.c = g.d;
        const char *p = tlm_gemm_problem(&g);
        CHECK(p == NULL, "%s: %s", what, p);
        if (!p) tlm_gemm_reference(&g);
    } else {
        tlm_err err = {{0}};
        tlm_dptr da = tlm_device_alloc(dev, (size_t)na * type_size(c->ab), &err);
        tlm_dptr db = tlm_device_alloc(dev, (size_t)nb * type_size(c->ab), &err);
        tlm_dptr dc = tlm_device_alloc(dev, (size_t)nc * type_size(c->cd), &err);
        tlm_dptr dd = tlm_device_alloc(dev, (size_t)nd * type_size(c->cd), &err);
        bool ok = da && db && dc && dd && tlm_device_upload(dev, da, a, (size_t)na * type_size(c->ab), &err) &&
                  tlm_device_upload(dev, db, b, (size_t)nb * type_size(c->ab), &err) &&
                  tlm_device_upload(dev, dc, cm, (size_t)nc * type_size(c->cd), &err) &&
                  tlm_device_upload(dev, dd, d, (size_t)nd * type_size(c->cd), &err);
        g.a = da, g.b = db, g.c = c->c_mode == 1 ? dc : c->c_mode == 2 ? dd : 0, g.d = dd;
        ok = ok && tlm_device_gemm(dev, &g, &err) && tlm_device_sync(dev, &err) &&
             tlm_device_download(dev, d, dd, (size_t)nd * type_size(c->cd), &err);
        CHECK(ok, "%s: %s", what, err.msg);
        tlm_device_free(dev, da);
        tlm_device_free(dev, db);
        tlm_device_free(dev, dc);
        tlm_device_free(dev, dd);
    }

    /* which elements of D's buffer are some entry's */
    char *is_d = xcalloc((size_t)nd, 1);
    int wrong = 0;
    double worst = 0;
    for (int64_t p = 0; p < c->batch; p++) {
        for (int64_t j = 0; j < c->n; j++) {
            for (int64_t i = 0; i < c->m; i++) {
                double acc = 0, mag = 0;
                for (int64_t l = 0; l < c->k; l++) {
                    double x = get(a, c->ab, p * g.stride_a + (c->ta ? l + i * g.lda : i + l * g.lda));
                    double y = get(b, c->ab, p * g.stride_b + (c->tb ? j + l * g.ldb : l + j * g.ldb));
                    acc += x * y;
                    mag += fabs(x * y);
                }
                double want = (double)c->alpha * acc, size = fabs((double)c->alpha) * mag;
                if (c->c_mode) {
                    double cv = get(cm, c->cd, p * g.stride_c + i + j * g.ldc);
                    want += (double)c->beta * cv;
                    size += fabs((double)c->beta * cv);
                }
                int64_t e = p * g.stride_d + i + j * g.ldd;
                is_d[e] = 1;
                double got = get(d, c->cd, e);
                /* fp32: k + 2 roundings of at most 2^-24 relative each; bf16 D: one more of 2^-8 */
                double tol = (double)(c->k + 3) * 0x1p-24 * size + 1e-30;
                if (c->cd == TLM_GEMM_BF16) tol += 0x1p-8 * fabs(want) + 0x1p-8 * tol;
                double diff = fabs(got - want);
                if (!(diff <= tol)) wrong++;
                if (diff / (tol > 0 ? tol : 1) > worst) worst = diff / tol;
            }
        }
    }
    int strays = 0;
    for (int64_t e = 0; e < nd; e++) strays += !is_d[e] && !same_bits(d, d0, c->cd, e);
    CHECK(wrong == 0, "%s%s: %d elements off (worst at %.2f of the bound)", dev ? "device " : "", what, wrong, worst);
    CHECK(strays == 0, "%s%s: %d elements outside D written", dev ? "device " : "", what, strays);
    free(is_d);
    free(a);
    free(b);
    free(cm);
    free(d);
    free(d0);
}

static void run_cases(tlm_device *dev) {
    static const int64_t sizes[] = {1, 3, 17, 33};
    int cases = 0;
    /* every transpose combination over odd sizes */
    for (int t = 0; t < 4; t++)
        for (int mi = 0; mi < 4; mi++)
            for (int ni = 0; ni < 4; ni++)
                for (int ki = 0; ki < 4; ki++) {
                    gemm_case c = {.ta = t & 1,
                                   .tb = t >> 1,
                                   .m = sizes[mi],
                                   .n = sizes[ni],
                                   .k = sizes[ki],
                                   .batch = 1,
                                   .ab = TLM_GEMM_F32,
                                   .cd = TLM_GEMM_F32,
                                   .alpha = 1,
                                   .pad = (mi + ni + ki) % 3};
                    run_case(&c, dev);
                    cases++;
                }
    /* batches, scales, C absent, separate or in place, types */
    static const struct {
        tlm_gemm_type ab, cd;
    } types[] = {{TLM_GEMM_F32, TLM_GEMM_F32}, {TLM_GEMM_BF16, TLM_GEMM_F32}, {TLM_GEMM_BF16, TLM_GEMM_BF16}};
    for (int ty = 0; ty < 3; ty++)
        for (int t = 0; t < 4; t++)
            for (int cmode = 0; cmode < 3; cmode++) {
                gemm_case c = {.ta = t & 1,
                               .tb = t >> 1,
                               .m = 17,
                               .n = 3,
                               .k = 33,
                               .batch = 3,
                               .ab = types[ty].ab,
                               .cd = types[ty].cd,
                               .alpha = -0.75f,
                               .beta = cmode ? 1.5f : 0.0f,
                               .c_mode = cmode,
                               .pad = 2};
                run_case(&c, dev);
                c.beta = cmode ? 1.0f : 0.5f; /* with no C, beta is not looked at */
                c.alpha = 2.0f;
                c.m = 33, c.n = 17, c.k = 1;
                run_case(&c, dev);
                cases += 2;
            }
    gemm_case inter = {.m = 5,
                       .n = 4,
                       .k = 7,
                       .batch = 4,
                       .ab = TLM_GEMM_BF16,
                       .cd = TLM_GEMM_BF16,
                       .alpha = 1,
                       .interleave_d = true,
                       .shared_b = true,
                       .pad = 1};
    run_case(&inter, dev);
    inter.ta = inter.tb = true, inter.ab = TLM_GEMM_F32, inter.cd = TLM_GEMM_F32;
    run_case(&inter, dev);
    cases += 2;
    printf("%s: %d cases\n", dev ? "tlm_device_gemm" : "tlm_gemm_reference", cases);
}

/* fp32 accumulation in k order: 1e8 + 1 rounds back to 1e8, so the sum of
 * (1e8, 1, -1e8) is 0 in that order, where float64 says 1. */
static void test_order(void) {
    float a[3] = {1e8f, 1.0f, -1e8f}, b[3] = {1, 1, 1}, d = -1, c = NAN;
    tlm_gemm g = {.m = 1,
                  .n = 1,
                  .k = 3,
                  .a = (tlm_dptr)(uintptr_t)a,
                  .b = (tlm_dptr)(uintptr_t)b,
                  .c = (tlm_dptr)(uintptr_t)&c,
                  .d = (tlm_dptr)(uintptr_t)&d,
                  .lda = 1,
                  .ldb = 3,
                  .ldc = 1,
                  .ldd = 1,
                  .a_type = TLM_GEMM_F32,
                  .b_type = TLM_GEMM_F32,
                  .cd_type = TLM_GEMM_F32,
                  .batch = 1,
                  .alpha = 1,
                  .beta = 0};
    tlm_gemm_reference(&g);
    CHECK(d == 0.0f, "k-order fp32 sum: %g", d);
    /* beta = 0 does not read C: its NaN does not reach D */
    CHECK(!isnan(d), "beta = 0 read C");
}

/* tlm_device_gemm refuses what tlm_gemm_problem refuses, and operands that
 * run past their allocation. */
static void test_device_checks(tlm_device *dev) {
    tlm_err err = {{0}};
    tlm_dptr buf = tlm_device_alloc(dev, 4096, &err);
    CHECK(buf != 0, "%s", err.msg);
    tlm_gemm g = valid();
    g.a = buf, g.b = buf + 1024, g.d = buf + 2048;
    CHECK(tlm_device_gemm(dev, &g, &err), "in range: %s", err.msg);
    g.m = 0;
    CHECK(!tlm_device_gemm(dev, &g, &err) && strstr(err.msg, "at least 1"), "%s", err.msg);
    g = valid(), g.a = buf, g.b = buf + 1024, g.d = buf + 4096 - 44; /* 12 floats, 48 bytes, 4 past the end */
    CHECK(!tlm_device_gemm(dev, &g, &err) && strstr(err.msg, "operand D"), "%s", err.msg);
    g.d = buf + 2048, g.c = buf + 8192;
    CHECK(!tlm_device_gemm(dev, &g, &err) && strstr(err.msg, "operand C"), "%s", err.msg);
    g.c = 0, g.batch = 100, g.stride_a = 16, g.stride_d = 12;
    CHECK(!tlm_device_gemm(dev, &g, &err) && strstr(err.msg, "operand A"), "batch past the end: %s", err.msg);
    tlm_device_free(dev, buf);
}

int main(void) {
    test_bf16();
    test_problems();
    test_order();
    run_cases(NULL);
    tlm_err err = {{0}};
    tlm_device *dev = tlm_device_open("cuda", &err);
    CHECK(dev != NULL && tlm_device_get_info(dev)->emulated, "the emulated device: %s", err.msg);
    if (dev) {
        test_device_checks(dev);
        run_cases(dev);
        tlm_device_close(dev);
    }
    return test_finish("gpu.gemm");
}
