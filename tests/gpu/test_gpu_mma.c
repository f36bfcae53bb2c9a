/* gpu.mma: the tensor cores' device functions (runtime/gpu/mma.cuh) alone,
 * on the device "cuda" opens (the emulated one under the suite's
 * TLM_TEST_DEVICE=emulated), with the kernels of mma_kernels.cu:
 *   - mma.sync m16n8k16 on 37 random problems (bf16 A and B, fp32 C), each
 *     lane loading its fragments by the PTX ISA's layouts, against a float64
 *     product of the same bf16 values; and the same with A's fragment loaded
 *     from A^T, which must be wrong (so the check can fail);
 *   - ldmatrix.x4 and .x4.trans, every register of every lane against the
 *     definition, written here independently of the emulator;
 *   - ldmatrix then mma, the attention kernel's path (A by ldmatrix, a
 *     k-major B by ldmatrix.trans), against float64;
 *   - pack_bf16x2 and exp2_approx, the attention kernels' conversions,
 *     against the reference rounding and float64 (test_conversions);
 *   - cp.async: 16, 8 and 0 source bytes (the zero fill), two groups,
 *     wait_group 1 then 0, each read by another thread after a barrier;
 *     on the emulated device, a read before the wait sees the old bytes;
 *   - the emulator's errors: a warp with half its lanes returned, an
 *     ldmatrix row in global memory, one not 16-byte aligned, lanes that
 *     disagree on .trans, half a warp at an mma and half at a shuffle, a
 *     cp.async into global memory and one from a misaligned source;
 *   - with the CUDA toolkit: the same source compiles with NVRTC to CUBINs
 *     for sm_80 and sm_90, and the tensor-core attention's PTX (common.cuh,
 *     mma.cuh, attention_tc.cu for compute_80) holds the instructions
 *     (mma.sync...bf16, ldmatrix, ldmatrix.trans, cp.async and its
 *     commit and wait, cvt.rn.bf16x2.f32 and ex2.approx.ftz.f32).
 *
 * Bound for one D element: |d - exact| <= 17 * 2^-23 * (sum_k |a b| + |c|).
 * The 16 products are exact; any order of 17 fp32 additions, each rounded
 * (2^-24 relative) or truncated (2^-23) as tensor cores may do, stays within
 * 17 * 2^-23 of the sum of the magnitudes. The emulator (a double sum
 * rounded once) is well inside; the hardware's order and internal rounding
 * are its own (docs/gpu.md, "Tensor cores"). A fragment in the wrong lane
 * changes D by O(|a b|), thousands of times the bound. */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "tc_test.h"
#include "gemm_reference.h"
#include "tlm_rt/rng.h"
#ifdef TLM_MMA_TEST_NVRTC
#include "nvrtc_compile.h"
#endif

#define PROBLEMS 37

static tlm_module *g_mod;
static tlm_rng g_rng;

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("FAIL cannot open %s\n", path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = xalloc((size_t)n + 1);
    if (fread(s, 1, (size_t)n, f) != (size_t)n) die("short read", NULL);
    fclose(f);
    return s;
}

/* The files at paths concatenated, in order. */
static char *concat(const char *const *paths, int n) {
    size_t total = 1;
    char *parts[8];
    for (int i = 0; i < n; i++) {
        parts[i] = read_text(paths[i]);
        total += strlen(parts[i]) + 1;
    }
    char *s = xalloc(total);
    for (int i = 0; i < n; i++) {
        strcat(s, parts[i]);
        strcat(s, "\n");
        free(parts[i]);
    }
    return s;
}

/* Launches kernel name on grid x block with shared bytes of dynamic shared
 * memory; false with the message in err. */
static bool launch_shared(const char *name, unsigned grid, unsigned block, unsigned shared, void **args, tlm_err *err) {
    tlm_kernel *k = tlm_device_kernel(g_dev, g_mod, name, err);
    if (!k) return false;
    tlm_launch dims = {.grid = {grid, 1, 1}, .block = {block, 1, 1}, .shared_bytes = shared};
    return tlm_device_launch(g_dev, k, dims, args, err) && tlm_device_sync(g_dev, err);
}
static bool launch(const char *name, unsigned grid, unsigned block, void **args, tlm_err *err) {
    return launch_shared(name, grid, block, 0, args, err);
}

