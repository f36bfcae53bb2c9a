/* The code generator's LLVM entry points for a build without LLVM
 * (TLM_SKIP_DIRS=codegen, see codegen/CMakeLists.txt). The rest of codegen
 * (kernel names, spec checks, the CUDA source) needs no LLVM and is built
 * as usual, so tlmc still checks, reports and prints IR; writing model.so
 * fails here, with a message that says why. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"
#include "codegen_error.h"
#include "descriptor.h"

static const char without_llvm[] = "codegen: this build has no code generator (configured with TLM_SKIP_DIRS=codegen), "
                                   "so it cannot write model.so";

bool tlm_codegen_cpu_object(const tlm_kernel_spec *specs, int n, const tlm_codegen_options *opt, const char *obj_path,
                            char **err) {
    (void)specs, (void)n, (void)opt, (void)obj_path;
    return codegen_fail(err, "%s", without_llvm);
}

void tlm_codegen_version(char *buf, size_t n) { snprintf(buf, n, "no code generator"); }

bool tlm_codegen_cpu_known(const char *name, char **err) {
    (void)name, (void)err;
    return true;
}

char *tlm_codegen_cpu_needs(const char *name, char **err) {
    (void)name, (void)err;
    char *none = malloc(1);
    if (none) *none = '\0';
    else codegen_fail(err, "codegen: out of memory");
    return none;
}

char *tlm_codegen_cpu_tile(const char *name, int d_model, char **err) {
    (void)name, (void)d_model;
    if (err) *err = NULL;
    static const char none[] = "no code generator in this build";
    char *s = malloc(sizeof none);
    if (s) memcpy(s, none, sizeof none);
    else codegen_fail(err, "codegen: out of memory");
    return s;
}

void tlm_codegen_free(char *s) { free(s); }

bool tlm_codegen_descriptor_object(const uint8_t *blob, size_t blob_size, const tlm_kernel_spec *specs, int nkernels,
                                   const char *cuda_source, const tlm_codegen_options *opt, const char *obj_path,
                                   char **err) {
    (void)blob, (void)blob_size, (void)specs, (void)nkernels, (void)cuda_source, (void)opt, (void)obj_path;
    return codegen_fail(err, "%s", without_llvm);
}
