#include "mlp_check.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mlp_reference.h"

/* A fixed seed, so that a failure in CI is the same failure here; another
 * one from TLM_TEST_SEED (to explore). Printed when the test starts, on
 * every FAIL line and once more as the last line of the run. */
enum { DEFAULT_SEED = 1 };
static unsigned long long g_seed = DEFAULT_SEED;

static void print_seed_at_exit(void) {
    printf("seed %llu: TLM_TEST_SEED=%llu reproduces this run\n", g_seed, g_seed);
    fflush(stdout);
}

uint64_t test_seed(void) {
    const char *env = getenv("TLM_TEST_SEED");
    if (env && *env) {
        char *end;
        g_seed = strtoull(env, &end, 0);
        if (*end || env[0] == '-') {
            printf("FAIL: TLM_TEST_SEED=%s is not a seed (an unsigned integer)\n", env);
            exit(2);
        }
    }
    printf("seed %llu (%s; TLM_TEST_SEED=N for another)\n", g_seed, env && *env ? "from TLM_TEST_SEED" : "the default");
    static bool registered;
    if (!registered) registered = atexit(print_seed_at_exit) == 0;
    return g_seed;
}

/* splitmix64: tiny, and good enough to fill test matrices. */
static uint64_t next_u64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double test_uniform(uint64_t *rng, double lo, double hi) {
    return lo + (hi - lo) * (double)(next_u64(rng) >> 11) * 0x1.0p-53;
}

bool test_temp_file(char *path, size_t n, const char *stem) {
    const char *tmp = getenv("TMPDIR");
    snprintf(path, n, "%s/%s_XXXXXX", tmp && *tmp ? tmp : "/tmp", stem);
    int fd = mkstemp(path);
    if (fd < 0) {
        printf("FAIL mkstemp for %s: %s\n", path, strerror(errno));
        return false;
    }
    close(fd);
    return true;
}

/* A quiet NaN with a payload no arithmetic produces. */
static const uint32_t POISON_BITS = 0x7fc0dead;

static float *alloc_f(size_t n) { return malloc(sizeof(float) * (n ? n : 1)); }
static double *alloc_d(size_t n) { return calloc(n ? n : 1, sizeof(double)); }

static float *random_f(uint64_t *rng, size_t n, double scale) {
    float *p = alloc_f(n);
    for (size_t i = 0; i < n; i++) p[i] = (float)test_uniform(rng, -scale, scale);
    return p;
}
static float *poisoned_f(size_t n) {
    float *p = alloc_f(n);
    for (size_t i = 0; i < n; i++) memcpy(&p[i], &POISON_BITS, 4);
    return p;
}
static float *copy_f(const float *src, size_t n) {
    float *p = alloc_f(n);
    memcpy(p, src, sizeof(float) * n);
    return p;
}
static double *to_d(const float *src, size_t n) {
    double *p = alloc_d(n);
    for (size_t i = 0; i < n; i++) p[i] = src[i];
    return p;
}
static float *to_f(const double *src, size_t n) {
    float *p = alloc_f(n);
    for (size_t i = 0; i < n; i++) p[i] = (float)src[i];
    return p;
}

/* C[m,n] (+)= sum_k |A(m,k)| |B(k,n)|, A(m,k) = a[m*sam + k*sak], B likewise:
 * the magnitude of the terms each output sums, the scale its float rounding
 * error is proportional to. */
static void abs_matmul(int M, int N, int K, const double *a, long sam, long sak, const double *b, long sbk, long sbn,
                       double *c, int accumulate) {
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double s = accumulate ? c[(size_t)m * N + n] : 0.0;
            for (int k = 0; k < K; k++) s += fabs(a[m * sam + k * sak]) * fabs(b[k * sbk + n * sbn]);
            c[(size_t)m * N + n] = s;
        }
}

/* Accumulates kernel-vs-expected over the elements that must be written. */
typedef struct {
    const char *what;
    double diff2, ref2, scale2, max_abs;
    long bad;       /* NaN/inf where a number was due */
    long disturbed; /* elements outside the range that changed */
} compare;

/* stored - base is compared with want. When base != 0 (an accumulated
 * output) the stored float carries roundings of base + partial sums at the
 * magnitude of |stored| (one per block of rows the kernel adds in; a few for
 * these sizes), which are not the kernel's error: they would dominate
 * whenever |base| >> |delta|, so two ulps of |stored| are allowed for.
 * (Seed 1796214104 needed 1.5 ulps at D = W = 1, rows = 37.) */