/* n random bf16 values (bits) in [-2, 2], and their floats. */
static uint16_t *random_bf16(size_t n, float *as_float) {
    float *x = xalloc(n * sizeof(float));
    tlm_rng_fill_uniform(&g_rng, x, n, -2.0f, 2.0f);
    uint16_t *h = xalloc(n * sizeof(uint16_t));
    for (size_t i = 0; i < n; i++) {
        h[i] = tlm_f32_to_bf16(x[i]);
        as_float[i] = tlm_bf16_to_f32(h[i]);
    }
    free(x);
    return h;
}

/* d (m x n, row-major, ld ldd) against A B + C in float64 (A m x 16, B 16 x n,
 * row-major; C may be NULL); returns how many elements are outside the
 * bound, and the worst error as a fraction of it in *worst. */
static int product_errors(const float *d, int ldd, const float *a, const float *b, int n, const float *c, int m,
                          double *worst) {
    int bad = 0;
    for (int r = 0; r < m; r++)
        for (int col = 0; col < n; col++) {
            double exact = c ? c[r * n + col] : 0.0, mag = c ? fabs(exact) : 0.0;
            for (int k = 0; k < 16; k++) {
                exact += (double)a[r * 16 + k] * b[k * n + col];
                mag += fabs((double)a[r * 16 + k] * b[k * n + col]);
            }
            double bound = 17.0 * ldexp(mag, -23), e = fabs(d[r * ldd + col] - exact);
            if (!(e <= bound)) bad++;
            else if (bound > 0 && e / bound > *worst) *worst = e / bound;
        }
    return bad;
}

static void test_product(void) {
    float *a = xalloc(PROBLEMS * 256 * sizeof(float)), *b = xalloc(PROBLEMS * 128 * sizeof(float));
    float *c = xalloc(PROBLEMS * 128 * sizeof(float)), *d = xalloc(PROBLEMS * 128 * sizeof(float));
    uint16_t *ah = random_bf16(PROBLEMS * 256, a), *bh = random_bf16(PROBLEMS * 128, b);
    tlm_rng_fill_uniform(&g_rng, c, PROBLEMS * 128, -4.0f, 4.0f);
    tlm_dptr A = put(ah, PROBLEMS * 256 * 2), B = put(bh, PROBLEMS * 128 * 2), C = put(c, PROBLEMS * 128 * 4);
    tlm_dptr D = put(d, PROBLEMS * 128 * 4);
    for (int transpose = 0; transpose < 2; transpose++) {
        int count = PROBLEMS;
        void *args[] = {&D, &A, &B, &C, &count, &transpose};
        tlm_err err = {{0}};
        /* 5 blocks of 2 warps: the warps stride over the problems */
        if (!launch("mma_test_product", 5, 64, args, &err)) die("mma_test_product", &err);
        get(d, D, PROBLEMS * 128 * 4);
        double worst = 0.0;
        int bad = 0, wrong_problems = 0;
        for (int w = 0; w < PROBLEMS; w++) {
            int e = product_errors(d + 128 * w, 8, a + 256 * w, b + 128 * w, 8, c + 128 * w, 16, &worst);
            bad += e;
            wrong_problems += e > 0;
        }
        char what[200];
        if (!transpose) {
            snprintf(what, sizeof what,
                     "mma.sync m16n8k16 bf16 -> fp32, %d problems against float64: %d of %d elements outside "
                     "17 * 2^-23 * (sum |a b| + |c|) (worst %.3g of it)",
                     PROBLEMS, bad, PROBLEMS * 128, worst);
            check(bad == 0, what);
        } else {
            snprintf(what, sizeof what,
                     "A's fragment loaded from A^T gives a wrong product: %d of %d problems outside the bound "
                     "(%d elements)",
                     wrong_problems, PROBLEMS, bad);
            check(wrong_problems == PROBLEMS, what);
        }
    }
    tlm_dptr bufs[] = {A, B, C, D};
    for (int i = 0; i < 4; i++) tlm_device_free(g_dev, bufs[i]);
    free(a), free(b), free(c), free(d), free(ah), free(bh);
}

