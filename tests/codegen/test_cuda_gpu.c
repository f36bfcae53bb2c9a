/* The emitted CUDA kernels on a real GPU: NVRTC-compiled for the device's
 * architecture, loaded with the CUDA runtime's library API, launched with
 * the documented geometry (TLM_CUDA_BLOCK_THREADS, tlm_cuda_grid_size), and
 * checked like the CPU kernels (mlp_check.h: float64 reference, NaN-poisoned
 * outputs, untouched out-of-range elements, accumulation). Host-side
 * wrappers with the CPU signatures copy whole buffers to the device and
 * back, so the checks apply unchanged. Exits 77 (ctest: skipped) without
 * the CUDA toolkit or without a usable GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlp_check.h"

#if TLM_HAVE_CUDART
#include <cuda_runtime_api.h>
#include <nvrtc.h>

/* What the wrappers need beyond the CPU arguments. */
static cudaLibrary_t gpu_lib;
static const tlm_kernel_spec *cur_spec;
static int cur_rows; /* rows in the case's buffers */
static int gpu_errors;

static int cuda_ok(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return 1;
    printf("FAIL %s: %s\n", what, cudaGetErrorString(e));
    gpu_errors++;
    return 0;
}

static float *to_device(const float *host, size_t n) {
    if (!host) return NULL;
    void *d = NULL;
    if (cuda_ok(cudaMalloc(&d, n * sizeof(float)), "cudaMalloc"))
        cuda_ok(cudaMemcpy(d, host, n * sizeof(float), cudaMemcpyHostToDevice), "copy in");
    return d;
}

/* Copies back (when host is an output) and frees. */
static void from_device(float *host, float *dev, size_t n) {
    if (!dev) return;
    if (host) cuda_ok(cudaMemcpy(host, dev, n * sizeof(float), cudaMemcpyDeviceToHost), "copy out");
    cudaFree(dev);
}

static void launch(const char *entry, int64_t range, void **args) {
    char sym[128];
    tlm_kernel_symbol(cur_spec, entry, sym, sizeof sym);
    cudaKernel_t kernel;
    if (!cuda_ok(cudaLibraryGetKernel(&kernel, gpu_lib, sym), sym)) return;
    dim3 grid = {tlm_cuda_grid_size(cur_spec, entry, range), 1, 1};
    dim3 block = {TLM_CUDA_BLOCK_THREADS, 1, 1};
    if (cuda_ok(cudaLaunchKernel((const void *)kernel, grid, block, args, 0, 0), sym))
        cuda_ok(cudaDeviceSynchronize(), sym);
}

static void gpu_fwd(int64_t r0, int64_t r1, const float *x, const float *w_gate, const float *w_up, const float *w_down,
                    float *pre_gate, float *pre_up, float *out) {
    size_t N = (size_t)cur_rows, D = (size_t)cur_spec->d_model, W = (size_t)cur_spec->width;
    float *dx = to_device(x, N * D), *dwg = to_device(w_gate, W * D);
    float *dwu = to_device(w_up, W * D), *dwd = to_device(w_down, D * W);
    float *dpg = to_device(pre_gate, N * W), *dpu = to_device(pre_up, N * W);
    float *dout = to_device(out, N * D);
    long long a0 = r0, a1 = r1;
    void *args[] = {&a0, &a1, &dx, &dwg, &dwu, &dwd, &dpg, &dpu, &dout};
    launch(TLM_ENTRY_FWD, r1 - r0, args);
    from_device(NULL, dx, 0);
    from_device(NULL, dwg, 0);
    from_device(NULL, dwu, 0);
    from_device(NULL, dwd, 0);
    from_device(pre_gate, dpg, N * W);
    from_device(pre_up, dpu, N * W);
    from_device(out, dout, N * D);
}

static void gpu_bwd_data(int64_t r0, int64_t r1, const float *x, const float *w_gate, const float *w_up,
                         const float *w_down, const float *pre_gate, float *pre_up, const float *dout,
                         float *d_pre_gate, float *d_pre_up, float *dx) {
    size_t N = (size_t)cur_rows, D = (size_t)cur_spec->d_model, W = (size_t)cur_spec->width;
    float *gx = to_device(x, N * D), *gwg = to_device(w_gate, W * D);
    float *gwu = to_device(w_up, W * D), *gwd = to_device(w_down, D * W);
    float *gpg = to_device(pre_gate, N * W), *gpu = to_device(pre_up, N * W);
    float *gdout = to_device(dout, N * D), *gdpg = to_device(d_pre_gate, N * W);
    float *gdpu = to_device(d_pre_up, N * W), *gdx = to_device(dx, N * D);
    long long a0 = r0, a1 = r1;
    void *args[] = {&a0, &a1, &gx, &gwg, &gwu, &gwd, &gpg, &gpu, &gdout, &gdpg, &gdpu, &gdx};
    launch(TLM_ENTRY_BWD_DATA, r1 - r0, args);
    float *inputs[] = {gx, gwg, gwu, gwd, gpg, gdout};
    for (int i = 0; i < 6; i++) from_device(NULL, inputs[i], 0);
    from_device(pre_up, gpu, N * W); /* h, for bwd_weight */
    from_device(d_pre_gate, gdpg, N * W);
    from_device(d_pre_up, gdpu, N * W);
    from_device(dx, gdx, N * D);
}

