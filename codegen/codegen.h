/* tlm_codegen: fused MLP kernels specialised per (MLP kind, d_model, width).
 *
 * A tapered model gives every layer its own MLP width, so instead of one
 * generic GEMM library we generate, per distinct (kind, d_model, width), three
 * kernels with every size a compile-time constant: the forward pass and the
 * two halves of the backward pass, each a few blocked GEMMs with the MLP's
 * elementwise work fused in. On the CPU they are LLVM-compiled into a
 * relocatable PIC object for the runtime to link into a shared object; the
 * register tile and packing routines under them need only strides and are
 * emitted once per object (gemm_emit.h). For CUDA we emit C++ for NVRTC.
 *
 * Conventions (the contract the runtime relies on): float32, row-major, no
 * alignment requirement on any pointer, weights in PyTorch nn.Linear layout
 * [out, in] so that y = x W^T. With D = d_model and W = width:
 *   SwiGLU: w_gate [W,D], w_up [W,D], w_down [D,W]; h = silu(x Wg^T) * (x Wu^T)
 *   GELU:   w_up [W,D], w_down [D,W]; h = gelu_tanh(x Wu^T); gate pointers are
 *           never touched and may be NULL.
 *
 * fwd(r0, r1, x, w_gate, w_up, w_down, pre_gate, pre_up, out)
 *   for rows r in [r0, r1): pre_gate[r] = x[r] Wg^T, pre_up[r] = x[r] Wu^T
 *   (both [W], kept for the backward pass) and out[r] += h[r] Wd^T (the
 *   residual add is fused: out holds the residual stream on entry).
 * bwd_data(r0, r1, x, w_gate, w_up, w_down, pre_gate, pre_up, dout,
 *          d_pre_gate, d_pre_up, dx)
 *   for rows in [r0, r1): dh = dout Wd; SwiGLU: d_pre_gate = dh*u*silu'(g),
 *   d_pre_up = dh*silu(g); GELU: d_pre_up = dh*gelu'(u). dx = d_pre_gate Wg +
 *   d_pre_up Wu is WRITTEN (not accumulated). pre_up is OVERWRITTEN with
 *   h = act(pre_gate, pre_up), the bits fwd computed, for bwd_weight (the
 *   activation's exponential is then taken once, shared with its
 *   gradient); pre_gate is kept. x is unused (kept so that the three entries
 *   share one argument vocabulary).
 * bwd_weight(rows, j0, j1, x, pre_gate, pre_up, dout, d_pre_gate, d_pre_up,
 *            dw_gate, dw_up, dw_down)
 *   after bwd_data over rows [0, rows), so that pre_up holds h: for width
 *   indices j in [j0, j1), summing over rows [0, rows):
 *   dw_gate[j,:] += d_pre_gate[:,j]^T x, dw_up[j,:] += d_pre_up[:,j]^T x,
 *   dw_down[:,j] += dout^T h[:,j]. ACCUMULATES. pre_gate is not read.
 *
 * Disjoint row ranges (fwd, bwd_data) and disjoint width ranges (bwd_weight)
 * never write the same memory, so threads may split work that way. Kernels
 * allocate nothing: their scratch lives on the stack (under 512 KiB, see
 * TLM_CODEGEN_MAX_STACK_BYTES).
 */
#ifndef TLM_CODEGEN_H
#define TLM_CODEGEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tlm_enums.h"

typedef struct {
    tlm_mlp kind;
    int d_model;
    int width;
} tlm_kernel_spec;

typedef struct {
    const char *cpu; /* NULL or "native" = the host CPU and its features;
                      otherwise an x86-64 CPU name such as "x86-64",
                      "x86-64-v3", "x86-64-v4", "haswell", "znver4". */
    int opt_level;   /* 0..3; 3 runs LLVM's default<O3> pipeline. */
} tlm_codegen_options;

/* How the CPU runs spec s's MLP (cpu_mlp_choice.c: a fixed rule measured
 * with bench/mlp_bench), with a one-line reason for tlm-run info. forced:
 * -1 for the rule, else the tlm_mlp_impl tlmc --cpu-mlp asked for. */
tlm_mlp_impl tlm_cpu_mlp_choice(const tlm_kernel_spec *s, int forced, const char **why);

/* Upper bound on the stack a generated CPU kernel uses for packing buffers
 * (about 410 KiB with the default blocking: a packed A block of 384 x 256
 * floats). The kernels run on the calling thread: the main thread (8 MiB
 * by default) or an OpenMP worker, whose stack glibc sizes from
 * RLIMIT_STACK (8 MiB by default, 2 MiB when unlimited) unless
 * OMP_STACKSIZE says otherwise. */