/* The registers of every lane (out[4 l + i]) that differ from the PTX
 * ISA's ldmatrix of the four 8x8 matrices m: register i of lane l holds
 * matrix i's row l/4, columns 2(l%4) and 2(l%4)+1 (lower half first), or
 * with .trans its column l/4, rows 2(l%4) and 2(l%4)+1. */
static int ldmatrix_wrong(const uint32_t *out, const uint16_t *m, int trans) {
    int bad = 0;
    for (int l = 0; l < 32; l++)
        for (int i = 0; i < 4; i++) {
            int r = l / 4, c = 2 * (l % 4);
            uint32_t lo = trans ? m[64 * i + c * 8 + r] : m[64 * i + r * 8 + c];
            uint32_t hi = trans ? m[64 * i + (c + 1) * 8 + r] : m[64 * i + r * 8 + c + 1];
            bad += out[4 * l + i] != (lo | hi << 16);
        }
    return bad;
}

static void test_ldmatrix(void) {
    uint16_t m[256];
    for (int e = 0; e < 256; e++) m[e] = (uint16_t)(0x1000 + e * 7);
    tlm_dptr M = put(m, sizeof m), OUT = put((uint32_t[128]){0}, 128 * 4);
    for (int trans = 0; trans < 2; trans++) {
        void *args[] = {&OUT, &M, &trans};
        tlm_err err = {{0}};
        /* 2 warps: each does its own ldmatrix; warp 0's registers are written */
        if (!launch("mma_test_ldmatrix", 1, 64, args, &err)) die("mma_test_ldmatrix", &err);
        uint32_t out[128];
        get(out, OUT, sizeof out);
        int bad = ldmatrix_wrong(out, m, trans);
        char what[120];
        snprintf(what, sizeof what, "ldmatrix.m8n8.x4%s: %d of 128 registers wrong", trans ? ".trans" : "", bad);
        check(bad == 0, what);
    }
    tlm_device_free(g_dev, M);
    tlm_device_free(g_dev, OUT);
}

/* The same through dynamic shared memory staged by cp.async: 2 KiB, and
 * 100 KiB (the kernel opts in past 48 KiB; the tile at its far end). */
static void test_dynamic_shared(void) {
    uint16_t m[256];
    for (int e = 0; e < 256; e++) m[e] = (uint16_t)(0x2000 + e * 5);
    tlm_dptr M = put(m, sizeof m), OUT = put((uint32_t[129]){0}, 129 * 4);
    const unsigned sizes[] = {2048, 100 * 1024};
    for (int s = 0; s < 2; s++)
        for (int trans = 0; trans < 2; trans++) {
            void *args[] = {&OUT, &M, &trans};
            tlm_err err = {{0}};
            bool ran = launch_shared("mma_test_dynamic_shared", 1, 64, sizes[s], args, &err);
            uint32_t out[129] = {0};
            if (ran) get(out, OUT, sizeof out);
            int bad = ran ? ldmatrix_wrong(out, m, trans) : 128;
            char what[TLM_ERR_MSG_BYTES + 256];
            snprintf(what, sizeof what,
                     "cp.async, then ldmatrix%s, in %u bytes of dynamic shared memory: %d of 128 registers wrong, "
                     "size seen %u%s%s",
                     trans ? ".trans" : "", sizes[s], bad, out[128], ran ? "" : ": ", ran ? "" : err.msg);
            check(ran && bad == 0 && out[128] == sizes[s], what);
        }
    tlm_device_free(g_dev, M);
    tlm_device_free(g_dev, OUT);
}

