/* The descriptor blob of model.so (format: runtime/abi/tlm_abi.h), written
 * from the IR. */
#ifndef TLM_BLOB_H
#define TLM_BLOB_H

#include <stddef.h>
#include <stdint.h>
#include "ir.h"

/* malloc'd blob; *size gets its length. */
uint8_t *blob_write(const ir_model *ir, size_t *size);

#endif
