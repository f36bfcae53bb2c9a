#include "cpu_targets.h"

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "codegen.h"
#include "codegen_error.h"

/* The instruction-set extensions code for a CPU may use, by x86-64 level
 * (what tlm-run checks before it runs the kernels: tlm_so_cpu_missing). */
#define V2 "sse3,ssse3,sse4.1,sse4.2,popcnt"
#define V3 V2 ",avx,avx2,fma,f16c,bmi,bmi2,lzcnt,movbe"
#define V4 V3 ",avx512f,avx512bw,avx512cd,avx512dq,avx512vl"

/* x86-64 CPUs by widest float vector we use: 16 = AVX-512, 8 = AVX/AVX2,
 * 4 = SSE; split: cpu_target.split_256; wide: cpu_target.wide_tile_from
 * (Intel's AVX-512 parts at every d_model, Zen 4 and Zen 5 from d_model
 * 768; the generic x86-64-v4 never); needs: the extensions above that
 * LLVM may use for it. A subset of LLVM 19's list (llc -mcpu=help): the
 * baselines and the server/desktop parts people actually name, and the AVX
 * parts that split 256-bit operations (also looked up for the host, by
 * LLVM's name for it). */
static const struct {
    const char *name;
    int vl;
    bool split;
    const char *needs;
    int wide;
} known_cpus[] = {
    {"x86-64", 4, false, "", 0},
    {"x86-64-v2", 4, false, V2, 0},
    {"x86-64-v3", 8, false, V3, 0},
    {"x86-64-v4", 16, false, V4, 0},
    {"core2", 4, false, "sse3,ssse3", 0},
    {"nehalem", 4, false, V2, 0},
    {"westmere", 4, false, V2, 0},
    {"sandybridge", 8, false, V2 ",avx", 0},
    {"ivybridge", 8, false, V2 ",avx,f16c", 0},
    {"haswell", 8, false, V3, 0},
    {"broadwell", 8, false, V3, 0},
    {"skylake", 8, false, V3, 0},
    {"alderlake", 8, false, V3, 0},
    {"raptorlake", 8, false, V3, 0},
    {"meteorlake", 8, false, V3, 0},
    {"arrowlake", 8, false, V3, 0},
    {"lunarlake", 8, false, V3, 0},
    {"gracemont", 8, false, V3, 0},
    {"sierraforest", 8, false, V3, 0},
    {"skylake-avx512", 16, false, V4, 1},
    {"skx", 16, false, V4, 1},
    {"cascadelake", 16, false, V4, 1},
    {"cooperlake", 16, false, V4, 1},
    {"cannonlake", 16, false, V4, 1},
    {"icelake-client", 16, false, V4, 1},
    {"icelake-server", 16, false, V4, 1},
    {"tigerlake", 16, false, V4, 1},
    {"rocketlake", 16, false, V4, 1},
    {"sapphirerapids", 16, false, V4, 1},
    {"emeraldrapids", 16, false, V4, 1},
    {"graniterapids", 16, false, V4, 1},
    {"graniterapids-d", 16, false, V4, 1},
    {"znver1", 8, true, V3, 0},
    {"znver2", 8, false, V3, 0},
    {"znver3", 8, false, V3, 0},
    {"znver4", 16, false, V4, 768},
    {"znver5", 16, false, V4, 768},
    {"bdver1", 8, true, V2 ",avx,fma4,xop,lzcnt", 0},
    {"bdver2", 8, true, V2 ",avx,fma4,xop,lzcnt,fma,f16c,bmi", 0},
    {"bdver3", 8, true, V2 ",avx,fma4,xop,lzcnt,fma,f16c,bmi", 0},
    {"bdver4", 8, true, V2 ",avx,fma4,xop,lzcnt,fma,f16c,bmi,avx2,bmi2,movbe", 0},
    {"btver2", 8, true, V2 ",avx,f16c,bmi,lzcnt,movbe", 0},
};

/* Every extension a needs list may name: the host's features are filtered
 * to these (tlm-run knows how to test each). */
static const char *const checked_features[] = {
    "sse3", "ssse3", "sse4.1", "sse4.2", "popcnt", "avx",     "avx2",     "fma",      "f16c",     "bmi",
    "bmi2", "lzcnt", "movbe",  "fma4",   "xop",    "avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl",
};

/* The table's row for `name`, or -1. */
static int known_cpu(const char *name) {
    for (size_t i = 0; i < sizeof known_cpus / sizeof known_cpus[0]; i++)
        if (strcmp(name, known_cpus[i].name) == 0) return (int)i;
    return -1;
}

