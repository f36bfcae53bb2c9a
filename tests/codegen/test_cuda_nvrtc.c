/* The emitted CUDA source compiles with NVRTC for sm_90 and sm_80 (to SASS,
 * so ptxas limits count too) and each CUBIN has every expected entry point.
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

int main(void) {
    int major = 0, minor = 0;
    nvrtcVersion(&major, &minor);
    char *src = tlm_codegen_cuda_source(specs, N_SPECS);
    if (!src) {
        printf("FAIL: tlm_codegen_cuda_source returned NULL\n");
        return 1;
    }
    printf("NVRTC %d.%d, %zu bytes of CUDA source for %d specs\n", major, minor, strlen(src), N_SPECS);
    int fails = 0;
    static const char *archs[] = {"sm_90", "sm_80"};
    static const char *entries[] = {TLM_ENTRY_FWD, TLM_ENTRY_BWD_DATA, TLM_ENTRY_BWD_WEIGHT};
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
            for (int e = 0; e < 3; e++) {
                char sym[128];
                tlm_kernel_symbol(&specs[i], entries[e], sym, sizeof sym);
                if (!memmem(cubin, len, sym, strlen(sym) + 1)) {
                    printf("FAIL %s: CUBIN lacks %s\n", archs[a], sym);
                    missing++;
                }
            }
        printf("%s %s: %zu bytes of CUBIN, %d of %d entry points\n", missing ? "FAIL" : "ok  ", archs[a], len,
               3 * N_SPECS - missing, 3 * N_SPECS);
        fails += missing;
        free(cubin);
    }
  /* Bad specs are refused, not turned into broken source. */
    tlm_kernel_spec bad = {TLM_MLP_SWIGLU, 0, 64};
    char *none = tlm_codegen_cuda_source(&bad, 1);
    if (none) {
        printf("FAIL: source emitted for d_model 0\n");
        free(none);
        fails++;
    }
    free(src);
    printf("%s\n", fails ? "FAIL" : "PASS");
    return fails != 0;
}

#else
int main(void) {
    printf("SKIP: CUDA toolkit (NVRTC) not found when configuring; nothing compiled\n");
    return 77;
}
#endif
