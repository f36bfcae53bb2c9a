/* mlp_bench: GFLOP/s of the generated MLP kernels next to OpenBLAS sgemm on
 * the same GEMM shapes, measured in the same run, on 1 and 2 threads; then
 * the codegen time of a 24-layer model with 24 distinct widths.
 *
 *   mlp_bench [--reps N] [--kind swiglu|gelu] [--rows R] [--d D]
 *             [--widths W1,W2,...] [--threads T (only T)] [--skip-codegen 1]
 *             [--cpu NAME] [--profile fwd|bwd_data|bwd_weight] [--clock wall|thread]
 *             [--versus 'VAR=VALUE;...']
 *
 * OpenBLAS runs the kernel set it picks for the CPU, or the one
 * OPENBLAS_CORETYPE names (the header says which; some machines set it for
 * every process: `env -u OPENBLAS_CORETYPE` gives OpenBLAS's own pick).
 * TLM_CODEGEN_BLOCKING="mr,nv,kc,mc" tries other blockings.
 *
 * --versus 'VAR=VALUE;...' compares two builds of the kernels, A with the
 * environment as it is and B with these assignments made before codegen
 * (TLM_CODEGEN_BLOCKING, or a knob being tried out), one thread, each
 * repetition timing A, B and OpenBLAS back to back: a machine's drift
 * then moves all three alike. On a shared 2-core EPYC, A against an
 * identical B came out within 0.5% per entry, where two separate runs of
 * the ratio table differ by 2-3%.
 *
 * Defaults are the tiny example (examples/tiny.tlm): SwiGLU, d_model 256,
 * rows = batch 8 x context 256, the tapered widths below. FLOPs count only
 * the GEMMs (2*R*D*W each); our times also include the activation and its
 * gradient, which the per-entry OpenBLAS columns get for free (precomputed,
 * untimed). The "fused" column is the other measure: our three
 * entries against OpenBLAS's GEMMs plus the separate activation passes an
 * unfused MLP runs (h = act(pre) after the forward's GEMMs, the
 * activation's gradient after dh = dout Wd; the runtime's own vectorised
 * loops, runtime/ops/activations.c). The "twin" column is what a model
 * runs when tlmc sends a width to OpenBLAS: the BLAS twin itself
 * (runtime/ops/mlp.c, h formed in tiles between the GEMMs, no [rows, width]
 * buffer), our three entries against its three. A width tlmc's rule sends to the BLAS
 * twin (codegen/cpu_mlp_choice.c) is marked "blas" and left out of the
 * totals: a model never runs the generated kernels there.
 * Before the tables: the core's multiply-add peak at the kernels' vector
 * width (runtime/model/cpu_peak.c); after each thread count's totals, every entry's
 * speed as a share of it (threads x the one-core peak), ours and OpenBLAS's,
 * and the fused ratio's ceiling (OpenBLAS + activation passes against the
 * GEMM flops at the peak): a target above that ceiling no kernel can meet.
 * Threads split rows (fwd, bwd_data) or widths (bwd_weight) with OpenMP;
 * OpenBLAS threads itself (openblas_set_num_threads). */
#include <cblas.h>
#include <dlfcn.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <string.h>
#include <time.h>

#include "bench_args.h"
#include "codegen.h"
#include "cpu_targets.h"
#include "cpu_peak.h"
#include "kernel_loader.h"
#include "tlm_rt/ops.h"

/* --clock thread times the calling thread's CPU time instead of the wall
 * clock: on a shared machine a repetition the scheduler interrupts is then
 * not charged for the interruption. One thread only (OpenMP's and
 * OpenBLAS's single-threaded calls run on the calling thread). */
