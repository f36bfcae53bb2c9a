/* The model.so descriptor from the IR: the compiler's side of the format,
 * whose home (writer, reader, validator, printer) is abi/model_so.h. */
#ifndef TLM_BLOB_H
#define TLM_BLOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "ir.h"

/* malloc'd blob; *size gets its length. cpu_needs: the x86 extensions the
 * CPU kernels may use (tlm_codegen_cpu_needs), recorded for tlm-run to
 * check; NULL records none (--emit-ir, which writes no kernels). */
uint8_t *blob_write(const ir_model *ir, const char *cpu_needs, size_t *size);

/* tlmc --emit-ir: lowers m and prints the descriptor's tables, read back
 * from the blob as tlm-run reads them. Returns false after printing a
 * one-line reason to stderr. */
bool emit_ir(FILE *out, const checked_model *m, int cpu_mlp);

#endif
