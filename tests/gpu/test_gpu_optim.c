/* gpu.optim: the optimizers and whole-gradient ops on the device
 * (gpu_optim.h) against their CPU functions (tlm_rt/optim.h), on the device
 * "cuda" opens (the emulated one under TLM_TEST_DEVICE=emulated, or a GPU):
 * random data of odd sizes (1, 1000, 70001), several steps, decay on and
 * off, the span versions over a block with a gap no span covers, with the
 * gradients read as they are and times a clipping's scale.
 *
 * Tolerances. Updated tensors, per element: |gpu - cpu| <= 1e-5
 * max(|cpu|, floor), floor = 1e-2 times the tensor's largest |cpu|: a
 * parameter near zero is the difference of terms of the tensor's scale
 * (p shrink - step m / denom), which a GPU's fused multiply-adds round
 * differently by a float ulp of that scale, 1e-7 of it; the floor allows
 * that and nothing larger. The norm: 1e-6 relative to tlm_grad_norm (the
 * chunks differ, both sum in double: about 1e-15 in fact), the same bits on
 * two runs and for any grid. The scaled addition is two rounded float
 * operations: compared bit for bit. The worst error of each op is printed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_optim.h"
#include "tlm_rt/optim.h"
#include "tlm_rt/rng.h"

#define RELATIVE 1e-5
#define FLOOR_FRACTION 1e-2
#define NORM_RELATIVE 1e-6

static tlm_device *dev;
static tlm_gpu gpu;
static tlm_rng rng;
static int failures;

static void die(const char *what, const tlm_err *err) {
    fprintf(stderr, "gpu.optim: %s: %s\n", what, err->msg);
    exit(1);
}

static void *host_alloc(size_t bytes) {
    void *p = calloc(bytes ? bytes : 1, 1);
    if (!p) {
        fprintf(stderr, "gpu.optim: out of memory\n");
        exit(2);
    }
    return p;
}

static float *random_floats(size_t n, float lo, float hi) {
    float *x = host_alloc(n * sizeof(float));
    tlm_rng_fill_uniform(&rng, x, n, lo, hi);
    return x;
}

static float *copy_floats(const float *x, size_t n) {
    float *y = host_alloc(n * sizeof(float));
    memcpy(y, x, n * sizeof(float));
    return y;
}

static tlm_dptr to_device(const float *src, size_t n) {
    tlm_err err;
    tlm_dptr p = tlm_device_alloc(dev, n * sizeof(float), &err);
    if (!p) die("alloc", &err);
    if (!tlm_device_upload(dev, p, src, n * sizeof(float), &err)) die("upload", &err);
    return p;
}

static void upload(tlm_dptr dst, const float *src, size_t n) {
    tlm_err err;
    if (!tlm_device_upload(dev, dst, src, n * sizeof(float), &err)) die("upload", &err);
}

static void from_device(float *dst, tlm_dptr src, size_t n) {
    tlm_err err;
    if (!tlm_device_sync(dev, &err)) die("sync", &err);
    if (!tlm_device_download(dev, dst, src, n * sizeof(float), &err)) die("download", &err);
}

static void launched(bool ok, const char *op, const tlm_err *err) {
    if (!ok) die(op, err);
}

/* ---- comparison, the worst error per op ------------------------------- */

typedef struct op_record {
    const char *op;
    double worst;
    int tensors;
} op_record;
static op_record records[16];
static int n_records;

static op_record *record_of(const char *op) {
    for (int i = 0; i < n_records; i++)
        if (!strcmp(records[i].op, op)) return &records[i];
    records[n_records] = (op_record){op, 0.0, 0};
    return &records[n_records++];
}