static clockid_t bench_clock = CLOCK_MONOTONIC;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(bench_clock, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Buffers as the runtime allocates its arena and parameters
 * (runtime/model/model.c): from 2 MiB on, in transparent huge pages where
 * the kernel gives them on request, for both sides of every ratio. */
static float *floats(size_t n) {
    enum { HUGE = 2 << 20 };
    const size_t bytes = sizeof(float) * (n ? n : 1);
    void *p = NULL;
    if (posix_memalign(&p, bytes >= HUGE ? HUGE : 64, bytes) != 0) p = NULL;
#ifdef MADV_HUGEPAGE
    if (p && bytes >= HUGE) (void)madvise(p, (bytes + HUGE - 1) / HUGE * HUGE, MADV_HUGEPAGE);
#endif
    if (!p) { /* a large --rows, --d or width: say so rather than crash */
        fprintf(stderr, "mlp_bench: out of memory (%zu floats)\n", n);
        exit(1);
    }
    return p;
}

static float *random_buf(size_t n, unsigned *seed, float scale) {
    float *p = floats(n);
    for (size_t i = 0; i < n; i++) p[i] = scale * ((float)rand_r(seed) / (float)RAND_MAX - 0.5f);
    return p;
}

static float *copy_buf(const float *src, size_t n) { return memcpy(floats(n), src, sizeof(float) * n); }

typedef struct {
    tlm_kernel_spec spec;
    int rows;
    float *x, *wg, *wu, *wd, *pg, *pu, *out, *dout, *dpg, *dpu, *dx, *dwg, *dwu, *dwd, *h;
    float *pu0; /* pre_up as fwd left it: bwd_data overwrites pre_up with h */
    float *dx_act; /* the activation pass's d_pre_up (dh stays in dpu for the next repetition) */
    tlm_mlp_fwd_fn fwd;
    tlm_mlp_bwd_data_fn bwd_data;
    tlm_mlp_bwd_weight_fn bwd_weight;
    int threads;
} layer;

enum { FWD, BWD_DATA, BWD_WEIGHT, N_ENTRIES };
static const char *entry_names[N_ENTRIES] = {"fwd", "bwd_data", "bwd_weight"};

/* [lo, hi) of n split over `parts`, boundaries on multiples of 16. */
static void split(int64_t n, int part, int parts, int64_t *lo, int64_t *hi) {
    *lo = (n * part / parts) / 16 * 16;
    *hi = part + 1 == parts ? n : (n * (part + 1) / parts) / 16 * 16;
}

/* Hand a call what a training step would, untimed. The generated bwd_data
 * overwrites pre_up with h (codegen/codegen.h), so each call starts from
 * the pre-activations again (repeated, h of h of ... would sink into
 * subnormals, which are slow), and the generated bwd_weight finds an h
 * there; the twin, OpenBLAS and the activation passes find the
 * pre-activations. Every call timed gets one such copy first, so each
 * finds the same share of pre_up in cache. */
static void set_pre_up(layer *L, const float *from) {
    memcpy(L->pu, from, sizeof(float) * (size_t)L->rows * (size_t)L->spec.width);
}
static void ready_generated(layer *L, int entry) { set_pre_up(L, entry == BWD_WEIGHT ? L->h : L->pu0); }
static void ready_other(layer *L, int entry) {
    (void)entry;
    set_pre_up(L, L->pu0);
}

static void run_ours(layer *L, int entry) {
    int64_t R = L->rows, W = L->spec.width;
#pragma omp parallel num_threads(L->threads)
    {
        int64_t lo, hi;
        int t = omp_get_thread_num(), n = omp_get_num_threads();
        split(entry == BWD_WEIGHT ? W : R, t, n, &lo, &hi);
        if (entry == FWD) L->fwd(lo, hi, L->x, L->wg, L->wu, L->wd, L->pg, L->pu, L->out);
        else if (entry == BWD_DATA)
            L->bwd_data(lo, hi, L->x, L->wg, L->wu, L->wd, L->pg, L->pu, L->dout, L->dpg, L->dpu, L->dx);
        else L->bwd_weight(R, lo, hi, L->x, L->pg, L->pu, L->dout, L->dpg, L->dpu, L->dwg, L->dwu, L->dwd);
    }
}

/* The same GEMMs through cblas (row-major; weights [out, in]). */
static void run_blas(layer *L, int entry) {
    int R = L->rows, D = L->spec.d_model, W = L->spec.width;
    int swiglu = L->spec.kind == TLM_MLP_SWIGLU;
    openblas_set_num_threads(L->threads);
    if (entry == FWD) {
        if (swiglu) cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, W, D, 1, L->x, D, L->wg, D, 0, L->pg, W);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, W, D, 1, L->x, D, L->wu, D, 0, L->pu, W);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, D, W, 1, L->h, W, L->wd, W, 1, L->out, D);
    } else if (entry == BWD_DATA) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, R, W, D, 1, L->dout, D, L->wd, W, 0, L->dpu, W);
        if (swiglu)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, R, D, W, 1, L->dpg, W, L->wg, D, 0, L->dx, D);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, R, D, W, 1, L->dpu, W, L->wu, D, swiglu ? 1 : 0, L->dx,
                    D);
    } else {
        if (swiglu) cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, W, D, R, 1, L->dpg, W, L->x, D, 1, L->dwg, D);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, W, D, R, 1, L->dpu, W, L->x, D, 1, L->dwu, D);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, D, W, R, 1, L->dout, D, L->h, W, 1, L->dwd, W);
    }
}

