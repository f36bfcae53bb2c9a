/* The model's elementwise CUDA kernels (tlm_codegen_cuda_source: act and
 * act_grad, fp32 and their bf16 twins, which read and write bf16, dh
 * aside), run on the CPU through cuda_emu.h, on odd sizes
 * (rows 1, 5, 37; widths 45 and 64: rows x W under one warp's tile of 256
 * elements, and tiles with tails of 64 and 129):
 *
 * - against a float64 reference of the same formulas (fp32: 1e-5 of the
 *   largest |value| plus 1e-5 relative; a bf16 h or gradient, the
 *   reference rounded: 2^-8 relative more), every element written (outputs start as a NaN no
 *   kernel writes);
 * - the tiled path (eight elements a thread, every array 16-byte aligned)
 *   against the one at a time path (the arrays moved by one element), bit
 *   for bit, on grids of one block, of exactly n / TLM_ACT_VECTOR threads,
 *   and of more threads than elements; NaN and infinite inputs included.
 *
 * Exits 77 (ctest: skipped) without a C++ compiler. */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_reference.h" /* the runtime's bf16 conversions */
#include "kernel_loader.h"
#include "mlp_check.h"

#ifndef TLM_TEST_CXX
#define TLM_TEST_CXX ""
#endif
#ifndef TLM_TEST_SOURCE_DIR
#define TLM_TEST_SOURCE_DIR "."
#endif

enum { THREADS = 256 };

/* No kernel writes these: arithmetic on a NaN gives a quiet one, and the
 * bf16 store sets the quiet bit of every NaN it rounds. */
static const uint32_t UNWRITTEN32 = 0x7f800001u;
static const uint16_t UNWRITTEN16 = 0x7f81u;

/* The four kernels of a width: act, act_bf16, act_grad, act_grad_bf16. */
static const char *const params[4] = {
    "long long rows, const float *pg, const float *pu, float *h",
    "long long rows, const unsigned short *pg, const unsigned short *pu, unsigned short *h",
    "long long rows, const float *pg, const float *pu, const float *dh, float *dpg, float *dpu",
    ("long long rows, const unsigned short *pg, const unsigned short *pu, const float *dh, "
     "unsigned short *dpg, unsigned short *dpu"),
};
static const char *const args[4] = {"&rows, &pg, &pu, &h", "&rows, &pg, &pu, &h", "&rows, &pg, &pu, &dh, &dpg, &dpu",
                                    "&rows, &pg, &pu, &dh, &dpg, &dpu"};

/* emu_<kernel>(grid, the kernel's parameters) launches it on `grid` blocks
 * of 256 emulated threads; a failed launch aborts. */
static void write_wrapper(FILE *f, const char *sym, int v) {
    fprintf(f,
            "TLM_EMU_EXPORT(%s)\nextern \"C\" void emu_%s(unsigned g, %s) {\n"
            "  void *args[] = {%s};\n"
            "  const unsigned grid[3] = {g, 1, 1}, block[3] = {%d, 1, 1};\n  char err[256];\n"
            "  if (tlm_emu_launch_%s(grid, block, 0, args, err, sizeof err)) {\n"
            "    fprintf(stderr, \"FAIL: %%s\\n\", err);\n    abort();\n  }\n}\n",
            sym, sym, params[v], args[v], THREADS, sym);
}

/* A width's four kernels: act, act_bf16, act_grad, act_grad_bf16. */
static void act_wrappers(FILE *f, const tlm_kernel_spec *s) {
    char sym[160];
    for (int v = 0; v < 4; v++) {
        tlm_kernel_symbol(s, v < 2 ? TLM_ENTRY_ACT : TLM_ENTRY_ACT_GRAD, sym, sizeof sym);
        strcat(sym, v % 2 ? "_bf16" : "");
        write_wrapper(f, sym, v);
    }
}

typedef void (*act_fn)(unsigned, long long, const void *, const void *, void *);
typedef void (*grad_fn)(unsigned, long long, const void *, const void *, const float *, void *, void *);

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static void reference(bool swiglu, double g, double u, double dh, double *h, double *dg, double *du) {
    if (swiglu) {
        double s = sigmoid(g);
        *h = g * s * u;
        *dg = dh * u * (s * (1.0 + g * (1.0 - s)));
        *du = dh * g * s;
        return;
    }
    const double c = 0.7978845608028654, t = tanh(c * (u + 0.044715 * u * u * u));
    *h = 0.5 * u * (1.0 + t);
    *dg = 0.0;
    *du = dh * (0.5 * (1.0 + t) + 0.5 * u * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * u * u));
}

