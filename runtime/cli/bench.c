/* tlm-run bench MODEL.so: how fast the model trains here, without data
 * files. Random tokens (a fixed seed), the model's training settings with
 * --batch and --context laid over them, freshly initialised parameters;
 * --warmup untimed steps (allocations, first-touch, cuBLASLt's choices; a GPU
 * compiles its kernels before them, when the model loads),
 * then --steps timed ones: steps/s, tokens/s, the model's training GFLOP/s
 * (flops.h's count) and MFU: on a GPU against the peak table's figure, on
 * the CPU against its multiply-add peak measured here (cpu_peak.h: all the
 * threads, at the widest vectors the CPU has); then --profile
 * steps with the op profile (model/profile.h), which are not timed above
 * since profiling a device waits for every op. Nothing is written. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "cpu_peak.h"
#include "tlm_rt/cpu_level.h"
#include "device_flag.h"
#include "flops.h"
#include "gpu_model.h"
#include "load.h"
#include "profile.h"
#include "tlm_rt/ops.h"
#include "tlm_rt/rng.h"
#include "tlm_train_settings.h"
#include "trainer.h"

static void usage(FILE *out) {
    fputs("usage: tlm-run bench MODEL.so [options]\n"
          "\n"
          "Trains the model on random tokens and reports steps/s, tokens/s, GFLOP/s\n"
          "and MFU (against a known GPU's peak, or the CPU's measured multiply-add\n"
          "peak), then where a step's time goes. Writes nothing.\n"
          "  --batch N           sequences a step (default: the model's)\n"
          "  --context T         tokens a sequence (default: the model's)\n"
          "  --steps N           timed steps (default 10)\n"
          "  --warmup N          untimed steps first (default 2)\n"
          "  --profile N         profiled steps after the timed ones (default 2; 0: none)\n"
          "  --profile-kernels   on a device, the profile times each kernel and GEMM too\n"
          "                      (each waited for, before and after: the op times grow)\n"
          "  --threads N         CPU threads (default: all cores)\n"
          "  --device DEV        cpu (default), cuda or cuda:N\n"
          "  --precision P       bf16 (the GPU's default) or fp32\n"
          "  --json              one JSON object on stdout instead of the tables\n"
          "\n"
          "Exit status: 0 ok, 1 error (model, device), 2 bad usage.\n",
          out);
}

enum {
    OPT_BATCH = 256,
    OPT_CONTEXT,
    OPT_STEPS,
    OPT_WARMUP,
    OPT_PROFILE,
    OPT_THREADS,
    OPT_DEVICE,
    OPT_PRECISION,
    OPT_JSON,
    OPT_PROFILE_KERNELS
};
static const struct option long_options[] = {
    {"help", no_argument, NULL, 'h'},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"context", required_argument, NULL, OPT_CONTEXT},
    {"steps", required_argument, NULL, OPT_STEPS},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"profile", required_argument, NULL, OPT_PROFILE},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"device", required_argument, NULL, OPT_DEVICE},
    {"precision", required_argument, NULL, OPT_PRECISION},
    {"json", no_argument, NULL, OPT_JSON},
    {"profile-kernels", no_argument, NULL, OPT_PROFILE_KERNELS},
    {NULL, 0, NULL, 0},
};

typedef struct bench {
    int64_t batch, context, steps, warmup, profile_steps, threads;
    const char *device, *precision_value;
    tlm_precision precision;
    bool json, profile_kernels;
} bench;

/* -1 to go on, else the exit status. */
static int parse(bench *b, const char **model, int argc, char **argv) {
    *b = (bench){.steps = 10, .warmup = 2, .profile_steps = 2};
    cli_args a = {.cmd = "bench", .argc = argc, .argv = argv};
    int opt;
    while ((opt = cli_getopt(&a, "h", long_options)) != -1) {
        bool ok = true;
        switch (opt) {
        case 'h': usage(stdout); return 0;
        case OPT_BATCH: ok = cli_int(&a, 1, 1 << 20, &b->batch); break;
        case OPT_CONTEXT: ok = cli_int(&a, 1, INT32_MAX, &b->context); break;
        case OPT_STEPS: ok = cli_int(&a, 1, 1 << 20, &b->steps); break;
        case OPT_WARMUP: ok = cli_int(&a, 0, 1 << 20, &b->warmup); break;
        case OPT_PROFILE: ok = cli_int(&a, 0, 1 << 20, &b->profile_steps); break;
        case OPT_THREADS: ok = cli_int(&a, 1, 4096, &b->threads); break;
        case OPT_DEVICE:
            b->device = a.val;
            ok = device_flag_check("bench", a.val) == 0;
            break;
        case OPT_PRECISION:
            b->precision_value = a.val;
            ok = precision_flag_check("bench", a.val) == 0;
            break;
        case OPT_JSON: b->json = true; break;
        case OPT_PROFILE_KERNELS: b->profile_kernels = true; break;
        case 1: ok = cli_model_path(&a, model); break;
        default: return 2; /* reported by cli_getopt */
        }
        if (!ok) return 2;
    }
    if (b->profile_kernels && device_flag_is_cpu(b->device))
        return cli_usage_error("bench", "--profile-kernels times a device's kernels: it needs --device cuda");
    if (b->profile_kernels && b->profile_steps == 0)
        return cli_usage_error("bench", "--profile-kernels with --profile 0: no steps are profiled");
    return precision_flag_resolve("bench", b->device, b->precision_value, &b->precision) ? 2 : -1;
}

