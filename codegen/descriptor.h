/* The descriptor object of model.so: the ABI's exported data (magic,
 * version, the blob, the kernel table of function pointers, the CUDA
 * source), emitted through LLVM for the same target as the kernels so that
 * tlmc needs no C compiler, only a linker. */
#ifndef TLM_DESCRIPTOR_H
#define TLM_DESCRIPTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codegen.h"

/* specs[i] gives the kernel table's entry i (its three entry symbols). */
bool tlm_codegen_descriptor_object(const uint8_t *blob, size_t blob_size, const tlm_kernel_spec *specs, int nkernels,
                                   const char *cuda_source, const tlm_codegen_options *opt, const char *obj_path,
                                   char **err);

#endif