/* The unfused MLP's elementwise passes: ACT_FWD h = act(pre_gate, pre_up),
 * ACT_BWD the activation's gradient from dh (held in d_pre_up). */
enum { ACT_FWD, ACT_BWD };
static void run_activation(layer *L, int pass) {
    size_t n = (size_t)L->rows * (size_t)L->spec.width;
    omp_set_num_threads(L->threads);
    if (L->spec.kind == TLM_MLP_SWIGLU) {
        if (pass == ACT_FWD) tlm_swiglu_forward(L->h, L->pg, L->pu, n);
        else tlm_swiglu_backward(L->dpg, L->dx_act, L->dpu, L->pg, L->pu, n);
    } else {
        if (pass == ACT_FWD) tlm_gelu_forward(L->h, L->pu, n);
        else tlm_gelu_backward(L->dx_act, L->dpu, L->pu, n);
    }
}

/* The BLAS twin's entries over all rows and widths (OpenBLAS threads it). */
static void run_twin(layer *L, int entry) {
    int R = L->rows, C = L->spec.d_model, F = L->spec.width;
    openblas_set_num_threads(L->threads);
    omp_set_num_threads(L->threads);
    if (L->spec.kind == TLM_MLP_SWIGLU) {
        if (entry == FWD) tlm_mlp_swiglu_forward(C, F, 0, R, L->x, L->wg, L->wu, L->wd, L->pg, L->pu, L->out);
        else if (entry == BWD_DATA)
            tlm_mlp_swiglu_backward_data(C, F, 0, R, L->x, L->wg, L->wu, L->wd, L->pg, L->pu, L->dout, L->dpg, L->dpu,
                                         L->dx);
        else
            tlm_mlp_swiglu_backward_weight(C, F, R, 0, F, L->x, L->pg, L->pu, L->dout, L->dpg, L->dpu, L->dwg, L->dwu,
                                           L->dwd);
    } else {
        if (entry == FWD) tlm_mlp_gelu_forward(C, F, 0, R, L->x, L->wu, L->wd, L->pu, L->out);
        else if (entry == BWD_DATA)
            tlm_mlp_gelu_backward_data(C, F, 0, R, L->x, L->wu, L->wd, L->pu, L->dout, L->dpu, L->dx);
        else tlm_mlp_gelu_backward_weight(C, F, R, 0, F, L->x, L->pu, L->dout, L->dpu, L->dwu, L->dwd);
    }
}

/* The best of reps timed calls, each after ready(). */
static double best_of(layer *L, int entry, int reps, void (*run)(layer *, int), void (*ready)(layer *, int)) {
    ready(L, entry);
    run(L, entry); /* warm up caches, page in buffers, start threads */
    double best = 1e30;
    for (int i = 0; i < reps; i++) {
        ready(L, entry);
        double t0 = now_s();
        run(L, entry);
        double t = now_s() - t0;
        if (t < best) best = t;
    }
    return best;
}