/* n steps on fresh random batches; false with the step's failure, named
 * by its number in the whole run (*done steps before it, counted on). */
static bool run_steps(tlm_trainer *t, tlm_rng *rng, int32_t *x, int32_t *y, int64_t n, int64_t tokens, int64_t T,
                      int64_t *done, tlm_err *err) {
    const uint64_t vocab = (uint64_t)t->model->so->config->vocab;
    for (int64_t i = 0; i < n; i++) {
        for (int64_t j = 0; j < tokens; j++) x[j] = (int32_t)tlm_rng_below(rng, vocab);
        for (int64_t j = 0; j < tokens; j++) y[j] = (int32_t)tlm_rng_below(rng, vocab);
        tlm_step_result r = tlm_trainer_step(t, x, y, T);
        const char *device_error = tlm_model_device_error(t->model);
        if (device_error) return tlm_fail(err, "%s", device_error);
        ++*done;
        if (!r.finite) return tlm_fail(err, "step %" PRId64 ": the loss or gradient norm is not finite", *done);
    }
    return true;
}

/* The CPU's peak for MFU: every thread the ops use, each timed by its own
 * CPU clock, so that a busy machine lowers the step's speed but not the
 * peak (MFU errs low, never above 100%). More threads than cores add no
 * multiply-adds, though each thread's own clock sees a whole core's worth:
 * the peak is measured on as many threads as there are cores to run them
 * (8 threads on 2 cores read MFU 11% of 8 cores' peak before, where 45% of
 * 2 was true). */
typedef struct {
    double flops; /* per second; 0: unknown */
    int threads, cores, lanes;
} cpu_peak;

static cpu_peak measure_cpu_peak(void) {
    cpu_peak c = {0, tlm_get_num_threads(), cli_cores(), tlm_cpu_fma_lanes()};
    if (c.cores > c.threads) c.cores = c.threads;
    if (c.lanes) c.flops = tlm_cpu_fma_peak_gflops(c.lanes, c.cores, CLOCK_THREAD_CPUTIME_ID, 3) * 1e9;
    return c;
}

/* A GPU's report adds what train's banner and progress line say of the
 * run: the attention kernels and CUDA graphs, where the kernels came from,
 * and the device memory held after the timed steps. */
typedef struct {
    const tlm_model *m;
    uint64_t bytes;
} device_use;