static void compare(const char *op, const char *tensor, const char *config, tlm_dptr gpu_v, const float *cpu_v,
                    size_t n, bool exact) {
    float *got = host_alloc(n * sizeof(float));
    from_device(got, gpu_v, n);
    double scale = 0.0;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs((double)cpu_v[i]));
    double floor = FLOOR_FRACTION * scale;
    double worst = 0.0;
    size_t worst_at = 0;
    for (size_t i = 0; i < n; i++) {
        double diff = fabs((double)got[i] - cpu_v[i]);
        double e = exact ? (memcmp(&got[i], &cpu_v[i], sizeof(float)) ? INFINITY : 0.0)
                         : (diff == 0.0 ? 0.0 : diff / fmax(fabs((double)cpu_v[i]), floor));
        if (!(e <= worst)) {
            worst = isnan(e) ? INFINITY : e;
            worst_at = i;
        }
    }
    op_record *r = record_of(op);
    r->tensors++;
    if (worst > r->worst) r->worst = worst;
    if (worst > (exact ? 0.0 : RELATIVE)) {
        printf("FAIL %s %s (%s): element %zu: gpu %.9g cpu %.9g, error %.3g\n", op, tensor, config, worst_at,
               got[worst_at], cpu_v[worst_at], worst);
        failures++;
    }
    free(got);
}

static void release(tlm_dptr p) {
    if (p) tlm_device_free(dev, p);
}

/* ---- AdamW -------------------------------------------------------------- */

static void check_adamw(size_t n, bool decay, int steps) {
    const tlm_adamw opt = {0.9f, 0.95f, 1e-8f, 0.1f};
    char config[64];
    snprintf(config, sizeof config, "n %zu, decay %s", n, decay ? "on" : "off");
    float *p = random_floats(n, -1.0f, 1.0f), *m = host_alloc(n * sizeof(float)), *v = host_alloc(n * sizeof(float));
    tlm_dptr d_p = to_device(p, n), d_m = to_device(m, n), d_v = to_device(v, n), d_g = to_device(p, n);
    for (int t = 1; t <= steps; t++) {
        float *g = random_floats(n, -0.5f, 0.5f);
        float lr = 1e-3f * (float)t;
        upload(d_g, g, n);
        tlm_err err;
        launched(tlm_gpu_adamw_update(&gpu, &opt, d_p, d_g, d_m, d_v, n, lr, t, decay, &err), "adamw", &err);
        tlm_adamw_update(&opt, p, g, m, v, n, lr, t, decay);
        compare("adamw", "p", config, d_p, p, n, false);
        compare("adamw", "m", config, d_m, m, n, false);
        compare("adamw", "v", config, d_v, v, n, false);
        free(g);
    }
    release(d_p), release(d_m), release(d_v), release(d_g);
    free(p), free(m), free(v);
}

/* ---- SGD ---------------------------------------------------------------- */

static void check_sgd(size_t n, const tlm_sgd *opt, bool decay, int steps) {
    char config[96];
    snprintf(config, sizeof config, "n %zu, momentum %g, nesterov %d, decay %s", n, opt->momentum, opt->nesterov,
             decay ? "on" : "off");
    float *p = random_floats(n, -1.0f, 1.0f), *buf = host_alloc(n * sizeof(float));
    /* Without momentum the buffer is absent (0), as the CPU's is NULL. */
    bool has_buf = opt->momentum != 0.0f;
    tlm_dptr d_p = to_device(p, n), d_buf = has_buf ? to_device(buf, n) : 0, d_g = to_device(p, n);
    for (int t = 1; t <= steps; t++) {
        float *g = random_floats(n, -0.5f, 0.5f);
        float lr = 0.05f;
        upload(d_g, g, n);
        tlm_err err;
        launched(tlm_gpu_sgd_update(&gpu, opt, d_p, d_g, d_buf, n, lr, t, decay, &err), "sgd", &err);
        tlm_sgd_update(opt, p, g, has_buf ? buf : NULL, n, lr, t, decay);
        compare("sgd", "p", config, d_p, p, n, false);
        if (has_buf) compare("sgd", "buf", config, d_buf, buf, n, false);
        free(g);
    }
    release(d_p), release(d_buf), release(d_g);
    free(p), free(buf);
}

/* ---- the span versions -------------------------------------------------- */

/* A block of 70001 floats: spans of odd sizes, decay on and off, some back
 * to back with the same decay (one launch on the device) and a gap no span
 * covers (left as it is). */