static void cmp_value(compare *c, double stored, double base, double want, double scale) {
    if (!isfinite(stored)) {
        c->bad++;
        return;
    }
    double d = fabs(stored - base - want);
    if (base != 0.0) d = fmax(0.0, d - 0x1.0p-22 * fabs(stored));
    c->diff2 += d * d;
    c->ref2 += want * want;
    c->scale2 += scale * scale;
    if (d > c->max_abs) c->max_abs = d;
}

static void cmp_untouched(compare *c, const float *got, const float *before) {
    if (memcmp(got, before, 4) != 0) c->disturbed++;
}

/* Passes on the error relative to the terms' magnitude, which equals the
 * error relative to the result unless the sums cancel (a single-element
 * output of a few random terms easily does); both are printed. */
static int report(const tlm_kernel_spec *s, const mlp_case *mc, const char *entry, const compare *c) {
    double rel = sqrt(c->diff2 / fmax(c->ref2, 1e-300));
    double rel_terms = sqrt(c->diff2 / fmax(c->scale2, 1e-300));
    int ok = c->bad == 0 && c->disturbed == 0 && rel_terms <= MLP_CHECK_TOLERANCE;
    char seed[48] = "";
    if (!ok) snprintf(seed, sizeof seed, " (seed %llu)", g_seed);
    printf("%s %-6s D=%-4d W=%-4d rows=%-3d r=[%d,%d) j=[%d,%d) %-10s %-11s "
           "rel %.1e (to terms %.1e) max|err| %.1e%s%s%s\n",
           ok ? "ok  " : "FAIL", s->kind == TLM_MLP_SWIGLU ? "swiglu" : "gelu", s->d_model, s->width, mc->rows, mc->r0,
           mc->r1, mc->j0, mc->j1 <= 0 ? s->width + mc->j1 : mc->j1, entry, c->what, rel, rel_terms, c->max_abs,
           c->bad ? " (NaN/unwritten)" : "", c->disturbed ? " (wrote outside its range)" : "", seed);
    return !ok;
}

/* Compares rows [r0, r1) of a [rows, cols] buffer against want (+ base when
 * accumulating) and checks the other rows kept their `before` bits. */
static int check_rows(const tlm_kernel_spec *s, const mlp_case *mc, const char *entry, const char *what,
                      const float *got, const float *before, const double *want_delta, const double *scale, int cols) {
    compare c = {what, 0, 0, 0, 0, 0, 0};
    for (int r = 0; r < mc->rows; r++)
        for (int k = 0; k < cols; k++) {
            size_t i = (size_t)r * cols + k;
            if (r >= mc->r0 && r < mc->r1) {
                size_t j = (size_t)(r - mc->r0) * cols + k;
                cmp_value(&c, got[i], isnan(before[i]) ? 0.0 : before[i], want_delta[j], scale[j]);
            } else {
                cmp_untouched(&c, &got[i], &before[i]);
            }
        }
    return report(s, mc, entry, &c);
}

/* h = act(pre_gate, pre_up) over n x W (pre_gate NULL for GELU). */
static double *activations(tlm_mlp kind, const double *pg, const double *pu, size_t n) {
    double *h = alloc_d(n);
    for (size_t i = 0; i < n; i++) h[i] = ref_activation(kind, pg ? pg[i] : 0.0, pu[i]);
    return h;
}