static void report(const bench *b, const tlm_so *so, tlm_device *dev, const device_use *use, const cpu_peak *cpu,
                   double seconds, tlm_profile *p) {
    const double tokens = (double)(b->batch * b->context) * (double)b->steps;
    const double flops = tlm_train_flops_per_token(so, b->context) * tokens / seconds;
    const double peak = dev ? tlm_device_get_info(dev)->peak_bf16_tflops * 1e12 : cpu->flops;
    char where[300], kernels[400] = "";
    device_flag_describe(dev, where, sizeof where);
    if (dev) device_kernels_describe(so, dev, b->precision, tlm_gpu_graphs_off_reason(use->m), kernels, sizeof kernels);
    if (b->json) {
        printf("{\"model\": \"%s\", \"device\": \"%s\", \"precision\": \"%s\", \"batch\": %" PRId64
               ", \"context\": %" PRId64 ", \"steps\": %" PRId64 ", \"seconds\": %.6g, \"steps_per_s\": %.6g, "
               "\"tokens_per_s\": %.6g, \"gflops\": %.6g, \"mfu\": ",
               tlm_so_str(so, so->config->name), where, tlm_precision_name(b->precision), b->batch, b->context,
               b->steps, seconds, (double)b->steps / seconds, tokens / seconds, flops / 1e9);
        if (peak > 0)
            printf("%.6g, \"peak_gflops\": %.6g, \"peak\": \"%s\"", flops / peak, peak / 1e9,
                   dev ? "table" : "measured");
        else printf("null");
        if (dev) printf(", \"device_memory\": %" PRIu64 ", \"attention_graphs\": \"%s\"", use->bytes, kernels);
        else {
            printf(", \"threads\": %d, \"cores\": %d", cpu->threads, cpu->cores);
#if defined(__x86_64__)
            printf(", \"cpu_level\": \"%s\"", tlm_cpu_level_name(tlm_cpu_level()));
#endif
            printf(", \"blas_kernels\": \"%s\"", tlm_blas_kernels());
        }
        if (p) {
            printf(", \"profile\": ");
            tlm_profile_write_json(p, stdout);
        }
        printf("}\n");
        return;
    }
    printf("bench %s: %s%s%s, batch %" PRId64 " x %" PRId64 " tokens\n", tlm_so_str(so, so->config->name), where,
           dev ? ", " : "", dev ? tlm_precision_name(b->precision) : "", b->batch, b->context);
    if (dev) {
        printf("%s\n", kernels);
        device_compile_report(use->m, stdout);
    }
#if defined(__x86_64__)
    else if (tlm_cpu_level() != tlm_cpu_level_of_cpu()) {
        char level[128];
        tlm_cpu_level_describe(level, sizeof level);
        printf("the runtime's CPU kernels run at %s\n", level);
    }
#endif
    if (!dev) {
        char blas[160];
        tlm_blas_kernels_describe(blas, sizeof blas);
        printf("the linear maps' GEMMs run: %s\n", blas);
    }
    printf("%" PRId64 " step%s in %.3f s: %.3f steps/s, %.0f tokens/s, %.2f GFLOP/s", b->steps,
           b->steps == 1 ? "" : "s", seconds, (double)b->steps / seconds, tokens / seconds, flops / 1e9);
    if (peak > 0) printf(", MFU %.1f%%", 100 * flops / peak);
    if (peak > 0 && !dev) {
        const bool crowded = cpu->cores < cpu->threads; /* the peak counts the cores */
        const char *unit = crowded ? "core" : "thread", *plural = cpu->cores > 1 ? "s" : "";
        printf(" (of %d %s%s x %.0f GFLOP/s, this CPU's multiply-add peak on %d-float vectors, measured", cpu->cores,
               unit, plural, peak / 1e9 / cpu->cores, cpu->lanes);
        if (crowded) printf("; %d threads on %d core%s", cpu->threads, cpu->cores, plural);
        printf(")");
    }
    if (dev) printf(", mem %.2f GiB", (double)use->bytes / 1073741824.0);
    printf("\n");
    if (p) tlm_profile_print(p, stdout);
}