static void layer_init(layer *L, tlm_kernel_spec spec, int rows, kernel_lib *lib, unsigned *seed) {
    memset(L, 0, sizeof *L);
    L->spec = spec;
    L->rows = rows;
    size_t R = (size_t)rows, D = (size_t)spec.d_model, W = (size_t)spec.width;
    L->x = random_buf(R * D, seed, 2.0f);
    L->wg = random_buf(W * D, seed, 0.1f);
    L->wu = random_buf(W * D, seed, 0.1f);
    L->wd = random_buf(D * W, seed, 0.1f);
    L->pg = random_buf(R * W, seed, 1.0f);
    L->pu = random_buf(R * W, seed, 1.0f);
    L->pu0 = copy_buf(L->pu, R * W);
    L->h = random_buf(R * W, seed, 1.0f);
    L->dx_act = random_buf(R * W, seed, 1.0f);
    L->out = random_buf(R * D, seed, 1.0f);
    L->dout = random_buf(R * D, seed, 1.0f);
    L->dpg = random_buf(R * W, seed, 1.0f);
    L->dpu = random_buf(R * W, seed, 1.0f);
    L->dx = random_buf(R * D, seed, 1.0f);
    L->dwg = random_buf(W * D, seed, 1.0f);
    L->dwu = random_buf(W * D, seed, 1.0f);
    L->dwd = random_buf(D * W, seed, 1.0f);
    L->fwd = (tlm_mlp_fwd_fn)kernel_lib_sym(lib, &spec, TLM_ENTRY_FWD);
    L->bwd_data = (tlm_mlp_bwd_data_fn)kernel_lib_sym(lib, &spec, TLM_ENTRY_BWD_DATA);
    L->bwd_weight = (tlm_mlp_bwd_weight_fn)kernel_lib_sym(lib, &spec, TLM_ENTRY_BWD_WEIGHT);
}

static void layer_free(layer *L) {
    float *bufs[] = {L->x,   L->wg, L->wu,  L->wd,  L->pg,  L->pu, L->out,    L->dout, L->dpg,
                     L->dpu, L->dx, L->dwg, L->dwu, L->dwd, L->h,  L->dx_act, L->pu0};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
}

/* --profile ENTRY: only the generated kernels of that entry, 20 x reps calls
 * per width, for `perf record`. The kernel library stays on disk (its path
 * is printed; delete it afterwards) so that perf report can name the
 * kernels' functions: tile, packing, epilogue. */
static int profile_entry(kernel_lib *lib, const tlm_kernel_spec *specs, int n, int rows, int threads, int entry,
                         int reps) {
    unsigned seed = 1234;
    for (int w = 0; w < n; w++) {
        layer L;
        layer_init(&L, specs[w], rows, lib, &seed);
        L.threads = threads;
        ready_generated(&L, entry);
        run_ours(&L, entry);
        double total = 0;
        for (int i = 0; i < 20 * reps; i++) {
            ready_generated(&L, entry);
            double t0 = now_s();
            run_ours(&L, entry);
            total += now_s() - t0;
        }
        double per_call = total / (20.0 * reps);
        double flops =
            2.0 * (specs[w].kind == TLM_MLP_SWIGLU ? 3 : 2) * rows * (double)specs[w].d_model * specs[w].width;
        printf("%s, width %d, %d thread%s: %.3f ms per call, %.0f GFLOP/s\n", entry_names[entry], specs[w].width,
               threads, threads > 1 ? "s" : "", per_call * 1e3, flops / per_call * 1e-9);
        layer_free(&L);
    }
    printf("kernels kept for perf report in %s (delete it afterwards)\n", lib->dir);
    if (lib->handle) dlclose(lib->handle);
    return 0;
}

/* --versus: A = `lib` (the environment as it was), B = kernels built after
 * the assignments in `assigns` ("VAR=VALUE;..."); best of `reps` per entry,
 * A, B and OpenBLAS timed in turn in every repetition. */