static void gpu_bwd_weight(int64_t rows, int64_t j0, int64_t j1, const float *x, const float *pre_gate,
                           const float *pre_up, const float *dout, const float *d_pre_gate, const float *d_pre_up,
                           float *dw_gate, float *dw_up, float *dw_down) {
    size_t N = (size_t)rows, D = (size_t)cur_spec->d_model, W = (size_t)cur_spec->width;
    float *gx = to_device(x, N * D), *gpg = to_device(pre_gate, N * W);
    float *gpu = to_device(pre_up, N * W), *gdout = to_device(dout, N * D);
    float *gdpg = to_device(d_pre_gate, N * W), *gdpu = to_device(d_pre_up, N * W);
    float *gdwg = to_device(dw_gate, W * D), *gdwu = to_device(dw_up, W * D);
    float *gdwd = to_device(dw_down, D * W);
    long long a0 = rows, a1 = j0, a2 = j1;
    void *args[] = {&a0, &a1, &a2, &gx, &gpg, &gpu, &gdout, &gdpg, &gdpu, &gdwg, &gdwu, &gdwd};
    launch(TLM_ENTRY_BWD_WEIGHT, j1 - j0, args);
    float *inputs[] = {gx, gpg, gpu, gdout, gdpg, gdpu};
    for (int i = 0; i < 6; i++) from_device(NULL, inputs[i], 0);
    from_device(dw_gate, gdwg, W * D);
    from_device(dw_up, gdwu, W * D);
    from_device(dw_down, gdwd, D * W);
}

static void *gpu_lookup(const tlm_kernel_spec *s, const char *entry) {
    cur_spec = s;
    if (!strcmp(entry, TLM_ENTRY_FWD)) return (void *)gpu_fwd;
    if (!strcmp(entry, TLM_ENTRY_BWD_DATA)) return (void *)gpu_bwd_data;
    return (void *)gpu_bwd_weight;
}

static char *compile_cubin(const char *src, int major, int minor) {
    nvrtcProgram prog;
    if (nvrtcCreateProgram(&prog, src, "tlm_mlp.cu", 0, NULL, NULL) != NVRTC_SUCCESS) return NULL;
    char arch[64];
    snprintf(arch, sizeof arch, "--gpu-architecture=sm_%d%d", major, minor);
    const char *opts[] = {arch, "--std=c++17"};
    nvrtcResult r = nvrtcCompileProgram(prog, 2, opts);
    size_t len = 0;
    char *out = NULL;
    if (r == NVRTC_SUCCESS && nvrtcGetCUBINSize(prog, &len) == NVRTC_SUCCESS) {
        out = malloc(len);
        nvrtcGetCUBIN(prog, out);
    } else {
        nvrtcGetProgramLogSize(prog, &len);
        char *log = malloc(len + 1);
        nvrtcGetProgramLog(prog, log);
        printf("FAIL NVRTC for %s: %s\n%s\n", arch, nvrtcGetErrorString(r), log);
        free(log);
    }
    nvrtcDestroyProgram(&prog);
    return out;
}

int main(void) {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 1) {
        printf("SKIP: no usable CUDA GPU here\n");
        return 77;
    }
    struct cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    printf("GPU: %s, sm_%d%d\n", prop.name, prop.major, prop.minor);
    uint64_t rng = test_seed();
    const tlm_kernel_spec specs[] = {
        {TLM_MLP_SWIGLU, 72, 40}, {TLM_MLP_SWIGLU, 72, 200}, {TLM_MLP_SWIGLU, 72, 1000}, {TLM_MLP_GELU, 72, 40},
        {TLM_MLP_GELU, 72, 200},  {TLM_MLP_GELU, 72, 1000},  {TLM_MLP_SWIGLU, 300, 56},  {TLM_MLP_GELU, 17, 3},
    };
    const mlp_case cases[] = {
        {1, 0, 1, 0, 0}, {5, 0, 5, 0, 0}, {37, 0, 37, 0, 0}, {37, 3, 30, 7, -5}, {300, 7, 290, 1, -1},
    };
    int n_specs = (int)(sizeof specs / sizeof specs[0]);
    char *src = tlm_codegen_cuda_tile_source(specs, n_specs);
    char *cubin = src ? compile_cubin(src, prop.major, prop.minor) : NULL;
    free(src);
    if (!cubin) return 1;
    int loaded = cuda_ok(cudaLibraryLoadData(&gpu_lib, cubin, NULL, NULL, 0, NULL, NULL, 0), "cudaLibraryLoadData");
    free(cubin);
    if (!loaded) return 1;
    kernel_lib lib;
    memset(&lib, 0, sizeof lib);
    lib.lookup = gpu_lookup;
    int fails = 0;
    for (int i = 0; i < n_specs; i++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            cur_rows = cases[c].rows;
            fails += mlp_check_spec(&lib, &specs[i], &cases[c], &rng);
        }
    cudaLibraryUnload(gpu_lib);
    fails += gpu_errors;
    printf("%s: %d failed comparisons, %d CUDA errors\n", fails ? "FAIL" : "PASS", fails - gpu_errors, gpu_errors);
    return fails != 0;
}

#else
int main(void) {
    printf("SKIP: CUDA toolkit (runtime + NVRTC) not found when configuring\n");
    return 77;
}
#endif