#define TLM_CODEGEN_MAX_STACK_BYTES (512 * 1024)

/* The entry points' names (TLM_ENTRY_*) and C types (tlm_mlp_fwd_fn,
 * tlm_mlp_bwd_data_fn, tlm_mlp_bwd_weight_fn) are part of the model.so
 * ABI. */
#include "tlm_abi.h"

/* Writes a relocatable PIC object holding fwd, bwd_data and bwd_weight for
 * each spec (duplicate specs are emitted once) plus internal helpers they
 * share. opt may be NULL (host CPU, O3). On failure returns false and sets
 * *err to a malloc'd message, or to NULL when not even the message could be
 * allocated (codegen_error.h). Safe to call from several threads at once. */
bool tlm_codegen_cpu_object(const tlm_kernel_spec *specs, int n, const tlm_codegen_options *opt, const char *obj_path,
                            char **err);

/* Whether tlm_codegen_cpu_object can target the CPU named (a tlmc --cpu);
 * on false *err as above. A build without LLVM accepts any name: it writes
 * no object, and says so when asked to. */
bool tlm_codegen_cpu_known(const char *name, char **err);

/* The x86 instruction-set extensions the kernels generated for the CPU
 * named may use, comma-separated ("avx,avx2,fma,..."; "" for x86-64's
 * baseline), for model.so to record and tlm-run to check before it runs
 * them (a kernel built for AVX-512 dies of SIGILL on an AVX2 CPU). Free
 * with tlm_codegen_free; NULL with *err as above. A build without LLVM
 * gives "". */
char *tlm_codegen_cpu_needs(const char *name, char **err);

/* How the kernels for the CPU named and a model of this d_model are
 * blocked, for benchmarks to print beside their figures: "NAME: V-float
 * vectors, MR x NR register tile, KC K, MC M" (TLM_CODEGEN_BLOCKING
 * honoured and named). Free with tlm_codegen_free; NULL with *err as above.
 * A build without LLVM says it has no code generator. */
char *tlm_codegen_cpu_tile(const char *name, int d_model, char **err);
void tlm_codegen_free(char *s);

/* The code generator's version into buf ("LLVM 19.1.7"; a build without
 * LLVM: "no code generator"), for tlmc --version: the same tlmc linked to
 * another LLVM writes other kernels. */
void tlm_codegen_version(char *buf, size_t n);

/* malloc'd CUDA C++ source (no host code), what model.so carries and the
 * GPU executor compiles: per distinct spec the elementwise entries act and
 * act_grad, with bf16 twins NAME_bf16, as extern "C" __global__ functions
 * named by tlm_kernel_symbol. Returns NULL on a bad spec or out of memory. */
char *tlm_codegen_cuda_source(const tlm_kernel_spec *specs, int n);

/* The same for the CPU kernels' three fused entries per spec (fwd,
 * bwd_data, bwd_weight), taking the CPU argument lists (int64_t as long
 * long): their CUDA twins, which the tests compile and check but no run
 * launches (cuda_source.c says why they are kept out of model.so). Launch
 * every entry with blockDim = (TLM_CUDA_BLOCK_THREADS, 1, 1), no dynamic
 * shared memory, and any gridDim.x >= 1: blocks stride over the output
 * tiles, so tlm_cuda_grid_size() blocks is merely the natural choice.
 * Calls on one stream in the CPU order (fwd, then bwd_data, then
 * bwd_weight) are all the synchronisation needed. */
char *tlm_codegen_cuda_tile_source(const tlm_kernel_spec *specs, int n);

#define TLM_CUDA_BLOCK_THREADS 256

/* Number of output tiles of an entry, i.e. the grid size that gives every
 * block one tile. range is r1 - r0 for fwd and bwd_data, j1 - j0 for
 * bwd_weight. */
unsigned tlm_cuda_grid_size(const tlm_kernel_spec *s, const char *entry, int64_t range);

/* tlm_mlp_<swiglu|gelu>_d<D>_w<W>_<entry>, entry one of TLM_ENTRY_*. */
void tlm_kernel_symbol(const tlm_kernel_spec *s, const char *entry, char *buf, size_t len);

/* Checks one spec; on error returns false and writes a message to msg. */
bool tlm_kernel_spec_valid(const tlm_kernel_spec *s, char *msg, size_t len);

#endif