static int versus(kernel_lib *lib, const tlm_kernel_spec *specs, int n, int rows, int reps, const char *assigns,
                  const tlm_codegen_options *opt) {
    char *list = strdup(assigns);
    for (char *save = NULL, *tok = strtok_r(list, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq || eq == tok) {
            fprintf(stderr, "mlp_bench: --versus takes 'VAR=VALUE;...', not '%s'\n", tok);
            free(list);
            return 2;
        }
        *eq = 0;
        setenv(tok, eq + 1, 1);
    }
    free(list);
    kernel_lib lib_b;
    char *err = NULL;
    if (!kernel_lib_build(&lib_b, specs, n, opt, &err)) {
        fprintf(stderr, "codegen of B failed: %s\n", err);
        free(err);
        return 1;
    }
    printf("A: the environment as it was; B: %s. Milliseconds, best of %d, 1 thread; speed-up B/A; each against "
           "OpenBLAS (its time / ours)\n%5s",
           assigns, reps, "width");
    for (int e = 0; e < N_ENTRIES; e++) printf(" | %-10s     A      B   B/A  A/bl  B/bl", entry_names[e]);
    printf("\n");
    double sum[3][N_ENTRIES] = {{0}}; /* A, B, OpenBLAS */
    unsigned seed = 1234;
    for (int w = 0; w < n; w++) {
        /* each its own buffers (OpenBLAS's too), and the order of the three
         * rotating: timed on A's buffers right after OpenBLAS had used them, A
         * ran 2-3% faster than the same kernels as B */
        layer A, B, O;
        unsigned seed_b = seed, seed_o = seed;
        layer_init(&A, specs[w], rows, lib, &seed);
        layer_init(&B, specs[w], rows, &lib_b, &seed_b);
        layer_init(&O, specs[w], rows, lib, &seed_o);
        A.threads = B.threads = O.threads = 1;
        printf("%5d", specs[w].width);
        for (int e = 0; e < N_ENTRIES; e++) {
            double best[3] = {1e30, 1e30, 1e30};
            for (int r = -1; r < reps; r++) { /* r = -1 warms up */
                layer *who[3] = {&A, &B, &O};
                for (int turn = 0; turn < 3; turn++) {
                    const int i = (turn + r + 1) % 3;
                    if (i < 2) ready_generated(who[i], e);
                    else ready_other(&O, e);
                    double t0 = now_s();
                    if (i < 2) run_ours(who[i], e);
                    else run_blas(&O, e);
                    double t = now_s() - t0;
                    if (r >= 0 && t < best[i]) best[i] = t;
                }
            }
            for (int i = 0; i < 3; i++) sum[i][e] += best[i];
            printf(" | %10s %6.2f %6.2f %5.3f %5.3f %5.3f", "", best[0] * 1e3, best[1] * 1e3, best[0] / best[1],
                   best[2] / best[0], best[2] / best[1]);
        }
        printf("\n");
        layer_free(&A);
        layer_free(&B);
        layer_free(&O);
    }
    double all[3] = {0};
    for (int e = 0; e < N_ENTRIES; e++) {
        printf("%-10s: B/A %.3f; against OpenBLAS A %.3f, B %.3f\n", entry_names[e], sum[0][e] / sum[1][e],
               sum[2][e] / sum[0][e], sum[2][e] / sum[1][e]);
        for (int i = 0; i < 3; i++) all[i] += sum[i][e];
    }
    printf("%-10s: B/A %.3f; against OpenBLAS A %.3f, B %.3f\n", "all", all[0] / all[1], all[2] / all[0],
           all[2] / all[1]);
    kernel_lib_close(&lib_b);
    kernel_lib_close(lib);
    return 0;
}

/* The one-core multiply-add peak at the kernels' vector width. */
static double core_peak(const char *cpu, int reps) {
    cpu_target t;
    char *err = NULL;
    if (!cpu_target_resolve(cpu, &t, &err)) {
        free(err);
        return 0;
    }
    double peak = tlm_cpu_fma_peak_gflops(t.vl, 1, bench_clock, reps);
    if (peak > 0) printf("core peak: %.0f GFLOP/s (multiply-adds on %d-float vectors, one thread)\n", peak, t.vl);
    cpu_target_dispose(&t);
    return peak;
}

/* Each entry's speed as a share of the peak (`threads` cores), and the
 * fused ratio's ceiling: OpenBLAS's GEMMs plus the activation passes
 * against the same flops at the peak, which no kernel can beat. */
