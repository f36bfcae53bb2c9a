/* The IR: a checked model lowered to what the runtime needs and nothing
 * more. It names every parameter (Llama-style) with its shape and offset in
 * one parameter block, every activation buffer with its size as a function of
 * batch and sequence length, the ops of a training step in order (forward,
 * then backward) with their operands, one MLP kernel per distinct
 * (kind, d_model, width), and two memory plans (training and inference).
 * The tables use the ABI's record types, so the blob in model.so is these
 * arrays written out. `tlmc --emit-ir` prints the blob written from it with
 * the printer `tlm-run info` uses (compiler/blob.c's emit_ir, abi/model_so_print.c). */
#ifndef TLM_IR_H
#define TLM_IR_H

#include "checked_model.h"
#include "tlm_abi.h"

typedef struct ir_plan {
    tlm_abi_plan head;
    int64_t *offsets;          /* per buffer, bytes; -1 unused */
    int *first, *last;         /* lifetimes in op indices */
} ir_plan;

typedef struct ir_model {
    const checked_model *m;
    /* Names are kept as C strings here and turned into string-table
     * offsets when the blob is written. */
    tlm_abi_param *params;
    const char **param_names;
    int nparams;
    tlm_abi_buffer *buffers;
    const char **buffer_names;
    int nbuffers;
    tlm_abi_op *ops;
    int nops, nforward;
    tlm_abi_kernel *kernels;
    char **kernel_symbols;
    const char **kernel_impl_whys; /* static strings: why the CPU runs what kernels[k].cpu_impl says */
    int nkernels;
    int cpu_mlp;               /* -1: tlmc's rule picks each width's CPU implementation, else tlm_mlp_impl */
    int *layer_kernel;         /* per layer */
    int64_t param_floats;
    ir_plan train, infer;
    int caps[4];               /* allocation bookkeeping */
} ir_model;

/* Lowers m; B and T are the sizes the stored plans are made for (training:
 * the micro-batch and training context; inference: one sequence of the
 * model's context). Returns false if a plan does not fit in memory. */
bool ir_lower(const checked_model *m, int cpu_mlp, ir_model *ir);
void ir_free(ir_model *ir);

#endif