static void test_ldmatrix_product(void) {
    float a[256], b[256], d[256];
    uint16_t *ah = random_bf16(256, a), *bh = random_bf16(256, b);
    tlm_dptr A = put(ah, 512), B = put(bh, 512), D = put((float[256]){0}, sizeof d);
    void *args[] = {&D, &A, &B};
    tlm_err err = {{0}};
    if (!launch("mma_test_ldmatrix_product", 1, 32, args, &err)) die("mma_test_ldmatrix_product", &err);
    get(d, D, sizeof d);
    double worst = 0.0;
    int bad = product_errors(d, 16, a, b, 16, NULL, 16, &worst);
    char what[160];
    snprintf(what, sizeof what, "ldmatrix A, ldmatrix.trans B, two mma: %d of 256 elements outside the bound", bad);
    check(bad == 0, what);
    tlm_device_free(g_dev, A), tlm_device_free(g_dev, B), tlm_device_free(g_dev, D);
    free(ah), free(bh);
}

/* pack_bf16x2 (cvt.rn.bf16x2.f32 on a GPU) against the reference rounding
 * (tlm_f32_to_bf16): every number to the same bits, in the right halves
 * (lo, hi), ties to even either way, overflow to infinity; a NaN to a NaN.
 * exp2_approx (ex2.approx.ftz.f32) against exp2 in float64: within 2^-21
 * relative where 2^x is a normal float, 0 at -inf and far below, and at
 * most 2^-126 where the hardware may flush a subnormal result to 0. On
 * a GPU these check the instructions; on the emulated device, whose
 * fallbacks are to_bf16 and exp2f, only that the fallbacks hold. */
static void test_conversions(void) {
    enum { N = 4096 };
    static float x[2 * N], y[N], e[N];
    static uint32_t out[N];
    /* edge values first: zeros, infinities, the largest float (rounds to
     * infinity), subnormals, NaN, and ties with even and odd kept bits */
    static const uint32_t edges[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7f7fffffu, 0x00000001u,
                                     0x807fffffu, 0x7fc00001u, 0x3f808000u, 0x3f818000u, 0xbf808000u, 0x3f80ffffu,
                                     0x3f807fffu, 0x7f7f8000u, 0x00008000u, 0x00018000u};
    int nedges = (int)(sizeof edges / sizeof edges[0]);
    for (int i = 0; i < 2 * N; i++) {
        uint32_t r = (uint32_t)tlm_rng_next(&g_rng), bits;
        if (i < nedges) bits = edges[i];
        else if (i % 3 == 0) bits = r;                             /* any bits: every exponent, some NaNs */
        else if (i % 3 == 1) bits = (r & 0xffff0000u) | 0x8000u;  /* halfway between two bf16 */
        else bits = (r & 0x807fffffu) | (uint32_t)(100 + i % 56) << 23; /* normal, 2^-27 to 2^28 */
        memcpy(&x[i], &bits, 4);
    }
    for (int i = 0; i < N; i++) y[i] = i == 0 ? -INFINITY : i == 1 ? -200.0f : -140.0f + 267.0f * (float)i / N;
    tlm_dptr OUT = put(out, sizeof out), E = put(e, sizeof e), X = put(x, sizeof x), Y = put(y, sizeof y);
    int n = N;
    void *args[] = {&OUT, &E, &X, &Y, &n};
    tlm_err err = {{0}};
    if (!launch("mma_test_conversions", 8, 128, args, &err)) die("mma_test_conversions", &err);
    get(out, OUT, sizeof out);
    get(e, E, sizeof e);
    int bad_pack = 0, bad_exp = 0;
    for (int i = 0; i < N; i++)
        for (int h = 0; h < 2; h++) {
            float v = x[2 * i + h];
            uint16_t got = (uint16_t)(out[i] >> (16 * h));
            bool ok = isnan(v) ? (got & 0x7f80u) == 0x7f80u && (got & 0x7fu) != 0 : got == tlm_f32_to_bf16(v);
            bad_pack += !ok;
        }
    for (int i = 0; i < N; i++) {
        double want = exp2((double)y[i]);
        bool ok = want < 0x1p-126 ? e[i] >= 0.0f && e[i] <= 0x1p-126f : fabs(e[i] - want) <= 0x1p-21 * want;
        bad_exp += !ok;
    }
    char what[160];
    snprintf(what, sizeof what, "pack_bf16x2: %d of %d halves differ from the reference rounding", bad_pack, 2 * N);
    check(bad_pack == 0, what);
    snprintf(what, sizeof what, "exp2_approx on [-140, 127], -200 and -inf: %d of %d outside 2^-21", bad_exp, N);
    check(bad_exp == 0, what);
    tlm_device_free(g_dev, OUT), tlm_device_free(g_dev, E), tlm_device_free(g_dev, X), tlm_device_free(g_dev, Y);
}

