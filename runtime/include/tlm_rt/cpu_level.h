/* The x86-64 level of the runtime's own CPU kernels: attention's block
 * products and softmax, RMSNorm, RoPE and AdamW (vec8.h's V8_KERNEL and
 * block_gemm.h pick their build by it). A model's generated MLP kernels are
 * not among them: their level is fixed when tlmc compiles the model
 * (--cpu).
 *
 * The level is the CPU's, or lower where TLM_CPU_CAPABILITY asks:
 *
 *   TLM_CPU_CAPABILITY=x86-64      the baseline build (SSE2)
 *   TLM_CPU_CAPABILITY=x86-64-v3   AVX2 and FMA, no AVX-512
 *   TLM_CPU_CAPABILITY=x86-64-v4   AVX-512 (the CPU's own where it has it)
 *
 * (the names are tlmc --cpu's; PyTorch's ATEN_CPU_CAPABILITY is the same
 * idea). Its use is measuring: an AVX2-only machine's code paths on an
 * AVX-512 one (bench/train_bench.sh --avx2), both builds of a kernel side
 * by side. A level above the CPU's gives the CPU's. Read once, at the
 * first kernel call. */
#ifndef TLM_RT_CPU_LEVEL_H
#define TLM_RT_CPU_LEVEL_H

#include <stdbool.h>
#include <stddef.h>

#include "tlm_rt/error.h"

/* 0 (below x86-64-v3, or not x86-64), 3 or 4: the CPU's level capped by
 * TLM_CPU_CAPABILITY (a value tlm_cpu_capability_ok refuses counts as
 * unset). */
int tlm_cpu_level(void);

/* The CPU's own level, 0, 3 or 4. */
int tlm_cpu_level_of_cpu(void);

/* TLM_CPU_CAPABILITY unset, empty, or one of the three names; false with
 * err otherwise. */
bool tlm_cpu_capability_ok(tlm_err *err);

/* "x86-64", "x86-64-v3" or "x86-64-v4". */
const char *tlm_cpu_level_name(int level);

/* The level in words for tlm-run info and bench: "x86-64-v4", or
 * "x86-64-v3 (TLM_CPU_CAPABILITY; this CPU has x86-64-v4)" when lowered. */
void tlm_cpu_level_describe(char *buf, size_t n);

#endif