static char *dup_message(const char *s) { return LLVMCreateMessage(s); /* disposable with LLVMDisposeMessage */ }

/* Whether the comma-separated feature list holds exactly `feature`. */
static bool has_feature(const char *list, const char *feature) {
    size_t n = strlen(feature);
    for (const char *p = list; (p = strstr(p, feature)) != NULL; p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0')) return true;
    return false;
}

static int vl_from_features(const char *f) {
  /* LLVM 18+ splits AVX-512 into avx512f + evex512 (for AVX10/256-only
   * parts): 512-bit vectors need both. */
    if (has_feature(f, "+avx512f") && !has_feature(f, "-evex512")) return 16;
    if (has_feature(f, "+avx")) return 8;
    return 4;
}

static void init_llvm_target(void) {
    LLVMInitializeNativeTarget();
    LLVMInitializeNativeAsmPrinter();
}

bool cpu_target_resolve(const char *name, cpu_target *t, char **err) {
  /* Once, so that threads may generate code concurrently (each call has its
   * own LLVM context). */
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_llvm_target);
    memset(t, 0, sizeof *t);
  /* LLVM's strings are strdup'd copies: NULL when memory ran out. */
    t->triple = LLVMGetDefaultTargetTriple();
    if (!t->triple) return codegen_fail(err, "codegen: out of memory");
    if (!name || strcmp(name, "native") == 0) {
        t->cpu = LLVMGetHostCPUName();
        t->features = LLVMGetHostCPUFeatures();
        if (!t->cpu || !t->features) {
            cpu_target_dispose(t);
            return codegen_fail(err, "codegen: out of memory");
        }
        t->vl = vl_from_features(t->features);
    /* Non-x86 hosts (e.g. NEON) get 4-wide vectors. */
        if (strncmp(t->triple, "x86_64", 6) != 0) t->vl = 4;
        int row = known_cpu(t->cpu);
        t->split_256 = row >= 0 && known_cpus[row].split;
        t->wide_tile_from = row >= 0 ? known_cpus[row].wide : 0;
        return true;
    }
    if (strncmp(t->triple, "x86_64", 6) != 0) {
        codegen_fail(err, "codegen: named CPU '%s' is only supported on x86-64 hosts (this is %s)", name, t->triple);
        cpu_target_dispose(t);
        return false;
    }
    int row = known_cpu(name);
    if (row >= 0) {
        t->cpu = dup_message(name);
        t->features = dup_message("");
        t->vl = known_cpus[row].vl;
        t->split_256 = known_cpus[row].split;
        t->wide_tile_from = known_cpus[row].wide;
        if (!t->cpu || !t->features) {
            cpu_target_dispose(t);
            return codegen_fail(err, "codegen: out of memory");
        }
        return true;
    }
    codegen_fail(err,
                 "codegen: unknown CPU '%s' (%s); use \"native\" for the host, or e.g. "
                 "x86-64, x86-64-v2, x86-64-v3, x86-64-v4, haswell, skylake-avx512, znver4",
                 name, "not in tlm's x86-64 CPU table");
    cpu_target_dispose(t);
    return false;
}

char *tlm_codegen_cpu_needs(const char *name, char **err) {
    cpu_target t;
    if (!cpu_target_resolve(name, &t, err)) return NULL;
    char buf[512] = "";
    size_t n = 0;
    int row = known_cpu(t.cpu);
    if (name && strcmp(name, "native") != 0 && row >= 0) {
        snprintf(buf, sizeof buf, "%s", known_cpus[row].needs);
    } else { /* the host: its own features, as LLVM reports them ("+avx2,-avx512f,...") */
        for (size_t i = 0; i < sizeof checked_features / sizeof checked_features[0]; i++) {
            char plus[32];
            snprintf(plus, sizeof plus, "+%s", checked_features[i]);
            if (has_feature(t.features, plus))
                n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s", n ? "," : "", checked_features[i]);
        }
    }
    cpu_target_dispose(&t);
    char *out = dup_message(buf);
    if (!out) codegen_fail(err, "codegen: out of memory");
    return out;
}

void tlm_codegen_free(char *s) {
    if (s) LLVMDisposeMessage(s);
}

bool tlm_codegen_cpu_known(const char *name, char **err) {
    cpu_target t;
    if (!cpu_target_resolve(name, &t, err)) return false;
    cpu_target_dispose(&t);
    return true;
}

void cpu_target_dispose(cpu_target *t) {
    if (t->triple) LLVMDisposeMessage(t->triple);
    if (t->cpu) LLVMDisposeMessage(t->cpu);
    if (t->features) LLVMDisposeMessage(t->features);
    memset(t, 0, sizeof *t);
}