static int check_fwd(kernel_lib *lib, const tlm_kernel_spec *s, const mlp_case *mc, uint64_t *rng) {
    tlm_mlp_fwd_fn fwd = (tlm_mlp_fwd_fn)kernel_lib_sym(lib, s, TLM_ENTRY_FWD);
    if (!fwd) return 1;
    int D = s->d_model, W = s->width, N = mc->rows, n = mc->r1 - mc->r0;
    int swiglu = s->kind == TLM_MLP_SWIGLU;
    float *x = random_f(rng, (size_t)N * D, 1.0);
    float *wg = swiglu ? random_f(rng, (size_t)W * D, 2.0 * sqrt(3.0 / D)) : NULL;
    float *wu = random_f(rng, (size_t)W * D, 2.0 * sqrt(3.0 / D));
    float *wd = random_f(rng, (size_t)D * W, sqrt(3.0 / W));
    float *pg = swiglu ? poisoned_f((size_t)N * W) : NULL;
    float *pu = poisoned_f((size_t)N * W);
    float *out = random_f(rng, (size_t)N * D, 1.0);
    float *pg0 = swiglu ? copy_f(pg, (size_t)N * W) : NULL;
    float *pu0 = copy_f(pu, (size_t)N * W), *out0 = copy_f(out, (size_t)N * D);

    fwd(mc->r0, mc->r1, x, wg, wu, wd, pg, pu, out);

    double *xd = to_d(x + (size_t)mc->r0 * D, (size_t)n * D);
    double *wgd = swiglu ? to_d(wg, (size_t)W * D) : NULL, *wud = to_d(wu, (size_t)W * D);
    double *wdd = to_d(wd, (size_t)D * W);
    double *rpg = alloc_d((size_t)n * W), *rpu = alloc_d((size_t)n * W);
    double *rout = alloc_d((size_t)n * D);
    ref_fwd(s->kind, D, W, n, xd, wgd, wud, wdd, swiglu ? rpg : NULL, rpu, rout);

    double *sg = alloc_d((size_t)n * W), *su = alloc_d((size_t)n * W);
    double *sout = alloc_d((size_t)n * D);
    double *h = activations(s->kind, swiglu ? rpg : NULL, rpu, (size_t)n * W);
    if (swiglu) abs_matmul(n, W, D, xd, D, 1, wgd, 1, D, sg, 0);
    abs_matmul(n, W, D, xd, D, 1, wud, 1, D, su, 0);
    abs_matmul(n, D, W, h, W, 1, wdd, 1, W, sout, 0);

    int fails = 0;
    if (swiglu) fails += check_rows(s, mc, "fwd", "pre_gate", pg, pg0, rpg, sg, W);
    fails += check_rows(s, mc, "fwd", "pre_up", pu, pu0, rpu, su, W);
    fails += check_rows(s, mc, "fwd", "out(+=)", out, out0, rout, sout, D);
    void *bufs[] = {x, wg, wu, wd, pg, pu, out, pg0, pu0, out0, xd, wgd, wud, wdd, rpg, rpu, rout, sg, su, sout, h};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    return fails;
}

/* Realistic backward inputs: pre-activations from the reference forward
 * (rounded to float, as the kernels would have stored them). */
typedef struct {
    float *x, *wg, *wu, *wd, *pg, *pu, *dout;
    double *xd, *wgd, *wud, *wdd, *pgd, *pud, *doutd;
} bwd_inputs;

static void make_bwd_inputs(bwd_inputs *b, const tlm_kernel_spec *s, int N, uint64_t *rng) {
    int D = s->d_model, W = s->width, swiglu = s->kind == TLM_MLP_SWIGLU;
    memset(b, 0, sizeof *b);
    b->x = random_f(rng, (size_t)N * D, 1.0);
    b->wg = swiglu ? random_f(rng, (size_t)W * D, 2.0 * sqrt(3.0 / D)) : NULL;
    b->wu = random_f(rng, (size_t)W * D, 2.0 * sqrt(3.0 / D));
    b->wd = random_f(rng, (size_t)D * W, sqrt(3.0 / W));
    b->dout = random_f(rng, (size_t)N * D, 1.0);
    b->xd = to_d(b->x, (size_t)N * D);
    b->wgd = swiglu ? to_d(b->wg, (size_t)W * D) : NULL;
    b->wud = to_d(b->wu, (size_t)W * D);
    b->wdd = to_d(b->wd, (size_t)D * W);
    b->doutd = to_d(b->dout, (size_t)N * D);
    double *pg = alloc_d((size_t)N * W), *pu = alloc_d((size_t)N * W);
    double *out = alloc_d((size_t)N * D);
    ref_fwd(s->kind, D, W, N, b->xd, b->wgd, b->wud, b->wdd, swiglu ? pg : NULL, pu, out);
    b->pg = swiglu ? to_f(pg, (size_t)N * W) : NULL;
    b->pu = to_f(pu, (size_t)N * W);
    b->pgd = swiglu ? to_d(b->pg, (size_t)N * W) : NULL;
    b->pud = to_d(b->pu, (size_t)N * W);
    free(pg);
    free(pu);
    free(out);
}