/* cp.async (mma_test_cp_async): each thread's 16 bytes with the zero fill
 * past src_bytes, read by its neighbour after wait_group and a barrier,
 * for both groups; on the emulated device also the read before any wait,
 * which must still see the block's poison (so a kernel missing a wait
 * fails its tests here). */
static void test_cp_async(bool emulated) {
    enum { THREADS = 64, WORDS = 8 * THREADS };
    uint32_t src[WORDS], out[WORDS];
    for (int i = 0; i < WORDS; i++) src[i] = (uint32_t)tlm_rng_next(&g_rng) | 1u; /* never 0 */
    tlm_dptr S = put(src, sizeof src), O = nans(sizeof out);
    int early = 0;
    void *args[] = {&O, &S, &early};
    tlm_err err = {{0}};
    check(launch("mma_test_cp_async", 1, THREADS, args, &err), "cp.async: the kernel runs");
    get(out, O, sizeof out);
    int wrong = 0;
    for (int i = 0; i < THREADS; i++) {
        int from = (i + 1) % THREADS, kept = from % 3 == 0 ? 4 : from % 3 == 1 ? 2 : 0;
        for (int w = 0; w < 4; w++) {
            wrong += out[4 * i + w] != (w < kept ? src[4 * from + w] : 0u);
            wrong += out[4 * (THREADS + i) + w] != src[4 * (THREADS + from) + w];
        }
    }
    char what[200];
    snprintf(what, sizeof what,
             "cp.async: 16, 8 and 0 bytes with the zero fill, two groups, read across threads (%d of %d words wrong)",
             wrong, WORDS);
    check(wrong == 0, what);
    if (emulated) {
        early = 1;
        O = nans(sizeof out);
        args[0] = &O;
        check(launch("mma_test_cp_async", 1, THREADS, args, &err), "cp.async read before its wait: the kernel runs");
        get(out, O, sizeof out);
        int poisoned = 0;
        for (int i = 0; i < 4 * THREADS; i++) poisoned += out[i] == 0xffffffffu;
        snprintf(what, sizeof what, "cp.async read before its wait sees the block's poison (%d of %d words)", poisoned,
                 4 * THREADS);
        check(poisoned == 4 * THREADS, what);
    }
    tlm_device_free(g_dev, S);
}

/* A launch that must fail with a message holding each of want[]. */
static void expect_failure(const char *kernel, void **args, const char *const *want, int nwant) {
    tlm_err err = {{0}};
    bool ok = launch(kernel, 1, 64, args, &err);
    bool has = !ok;
    for (int i = 0; i < nwant && has; i++) has = strstr(err.msg, want[i]) != NULL;
    char what[TLM_ERR_MSG_BYTES + 256];
    snprintf(what, sizeof what, "%s fails: %s", kernel, ok ? "(it ran)" : err.msg);
    check(has, what);
}

