/* The row-major linear maps as GEMM descriptions (runtime/gpu/linear.c)
 * against tlm_linear_forward / tlm_linear_backward on the emulated device:
 * y = x W^T (written and accumulated), dx = dy W (written and accumulated),
 * dW += dy^T x, over odd sizes, so a transposed operand or a wrong leading
 * dimension fails. Bound per element: 1e-5 |cpu| + 1e-6 max|cpu| (the
 * plain GEMM sums in k order, OpenBLAS in blocks: a few float32 roundings
 * of the largest terms apart). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "gpu_linear.h"
#include "tlm_rt/ops.h"

static int failures;
static tlm_device *dev;

static float *random_floats(size_t n, unsigned *seed) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = (float)rand_r(seed) / (float)RAND_MAX * 2.0f - 1.0f;
    return p;
}

static tlm_dptr to_device(const float *p, size_t n) {
    tlm_err err = {""};
    tlm_dptr d = tlm_device_alloc(dev, n * sizeof *p, &err);
    if (!d || !tlm_device_upload(dev, d, p, n * sizeof *p, &err)) {
        printf("FAIL: %s\n", err.msg);
        exit(1);
    }
    return d;
}

static void compare(const char *what, int N, int in, int out, const float *cpu, tlm_dptr gpu, size_t n) {
    float *got = malloc(n * sizeof *got);
    tlm_err err = {""};
    if (!tlm_device_download(dev, got, gpu, n * sizeof *got, &err)) {
        printf("FAIL: %s\n", err.msg);
        exit(1);
    }
    double scale = 0, worst = 0;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(cpu[i]));
    for (size_t i = 0; i < n; i++) {
        double r = fabs((double)got[i] - cpu[i]) / (1e-5 * fabs(cpu[i]) + 1e-6 * scale);
        if (!(r <= worst)) worst = r;
    }
    if (!(worst <= 1.0)) {
        printf("FAIL %s N=%d in=%d out=%d: %.2f of the bound\n", what, N, in, out, worst);
        failures++;
    }
    free(got);
}

static void one_case(int N, int in, int out, bool accumulate, unsigned seed) {
    size_t nx = (size_t)N * in, ny = (size_t)N * out, nw = (size_t)out * in;
    float *x = random_floats(nx, &seed), *w = random_floats(nw, &seed), *y = random_floats(ny, &seed);
    float *dy = random_floats(ny, &seed), *dx = random_floats(nx, &seed), *dw = random_floats(nw, &seed);
    tlm_dptr gx = to_device(x, nx), gw = to_device(w, nw), gy = to_device(y, ny), gdy = to_device(dy, ny);
    tlm_dptr gdx = to_device(dx, nx), gdw = to_device(dw, nw);
    tlm_gpu g = {.dev = dev};
    tlm_err err = {""};
    tlm_linear_forward(y, x, w, N, in, out, accumulate);
    tlm_linear_backward(dx, dw, dy, x, w, N, in, out, accumulate);
    if (!tlm_gpu_linear_forward(&g, gy, gx, gw, N, in, out, accumulate, &err) ||
        !tlm_gpu_linear_backward(&g, gdx, gdw, gdy, gx, gw, N, in, out, accumulate, &err)) {
        printf("FAIL N=%d in=%d out=%d: %s\n", N, in, out, err.msg);
        failures++;
    } else {
        compare(accumulate ? "y +=" : "y =", N, in, out, y, gy, ny);
        compare(accumulate ? "dx +=" : "dx =", N, in, out, dx, gdx, nx);
        compare("dW +=", N, in, out, dw, gdw, nw);
    }
    tlm_dptr all[] = {gx, gw, gy, gdy, gdx, gdw};
    for (int i = 0; i < 6; i++) tlm_device_free(dev, all[i]);
    free(x), free(w), free(y), free(dy), free(dx), free(dw);
}

int main(void) {
    tlm_set_num_threads(1);
    tlm_err err = {""};
    dev = tlm_device_open("cuda", &err);
    if (!dev) {
        printf("FAIL: cannot open the device: %s\n", err.msg);
        return 1;
    }
    const int sizes[] = {1, 3, 17, 40};
    int cases = 0;
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < 4; c++)
                for (int acc = 0; acc < 2; acc++, cases++)
                    one_case(sizes[a], sizes[b] + 2, sizes[c], acc, 1000u + (unsigned)cases);
    tlm_device_close(dev);
    printf("%s: %d cases (y, dx, dW each), %d failed\n", failures ? "FAIL" : "ok", cases, failures);
    return failures != 0;
}
