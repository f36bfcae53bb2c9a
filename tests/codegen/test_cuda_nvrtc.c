/* Both emitted CUDA sources (model.so's elementwise kernels and the fused
 * tile kernels) compile with NVRTC for sm_90 and sm_80 (to SASS, so ptxas
 * limits count too) and each CUBIN has every expected entry point.
 * Needs no GPU; exits 77 (ctest: skipped) when CUDA was not found. Kept to
 * three specs: NVRTC takes ~1 s per spec and architecture. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"

#if TLM_HAVE_NVRTC
#include <nvrtc.h>

static const tlm_kernel_spec specs[] = {
    {TLM_MLP_SWIGLU, 72, 200},
    {TLM_MLP_GELU, 72, 40},
    {TLM_MLP_SWIGLU, 256, 1024},
};
enum { N_SPECS = sizeof specs / sizeof specs[0] };

/* Compiles for one architecture; on success *out holds the CUBIN. */
static int compile(const char *src, const char *arch, char **out, size_t *len) {
    nvrtcProgram prog;
    nvrtcResult r = nvrtcCreateProgram(&prog, src, "tlm_mlp.cu", 0, NULL, NULL);
    if (r != NVRTC_SUCCESS) {
        printf("FAIL nvrtcCreateProgram: %s\n", nvrtcGetErrorString(r));
        return 0;
    }
    char opt[64];
    snprintf(opt, sizeof opt, "--gpu-architecture=%s", arch);
    const char *opts[] = {opt, "--std=c++17"};
    r = nvrtcCompileProgram(prog, 2, opts);
    size_t log_len = 0;
    nvrtcGetProgramLogSize(prog, &log_len);
    if (log_len > 1) {
        char *log = malloc(log_len);
        nvrtcGetProgramLog(prog, log);
        printf("%s log:\n%s\n", arch, log);
        free(log);
    }
    if (r != NVRTC_SUCCESS) {
        printf("FAIL compiling for %s: %s\n", arch, nvrtcGetErrorString(r));
        nvrtcDestroyProgram(&prog);
        return 0;
    }
    nvrtcGetCUBINSize(prog, len);
    *out = malloc(*len + 1);
    nvrtcGetCUBIN(prog, *out);
    nvrtcDestroyProgram(&prog);
    return 1;
}

/* Compiles one source for both architectures and counts the entries its
 * CUBINs lack (every spec's `entries`), or a failed compile as one. */
static int check_source(const char *what, char *src, const char *const *entries, int nentries) {
    if (!src) {
        printf("FAIL: %s: the generator returned NULL\n", what);
        return 1;
    }
    printf("%s: %zu bytes of CUDA source for %d specs\n", what, strlen(src), N_SPECS);
    int fails = 0;
    static const char *archs[] = {"sm_90", "sm_80"};
    for (int a = 0; a < 2; a++) {
        char *cubin = NULL;
        size_t len = 0;
        if (!compile(src, archs[a], &cubin, &len) || len == 0) {
            fails++;
            continue;
        }
    /* extern "C" names appear verbatim in the CUBIN's ELF symbol table. */
        int missing = 0;
        for (int i = 0; i < N_SPECS; i++)
            for (int e = 0; e < nentries; e++) {
                char sym[128];
                tlm_kernel_symbol(&specs[i], entries[e], sym, sizeof sym);
                if (!memmem(cubin, len, sym, strlen(sym) + 1)) {
                    printf("FAIL %s %s: CUBIN lacks %s\n", what, archs[a], sym);
                    missing++;
                }
            }
        printf("%s %s %s: %zu bytes of CUBIN, %d of %d entry points\n", missing ? "FAIL" : "ok  ", what, archs[a], len,
               nentries * N_SPECS - missing, nentries * N_SPECS);
        fails += missing;
        free(cubin);
    }
    free(src);
    return fails;
}

int main(void) {
    int major = 0, minor = 0;
    nvrtcVersion(&major, &minor);
    printf("NVRTC %d.%d\n", major, minor);
    static const char *const elementwise[] = {TLM_ENTRY_ACT, TLM_ENTRY_ACT "_bf16", TLM_ENTRY_ACT_GRAD,
                                              TLM_ENTRY_ACT_GRAD "_bf16"};
    static const char *const fused[] = {TLM_ENTRY_FWD, TLM_ENTRY_BWD_DATA, TLM_ENTRY_BWD_WEIGHT};
    int fails = check_source("model.so's source", tlm_codegen_cuda_source(specs, N_SPECS), elementwise, 4);
    fails += check_source("the fused tile kernels", tlm_codegen_cuda_tile_source(specs, N_SPECS), fused, 3);
    /* model.so's source leaves the fused kernels out (their compile is
     * most of NVRTC's time, for kernels no run launches) */
    char *src = tlm_codegen_cuda_source(specs, N_SPECS), sym[128];
    tlm_kernel_symbol(&specs[0], TLM_ENTRY_FWD, sym, sizeof sym);
    if (!src || strstr(src, sym)) {
        printf("FAIL: model.so's source holds %s\n", sym);
        fails++;
    }
    free(src);
  /* Bad specs are refused, not turned into broken source. */
    tlm_kernel_spec bad = {TLM_MLP_SWIGLU, 0, 64};
    char *none = tlm_codegen_cuda_source(&bad, 1), *no_tiles = tlm_codegen_cuda_tile_source(&bad, 1);
    if (none || no_tiles) {
        printf("FAIL: source emitted for d_model 0\n");
        free(none);
        free(no_tiles);
        fails++;
    }
    printf("%s\n", fails ? "FAIL" : "PASS");
    return fails != 0;
}

#else
int main(void) {
    printf("SKIP: CUDA toolkit (NVRTC) not found when configuring; nothing compiled\n");
    return 77;
}
#endif