static void test_errors(void) {
    tlm_dptr buf = put((uint32_t[256]){0}, 1024);
    void *one[] = {&buf}, *two[] = {&buf, &buf};
    expect_failure("mma_test_half_warp", one, (const char *const[]){"mma.sync", "has exited"}, 2);
    expect_failure("mma_test_ldmatrix_global", two, (const char *const[]){"ldmatrix", "outside shared memory"}, 2);
    expect_failure("mma_test_ldmatrix_misaligned", one, (const char *const[]){"ldmatrix", "16-byte aligned"}, 2);
    expect_failure("mma_test_ldmatrix_mixed_trans", one, (const char *const[]){"ldmatrix", "disagrees", ".trans"}, 3);
    expect_failure("mma_test_mma_beside_shuffle", one, (const char *const[]){"different warp operations"}, 1);
    expect_failure("mma_test_cp_async_global", one, (const char *const[]){"cp.async", "outside shared memory"}, 2);
    expect_failure("mma_test_cp_async_misaligned", one, (const char *const[]){"cp.async", "16-byte aligned"}, 2);
    {
        tlm_err err = {{0}};
        bool ok = launch_shared("mma_test_cp_async_past_dynamic", 1, 64, 4096, one, &err);
        char what[TLM_ERR_MSG_BYTES + 256];
        snprintf(what, sizeof what, "mma_test_cp_async_past_dynamic fails: %s", ok ? "(it ran)" : err.msg);
        check(!ok && strstr(err.msg, "cp.async") && strstr(err.msg, "outside shared memory"), what);
    }
    /* and the module still launches after them */
    int trans = 0;
    tlm_dptr M = put((uint16_t[256]){0}, 512);
    void *args[] = {&buf, &M, &trans};
    tlm_err err = {{0}};
    check(launch("mma_test_ldmatrix", 1, 32, args, &err), "a launch after the failures runs");
    tlm_device_free(g_dev, M);
    tlm_device_free(g_dev, buf);
}

#ifdef TLM_MMA_TEST_NVRTC
/* NVRTC's PTX output, which tlm's own NVRTC table (CUBIN only) does not
 * take: the library tlm_nvrtc_compile loaded, looked up by its soname. */
typedef int (*nvrtc_create_fn)(void **prog, const char *src, const char *name, int nh, const char *const *h,
                               const char *const *names);
typedef int (*nvrtc_compile_fn)(void *prog, int n, const char *const *options);
typedef int (*nvrtc_ptx_size_fn)(void *prog, size_t *size);
typedef int (*nvrtc_ptx_fn)(void *prog, char *ptx);
typedef int (*nvrtc_destroy_fn)(void **prog);

static char *ptx_of(const char *source, const char *arch_option) {
    void *lib = dlopen(TLM_NVRTC_SONAME, RTLD_NOW | RTLD_NOLOAD);
    if (!lib) return NULL;
    nvrtc_create_fn create = (nvrtc_create_fn)(uintptr_t)dlsym(lib, "nvrtcCreateProgram");
    nvrtc_compile_fn compile = (nvrtc_compile_fn)(uintptr_t)dlsym(lib, "nvrtcCompileProgram");
    nvrtc_ptx_size_fn ptx_size = (nvrtc_ptx_size_fn)(uintptr_t)dlsym(lib, "nvrtcGetPTXSize");
    nvrtc_ptx_fn get_ptx = (nvrtc_ptx_fn)(uintptr_t)dlsym(lib, "nvrtcGetPTX");
    nvrtc_destroy_fn destroy = (nvrtc_destroy_fn)(uintptr_t)dlsym(lib, "nvrtcDestroyProgram");
    char *ptx = NULL;
    void *prog = NULL;
    const char *options[] = {arch_option, "-std=c++17", "-default-device"};
    size_t size = 0;
    if (create && compile && ptx_size && get_ptx && destroy && create(&prog, source, "mma", 0, NULL, NULL) == 0) {
        if (compile(prog, 3, options) == 0 && ptx_size(prog, &size) == 0 && (ptx = xalloc(size + 1)) &&
            get_ptx(prog, ptx) != 0) {
            free(ptx);
            ptx = NULL;
        }
        destroy(&prog);
    }
    dlclose(lib);
    return ptx;
}

/* The inline-assembly path: the test kernels to CUBINs for sm_80 and sm_90
 * (ptxas assembles every instruction of mma.cuh there), and the attention
 * kernels' PTX holding the instructions. (gpu.nvrtc compiles the attention
 * kernels to CUBINs too, within the runtime's source.) */
