#include "descriptor.h"

#include <llvm-c/Core.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen_error.h"
#include "cpu_targets.h"
#include "object_file.h"
#include "tlm_abi.h"

static LLVMValueRef constant_global(LLVMModuleRef mod, const char *name, LLVMValueRef init, unsigned align) {
    LLVMValueRef g = LLVMAddGlobal(mod, LLVMTypeOf(init), name);
    LLVMSetInitializer(g, init);
    LLVMSetGlobalConstant(g, 1);
    LLVMSetLinkage(g, LLVMExternalLinkage);
    if (align) LLVMSetAlignment(g, align);
    return g;
}

bool tlm_codegen_descriptor_object(const uint8_t *blob, size_t blob_size, const tlm_kernel_spec *specs, int nkernels,
                                   const char *cuda_source, const tlm_codegen_options *opt, const char *obj_path,
                                   char **err) {
    if (blob_size > 0x7fffffffu) return codegen_fail(err, "descriptor too large (%zu bytes)", blob_size);
    LLVMValueRef *entries = malloc(((size_t)nkernels + 1) * sizeof *entries);
    if (!entries) return codegen_fail(err, "out of memory");
    LLVMInitializeX86TargetInfo();
    LLVMInitializeX86Target();
    LLVMInitializeX86TargetMC();
    LLVMInitializeX86AsmPrinter();
    cpu_target t;
    if (!cpu_target_resolve(opt ? opt->cpu : NULL, &t, err)) {
        free(entries);
        return false;
    }

    LLVMContextRef ctx = LLVMContextCreate();
    LLVMModuleRef mod = LLVMModuleCreateWithNameInContext("tlm_descriptor", ctx);
    LLVMSetTarget(mod, t.triple);
    LLVMTypeRef i32 = LLVMInt32TypeInContext(ctx), i64 = LLVMInt64TypeInContext(ctx);
    LLVMTypeRef ptr = LLVMPointerTypeInContext(ctx, 0);

    constant_global(mod, TLM_SYM_MAGIC, LLVMConstInt(i32, TLM_ABI_MAGIC, 0), 4);
    constant_global(mod, TLM_SYM_VERSION, LLVMConstInt(i32, TLM_ABI_VERSION, 0), 4);
    constant_global(mod, TLM_SYM_BLOB, LLVMConstStringInContext(ctx, (const char *)blob, (unsigned)blob_size, 1), 16);
    constant_global(mod, TLM_SYM_BLOB_SIZE, LLVMConstInt(i64, blob_size, 0), 8);

    /* The kernel table: the three entry points of each kernel, resolved by
     * the linker against the kernels' object. */
    LLVMTypeRef fn = LLVMFunctionType(LLVMVoidTypeInContext(ctx), NULL, 0, 0);
    LLVMTypeRef fields[3] = {ptr, ptr, ptr};
    LLVMTypeRef entry_type = LLVMStructTypeInContext(ctx, fields, 3, 0);
    static const char *const names[3] = {TLM_ENTRY_FWD, TLM_ENTRY_BWD_DATA, TLM_ENTRY_BWD_WEIGHT};
    for (int k = 0; k < nkernels; k++) {
        LLVMValueRef fns[3];
        for (int e = 0; e < 3; e++) {
            char symbol[160];
            tlm_kernel_symbol(&specs[k], names[e], symbol, sizeof symbol);
            fns[e] = LLVMGetNamedFunction(mod, symbol);
            if (!fns[e]) fns[e] = LLVMAddFunction(mod, symbol, fn);
        }
        entries[k] = LLVMConstNamedStruct(entry_type, fns, 3);
    }
    constant_global(mod, TLM_SYM_KERNELS, LLVMConstArray2(entry_type, entries, (uint64_t)nkernels), 8);
    free(entries);
    const char *src = cuda_source ? cuda_source : "";
    constant_global(mod, TLM_SYM_CUDA, LLVMConstStringInContext(ctx, src, (unsigned)strlen(src), 0), 1);

    char *msg = NULL;
    LLVMTargetRef target;
    bool ok = false;
    if (LLVMGetTargetFromTriple(t.triple, &target, &msg)) {
        codegen_fail(err, "no LLVM target for %s: %s", t.triple, msg);
    } else {
        LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, t.triple, t.cpu, t.features, LLVMCodeGenLevelNone,
                                                          LLVMRelocPIC, LLVMCodeModelDefault);
        LLVMTargetDataRef layout = LLVMCreateTargetDataLayout(tm);
        LLVMSetModuleDataLayout(mod, layout);
        ok = codegen_write_object(tm, mod, obj_path, err);
        LLVMDisposeTargetData(layout);
        LLVMDisposeTargetMachine(tm);
    }
    LLVMDisposeMessage(msg);
    LLVMDisposeModule(mod);
    LLVMContextDispose(ctx);
    cpu_target_dispose(&t);
    return ok;
}
