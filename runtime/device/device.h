/* One device API inside the runtime, with two implementations behind it:
 * the real CUDA device (device_cuda.c: the driver through dlopen and
 * cuGetProcAddress, NVRTC to CUBIN, cuBLASLt for GEMMs) and the emulated
 * device (device_emu.c: the very same CUDA source compiled by the host C++
 * compiler against cuda_emu.h and run on the CPU, with a plain GEMM that
 * reads the very same tlm_gemm description). Everything above this header
 * (the GPU ops, the GPU executor, the trainer) is shared by both, so CI on
 * a machine without a GPU checks all but the thin real-CUDA layer.
 *
 * Failing: every call that can fail returns false (or 0, or NULL) with a
 * one-line message in err (abi/errmsg.h). Nothing here prints, except the
 * module cache's one warning line on stderr when its folder is unusable. */
#ifndef TLM_DEVICE_H
#define TLM_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "errmsg.h"
#include "kernel_times.h"

typedef struct tlm_device tlm_device;
typedef struct tlm_module tlm_module;   /* one compiled and loaded CUDA source */
typedef struct tlm_kernel tlm_kernel;   /* one extern "C" __global__ function of a module */

/* A device address. On the emulated device it is a host pointer. Kernel
 * arguments that are pointers are passed as a tlm_dptr (8 bytes, like a
 * device pointer). */
typedef uint64_t tlm_dptr;

typedef struct tlm_device_info {
    char name[256];          /* "NVIDIA H200", "emulated CUDA device (CPU)" */
    bool emulated;
    int ordinal;             /* the N of cuda:N */
    int cc_major, cc_minor;  /* compute capability; the emulated device reports 9.0 */
    char arch[16];           /* "sm_90": what NVRTC compiles for */
    int driver_version;      /* cuDriverGetVersion (12080 = 12.8); 0 when emulated */
    int sm_count;
    uint64_t memory_total;   /* bytes */
    double peak_bf16_tflops; /* dense bf16 peak from gpu_peaks.c's table; 0: unknown (no MFU) */
    unsigned shared_optin;   /* the most shared memory a block may have once its kernel opts in (227 KiB
                                on sm_90, 163 KiB on sm_80); the emulated device reports sm_90's */
} tlm_device_info;

/* ---- opening ----
 * name: "cuda" or "cuda:N". Without a driver or a GPU: false with one clear
 * line ("no CUDA driver (libcuda.so.1 not found): --device cuda needs an
 * NVIDIA GPU and its driver"), never a crash.
 *
 * The test switch TLM_TEST_DEVICE=emulated (environment) makes "cuda" open
 * the emulated device instead; it is documented in docs/gpu.md as a test
 * switch, not a user-facing device. */
tlm_device *tlm_device_open(const char *name, tlm_err *err);
void tlm_device_close(tlm_device *d);
const tlm_device_info *tlm_device_get_info(const tlm_device *d);

/* ---- memory ----
 * tlm_device_alloc returns zero-filled memory (0 on failure, with err),
 * aligned to 256 bytes. Copies are synchronous. */
tlm_dptr tlm_device_alloc(tlm_device *d, size_t bytes, tlm_err *err);
void tlm_device_free(tlm_device *d, tlm_dptr p);
bool tlm_device_upload(tlm_device *d, tlm_dptr dst, const void *src, size_t bytes, tlm_err *err);
bool tlm_device_download(tlm_device *d, void *dst, tlm_dptr src, size_t bytes, tlm_err *err);
bool tlm_device_copy(tlm_device *d, tlm_dptr dst, tlm_dptr src, size_t bytes, tlm_err *err);
bool tlm_device_zero(tlm_device *d, tlm_dptr dst, size_t bytes, tlm_err *err);
/* Waits for every launch and GEMM so far; reports a kernel's failure. */
bool tlm_device_sync(tlm_device *d, tlm_err *err);
/* Bytes this process holds on the device now (our allocations plus the
 * workspace and the loaded modules). */
uint64_t tlm_device_memory_in_use(const tlm_device *d);
/* Bytes the device can still allocate: on a GPU what the driver reports
 * free (cuMemGetInfo: the CUDA context, other processes and everything we
 * hold already taken off); on the emulated device its total less what we
 * hold. */
uint64_t tlm_device_memory_free(tlm_device *d);

