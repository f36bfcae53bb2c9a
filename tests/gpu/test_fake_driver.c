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
 * Graphs: a capture goes to a capture stream of its own (a launch, a
 * memset and a copy become the graph's nodes, run at each graph launch on
 * the legacy stream), a GEMM before cuBLASLt has started is refused inside
 * a capture, every graph is destroyed; on "graph_fails" the driver refuses
 * to instantiate and the graph cache falls back to plain launches with one
 * warning line.
 *
 * argv[1] is the pretend machine (as TLM_FAKE_CUDA, which ctest sets too). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "graph_cache.h"

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

/* A capture of a launch, a zeroing and a copy; the graph launched twice.
 * b holds N bytes, a at least N. */
static void check_graph(void *fake, tlm_device *d, tlm_kernel *k, tlm_dptr a, tlm_dptr b) {
    typedef const char *trace_fn(void);
    typedef int launches_fn(unsigned[3], unsigned[3], unsigned long long *);
    trace_fn *trace = (trace_fn *)dlsym(fake, "tlm_fake_cuda_stream_trace");
    launches_fn *launches = (launches_fn *)dlsym(fake, "tlm_fake_cuda_launches");
    int (*alive)(void) = (int (*)(void))dlsym(fake, "tlm_fake_cuda_graphs_alive");
    enum { N = 1000 };
    unsigned grid[3], block[3];
    unsigned long long first_arg;
    tlm_err err = {{0}};
    size_t before = strlen(trace());
    int launched = launches(grid, block, &first_arg);
    unsigned char ones[N], back[N];
    memset(ones, 1, N);
    int n = 1;
    void *args[] = {&a, &n};
    bool ok = tlm_device_upload(d, a, ones, N, &err) && tlm_device_capture_begin(d, &err) &&
              tlm_device_launch(d, k, (tlm_launch){.grid = {1, 1, 1}, .block = {32, 1, 1}}, args, &err) &&
              tlm_device_zero(d, b, N, &err) && tlm_device_copy(d, b, a, N / 2, &err);
    tlm_graph *g = ok ? tlm_device_capture_end(d, NULL, &err) : NULL;
    bool untouched = g && tlm_device_download(d, back, b, N, &err) && back[0] == 0 && back[N - 1] == 0;
    ok = g && untouched && launches(grid, block, &first_arg) == launched && tlm_device_graph_launch(d, g, &err) &&
         tlm_device_graph_launch(d, g, &err) && tlm_device_download(d, back, b, N, &err) && back[0] == 1 &&
         back[N / 2 - 1] == 1 && back[N / 2] == 0 && launches(grid, block, &first_arg) == launched + 2;
    tlm_device_graph_destroy(d, g);
    expect(ok && strcmp(trace() + before, "create capture non-blocking; begin capture on capture (thread-local); "
                                          "launch on capture; memset on capture; memcpy on capture; end capture on "
                                          "capture: 3 nodes; instantiate 3 nodes; destroy graph; graph launch on "
                                          "legacy; graph launch on legacy; destroy executable graph; ") == 0,
           "a captured launch, memset and copy run at each graph launch", ok ? trace() + before : err.msg);
    /* cuBLASLt starts at the first GEMM: never inside a capture */
    tlm_gemm gemm = {.m = 4, .n = 4, .k = 4, .a = a, .b = a, .d = b, .lda = 4, .ldb = 4, .ldd = 4, .batch = 1};
    const char *msg = !tlm_device_capture_begin(d, &err) ? err.msg
                      : tlm_device_gemm(d, &gemm, &err)  ? "(ran)"
                                                         : err.msg;
    tlm_err end = {{0}};
    tlm_device_graph_destroy(d, tlm_device_capture_end(d, NULL, &end));
    expect(strstr(msg, "may not be inside a CUDA graph capture") != NULL, "cuBLASLt does not start in a capture", msg);
    msg = tlm_device_sync(d, &err) ? "(synced)" : err.msg;
    expect(strncmp(msg, "a device sync", 13) != 0 && alive() == 0, "no capture left open, no graph left alive",
           alive() == 0 ? "none alive" : "graphs alive");
}

