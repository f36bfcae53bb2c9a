/* tlmc -o model.so: the back end's stages, in order: lower to IR, generate
 * the CPU kernels (LLVM), the CUDA source and the descriptor object, link. */
#ifndef TLM_BUILD_SO_H
#define TLM_BUILD_SO_H

#include <stdbool.h>
#include <stdio.h>
#include "checked_model.h"

typedef struct build_options {
    const char *cpu;          /* NULL: the host */
    int opt_level;
    FILE *timing;             /* non-NULL: print each stage's time here */
    int cpu_mlp;              /* -1: tlmc's rule per width (codegen.h: tlm_cpu_mlp_choice), else tlm_mlp_impl */
} build_options;

/* Returns false after printing a one-line reason to stderr. */
bool build_shared_object(const checked_model *m, const char *out_path, const build_options *o);

#endif
