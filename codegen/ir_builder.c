#include "ir_builder.h"

#include <string.h>

void ir_init(ir *g, LLVMContextRef ctx, LLVMModuleRef mod, int vl) {
    memset(g, 0, sizeof *g);
    g->ctx = ctx;
    g->mod = mod;
    g->b = LLVMCreateBuilderInContext(ctx);
    g->f32 = LLVMFloatTypeInContext(ctx);
    g->i1 = LLVMInt1TypeInContext(ctx);
    g->i32 = LLVMInt32TypeInContext(ctx);
    g->i64 = LLVMInt64TypeInContext(ctx);
    g->ptr = LLVMPointerTypeInContext(ctx, 0);
    g->void_t = LLVMVoidTypeInContext(ctx);
    g->vl = vl;
    g->vf32 = LLVMVectorType(g->f32, (unsigned)vl);
    g->vi32 = LLVMVectorType(g->i32, (unsigned)vl);
    g->vmask = LLVMVectorType(g->i1, (unsigned)vl);
}

void ir_dispose(ir *g) { LLVMDisposeBuilder(g->b); }

void ir_add_function_attr(ir *g, const char *name) {
    unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
    LLVMAddAttributeAtIndex(g->fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(g->ctx, kind, 0));
}

LLVMValueRef ir_begin_function(ir *g, const char *name, LLVMTypeRef type, int internal) {
    g->fn = LLVMAddFunction(g->mod, name, type);
    LLVMSetLinkage(g->fn, internal ? LLVMInternalLinkage : LLVMExternalLinkage);
    ir_add_function_attr(g, "nounwind");
  /* Unwind tables cost nothing at run time and let debuggers and profilers
   * walk the stack through the kernels (2 = asynchronous). */
    unsigned uwtable = LLVMGetEnumAttributeKindForName("uwtable", 7);
    LLVMAddAttributeAtIndex(g->fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(g->ctx, uwtable, 2));
    if (internal) ir_add_function_attr(g, "noinline");
    for (int i = 0; i < g->n_attrs; i++)
        LLVMAddAttributeAtIndex(g->fn, LLVMAttributeFunctionIndex,
                                LLVMCreateStringAttribute(g->ctx, g->attr_keys[i], (unsigned)strlen(g->attr_keys[i]),
                                                          g->attr_values[i], (unsigned)strlen(g->attr_values[i])));
    g->entry = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "entry");
    LLVMPositionBuilderAtEnd(g->b, g->entry);
    return g->fn;
}

LLVMValueRef ir_i64(ir *g, long long v) { return LLVMConstInt(g->i64, (unsigned long long)v, 1); }
LLVMValueRef ir_f32(ir *g, double v) { return LLVMConstReal(g->f32, v); }
LLVMValueRef ir_vf32(ir *g, double v) {
    LLVMValueRef lanes[64];
    for (int i = 0; i < g->vl; i++) lanes[i] = ir_f32(g, v);
    return LLVMConstVector(lanes, (unsigned)g->vl);
}
LLVMValueRef ir_vi32(ir *g, int v) {
    LLVMValueRef lanes[64];
    for (int i = 0; i < g->vl; i++) lanes[i] = LLVMConstInt(g->i32, (unsigned long long)(long long)v, 1);
    return LLVMConstVector(lanes, (unsigned)g->vl);
}

LLVMValueRef ir_add(ir *g, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildAdd(g->b, a, b, ""); }
LLVMValueRef ir_sub(ir *g, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildSub(g->b, a, b, ""); }
LLVMValueRef ir_mul(ir *g, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildMul(g->b, a, b, ""); }
LLVMValueRef ir_min(ir *g, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildSelect(g->b, ir_lt(g, a, b), a, b, ""); }
LLVMValueRef ir_lt(ir *g, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildICmp(g->b, LLVMIntSLT, a, b, ""); }
LLVMValueRef ir_eq(ir *g, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildICmp(g->b, LLVMIntEQ, a, b, ""); }

LLVMValueRef ir_gep(ir *g, LLVMValueRef base, LLVMValueRef index) {
    return LLVMBuildInBoundsGEP2(g->b, g->f32, base, &index, 1, "");
}

/* Allocas go at the top of the entry block: that is where SROA and the
 * frame lowering expect them, whatever block the builder is in now. */
