/* Opening the CUDA driver once per process (cuda_driver.h). */
#include "cuda_driver.h"

#ifdef TLM_HAVE_CUDA

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char NO_DRIVER[] =
    "no CUDA driver (libcuda.so.1 not found): --device cuda needs an NVIDIA GPU and its driver";

static tlm_cuda_driver driver;
static bool driver_ready;
static tlm_err driver_failure;
static pthread_once_t driver_once = PTHREAD_ONCE_INIT;

static bool open_driver(tlm_cuda_driver *drv, tlm_err *err) {
    /* Only the real driver's soname: the toolkit's lib64/stubs/libcuda.so
     * loads but fails every call, which would hide the real problem. */
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        if (!why || strstr(why, "cannot open shared object file")) return tlm_fail(err, "%s", NO_DRIVER);
        return tlm_fail(err, "the CUDA driver libcuda.so.1 could not be loaded: %s", why);
    }
    PFN_cuGetProcAddress_v12000 get_proc = (PFN_cuGetProcAddress_v12000)dlsym(lib, "cuGetProcAddress_v2");
    if (!get_proc) {
        /* The library stays loaded: unloading a driver mid-process is not
         * worth the risk for a one-off failure. */
        return tlm_fail(err, "the CUDA driver is too old: libcuda.so.1 has no cuGetProcAddress_v2 (tlm needs the "
                             "driver of CUDA 12.0 or later)");
    }
#define TLM_CUDA_DRIVER_RESOLVE(name, signature)                                                                 \
    {                                                                                                            \
        CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;                             \
        void *fn = NULL;                                                                                         \
        CUresult r = get_proc(#name, &fn, TLM_CUDA_DRIVER_ABI, CU_GET_PROC_ADDRESS_DEFAULT, &found);             \
        if (r != CUDA_SUCCESS || found != CU_GET_PROC_ADDRESS_SUCCESS || !fn)                                    \
            return tlm_fail(err, "the CUDA driver has no %s for the CUDA 12.0 ABI (error %d, lookup status %d)", \
                            #name, (int)r, (int)found);                                                          \
        memcpy(&drv->name, &fn, sizeof fn);                                                                      \
    }
    TLM_CUDA_DRIVER_FUNCTIONS(TLM_CUDA_DRIVER_RESOLVE)
#undef TLM_CUDA_DRIVER_RESOLVE

    CUresult r = drv->cuInit(0);
    if (r == CUDA_ERROR_NO_DEVICE)
        return tlm_fail(err, "no CUDA device: the NVIDIA driver is installed but sees no GPU (CUDA_ERROR_NO_DEVICE)");
    if (!tlm_cuda_ok(drv, r, err, "cuInit: the CUDA driver could not start")) return false;
    return tlm_cuda_ok(drv, drv->cuDriverGetVersion(&drv->version), err, "cuDriverGetVersion");
}

static void open_driver_once(void) {
    tlm_cuda_driver drv;
    memset(&drv, 0, sizeof drv);
    driver_ready = open_driver(&drv, &driver_failure);
    if (driver_ready) driver = drv;
}

const tlm_cuda_driver *tlm_cuda_driver_get(tlm_err *err) {
    pthread_once(&driver_once, open_driver_once);
    if (!driver_ready) {
        tlm_fail(err, "%s", driver_failure.msg);
        return NULL;
    }
    return &driver;
}

bool tlm_cuda_ok(const tlm_cuda_driver *drv, CUresult r, tlm_err *err, const char *fmt, ...) {
    if (r == CUDA_SUCCESS) return true;
    char context[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(context, sizeof context, fmt, ap);
    va_end(ap);
    const char *name = NULL, *text = NULL;
    if (drv && drv->cuGetErrorName && drv->cuGetErrorName(r, &name) != CUDA_SUCCESS) name = NULL;
    if (drv && drv->cuGetErrorString && drv->cuGetErrorString(r, &text) != CUDA_SUCCESS) text = NULL;
    if (!name) return tlm_fail(err, "%s: CUDA error %d", context, (int)r);
    return tlm_fail(err, "%s: %s (%s)", context, name, text ? text : "no description");
}

#else
/* Built without the CUDA toolkit: device_cuda.c reports it; nothing here. */
typedef int tlm_cuda_driver_unused;
#endif
