/* CUDA C++ to CUBIN with NVRTC (opened at first use, cuda_toolkit.h; needs
 * no driver or GPU, so the tests compile every kernel source on any
 * machine with the toolkit).
 *
 * The CUBIN is for the device's exact architecture (--gpu-architecture=
 * sm_XY): the driver loads it as is, without the PTX JIT and without
 * "unsupported PTX version" on a driver older than the toolkit. Options:
 *   --gpu-architecture=sm_XY -std=c++17 -default-device -I<toolkit include>
 *   -lineinfo
 * and no --use_fast_math: the fp32 kernels are compared with the CPU ops to
 * 1e-5, which the approximate division and transcendentals would break.
 * Only when tlm is built with the toolkit (TLM_HAVE_CUDA). */
#ifndef TLM_NVRTC_COMPILE_H
#define TLM_NVRTC_COMPILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "errmsg.h"

/* Compiles source for arch ("sm_90") into a malloc'd CUBIN (*cubin, *size).
 * On a compile error: false, and err holds the first lines of NVRTC's log;
 * where NVRTC does not load, the line that says so. */
bool tlm_nvrtc_compile(const char *source, const char *arch, uint8_t **cubin, size_t *size, tlm_err *err);

/* ptxas's report for source on arch: NVRTC's log (malloc'd, never NULL on
 * success) after compiling it with tlm_nvrtc_compile's very options and
 * --ptxas-options=-v, which prints, for each kernel, "Compiling entry
 * function 'NAME' for 'sm_XY'", its stack frame and "N bytes spill stores,
 * M bytes spill loads", and "Used R registers". The verbose option changes
 * no instruction (the CUBINs differ only in the note that records the
 * options), so these are the figures of the code tlm runs. NULL with err as
 * tlm_nvrtc_compile fails. For gpu.spills. */
char *tlm_nvrtc_ptxas_report(const char *source, const char *arch, tlm_err *err);

/* "nvrtc 13.0": NVRTC's own version (nvrtcVersion), for the module cache
 * key; "nvrtc 0.0" where NVRTC does not load. */
const char *tlm_nvrtc_version(void);

/* The options tlm_nvrtc_compile passes for arch, as one space-separated
 * string (for the module cache key); writes at most len bytes. */
void tlm_nvrtc_options(const char *arch, char *buf, size_t len);

/* Whether this NVRTC can compile for arch (nvrtcGetSupportedArchs); false
 * where NVRTC does not load (tlm_nvrtc_api_get says why). */
bool tlm_nvrtc_supports(const char *arch);

#endif
