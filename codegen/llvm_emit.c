/* tlm_codegen_cpu_object: target machine, module, O3 pipeline, object file.
 *
 * Environment knobs, for development only:
 *   TLM_CODEGEN_VERBOSE=1         time the phases on stderr
 *   TLM_CODEGEN_DUMP_IR=file.ll   the module after optimisation
 *   TLM_CODEGEN_BLOCKING=...      see blocking_for
 *   TLM_CODEGEN_SPLIT_256=0|1     see split_256_for */
#include <llvm-c/Analysis.h>
#include <llvm-c/Core.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codegen.h"
#include "codegen_error.h"
#include "cpu_targets.h"
#include "gemm_emit.h"
#include "ir_builder.h"
#include "mlp_kernels.h"
#include "object_file.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The blocking of kernels for a model of this d_model (the largest of a
 * module's specs). TLM_CODEGEN_BLOCKING="mr,nv,kc,mc" overrides it; it
 * exists for tuning with bench/mlp_bench and is checked like user input.
 * *overridden (may be NULL): whether it did. */
static bool blocking_for(const cpu_target *t, int d_model, gemm_blocking *bk, bool *overridden, char **err) {
    int vl = t->vl;
    *bk = gemm_default_blocking(vl, t->wide_tile_from > 0 && d_model >= t->wide_tile_from);
    const char *env = getenv("TLM_CODEGEN_BLOCKING");
    if (overridden) *overridden = env && *env;
    if (!env || !*env) return true;
    gemm_blocking o;
    if (sscanf(env, "%d,%d,%d,%d", &o.mr, &o.nv, &o.kc, &o.mc) != 4 || o.mr < 1 || o.mr > GEMM_MAX_MR || o.nv < 1 ||
        o.nv > 4 || o.kc < vl || o.kc % vl || o.mc < o.mr || o.mc % o.mr ||
        gemm_scratch_bytes(vl, &o) > TLM_CODEGEN_MAX_STACK_BYTES)
        return codegen_fail(err,
                            "codegen: bad TLM_CODEGEN_BLOCKING '%s' (mr<=%d, nv<=4, kc a "
                            "multiple of %d, mc a multiple of mr, scratch <= %d bytes)",
                            env, GEMM_MAX_MR, vl, TLM_CODEGEN_MAX_STACK_BYTES);
    *bk = o;
    return true;
}

/* Whether the kernels use the split-256 packing transposes: only 8-wide
 * code has them. TLM_CODEGEN_SPLIT_256=0|1 overrides cpu_target.split_256,
 * so that bench/mlp_bench --versus can time both on any AVX2 CPU; checked
 * like user input, and 1 on a target that is not 8 floats wide is an error
 * rather than a comparison of two identical builds. */
static bool split_256_for(cpu_target *t, char **err) {
    const char *env = getenv("TLM_CODEGEN_SPLIT_256");
    if (env && *env) {
        if (strcmp(env, "0") != 0 && strcmp(env, "1") != 0)
            return codegen_fail(err, "codegen: bad TLM_CODEGEN_SPLIT_256 '%s' (0 or 1)", env);
        if (env[0] == '1' && t->vl != 8)
            return codegen_fail(err,
                                "codegen: TLM_CODEGEN_SPLIT_256=1 needs 8-wide kernels, and %s's are %d wide "
                                "(on x86-64, name an AVX2 CPU, e.g. x86-64-v3)",
                                t->cpu, t->vl);
        t->split_256 = env[0] == '1';
    }
    t->split_256 = t->split_256 && t->vl == 8;
    return true;
}

char *tlm_codegen_cpu_tile(const char *name, int d_model, char **err) {
    if (err) *err = NULL;
    cpu_target t;
    if (!cpu_target_resolve(name, &t, err)) return NULL;
    gemm_blocking bk;
    bool overridden;
    bool ok = blocking_for(&t, d_model, &bk, &overridden, err);
    char buf[192];
    if (ok)
        snprintf(buf, sizeof buf, "%s: %d-float vectors, %d x %d register tile, KC %d, MC %d%s", t.cpu, t.vl, bk.mr,
                 bk.nv * t.vl, bk.kc, bk.mc, overridden ? " (set by TLM_CODEGEN_BLOCKING)" : "");
    cpu_target_dispose(&t);
    if (!ok) return NULL;
    char *out = LLVMCreateMessage(buf); /* disposable with tlm_codegen_free */
    if (!out) codegen_fail(err, "codegen: out of memory");
    return out;
}

static bool same_spec(const tlm_kernel_spec *a, const tlm_kernel_spec *b) {
    return a->kind == b->kind && a->d_model == b->d_model && a->width == b->width;
}

static void build_module(LLVMContextRef ctx, LLVMModuleRef mod, const cpu_target *t, const gemm_blocking *bk,
                         const tlm_kernel_spec *specs, int n) {
    ir g;
    ir_init(&g, ctx, mod, t->vl);
    g.x86 = strncmp(t->triple, "x86_64", 6) == 0;
    g.split_256 = t->split_256;
  /* Explicit <16 x float> code must not be split into 256-bit halves by
   * CPUs tuned to prefer 256-bit vectors: declare the width we mean. */
    char width[16];
    snprintf(width, sizeof width, "%d", t->vl * 32);
    g.attr_keys[0] = "min-legal-vector-width";
    g.attr_keys[1] = "prefer-vector-width";
    g.attr_values[0] = g.attr_values[1] = width;
    g.n_attrs = 2;
    unsigned kinds = 0;
    for (int i = 0; i < n; i++) kinds |= 1u << specs[i].kind;
    gemm_helpers h;
    gemm_emit_helpers(&g, bk, kinds, &h);
    for (int i = 0; i < n; i++) {
        bool seen = false;
        for (int j = 0; j < i && !seen; j++) seen = same_spec(&specs[i], &specs[j]);
        if (!seen) mlp_emit_kernels(&g, bk, &h, &specs[i]);
    }
    ir_dispose(&g);
}

