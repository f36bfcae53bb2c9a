#include <stdio.h>

#include "codegen.h"

void tlm_kernel_symbol(const tlm_kernel_spec *s, const char *entry, char *buf, size_t len) {
    snprintf(buf, len, "tlm_mlp_%s_d%d_w%d_%s", tlm_enum_name(&tlm_mlp_enum, s->kind), s->d_model, s->width, entry);
}

/* Sizes are bounded so every offset computed in 64-bit stays far from
 * overflow and the CUDA source's int arithmetic on D*W stays in range. */
#define MAX_DIM (1 << 16)

bool tlm_kernel_spec_valid(const tlm_kernel_spec *s, char *msg, size_t len) {
    if ((unsigned)s->kind >= TLM_MLP_COUNT) {
        snprintf(msg, len, "unknown MLP kind %d", (int)s->kind);
        return false;
    }
    if (s->d_model < 1 || s->d_model > MAX_DIM || s->width < 1 || s->width > MAX_DIM) {
        snprintf(msg, len, "d_model %d / width %d out of range 1..%d", s->d_model, s->width, MAX_DIM);
        return false;
    }
    return true;
}