static void test_nvrtc(const char *tests_source, const char *attention_source) {
    static const char *const archs[] = {"sm_80", "sm_90"};
    for (int a = 0; a < 2; a++) {
        uint8_t *cubin = NULL;
        size_t size = 0;
        tlm_err err = {{0}};
        bool ok = tlm_nvrtc_compile(tests_source, archs[a], &cubin, &size, &err);
        ok = ok && size > 4 && memcmp(cubin, "\177ELF", 4) == 0;
        char what[TLM_ERR_MSG_BYTES + 256];
        snprintf(what, sizeof what, "NVRTC: mma_kernels.cu with mma.cuh to a CUBIN for %s%s%s", archs[a],
                 ok ? "" : ": ", ok ? "" : err.msg);
        check(ok, what);
        free(cubin);
    }
    static const char *const instructions[] = {
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
        "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
        "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
        "cp.async.cg.shared.global",
        "cp.async.commit_group",
        "cp.async.wait_group",
        "cvt.rn.bf16x2.f32",
        "ex2.approx.ftz.f32",
    };
    char *ptx = ptx_of(attention_source, "--gpu-architecture=compute_80");
    for (int i = 0; i < (int)(sizeof instructions / sizeof instructions[0]); i++) {
        char what[300];
        snprintf(what, sizeof what, "the PTX of attention_tc.cu (compute_80) has %s", instructions[i]);
        check(ptx && strstr(ptx, instructions[i]), what);
    }
    free(ptx);
}
#endif

/* Usage: test_gpu_mma [GPU_SOURCE_DIR MMA_KERNELS_CU]: where mma.cuh and its
 * neighbours and mma_kernels.cu are, when not at the build's source tree
 * (scripts/gpu_check.sh, on a machine where the tree lies elsewhere). */
int main(int argc, char **argv) {
    tlm_rng_seed(&g_rng, 20261203);
    tlm_err err = {{0}};
    g_dev = tlm_device_open("cuda", &err);
    if (!g_dev) die("open the device (is TLM_TEST_DEVICE=emulated set?)", &err);
    char common[1024], mma[1024], attention[1024];
    const char *dir = argc == 3 ? argv[1] : TLM_GPU_SOURCE_DIR;
    snprintf(common, sizeof common, "%s/common.cuh", dir);
    snprintf(mma, sizeof mma, "%s/mma.cuh", dir);
    snprintf(attention, sizeof attention, "%s/attention_tc.cu", dir);
    const char *tests_files[] = {common, mma, argc == 3 ? argv[2] : TLM_MMA_TEST_KERNELS};
    const char *attention_files[] = {common, mma, attention};
    char *tests_source = concat(tests_files, 3), *attention_source = concat(attention_files, 3);
    g_mod = tlm_device_module_load(g_dev, "gpu.mma's kernels", tests_source, NULL, &err);
    if (!g_mod) die("compile mma_kernels.cu", &err);
    test_product();
    test_ldmatrix();
    test_ldmatrix_product();
    test_conversions();
    test_cp_async(tlm_device_get_info(g_dev)->emulated);
    test_dynamic_shared();
    /* the emulator's refusals; on a GPU these launches are undefined
     * behaviour (an illegal address ends the context) */
    if (tlm_device_get_info(g_dev)->emulated) test_errors();
    else printf("gpu.mma: on a GPU: the emulator's error cases are not run\n");
#ifdef TLM_MMA_TEST_NVRTC
    test_nvrtc(tests_source, attention_source);
#else
    printf("gpu.mma: built without the CUDA toolkit: no NVRTC checks\n");
#endif
    tlm_device_module_unload(g_dev, g_mod);
    tlm_device_close(g_dev);
    free(tests_source);
    free(attention_source);
    if (g_failures) {
        printf("gpu.mma: %d check(s) failed\n", g_failures);
        return 1;
    }
    printf("gpu.mma: all checks passed\n");
    return 0;
}
