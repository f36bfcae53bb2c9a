/* Test helper: generate kernels into an object, link it into a shared object
 * with the system C compiler (as the runtime will), dlopen it. */
#ifndef TLM_KERNEL_LOADER_H
#define TLM_KERNEL_LOADER_H

#include <stdio.h>

#include "codegen.h"

typedef struct {
    void *handle;
    char dir[256];         /* scratch directory, removed by kernel_lib_close */
    char prefix[16];       /* prepended to kernel symbols when looking them up */
    double codegen_seconds;
  /* If set, kernel_lib_sym asks this instead of the shared object (the GPU
   * test hands out host-side wrappers that launch the CUDA kernels). */
    void *(*lookup)(const tlm_kernel_spec *s, const char *entry);
} kernel_lib;

/* On failure returns false and sets *err (malloc'd). */
bool kernel_lib_build(kernel_lib *lib, const tlm_kernel_spec *specs, int n, const tlm_codegen_options *opt, char **err);
/* An empty lib with its scratch directory, for tests that build their own
 * shared object there (see kernel_lib_open). */
bool kernel_lib_make_dir(kernel_lib *lib, char **err);
bool kernel_lib_open(kernel_lib *lib, const char *so_path, char **err);
/* The generated CUDA source, then what wrappers(f, spec) writes for each
 * of specs[0, n) (the kernels' TLM_EMU_EXPORT lines and the host entry
 * points the test calls), compiled with the C++ compiler cxx against
 * cuda_emu.h (in include_dir) in a scratch directory, and opened: the
 * emulated device's way, for tests of single kernels. */
bool kernel_lib_build_emulated(kernel_lib *lib, const char *cxx, const char *include_dir, const char *source,
                               const tlm_kernel_spec *specs, int n, void (*wrappers)(FILE *, const tlm_kernel_spec *),
                               char **err);
void *kernel_lib_sym(kernel_lib *lib, const tlm_kernel_spec *s, const char *entry);
void kernel_lib_close(kernel_lib *lib);

#endif
