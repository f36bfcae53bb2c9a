/* The real device's GEMM: a tlm_gemm (device.h) handed to cublasLtMatmul.
 *
 * One cuBLASLt handle and one 32 MiB workspace per device, made at its
 * first GEMM (32 MiB is what Hopper's kernels want; one workspace on one
 * stream also keeps the results the same run after run). Compute is CUBLAS_COMPUTE_32F with a CUDA_R_32F scale:
 * never TF32. For each distinct shape (everything in a tlm_gemm but the
 * pointers and alpha/beta, plus the pointers' alignment, which limits the
 * algorithms that may run) the matmul descriptor, the four layouts and the
 * heuristic's algorithm are built once and kept: a training step repeats
 * the same few hundred shapes, and the same algorithm every time is also
 * what makes a --resume bit-exact.
 * Only when tlm is built with the toolkit (TLM_HAVE_CUDA). */
#ifndef TLM_CUBLASLT_GEMM_H
#define TLM_CUBLASLT_GEMM_H

#ifdef TLM_HAVE_CUDA

#include "cuda_driver.h"
#include "device.h"

#define TLM_CUBLASLT_WORKSPACE_BYTES ((size_t)32 << 20)

typedef struct tlm_cublaslt tlm_cublaslt;

/* The handle and the workspace, in the CUDA context current on this thread
 * (the device's primary context). NULL with err on failure. */
tlm_cublaslt *tlm_cublaslt_open(const tlm_cuda_driver *drv, tlm_err *err);
void tlm_cublaslt_close(tlm_cublaslt *b);

/* Runs g (already checked by tlm_gemm_problem) on stream (NULL: the
 * legacy default stream; a graph capture's stream while capturing, which
 * cublasLtMatmul allows: the workspace is preallocated, so it allocates
 * and syncs nothing): D = alpha op(A) op(B) + beta C, or without C when
 * g->c is 0. */
bool tlm_cublaslt_gemm(tlm_cublaslt *b, const tlm_gemm *g, CUstream stream, tlm_err *err);

#endif
#endif