static LLVMValueRef entry_alloca(ir *g, LLVMTypeRef type, const char *name) {
    LLVMBuilderRef eb = LLVMCreateBuilderInContext(g->ctx);
    LLVMValueRef first = LLVMGetFirstInstruction(g->entry);
    if (first) LLVMPositionBuilderBefore(eb, first);
    else LLVMPositionBuilderAtEnd(eb, g->entry);
    LLVMValueRef a = LLVMBuildAlloca(eb, type, name);
    LLVMDisposeBuilder(eb);
    return a;
}

LLVMValueRef ir_stack_floats(ir *g, long long count, const char *name) {
    LLVMValueRef a = entry_alloca(g, LLVMArrayType2(g->f32, (unsigned long long)count), name);
    LLVMSetAlignment(a, 64);
    return a;
}

LLVMValueRef ir_var(ir *g, LLVMTypeRef type, const char *name) { return entry_alloca(g, type, name); }

LLVMValueRef ir_loop_begin(ir *g, ir_loop *l, LLVMValueRef start, LLVMValueRef end, LLVMValueRef step,
                           const char *name) {
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(g->b);
    l->header = LLVMAppendBasicBlockInContext(g->ctx, g->fn, name);
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "body");
    l->latch = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "latch");
    l->exit = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "exit");
    l->step = step;
    LLVMBuildBr(g->b, l->header);
    LLVMPositionBuilderAtEnd(g->b, l->header);
    l->iv = LLVMBuildPhi(g->b, g->i64, name);
    LLVMAddIncoming(l->iv, &start, &pre, 1);
    LLVMBuildCondBr(g->b, ir_lt(g, l->iv, end), body, l->exit);
    LLVMPositionBuilderAtEnd(g->b, body);
    return l->iv;
}

void ir_loop_end(ir *g, ir_loop *l) {
    LLVMBuildBr(g->b, l->latch);
    LLVMPositionBuilderAtEnd(g->b, l->latch);
    LLVMValueRef next = LLVMBuildNSWAdd(g->b, l->iv, l->step, "");
    LLVMAddIncoming(l->iv, &next, &l->latch, 1);
    LLVMBuildBr(g->b, l->header);
    LLVMPositionBuilderAtEnd(g->b, l->exit);
}

void ir_if_begin(ir *g, ir_if *s, LLVMValueRef cond) {
    LLVMBasicBlockRef then_bb = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "then");
    s->else_bb = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "else");
    s->join_bb = LLVMAppendBasicBlockInContext(g->ctx, g->fn, "join");
    s->has_else = 0;
    LLVMBuildCondBr(g->b, cond, then_bb, s->else_bb);
    LLVMPositionBuilderAtEnd(g->b, then_bb);
}

void ir_if_else(ir *g, ir_if *s) {
    LLVMBuildBr(g->b, s->join_bb);
    LLVMPositionBuilderAtEnd(g->b, s->else_bb);
    s->has_else = 1;
}

void ir_if_end(ir *g, ir_if *s) {
    LLVMBuildBr(g->b, s->join_bb);
    if (!s->has_else) {
        LLVMPositionBuilderAtEnd(g->b, s->else_bb);
        LLVMBuildBr(g->b, s->join_bb);
    }
    LLVMPositionBuilderAtEnd(g->b, s->join_bb);
}

LLVMValueRef ir_load_f(ir *g, LLVMValueRef addr) {
    LLVMValueRef v = LLVMBuildLoad2(g->b, g->f32, addr, "");
    LLVMSetAlignment(v, 4);
    return v;
}
LLVMValueRef ir_load_v(ir *g, LLVMValueRef addr) {
    LLVMValueRef v = LLVMBuildLoad2(g->b, g->vf32, addr, "");
    LLVMSetAlignment(v, 4);
    return v;
}
void ir_store_v(ir *g, LLVMValueRef v, LLVMValueRef addr) { LLVMSetAlignment(LLVMBuildStore(g->b, v, addr), 4); }

LLVMValueRef ir_intrinsic(ir *g, const char *name, LLVMTypeRef *overloads, int n_overloads, LLVMValueRef *args,
                          int n_args) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(g->mod, id, overloads, (size_t)n_overloads);
    LLVMTypeRef ty = LLVMIntrinsicGetType(g->ctx, id, overloads, (size_t)n_overloads);
    return LLVMBuildCall2(g->b, ty, fn, args, (unsigned)n_args, "");
}