/* graph_fails: instantiation refused; the cache warns once and runs the
 * work op by op from then on. */
typedef struct fill_work {
    tlm_device *d;
    tlm_kernel *k;
    tlm_dptr a;
} fill_work;
static bool fill(void *ctx, tlm_err *err) {
    fill_work *w = ctx;
    int n = 1;
    void *args[] = {&w->a, &n};
    return tlm_device_launch(w->d, w->k, (tlm_launch){.grid = {1, 1, 1}, .block = {32, 1, 1}}, args, err);
}
static void check_graph_fails(void *fake) {
    typedef int launches_fn(unsigned[3], unsigned[3], unsigned long long *);
    launches_fn *launches = (launches_fn *)dlsym(fake, "tlm_fake_cuda_launches");
    int (*alive)(void) = (int (*)(void))dlsym(fake, "tlm_fake_cuda_graphs_alive");
    tlm_err err = {{0}};
    tlm_device *d = tlm_device_open("cuda", &err);
    if (!d) die("open the pretend H200", &err);
    const char *source = "extern \"C\" __global__ void tlm_fake_fill(float *x, int n) {\n"
                         "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                         "  if (i < n) x[i] = 1.0f;\n"
                         "}\n";
    tlm_module *m = tlm_device_module_load(d, "a test kernel", source, NULL, &err);
    fill_work w = {d, m ? tlm_device_kernel(d, m, "tlm_fake_fill", &err) : NULL, tlm_device_alloc(d, 64, &err)};
    if (!w.k || !w.a) die("module, kernel or memory", &err);
    bool failed = false;
    const char *msg = !tlm_device_capture_begin(d, &err) || !fill(&w, &err) ? err.msg
                      : tlm_device_capture_end(d, &failed, &err)            ? "(instantiated)"
                                                                            : err.msg;
    expect(failed && strcmp(msg, "cuGraphInstantiateWithFlags: CUDA_ERROR_NOT_SUPPORTED (fake driver error)") == 0,
           "an instantiation the driver refuses", msg);
    unsigned grid[3], block[3];
    unsigned long long first_arg;
    int before = launches(grid, block, &first_arg);
    tlm_graph_cache *c = tlm_graph_cache_new(d);
    tlm_graph_key key = {{1}};
    bool ran = c != NULL;
    for (int i = 0; ran && i < 3; i++) ran = tlm_graph_cache_run(c, &key, fill, &w, &err);
    tlm_graph_stats st = tlm_graph_cache_stats(c);
    char line[160];
    snprintf(line, sizeof line, "%d launches, %llu captured, %llu plain, disabled %d",
             launches(grid, block, &first_arg) - before, (unsigned long long)st.captures,
             (unsigned long long)st.plain_runs, st.disabled);
    expect(ran && strcmp(line, "3 launches, 0 captured, 3 plain, disabled 1") == 0,
           "the graph cache falls back to plain launches", ran ? line : err.msg);
    tlm_graph_cache_free(c);
    expect(alive() == 0, "no graph left alive", alive() == 0 ? "none" : "some");
    tlm_device_close(d);
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
    snprintf(line, sizeof line, "%s, %s, cc %d.%d, %d SMs, %llu GiB, %u KiB shared, driver %d, emulated %d", info->name,
             info->arch, info->cc_major, info->cc_minor, info->sm_count, (unsigned long long)(info->memory_total >> 30),
             info->shared_optin / 1024, info->driver_version, info->emulated);
    expect(strcmp(line, "tlm fake GPU, sm_90, cc 9.0, 132 SMs, 141 GiB, 227 KiB shared, driver 13000, emulated 0") == 0,
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
    tlm_launch dims = {.grid = {3, 1, 1}, .block = {96, 1, 1}};
    unsigned grid[3], block[3];
    unsigned long long first_arg = 0;
    bool launched = tlm_device_launch(d, k, dims, args, &err);
    int count = launches(grid, block, &first_arg);
    snprintf(line, sizeof line, "%d launch(es), last grid %ux%ux%u block %ux%ux%u", count, grid[0], grid[1], grid[2],
             block[0], block[1], block[2]);
    expect(launched && count == 1 && grid[0] == 3 && grid[1] == 1 && block[0] == 96 && block[2] == 1 && first_arg == a,
           "a launch reaches the driver with its grid, block and arguments", launched ? line : err.msg);

    /* Dynamic shared memory: within 48 KiB with the kernel's static shared
     * memory (4 KiB here) as it is; past it the kernel opts in
     * (cuFuncSetAttribute) at its first such launch, again only when a
     * launch asks for more, or the driver refuses the launch; static and
     * dynamic together at most the device's limit. */
    typedef int shared_fn(unsigned *);
    shared_fn *shared = (shared_fn *)dlsym(fake, "tlm_fake_cuda_shared");
    unsigned last = 0;
    bool opted = true;
    const unsigned sizes[] = {1024, 44 * 1024, 48 * 1024, 100 * 1024, 100 * 1024, 64 * 1024, 232448 - 4096};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes && opted; i++) {
        tlm_launch big = {.grid = {1, 1, 1}, .block = {32, 1, 1}, .shared_bytes = sizes[i]};
        opted = tlm_device_launch(d, k, big, args, &err);
    }
    int calls = shared(&last);
    snprintf(line, sizeof line, "%d opt-in(s), the last launch with %u bytes", calls, last);
    expect(opted && calls == 3 && last == 232448 - 4096,
           "launches with 1, 44, 48, 100, 100, 64 and 223 KiB of dynamic shared memory (and 4 KiB static) opt in "
           "three times",
           opted ? line : err.msg);
    tlm_launch past = {.grid = {1, 1, 1}, .block = {32, 1, 1}, .shared_bytes = 232448 - 4096 + 1};
    const char *msg = tlm_device_launch(d, k, past, args, &err) ? "(launched)" : err.msg;
    expect(strcmp(msg, "kernel tlm_fake_fill: 228353 bytes of dynamic shared memory and 4096 of static (tlm fake GPU "
                       "gives a block at most 232448)") == 0,
           "past the device's limit", msg);

    msg = tlm_device_kernel(d, m, "no_such_kernel", &err) ? "(found)" : err.msg;
    expect(strstr(msg, "no kernel named no_such_kernel") != NULL, "a kernel the module lacks", msg);
    tlm_kernel *failing = tlm_device_kernel(d, m, "tlm_fake_launch_fails", &err);
    if (!failing) die("kernel lookup", &err);
    msg = tlm_device_launch(d, failing, (tlm_launch){.grid = {1, 1, 1}, .block = {32, 1, 1}}, args, &err) ? "(launched)"
                                                                                                          : err.msg;
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
    check_graph(fake, d, k, a, b);

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
    const char *t = trace(), *closing = "destroy comm; destroy capture; ";
    expect(strstr(t, "destroy event 1; destroy event 2; ") != NULL && strlen(t) > strlen(closing) &&
               strcmp(t + strlen(t) - strlen(closing), closing) == 0,
           "events destroyed, the comm and capture streams at close", t);
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
    } else if (strcmp(machine, "graph_fails") == 0) {
        check_graph_fails(fake);
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
        fprintf(stderr, "usage: test_fake_driver h200|graph_fails|no_device|old_gpu|old_driver\n");
        return 2;
    }
    char count[32];
    snprintf(count, sizeof count, "%d", retained());
    expect(retained() == 0, "primary contexts retained after closing and failed opens", count);
    return failures ? 1 : 0;
}