static void free_bwd_inputs(bwd_inputs *b) {
    void *bufs[] = {b->x,  b->wg,  b->wu,  b->wd,  b->pg,  b->pu,  b->dout,
                    b->xd, b->wgd, b->wud, b->wdd, b->pgd, b->pud, b->doutd};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
}

/* bwd_data leaves h = act(pre_gate, pre_up) in pre_up's rows [r0, r1) for
 * bwd_weight, and the other rows as they were (before). */
static int check_h_left(const tlm_kernel_spec *s, const mlp_case *mc, const float *pu, const float *before,
                        const double *pgd, const double *pud) {
    compare c = {"pre_up=h", 0, 0, 0, 0, 0, 0};
    for (int r = 0; r < mc->rows; r++)
        for (int k = 0; k < s->width; k++) {
            size_t i = (size_t)r * s->width + k;
            if (r < mc->r0 || r >= mc->r1) {
                cmp_untouched(&c, &pu[i], &before[i]);
                continue;
            }
            double h = ref_activation(s->kind, pgd ? pgd[i] : 0.0, pud[i]);
            cmp_value(&c, pu[i], 0.0, h, fabs(h));
        }
    return report(s, mc, "bwd_data", &c);
}

static int check_bwd_data(kernel_lib *lib, const tlm_kernel_spec *s, const mlp_case *mc, uint64_t *rng) {
    tlm_mlp_bwd_data_fn bwd = (tlm_mlp_bwd_data_fn)kernel_lib_sym(lib, s, TLM_ENTRY_BWD_DATA);
    if (!bwd) return 1;
    int D = s->d_model, W = s->width, N = mc->rows, n = mc->r1 - mc->r0;
    int swiglu = s->kind == TLM_MLP_SWIGLU;
    bwd_inputs in;
    make_bwd_inputs(&in, s, N, rng);
    float *dpg = swiglu ? poisoned_f((size_t)N * W) : NULL, *dpu = poisoned_f((size_t)N * W);
    float *dx = poisoned_f((size_t)N * D);
    float *dpg0 = swiglu ? copy_f(dpg, (size_t)N * W) : NULL;
    float *dpu0 = copy_f(dpu, (size_t)N * W), *dx0 = copy_f(dx, (size_t)N * D);
    float *pg0 = swiglu ? copy_f(in.pg, (size_t)N * W) : NULL, *pu0 = copy_f(in.pu, (size_t)N * W);

    bwd(mc->r0, mc->r1, in.x, in.wg, in.wu, in.wd, in.pg, in.pu, in.dout, dpg, dpu, dx);

    size_t rw = (size_t)mc->r0 * W;
    double *rdpg = alloc_d((size_t)n * W), *rdpu = alloc_d((size_t)n * W);
    double *rdx = alloc_d((size_t)n * D);
    ref_bwd_data(s->kind, D, W, n, in.wgd, in.wud, in.wdd, swiglu ? in.pgd + rw : NULL, in.pud + rw,
                 in.doutd + (size_t)mc->r0 * D, swiglu ? rdpg : NULL, rdpu, rdx);
  /* d_pre_* = dh * factor: scale by the magnitude of dh's terms. */
    double *sdh = alloc_d((size_t)n * W), *sdpg = alloc_d((size_t)n * W);
    double *sdpu = alloc_d((size_t)n * W), *sdx = alloc_d((size_t)n * D);
    abs_matmul(n, W, D, in.doutd + (size_t)mc->r0 * D, D, 1, in.wdd, W, 1, sdh, 0);
    for (size_t i = 0; i < (size_t)n * W; i++) {
        double fg, fu;
        ref_activation_grad(s->kind, swiglu ? in.pgd[rw + i] : 0.0, in.pud[rw + i], &fg, &fu);
        sdpg[i] = sdh[i] * fabs(fg);
        sdpu[i] = sdh[i] * fabs(fu);
    }
    if (swiglu) abs_matmul(n, D, W, rdpg, W, 1, in.wgd, D, 1, sdx, 0);
    abs_matmul(n, D, W, rdpu, W, 1, in.wud, D, 1, sdx, swiglu);

    int fails = 0;
    if (swiglu) fails += check_rows(s, mc, "bwd_data", "d_pre_gate", dpg, dpg0, rdpg, sdpg, W);
    fails += check_rows(s, mc, "bwd_data", "d_pre_up", dpu, dpu0, rdpu, sdpu, W);
    fails += check_rows(s, mc, "bwd_data", "dx", dx, dx0, rdx, sdx, D);
    fails += check_h_left(s, mc, in.pu, pu0, in.pgd, in.pud);
    if (swiglu) {
        compare kept = {"pre_gate(kept)", 0, 0, 0, 0, 0, 0};
        for (size_t i = 0; i < (size_t)N * W; i++) cmp_untouched(&kept, &in.pg[i], &pg0[i]);
        fails += report(s, mc, "bwd_data", &kept);
    }
    void *bufs[] = {dpg, dpu, dx, dpg0, dpu0, dx0, rdpg, rdpu, rdx, sdh, sdpg, sdpu, sdx, pg0, pu0};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free_bwd_inputs(&in);
    return fails;
}