static uint32_t bits_of(float f) {
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

/* One array of n elements of `size` bytes, 16-byte aligned, or one element
 * past that (the one at a time path), with room for either. */
typedef struct {
    unsigned char *base;
    size_t size, n;
} arr;
static arr arr_new(size_t n, size_t size) {
    arr a = {aligned_alloc(64, (n + 16) * size + 64 - (n + 16) * size % 64), size, n};
    if (!a.base) abort();
    return a;
}
static void *at(const arr *a, bool aligned) { return a->base + (aligned ? 0 : a->size); }
static void fill_unwritten(arr *a, bool aligned) {
    for (size_t i = 0; i < a->n; i++) {
        unsigned char *p = (unsigned char *)at(a, aligned) + i * a->size;
        if (a->size == 2) memcpy(p, &UNWRITTEN16, 2);
        else memcpy(p, &UNWRITTEN32, 4);
    }
}
static void put(arr *a, bool aligned, const void *src) { memcpy(at(a, aligned), src, a->n * a->size); }
static float get(const arr *a, bool aligned, size_t i) {
    const unsigned char *p = (const unsigned char *)at(a, aligned) + i * a->size;
    if (a->size == 2) {
        uint16_t b;
        memcpy(&b, p, 2);
        return tlm_bf16_to_f32(b);
    }
    float f;
    memcpy(&f, p, 4);
    return f;
}
static bool unwritten(const arr *a, bool aligned, size_t i) {
    const unsigned char *p = (const unsigned char *)at(a, aligned) + i * a->size;
    return a->size == 2 ? !memcmp(p, &UNWRITTEN16, 2) : !memcmp(p, &UNWRITTEN32, 4);
}

static int fails;
#define FAILED(...) (fails++ < 20 ? printf("FAIL: " __VA_ARGS__), putchar('\n') : 0)

/* Checks output `out` (the scalar path's in `alone`) against the reference
 * values ref[i]; bf16: the reference rounded. */
static void check_output(const char *what, const arr *vec, const arr *alone, const double *ref, size_t n) {
    double big = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(ref[i]) && fabs(ref[i]) > big) big = fabs(ref[i]);
    const double rel = vec->size == 2 ? 1.0 / 256 + 1e-5 : 1e-5;
    for (size_t i = 0; i < n; i++) {
        if (unwritten(vec, true, i) || unwritten(alone, false, i)) {
            FAILED("%s: element %zu not written", what, i);
            continue;
        }
        float a = get(vec, true, i), b = get(alone, false, i);
        if (bits_of(a) != bits_of(b)) FAILED("%s: element %zu: tiled %a, one at a time %a", what, i, a, b);
        double r = ref[i];
        bool ok = isnan(r) ? isnan(a) : isinf(r) ? a == r : fabs(a - r) <= 1e-5 * big + rel * fabs(r);
        if (!ok) FAILED("%s: element %zu: %.9g, float64 reference %.9g", what, i, a, r);
    }
}

