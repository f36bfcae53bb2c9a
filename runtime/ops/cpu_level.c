/* tlm_rt/cpu_level.h: the runtime kernels' x86-64 level, asked of the CPU
 * once per process. */
#include "tlm_rt/cpu_level.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include "cpu_has.h"
#endif

static const char *const names[] = {"x86-64", "x86-64-v3", "x86-64-v4"};

const char *tlm_cpu_level_name(int level) { return names[level >= 4 ? 2 : level >= 3 ? 1 : 0]; }

/* The level TLM_CPU_CAPABILITY names, 5 (no cap) when unset or empty, -1
 * when it names none. */
static int capability(void) {
    const char *v = getenv("TLM_CPU_CAPABILITY");
    if (!v || !*v) return 5;
    for (int i = 0; i < 3; i++)
        if (!strcmp(v, names[i])) return i == 0 ? 0 : i + 2;
    return -1;
}

bool tlm_cpu_capability_ok(tlm_err *err) {
    if (capability() >= 0) return true;
    return tlm_fail(err, "TLM_CPU_CAPABILITY=%s: expected x86-64, x86-64-v3 or x86-64-v4",
                    getenv("TLM_CPU_CAPABILITY"));
}

static int ask_cpu(void) {
#if defined(__x86_64__)
#if defined(__clang__) && __clang_major__ < 16 /* no "x86-64-vN" names there */
    int v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi") &&
             __builtin_cpu_supports("bmi2") && TLM_CPU_HAS_F16C && TLM_CPU_HAS_MOVBE && TLM_CPU_HAS_LZCNT;
    int v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512cd");
#else
    int v3 = __builtin_cpu_supports("x86-64-v3"), v4 = __builtin_cpu_supports("x86-64-v4");
#endif
    return v4 ? 4 : v3 ? 3 : 0;
#else
    return 0;
#endif
}

/* Both asked once: under clang < 16 the CPU's answer takes CPUID
 * instructions, which a virtual machine traps, and every kernel call asks.
 * Threads may race to store the same value. */
int tlm_cpu_level_of_cpu(void) {
    static int known = -1;
    int level = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (level < 0) __atomic_store_n(&known, level = ask_cpu(), __ATOMIC_RELAXED);
    return level;
}

int tlm_cpu_level(void) {
    static int known = -1;
    int level = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (level >= 0) return level;
    int cap = capability();
    level = tlm_cpu_level_of_cpu();
    if (cap >= 0 && cap < level) level = cap;
    __atomic_store_n(&known, level, __ATOMIC_RELAXED);
    return level;
}

void tlm_cpu_level_describe(char *buf, size_t n) {
    int level = tlm_cpu_level(), cpu = tlm_cpu_level_of_cpu();
    if (level == cpu) snprintf(buf, n, "%s", tlm_cpu_level_name(level));
    else
        snprintf(buf, n, "%s (TLM_CPU_CAPABILITY; this CPU has %s)", tlm_cpu_level_name(level),
                 tlm_cpu_level_name(cpu));
}
