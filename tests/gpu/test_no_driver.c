/* gpu.no_driver: on a machine without the NVIDIA driver (no libcuda.so.1,
 * like CI), opening the real device fails with one clear line and no crash,
 * for "cuda" and "cuda:N" alike and on a second try too. Where the toolkit
 * was missing at build time (TLM_EXPECT_CUDA undefined) the line says that
 * instead. On a machine with a driver there is nothing to check: exit 77
 * (skipped). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"

#ifdef TLM_EXPECT_CUDA
static const char EXPECTED[] =
    "no CUDA driver (libcuda.so.1 not found): --device cuda needs an NVIDIA GPU and its driver";
#else
static const char EXPECTED[] = "this tlm-run was built without the CUDA toolkit: the GPU backend is off";
#endif

static int failures;

static void open_fails(const char *name) {
    tlm_err err = {{0}};
    tlm_device *d = tlm_device_open(name, &err);
    if (d) {
        fprintf(stderr, "gpu.no_driver: FAILED: %s opened without a driver\n", name);
        tlm_device_close(d);
        failures++;
        return;
    }
    if (strcmp(err.msg, EXPECTED) != 0) {
        fprintf(stderr, "gpu.no_driver: FAILED: %s: got \"%s\", expected \"%s\"\n", name, err.msg, EXPECTED);
        failures++;
        return;
    }
    printf("gpu.no_driver: %s: %s\n", name, err.msg);
}

int main(void) {
    /* The real device, not the emulated one the other GPU tests use. */
    unsetenv("TLM_TEST_DEVICE");
    void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (driver) {
        printf("gpu.no_driver: skipped: this machine has a CUDA driver (libcuda.so.1 loads)\n");
        return 77;
    }
    open_fails("cuda");
    open_fails("cuda:1");
    open_fails("cuda"); /* the failure is remembered, and said the same way */
    return failures ? 1 : 0;
}