LLVMValueRef ir_load_v_masked(ir *g, LLVMValueRef addr, LLVMValueRef mask) {
    LLVMTypeRef over[2] = {g->vf32, g->ptr};
    LLVMValueRef args[4] = {addr, LLVMConstInt(g->i32, 4, 0), mask, ir_vf32(g, 0)};
    return ir_intrinsic(g, "llvm.masked.load", over, 2, args, 4);
}

void ir_store_v_masked(ir *g, LLVMValueRef v, LLVMValueRef addr, LLVMValueRef mask) {
    LLVMTypeRef over[2] = {g->vf32, g->ptr};
    LLVMValueRef args[4] = {v, addr, LLVMConstInt(g->i32, 4, 0), mask};
    ir_intrinsic(g, "llvm.masked.store", over, 2, args, 4);
}

void ir_prefetch(ir *g, LLVMValueRef addr, int write) {
    LLVMTypeRef over = g->ptr;
    LLVMValueRef args[4] = {addr, LLVMConstInt(g->i32, write ? 1 : 0, 0), LLVMConstInt(g->i32, 3, 0),
                            LLVMConstInt(g->i32, 1, 0)};
    ir_intrinsic(g, "llvm.prefetch", &over, 1, args, 4);
}

LLVMValueRef ir_lane_mask(ir *g, LLVMValueRef count, LLVMValueRef first_lane) {
  /* Clamp before narrowing to i32 so huge counts cannot wrap. */
    LLVMValueRef left = ir_sub(g, count, first_lane);
    left = ir_min(g, left, ir_i64(g, g->vl));
    LLVMValueRef left32 = LLVMBuildTrunc(g->b, left, g->i32, "");
    LLVMValueRef lanes[64];
    for (int i = 0; i < g->vl; i++) lanes[i] = LLVMConstInt(g->i32, (unsigned)i, 0);
    LLVMValueRef iota = LLVMConstVector(lanes, (unsigned)g->vl);
    return LLVMBuildICmp(g->b, LLVMIntSLT, iota, ir_splat(g, left32), "");
}

LLVMValueRef ir_splat(ir *g, LLVMValueRef scalar) {
    LLVMTypeRef vt = LLVMVectorType(LLVMTypeOf(scalar), (unsigned)g->vl);
    LLVMValueRef one = LLVMBuildInsertElement(g->b, LLVMGetPoison(vt), scalar, LLVMConstInt(g->i32, 0, 0), "");
    LLVMValueRef zeros = LLVMConstNull(g->vi32);
    return LLVMBuildShuffleVector(g->b, one, LLVMGetPoison(vt), zeros, "");
}

LLVMValueRef ir_shuffle(ir *g, LLVMValueRef a, LLVMValueRef b, const int *idx, int n) {
    LLVMValueRef m[16];
    for (int i = 0; i < n; i++) m[i] = LLVMConstInt(g->i32, (unsigned)idx[i], 0);
    return LLVMBuildShuffleVector(g->b, a, b, LLVMConstVector(m, (unsigned)n), "");
}

LLVMValueRef ir_broadcast_load(ir *g, LLVMValueRef addr) { return ir_splat(g, ir_load_f(g, addr)); }

LLVMValueRef ir_fma(ir *g, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c) {
    LLVMTypeRef t = LLVMTypeOf(a);
    LLVMValueRef args[3] = {a, b, c};
    return ir_intrinsic(g, "llvm.fmuladd", &t, 1, args, 3);
}
LLVMValueRef ir_fadd(ir *g, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFAdd(g->b, a, b, ""); }
LLVMValueRef ir_fsub(ir *g, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFSub(g->b, a, b, ""); }
LLVMValueRef ir_fmul(ir *g, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFMul(g->b, a, b, ""); }
LLVMValueRef ir_fdiv(ir *g, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFDiv(g->b, a, b, ""); }
/* compare+select rather than llvm.minnum: it maps straight onto minps/maxps.
 * A NaN in `a` passes through, so clamping never hides a NaN input. */
LLVMValueRef ir_fmin(ir *g, LLVMValueRef a, LLVMValueRef b) {
    return LLVMBuildSelect(g->b, LLVMBuildFCmp(g->b, LLVMRealOGT, a, b, ""), b, a, "");
}
LLVMValueRef ir_fmax(ir *g, LLVMValueRef a, LLVMValueRef b) {
    return LLVMBuildSelect(g->b, LLVMBuildFCmp(g->b, LLVMRealOLT, a, b, ""), b, a, "");
}
