/* Which CPU to generate for and how wide its float vectors are. */
#ifndef TLM_CPU_TARGETS_H
#define TLM_CPU_TARGETS_H

#include <stdbool.h>

typedef struct {
    char *triple;   /* LLVM-owned strings: free with cpu_target_dispose */
    char *cpu;
    char *features; /* "" for a named CPU: LLVM derives them from the name */
    int vl;         /* floats per vector register we generate for */
  /* The CPU runs 256-bit operations as two 128-bit halves (AMD Zen 1,
   * Bulldozer, Jaguar): a shuffle across the halves (vperm2f128) costs it 8
   * micro-ops where one within each half costs 2, so the packing
   * transposes keep to the halves there (gemm_emit.c). */
    bool split_256;
  /* AVX-512 kernels use the wide register tile, 6 rows by 4 vectors
   * (gemm_default_blocking), for a model of this d_model or more; 0: never.
   * Intel's AVX-512 cores at any d_model (1), AMD's Zen 5 from 768. */
    int wide_tile_from;
} cpu_target;

/* name NULL or "native": the host CPU and its exact features. Otherwise an
 * x86-64 CPU name LLVM knows; unknown names are an error here because LLVM
 * itself only prints a warning and silently generates generic code. */
bool cpu_target_resolve(const char *name, cpu_target *t, char **err);
void cpu_target_dispose(cpu_target *t);

#endif
