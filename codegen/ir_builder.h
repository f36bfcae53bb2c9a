/* Thin layer over the LLVM C builder: types, constants, counted loops,
 * if/else, stack buffers, vector loads/stores (masked or not) and the few
 * intrinsics the kernels need. Indices are i64 element counts throughout. */
#ifndef TLM_IR_BUILDER_H
#define TLM_IR_BUILDER_H

#include <llvm-c/Core.h>

typedef struct {
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    LLVMTypeRef f32, i1, i32, i64, ptr, void_t;
    int vl;                /* floats per vector register for this target */
    int x86;               /* x86 target: vec_math may use its rcp intrinsics */
    int split_256;         /* cpu_target.split_256, set only for 8-wide code: transposes within 128-bit halves */
    LLVMTypeRef vf32;      /* <vl x float> */
    LLVMTypeRef vi32;      /* <vl x i32> */
    LLVMTypeRef vmask;     /* <vl x i1> */
    LLVMValueRef fn;       /* function being built */
    LLVMBasicBlockRef entry;
  /* String attributes put on every function (e.g. the vector width). */
    const char *attr_keys[4], *attr_values[4];
    int n_attrs;
} ir;

void ir_init(ir *g, LLVMContextRef ctx, LLVMModuleRef mod, int vl);
void ir_dispose(ir *g);

/* Starts a nounwind function carrying the attrs above; leaves the builder in
 * its entry block. Internal ones are also noinline: they are the shared
 * pieces whose point is to exist once. */
LLVMValueRef ir_begin_function(ir *g, const char *name, LLVMTypeRef type, int internal);

/* Adds an enum attribute such as "optnone" to the current function. */
void ir_add_function_attr(ir *g, const char *name);

/* Constants. */
LLVMValueRef ir_i64(ir *g, long long v);
LLVMValueRef ir_f32(ir *g, double v);
LLVMValueRef ir_vf32(ir *g, double v); /* splat */
LLVMValueRef ir_vi32(ir *g, int v);    /* splat */

/* Integer helpers on i64. */
LLVMValueRef ir_add(ir *g, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef ir_sub(ir *g, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef ir_mul(ir *g, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef ir_min(ir *g, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef ir_lt(ir *g, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef ir_eq(ir *g, LLVMValueRef a, LLVMValueRef b);

/* &base[index] for a float pointer. */
LLVMValueRef ir_gep(ir *g, LLVMValueRef base, LLVMValueRef index);

/* Stack memory in the entry block, so LLVM sees a fixed frame. */
LLVMValueRef ir_stack_floats(ir *g, long long count, const char *name);
LLVMValueRef ir_var(ir *g, LLVMTypeRef type, const char *name);

/* for (iv = start; iv < end; iv += step) -- signed compare. */
typedef struct {
    LLVMBasicBlockRef header, latch, exit;
    LLVMValueRef iv, step;
} ir_loop;
LLVMValueRef ir_loop_begin(ir *g, ir_loop *l, LLVMValueRef start, LLVMValueRef end, LLVMValueRef step,
                           const char *name);
void ir_loop_end(ir *g, ir_loop *l);

/* if (cond) { ... } [else { ... }] */
typedef struct {
    LLVMBasicBlockRef else_bb, join_bb;
    int has_else;
} ir_if;
void ir_if_begin(ir *g, ir_if *s, LLVMValueRef cond);
void ir_if_else(ir *g, ir_if *s);
void ir_if_end(ir *g, ir_if *s);

/* Memory: unaligned (align 4) so callers need no alignment guarantees. */
LLVMValueRef ir_load_f(ir *g, LLVMValueRef addr);
LLVMValueRef ir_load_v(ir *g, LLVMValueRef addr);
void ir_store_v(ir *g, LLVMValueRef v, LLVMValueRef addr);
/* Lanes with mask false read as 0 and are never accessed. */
LLVMValueRef ir_load_v_masked(ir *g, LLVMValueRef addr, LLVMValueRef mask);
void ir_store_v_masked(ir *g, LLVMValueRef v, LLVMValueRef addr, LLVMValueRef mask);
/* A hint to bring addr's cache line into L1, for reading or (write) for
 * writing; it never faults, so addr may point past the data. */
void ir_prefetch(ir *g, LLVMValueRef addr, int write);
/* Mask of lanes i with first_lane + i < count (count, first_lane: i64). */
LLVMValueRef ir_lane_mask(ir *g, LLVMValueRef count, LLVMValueRef first_lane);

LLVMValueRef ir_splat(ir *g, LLVMValueRef scalar);
/* Lanes idx[0..n) of the concatenation a, b (n <= 16). */
LLVMValueRef ir_shuffle(ir *g, LLVMValueRef a, LLVMValueRef b, const int *idx, int n);
LLVMValueRef ir_broadcast_load(ir *g, LLVMValueRef addr);

/* Float arithmetic, scalar or vector. fma lowers to a fused multiply-add
 * where the target has one and to mul+add elsewhere (llvm.fmuladd).
 * fmin/fmax propagate a NaN in a. */
LLVMValueRef ir_fma(ir *g, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c);
LLVMValueRef ir_fadd(ir *g, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef ir_fsub(ir *g, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef ir_fmul(ir *g, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef ir_fdiv(ir *g, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef ir_fmin(ir *g, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef ir_fmax(ir *g, LLVMValueRef a, LLVMValueRef b);

/* Calls an overloaded intrinsic such as "llvm.fmuladd". */
LLVMValueRef ir_intrinsic(ir *g, const char *name, LLVMTypeRef *overloads, int n_overloads, LLVMValueRef *args,
                          int n_args);

#endif