/* dw is [rows_of_w, cols_of_w]; the owned slice is rows [j0,j1) when
 * by_row, else columns [j0,j1). */
static int check_dw(const tlm_kernel_spec *s, const mlp_case *mc, const char *what, const float *got,
                    const float *before, const double *delta, const double *scale, int w_rows, int w_cols, int by_row,
                    int j0, int j1) {
    compare c = {what, 0, 0, 0, 0, 0, 0};
    for (int a = 0; a < w_rows; a++)
        for (int b = 0; b < w_cols; b++) {
            size_t i = (size_t)a * w_cols + b;
            int j = by_row ? a : b;
            if (j >= j0 && j < j1) cmp_value(&c, got[i], before[i], delta[i], scale[i]);
            else cmp_untouched(&c, &got[i], &before[i]);
        }
    return report(s, mc, "bwd_weight", &c);
}

static int check_bwd_weight(kernel_lib *lib, const tlm_kernel_spec *s, const mlp_case *mc, uint64_t *rng) {
    tlm_mlp_bwd_weight_fn bwd = (tlm_mlp_bwd_weight_fn)kernel_lib_sym(lib, s, TLM_ENTRY_BWD_WEIGHT);
    if (!bwd) return 1;
    int D = s->d_model, W = s->width, N = mc->rows, swiglu = s->kind == TLM_MLP_SWIGLU;
    int j0 = mc->j0, j1 = mc->j1 <= 0 ? W + mc->j1 : mc->j1;
    bwd_inputs in;
    make_bwd_inputs(&in, s, N, rng);
  /* Gradients of pre-activations at a realistic scale, from the reference. */
    double *dpgd = alloc_d((size_t)N * W), *dpud = alloc_d((size_t)N * W);
    double *dxd = alloc_d((size_t)N * D);
    ref_bwd_data(s->kind, D, W, N, in.wgd, in.wud, in.wdd, in.pgd, in.pud, in.doutd, swiglu ? dpgd : NULL, dpud, dxd);
    float *dpg = swiglu ? to_f(dpgd, (size_t)N * W) : NULL, *dpu = to_f(dpud, (size_t)N * W);
    double *dpg_in = swiglu ? to_d(dpg, (size_t)N * W) : NULL;
    double *dpu_in = to_d(dpu, (size_t)N * W);
  /* Accumulation: start from values of the same order as one step's sum. */
    float *dwg = swiglu ? random_f(rng, (size_t)W * D, 1.0) : NULL;
    float *dwu = random_f(rng, (size_t)W * D, 1.0), *dwd = random_f(rng, (size_t)D * W, 1.0);
    float *dwg0 = swiglu ? copy_f(dwg, (size_t)W * D) : NULL;
    float *dwu0 = copy_f(dwu, (size_t)W * D), *dwd0 = copy_f(dwd, (size_t)D * W);
  /* What bwd_data leaves: h in pre_up; pre_gate, not read, poisoned. */
    double *h = activations(s->kind, in.pgd, in.pud, (size_t)N * W);
    float *hf = to_f(h, (size_t)N * W), *pg_unread = swiglu ? poisoned_f((size_t)N * W) : NULL;

    bwd(N, j0, j1, in.x, pg_unread, hf, in.dout, dpg, dpu, dwg, dwu, dwd);

    double *rg = alloc_d((size_t)W * D), *ru = alloc_d((size_t)W * D);
    double *rd = alloc_d((size_t)D * W);
    ref_bwd_weight(s->kind, D, W, N, in.xd, in.pgd, in.pud, in.doutd, dpg_in, dpu_in, rg, ru, rd);
    double *sg = alloc_d((size_t)W * D), *su = alloc_d((size_t)W * D);
    double *sd = alloc_d((size_t)D * W);
    if (swiglu) abs_matmul(W, D, N, dpg_in, 1, W, in.xd, D, 1, sg, 0);
    abs_matmul(W, D, N, dpu_in, 1, W, in.xd, D, 1, su, 0);
    abs_matmul(D, W, N, in.doutd, 1, D, h, W, 1, sd, 0);
    int fails = 0;
    if (swiglu) fails += check_dw(s, mc, "dw_gate(+=)", dwg, dwg0, rg, sg, W, D, 1, j0, j1);
    fails += check_dw(s, mc, "dw_up(+=)", dwu, dwu0, ru, su, W, D, 1, j0, j1);
    fails += check_dw(s, mc, "dw_down(+=)", dwd, dwd0, rd, sd, D, W, 0, j0, j1);
    void *bufs[] = {dpgd, dpud, dxd, dpg, dpu, dpg_in, dpu_in, dwg, dwu, dwd, dwg0,
                    dwu0, dwd0, rg,  ru,  rd,  sg,     su,     sd,  h,   hf,  pg_unread};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free_bwd_inputs(&in);
    return fails;
}