static void run_case(void *so, const tlm_kernel_spec *s, int rows, bool bf16, uint64_t *rng) {
    const bool swiglu = s->kind == TLM_MLP_SWIGLU;
    const size_t n = (size_t)rows * (size_t)s->width, psize = bf16 ? 2 : 4;
    char sym[160], what[240];
    float *pg = malloc(n * sizeof *pg), *pu = malloc(n * sizeof *pu), *dh = malloc(n * sizeof *dh);
    uint16_t *pg16 = malloc(n * 2), *pu16 = malloc(n * 2);
    double *rh = malloc(n * sizeof *rh), *rdg = malloc(n * sizeof *rdg), *rdu = malloc(n * sizeof *rdu);
    if (!pg || !pu || !dh || !pg16 || !pu16 || !rh || !rdg || !rdu) abort();
    for (size_t i = 0; i < n; i++) {
        pg[i] = (float)test_uniform(rng, -6, 6), pu[i] = (float)test_uniform(rng, -6, 6);
        dh[i] = (float)test_uniform(rng, -2, 2);
    }
    /* a few special inputs, where the vectors and the tail meet too */
    const float special[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-30f};
    for (size_t j = 0; j < sizeof special / sizeof *special && j < n; j++) {
        size_t i = (j * 7 + n / 2) % n;
        (j % 2 ? pg : pu)[i] = special[j];
    }
    for (size_t i = 0; i < n; i++) {
        pg16[i] = tlm_f32_to_bf16(pg[i]), pu16[i] = tlm_f32_to_bf16(pu[i]);
        if (bf16) pg[i] = tlm_bf16_to_f32(pg16[i]), pu[i] = tlm_bf16_to_f32(pu16[i]);
        reference(swiglu, pg[i], pu[i], dh[i], &rh[i], &rdg[i], &rdu[i]);
    }
    arr G = arr_new(n, psize), U = arr_new(n, psize), H[2] = {arr_new(n, psize), arr_new(n, psize)};
    arr DH = arr_new(n, 4), DG[2] = {arr_new(n, psize), arr_new(n, psize)},
        DU[2] = {arr_new(n, psize), arr_new(n, psize)};
    const unsigned exact = (unsigned)((n + TLM_ACT_VECTOR - 1) / TLM_ACT_VECTOR + THREADS - 1) / THREADS;
    const unsigned grids[] = {1, exact, (unsigned)((n + THREADS - 1) / THREADS) + 3};
    char name[200], act_sym[160];
    tlm_kernel_symbol(s, TLM_ENTRY_ACT, act_sym, sizeof act_sym);
    strcat(act_sym, bf16 ? "_bf16" : "");
    snprintf(name, sizeof name, "emu_%s", act_sym);
    act_fn act = (act_fn)dlsym(so, name);
    tlm_kernel_symbol(s, TLM_ENTRY_ACT_GRAD, sym, sizeof sym);
    strcat(sym, bf16 ? "_bf16" : "");
    snprintf(name, sizeof name, "emu_%s", sym);
    grad_fn grad = (grad_fn)dlsym(so, name);
    if (!act || !grad) {
        FAILED("%s: no wrapper in the emulated source", name);
        goto out;
    }
    for (size_t k = 0; k < sizeof grids / sizeof *grids; k++) {
        for (int a = 0; a < 2; a++) { /* a = 1: aligned, tiled */
            bool al = a == 1;
            put(&G, al, bf16 ? (void *)pg16 : (void *)pg), put(&U, al, bf16 ? (void *)pu16 : (void *)pu);
            put(&DH, al, dh);
            fill_unwritten(&H[a], al), fill_unwritten(&DG[a], al), fill_unwritten(&DU[a], al);
            /* the one at a time path on one grid only (the largest): its loop is the old one */
            unsigned grid = al ? grids[k] : grids[2];
            act(grid, rows, swiglu ? at(&G, al) : NULL, at(&U, al), at(&H[a], al));
            grad(grid, rows, swiglu ? at(&G, al) : NULL, at(&U, al), at(&DH, al), swiglu ? at(&DG[a], al) : NULL,
                 at(&DU[a], al));
        }
        snprintf(what, sizeof what, "%s rows %d grid %u: h", act_sym, rows, grids[k]);
        check_output(what, &H[1], &H[0], rh, n);
        snprintf(what, sizeof what, "%s rows %d grid %u: d_pre_up", sym, rows, grids[k]);
        check_output(what, &DU[1], &DU[0], rdu, n);
        if (swiglu) {
            snprintf(what, sizeof what, "%s rows %d grid %u: d_pre_gate", sym, rows, grids[k]);
            check_output(what, &DG[1], &DG[0], rdg, n);
        }
    }
out:
    free(pg), free(pu), free(dh), free(pg16), free(pu16), free(rh), free(rdg), free(rdu);
    free(G.base), free(U.base), free(DH.base);
    for (int a = 0; a < 2; a++) free(H[a].base), free(DG[a].base), free(DU[a].base);
}

int main(void) {
    if (!*TLM_TEST_CXX) {
        printf("SKIP: no C++ compiler found when configuring\n");
        return 77;
    }
    uint64_t rng = test_seed();
    const tlm_kernel_spec specs[] = {
        {TLM_MLP_SWIGLU, 32, 45},
        {TLM_MLP_SWIGLU, 32, 64},
        {TLM_MLP_GELU, 32, 45},
        {TLM_MLP_GELU, 32, 64},
    };
    const int n_specs = (int)(sizeof specs / sizeof specs[0]), rows[] = {1, 5, 37};
    char *src = tlm_codegen_cuda_source(specs, n_specs), *err = NULL;
    kernel_lib lib;
    bool built = src && kernel_lib_build_emulated(&lib, TLM_TEST_CXX, TLM_TEST_SOURCE_DIR, src, specs, n_specs,
                                                  act_wrappers, &err);
    free(src);
    if (!built) {
        printf("FAIL: %s\n", err ? err : "no CUDA source");
        return 1;
    }
    for (int i = 0; i < n_specs; i++)
        for (size_t r = 0; r < sizeof rows / sizeof *rows; r++)
            for (int bf16 = 0; bf16 < 2; bf16++) run_case(lib.handle, &specs[i], rows[r], bf16, &rng);
    kernel_lib_close(&lib);
    printf("%s: %d failed comparisons\n", fails ? "FAIL" : "PASS", fails);
    return fails != 0;
}
