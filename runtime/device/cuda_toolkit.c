/* Opening NVRTC and cuBLASLt once per process (cuda_toolkit.h). */
#include "cuda_toolkit.h"

#ifdef TLM_HAVE_CUDA

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#if !defined(TLM_NVRTC_SONAME) || !defined(TLM_CUBLASLT_SONAME)
#error "TLM_NVRTC_SONAME and TLM_CUBLASLT_SONAME (libnvrtc.so.13, ...) are set by runtime/CMakeLists.txt"
#endif

/* dlopen's error for a library that is not there: anything else (a
 * missing dependency, a wrong architecture) is worth saying as is. */
static bool not_found(const char *why) { return !why || strstr(why, "cannot open shared object file"); }

/* The library soname, from the toolkit's folder or else the loader's path;
 * NULL with one line in err. what: "NVRTC" or "cuBLASLt". */
static void *open_library(const char *soname, const char *what, tlm_err *err) {
    char first[512] = "";
#ifdef TLM_CUDA_LIB_DIR
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", TLM_CUDA_LIB_DIR, soname);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib) return lib;
    const char *why = dlerror();
    snprintf(first, sizeof first, "%s", why ? why : "");
#endif
    void *plain = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (plain) return plain;
    const char *second = dlerror();
    if (first[0] && !not_found(first)) second = first;
    if (!second) second = "not found";
    tlm_fail(err, "cannot load %s (%s): --device cuda needs the CUDA toolkit's %s", soname, second, what);
    return NULL;
}

/* fn = dlsym(lib, name), or false with one line in err. The library stays
 * loaded either way, as the driver does (cuda_driver.c). */
static bool resolve(void *lib, const char *soname, const char *what, const char *name, void *fn, size_t size,
                    tlm_err *err) {
    dlerror();
    void *p = dlsym(lib, name);
    if (!p) {
        const char *why = dlerror();
        return tlm_fail(err, "cannot load %s (it has no %s: %s): --device cuda needs the CUDA toolkit's %s", soname,
                        name, why ? why : "a null symbol", what);
    }
    memcpy(fn, &p, size);
    return true;
}

#define TLM_TOOLKIT_RESOLVE(name) \
    if (!resolve(lib, soname, what, #name, &api->name, sizeof api->name, err)) return false;

/* ---- NVRTC */

static tlm_nvrtc_api nvrtc;
static bool nvrtc_ready;
static tlm_err nvrtc_failure;
static pthread_once_t nvrtc_once = PTHREAD_ONCE_INIT;

static bool open_nvrtc(tlm_nvrtc_api *api, tlm_err *err) {
    const char *soname = TLM_NVRTC_SONAME, *what = "NVRTC";
    void *lib = open_library(soname, what, err);
    if (!lib) return false;
    TLM_NVRTC_FUNCTIONS(TLM_TOOLKIT_RESOLVE)
    return true;
}

static void open_nvrtc_once(void) {
    tlm_nvrtc_api api;
    memset(&api, 0, sizeof api);
    nvrtc_ready = open_nvrtc(&api, &nvrtc_failure);
    if (nvrtc_ready) nvrtc = api;
}

const tlm_nvrtc_api *tlm_nvrtc_api_get(tlm_err *err) {
    pthread_once(&nvrtc_once, open_nvrtc_once);
    if (!nvrtc_ready) {
        tlm_fail(err, "%s", nvrtc_failure.msg);
        return NULL;
    }
    return &nvrtc;
}

/* ---- cuBLASLt */

static tlm_cublaslt_api cublaslt;
static bool cublaslt_ready;
static tlm_err cublaslt_failure;
static pthread_once_t cublaslt_once = PTHREAD_ONCE_INIT;

static bool open_cublaslt(tlm_cublaslt_api *api, tlm_err *err) {
    const char *soname = TLM_CUBLASLT_SONAME, *what = "cuBLASLt";
    void *lib = open_library(soname, what, err);
    if (!lib) return false;
    TLM_CUBLASLT_FUNCTIONS(TLM_TOOLKIT_RESOLVE)
    return true;
}

static void open_cublaslt_once(void) {
    tlm_cublaslt_api api;
    memset(&api, 0, sizeof api);
    cublaslt_ready = open_cublaslt(&api, &cublaslt_failure);
    if (cublaslt_ready) cublaslt = api;
}

const tlm_cublaslt_api *tlm_cublaslt_api_get(tlm_err *err) {
    pthread_once(&cublaslt_once, open_cublaslt_once);
    if (!cublaslt_ready) {
        tlm_fail(err, "%s", cublaslt_failure.msg);
        return NULL;
    }
    return &cublaslt;
}

#undef TLM_TOOLKIT_RESOLVE

#else
/* Built without the CUDA toolkit: device_cuda.c reports it; nothing here. */
typedef int tlm_cuda_toolkit_unused;
#endif
