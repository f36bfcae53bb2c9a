/* gpu.fake_driver.*: the real device's opening path against a stand-in
 * driver (fake_libcuda.c, found as libcuda.so.1 through LD_LIBRARY_PATH):
 * every entry point is found by name for the CUDA 12.0 ABI (a misspelt or
 * legacy one fails the open with "the CUDA driver has no ..."), the device
 * is read, a missing ordinal and an architecture NVRTC cannot target are
 * refused with their own lines, and a failed open leaves no primary context
 * retained. The stand-in cannot start cuBLASLt's runtime, so on the
 * pretend H200 the open must stop there, with cuBLASLt's line.
 *
 * argv[1] is the pretend machine (as TLM_FAKE_CUDA, which ctest sets too). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"

static int failures;

static void expect(bool ok, const char *what, const char *got) {
    if (ok) {
        printf("gpu.fake_driver: ok: %s: %s\n", what, got);
        return;
    }
    fprintf(stderr, "gpu.fake_driver: FAILED: %s: got \"%s\"\n", what, got);
    failures++;
}

/* Opens name, which must fail; returns the line. */
static const char *open_fails(const char *name, tlm_err *err) {
    memset(err, 0, sizeof *err);
    tlm_device *d = tlm_device_open(name, err);
    if (d) {
        tlm_device_close(d);
        snprintf(err->msg, sizeof err->msg, "(%s opened)", name);
    }
    return err->msg;
}

int main(int argc, char **argv) {
    const char *machine = argc > 1 ? argv[1] : "";
    unsetenv("TLM_TEST_DEVICE");
    void *fake = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    int (*retained)(void) = fake ? (int (*)(void))dlsym(fake, "tlm_fake_cuda_contexts_retained") : NULL;
    if (!retained) {
        fprintf(stderr, "gpu.fake_driver: libcuda.so.1 is not the stand-in (LD_LIBRARY_PATH must lead to it)\n");
        return 1;
    }
    tlm_err err;
    if (strcmp(machine, "h200") == 0) {
        const char *msg = open_fails("cuda:1", &err);
        expect(strcmp(msg, "cuda:1: no such device (this machine has one CUDA device: cuda:0)") == 0,
               "an ordinal past the last device", msg);
        msg = open_fails("cuda", &err);
        expect(strncmp(msg, "cuBLASLt ", 9) == 0 && strstr(msg, "could not start with the driver of CUDA 13.0") &&
                   strstr(msg, "CUBLAS_STATUS_"),
               "every driver entry point resolves, then cuBLASLt cannot start on the stand-in", msg);
    } else if (strcmp(machine, "no_device") == 0) {
        const char *msg = open_fails("cuda", &err);
        expect(strcmp(msg, "no CUDA device: the NVIDIA driver is installed but sees no GPU (CUDA_ERROR_NO_DEVICE)") ==
                   0,
               "a driver without a GPU", msg);
    } else if (strcmp(machine, "old_gpu") == 0) {
        const char *msg = open_fails("cuda", &err);
        expect(strncmp(msg, "tlm fake GPU (cuda:0) is sm_50, which this build's nvrtc ", 57) == 0,
               "a GPU NVRTC cannot compile for", msg);
    } else {
        fprintf(stderr, "usage: test_fake_driver h200|no_device|old_gpu\n");
        return 2;
    }
    char count[32];
    snprintf(count, sizeof count, "%d", retained());
    expect(retained() == 0, "primary contexts retained after the failed opens", count);
    return failures ? 1 : 0;
}
