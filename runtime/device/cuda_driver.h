/* The CUDA driver (libcuda.so.1), opened at run time: tlm-run links none of
 * CUDA (NVRTC and cuBLASLt are opened at first use too, cuda_toolkit.h), so
 * the same binary runs (and says why --device cuda cannot) on a machine
 * without a GPU.
 *
 * Every entry point is looked up through cuGetProcAddress for the CUDA 12.0
 * ABI, never with a plain dlsym: cuda.h maps cuMemAlloc to cuMemAlloc_v2 and
 * so on, and dlsym("cuMemAlloc") would give the legacy 32-bit variant. The
 * PFN_* typedefs of cudaTypedefs.h fix each function's exact signature. */
#ifndef TLM_CUDA_DRIVER_H
#define TLM_CUDA_DRIVER_H

#ifdef TLM_HAVE_CUDA

#include <stdbool.h>

#include <cuda.h>
#include <cudaTypedefs.h>

#include "errmsg.h"

/* The ABI version asked of cuGetProcAddress (12.0); the driver must also be
 * as new as the toolkit NVRTC and cuBLASLt come from (checked at open). */
#define TLM_CUDA_DRIVER_ABI 12000

/* X(name, signature): every driver function tlm calls. */
#define TLM_CUDA_DRIVER_FUNCTIONS(X)                                       \
    X(cuGetErrorName, PFN_cuGetErrorName_v6000)                            \
    X(cuGetErrorString, PFN_cuGetErrorString_v6000)                        \
    X(cuInit, PFN_cuInit_v2000)                                            \
    X(cuDriverGetVersion, PFN_cuDriverGetVersion_v2020)                    \
    X(cuDeviceGetCount, PFN_cuDeviceGetCount_v2000)                        \
    X(cuDeviceGet, PFN_cuDeviceGet_v2000)                                  \
    X(cuDeviceGetName, PFN_cuDeviceGetName_v2000)                          \
    X(cuDeviceGetAttribute, PFN_cuDeviceGetAttribute_v2000)                \
    X(cuDeviceTotalMem, PFN_cuDeviceTotalMem_v3020)                        \
    X(cuMemGetInfo, PFN_cuMemGetInfo_v3020)                                \
    X(cuDevicePrimaryCtxRetain, PFN_cuDevicePrimaryCtxRetain_v7000)        \
    X(cuDevicePrimaryCtxRelease, PFN_cuDevicePrimaryCtxRelease_v11000)     \
    X(cuCtxSetCurrent, PFN_cuCtxSetCurrent_v4000)                          \
    X(cuCtxSynchronize, PFN_cuCtxSynchronize_v2000)                        \
    X(cuMemAlloc, PFN_cuMemAlloc_v3020)                                    \
    X(cuMemFree, PFN_cuMemFree_v3020)                                      \
    X(cuMemsetD8, PFN_cuMemsetD8_v3020)                                    \
    X(cuMemcpyHtoD, PFN_cuMemcpyHtoD_v3020)                                \
    X(cuMemcpyDtoH, PFN_cuMemcpyDtoH_v3020)                                \
    X(cuMemcpyDtoD, PFN_cuMemcpyDtoD_v3020)                                \
    X(cuModuleLoadData, PFN_cuModuleLoadData_v2000)                        \
    X(cuModuleUnload, PFN_cuModuleUnload_v2000)                            \
    X(cuModuleGetFunction, PFN_cuModuleGetFunction_v2000)                  \
    X(cuFuncGetAttribute, PFN_cuFuncGetAttribute_v2020)                    \
    X(cuFuncSetAttribute, PFN_cuFuncSetAttribute_v9000)                    \
    X(cuLaunchKernel, PFN_cuLaunchKernel_v4000)                            \
    X(cuStreamCreate, PFN_cuStreamCreate_v2000)                            \
    X(cuStreamDestroy, PFN_cuStreamDestroy_v4000)                          \
    X(cuEventCreate, PFN_cuEventCreate_v2000)                              \
    X(cuEventDestroy, PFN_cuEventDestroy_v4000)                            \
    X(cuEventRecord, PFN_cuEventRecord_v2000)                              \
    X(cuStreamWaitEvent, PFN_cuStreamWaitEvent_v3020)                      \
    X(cuMemcpyDtoDAsync, PFN_cuMemcpyDtoDAsync_v3020)                      \
    X(cuMemsetD8Async, PFN_cuMemsetD8Async_v3020)                          \
    X(cuStreamBeginCapture, PFN_cuStreamBeginCapture_v10010)               \
    X(cuStreamEndCapture, PFN_cuStreamEndCapture_v10000)                   \
    X(cuGraphInstantiateWithFlags, PFN_cuGraphInstantiateWithFlags_v11040) \
    X(cuGraphLaunch, PFN_cuGraphLaunch_v10000)                             \
    X(cuGraphExecDestroy, PFN_cuGraphExecDestroy_v10000)                   \
    X(cuGraphDestroy, PFN_cuGraphDestroy_v10000)

typedef struct tlm_cuda_driver {
#define TLM_CUDA_DRIVER_MEMBER(name, signature) signature name;
    TLM_CUDA_DRIVER_FUNCTIONS(TLM_CUDA_DRIVER_MEMBER)
#undef TLM_CUDA_DRIVER_MEMBER
    int version; /* cuDriverGetVersion: 12080 is CUDA 12.8 */
} tlm_cuda_driver;

/* The process's one driver table: opened, resolved and initialised (cuInit)
 * by the first call, from any thread; later calls return the same table, or
 * the same failure ("no CUDA driver (libcuda.so.1 not found): ..."). */
const tlm_cuda_driver *tlm_cuda_driver_get(tlm_err *err);

/* true when r is CUDA_SUCCESS; otherwise false with one line in err: the
 * formatted context, then the error's name and description, e.g.
 * "cuMemAlloc(4096 bytes): CUDA_ERROR_OUT_OF_MEMORY (out of memory)". */
bool tlm_cuda_ok(const tlm_cuda_driver *drv, CUresult r, tlm_err *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
#endif