static const tlm_param_span SPANS[] = {
    {0, 1, false},
    {1, 999, true},
    {1000, 3001, true},
    {4001, 7, false},
    {4008, 5000, false},
    /* 9008 .. 9999: the gap */
    {10000, 60001, true},
};
enum { BLOCK_FLOATS = 70001, NSPANS = sizeof SPANS / sizeof SPANS[0] };

static void check_spans(int steps, float grad_scale) {
    const size_t n = BLOCK_FLOATS;
    char config[64]; /* grad_scale below 1: a clipping's, which the update applies */
    snprintf(config, sizeof config, "70001 in 6 spans, gradients x %g", grad_scale);
    const tlm_adamw adamw = {0.9f, 0.999f, 1e-8f, 0.05f};
    const tlm_sgd sgd = {0.8f, 0.0f, 0.02f, true};
    float *p = random_floats(n, -1.0f, 1.0f), *q = copy_floats(p, n);
    float *m = host_alloc(n * sizeof(float)), *v = host_alloc(n * sizeof(float)), *buf = host_alloc(n * sizeof(float));
    tlm_dptr d_p = to_device(p, n), d_q = to_device(q, n), d_m = to_device(m, n), d_v = to_device(v, n),
             d_buf = to_device(buf, n), d_g = to_device(p, n);
    for (int t = 1; t <= steps; t++) {
        float *g = random_floats(n, -0.5f, 0.5f);
        upload(d_g, g, n);
        tlm_err err;
        launched(
            tlm_gpu_adamw_update_spans(&gpu, &adamw, d_p, d_g, grad_scale, d_m, d_v, SPANS, NSPANS, 2e-3f, t, &err),
            "adamw spans", &err);
        launched(tlm_gpu_sgd_update_spans(&gpu, &sgd, d_q, d_g, grad_scale, d_buf, SPANS, NSPANS, 0.1f, t, &err),
                 "sgd spans", &err);
        tlm_adamw_update_spans(&adamw, p, g, grad_scale, m, v, SPANS, NSPANS, 2e-3f, t);
        tlm_sgd_update_spans(&sgd, q, g, grad_scale, buf, SPANS, NSPANS, 0.1f, t);
        compare("adamw spans", "p", config, d_p, p, n, false);
        compare("adamw spans", "m", config, d_m, m, n, false);
        compare("adamw spans", "v", config, d_v, v, n, false);
        compare("sgd spans", "p", config, d_q, q, n, false);
        compare("sgd spans", "buf", config, d_buf, buf, n, false);
        free(g);
    }
    release(d_p), release(d_q), release(d_m), release(d_v), release(d_buf), release(d_g);
    free(p), free(q), free(m), free(v), free(buf);
}

/* ---- the norm and the scaled addition ----------------------------------- */

static double norm_on_device(tlm_dptr g, size_t n) {
    tlm_err err;
    double norm = tlm_gpu_grad_norm(&gpu, g, n, &err);
    if (norm < 0.0) die("grad_norm", &err);
    return norm;
}

static void check_norm_value(const char *config, double got, double want) {
    double e = want == 0.0 ? fabs(got) : fabs(got - want) / want;
    op_record *r = record_of("grad_norm");
    r->tensors++;
    if (e > r->worst || isnan(e)) r->worst = isnan(e) ? INFINITY : e;
    if (!(e <= NORM_RELATIVE)) {
        printf("FAIL grad_norm (%s): gpu %.17g cpu %.17g, error %.3g\n", config, got, want, e);
        failures++;
    }
}

static void check_norm(size_t n, float magnitude) {
    char config[64];
    snprintf(config, sizeof config, "n %zu, |g| <= %g", n, magnitude);
    float *g = random_floats(n, -magnitude, magnitude);
    tlm_dptr d_g = to_device(g, n);
    double first = norm_on_device(d_g, n), second = norm_on_device(d_g, n);
    check_norm_value(config, first, tlm_grad_norm(g, n));
    if (memcmp(&first, &second, sizeof first) != 0) {
        printf("FAIL grad_norm (%s): two runs differ: %.17g, %.17g\n", config, first, second);
        failures++;
    }
    release(d_g);
    free(g);
}

