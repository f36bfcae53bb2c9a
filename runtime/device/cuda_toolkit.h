/* The CUDA toolkit's run-time libraries, NVRTC and cuBLASLt, opened with
 * dlopen at first use, like the driver (cuda_driver.h): linked directly,
 * libcublasLt alone (half a gigabyte) made every tlm-run start 0.4 s
 * late, on the CPU too. Now a command that compiles no kernel loads no
 * NVRTC, and one that runs no GEMM no cuBLASLt.
 *
 * Each library is looked for first in the toolkit's library folder found
 * at build time (TLM_CUDA_LIB_DIR), then by its soname alone through the
 * loader's path (LD_LIBRARY_PATH, ld.so.cache), with the toolkit's major
 * version in the soname (libnvrtc.so.13 for CUDA 13): TLM_NVRTC_SONAME and
 * TLM_CUBLASLT_SONAME, set by runtime/CMakeLists.txt.
 *
 * nvrtc.h and cublasLt.h give the types and, through __typeof__, each
 * function's exact signature; every call goes through a pointer from
 * dlsym. Only when tlm is built with the toolkit (TLM_HAVE_CUDA). */
#ifndef TLM_CUDA_TOOLKIT_H
#define TLM_CUDA_TOOLKIT_H

#ifdef TLM_HAVE_CUDA

#include <cublasLt.h>
#include <nvrtc.h>

#include "errmsg.h"

/* X(name): every NVRTC function tlm calls. */
#define TLM_NVRTC_FUNCTIONS(X)   \
    X(nvrtcGetErrorString)       \
    X(nvrtcVersion)              \
    X(nvrtcGetNumSupportedArchs) \
    X(nvrtcGetSupportedArchs)    \
    X(nvrtcCreateProgram)        \
    X(nvrtcCompileProgram)       \
    X(nvrtcGetProgramLogSize)    \
    X(nvrtcGetProgramLog)        \
    X(nvrtcGetCUBINSize)         \
    X(nvrtcGetCUBIN)             \
    X(nvrtcDestroyProgram)

/* X(name): every cuBLASLt function tlm calls. */
#define TLM_CUBLASLT_FUNCTIONS(X)           \
    X(cublasLtGetVersion)                   \
    X(cublasLtGetStatusName)                \
    X(cublasLtGetStatusString)              \
    X(cublasLtCreate)                       \
    X(cublasLtDestroy)                      \
    X(cublasLtMatrixLayoutCreate)           \
    X(cublasLtMatrixLayoutDestroy)          \
    X(cublasLtMatrixLayoutSetAttribute)     \
    X(cublasLtMatmulDescCreate)             \
    X(cublasLtMatmulDescDestroy)            \
    X(cublasLtMatmulDescSetAttribute)       \
    X(cublasLtMatmulPreferenceCreate)       \
    X(cublasLtMatmulPreferenceDestroy)      \
    X(cublasLtMatmulPreferenceSetAttribute) \
    X(cublasLtMatmulAlgoGetHeuristic)       \
    X(cublasLtMatmul)

#define TLM_CUDA_TOOLKIT_MEMBER(name) __typeof__(name) *name;

typedef struct tlm_nvrtc_api {
    TLM_NVRTC_FUNCTIONS(TLM_CUDA_TOOLKIT_MEMBER)
} tlm_nvrtc_api;

typedef struct tlm_cublaslt_api {
    TLM_CUBLASLT_FUNCTIONS(TLM_CUDA_TOOLKIT_MEMBER)
} tlm_cublaslt_api;

#undef TLM_CUDA_TOOLKIT_MEMBER

/* The process's one table of each: opened and resolved by the first call,
 * from any thread; later calls return the same table, or the same failure
 * in one line, e.g. "cannot load libnvrtc.so.13 (...): --device cuda needs
 * the CUDA toolkit's NVRTC". err may be NULL. */
const tlm_nvrtc_api *tlm_nvrtc_api_get(tlm_err *err);
const tlm_cublaslt_api *tlm_cublaslt_api_get(tlm_err *err);

#endif
#endif