/* LLVM's default<O0..3> pipeline (the helpers are what it works on: the
 * kernels themselves are optnone, see mlp_kernels.c). */
static bool optimise(LLVMModuleRef mod, LLVMTargetMachineRef tm, int level, char **err) {
    char pipeline[32];
    snprintf(pipeline, sizeof pipeline, "default<O%d>", level);
    LLVMPassBuilderOptionsRef pbo = LLVMCreatePassBuilderOptions();
    LLVMErrorRef e = LLVMRunPasses(mod, pipeline, tm, pbo);
    LLVMDisposePassBuilderOptions(pbo);
    if (!e) return true;
    char *m = LLVMGetErrorMessage(e);
    codegen_fail(err, "codegen: optimisation pipeline failed: %s", m);
    LLVMDisposeErrorMessage(m);
    return false;
}

bool tlm_codegen_cpu_object(const tlm_kernel_spec *specs, int n, const tlm_codegen_options *opt, const char *obj_path,
                            char **err) {
    if (err) *err = NULL;
    tlm_codegen_options defaults = {NULL, 3};
    if (!opt) opt = &defaults;
    if (n < 0 || (n > 0 && !specs) || !obj_path)
        return codegen_fail(err, "codegen: bad arguments (n=%d, specs=%p, obj_path=%p)", n, (const void *)specs,
                            (const void *)obj_path);
    if (opt->opt_level < 0 || opt->opt_level > 3)
        return codegen_fail(err, "codegen: opt_level %d not in 0..3", opt->opt_level);
    for (int i = 0; i < n; i++) {
        char msg[128];
        if (!tlm_kernel_spec_valid(&specs[i], msg, sizeof msg))
            return codegen_fail(err, "codegen: spec %d: %s", i, msg);
    }

    cpu_target t;
    if (!cpu_target_resolve(opt->cpu, &t, err)) return false;
    int d_model = 0; /* a model's specs share one */
    for (int i = 0; i < n; i++)
        if (specs[i].d_model > d_model) d_model = specs[i].d_model;
    gemm_blocking bk;
    if (!blocking_for(&t, d_model, &bk, NULL, err) || !split_256_for(&t, err)) {
        cpu_target_dispose(&t);
        return false;
    }
    LLVMTargetRef target;
    char *msg = NULL;
    if (LLVMGetTargetFromTriple(t.triple, &target, &msg)) {
        codegen_fail(err, "codegen: no LLVM target for %s: %s", t.triple, msg);
        LLVMDisposeMessage(msg);
        cpu_target_dispose(&t);
        return false;
    }
    static const LLVMCodeGenOptLevel levels[] = {LLVMCodeGenLevelNone, LLVMCodeGenLevelLess, LLVMCodeGenLevelDefault,
                                                 LLVMCodeGenLevelAggressive};
  /* PIC: the runtime links the object into a shared library. */
    LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, t.triple, t.cpu, t.features, levels[opt->opt_level],
                                                      LLVMRelocPIC, LLVMCodeModelDefault);

    double t0 = now_s();
    LLVMContextRef ctx = LLVMContextCreate();
    LLVMModuleRef mod = LLVMModuleCreateWithNameInContext("tlm_mlp_kernels", ctx);
    LLVMSetTarget(mod, t.triple);
    LLVMTargetDataRef layout = LLVMCreateTargetDataLayout(tm);
    LLVMSetModuleDataLayout(mod, layout);
    build_module(ctx, mod, &t, &bk, specs, n);
    double t1 = now_s();

    bool ok = true;
    if (LLVMVerifyModule(mod, LLVMReturnStatusAction, &msg))
        ok = codegen_fail(err, "codegen: internal error, invalid IR: %s", msg);
    LLVMDisposeMessage(msg);
    msg = NULL;
    if (ok) ok = optimise(mod, tm, opt->opt_level, err);
    double t2 = now_s();
    const char *dump = getenv("TLM_CODEGEN_DUMP_IR");
    if (ok && dump) LLVMPrintModuleToFile(mod, dump, NULL);
    if (ok) ok = codegen_write_object(tm, mod, obj_path, err);
    double t3 = now_s();
    if (getenv("TLM_CODEGEN_VERBOSE"))
        fprintf(stderr,
                "codegen: %d specs for %s (%d-wide%s, tile %dx%d, kc %d): build %.3fs, "
                "opt %.3fs, object %.3fs\n",
                n, t.cpu, t.vl, t.split_256 ? ", split 256-bit" : "", bk.mr, bk.nv * t.vl, bk.kc, t1 - t0, t2 - t1,
                t3 - t2);

    LLVMDisposeTargetData(layout);
    LLVMDisposeModule(mod);
    LLVMContextDispose(ctx);
    LLVMDisposeTargetMachine(tm);
    cpu_target_dispose(&t);
    return ok;
}