/* The partial sums' bits do not depend on the grid: the chunks computed by
 * 1, 3 or 7 blocks (striding) are the same floats. */
static void check_norm_grid_independent(size_t n) {
    float *g = random_floats(n, -1.0f, 1.0f);
    tlm_dptr d_g = to_device(g, n);
    int chunks = 7;
    long long count = (long long)n, chunk = (count + chunks - 1) / chunks;
    float first[3 * 7], again[3 * 7];
    static const unsigned grids[] = {7, 1, 3};
    for (int i = 0; i < 3; i++) {
        tlm_err err;
        tlm_dptr d_partials = tlm_device_alloc(dev, sizeof first, &err);
        if (!d_partials) die("alloc", &err);
        void *args[] = {&d_partials, &d_g, &count, &chunk, &chunks};
        launched(tlm_gpu_launch(&gpu, "tlm_grad_norm_partials", grids[i], 256, args, &err), "grad_norm partials", &err);
        from_device(i == 0 ? first : again, d_partials, 3 * 7);
        release(d_partials);
        if (i > 0 && memcmp(first, again, sizeof first) != 0) {
            printf("FAIL grad_norm partials: a grid of %u blocks gives other bits than %u\n", grids[i], grids[0]);
            failures++;
        }
    }
    release(d_g);
    free(g);
}

/* sum += x scale, the product rounded first (two statements: not fused,
 * whatever the compiler contracts): bit for bit. */
static void check_add(size_t n, float scale) {
    char config[48];
    snprintf(config, sizeof config, "n %zu, scale %g", n, scale);
    float *x = random_floats(n, -2.0f, 2.0f), *sum = random_floats(n, -1.0f, 1.0f);
    tlm_dptr d_x = to_device(x, n), d_sum = to_device(sum, n);
    tlm_err err;
    launched(tlm_gpu_add(&gpu, d_sum, d_x, scale, n, &err), "add", &err);
    for (size_t i = 0; i < n; i++) {
        float product = x[i] * scale;
        sum[i] += product;
    }
    compare("add", "sum", config, d_sum, sum, n, true);
    release(d_x), release(d_sum);
    free(x), free(sum);
}

int main(void) {
    tlm_err err;
    dev = tlm_device_open("cuda", &err);
    if (!dev) die("open the device", &err);
    if (!tlm_gpu_open(&gpu, dev, &err)) die("load the runtime's kernels", &err);
    printf("gpu.optim on %s\n", tlm_device_get_info(dev)->name);
    tlm_rng_seed(&rng, 20261203);

    static const size_t sizes[] = {1, 1000, 70001};
    for (int s = 0; s < 3; s++) {
        size_t n = sizes[s];
        check_adamw(n, true, 3);
        check_adamw(n, false, 3);
        const tlm_sgd plain = {0.0f, 0.0f, 0.01f, false}, heavy = {0.9f, 0.1f, 0.01f, false},
                      nesterov = {0.9f, 0.0f, 0.0f, true};
        check_sgd(n, &plain, true, 2);
        check_sgd(n, &heavy, s != 1, 3);
        check_sgd(n, &nesterov, true, 3);
        check_norm(n, 1.0f);
        check_add(n, 1.0f);
        check_add(n, 0.3f);
    }
    check_spans(3, 1.0f);
    check_spans(3, 0.37f);
    /* Squares past float's range (1e40): the partial sums keep double's. */
    check_norm(1000, 1e20f);
    check_norm(70001, 1e-20f);
    check_norm_grid_independent(70001);
    /* An empty gradient has norm 0 (and launches nothing). */
    check_norm_value("n 0", tlm_gpu_grad_norm(&gpu, 0, 0, &err), 0.0);

    for (int i = 0; i < n_records; i++)
        printf("  %-16s worst error %.3g over %d tensors\n", records[i].op, records[i].worst, records[i].tensors);
    tlm_gpu_close(&gpu);
    tlm_device_close(dev);
    if (failures) {
        printf("gpu.optim: %d failure(s)\n", failures);
        return 1;
    }
    printf("gpu.optim: all checks passed\n");
    return 0;
}
