/* x86-64 extensions that __builtin_cpu_supports cannot name everywhere:
 * clang before 16 knows no "f16c", "lzcnt" or "movbe". There they are read
 * from CPUID (leaf 1 ECX bits 29 and 22, leaf 0x80000001 ECX bit 5); the
 * AVX state that f16c needs is what the "avx" test checks. Used by
 * model_so.c (a model.so's cpu_needs) and runtime/ops/cpu_level.c (the
 * runtime kernels' x86-64 level). */
#ifndef TLM_CPU_HAS_H
#define TLM_CPU_HAS_H

#if defined(__x86_64__)
#include <cpuid.h>

/* ECX bit `bit` of CPUID leaf `leaf`: also test_vec8_dispatch's LZCNT
 * where /proc/cpuinfo does not list it. */
static inline int tlm_cpuid_bit(unsigned leaf, int bit) {
    unsigned a, b, c, d;
    return __get_cpuid(leaf, &a, &b, &c, &d) && (c >> bit & 1);
}

#if defined(__clang__) && __clang_major__ < 16
#define TLM_CPU_HAS_F16C tlm_cpuid_bit(1, 29)
#define TLM_CPU_HAS_MOVBE tlm_cpuid_bit(1, 22)
#define TLM_CPU_HAS_LZCNT tlm_cpuid_bit(0x80000001u, 5)
#else
#define TLM_CPU_HAS_F16C __builtin_cpu_supports("f16c")
#define TLM_CPU_HAS_MOVBE __builtin_cpu_supports("movbe")
#define TLM_CPU_HAS_LZCNT __builtin_cpu_supports("lzcnt")
#endif
#endif

#endif
