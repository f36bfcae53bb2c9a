/* gpu.fake_driver.*: the real device's opening path against a stand-in
 * driver (fake_libcuda.c, found as libcuda.so.1 through LD_LIBRARY_PATH):
 * every entry point is found by name for the CUDA 12.0 ABI (a misspelt or
 * legacy one fails the open with "the CUDA driver has no ..."), the device
 * is read, a missing ordinal and an architecture NVRTC cannot target are
 * refused with their own lines, and a failed open leaves no primary context
 * retained. On the pretend H200 the device opens, and memory, a module
 * (NVRTC's real CUBIN), kernel lookups and launches reach the stand-in with
 * what they should; it cannot start cuBLASLt's runtime, so the first GEMM
 * must fail with cuBLASLt's line. A closed device holds no context.
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

static void die(const char *what, const tlm_err *err) {
    fprintf(stderr, "gpu.fake_driver: %s: %s\n", what, err->msg);
    exit(1);
}

/* The pretend H200: every entry point resolves and the device opens; its
 * info, memory, a module, kernels and launches go through the real
 * device's code to the stand-in; the first GEMM starts cuBLASLt, which
 * cannot start on the stand-in and says so. */
static void check_h200(void *fake) {
    typedef int launches_fn(unsigned[3], unsigned[3], unsigned long long *);
    launches_fn *launches = (launches_fn *)dlsym(fake, "tlm_fake_cuda_launches");
    tlm_err err = {{0}};
    tlm_device *d = tlm_device_open("cuda", &err);
    if (!d) die("open the pretend H200", &err);
    const tlm_device_info *info = tlm_device_get_info(d);
    char line[512];
    snprintf(line, sizeof line, "%s, %s, cc %d.%d, %d SMs, %llu GiB, driver %d, emulated %d", info->name, info->arch,
             info->cc_major, info->cc_minor, info->sm_count, (unsigned long long)(info->memory_total >> 30),
             info->driver_version, info->emulated);
    expect(strcmp(line, "tlm fake GPU, sm_90, cc 9.0, 132 SMs, 141 GiB, driver 13000, emulated 0") == 0,
           "the device's info", line);

    /* Memory: zero-filled, uploads, copies, zeroing, downloads. */
    enum { N = 1000 };
    unsigned char pattern[N], back[N];
    for (int i = 0; i < N; i++) pattern[i] = (unsigned char)(i * 7 + 1);
    uint64_t before = tlm_device_memory_in_use(d);
    tlm_dptr a = tlm_device_alloc(d, N, &err), b = a ? tlm_device_alloc(d, N, &err) : 0;
    if (!a || !b) die("alloc", &err);
    bool zero = tlm_device_download(d, back, a, N, &err);
    for (int i = 0; zero && i < N; i++) zero = back[i] == 0;
    expect(zero && a % 256 == 0, "a new allocation is zero-filled and 256-byte aligned", zero ? "yes" : err.msg);
    bool same = tlm_device_upload(d, a, pattern, N, &err) && tlm_device_copy(d, b, a, N, &err) &&
                tlm_device_download(d, back, b, N, &err) && memcmp(back, pattern, N) == 0;
    expect(same, "upload, copy, download", same ? "the bytes came back" : err.msg);
    zero = tlm_device_zero(d, b, N, &err) && tlm_device_download(d, back, b, N, &err) && tlm_device_sync(d, &err);
    for (int i = 0; zero && i < N; i++) zero = back[i] == 0;
    expect(zero, "zero", zero ? "zeroed" : err.msg);
    snprintf(line, sizeof line, "%llu more bytes", (unsigned long long)(tlm_device_memory_in_use(d) - before));
    expect(tlm_device_memory_in_use(d) - before >= 2 * N, "memory in use counts the allocations", line);
    snprintf(line, sizeof line, "%llu MiB free", (unsigned long long)(tlm_device_memory_free(d) >> 20));
    expect(tlm_device_memory_free(d) == ((uint64_t)141 << 30) - ((uint64_t)1 << 29),
           "free memory is the driver's count (cuMemGetInfo)", line);

    /* A module: compiled by the real NVRTC, loaded by the stand-in. */
    const char *source = "extern \"C\" __global__ void tlm_fake_fill(float *x, int n) {\n"
                         "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                         "  if (i < n) x[i] = 1.0f;\n"
                         "}\n";
    tlm_module *m = tlm_device_module_load(d, "a test kernel", source, NULL, &err);
    if (!m) die("module load", &err);
    tlm_kernel *k = tlm_device_kernel(d, m, "tlm_fake_fill", &err);
    if (!k) die("kernel lookup", &err);
    int n = N / 4;
    void *args[] = {&a, &n};
    tlm_launch dims = {{3, 1, 1}, {96, 1, 1}};
    unsigned grid[3], block[3];
    unsigned long long first_arg = 0;
    bool launched = tlm_device_launch(d, k, dims, args, &err);
    int count = launches(grid, block, &first_arg);
    snprintf(line, sizeof line, "%d launch(es), last grid %ux%ux%u block %ux%ux%u", count, grid[0], grid[1], grid[2],
             block[0], block[1], block[2]);
    expect(launched && count == 1 && grid[0] == 3 && grid[1] == 1 && block[0] == 96 && block[2] == 1 && first_arg == a,
           "a launch reaches the driver with its grid, block and arguments", launched ? line : err.msg);

    const char *msg = tlm_device_kernel(d, m, "no_such_kernel", &err) ? "(found)" : err.msg;
    expect(strstr(msg, "no kernel named no_such_kernel") != NULL, "a kernel the module lacks", msg);
    tlm_kernel *failing = tlm_device_kernel(d, m, "tlm_fake_launch_fails", &err);
    if (!failing) die("kernel lookup", &err);
    msg = tlm_device_launch(d, failing, (tlm_launch){{1, 1, 1}, {32, 1, 1}}, args, &err) ? "(launched)" : err.msg;
    expect(strstr(msg, "launching tlm_fake_launch_fails (grid 1x1x1, block 32x1x1): CUDA_ERROR_INVALID_VALUE") != NULL,
           "a launch the driver refuses", msg);

    /* The comm stream (device.h): created non-blocking at its first use,
     * events recorded on one stream and waited for on the other, a launch
     * chosen for it goes there, a GEMM is refused there, and host calls are
     * the emulated device's alone. */
    typedef const char *trace_fn(void);
    trace_fn *trace = (trace_fn *)dlsym(fake, "tlm_fake_cuda_stream_trace");
    tlm_event *done = tlm_device_event_create(d, &err), *chain = done ? tlm_device_event_create(d, &err) : NULL;
    if (!done || !chain) die("event create", &err);
    void *handle = NULL;
    bool ordered = tlm_device_event_record(d, done, TLM_STREAM_COMPUTE, &err) &&
                   tlm_device_stream_wait(d, TLM_STREAM_COMM, done, &err) && tlm_device_comm_stream(d, &handle, &err);
    tlm_stream was = tlm_device_launch_stream(d, TLM_STREAM_COMM);
    ordered = ordered && tlm_device_launch(d, k, dims, args, &err);
    msg = tlm_device_gemm(
              d, &(tlm_gemm){.m = 4, .n = 4, .k = 4, .a = a, .b = a, .d = b, .lda = 4, .ldb = 4, .ldd = 4, .batch = 1},
              &err)
              ? "(ran)"
              : err.msg;
    expect(strcmp(msg, "GEMMs run on the compute stream only") == 0, "a GEMM on the comm stream", msg);
    tlm_device_launch_stream(d, was);
    ordered = ordered && tlm_device_event_record(d, chain, TLM_STREAM_COMM, &err) &&
              tlm_device_stream_wait(d, TLM_STREAM_COMPUTE, chain, &err);
    expect(ordered && handle != NULL &&
               strcmp(trace(), "record 1 on legacy; create comm non-blocking; comm waits 1; launch on comm; "
                               "record 2 on comm; legacy waits 2; ") == 0,
           "the comm stream and its events reach the driver in order", ordered ? trace() : err.msg);
    msg = tlm_device_comm_host_call(d, free, NULL, &err) ? "(queued)" : err.msg;
    expect(strstr(msg, "queues no host calls") != NULL, "no host calls on a GPU", msg);
    tlm_device_event_destroy(d, done);
    tlm_device_event_destroy(d, chain);

    /* The first GEMM starts cuBLASLt, whose runtime the stand-in cannot
     * serve: a clear line, and the device still closes cleanly. */
    tlm_gemm g = {.m = 4,
                  .n = 4,
                  .k = 4,
                  .a = a,
                  .b = a,
                  .d = b,
                  .lda = 4,
                  .ldb = 4,
                  .ldc = 4,
                  .ldd = 4,
                  .a_type = TLM_GEMM_F32,
                  .b_type = TLM_GEMM_F32,
                  .cd_type = TLM_GEMM_F32,
                  .batch = 1,
                  .alpha = 1.0f};
    msg = tlm_device_gemm(d, &g, &err) ? "(ran)" : err.msg;
    expect(strncmp(msg, "cuBLASLt ", 9) == 0 && strstr(msg, "could not start with the driver of CUDA 13.0") &&
               strstr(msg, "CUBLAS_STATUS_"),
           "cuBLASLt cannot start on the stand-in", msg);
    tlm_device_module_unload(d, m);
    tlm_device_free(d, a);
    tlm_device_free(d, b);
    tlm_device_close(d);
    expect(strstr(trace(), "destroy event 1; destroy event 2; destroy comm; ") != NULL,
           "events destroyed, the comm stream at close", trace());
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
        check_h200(fake);
    } else if (strcmp(machine, "no_device") == 0) {
    } else if (strcmp(machine, "no_device") == 0) {
        const char *msg = open_fails("cuda", &err);
        expect(strcmp(msg, "no CUDA device: the NVIDIA driver is installed but sees no GPU (CUDA_ERROR_NO_DEVICE)") ==
                   0,
               "a driver without a GPU", msg);
    } else if (strcmp(machine, "old_gpu") == 0) {
        const char *msg = open_fails("cuda", &err);
        expect(strncmp(msg, "tlm fake GPU (cuda:0) is sm_50, which this build's nvrtc ", 57) == 0,
               "a GPU NVRTC cannot compile for", msg);
    } else if (strcmp(machine, "old_driver") == 0) {
        const char *msg = open_fails("cuda", &err);
        expect(strstr(msg, "the NVIDIA driver supports CUDA 12.8; this tlm-run's NVRTC and cuBLASLt are CUDA 13") ==
                   msg,
               "a driver older than the toolkit", msg);
    } else {
        fprintf(stderr, "usage: test_fake_driver h200|no_device|old_gpu|old_driver\n");
        return 2;
    }
    char count[32];
    snprintf(count, sizeof count, "%d", retained());
    expect(retained() == 0, "primary contexts retained after closing and failed opens", count);
    return failures ? 1 : 0;
}
