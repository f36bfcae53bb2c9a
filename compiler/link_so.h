/* Links object files into a shared object with the system linker (ld.lld-19,
 * ld.lld or ld; $TLM_LD overrides), writing the result atomically: to a
 * temporary file next to the target, which gets the integrity trailer
 * tlm-run checks (model_so.h) and is then renamed into place. On failure
 * *err is a malloc'd message, as codegen's (codegen_error.h). */
#ifndef TLM_LINK_SO_H
#define TLM_LINK_SO_H

#include <stdbool.h>
#include <stddef.h>

bool link_shared_object(const char *const *objects, int n, const char *out_path, char **err);

#endif
