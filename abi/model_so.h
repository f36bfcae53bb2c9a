/* Opening a compiled model.so: checks the file before dlopen (so a truncated
 * or foreign file is an error, not a crash), resolves the ABI's symbols, and
 * validates every count, offset and index of the descriptor against its size
 * and checksum. After tlm_so_open succeeds, the tables can be read without
 * further bounds checks. */
#ifndef TLM_MODEL_SO_H
#define TLM_MODEL_SO_H

#include <stdbool.h>
#include <stddef.h>
#include "tlm_abi.h"

typedef struct tlm_so {
    void *handle;
    const tlm_blob_header *header;
    const tlm_abi_config *config;
    const tlm_abi_train *train;
    const tlm_abi_layer *layers;
    const tlm_abi_param *params;
    const tlm_abi_kernel *kernels;
    const tlm_abi_buffer *buffers;
    const tlm_abi_op *ops;
    const tlm_abi_plan *plans;
    const char *strings;
    const tlm_kernel_fns *kernel_fns;
    const char *cuda_source;
} tlm_so;

/* Returns false with a one-line reason in err. */
bool tlm_so_open(const char *path, tlm_so *m, char *err, size_t errlen);
void tlm_so_close(tlm_so *m);

/* A string of the descriptor (validated: always NUL-terminated). */
const char *tlm_so_str(const tlm_so *m, uint32_t offset);
/* The per-buffer offsets of plan i. */
const int64_t *tlm_so_plan_offsets(const tlm_so *m, int plan);

/* Checks a descriptor blob in memory (used by open, and by tests on
 * damaged copies). */
bool tlm_blob_validate(const uint8_t *blob, size_t size, char *err, size_t errlen);

#endif