int mlp_check_spec(kernel_lib *lib, const tlm_kernel_spec *s, const mlp_case *c, uint64_t *rng) {
    return check_fwd(lib, s, c, rng) + check_bwd_data(lib, s, c, rng) + check_bwd_weight(lib, s, c, rng);
}

/* With d_model == width, w_down = I and out = 0, fwd's out is h bit for
 * bit: each element sums h_j * 1 and products with 0, which add nothing.
 * bwd_data must leave those bits over pre_up (a zero's sign aside), the
 * bits bwd_weight then reads: the activation it hands over is the
 * forward's, not one within rounding of it. */
int mlp_check_h_bits(kernel_lib *lib, const tlm_kernel_spec *s, int rows, uint64_t *rng) {
    tlm_mlp_fwd_fn fwd = (tlm_mlp_fwd_fn)kernel_lib_sym(lib, s, TLM_ENTRY_FWD);
    tlm_mlp_bwd_data_fn bwd = (tlm_mlp_bwd_data_fn)kernel_lib_sym(lib, s, TLM_ENTRY_BWD_DATA);
    if (!fwd || !bwd || s->d_model != s->width) {
        printf("FAIL h bits: needs the kernels of a spec with d_model == width\n");
        return 1;
    }
    int D = s->d_model, swiglu = s->kind == TLM_MLP_SWIGLU;
    size_t nd = (size_t)rows * D, dd = (size_t)D * D;
    float *x = random_f(rng, nd, 1.0), *dout = random_f(rng, nd, 1.0);
    float *wg = swiglu ? random_f(rng, dd, 2.0 * sqrt(3.0 / D)) : NULL, *wu = random_f(rng, dd, 2.0 * sqrt(3.0 / D));
    float *eye = calloc(dd, sizeof(float)), *out = calloc(nd, sizeof(float));
    for (int i = 0; i < D; i++) eye[(size_t)i * D + i] = 1.0f;
    float *pg = swiglu ? poisoned_f(nd) : NULL, *pu = poisoned_f(nd);
    float *dpg = swiglu ? poisoned_f(nd) : NULL, *dpu = poisoned_f(nd), *dx = poisoned_f(nd);
    fwd(0, rows, x, wg, wu, eye, pg, pu, out);
    bwd(0, rows, x, wg, wu, eye, pg, pu, dout, dpg, dpu, dx);
    long differ = 0;
    for (size_t i = 0; i < nd; i++) differ += !(pu[i] == out[i]); /* NaN differs too */
    printf("%s %-6s D=W=%-4d rows=%-3d bwd_data   pre_up=h    %ld of %zu differ from fwd's h\n",
           differ ? "FAIL" : "ok  ", swiglu ? "swiglu" : "gelu", D, rows, differ, nd);
    void *bufs[] = {x, dout, wg, wu, eye, out, pg, pu, dpg, dpu, dx};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    return differ != 0;
}