static void print_against_peak(double peak, double flops, const double *ours, const double *blas, double t_blas,
                               double act) {
    double t_peak = flops / (peak * 1e9);
    printf("%5s | of the peak:", "");
    for (int e = 0; e < N_ENTRIES; e++)
        printf(" %s ours %.0f%% OpenBLAS %.0f%%;", entry_names[e], 100 * t_peak / N_ENTRIES / ours[e],
               100 * t_peak / N_ENTRIES / blas[e]);
    printf(" the fused ratio's ceiling %.2f\n", (t_blas + act) / t_peak);
}

/* Codegen (and link) time of a 24-layer model with 24 distinct widths: a
 * fixed model, whatever --d and --widths say, for --cpu's target. */
static int time_codegen_24(tlm_mlp kind, const char *cpu) {
    tlm_kernel_spec specs[24];
    for (int i = 0; i < 24; i++) specs[i] = (tlm_kernel_spec){kind, 1024, 1536 + 112 * i};
    kernel_lib lib;
    char *err = NULL;
    tlm_codegen_options opt = {cpu, 3};
    double t0 = now_s();
    if (!kernel_lib_build(&lib, specs, 24, &opt, &err)) {
        fprintf(stderr, "codegen failed: %s\n", err);
        free(err);
        return 1;
    }
    double total = now_s() - t0;
    printf("\ncodegen of a fixed model (not the shapes above), 24 distinct widths (1536..4112) at d_model 1024, "
           "72 kernels for %s: %.3f s to object, %.3f s including cc -shared + dlopen\n",
           cpu ? cpu : "the host CPU", lib.codegen_seconds, total);
    kernel_lib_close(&lib);
    return 0;
}