/* ---- kernels ----
 * Compiles a CUDA C++ source for the device's exact architecture (CUBIN,
 * not PTX; on the emulated device a host shared object), or takes it from
 * the on-disk cache (kernel_cache.h), and loads it. `what` names the source
 * in messages ("the runtime's kernels", "the model's MLP kernels").
 * Every `extern "C" __global__ void` function of the source is a kernel.
 * report (may be NULL) says whether the cache had it and how long the
 * compilation took. */
typedef struct tlm_module_report {
    bool cache_hit;
    bool cache_written;      /* false also when the cache folder is unusable */
    double compile_seconds;  /* 0 on a cache hit */
    char cache_path[512];    /* the entry's file ("" when there is no cache) */
} tlm_module_report;
tlm_module *tlm_device_module_load(tlm_device *d, const char *what, const char *source, tlm_module_report *report,
                                   tlm_err *err);
void tlm_device_module_unload(tlm_device *d, tlm_module *m);
/* Whether the cache holds a sound compiled module of source for this
 * device (what tlm_device_module_load would take without compiling): 1
 * yes, 0 no entry, -1 a damaged one (the reason in why; left for the next
 * load to replace). path gets the entry's file ("" when the cache is
 * unusable). Compiles nothing, changes nothing. */
int tlm_device_module_cached(tlm_device *d, const char *source, char *path, size_t len, char *why, size_t whylen);
/* The kernel called name (the handle lives as long as the module); NULL
 * with err when the module has none. Cached: a second lookup is cheap. */
tlm_kernel *tlm_device_kernel(tlm_device *d, tlm_module *m, const char *name, tlm_err *err);

typedef struct tlm_launch {
    unsigned grid[3];
    unsigned block[3];       /* threads; x a multiple of 32, at most 1024 in all */
    unsigned shared_bytes;   /* dynamic shared memory per block (tlm::dynamic_shared(), common.cuh); 0: none */
} tlm_launch;
/* args[i] points to the i-th parameter's value, typed exactly as the
 * kernel declares it (int, long long, float, a pointer as tlm_dptr).
 * Dynamic shared memory: with the kernel's static shared memory at most
 * info.shared_optin bytes. Past 48 KiB together, a kernel must opt in
 * (cuFuncSetAttribute), which this call does at the kernel's first such
 * launch. That is not stream work, and tlm keeps it out of CUDA graph
 * captures: a kernel's first launch past 48 KiB, or past what it was
 * launched with before, must come outside a capture (graph_cache.h's
 * warm-up run does) and is refused in one. */
bool tlm_device_launch(tlm_device *d, tlm_kernel *k, tlm_launch dims, void **args, tlm_err *err);

/* ---- GEMM: cuBLASLt's description, column-major as cuBLAS sees it ----
 *   D = alpha op(A) op(B) + beta C      op(A): m×k, op(B): k×n, C, D: m×n
 * A is stored m×k (trans_a false, lda >= m) or k×m (trans_a true, lda >= k),
 * B is k×n (lda >= k) or n×k (ldb >= n), C and D are m×n (ldc, ldd >= m).
 * batch > 1: batch independent products, operand i at base + i·stride.
 * Compute is always fp32 (CUBLAS_COMPUTE_32F, never TF32). C may equal D
 * (beta = 1 accumulates in place); c = 0 means beta·C is absent.
 * The real device hands exactly these fields to cuBLASLt; the emulated one
 * computes them with a plain loop, so a wrong layout fails in CI. */
typedef enum tlm_gemm_type { TLM_GEMM_F32, TLM_GEMM_BF16 } tlm_gemm_type;
typedef struct tlm_gemm {
    bool trans_a, trans_b;
    int64_t m, n, k;
    tlm_dptr a, b, c, d;
    int64_t lda, ldb, ldc, ldd;
    tlm_gemm_type a_type, b_type, cd_type;  /* C and D share a type */
    int64_t batch;                      /* 1: one product */
    int64_t stride_a, stride_b, stride_c, stride_d;  /* elements */
    float alpha, beta;
} tlm_gemm;
/* Checks the description (sizes, leading dimensions, types) and runs it. */
bool tlm_device_gemm(tlm_device *d, const tlm_gemm *g, tlm_err *err);

/* While t is not NULL, each launch and GEMM on the compute stream (outside
 * a capture) is waited for, before and after, and its time added to t
 * under t->op (kernel_times.h: a profile's device table); NULL stops it. */