int cmd_bench(int argc, char **argv) {
    bench b;
    const char *model_path = NULL;
    int rc = parse(&b, &model_path, argc, argv);
    if (rc >= 0) return rc;
    tlm_so so;
    if ((rc = open_model("bench", model_path, b.threads, &so))) return rc;
    tlm_abi_train s = *so.train;
    tlm_train_resolve_defaults(&s);
    if (b.batch) s.batch = b.batch;
    if (b.context) s.context = b.context;
    if (s.batch < 1) s.batch = 1;
    if (s.context < 1) s.context = so.config->context;
    if (s.context > so.config->context) {
        rc = cli_usage_error("bench", "--context %" PRId64 " is longer than the model's context (%" PRId64 ")",
                             s.context, so.config->context);
        tlm_so_close(&so);
        return rc;
    }
    s.accumulate = 1;
    s.steps = b.warmup + b.steps + b.profile_steps;
    b.batch = s.batch, b.context = s.context;
    tlm_device *dev = NULL;
    if ((rc = device_flag_open("bench", b.device, &dev))) {
        tlm_so_close(&so);
        return rc;
    }
    tlm_err err = {""};
    tlm_model m = {0};
    tlm_trainer t = {0};
    tlm_profile *profile = NULL;
    const int64_t tokens = s.batch * s.context;
    int32_t *x = malloc((size_t)tokens * sizeof *x), *y = malloc((size_t)tokens * sizeof *y);
    int64_t beside = tlm_trainer_state_bytes(&so, &s) + 2 * tokens * (int64_t)sizeof *x;
    bool made = x && y && tlm_model_create_on(&m, &so, dev, b.precision, s.batch, s.context, true, beside, &err);
    if (!x || !y) tlm_fail(&err, "out of memory for a batch of %" PRId64 " x %" PRId64 " tokens", s.batch, s.context);
    if (made) {
        tlm_model_init_params(&m, s.seed);
        made = tlm_model_params_to_device(&m, &err) && tlm_trainer_create(&t, &m, &s, false, &err) &&
               tlm_trainer_to_device(&t, &err);
    }
    if (!made) rc = cli_error("bench", "%s", err.msg);
    tlm_rng rng;
    tlm_rng_seed(&rng, 1234);
    int64_t done = 0; /* steps so far: warm-up, timed, profiled */
    if (!rc && !run_steps(&t, &rng, x, y, b.warmup, tokens, s.context, &done, &err))
        rc = cli_error("bench", "%s", err.msg);
    double seconds = 0;
    cpu_peak cpu = {0, 0, 0, 0};
    if (!rc && !dev) cpu = measure_cpu_peak(); /* after the warm-up: the cores are awake */
    if (!rc) {
        double t0 = tlm_profile_clock();
        if (!run_steps(&t, &rng, x, y, b.steps, tokens, s.context, &done, &err)) rc = cli_error("bench", "%s", err.msg);
        seconds = tlm_profile_clock() - t0;
    }
    device_use use = {&m, dev ? tlm_device_memory_in_use(dev) : 0};
    if (!rc && b.profile_steps > 0) {
        if (!(profile = tlm_profile_create(b.profile_kernels))) rc = cli_error("bench", "out of memory");
        m.profile = profile;
        if (profile && !dev) tlm_profile_watch_threads(profile, m.threads);
        tlm_profile_mark t0 = profile ? tlm_profile_now(profile) : (tlm_profile_mark){0};
        if (!rc && !run_steps(&t, &rng, x, y, b.profile_steps, tokens, s.context, &done, &err))
            rc = cli_error("bench", "%s", err.msg);
        if (profile) tlm_profile_steps(profile, b.profile_steps, t0);
        m.profile = NULL;
    }
    if (!rc) report(&b, &so, dev, &use, &cpu, seconds, profile);
    tlm_profile_destroy(profile);
    if (made) tlm_trainer_destroy(&t);
    tlm_model_destroy(&m);
    free(x);
    free(y);
    if (dev) tlm_device_close(dev);
    tlm_so_close(&so);
    return rc;
}
