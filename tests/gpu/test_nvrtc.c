/* gpu.nvrtc: every CUDA source tlm compiles at run time compiles with NVRTC
 * to a real CUBIN for the architectures of the GPUs tlm targets (A100:
 * sm_80, H100/H200: sm_90), on a machine with the toolkit and no GPU: the
 * runtime's kernels in their two modules (runtime/gpu: common.cuh and the
 * .cu files, the very strings tlm-run embeds; gpu.h, tlm_gpu_modules) and
 * the generated MLP kernels of both kinds
 * (tlm_codegen_cuda_source). A source with an error fails with NVRTC's own
 * message. The emulated device runs these sources through a host compiler,
 * which accepts things NVRTC does not (and the other way round): this is the
 * check that the GPU would get code it can load. NVRTC is opened at first
 * use (runtime/device/cuda_toolkit.h): not loaded before, loaded after, and
 * cuBLASLt, which no compile needs, not at all. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codegen.h"
#include "gpu.h"
#include "nvrtc_compile.h"

static int failures;

static void check(bool ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "gpu.nvrtc: FAILED: %s\n", what);
        failures++;
    }
}

/* Whether soname is loaded in this process (without loading it). */
static bool loaded(const char *soname) {
    void *lib = dlopen(soname, RTLD_NOW | RTLD_NOLOAD);
    if (lib) dlclose(lib);
    return lib != NULL;
}

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Compiles source for arch and checks that the result is an ELF CUBIN. */
static void compile_to_cubin(const char *what, const char *source, const char *arch) {
    uint8_t *cubin = NULL;
    size_t size = 0;
    tlm_err err = {{0}};
    double t0 = seconds();
    bool ok = tlm_nvrtc_compile(source, arch, &cubin, &size, &err);
    double took = seconds() - t0;
    char label[256];
    snprintf(label, sizeof label, "%s for %s", what, arch);
    if (!ok) {
        fprintf(stderr, "gpu.nvrtc: %s: %s\n", label, err.msg);
        check(false, label);
        return;
    }
    static const uint8_t elf_magic[4] = {0x7f, 'E', 'L', 'F'};
    check(size > sizeof elf_magic && memcmp(cubin, elf_magic, sizeof elf_magic) == 0, label);
    printf("gpu.nvrtc: %s: %zu-byte CUBIN in %.2f s\n", label, size, took);
    free(cubin);
}

int main(void) {
    static const char *const archs[] = {"sm_80", "sm_90"};
    enum { NARCHS = sizeof archs / sizeof archs[0] };

    check(!loaded(TLM_NVRTC_SONAME), "NVRTC is not loaded before its first use");

    /* The identity and options that go into the module cache key. */
    const char *version = tlm_nvrtc_version();
    check(loaded(TLM_NVRTC_SONAME), "NVRTC is loaded at its first use");
    check(strncmp(version, "nvrtc ", 6) == 0 && strcmp(version, "nvrtc 0.0") != 0, "tlm_nvrtc_version");
    char options[512];
    tlm_nvrtc_options("sm_90", options, sizeof options);
    check(strstr(options, "--gpu-architecture=sm_90") != NULL, "the options name the architecture");
    check(strstr(options, "fast_math") == NULL, "no --use_fast_math (fp32 is compared with the CPU to 1e-5)");
    printf("gpu.nvrtc: %s, options: %s\n", version, options);
    for (int a = 0; a < NARCHS; a++) check(tlm_nvrtc_supports(archs[a]), "NVRTC supports sm_80 and sm_90");
    check(!tlm_nvrtc_supports("sm_10"), "NVRTC does not claim sm_10");

    /* Each module of the runtime's kernels (gpu.h: the runtime's, and the
     * tensor-core attention, compiled apart). */
    for (int id = 0; id < TLM_GPU_MODULE_COUNT; id++)
        for (int a = 0; a < NARCHS; a++)
            compile_to_cubin(tlm_gpu_modules[id].what, tlm_gpu_modules[id].source, archs[a]);

    /* Both MLP kinds, one width a multiple of 64 and one not (each spec
     * costs seconds of NVRTC time, so two). */
    const tlm_kernel_spec specs[] = {
        {TLM_MLP_SWIGLU, 64, 96},
        {TLM_MLP_GELU, 128, 200},
    };
    const int nspecs = (int)(sizeof specs / sizeof specs[0]);
    char *mlp = tlm_codegen_cuda_source(specs, nspecs), *tiles = tlm_codegen_cuda_tile_source(specs, nspecs);
    check(mlp != NULL && tiles != NULL, "tlm_codegen_cuda_source and _tile_source");
    for (int a = 0; a < NARCHS; a++) {
        if (mlp) compile_to_cubin("the MLP kernels", mlp, archs[a]);
        if (tiles) compile_to_cubin("the fused tile kernels", tiles, archs[a]);
    }
    free(mlp);
    free(tiles);

    /* An error comes back as NVRTC's message, naming what is wrong. */
    uint8_t *cubin = (uint8_t *)"untouched";
    size_t size = 1;
    tlm_err err = {{0}};
    const char *broken = "extern \"C\" __global__ void tlm_broken(float *x) { x[0] = no_such_name; }\n";
    check(!tlm_nvrtc_compile(broken, "sm_90", &cubin, &size, &err), "a broken source fails");
    check(cubin == NULL && size == 0, "a failed compile returns no CUBIN");
    check(strstr(err.msg, "no_such_name") != NULL && strstr(err.msg, "error") != NULL,
          "the failure carries NVRTC's message");
    printf("gpu.nvrtc: a broken source: %s\n", err.msg);
    check(!loaded(TLM_CUBLASLT_SONAME), "cuBLASLt is not loaded by NVRTC's users");

    if (failures) {
        fprintf(stderr, "gpu.nvrtc: %d check(s) failed\n", failures);
        return 1;
    }
    printf("gpu.nvrtc: all checks passed\n");
    return 0;
}
