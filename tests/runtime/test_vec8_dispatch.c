/* vec8.h's V8_KERNEL runs the x86-64-v3 build of a kernel on a CPU that
 * has AVX2 and FMA, and the baseline build elsewhere, whatever compiler
 * built it. Checked two ways:
 *  - v8_cpu_level against the CPU's flags as Linux lists them in
 *    /proc/cpuinfo (not the compiler's __builtin_cpu_supports, which is
 *    what v8_cpu_level itself asks; LZCNT from CPUID where the list lacks
 *    it: has_lzcnt), lowered by TLM_CPU_CAPABILITY where
 *    it is set (ctest runs this test under each of its three values too);
 *  - what a kernel computes: built with -ffp-contract=fast (as attention.c
 *    is), a * b + c is one fused multiply-add in the v3 build and a rounded
 *    product then a sum in the baseline, and the operands below tell the
 *    two apart. A dispatcher that picks the baseline on an AVX2 CPU (as
 *    clang 14's target_clones resolver did) fails here. Unoptimised
 *    builds fuse nothing, so there only the first check runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../runtime/ops/vec8.h"

#ifdef V8_X86_LEVELS
#include "cpu_has.h"

V8_KERNEL(multiply_add, (float *out, const float *a, const float *b, const float *c), (out, a, b, c)) {
    *out = *a * *b + *c;
}

/* Whether the `flags` line of /proc/cpuinfo's first CPU lists `flag`;
 * -1 where the file cannot be read. */
static int cpu_has(const char *flag) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return -1;
    char line[8192];
    int found = -1;
    while (found < 0 && fgets(line, sizeof line, f)) {
        if (strncmp(line, "flags", 5) != 0) continue;
        char *colon = strchr(line, ':');
        found = 0;
        if (colon)
            for (char *tok = strtok(colon + 1, " \t\n"); tok; tok = strtok(NULL, " \t\n"))
                if (!strcmp(tok, flag)) found = 1;
    }
    fclose(f);
    return found;
}

/* Whether the CPU has LZCNT. Linux names it "abm", but a guest kernel
 * may list no "abm" on a CPU that has it (seen on an AMD Zen 5 under
 * Firecracker, Linux 6.18, where every other flag of x86-64-v3 and v4 is
 * listed): there CPUID's own bit (leaf 0x80000001, ECX bit 5) is asked. */
static int has_lzcnt(void) {
    int listed = cpu_has("abm");
    return listed != 0 ? listed : tlm_cpuid_bit(0x80000001u, 5);
}

/* The x86-64 level the flags make, 0, 3 or 4 (as v8_cpu_level counts). */
static int level_from_flags(void) {
    static const char *v3[] = {"avx2", "fma", "bmi1", "bmi2", "avx", "f16c", "movbe"};
    static const char *v4[] = {"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd"};
    for (size_t i = 0; i < sizeof v3 / sizeof *v3; i++) {
        int has = cpu_has(v3[i]);
        if (has < 0) {
            fprintf(stderr, "test_vec8_dispatch: cannot read the CPU's flags from /proc/cpuinfo\n");
            exit(1);
        }
        if (!has) return 0;
    }
    if (!has_lzcnt()) return 0;
    for (size_t i = 0; i < sizeof v4 / sizeof *v4; i++)
        if (!cpu_has(v4[i])) return 3;
    return 4;
}

/* The level TLM_CPU_CAPABILITY caps the kernels at, 4 when unset. */
static int capability_cap(void) {
    const char *v = getenv("TLM_CPU_CAPABILITY");
    if (!v || !*v || !strcmp(v, "x86-64-v4")) return 4;
    if (!strcmp(v, "x86-64-v3")) return 3;
    if (!strcmp(v, "x86-64")) return 0;
    fprintf(stderr, "test_vec8_dispatch: TLM_CPU_CAPABILITY=%s is not a level\n", v);
    exit(1);
}
#endif

int main(void) {
#ifdef V8_X86_LEVELS
    int failures = 0;
    int cpu_level = level_from_flags(), cap = capability_cap();
    int level = v8_cpu_level(), want_level = cpu_level < cap ? cpu_level : cap;
    if (tlm_cpu_level_of_cpu() != cpu_level) {
        fprintf(stderr, "tlm_cpu_level_of_cpu() = %d, but /proc/cpuinfo's flags make level %d\n",
                tlm_cpu_level_of_cpu(), cpu_level);
        failures++;
    }
    if (level != want_level) {
        fprintf(stderr, "v8_cpu_level() = %d, but /proc/cpuinfo's flags make level %d and TLM_CPU_CAPABILITY %s\n",
                level, cpu_level, getenv("TLM_CPU_CAPABILITY") ? getenv("TLM_CPU_CAPABILITY") : "(unset)");
        failures++;
    }
    /* a = b = 1 + 2^-12: a b = 1 + 2^-11 + 2^-24, which rounds to 1 + 2^-11
     * (a tie, to even); plus c = -(1 + 2^-11) that is 0 rounded and 2^-24
     * fused. volatile: no constant folding */
    volatile float va = 1.0f + 0x1p-12f, vc = -(1.0f + 0x1p-11f);
    const float a = va, c = vc, fused = 0x1p-24f, unfused = 0.0f;
    float v3, base, run;
    multiply_add_v3(&v3, &a, &a, &c);
    multiply_add_base(&base, &a, &a, &c);
    multiply_add(&run, &a, &a, &c);
#ifdef __OPTIMIZE__
    if (v3 != fused || base != unfused) {
        fprintf(stderr, "the kernel's builds: v3 %a (want %a, fused), baseline %a (want %a)\n", (double)v3,
                (double)fused, (double)base, (double)unfused);
        failures++;
    }
    float want = want_level >= 3 ? fused : unfused;
    if (run != want) {
        fprintf(stderr, "the kernel as called computed %a, the %s build's %a: the dispatch picked the wrong build\n",
                (double)run, want_level >= 3 ? "x86-64-v3" : "baseline", (double)want);
        failures++;
    }
#else
    (void)run, (void)v3, (void)base, (void)fused, (void)unfused;
#endif
    if (failures) return 1;
    printf("test_vec8_dispatch: level %d (the CPU's %d), the %s build runs\n", level, cpu_level,
           level >= 3 ? "x86-64-v3" : "baseline");
#else
    printf("test_vec8_dispatch: not x86-64: one build of each kernel, nothing to pick\n");
#endif
    return 0;
}
