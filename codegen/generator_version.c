/* The code generator's own version (codegen.h): the kernels a model.so
 * holds change with it as much as with tlmc, so `tlmc --version` names it. */
#include <llvm-c/Core.h>
#include <stdio.h>

#include "codegen.h"

void tlm_codegen_version(char *buf, size_t n) {
    unsigned major, minor, patch;
    LLVMGetVersion(&major, &minor, &patch);
    snprintf(buf, n, "LLVM %u.%u.%u", major, minor, patch);
}