int main(int argc, char **argv) {
    int reps = 5, rows = 8 * 256, D = 256, only_threads = 0, skip_codegen = 0, profile = -1;
    const char *versus_env = NULL;
    /* examples/tiny.tlm's tapered widths, then tiny_uniform's */
    int widths[64] = {1040, 960, 800, 576, 416, 336, 688}, n_widths = 7;
    const char *cpu = NULL;
    tlm_mlp kind = TLM_MLP_SWIGLU;
    static const char usage[] =
        "usage: mlp_bench [--reps N] [--kind swiglu|gelu] [--rows R] [--d D] [--widths W1,W2,...]\n"
        "                 [--threads T] [--skip-codegen 1] [--cpu NAME] [--profile fwd|bwd_data|bwd_weight]\n"
        "                 [--clock wall|thread] [--versus 'VAR=VALUE;...']\n";
    for (int i = 1; i < argc; i += 2) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(usage, stdout);
            return 0;
        }
        /* every option takes a value: an option is known when the usage
         * names it as "[--name " */
        char known[64];
        snprintf(known, sizeof known, "[%s ", argv[i]);
        if (strncmp(argv[i], "--", 2) != 0 || !strstr(usage, known)) {
            fprintf(stderr, "mlp_bench: unknown option %s (mlp_bench --help lists the options)\n", argv[i]);
            return 2;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "mlp_bench: %s needs a value (mlp_bench --help lists the options)\n", argv[i]);
            return 2;
        }
        const char *v = argv[i + 1];
        bool ok = true;
        if (!strcmp(argv[i], "--reps")) ok = bench_int_arg("mlp_bench", argv[i], v, 1, 1000000, &reps);
        else if (!strcmp(argv[i], "--rows")) ok = bench_int_arg("mlp_bench", argv[i], v, 1, 1 << 20, &rows);
        else if (!strcmp(argv[i], "--d")) ok = bench_int_arg("mlp_bench", argv[i], v, 1, 65536, &D);
        else if (!strcmp(argv[i], "--threads")) ok = bench_int_arg("mlp_bench", argv[i], v, 1, 4096, &only_threads);
        else if (!strcmp(argv[i], "--cpu")) {
            /* a usage error, as for tlmc --cpu, before any kernels are built */
            char *cpu_err = NULL;
            if (!tlm_codegen_cpu_known(v, &cpu_err)) {
                fprintf(stderr, "mlp_bench: --cpu: %s\n", cpu_err ? cpu_err : "unknown CPU");
                free(cpu_err);
                return 2;
            }
            cpu = v;
        } else if (!strcmp(argv[i], "--clock")) {
            if (!strcmp(v, "thread")) bench_clock = CLOCK_THREAD_CPUTIME_ID;
            else if (!strcmp(v, "wall")) bench_clock = CLOCK_MONOTONIC;
            else ok = false, fprintf(stderr, "mlp_bench: --clock takes wall or thread, not '%s'\n", v);
        } else if (!strcmp(argv[i], "--skip-codegen")) ok = bench_int_arg("mlp_bench", argv[i], v, 0, 1, &skip_codegen);
        else if (!strcmp(argv[i], "--versus")) versus_env = v;
        else if (!strcmp(argv[i], "--profile")) {
            for (int e = 0; e < N_ENTRIES; e++)
                if (!strcmp(v, entry_names[e])) profile = e;
            if (profile < 0) {
                fprintf(stderr, "mlp_bench: --profile takes fwd, bwd_data or bwd_weight\n");
                return 2;
            }
        } else if (!strcmp(argv[i], "--kind")) {
            if (!strcmp(v, "swiglu")) kind = TLM_MLP_SWIGLU;
            else if (!strcmp(v, "gelu")) kind = TLM_MLP_GELU;
            else ok = false, fprintf(stderr, "mlp_bench: --kind takes swiglu or gelu, not '%s'\n", v);
        } else if (!strcmp(argv[i], "--widths")) {
            /* W1,W2,...: each a width codegen takes ("336x" or "336,,416"
             * once became a list padded with widths of 0) */
            n_widths = 0;
            for (const char *p = v;; p++) {
                char *end;
                errno = 0;
                long w = strtol(p, &end, 10);
                if (end == p || errno || w < 1 || w > 65536 || n_widths == 64 || (*end && *end != ',')) {
                    fprintf(stderr, "mlp_bench: --widths takes up to 64 widths W1,W2,..., each 1 to 65536, not '%s'\n",
                            v);
                    return 2;
                }
                widths[n_widths++] = (int)w;
                if (!*end) break;
                p = end;
            }
        } else {
            fprintf(stderr, "mlp_bench: unknown option %s (mlp_bench --help lists the options)\n", argv[i]);
            return 2;
        }
        if (!ok) return 2;
    }
    /* the tables run 1 and 2 threads; --threads picks one of them */
    if (only_threads > 2 && profile < 0) {
        fprintf(stderr, "mlp_bench: --threads takes 1 or 2 (any count with --profile)\n");
        return 2;
    }
    if (versus_env && only_threads > 1) {
        fprintf(stderr, "mlp_bench: --versus runs one thread\n");
        return 2;
    }
    if (versus_env) only_threads = 1;
    if (bench_clock == CLOCK_THREAD_CPUTIME_ID && only_threads != 1) {
        fprintf(stderr, "mlp_bench: --clock thread times one thread: add --threads 1\n");
        return 2;
    }
    const int N_WIDTHS = n_widths;
    tlm_kernel_spec specs[64];
    for (int i = 0; i < N_WIDTHS; i++) specs[i] = (tlm_kernel_spec){kind, D, widths[i]};

    kernel_lib lib;
    char *err = NULL;
    tlm_codegen_options opt = {cpu, 3};
    if (!kernel_lib_build(&lib, specs, N_WIDTHS, &opt, &err)) {
        fprintf(stderr, "codegen failed: %s\n", err);
        free(err);
        return 1;
    }
    printf("%s MLP, d_model %d, rows %d, best of %d, kernels for %s; codegen of %d specs: "
           "%.3f s\n",
           kind == TLM_MLP_SWIGLU ? "SwiGLU" : "GELU", D, rows, reps, cpu ? cpu : "the host CPU", N_WIDTHS,
           lib.codegen_seconds);
    char *tile = tlm_codegen_cpu_tile(cpu, D, &err);
    if (!tile) {
        fprintf(stderr, "codegen failed: %s\n", err);
        free(err);
        kernel_lib_close(&lib);
        return 1;
    }
    printf("kernels' blocking: %s\n", tile);
    tlm_codegen_free(tile);
    if (versus_env) { /* closed here too: a bad --versus once left the kernels' folder in /tmp */
        int rc = versus(&lib, specs, N_WIDTHS, rows, reps, versus_env, &opt);
        kernel_lib_close(&lib);
        return rc;
    }
    if (profile >= 0) return profile_entry(&lib, specs, N_WIDTHS, rows, only_threads ? only_threads : 1, profile, reps);
    char blas[160];
    tlm_blas_kernels_describe(blas, sizeof blas);
    printf("%s; %s\n", openblas_get_config(), blas);
    printf("GFLOP/s (GEMM flops only); ratio = ours / OpenBLAS speed\n");
    double peak = core_peak(cpu, reps);
    int gemms = kind == TLM_MLP_SWIGLU ? 3 : 2;
    unsigned seed = 1234;
    for (int threads = 1; threads <= 2; threads++) {
        if (only_threads && threads != only_threads) continue;
        printf("\n%d thread%s\n%5s", threads, threads > 1 ? "s" : "", "width");
        for (int e = 0; e < N_ENTRIES; e++) printf(" | %-10s ours  blas ratio", entry_names[e]);
        printf(" | %-5s  ours  blas ratio | fused | twin\n", "all");
        /* the widths on generated kernels: each entry's time, ours and OpenBLAS's */
        double sum_flops = 0, sum_act = 0, sum_twin = 0, entry_ours[N_ENTRIES] = {0}, entry_blas[N_ENTRIES] = {0};
        int generated = 0;
        for (int w = 0; w < N_WIDTHS; w++) {
            layer L;
            layer_init(&L, specs[w], rows, &lib, &seed);
            L.threads = threads;
            const char *why;
            bool on_blas = tlm_cpu_mlp_choice(&specs[w], -1, &why) == TLM_MLP_IMPL_BLAS;
            double flops = 2.0 * gemms * rows * (double)D * widths[w];
            double t_ours = 0, t_blas = 0;
            printf("%5d", widths[w]);
            for (int e = 0; e < N_ENTRIES; e++) {
                double to = best_of(&L, e, reps, run_ours, ready_generated),
                       tb = best_of(&L, e, reps, run_blas, ready_other);
                t_ours += to;
                t_blas += tb;
                if (!on_blas) entry_ours[e] += to, entry_blas[e] += tb;
                printf(" | %10s %5.0f %5.0f %5.2f", "", flops / to * 1e-9, flops / tb * 1e-9, tb / to);
            }
            double t_act = best_of(&L, ACT_FWD, reps, run_activation, ready_other) +
                           best_of(&L, ACT_BWD, reps, run_activation, ready_other);
            double t_twin = 0;
            for (int e = 0; e < N_ENTRIES; e++) t_twin += best_of(&L, e, reps, run_twin, ready_other);
            printf(" | %5s %5.0f %5.0f %5.2f | %5.2f | %4.2f%s\n", "", 3 * flops / t_ours * 1e-9,
                   3 * flops / t_blas * 1e-9, t_blas / t_ours, (t_blas + t_act) / t_ours, t_twin / t_ours,
                   on_blas ? "  blas (tlmc's rule)" : "");
            layer_free(&L);
            if (on_blas) continue;
            generated++;
            sum_flops += 3 * flops;
            sum_act += t_act;
            sum_twin += t_twin;
        }
        double sum_ours = 0, sum_blas = 0;
        for (int e = 0; e < N_ENTRIES; e++) sum_ours += entry_ours[e], sum_blas += entry_blas[e];
        printf("%5s | the %d of %d widths on generated kernels, all entries: ours %.0f GFLOP/s, OpenBLAS %.0f "
               "GFLOP/s, ratio %.2f; fused fwd+bwd against OpenBLAS + activation passes %.2f, against the BLAS "
               "twin %.2f\n",
               "total", generated, N_WIDTHS, sum_flops / sum_ours * 1e-9, sum_flops / sum_blas * 1e-9,
               sum_blas / sum_ours, (sum_blas + sum_act) / sum_ours, sum_twin / sum_ours);
        if (peak > 0 && generated)
            print_against_peak(peak * threads, sum_flops, entry_ours, entry_blas, sum_blas, sum_act);
    }
    kernel_lib_close(&lib);
    return skip_codegen ? 0 : time_codegen_24(kind, cpu);
}