void tlm_device_time_kernels(tlm_device *d, tlm_kernel_times *t);
/* The description's first problem, or NULL: what tlm_device_gemm refuses. */
const char *tlm_gemm_problem(const tlm_gemm *g);

/* ---- streams and events: communication beside compute ----
 * Everything above runs on the compute stream, in the order it is issued
 * (on a GPU the legacy default stream). A data-parallel run moves
 * gradients on a second stream, the comm stream (on a GPU one created
 * CU_STREAM_NON_BLOCKING, so it does not wait for the compute stream, nor
 * it for it), while the backward goes on: the two meet only at events. An
 * event recorded on a stream marks the work issued there so far; a stream
 * told to wait for it runs its later work only after that. A wait takes
 * the event as recorded at the time of the call, so one event can be
 * recorded again for the next wait.
 *
 * The emulated device runs compute work at once and defers the comm
 * stream's: it runs only when the compute stream waits for an event
 * recorded after it, or at tlm_device_sync, so a reader on the compute
 * stream that does not wait sees what was there before (docs/gpu.md). */
typedef enum tlm_stream { TLM_STREAM_COMPUTE, TLM_STREAM_COMM } tlm_stream;
typedef struct tlm_event tlm_event;

tlm_event *tlm_device_event_create(tlm_device *d, tlm_err *err);
void tlm_device_event_destroy(tlm_device *d, tlm_event *e);
bool tlm_device_event_record(tlm_device *d, tlm_event *e, tlm_stream s, tlm_err *err);
/* Work issued on s after this waits for what e marked. */
bool tlm_device_stream_wait(tlm_device *d, tlm_stream s, tlm_event *e, tlm_err *err);
/* Kernel launches (tlm_device_launch) go to s from now on; returns the
 * stream they went to before. GEMMs and copies stay on the compute stream
 * (a GEMM while the comm stream is chosen is refused). On the emulated
 * device a launch on the comm stream is only possible from a host call
 * running there, where it runs in place. */
tlm_stream tlm_device_launch_stream(tlm_device *d, tlm_stream s);
/* The comm stream as the driver knows it (a CUstream), for a library that
 * queues work on it itself (NCCL); false with a message on the emulated
 * device, which has none. */
bool tlm_device_comm_stream(tlm_device *d, void **handle, tlm_err *err);
/* Queues fn(ctx) on the comm stream: the emulated device's stand-in for
 * NCCL runs its transfers this way (false with a message on a GPU, whose
 * collectives go through NCCL). */
bool tlm_device_comm_host_call(tlm_device *d, void (*fn)(void *ctx), void *ctx, tlm_err *err);

/* ---- graphs: a step's work captured once, launched again ----
 * Between tlm_device_capture_begin and tlm_device_capture_end the launches,
 * GEMMs, copies and zeroings issued on the compute stream are recorded into
 * a graph, not run. Their argument values are copied as they are recorded
 * (CUDA copies kernel parameters at capture), so a value that changes
 * later (a host variable, a step count, dloss) never reaches a launch of
 * the graph: whatever changes from one launch to the next must live in
 * device memory written before it. On a GPU this is stream capture
 * (cuStreamBeginCapture on a stream of its own, cuGraphInstantiate,
 * cuGraphLaunch on the compute stream); the emulated device keeps the
 * recorded calls and runs them in order at each launch.
 *
 * During a capture, uploads, downloads, syncs, allocations, frees, events,
 * host calls and comm-stream launches are errors (on CUDA they are illegal
 * in a capture or invalidate it): the call fails with one line that names
 * it, the capture is spoiled, and tlm_device_capture_end fails with that
 * same line. One capture at a time per device. */
typedef struct tlm_graph tlm_graph;
bool tlm_device_capture_begin(tlm_device *d, tlm_err *err);
/* Ends the capture: the graph, ready to launch, or NULL with err (the
 * capture was spoiled, or the driver could not instantiate the graph:
 * *instantiate_failed, when not NULL, tells the second apart — a caller
 * may then run the same work without a graph). */
tlm_graph *tlm_device_capture_end(tlm_device *d, bool *instantiate_failed, tlm_err *err);
bool tlm_device_capturing(const tlm_device *d);
/* Runs the graph's work on the compute stream, in the recorded order. */
bool tlm_device_graph_launch(tlm_device *d, tlm_graph *g, tlm_err *err);
void tlm_device_graph_destroy(tlm_device *d, tlm_graph *g);

#endif
